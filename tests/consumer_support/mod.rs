//! Shared set-up for the consumer's tests: a fresh seeded backend and a dispatcher over it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;

use countersign::consumer::backend::Backend;
use countersign::consumer::dispatch::{Dispatcher, DispatcherOptions};
use countersign::consumer::policy::ConsequencePolicy;
use countersign::consumer::tools::Catalog;
use serde_json::{Value, json};

/// `<manifest>/../shared` in the final layout, else `/work/shared`.
pub fn shared_dir() -> PathBuf {
    let up = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if up.is_dir() {
        up
    } else {
        PathBuf::from("/work/shared")
    }
}

pub fn fresh_with(options: DispatcherOptions) -> (Arc<Backend>, Dispatcher) {
    let backend = Arc::new(Backend::in_memory().expect("in-memory backend"));
    let catalog = Arc::new(Catalog::new().expect("catalog compiles"));
    let d = Dispatcher::new(
        catalog,
        backend.clone(),
        ConsequencePolicy::default(),
        options,
    );
    (backend, d)
}

pub fn fresh() -> (Arc<Backend>, Dispatcher) {
    fresh_with(DispatcherOptions::default())
}

/// Refund arguments for Ana's delivered order, with overrides.
pub fn refund(overrides: Value) -> Value {
    let mut v = json!({"order_id": "ord_1001", "amount_cents": 3000, "reason": "damaged"});
    if let (Some(m), Some(o)) = (v.as_object_mut(), overrides.as_object()) {
        for (k, x) in o {
            m.insert(k.clone(), x.clone());
        }
    }
    v
}

pub fn address(order: &str, line1: &str, postal: &str) -> Value {
    json!({"order_id": order, "line1": line1, "postal_code": postal})
}
