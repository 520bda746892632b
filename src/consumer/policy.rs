//! The consequence policy (stage 8): how much autonomy a valid, authorised call gets. Reads are
//! automatic; reversible writes are automatic until the session has made `max_writes` writes;
//! irreversible writes are automatic only when their impact is within `auto_limit_cents` and the
//! session's irreversible total stays within `session_cap_cents`. Anything else waits for a
//! person, shown a presentation the runtime builds from the normalised arguments and the
//! computed impact, never from the model's prose.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::consumer::backend::Budgets;
use crate::consumer::session::Session;
use crate::consumer::tools::{EffectClass, Prepared, ValidArgs};

/// The policy's numbers (placeholders for a hypothetical store).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub auto_limit_cents: i64,
    pub session_cap_cents: i64,
    pub max_writes: i64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            auto_limit_cents: 5000,
            session_cap_cents: 10000,
            max_writes: 3,
        }
    }
}

/// Why a call needs a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// An irreversible call above the automatic limit.
    OverAutoLimit,
    /// An irreversible call that would take the session past its cap.
    SessionCap,
    /// A reversible write after the session used its write budget.
    WriteBudget,
}

impl Hold {
    /// The approval kind stored with the request.
    pub fn kind(self) -> &'static str {
        match self {
            Hold::OverAutoLimit => "over_auto_limit",
            Hold::SessionCap => "session_cap",
            Hold::WriteBudget => "write_budget",
        }
    }
}

/// The consequence policy's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Auto,
    Approve(Hold),
}

/// The consequence policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConsequencePolicy {
    pub limits: Limits,
}

impl ConsequencePolicy {
    /// Decides from the effect class, the impact and what the session has spent.
    pub fn decide(&self, effect: EffectClass, impact_cents: i64, spent: Budgets) -> Verdict {
        let l = self.limits;
        match effect {
            EffectClass::Read => Verdict::Auto,
            EffectClass::ReversibleWrite if spent.writes < l.max_writes => Verdict::Auto,
            EffectClass::ReversibleWrite => Verdict::Approve(Hold::WriteBudget),
            EffectClass::IrreversibleWrite if impact_cents > l.auto_limit_cents => {
                Verdict::Approve(Hold::OverAutoLimit)
            }
            EffectClass::IrreversibleWrite
                if spent.irreversible_cents.saturating_add(impact_cents) > l.session_cap_cents =>
            {
                Verdict::Approve(Hold::SessionCap)
            }
            EffectClass::IrreversibleWrite => Verdict::Auto,
        }
    }

    /// The approval request for a held call: kind, reason, capability `{tool, args}` with the
    /// normalised arguments, and a presentation built only from normalised arguments, the
    /// order record and computed numbers.
    pub fn request(
        &self,
        hold: Hold,
        session: &Session,
        call: &Prepared,
        spent: Budgets,
    ) -> ApprovalRequest {
        let (contract, normalized, args, order) =
            (&call.contract, &call.normalized, &call.args, &call.order);
        let l = self.limits;
        let impact = contract.impact_cents(args);
        let reason = match hold {
            Hold::OverAutoLimit => format!(
                "{} of {impact} cents is above the automatic limit of {} cents",
                contract.name, l.auto_limit_cents
            ),
            Hold::SessionCap => format!(
                "{} of {impact} cents would take the session's irreversible total from {} to {} cents, past the cap of {} cents",
                contract.name,
                spent.irreversible_cents,
                spent.irreversible_cents.saturating_add(impact),
                l.session_cap_cents
            ),
            Hold::WriteBudget => format!(
                "the session already made {} writes; the automatic budget is {}",
                spent.writes, l.max_writes
            ),
        };
        let title = match args {
            ValidArgs::IssueRefund {
                order_id,
                amount_cents,
                ..
            } => {
                format!("Refund {} on {order_id}", dollars(*amount_cents))
            }
            ValidArgs::UpdateShippingAddress { order_id, .. } => {
                format!("Change the shipping address of {order_id}")
            }
            ValidArgs::SendStatusEmail { order_id } => format!("Email the status of {order_id}"),
            ValidArgs::GetOrder { order_id } => format!("Read {order_id}"),
        };
        let mut presentation = json!({
            "title": title,
            "tool": contract.name,
            "order": order.id,
            "customer": session.user_id,
            "order_status": order.status.as_str(),
            "order_total_cents": order.total_cents,
            "refundable_cents": order.refundable_cents(),
            "impact_cents": impact,
            "session_irreversible_cents": spent.irreversible_cents,
            "session_writes": spent.writes,
            "auto_limit_cents": l.auto_limit_cents,
            "session_cap_cents": l.session_cap_cents,
        });
        if let Some(p) = presentation.as_object_mut() {
            match args {
                ValidArgs::IssueRefund {
                    amount_cents,
                    reason,
                    ..
                } => {
                    p.insert("amount_cents".into(), json!(amount_cents));
                    p.insert("reason".into(), json!(reason));
                }
                ValidArgs::UpdateShippingAddress {
                    line1, postal_code, ..
                } => {
                    p.insert("line1".into(), json!(line1));
                    p.insert("postal_code".into(), json!(postal_code));
                }
                _ => {}
            }
        }
        ApprovalRequest {
            kind: hold.kind().to_string(),
            reason,
            capability: json!({"tool": contract.name, "args": normalized}),
            presentation,
        }
    }
}

