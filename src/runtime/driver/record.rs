//! What the driver writes: observations and event payloads, byte for byte as agentrt's Go
//! encoder writes them (spec 6: maps with sorted keys, structs in declared field order).

use crate::runtime::json::{self, gojson::Object};
use crate::runtime::types::{Decision, Observation};

/// An observation whose content is JSON the runtime built (a Go map of strings).
pub fn observation(kind: &str, content: Vec<u8>, summary: String) -> Observation {
    let content_hash = json::content_hash(&content);
    Observation {
        kind: kind.to_string(),
        content,
        summary,
        content_hash,
    }
}

/// A Go map of strings: keys must be given in sorted order.
pub fn string_map(pairs: &[(&str, &str)]) -> Vec<u8> {
    debug_assert!(pairs.windows(2).all(|w| w[0].0 < w[1].0));
    let mut o = Object::new();
    for (k, v) in pairs {
        o.str(k, v);
    }
    o.finish()
}

/// The `invalid_decision` observation: content `{"error": msg}`, summary
/// `invalid decision<suffix>: <msg>` (the suffix is ` on resume` when a resume found it).
pub fn invalid_decision(msg: &str, suffix: &str) -> Observation {
    observation(
        "invalid_decision",
        string_map(&[("error", msg)]),
        format!("invalid decision{suffix}: {msg}"),
    )
}

/// The `policy_denied` observation: content `{"reason","tool"}`, summary
/// `<verb><suffix>: <reason>` (`verb` is `denied` or `aborted`; the suffix as above).
pub fn policy_denied(reason: &str, tool: &str, verb: &str, suffix: &str) -> Observation {
    observation(
        "policy_denied",
        string_map(&[("reason", reason), ("tool", tool)]),
        format!("{verb}{suffix}: {reason}"),
    )
}

/// `step.started`.
pub fn step_started(index: i64) -> Vec<u8> {
    Object::new().int("index", index).finish()
}

/// `step.tool_started`: `{"approval_id"?,"args","tool"}`.
pub fn tool_started(
    approval_id: &str,
    args: &[u8],
    tool: &str,
) -> Result<Vec<u8>, json::JsonError> {
    let mut o = Object::new();
    o.str_opt("approval_id", approval_id);
    o.raw("args", if args.is_empty() { b"{}" } else { args })?;
    o.str("tool", tool);
    Ok(o.finish())
}

/// `step.tool_finished` for a success or a failure.
pub fn tool_finished(
    tool: &str,
    duration_ms: i64,
    obs: &Observation,
    ok: bool,
    detail: &str,
) -> Vec<u8> {
    let mut o = Object::new();
    if ok {
        o.str("content_hash", &obs.content_hash)
            .int("duration_ms", duration_ms)
            .str("summary", &obs.summary)
            .str("tool", tool);
    } else {
        o.int("duration_ms", duration_ms)
            .str("error", detail)
            .str("tool", tool);
    }
    o.finish()
}

/// A late `step.tool_finished` (the run was cancelled while the tool ran).
pub fn tool_finished_late(
    tool: &str,
    duration_ms: i64,
    obs: &Observation,
) -> Result<Vec<u8>, json::JsonError> {
    let obs_json = obs.to_go_json()?;
    let mut o = Object::new();
    o.str_opt("content_hash", &obs.content_hash)
        .int("duration_ms", duration_ms)
        .bool("late", true)
        .encoded("observation", &obs_json)
        .str_opt("summary", &obs.summary)
        .str("tool", tool);
    Ok(o.finish())
}

/// `step.failed`: `{"content_hash"?,"detail","observation"?}`.
pub fn step_failed(detail: &str, obs: Option<&Observation>) -> Vec<u8> {
    let mut o = Object::new();
    if let Some(obs) = obs {
        o.str("content_hash", &obs.content_hash);
    }
    o.str("detail", detail);
    if let Some(obs) = obs {
        o.str("observation", &obs.kind);
    }
    o.finish()
}

/// `run.finished`: `{"by"?,"detail","reason","status","steps"}`.
pub fn run_finished(
    by: Option<&str>,
    detail: &str,
    reason: &str,
    status: &str,
    steps: i64,
) -> Vec<u8> {
    let mut o = Object::new();
    if let Some(by) = by {
        o.str("by", by);
    }
    o.str("detail", detail)
        .str("reason", reason)
        .str("status", status)
        .int("steps", steps)
        .finish()
}

