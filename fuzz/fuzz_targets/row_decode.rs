//! Decoding what a database column may hold, on arbitrary bytes: the stored time, the status
//! columns and the JSON shapes of steps, runs, approvals and tool specs (spec 9).
//!
//! Properties: nothing panics; a time that parses formats back to text that parses to the same
//! instant (when its year has four digits); a status survives `parse` then `as_str`; a decoded
//! shape re-encodes as Go JSON without panicking.
#![no_main]

use countersign::runtime::types::{
    ApprovalStatus, Decision, Limits, Observation, PolicyDecision, RunStatus, StepStatus,
    Timestamp, ToolRequest, ToolSpec,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(t) = Timestamp::parse(&text) {
        let back = t.format_always();
        let four_digit_year = back.as_bytes().get(4) == Some(&b'-')
            && back.as_bytes()[..4].iter().all(u8::is_ascii_digit);
        if four_digit_year {
            assert_eq!(
                Timestamp::parse(&back),
                Ok(t),
                "time {text:?} -> {back:?} does not round-trip"
            );
        }
        let _ = t.to_rfc3339();
        let _ = t.add_nanos(i64::MAX);
        let _ = t.sub(&Timestamp::ZERO);
        let _ = t.unix_nanos();
    }
    assert_eq!(RunStatus::parse(&text).as_str(), text);
    assert_eq!(StepStatus::parse(&text).as_str(), text);
    assert_eq!(ApprovalStatus::parse(&text).as_str(), text);
    let _ = Limits::from_json(data).map(|l| l.to_go_json());
    let _ = Decision::from_json(data).map(|d| d.to_go_json());
    let _ = PolicyDecision::from_json(data).map(|p| p.to_go_json());
    let _ = Observation::from_json(data).map(|o| (o.to_go_json(), o.is_failure()));
    let _ = ToolSpec::from_json(data).map(|s| (s.to_go_json(), s.spec_hash()));
    let _ = ToolRequest::from_json(data).map(|r| r.to_go_json());
});
