//! The dispatcher: the nine checks every proposed tool call passes, in order, from cheap and
//! general to specific and expensive, revealing no more than the caller may know.
//!
//! 1 tool exists (`unknown_tool`) · 2 exposed in the session (`not_available`) · 3 scope held
//! (`forbidden`) · 4 strings NFKC-normalised and trimmed once, then the schema
//! (`invalid_arguments`, property paths only) · 5 the order exists and is the caller's
//! (`not_found` for both) · 6 a completed call with the same key returns its stored result
//! marked replayed (another request under the key: `key_reused`) · 7 state (`invalid_state`)
//! · 8 consequence policy (`needs_approval`) · 9 execute and record, key and effect in one
//! backend transaction.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::consumer::backend::{Applied, Backend, Order, WriteRequest, read_result};
use crate::consumer::policy::{
    ApprovalRequest, ConsequencePolicy, Grant, Verdict, args_hash, binding_message, hmac_sha256,
};
use crate::consumer::session::Session;
pub use crate::consumer::tools::Prepared;
use crate::consumer::tools::{Catalog, EffectClass, ToolContract};

/// The fixed error vocabulary the model sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    UnknownTool,
    NotAvailable,
    Forbidden,
    InvalidArguments,
    NotFound,
    KeyReused,
    InvalidState,
    MissingCallKey,
    BackendUnavailable,
}

impl Code {
    /// The wire name, e.g. `not_found`.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::UnknownTool => "unknown_tool",
            Code::NotAvailable => "not_available",
            Code::Forbidden => "forbidden",
            Code::InvalidArguments => "invalid_arguments",
            Code::NotFound => "not_found",
            Code::KeyReused => "key_reused",
            Code::InvalidState => "invalid_state",
            Code::MissingCallKey => "missing_call_key",
            Code::BackendUnavailable => "backend_unavailable",
        }
    }
}

/// What a call produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Response {
    Ok { result: Value, replayed: bool },
    Refused { code: Code, detail: Vec<String> },
    NeedsApproval(Box<ApprovalRequest>),
}

impl Response {
    fn refused(code: Code) -> Response {
        Response::Refused {
            code,
            detail: Vec::new(),
        }
    }

    /// `ok`, `needs_approval`, or the refusal code.
    pub fn code(&self) -> &'static str {
        match self {
            Response::Ok { .. } => "ok",
            Response::NeedsApproval(_) => "needs_approval",
            Response::Refused { code, .. } => code.as_str(),
        }
    }

    /// The JSON the model is handed back.
    pub fn to_json(&self) -> Value {
        match self {
            Response::Ok { result, replayed } => {
                let mut v = json!({"status": "ok", "result": result});
                if *replayed {
                    v["replayed"] = json!(true);
                }
                v
            }
            Response::Refused { code, detail } => {
                let mut v = json!({"status": "error", "code": code.as_str()});
                if !detail.is_empty() {
                    v["detail"] = json!(detail);
                }
                v
            }
            Response::NeedsApproval(r) => json!({
                "status": "needs_approval", "kind": r.kind, "reason": r.reason,
                "presentation": r.presentation,
            }),
        }
    }
}

/// Switches for tests. The default is the correct dispatcher.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DispatcherOptions {
    /// Removes the ownership half of stage 5 (and of the backend's re-check). Exists only so a
    /// test can prove the authorisation tests fail when the check is gone.
    pub skip_ownership_check_for_seeded_defect_test: bool,
}

/// The identity of one logical call: derived from the run and the step index, never from the
/// model's own call ids, so a retried or resumed step reuses its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallKey {
    pub key: String,
    /// The runtime's step id, kept with the key (empty outside the runtime).
    pub step_id: String,
}

impl CallKey {
    /// `<run_id>#<step_index>`.
    pub fn for_step(run_id: &str, step_index: i64, step_id: &str) -> CallKey {
        CallKey {
            key: format!("{run_id}#{step_index}"),
            step_id: step_id.to_string(),
        }
    }
    /// A lookup by the runtime's step id only (the policy is not handed the step index).
    pub fn step_only(step_id: &str) -> CallKey {
        CallKey {
            key: String::new(),
            step_id: step_id.to_string(),
        }
    }
    /// A free-form key (dispatcher-level tests).
    pub fn plain(key: &str) -> CallKey {
        CallKey {
            key: key.to_string(),
            step_id: String::new(),
        }
    }
}

