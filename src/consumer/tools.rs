//! The four tool contracts. Each has a model-facing half (name, description, input schema:
//! what the model is shown) and a runtime-only half (effect class, scope, the order it
//! touches, state rules, impact) that the dispatcher enforces whatever the model proposes.

use serde_json::{Map, Value, json};
use unicode_normalization::UnicodeNormalization;

use crate::consumer::orders::{Order, OrderStatus};

/// Names of every tool in the catalog, in catalog order.
pub const TOOL_NAMES: [&str; 4] = [
    "get_order",
    "issue_refund",
    "update_shipping_address",
    "send_status_email",
];

/// The refund reasons the model may choose from.
pub const REFUND_REASONS: [&str; 4] = ["damaged", "not_as_described", "late", "other"];

/// What undoing a call would take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EffectClass {
    /// No state change.
    Read,
    /// A state change with a cheap undo.
    ReversibleWrite,
    /// Money or a message leaves the system.
    IrreversibleWrite,
}

impl EffectClass {
    /// The stored name (`read`, `reversible_write`, `irreversible_write`).
    pub fn as_str(self) -> &'static str {
        match self {
            EffectClass::Read => "read",
            EffectClass::ReversibleWrite => "reversible_write",
            EffectClass::IrreversibleWrite => "irreversible_write",
        }
    }
}

/// Which tool a contract describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    GetOrder,
    IssueRefund,
    UpdateShippingAddress,
    SendStatusEmail,
}

/// Arguments after normalisation and schema validation, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValidArgs {
    GetOrder {
        order_id: String,
    },
    IssueRefund {
        order_id: String,
        amount_cents: i64,
        reason: String,
    },
    UpdateShippingAddress {
        order_id: String,
        line1: String,
        postal_code: String,
    },
    SendStatusEmail {
        order_id: String,
    },
}

impl ValidArgs {
    /// The one order the call touches.
    pub fn order_id(&self) -> &str {
        match self {
            ValidArgs::GetOrder { order_id }
            | ValidArgs::IssueRefund { order_id, .. }
            | ValidArgs::UpdateShippingAddress { order_id, .. }
            | ValidArgs::SendStatusEmail { order_id } => order_id,
        }
    }
}

/// One tool: both halves of its contract.
#[derive(Debug, Clone)]
pub struct ToolContract {
    pub kind: ToolKind,
    // Model-facing half.
    pub name: &'static str,
    pub description: &'static str,
    pub input_schema: Value,
    // Runtime-only half.
    pub effect: EffectClass,
    pub scope: &'static str,
}

fn order_id_schema() -> Value {
    json!({"type": "string", "pattern": "^ord_[0-9]{4,8}$"})
}