/// What a held call asks a person to approve.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    pub kind: String,
    pub reason: String,
    pub capability: Value,
    pub presentation: Value,
}

/// `8000` -> `80.00 USD`.
pub fn dollars(cents: i64) -> String {
    format!("{}.{:02} USD", cents / 100, (cents % 100).abs())
}

/// An approval granted outside the runtime (the dispatcher-level stand-in for the runtime's
/// approval rows): a keyed hash over the user, the tool and the normalised arguments, so a
/// grant for one request never authorises another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant(pub String);

/// HMAC-SHA256 (RFC 2104) with a 64-byte block.
pub fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    inner.update(msg);
    let inner = inner.finalize();
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner);
    outer.finalize().into()
}

/// The binding message of a grant: `[user, tool, normalised args]`, keys sorted.
pub fn binding_message(user_id: &str, tool: &str, normalized: &Value) -> Vec<u8> {
    // serde_json with preserve_order keeps insertion order; sort for a stable binding.
    let sorted = sort_keys(normalized);
    serde_json::to_vec(&json!([user_id, tool, sorted])).unwrap_or_default()
}

/// A copy of `v` with every object's keys sorted.
pub fn sort_keys(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sort_keys(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sort_keys).collect()),
        other => other.clone(),
    }
}

/// Hex SHA-256 of the sorted normalised arguments (the call key's request fingerprint).
pub fn args_hash(normalized: &Value) -> String {
    let bytes = serde_json::to_vec(&sort_keys(normalized)).unwrap_or_default();
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spent(writes: i64, irreversible_cents: i64) -> Budgets {
        Budgets {
            writes,
            irreversible_cents,
        }
    }

    #[test]
    fn consequence_limits_are_inclusive_at_their_boundaries() {
        let p = ConsequencePolicy::default();
        let irr = EffectClass::IrreversibleWrite;
        assert_eq!(
            p.decide(EffectClass::Read, 1_000_000, spent(99, 99_999)),
            Verdict::Auto
        );
        assert_eq!(p.decide(irr, 5000, spent(0, 0)), Verdict::Auto);
        assert_eq!(
            p.decide(irr, 5001, spent(0, 0)),
            Verdict::Approve(Hold::OverAutoLimit)
        );
        assert_eq!(p.decide(irr, 5000, spent(1, 5000)), Verdict::Auto);
        assert_eq!(
            p.decide(irr, 1, spent(2, 10000)),
            Verdict::Approve(Hold::SessionCap)
        );
        assert_eq!(
            p.decide(irr, i64::MAX, spent(0, i64::MAX)),
            Verdict::Approve(Hold::OverAutoLimit)
        );
        // Once a session is past the cap (through approvals), even a zero-impact irreversible call
        // waits: the total does not stay within the cap.
        assert_eq!(
            p.decide(irr, 0, spent(0, 10_001)),
            Verdict::Approve(Hold::SessionCap)
        );
        assert_eq!(p.decide(irr, 0, spent(0, 10_000)), Verdict::Auto);
        let rev = EffectClass::ReversibleWrite;
        assert_eq!(p.decide(rev, 0, spent(2, 0)), Verdict::Auto);
        assert_eq!(
            p.decide(rev, 0, spent(3, 0)),
            Verdict::Approve(Hold::WriteBudget)
        );
    }

    #[test]
    fn hmac_matches_rfc_4231_case_1() {
        let mac = hmac_sha256(&[0x0b; 20], b"Hi There");
        assert_eq!(
            hex::encode(mac),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        // A key longer than the block is hashed first (RFC 4231 case 6).
        let mac = hmac_sha256(
            &[0xaa; 131],
            b"Test Using Larger Than Block-Size Key - Hash Key First",
        );
        assert_eq!(
            hex::encode(mac),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn dollars_formats_cents() {
        assert_eq!(dollars(8000), "80.00 USD");
        assert_eq!(dollars(4205), "42.05 USD");
        assert_eq!(dollars(7), "0.07 USD");
    }
}