/// Where stages 1 to 7 ended.
#[derive(Debug, Clone)]
pub enum Preflight {
    /// Stage 6 found the completed call: this is its stored result.
    Replay(Value),
    /// Ready for stage 8.
    Ready(Box<Prepared>),
}

/// The dispatcher over one backend.
pub struct Dispatcher {
    catalog: Arc<Catalog>,
    backend: Arc<Backend>,
    policy: ConsequencePolicy,
    options: DispatcherOptions,
    grant_key: [u8; 32],
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("options", &self.options)
            .finish()
    }
}

impl Dispatcher {
    pub fn new(
        catalog: Arc<Catalog>,
        backend: Arc<Backend>,
        policy: ConsequencePolicy,
        options: DispatcherOptions,
    ) -> Dispatcher {
        Dispatcher {
            catalog,
            backend,
            policy,
            options,
            grant_key: rand::random(),
        }
    }

    pub fn backend(&self) -> &Arc<Backend> {
        &self.backend
    }
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }
    pub fn policy(&self) -> &ConsequencePolicy {
        &self.policy
    }

    /// Stages 1 to 3: session and tool name only.
    pub fn check_tool(&self, session: &Session, name: &str) -> Result<&ToolContract, Response> {
        let contract = self
            .catalog
            .get(name)
            .ok_or(Response::refused(Code::UnknownTool))?;
        if !session.exposes(name) {
            return Err(Response::refused(Code::NotAvailable));
        }
        if !session.has_scope(contract.scope) {
            return Err(Response::refused(Code::Forbidden));
        }
        Ok(contract)
    }

    /// Stages 1 to 7, reading only. `key` is required for writes.
    pub fn preflight(
        &self,
        session: &Session,
        name: &str,
        raw: &Value,
        key: Option<&CallKey>,
    ) -> Result<Preflight, Response> {
        let contract = self.check_tool(session, name)?.clone();
        let (normalized, args) =
            self.catalog
                .validate(&contract, raw)
                .map_err(|detail| Response::Refused {
                    code: Code::InvalidArguments,
                    detail,
                })?;
        let order = self.owned_order(session, args.order_id())?;
        let hash = args_hash(&normalized);
        if contract.effect != EffectClass::Read {
            let key = key.ok_or(Response::refused(Code::MissingCallKey))?;
            // Outside the runtime the key is known; the runtime's policy knows only the step.
            let done = if key.key.is_empty() {
                self.backend
                    .completed_call_by_step(&session.id, &key.step_id)
            } else {
                self.backend.completed_call(&key.key)
            };
            if let Some(done) = done.map_err(unavailable)? {
                if done.tool == contract.name && done.args_hash == hash {
                    return Ok(Preflight::Replay(done.result));
                }
                return Err(Response::refused(Code::KeyReused));
            }
        }
        let problems = contract.state_problems(&order, &args);
        if !problems.is_empty() {
            return Err(Response::Refused {
                code: Code::InvalidState,
                detail: problems,
            });
        }
        let impact_cents = contract.impact_cents(&args);
        Ok(Preflight::Ready(Box::new(Prepared {
            contract,
            normalized,
            args,
            args_hash: hash,
            order,
            impact_cents,
        })))
    }

    /// Stage 5: the same `not_found` whether the order is missing or someone else's.
    fn owned_order(&self, session: &Session, order_id: &str) -> Result<Order, Response> {
        let order = self.backend.order(order_id).map_err(unavailable)?;
        match order {
            Some(o)
                if o.customer == session.user_id
                    || self.options.skip_ownership_check_for_seeded_defect_test =>
            {
                Ok(o)
            }
            _ => Err(Response::refused(Code::NotFound)),
        }
    }

    /// Stage 8 for a prepared call.
    pub fn consequence(
        &self,
        session: &Session,
        p: &Prepared,
    ) -> Result<Option<ApprovalRequest>, Response> {
        let spent = self.backend.budgets(&session.id).map_err(unavailable)?;
        Ok(
            match self.policy.decide(p.contract.effect, p.impact_cents, spent) {
                Verdict::Auto => None,
                Verdict::Approve(hold) => Some(self.policy.request(hold, session, p, spent)),
            },
        )
    }

    /// Stage 9: execute and record, re-checking stages 5 to 7 inside the backend transaction.
    pub fn execute(&self, session: &Session, key: Option<&CallKey>, p: &Prepared) -> Response {
        if p.contract.effect == EffectClass::Read {
            // A read changes nothing; re-read so the answer is current.
            return match self.owned_order(session, p.args.order_id()) {
                Ok(order) => Response::Ok {
                    result: read_result(&order),
                    replayed: false,
                },
                Err(r) => r,
            };
        }
        let Some(key) = key.filter(|k| !k.key.is_empty()) else {
            return Response::refused(Code::MissingCallKey);
        };
        let owner = if self.options.skip_ownership_check_for_seeded_defect_test {
            None
        } else {
            Some(session.user_id.as_str())
        };
        match self.backend.apply(&WriteRequest {
            session_id: &session.id,
            step_id: &key.step_id,
            key: &key.key,
            tool: p.contract.name,
            args_hash: &p.args_hash,
            owner,
            effect: p.contract.effect,
            args: &p.args,
        }) {
            Ok(Applied::Executed(result)) => Response::Ok {
                result,
                replayed: false,
            },
            Ok(Applied::Replayed(result)) => Response::Ok {
                result,
                replayed: true,
            },
            Ok(Applied::KeyReused) => Response::refused(Code::KeyReused),
            Ok(Applied::NotFound) => Response::refused(Code::NotFound),
            Ok(Applied::InvalidState(detail)) => Response::Refused {
                code: Code::InvalidState,
                detail,
            },
            Err(e) => unavailable(e),
        }
    }

    /// All nine stages. `grant` stands in for a person's approval of exactly this request.
    pub fn call(
        &self,
        session: &Session,
        name: &str,
        raw: &Value,
        key: Option<&CallKey>,
        grant: Option<&Grant>,
    ) -> Response {
        let p = match self.preflight(session, name, raw, key) {
            Err(r) => return r,
            Ok(Preflight::Replay(result)) => {
                return Response::Ok {
                    result,
                    replayed: true,
                };
            }
            Ok(Preflight::Ready(p)) => p,
        };
        match self.consequence(session, &p) {
            Err(r) => return r,
            Ok(None) => {}
            Ok(Some(request)) => {
                let bound = self.binding(session, p.contract.name, &p.normalized);
                if grant.is_none_or(|g| !constant_time_eq(g.0.as_bytes(), bound.0.as_bytes())) {
                    return Response::NeedsApproval(Box::new(request));
                }
            }
        }
        self.execute(session, key, &p)
    }

    /// A person's approval of one request (the stand-in for an approval service): bound to
    /// the user, the tool and the normalised arguments. Refused when the arguments are invalid.
    pub fn grant(&self, session: &Session, name: &str, raw: &Value) -> Result<Grant, Response> {
        let contract = self
            .catalog
            .get(name)
            .ok_or(Response::refused(Code::UnknownTool))?;
        let (normalized, _) =
            self.catalog
                .validate(contract, raw)
                .map_err(|detail| Response::Refused {
                    code: Code::InvalidArguments,
                    detail,
                })?;
        Ok(self.binding(session, name, &normalized))
    }

    fn binding(&self, session: &Session, name: &str, normalized: &Value) -> Grant {
        let msg = binding_message(&session.user_id, name, normalized);
        Grant(hex::encode(hmac_sha256(&self.grant_key, &msg)))
    }
}

/// The model is told the backend failed, never the internal error (which can name files,
/// tables or SQL). Every backend write is one transaction, so a failure changed nothing.
fn unavailable(_e: crate::consumer::backend::BackendError) -> Response {
    Response::Refused {
        code: Code::BackendUnavailable,
        detail: vec!["the order service failed; nothing was changed".to_string()],
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