impl ToolContract {
    fn all() -> Vec<ToolContract> {
        vec![
            ToolContract {
                kind: ToolKind::GetOrder,
                name: "get_order",
                description: "Return status and payment totals for one order of the current customer.",
                input_schema: json!({
                    "type": "object",
                    "properties": {"order_id": order_id_schema()},
                    "required": ["order_id"],
                    "additionalProperties": false
                }),
                effect: EffectClass::Read,
                scope: "orders:read",
            },
            ToolContract {
                kind: ToolKind::IssueRefund,
                name: "issue_refund",
                description: "Refund part or all of a delivered order to the original payment method.",
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "order_id": order_id_schema(),
                        "amount_cents": {"type": "integer", "minimum": 1, "maximum": 100000},
                        "reason": {"type": "string", "enum": REFUND_REASONS}
                    },
                    "required": ["order_id", "amount_cents", "reason"],
                    "additionalProperties": false
                }),
                effect: EffectClass::IrreversibleWrite,
                scope: "refunds:write",
            },
            ToolContract {
                kind: ToolKind::UpdateShippingAddress,
                name: "update_shipping_address",
                description: "Change the delivery address of an order that has not shipped.",
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "order_id": order_id_schema(),
                        "line1": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": 80,
                            "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f\\u200b-\\u200f\\u202a-\\u202e\\u2066-\\u2069\\ufeff]{1,80}$"
                        },
                        "postal_code": {"type": "string", "pattern": "^[0-9]{5}$"}
                    },
                    "required": ["order_id", "line1", "postal_code"],
                    "additionalProperties": false
                }),
                effect: EffectClass::ReversibleWrite,
                scope: "orders:write",
            },
            ToolContract {
                kind: ToolKind::SendStatusEmail,
                name: "send_status_email",
                description: "Email the order status to the customer's address on file.",
                input_schema: json!({
                    "type": "object",
                    "properties": {"order_id": order_id_schema()},
                    "required": ["order_id"],
                    "additionalProperties": false
                }),
                effect: EffectClass::IrreversibleWrite,
                scope: "email:send",
            },
        ]
    }

    /// What the model is shown: name, description and input schema, nothing else.
    pub fn model_view(&self) -> Value {
        json!({"name": self.name, "description": self.description, "input_schema": self.input_schema})
    }

    /// The admission schema handed to the runtime, which checks raw arguments before any
    /// normalisation: the same shape (types, required, no extra properties, integer ranges)
    /// with the value rules on strings (pattern, enum, lengths) left to stage 4, which applies
    /// them to the NFKC-normalised, trimmed strings.
    pub fn admission_schema(&self) -> Value {
        let mut schema = self.input_schema.clone();
        if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            for sub in props.values_mut() {
                if let Some(obj) = sub.as_object_mut()
                    && obj.get("type").and_then(Value::as_str) == Some("string")
                {
                    for k in ["pattern", "enum", "minLength", "maxLength"] {
                        obj.remove(k);
                    }
                }
            }
        }
        schema
    }

    /// Reads the typed arguments out of normalised arguments the schema accepted. `None` when
    /// a value does not fit its Rust type (e.g. an integer-valued float such as `3000.0`).
    pub fn typed(&self, args: &Map<String, Value>) -> Option<ValidArgs> {
        let s = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
        let order_id = s("order_id")?;
        Some(match self.kind {
            ToolKind::GetOrder => ValidArgs::GetOrder { order_id },
            ToolKind::IssueRefund => ValidArgs::IssueRefund {
                order_id,
                amount_cents: args.get("amount_cents").and_then(Value::as_i64)?,
                reason: s("reason")?,
            },
            ToolKind::UpdateShippingAddress => ValidArgs::UpdateShippingAddress {
                order_id,
                line1: s("line1")?,
                postal_code: s("postal_code")?,
            },
            ToolKind::SendStatusEmail => ValidArgs::SendStatusEmail { order_id },
        })
    }

    /// The state rules (stage 7): what the order's current state forbids. Empty = allowed.
    /// The messages are safe to return: the caller owns the order.
    pub fn state_problems(&self, order: &Order, args: &ValidArgs) -> Vec<String> {
        let mut problems = Vec::new();
        match args {
            ValidArgs::IssueRefund { amount_cents, .. } => {
                if order.status != OrderStatus::Delivered {
                    problems.push("order is not delivered".to_string());
                }
                let refundable = order.refundable_cents();
                if *amount_cents > refundable {
                    problems.push(format!("amount exceeds refundable {refundable}"));
                }
            }
            ValidArgs::UpdateShippingAddress { .. } => {
                if order.status != OrderStatus::Processing {
                    problems.push("order has already shipped".to_string());
                }
            }
            ValidArgs::GetOrder { .. } | ValidArgs::SendStatusEmail { .. } => {}
        }
        problems
    }

    /// The money at stake, in cents.
    pub fn impact_cents(&self, args: &ValidArgs) -> i64 {
        match args {
            ValidArgs::IssueRefund { amount_cents, .. } => *amount_cents,
            _ => 0,
        }
    }
}

/// Unicode NFKC then trimmed ends, applied once to every string value (keys are left as they
/// are: an unknown key is refused by the schema, not repaired).
pub fn normalize(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(s.nfkc().collect::<String>().trim().to_string()),
        Value::Array(items) => Value::Array(items.iter().map(normalize).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), normalize(v))).collect())
        }
        other => other.clone(),
    }
}

/// Every contract with its strict validator compiled once.
pub struct Catalog {
    entries: Vec<(ToolContract, jsonschema::Validator)>,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("tools", &TOOL_NAMES)
            .finish()
    }
}