/// `limit.exceeded`.
pub fn limit_exceeded(detail: &str, reason: &str) -> Vec<u8> {
    Object::new()
        .str("detail", detail)
        .str("reason", reason)
        .finish()
}

/// `loop.detected`.
pub fn loop_detected(args_hash: &str, observation_hash: &str, repeats: i64, tool: &str) -> Vec<u8> {
    Object::new()
        .str("args_hash", args_hash)
        .str("observation_hash", observation_hash)
        .int("repeats", repeats)
        .str("tool", tool)
        .finish()
}

/// `approval.requested`.
pub fn approval_requested(
    approval_id: &str,
    capability: &[u8],
    hash: &str,
    kind: &str,
    presentation: &[u8],
    reason: &str,
) -> Result<Vec<u8>, json::JsonError> {
    let mut o = Object::new();
    o.str("approval_id", approval_id);
    o.raw("capability", capability)?;
    o.str("hash", hash).str("kind", kind);
    o.raw("presentation", presentation)?;
    o.str("reason", reason);
    Ok(o.finish())
}

/// `run.created`: `{"goal","limits","tools"}`.
pub fn run_created(goal: &str, limits_json: &[u8], tools: &[String]) -> Vec<u8> {
    let mut arr = vec![b'['];
    for (i, t) in tools.iter().enumerate() {
        if i > 0 {
            arr.push(b',');
        }
        json::gojson::write_string(&mut arr, t);
    }
    arr.push(b']');
    Object::new()
        .str("goal", goal)
        .encoded("limits", limits_json)
        .encoded("tools", &arr)
        .finish()
}

/// `lease.taken_over`.
pub fn lease_taken_over(owner: &str, previous_expires_at: &str, previous_owner: &str) -> Vec<u8> {
    Object::new()
        .str("owner", owner)
        .str("previous_expires_at", previous_expires_at)
        .str("previous_owner", previous_owner)
        .finish()
}

/// `step.interrupted` (the observation content nested under its key, as agentrt emits it).
pub fn step_interrupted(content: &[u8]) -> Vec<u8> {
    Object::new().encoded("previous_status", content).finish()
}

/// The recorded form of a decision (spec 3.5 step 4): whitespace-only args/result are absent;
/// unusable JSON moves out of band to `invalid_args`/`invalid_result` (both base64 when either
/// is not UTF-8); agent-supplied `invalid_*` fields are dropped.
pub fn recorded_decision(d: &Decision) -> Decision {
    use base64::Engine as _;
    let blank = |v: &[u8]| v.iter().all(|b| b.is_ascii_whitespace());
    let mut r = d.clone();
    r.invalid_args.clear();
    r.invalid_result.clear();
    r.invalid_base64 = false;
    if blank(&r.args) {
        r.args.clear();
    }
    if blank(&r.result) {
        r.result.clear();
    }
    let bad_args = !r.args.is_empty() && unusable(&r.args);
    let bad_result = !r.result.is_empty() && unusable(&r.result);
    let args = if bad_args {
        std::mem::take(&mut r.args)
    } else {
        Vec::new()
    };
    let result = if bad_result {
        std::mem::take(&mut r.result)
    } else {
        Vec::new()
    };
    let utf8 = std::str::from_utf8(&args).is_ok() && std::str::from_utf8(&result).is_ok();
    let enc = |v: &[u8]| -> String {
        if utf8 {
            String::from_utf8_lossy(v).into_owned()
        } else {
            base64::engine::general_purpose::STANDARD.encode(v)
        }
    };
    if bad_args {
        r.invalid_args = enc(&args);
    }
    if bad_result {
        r.invalid_result = enc(&result);
    }
    r.invalid_base64 = (bad_args || bad_result) && !utf8;
    r
}

/// JSON that cannot be stored in band: not UTF-8, not one JSON value, or nested past the bound
/// (what Go's encoder would refuse or what a reader could not decode back). Values that are
/// JSON but fail the rest of the boundary check (a repeated key, a lone surrogate, a huge
/// number) are recorded as written and refused by validation.
pub fn unusable(v: &[u8]) -> bool {
    matches!(
        json::check_json(v),
        Err(json::JsonError::InvalidUtf8 | json::JsonError::Invalid | json::JsonError::TooDeep)
    )
}
