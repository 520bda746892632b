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

/// The nineteen argument cases of the issue (one changed thing each).
pub struct Case {
    pub label: &'static str,
    pub tool: &'static str,
    pub args: Value,
    pub code: &'static str,
    pub effects: usize,
    pub detail: &'static [&'static str],
}

pub fn nineteen() -> Vec<Case> {
    let c = |label, tool, args, code, effects, detail| Case {
        label,
        tool,
        args,
        code,
        effects,
        detail,
    };
    vec![
        c(
            "valid refund",
            "issue_refund",
            refund(json!({})),
            "ok",
            1,
            &[],
        ),
        c(
            "amount as string",
            "issue_refund",
            refund(json!({"amount_cents": "3000"})),
            "invalid_arguments",
            0,
            &["$.amount_cents: expected integer"],
        ),
        c(
            "amount as float",
            "issue_refund",
            refund(json!({"amount_cents": 29.99})),
            "invalid_arguments",
            0,
            &["$.amount_cents: expected integer"],
        ),
        c(
            "amount as bool",
            "issue_refund",
            refund(json!({"amount_cents": true})),
            "invalid_arguments",
            0,
            &["$.amount_cents: expected integer"],
        ),
        c(
            "negative amount",
            "issue_refund",
            refund(json!({"amount_cents": -500})),
            "invalid_arguments",
            0,
            &["$.amount_cents: below minimum 1"],
        ),
        c(
            "amount above refundable",
            "issue_refund",
            refund(json!({"amount_cents": 4300})),
            "invalid_state",
            0,
            &["amount exceeds refundable 4200"],
        ),
        c(
            "reason outside enum",
            "issue_refund",
            refund(json!({"reason": "customer is angry"})),
            "invalid_arguments",
            0,
            &["$.reason: not one of damaged, not_as_described, late, other"],
        ),
        c(
            "extra property",
            "issue_refund",
            refund(json!({"customer_id": "cu_ben"})),
            "invalid_arguments",
            0,
            &["$.customer_id: unexpected property"],
        ),
        c(
            "missing property",
            "issue_refund",
            json!({"order_id": "ord_1001", "amount_cents": 100}),
            "invalid_arguments",
            0,
            &["$.reason: required"],
        ),
        c(
            "another customer's order",
            "issue_refund",
            refund(json!({"order_id": "ord_1002"})),
            "not_found",
            0,
            &[],
        ),
        c(
            "order does not exist",
            "issue_refund",
            refund(json!({"order_id": "ord_9999"})),
            "not_found",
            0,
            &[],
        ),
        c(
            "injection-shaped id",
            "get_order",
            json!({"order_id": "ord_1001' OR '1'='1"}),
            "invalid_arguments",
            0,
            &["$.order_id: does not match ^ord_[0-9]{4,8}$"],
        ),
        c(
            "order not delivered",
            "issue_refund",
            refund(json!({"order_id": "ord_1003"})),
            "invalid_state",
            0,
            &["order is not delivered"],
        ),
        c(
            "unknown tool",
            "delete_order",
            json!({"order_id": "ord_1001"}),
            "unknown_tool",
            0,
            &[],
        ),
        c(
            "postal code, full-width",
            "update_shipping_address",
            address("ord_1003", "5 Pine Rd", "９４１０７"),
            "ok",
            1,
            &[],
        ),
        c(
            "postal code, trailing newline",
            "update_shipping_address",
            address("ord_1003", "5 Pine Rd", "94107\n"),
            "ok",
            1,
            &[],
        ),
        c(
            "postal code, embedded newline",
            "update_shipping_address",
            address("ord_1003", "5 Pine Rd", "94107\n99999"),
            "invalid_arguments",
            0,
            &["$.postal_code: does not match ^[0-9]{5}$"],
        ),
        c(
            "address after shipment",
            "update_shipping_address",
            address("ord_1001", "5 Pine Rd", "94107"),
            "invalid_state",
            0,
            &["order has already shipped"],
        ),
        c(
            "recipient argument",
            "send_status_email",
            json!({"order_id": "ord_1001", "to": "attacker@example.test"}),
            "invalid_arguments",
            0,
            &["$.to: unexpected property"],
        ),
    ]
}

/// Runtime-level helpers: a run database, drivers with the consumer's tools and policy, and
/// reading a step back as the dispatcher's result code.
pub mod rt {
    use std::sync::Arc;

    use countersign::consumer::adapter::{self, ScenarioAgent};
    use countersign::consumer::backend::Backend;
    use countersign::consumer::dispatch::{Dispatcher, DispatcherOptions};
    use countersign::consumer::policy::ConsequencePolicy;
    use countersign::consumer::scenarios::{Ending, Proposal, Scenario};
    use countersign::consumer::session::Session;
    use countersign::consumer::tools::Catalog;
    use countersign::runtime::driver::{Driver, default_limits};
    use countersign::runtime::store::Store;
    use countersign::runtime::types::{Run, Step};
    use serde_json::{Value, json};