impl Catalog {
    /// Compiles the four schemas. They are constants, so a failure is a programming error
    /// reported as a string rather than a panic.
    pub fn new() -> Result<Catalog, String> {
        let mut entries = Vec::new();
        for c in ToolContract::all() {
            let v = jsonschema::validator_for(&c.input_schema)
                .map_err(|e| format!("the schema of tool {} does not compile: {e}", c.name))?;
            entries.push((c, v));
        }
        Ok(Catalog { entries })
    }

    /// The contract named `name`.
    pub fn get(&self, name: &str) -> Option<&ToolContract> {
        self.entries.iter().map(|(c, _)| c).find(|c| c.name == name)
    }

    /// Every contract, in catalog order.
    pub fn contracts(&self) -> impl Iterator<Item = &ToolContract> {
        self.entries.iter().map(|(c, _)| c)
    }

    /// Stage 4: normalise, then validate with the strict schema. Errors name property paths
    /// (`$.amount_cents: expected integer`) and never echo the offending value.
    pub fn validate(
        &self,
        contract: &ToolContract,
        raw: &Value,
    ) -> Result<(Value, ValidArgs), Vec<String>> {
        let Some((_, validator)) = self.entries.iter().find(|(c, _)| c.name == contract.name)
        else {
            return Err(vec!["$: unknown tool".to_string()]);
        };
        if !raw.is_object() {
            return Err(vec!["$: expected object".to_string()]);
        }
        let args = normalize(raw);
        let mut errors: Vec<String> = validator
            .iter_errors(&args)
            .flat_map(|e| describe(contract, &e))
            .collect();
        errors.sort();
        errors.dedup();
        if !errors.is_empty() {
            return Err(errors);
        }
        let map = args.as_object().cloned().unwrap_or_default();
        match contract.typed(&map) {
            Some(typed) => Ok((args, typed)),
            None => Err(vec!["$.amount_cents: expected integer".to_string()]),
        }
    }
}

/// `/amount_cents` -> `$.amount_cents`.
fn dollar_path(pointer: &str) -> String {
    let mut out = String::from("$");
    for seg in pointer.split('/').skip(1) {
        out.push('.');
        out.push_str(&seg.replace("~1", "/").replace("~0", "~"));
    }
    out
}

/// A property name is echoed only if it is plain; anything else could carry hostile text.
fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn expected_type(contract: &ToolContract, path: &str) -> String {
    let prop = path.trim_start_matches("$.");
    contract
        .input_schema
        .get("properties")
        .and_then(|p| p.get(prop))
        .and_then(|s| s.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("another type")
        .to_string()
}

fn describe(contract: &ToolContract, e: &jsonschema::ValidationError<'_>) -> Vec<String> {
    use jsonschema::error::ValidationErrorKind as K;
    let path = dollar_path(e.instance_path().as_str());
    match e.kind() {
        K::Type { .. } => vec![format!(
            "{path}: expected {}",
            expected_type(contract, &path)
        )],
        K::Required { property } => {
            let name = property.as_str().unwrap_or("?");
            vec![format!("{path}.{name}: required")]
        }
        K::AdditionalProperties { unexpected } => unexpected
            .iter()
            .map(|k| {
                if safe_name(k) {
                    format!("{path}.{k}: unexpected property")
                } else {
                    format!("{path}: unexpected property")
                }
            })
            .collect(),
        K::Enum { options } => {
            let names: Vec<&str> = options
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            vec![format!("{path}: not one of {}", names.join(", "))]
        }
        K::Minimum { limit } => vec![format!("{path}: below minimum {limit}")],
        K::Maximum { limit } => vec![format!("{path}: above maximum {limit}")],
        K::MinLength { limit } => vec![format!("{path}: shorter than {limit}")],
        K::MaxLength { limit } => vec![format!("{path}: longer than {limit}")],
        K::Pattern { pattern } => vec![format!("{path}: does not match {pattern}")],
        _ => vec![format!("{path}: not valid")],
    }
}

/// A call that passed stages 1 to 7 and was not a replay.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub contract: ToolContract,
    pub normalized: Value,
    pub args: ValidArgs,
    pub args_hash: String,
    pub order: Order,
    pub impact_cents: i64,
}
