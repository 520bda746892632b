//! Contract tests: every tool has both halves, the schemas are closed and anchored, and the
//! model-facing view is the reviewed one (a change to it changes the model's input: a release).

use countersign::consumer::tools::{Catalog, EffectClass, TOOL_NAMES};
use serde_json::{Value, json};

fn catalog() -> Catalog {
    Catalog::new().expect("catalog compiles")
}

#[test]
fn every_tool_has_both_halves_and_a_closed_schema() {
    let c = catalog();
    let names: Vec<&str> = c.contracts().map(|t| t.name).collect();
    assert_eq!(names, TOOL_NAMES);
    for t in c.contracts() {
        assert!(!t.description.is_empty());
        let s = &t.input_schema;
        assert_eq!(s["type"], "object", "{}", t.name);
        assert_eq!(s["additionalProperties"], false, "{}", t.name);
        let props: Vec<&String> = s["properties"].as_object().unwrap().keys().collect();
        let required: Vec<&str> = s["required"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(props, required, "{}: every property is required", t.name);
        for (name, sub) in s["properties"].as_object().unwrap() {
            if let Some(p) = sub.get("pattern").and_then(Value::as_str) {
                assert!(
                    p.starts_with('^') && p.ends_with('$'),
                    "{}.{name} pattern is anchored",
                    t.name
                );
            }
            assert!(
                !["customer_id", "user_id", "to", "email", "recipient"].contains(&name.as_str())
            );
        }
        assert!(["orders:read", "refunds:write", "orders:write", "email:send"].contains(&t.scope));
    }
    let effects: Vec<EffectClass> = c.contracts().map(|t| t.effect).collect();
    assert_eq!(
        effects,
        [
            EffectClass::Read,
            EffectClass::IrreversibleWrite,
            EffectClass::ReversibleWrite,
            EffectClass::IrreversibleWrite
        ]
    );
}

#[test]
fn model_view_of_issue_refund_is_the_reviewed_one() {
    let c = catalog();
    let view = c.get("issue_refund").unwrap().model_view();
    let reviewed = json!({
        "name": "issue_refund",
        "description": "Refund part or all of a delivered order to the original payment method.",
        "input_schema": {
            "type": "object",
            "properties": {
                "order_id": {"type": "string", "pattern": "^ord_[0-9]{4,8}$"},
                "amount_cents": {"type": "integer", "minimum": 1, "maximum": 100000},
                "reason": {"type": "string", "enum": ["damaged", "not_as_described", "late", "other"]}
            },
            "required": ["order_id", "amount_cents", "reason"],
            "additionalProperties": false
        }
    });
    assert_eq!(
        serde_json::to_string_pretty(&view).unwrap(),
        serde_json::to_string_pretty(&reviewed).unwrap()
    );
    let keys: Vec<&String> = view.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["name", "description", "input_schema"],
        "nothing of the runtime-only half leaks"
    );
}

#[test]
fn admission_schema_keeps_the_shape_and_leaves_string_rules_to_stage_four() {
    let c = catalog();
    let a = c.get("update_shipping_address").unwrap().admission_schema();
    assert_eq!(a["additionalProperties"], false);
    assert_eq!(a["properties"]["postal_code"], json!({"type": "string"}));
    let r = c.get("issue_refund").unwrap().admission_schema();
    assert_eq!(
        r["properties"]["amount_cents"],
        json!({"type": "integer", "minimum": 1, "maximum": 100000})
    );
    assert_eq!(r["properties"]["reason"], json!({"type": "string"}));
}
