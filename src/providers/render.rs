//! The render layer (spec §9): a run's steps become a conversation, and a model's reply
//! becomes a decision. It never produces `complete`: a model-driven run ends through a
//! terminal tool. Replies it cannot act on become the pseudo kinds `truncated` and
//! `no_tool_call`, which the driver records as invalid decisions and never executes.

use std::sync::Arc;

use super::wire::{ChatResponse, ContentBlock, Message};
use crate::runtime::agent::StepInput;
use crate::runtime::types::{Decision, Observation, Step};

pub const DEFAULT_RECENT_RESULTS: usize = 6;
pub const DEFAULT_MAX_CONTENT_BYTES: usize = 24_000;
/// The most a decision's reason holds.
pub const REASON_BYTES: usize = 500;
/// The most of one tool name repeated in the note on further tool calls.
pub const NAME_BYTES: usize = 64;

pub const STOP_END_TURN: &str = "end_turn";
pub const STOP_TOOL_USE: &str = "tool_use";
pub const STOP_MAX_TOKENS: &str = "max_tokens";
pub const STOP_REFUSAL: &str = "refusal";
pub const STOP_CONTEXT_WINDOW: &str = "model_context_window_exceeded";

/// The pseudo kinds (deliberately invalid decisions).
pub const KIND_TRUNCATED: &str = "truncated";
pub const KIND_NO_TOOL_CALL: &str = "no_tool_call";

pub const INTERRUPTED_TEXT: &str = "The process stopped while this tool was running, so you do not know its outcome. Ask for it again to find out: a change that was already applied answers from its record.";
pub const NUDGE_NO_TOOL_CALL: &str =
    "Your reply held no tool call that could run. Answer with exactly one tool call.";
pub const NUDGE_TRUNCATED: &str = "Your reply reached the output token cap before its tool call was complete, so nothing ran. Answer with exactly one short tool call.";

pub type Opening = Arc<dyn Fn(&StepInput) -> String + Send + Sync>;
pub type ToolUseIdHook = Arc<dyn Fn(&Step) -> Option<String> + Send + Sync>;
pub type AssistantHook = Arc<dyn Fn(&Step, &str) -> Option<Message> + Send + Sync>;
pub type ObservationHook = Arc<dyn Fn(&Step, &str, bool) -> Option<ContentBlock> + Send + Sync>;

/// How a run is rendered. `opening` is required (the first user turn).
#[derive(Clone)]
pub struct Options {
    pub opening: Opening,
    /// Rendered steps whose results are shown in full (0: 6); older ones show their summary.
    pub recent_results: usize,
    /// A longer result shows its summary (0: 24 000 bytes).
    pub max_content_bytes: usize,
    pub tool_use_id: Option<ToolUseIdHook>,
    pub assistant: Option<AssistantHook>,
    pub observation: Option<ObservationHook>,
}

impl Options {
    pub fn new(opening: Opening) -> Options {
        Options {
            opening,
            recent_results: 0,
            max_content_bytes: 0,
            tool_use_id: None,
            assistant: None,
            observation: None,
        }
    }
}

/// `render.Truncate`: never more than `n` bytes; a cut is marked `…` when `n` ≥ 3.
pub fn truncate(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_string();
    }
    let (limit, mark) = if n < 3 { (n, "") } else { (n - 3, "…") };
    let mut i = limit;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    format!("{}{mark}", &s[..i])
}

/// A decision's arguments as the model sent them: `{}` when blank; arguments recorded out of
/// band as unparseable keep their legacy object form.
pub fn args(d: &Decision) -> Vec<u8> {
    if !d.invalid_args.is_empty() {
        let key = if d.invalid_base64 {
            "invalid_json_base64"
        } else {
            "invalid_json"
        };
        return crate::runtime::json::gojson::Object::new()
            .str(key, &d.invalid_args)
            .finish();
    }
    if d.args.iter().all(|b| b.is_ascii_whitespace()) {
        return b"{}".to_vec();
    }
    d.args.clone()
}