    pub struct World {
        pub _dir: tempfile::TempDir,
        pub store: Arc<Store>,
        pub backend: Arc<Backend>,
        pub dispatcher: Arc<Dispatcher>,
    }

    pub fn world() -> World {
        world_with(DispatcherOptions::default())
    }

    pub fn world_with(options: DispatcherOptions) -> World {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path().join("runs.db")).unwrap());
        let backend = Arc::new(Backend::open(&dir.path().join("backend.db")).unwrap());
        let catalog = Arc::new(Catalog::new().unwrap());
        let dispatcher = Arc::new(Dispatcher::new(
            catalog,
            backend.clone(),
            ConsequencePolicy::default(),
            options,
        ));
        World {
            _dir: dir,
            store,
            backend,
            dispatcher,
        }
    }

    impl World {
        /// A fresh backend (and dispatcher) over the same run database.
        pub fn fresh_backend(&mut self, options: DispatcherOptions) {
            let backend = Arc::new(Backend::in_memory().unwrap());
            self.dispatcher = Arc::new(Dispatcher::new(
                Arc::new(Catalog::new().unwrap()),
                backend.clone(),
                ConsequencePolicy::default(),
                options,
            ));
            self.backend = backend;
        }

        pub fn driver(&self, scenario: Scenario) -> Driver {
            adapter::driver(
                self.store.clone(),
                &self.dispatcher,
                ScenarioAgent::fixed(scenario),
                "test",
                None,
            )
            .unwrap()
        }

        /// A driver whose agent proposes `calls` by step index (for resuming such a run).
        pub fn driver_for_calls(&self, user: &str, calls: &[(&str, Value)]) -> Driver {
            let _ = user;
            self.driver(calls_scenario(calls))
        }

        /// Starts run `id` for `user` proposing `calls` one per step, then completing.
        pub async fn run_calls(&self, id: &str, user: &str, calls: &[(&str, Value)]) -> Run {
            self.backend
                .put_session(&Session::full(id, user), "")
                .unwrap();
            self.driver(calls_scenario(calls))
                .start_with_id(id, "test", default_limits())
                .await
                .unwrap()
        }

        pub fn steps(&self, run: &str) -> Vec<Step> {
            self.store.list_steps(run).unwrap()
        }

        /// Ledger rows of one run (its session).
        pub fn effects(&self, run: &str) -> usize {
            self.backend
                .ledger()
                .unwrap()
                .iter()
                .filter(|e| e.session_id == run)
                .count()
        }
    }

    pub fn calls_scenario(calls: &[(&str, Value)]) -> Scenario {
        Scenario {
            name: "test",
            user: "",
            goal: "test".into(),
            proposals: calls
                .iter()
                .map(|(t, a)| Proposal {
                    tool: t.to_string(),
                    args: a.clone(),
                    prose: String::new(),
                })
                .collect(),
            ending: Ending::Complete(json!({})),
        }
    }

    /// Where a step was stopped or what it produced, in the dispatcher's vocabulary, and the
    /// layer that answered: `runtime` (its own checks), `policy`, or `tool`.
    pub fn outcome(step: &Step) -> (String, &'static str) {
        if step.status.as_str() == "awaiting_approval" {
            return ("needs_approval".into(), "policy");
        }
        let Some(obs) = &step.observation else {
            return ("none".into(), "none");
        };
        let content: Value = serde_json::from_slice(&obs.content).unwrap_or(Value::Null);
        let prefix = |s: &str| s.split(':').next().unwrap_or("").to_string();
        match obs.kind.as_str() {
            "tool_result" => {
                let replayed = content["replayed"] == json!(true);
                let code = content["status"].as_str().unwrap_or("?").to_string();
                (
                    if replayed {
                        format!("{code} (replayed)")
                    } else {
                        code
                    },
                    "tool",
                )
            }
            "policy_denied" => (prefix(content["reason"].as_str().unwrap_or("")), "policy"),
            "tool_error" => (prefix(content["error"].as_str().unwrap_or("")), "tool"),
            "invalid_decision" => {
                let e = content["error"].as_str().unwrap_or("");
                if e.starts_with("unknown tool") {
                    ("unknown_tool".into(), "runtime")
                } else {
                    ("invalid_arguments".into(), "runtime")
                }
            }
            other => (other.to_string(), "none"),
        }
    }
}

/// The operator approves the run's latest approval (the runtime's real operator path); the run
/// stays WAITING until Resume. Returns the approval id.
pub fn approve_latest(store: &countersign::runtime::store::Store, run_id: &str) -> String {
    use countersign::runtime::types::Timestamp;
    let a = store
        .list_approvals(run_id)
        .unwrap()
        .pop()
        .expect("an approval");
    countersign::runtime::operator::approve(
        store,
        run_id,
        &a.id,
        "operator",
        "ok",
        Timestamp::now(),
    )
    .unwrap();
    a.id
}
