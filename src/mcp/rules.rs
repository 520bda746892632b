//! The per-tool checks of a load (agentrt mcp 1.9 `build`, 1.10-1.12): pin match, hints that
//! can only refuse, a schema that stays inside itself, parameters that can be hidden soundly,
//! and the runtime's own registration check. First failure wins; the reasons are agentrt's.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;
use serde_json::value::RawValue;

use super::canonical::{canonical_schema, description_hash, raw_object, schema_hash};
use super::config::{Rule, is_name};
use super::manifest::{Annotations, PinnedTool};
use crate::runtime::tools::{FnTool, Registry, SideEffect, ToolDef, ToolError};

/// A tool as the server lists it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveTool {
    pub name: String,
    pub description: String,
    pub annotations: Option<Annotations>,
    /// The canonical form of the schema bytes the server sent.
    pub input_schema: Vec<u8>,
}

/// A tool that passed every check: what the runtime registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    /// The server's own name for it.
    pub tool: String,
    /// The model-visible name.
    pub name: String,
    pub description: String,
    /// The pinned schema minus hidden parameters, canonical.
    pub input_schema: Vec<u8>,
    pub side_effect: String,
    pub timeout: Duration,
    pub deny: Vec<String>,
    pub fixed: BTreeMap<String, Vec<u8>>,
    /// Why the hints contradict the rule, when the rule allows it anyway.
    pub hint_mismatch: Option<String>,
}

/// Checks one pinned tool against the live listing and its rule.
pub fn build(
    server: &str,
    pinned: &PinnedTool,
    live: Option<&LiveTool>,
    rule: &Rule,
    default_timeout: Option<Duration>,
) -> Result<Built, String> {
    let Some(live) = live else {
        return Err("the server no longer offers it".into());
    };
    if schema_hash(&live.input_schema) != pinned.schema_hash {
        return Err("the input schema changed since the pin".into());
    }
    if description_hash(&live.description) != pinned.description_hash {
        return Err(
            "the description changed since the pin, and a description is model input".into(),
        );
    }
    let mut hint_mismatch = hint_mismatch_of(&rule.side_effect, pinned.annotations.as_ref());
    if hint_mismatch.is_none() {
        hint_mismatch = hint_mismatch_of(&rule.side_effect, live.annotations.as_ref())
            .map(|t| format!("the server now says: {t}"));
    }
    if let Some(m) = &hint_mismatch
        && !rule.allow_hint_mismatch
    {
        return Err(m.clone());
    }
    let Some(timeout) = rule.timeout.or(default_timeout) else {
        return Err("no timeout: set Rule.Timeout or Server.DefaultTimeout".into());
    };
    let name = rule
        .rename
        .clone()
        .unwrap_or_else(|| format!("{server}_{}", pinned.name));
    if !is_name(&name, 64) {
        return Err(format!(
            "the name {} does not match ^[a-zA-Z0-9_-]{{1,64}}$",
            super::quote(&name)
        ));
    }
    let top: BTreeMap<String, Box<RawValue>> = serde_json::from_slice(&pinned.input_schema)
        .map_err(|_| "the input schema is not a JSON object".to_string())?;
    if top.get("type").map(|t| t.get()) != Some("\"object\"") {
        return Err("the input schema is not an object schema (\"type\":\"object\")".into());
    }
    let tree: Value = serde_json::from_slice(&pinned.input_schema)
        .map_err(|_| "the input schema is not JSON".to_string())?;
    self_contained(&tree)?;
    for (p, v) in &rule.fixed {
        if crate::runtime::json::check_json(v).is_err() {
            return Err(format!(
                "the fixed value for {} is not valid JSON",
                super::quote(p)
            ));
        }
    }
    let mut hidden: Vec<String> = rule.deny.iter().chain(rule.fixed.keys()).cloned().collect();
    hidden.sort();
    hidden.dedup();
    hideable(&tree, &hidden)?;
    let input_schema = restrict(top, &hidden)
        .map_err(|e| format!("the input schema cannot be restricted: {e}"))?;
    let description = rule
        .description
        .clone()
        .unwrap_or_else(|| pinned.description.clone());
    let def = ToolDef {
        name: name.clone(),
        description: description.clone(),
        input_schema: input_schema.clone(),
        side_effect: SideEffect::parse(&rule.side_effect),
        timeout,
        terminal: true,
    };
    Registry::new()
        .register(FnTool::new(def, |_| {
            Box::pin(async { Err(ToolError::Failed("not callable".into())) })
        }))
        .map_err(|e| format!("the runtime refuses it: {e}"))?;
    Ok(Built {
        tool: pinned.name.clone(),
        name,
        description,
        input_schema,
        side_effect: rule.side_effect.clone(),
        timeout,
        deny: rule.deny.clone(),
        fixed: rule.fixed.clone(),
        hint_mismatch,
    })
}