/// The user turn's block for a step.
pub fn default_observation(step: &Step, id: &str, full: bool, max_content: usize) -> ContentBlock {
    let d = step.decision.as_ref();
    let is_call = d.is_some_and(|d| d.kind == "tool_call" && !d.tool.is_empty());
    match (is_call, &step.observation) {
        (true, Some(o)) => {
            let content = if o.kind == "interrupted" {
                INTERRUPTED_TEXT.to_string()
            } else if !full || o.content.len() > max_content {
                format!("[summary] {}", o.summary)
            } else {
                String::from_utf8_lossy(&o.content).into_owned()
            };
            ContentBlock::tool_result(id, &content, o.kind != "tool_result")
        }
        _ => ContentBlock::text(&nudge(
            d.map(|d| d.kind.as_str()).unwrap_or(""),
            step.observation.as_ref(),
        )),
    }
}

fn nudge(kind: &str, obs: Option<&Observation>) -> String {
    match kind {
        KIND_NO_TOOL_CALL => NUDGE_NO_TOOL_CALL.into(),
        KIND_TRUNCATED => NUDGE_TRUNCATED.into(),
        _ => {
            let mut s = "Your reply was not a tool call that could run".to_string();
            if let Some(o) = obs {
                s.push_str(&format!(" ({})", o.summary));
            }
            s.push_str(". Answer with exactly one valid tool call.");
            s
        }
    }
}

/// The conversation for a step: the opening, then per decided step an assistant turn (what
/// was decided) and a user turn (what came of it). Undecided steps are skipped and take no
/// slot of the recent window.
pub fn messages(input: &StepInput, opts: &Options) -> Vec<Message> {
    let recent = if opts.recent_results == 0 {
        DEFAULT_RECENT_RESULTS
    } else {
        opts.recent_results
    };
    let cap = if opts.max_content_bytes == 0 {
        DEFAULT_MAX_CONTENT_BYTES
    } else {
        opts.max_content_bytes
    };
    let mut out = vec![Message::user(vec![ContentBlock::text(&(opts.opening)(
        input,
    ))])];
    let decided: Vec<&Step> = input
        .steps
        .iter()
        .map(|s| s.as_ref())
        .filter(|s| s.decision.is_some() && s.id != input.step_id)
        .collect();
    let n = decided.len();
    for (i, step) in decided.into_iter().enumerate() {
        let full = i + recent >= n;
        let id = opts
            .tool_use_id
            .as_ref()
            .and_then(|h| h(step))
            .unwrap_or_else(|| format!("step_{}", step.index));
        let assistant = opts
            .assistant
            .as_ref()
            .and_then(|h| h(step, &id))
            .unwrap_or_else(|| {
                let d = step.decision.as_ref().expect("filtered on a decision");
                if d.kind != "tool_call" || d.tool.is_empty() {
                    let t = if d.reason.is_empty() {
                        "(no tool call)"
                    } else {
                        &d.reason
                    };
                    Message::assistant(vec![ContentBlock::text(t)])
                } else {
                    let mut blocks = Vec::new();
                    if !d.reason.is_empty() {
                        blocks.push(ContentBlock::text(&d.reason));
                    }
                    blocks.push(ContentBlock::tool_use(&id, &d.tool, &args(d)));
                    Message::assistant(blocks)
                }
            });
        out.push(assistant);
        let block = opts
            .observation
            .as_ref()
            .and_then(|h| h(step, &id, full))
            .filter(|b| !b.kind.is_empty())
            .unwrap_or_else(|| default_observation(step, &id, full, cap));
        out.push(Message::user(vec![block]));
    }
    out
}

