//! Tool input schemas: compiled once at registration, checked against every argument document
//! (spec 3.5 step 5, 8.2 step 7).
//!
//! Choices where the spec is silent for a Rust port:
//! - The jsonschema crate is built without remote or file resolution, and registration refuses
//!   any `$ref`/`$dynamicRef`/`$recursiveRef` that does not point inside the schema itself
//!   (`#...`), so nothing is ever fetched and no schema depends on something outside it.
//! - serde_json (without arbitrary precision) cannot hold a number such as `1e400` that passes
//!   the boundary check (its exponent is within ±10000). Arguments holding one are refused as
//!   an invalid decision ("arguments cannot be checked against the schema: ...") rather than
//!   validated approximately; Go's decoder refuses the same numbers.
//! - A panic inside the validation library is caught and becomes a refusal, never a crash.
//! - The validation library compares numbers as doubles. Where a schema compares numbers (a
//!   bound, `multipleOf`, `const`, `enum`), arguments holding a number written with more
//!   significant digits than a double holds (`10.0000000000000000001`, which would pass
//!   `maximum: 10` while the tool is handed the literal) are refused as an invalid decision,
//!   never judged on a rounded value. Integers within 64 bits are exact already.

mod exact;

use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::Value;
use thiserror::Error;

/// Why a schema could not be compiled at registration.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SchemaError {
    /// The schema is empty or only whitespace.
    #[error("the input schema is empty")]
    Empty,
    /// The schema fails the boundary check (spec 5.2) or does not parse; holds the reason.
    #[error("the input schema is not usable JSON: {0}")]
    NotJson(String),
    /// A `$ref`, `$dynamicRef` or `$recursiveRef` that does not start with `#`; holds it.
    #[error("the input schema refers outside itself ({0:?}); only \"#...\" references are allowed")]
    ExternalRef(String),
    /// The validator refused to build from the schema (or panicked trying); holds its message.
    #[error("the input schema is not a valid JSON Schema: {0}")]
    Invalid(String),
}

/// A compiled input schema.
pub struct Schema {
    validator: jsonschema::Validator,
    /// The schema compares numbers (a bound, `multipleOf`, `const` or `enum`): arguments
    /// holding a number a double does not hold exactly are then refused (see [`exact`]).
    compares_numbers: bool,
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Schema")
    }
}

impl Schema {
    /// Compiles a raw schema. Refuses what the boundary check refuses on depth and numbers, a
    /// schema that is not one JSON value, and references outside the document.
    pub fn compile(raw: &[u8]) -> Result<Schema, SchemaError> {
        if raw.iter().all(|b| b.is_ascii_whitespace()) {
            return Err(SchemaError::Empty);
        }
        if let Err(e) = crate::runtime::json::check_json(raw) {
            // A schema may legitimately repeat nothing and escape nothing odd; anything the
            // boundary refuses is refused here too.
            return Err(SchemaError::NotJson(e.to_string()));
        }
        let value = decode_within_depth(raw).map_err(SchemaError::NotJson)?;
        if let Some(r) = external_ref(&value) {
            return Err(SchemaError::ExternalRef(r));
        }
        let built = catch_unwind(AssertUnwindSafe(|| jsonschema::validator_for(&value)));
        match built {
            Ok(Ok(validator)) => Ok(Schema {
                validator,
                compares_numbers: exact::compares_numbers(&value),
            }),
            Ok(Err(e)) => Err(SchemaError::Invalid(e.to_string())),
            Err(_) => Err(SchemaError::Invalid(
                "the schema library panicked while compiling it".into(),
            )),
        }
    }

    /// Checks arguments (already through the boundary check) against the schema. The error is
    /// the sentence an invalid decision records.
    pub fn check(&self, args: &[u8]) -> Result<(), String> {
        let value = match decode_within_depth(args) {
            Ok(v) => v,
            Err(e) => {
                return Err(format!(
                    "arguments cannot be checked against the schema: {e}"
                ));
            }
        };
        if self.compares_numbers
            && let Some(n) = exact::inexact_number(args)
        {
            return Err(format!(
                "arguments cannot be checked against the schema: number {} has more significant \
                 digits than a double holds, so the schema cannot compare it exactly",
                n.chars().take(40).collect::<String>()
            ));
        }
        let res = catch_unwind(AssertUnwindSafe(|| {
            self.validator
                .validate(&value)
                .map_err(|e| format!("arguments do not match schema: {e}"))
        }));
        match res {
            Ok(r) => r,
            Err(_) => Err(
                "arguments cannot be checked against the schema: the schema library panicked"
                    .into(),
            ),
        }
    }
}

/// Decodes one JSON value nested as deep as the boundary check allows (256 levels; serde's
/// own limit of 128 would refuse what agentrt accepts), refusing deeper input before decoding.
fn decode_within_depth(raw: &[u8]) -> Result<Value, String> {
    crate::runtime::json::depth_within_bound(raw).map_err(|e| e.to_string())?;
    let mut de = serde_json::Deserializer::from_slice(raw);
    de.disable_recursion_limit();
    let value = <Value as serde::Deserialize>::deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(value)
}

