//! The JSON boundary check and the canonical encoder on arbitrary bytes.
//!
//! Properties: nothing panics; whatever `check_json` accepts, `canonical_json` is idempotent
//! on and `policy_json` encodes; `checked_canonical_json` agrees with `canonical_json` there.
#![no_main]

use countersign::runtime::{canonical_json, check_json, checked_canonical_json, policy_json};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let once = canonical_json(data);
    let _ = countersign::runtime::content_hash(data);
    let _ = countersign::runtime::policy_form_unchecked(data);
    if check_json(data).is_ok() {
        let twice = canonical_json(&once);
        assert_eq!(
            twice, once,
            "canonical_json is not idempotent on accepted input"
        );
        let checked = checked_canonical_json(data)
            .expect("check_json accepted but checked_canonical_json refused");
        assert_eq!(
            checked, once,
            "checked_canonical_json disagrees with canonical_json"
        );
        policy_json(data).expect("check_json accepted but policy_json refused");
    }
});