/// Hints can only refuse (agentrt mcp 1.10): absent annotations never contradict.
pub fn hint_mismatch_of(class: &str, a: Option<&Annotations>) -> Option<String> {
    let a = a?;
    let read_only = a.read_only_hint == Some(true);
    if class == "read_only" && !read_only {
        return Some("classified read_only, but the server does not claim readOnlyHint".into());
    }
    if class != "destructive" && !read_only && a.destructive_hint == Some(true) {
        return Some(format!(
            "classified {class}, but the server claims destructiveHint"
        ));
    }
    None
}

const DRAFTS: [&str; 6] = [
    "json-schema.org/draft-04/schema",
    "json-schema.org/draft-06/schema",
    "json-schema.org/draft-07/schema",
    "json-schema.org/draft/2019-09/schema",
    "json-schema.org/draft/2020-12/schema",
    "json-schema.org/schema",
];

fn well_known(v: &str) -> bool {
    let v = v.strip_suffix('#').unwrap_or(v);
    let Some(rest) = v
        .strip_prefix("https://")
        .or_else(|| v.strip_prefix("http://"))
    else {
        return false;
    };
    DRAFTS.contains(&rest)
}

/// Refuses a schema that could make a compiler read outside it (agentrt mcp 1.11), before any
/// compile.
pub fn self_contained(root: &Value) -> Result<(), String> {
    let draft4 = root
        .get("$schema")
        .and_then(Value::as_str)
        .is_some_and(|s| s.contains("draft-04"));
    let mut work: Vec<(&Value, String)> = vec![(root, "#".into())];
    while let Some((v, path)) = work.pop() {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                for k in keys.into_iter().rev() {
                    let val = &m[k];
                    let at = format!("{path}/{}", pointer_token(k));
                    if let Value::String(s) = val {
                        let bad = match k.as_str() {
                            "$ref" | "$dynamicRef" | "$recursiveRef" => !s.starts_with('#'),
                            "$id" => !s.starts_with('#') && !well_known(s),
                            "$schema" => !well_known(s),
                            "id" if draft4 => {
                                !s.starts_with('#') && (s.contains(':') || s.starts_with("//"))
                            }
                            _ => false,
                        };
                        if bad {
                            return Err(format!(
                                "the input schema's {k} at {at} is {}, which could make the schema compiler read outside it",
                                super::quote(s)
                            ));
                        }
                    }
                    work.push((val, at));
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate().rev() {
                    work.push((item, format!("{path}/{i}")));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn pointer_token(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

/// Whether hidden parameters can be removed without the schema still reaching them (agentrt
/// mcp 1.12).
pub fn hideable(root: &Value, hidden: &[String]) -> Result<(), String> {
    if hidden.is_empty() {
        return Ok(());
    }
    let props = root.get("properties").and_then(Value::as_object);
    for h in hidden {
        if !props.is_some_and(|p| p.contains_key(h)) {
            return Err(format!(
                "the rule hides {}, which is not a top-level property of the input schema",
                super::quote(h)
            ));
        }
    }
    if root.get("patternProperties").is_some() {
        return Err("the rule hides parameters and the input schema has patternProperties, which could still match them".into());
    }
    for key in [
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "dependentRequired",
        "dependentSchemas",
        "dependencies",
        "$defs",
        "definitions",
    ] {
        let Some(sub) = root.get(key) else { continue };
        for h in hidden {
            if mentions(sub, h) {
                return Err(format!(
                    "the rule hides {} and the input schema's {key} mentions it",
                    super::quote(h)
                ));
            }
        }
    }
    Ok(())
}

fn mentions(v: &Value, name: &str) -> bool {
    let mut work = vec![v];
    while let Some(v) = work.pop() {
        match v {
            Value::String(s) if s == name => return true,
            Value::Object(m) => {
                if m.contains_key(name) {
                    return true;
                }
                work.extend(m.values());
            }
            Value::Array(a) => work.extend(a.iter()),
            _ => {}
        }
    }
    false
}

/// The schema without the hidden names in `properties` and `required` (dropped when empty),
/// canonical, number literals kept.
fn restrict(
    mut top: BTreeMap<String, Box<RawValue>>,
    hidden: &[String],
) -> Result<Vec<u8>, String> {
    if !hidden.is_empty() {
        if let Some(p) = top.get("properties") {
            let mut props: BTreeMap<String, Box<RawValue>> =
                serde_json::from_str(p.get()).map_err(|e| e.to_string())?;
            props.retain(|k, _| !hidden.contains(k));
            top.insert("properties".into(), raw(&raw_object(&props))?);
        }
        if let Some(r) = top.get("required") {
            let req: Vec<Box<RawValue>> =
                serde_json::from_str(r.get()).map_err(|e| e.to_string())?;
            let kept: Vec<Box<RawValue>> = req
                .into_iter()
                .filter(|v| {
                    serde_json::from_str::<String>(v.get()).map_or(true, |s| !hidden.contains(&s))
                })
                .collect();
            if kept.is_empty() {
                top.remove("required");
            } else {
                let mut b = b"[".to_vec();
                b.extend_from_slice(
                    &kept
                        .iter()
                        .map(|v| v.get().as_bytes().to_vec())
                        .collect::<Vec<_>>()
                        .join(&b","[..]),
                );
                b.push(b']');
                top.insert("required".into(), raw(&b)?);
            }
        }
    }
    canonical_schema(&raw_object(&top))
}

fn raw(b: &[u8]) -> Result<Box<RawValue>, String> {
    let s = String::from_utf8(b.to_vec()).map_err(|e| e.to_string())?;
    RawValue::from_string(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::load::manifest_of;

    fn tool(schema: &str) -> (PinnedTool, LiveTool) {
        let live = LiveTool {
            name: "t".into(),
            description: "d".into(),
            annotations: None,
            input_schema: canonical_schema(schema.as_bytes()).unwrap(),
        };
        let m = manifest_of("fs", "now", std::slice::from_ref(&live));
        (m.tools["t"].clone(), live)
    }

    fn rule() -> Rule {
        Rule {
            side_effect: "remote_mutation".into(),
            timeout: Some(Duration::from_secs(1)),
            ..Rule::default()
        }
    }

    fn refusal(schema: &str, r: &Rule) -> String {
        let (p, l) = tool(schema);
        build("fs", &p, Some(&l), r, None).unwrap_err()
    }

    #[test]
    fn load_refuses_a_schema_that_reaches_outside_itself() {
        for (schema, key, at) in [
            (
                r#"{"type":"object","$ref":"https://evil.example/s.json"}"#,
                "$ref",
                "#/$ref",
            ),
            (
                r#"{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}"#,
                "$ref",
                "#/properties/a/$ref",
            ),
            (
                r#"{"type":"object","$id":"https://evil.example/"}"#,
                "$id",
                "#/$id",
            ),
            (
                r#"{"type":"object","$schema":"https://evil.example/meta"}"#,
                "$schema",
                "#/$schema",
            ),
            (
                r#"{"type":"object","allOf":[{"$dynamicRef":"other.json#x"}]}"#,
                "$dynamicRef",
                "#/allOf/0/$dynamicRef",
            ),
            (
                r#"{"type":"object","$schema":"http://json-schema.org/draft-04/schema#","id":"http://x/y"}"#,
                "id",
                "#/id",
            ),
        ] {
            let e = refusal(schema, &rule());
            assert!(
                e.starts_with(&format!("the input schema's {key} at {at} is ")),
                "{schema}: {e}"
            );
            assert!(e.ends_with("which could make the schema compiler read outside it"));
        }
        // Fragments and the well-known drafts stay.
        let (p, l) = tool(
            r##"{"type":"object","$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"a":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/a"}}}"##,
        );
        assert!(build("fs", &p, Some(&l), &rule(), None).is_ok());
    }

    #[test]
    fn deny_and_fixed_are_removed_from_the_schema() {
        let schema = r#"{"type":"object","properties":{"path":{"type":"string"},"mode":{"type":"string"},"owner":{"type":"string"}},"required":["path","mode"]}"#;
        let (p, l) = tool(schema);
        let mut r = rule();
        r.deny = vec!["mode".into()];
        r.fixed.insert("owner".into(), b"\"ops\"".to_vec());
        let b = build("fs", &p, Some(&l), &r, None).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&b.input_schema),
            r#"{"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"}"#
        );
        assert_eq!(b.name, "fs_t");
        // Only-hidden required names drop `required` entirely.
        r.deny = vec!["mode".into(), "path".into()];
        let b = build("fs", &p, Some(&l), &r, None).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&b.input_schema),
            r#"{"properties":{},"type":"object"}"#
        );
    }

    #[test]
    fn rules_hidden_names_must_be_sound_to_hide() {
        let mut r = rule();
        r.deny = vec!["mdoe".into()];
        assert_eq!(
            refusal(r#"{"type":"object","properties":{"mode":{}}}"#, &r),
            "the rule hides \"mdoe\", which is not a top-level property of the input schema"
        );
        r.deny = vec!["mode".into()];
        assert!(
            refusal(
                r#"{"type":"object","properties":{"mode":{}},"patternProperties":{"^m":{}}}"#,
                &r
            )
            .contains("patternProperties")
        );
        assert_eq!(
            refusal(
                r#"{"type":"object","properties":{"mode":{}},"anyOf":[{"required":["mode"]}]}"#,
                &r
            ),
            "the rule hides \"mode\" and the input schema's anyOf mentions it"
        );
        r.fixed.insert("x".into(), b"{nope".to_vec());
        r.deny.clear();
        assert_eq!(
            refusal(r#"{"type":"object","properties":{"x":{}}}"#, &r),
            "the fixed value for \"x\" is not valid JSON"
        );
        // A nested property of the same name elsewhere is fine.
        let mut r = rule();
        r.deny = vec!["mode".into()];
        let (p, l) = tool(
            r#"{"type":"object","properties":{"mode":{},"opts":{"type":"object","properties":{"mode":{}}}}}"#,
        );
        assert!(build("fs", &p, Some(&l), &r, None).is_ok());
    }

    #[test]
    fn load_rename_replaces_the_prefix_and_an_unusable_name_is_refused() {
        let (p, l) = tool(r#"{"type":"object"}"#);
        let mut r = rule();
        r.rename = Some("write".into());
        assert_eq!(build("fs", &p, Some(&l), &r, None).unwrap().name, "write");
        r.rename = Some("write file".into());
        assert_eq!(
            build("fs", &p, Some(&l), &r, None).unwrap_err(),
            "the name \"write file\" does not match ^[a-zA-Z0-9_-]{1,64}$"
        );
        assert_eq!(
            build("fs", &p, None, &rule(), None).unwrap_err(),
            "the server no longer offers it"
        );
        let (p, l) = tool(r#"{"type":"array"}"#);
        assert_eq!(
            build("fs", &p, Some(&l), &rule(), None).unwrap_err(),
            "the input schema is not an object schema (\"type\":\"object\")"
        );
    }

    #[test]
    fn load_absent_annotations_never_mismatch() {
        assert_eq!(hint_mismatch_of("read_only", None), None);
        assert_eq!(hint_mismatch_of("destructive", None), None);
        let a = Annotations {
            destructive_hint: Some(true),
            ..Annotations::default()
        };
        assert_eq!(
            hint_mismatch_of("remote_mutation", Some(&a)).unwrap(),
            "classified remote_mutation, but the server claims destructiveHint"
        );
        assert_eq!(hint_mismatch_of("destructive", Some(&a)), None);
        // A server claiming read-only never relaxes a classification.
        let ro = Annotations {
            read_only_hint: Some(true),
            ..Annotations::default()
        };
        assert_eq!(hint_mismatch_of("destructive", Some(&ro)), None);
    }
}