/// The first reference keyword in `v` whose target is outside the document.
fn external_ref(v: &Value) -> Option<String> {
    match v {
        Value::Object(m) => {
            for (k, val) in m {
                if matches!(k.as_str(), "$ref" | "$dynamicRef" | "$recursiveRef")
                    && let Value::String(s) = val
                    && !s.starts_with('#')
                {
                    return Some(s.clone());
                }
                if let Some(r) = external_ref(val) {
                    return Some(r);
                }
            }
            None
        }
        Value::Array(a) => a.iter().find_map(external_ref),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_refuses_references_outside_itself() {
        for s in [
            r#"{"$ref":"https://example.com/s.json"}"#,
            r#"{"properties":{"a":{"$ref":"file:///etc/passwd"}}}"#,
            r#"{"allOf":[{"$ref":"other.json#/x"}]}"#,
        ] {
            assert!(
                matches!(
                    Schema::compile(s.as_bytes()),
                    Err(SchemaError::ExternalRef(_))
                ),
                "{s}"
            );
        }
        let local = r##"{"$defs":{"n":{"type":"integer"}},"type":"object","properties":{"a":{"$ref":"#/$defs/n"}}}"##;
        let s = Schema::compile(local.as_bytes()).unwrap();
        assert!(s.check(br#"{"a":1}"#).is_ok());
        assert!(s.check(br#"{"a":"x"}"#).is_err());
    }

    #[test]
    fn schema_refuses_empty_and_malformed() {
        assert_eq!(Schema::compile(b"  ").unwrap_err(), SchemaError::Empty);
        assert!(matches!(
            Schema::compile(b"{"),
            Err(SchemaError::NotJson(_))
        ));
        assert!(matches!(
            Schema::compile(br#"{"type":12}"#),
            Err(SchemaError::Invalid(_))
        ));
    }

    #[test]
    fn check_args_refuses_numbers_past_float_range() {
        let s = Schema::compile(br#"{"type":"object"}"#).unwrap();
        let e = s.check(br#"{"n":1e400}"#).unwrap_err();
        assert!(e.starts_with("arguments cannot be checked"), "{e}");
        assert!(s.check(br#"{"n":1e300}"#).is_ok());
    }

    /// Bounds are never judged on a rounded value (found from outside:
    /// `10.0000000000000000001` passed `maximum: 10`, and the tool got the literal): where the
    /// schema compares numbers, a number a double does not hold exactly is refused.
    #[test]
    fn number_bounds_are_never_judged_on_a_rounded_value() {
        let s = Schema::compile(
            br#"{"type":"object","properties":{"n":{"maximum":10},"m":{"exclusiveMinimum":9007199254740992},"c":{"multipleOf":0.01}}}"#,
        )
        .unwrap();
        for ok in [
            r#"{"n":10}"#,
            r#"{"n":10.0}"#,
            r#"{"n":-1e300}"#,
            r#"{"m":9007199254740993}"#,
            r#"{"c":0.07}"#,
            r#"{"c":1234.56}"#,
        ] {
            assert_eq!(s.check(ok.as_bytes()), Ok(()), "{ok}");
        }
        for out in [
            r#"{"n":10.5}"#,
            r#"{"m":9007199254740992}"#,
            r#"{"c":0.071}"#,
        ] {
            let e = s.check(out.as_bytes()).unwrap_err();
            assert!(e.starts_with("arguments do not match schema"), "{out}: {e}");
        }
        for inexact in [
            r#"{"n":10.0000000000000000001}"#,
            r#"{"n":9.99999999999999999999}"#,
            r#"{"other":1.00000000000000000001}"#,
            r#"{"m":18446744073709551617}"#,
        ] {
            let e = s.check(inexact.as_bytes()).unwrap_err();
            assert!(
                e.contains("more significant digits than a double holds"),
                "{inexact}: {e}"
            );
        }
        // A schema that compares no number leaves such a number to the tool, as agentrt does.
        let plain = Schema::compile(br#"{"type":"object"}"#).unwrap();
        assert_eq!(plain.check(br#"{"n":10.0000000000000000001}"#), Ok(()));
    }

    /// What the boundary check accepts (256 levels) is checked against the schema, not
    /// refused at serde's 128 (found from outside: 129 levels were an invalid decision naming
    /// serde's "recursion limit exceeded"); deeper input is refused before decoding.
    #[test]
    fn arguments_and_schemas_as_deep_as_the_boundary_allows_are_checked() {
        let nest = |n: usize, leaf: &str| format!("{}{leaf}{}", "[".repeat(n), "]".repeat(n));
        let any = Schema::compile(b"{}").unwrap();
        for n in [129, 200, 255] {
            let args = nest(n, "1");
            assert!(crate::runtime::json::check_json(args.as_bytes()).is_ok());
            assert_eq!(any.check(args.as_bytes()), Ok(()), "{n} levels");
        }
        let e = any.check(nest(257, "1").as_bytes()).unwrap_err();
        assert!(e.contains("nested deeper than 256 levels"), "{e}");
        // A schema nested 250 levels deep, and arguments as deep judged against it.
        let mut schema = String::from(r#"{"type":"integer","maximum":3}"#);
        let mut ok = String::from("3");
        let mut bad = String::from("4");
        for _ in 0..124 {
            schema = format!(r#"{{"type":"object","properties":{{"a":{schema}}}}}"#);
            ok = format!(r#"{{"a":{ok}}}"#);
            bad = format!(r#"{{"a":{bad}}}"#);
        }
        let deep = Schema::compile(schema.as_bytes()).unwrap();
        assert_eq!(deep.check(ok.as_bytes()), Ok(()));
        let e = deep.check(bad.as_bytes()).unwrap_err();
        assert!(e.starts_with("arguments do not match schema"), "{e}");
        let nots = format!("{}{{}}{}", r#"{"not":"#.repeat(200), "}".repeat(200));
        assert!(Schema::compile(nots.as_bytes()).is_ok());
    }
}