/// A reply as a decision: stop reasons first, then the first tool call (further ones are
/// named in the reason, never run), else `no_tool_call`.
pub fn decide(r: &ChatResponse) -> Decision {
    match r.stop_reason.as_str() {
        STOP_REFUSAL => {
            return crate::runtime::agent::fail("the model declined to continue (refusal)");
        }
        STOP_CONTEXT_WINDOW => {
            return crate::runtime::agent::fail(
                "the conversation no longer fits the model's context window (model_context_window_exceeded)",
            );
        }
        STOP_MAX_TOKENS => {
            return Decision {
                kind: KIND_TRUNCATED.into(),
                reason: "the reply hit the output token cap; the tool call was not executed".into(),
                ..Decision::default()
            };
        }
        _ => {}
    }
    let text = r.text.trim();
    let Some(first) = r.tool_uses.first() else {
        return Decision {
            kind: KIND_NO_TOOL_CALL.into(),
            reason: truncate(text, REASON_BYTES),
            ..Decision::default()
        };
    };
    let mut note = String::new();
    let extra = &r.tool_uses[1..];
    if !extra.is_empty() {
        let head = format!("[{} further tool call(s) not executed: ", extra.len());
        let budget = 250usize.saturating_sub(head.len() + ", …]".len());
        let mut names = String::new();
        for (i, u) in extra.iter().enumerate() {
            let n = truncate(&u.name, NAME_BYTES);
            let add = if i == 0 { n } else { format!(", {n}") };
            if names.len() + add.len() > budget {
                names.push_str(if i == 0 { "…" } else { ", …" });
                break;
            }
            names.push_str(&add);
        }
        note = format!("{head}{names}]");
        if !text.is_empty() {
            note.insert(0, ' ');
        }
    }
    let reason = format!(
        "{}{note}",
        truncate(text, REASON_BYTES.saturating_sub(note.len()))
    );
    Decision {
        kind: "tool_call".into(),
        tool: first.name.clone(),
        args: if first.args.is_empty() {
            b"{}".to_vec()
        } else {
            first.args.clone()
        },
        reason,
        ..Decision::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::wire::ToolUse;

    #[test]
    fn truncate_marks_the_cut_and_never_exceeds_n() {
        for (s, n, want) in [
            ("abc", 3, "abc"),
            ("abcdef", 5, "ab…"),
            ("abécdef", 6, "ab…"),
            ("abécdef", 7, "abé…"),
            ("abc", 2, "ab"),
        ] {
            assert_eq!(truncate(s, n), want, "{s} {n}");
        }
    }

    fn reply(text: &str, names: &[&str], stop: &str) -> ChatResponse {
        ChatResponse {
            text: text.into(),
            tool_uses: names
                .iter()
                .map(|n| ToolUse {
                    id: "i".into(),
                    name: n.to_string(),
                    args: Vec::new(),
                })
                .collect(),
            stop_reason: stop.into(),
            ..ChatResponse::default()
        }
    }

    #[test]
    fn decide_stop_reasons_tool_call_and_bounded_reason() {
        assert_eq!(decide(&reply("", &["a"], "refusal")).kind, "fail");
        assert_eq!(
            decide(&reply("", &["a"], "model_context_window_exceeded")).kind,
            "fail"
        );
        let t = decide(&reply("", &["a"], "max_tokens"));
        assert_eq!((t.kind.as_str(), t.tool.as_str()), (KIND_TRUNCATED, ""));
        let n = decide(&reply(&"x".repeat(2000), &[], "end_turn"));
        assert_eq!(n.kind, KIND_NO_TOOL_CALL);
        assert_eq!(n.reason.len(), 500);
        assert!(n.reason.ends_with('…'));
        let d = decide(&reply("", &["a", "b", "c"], "tool_use"));
        assert_eq!((d.tool.as_str(), d.args.as_slice()), ("a", &b"{}"[..]));
        assert_eq!(d.reason, "[2 further tool call(s) not executed: b, c]");
        let d = decide(&reply(&"a".repeat(600), &["x", "wipe"], "tool_use"));
        assert_eq!(d.reason.len(), 500);
        assert_eq!(
            d.reason,
            format!(
                "{}… [1 further tool call(s) not executed: wipe]",
                "a".repeat(453)
            )
        );
        let long: Vec<String> = (0..20).map(|i| format!("{i}{}", "n".repeat(80))).collect();
        let refs: Vec<&str> = std::iter::once("first")
            .chain(long.iter().map(|s| s.as_str()))
            .collect();
        let d = decide(&reply(&"z".repeat(900), &refs, "tool_use"));
        assert!(d.reason.len() <= 500, "{}", d.reason.len());
        assert!(d.reason.ends_with(", …]"), "{}", d.reason);
    }

    fn step(index: i64, d: Option<Decision>, o: Option<(&str, &str, &str)>) -> Arc<Step> {
        Arc::new(Step {
            id: format!("s{index}"),
            index,
            decision: d,
            observation: o.map(|(kind, content, summary)| Observation {
                kind: kind.into(),
                content: content.as_bytes().to_vec(),
                summary: summary.into(),
                content_hash: String::new(),
            }),
            ..Step::default()
        })
    }

    fn input(steps: Vec<Arc<Step>>, current: &str) -> StepInput {
        StepInput {
            run_id: "r".into(),
            step_id: current.into(),
            index: steps.len() as i64,
            goal: "g".into(),
            steps,
            tools: Vec::new(),
            model: None,
        }
    }

    #[test]
    fn messages_window_cap_interrupted_denied_and_undecided_steps() {
        let call = |t: &str, a: &str| crate::runtime::agent::tool_call(t, a);
        let steps = vec![
            step(
                0,
                Some(call("read", r#"{"a":1}"#)),
                Some(("tool_result", r#""old result""#, "old")),
            ),
            // Interrupted while deciding: skipped, takes no window slot.
            step(1, None, None),
            step(
                2,
                Some(call("read", "")),
                Some(("tool_result", &format!("\"{}\"", "x".repeat(40)), "long")),
            ),
            step(
                3,
                Some(call("refund", "{}")),
                Some(("interrupted", "", "cut off")),
            ),
            step(
                4,
                Some(call("wipe", "{}")),
                Some(("denied", r#""no""#, "policy said no")),
            ),
            step(
                5,
                Some(Decision {
                    kind: "fail".into(),
                    ..Decision::default()
                }),
                Some(("invalid_decision", "", "bad kind")),
            ),
            step(6, None, None),
        ];
        let mut o = Options::new(Arc::new(|i: &StepInput| format!("Goal: {}", i.goal)));
        o.recent_results = 3;
        o.max_content_bytes = 30;
        let m = messages(&input(steps, "s6"), &o);
        assert_eq!(m.len(), 1 + 2 * 5);
        assert_eq!(m[0].content[0].text, "Goal: g");
        // Step 0 is outside the window of 3 rendered steps: its summary.
        assert_eq!(m[2].content[0].content, "[summary] old");
        assert_eq!(m[2].content[0].tool_use_id, "step_0");
        assert_eq!(
            m[3].content[0].input,
            b"{}".to_vec(),
            "blank arguments render as {{}}"
        );
        // Step 2 is outside the window too (4 rendered steps after it... 3 recent: 3, 4, 5).
        assert_eq!(m[4].content[0].content, "[summary] long");
        assert_eq!(m[6].content[0].content, INTERRUPTED_TEXT);
        assert!(m[6].content[0].is_error);
        assert_eq!(m[8].content[0].content, r#""no""#);
        assert!(m[8].content[0].is_error, "a denied call is an error result");
        assert_eq!(m[9].content[0].text, "(no tool call)");
        assert_eq!(
            m[10].content[0].text,
            "Your reply was not a tool call that could run (bad kind). Answer with exactly one valid tool call."
        );
        // Inside the window, a result over the cap shows its summary.
        let steps = vec![step(
            0,
            Some(call("read", "{}")),
            Some(("tool_result", &format!("\"{}\"", "y".repeat(40)), "big")),
        )];
        let m = messages(&input(steps, "s1"), &o);
        assert_eq!(m[2].content[0].content, "[summary] big");
    }
}
