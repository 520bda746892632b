//! Tools: what a consumer declares (spec 2 `ToolSpec`), how they run, and the registry that
//! refuses a tool the runtime could not hold to its declaration.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;

use super::json;
use super::schema::{Schema, SchemaError};
use super::types::ToolSpec;

/// A tool's side-effect class, what the default policy decides by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SideEffect {
    /// `read_only`: changes nothing. The default policy allows it.
    ReadOnly,
    /// `local_mutation`: changes only local state. The default policy allows it.
    LocalMutation,
    /// `remote_mutation`: changes something elsewhere. The default policy asks for approval.
    RemoteMutation,
    /// `destructive`: may destroy something. The default policy denies it.
    Destructive,
    /// A class this build does not know (read from a database, or a consumer mistake).
    /// Registration refuses it; the default policy denies it.
    Unknown(String),
}

impl SideEffect {
    /// The class as stored in `ToolSpec.side_effect` (`Unknown` gives its text).
    pub fn as_str(&self) -> &str {
        match self {
            SideEffect::ReadOnly => "read_only",
            SideEffect::LocalMutation => "local_mutation",
            SideEffect::RemoteMutation => "remote_mutation",
            SideEffect::Destructive => "destructive",
            SideEffect::Unknown(s) => s,
        }
    }

    /// Reads a class name; exact and case-sensitive, anything else is `Unknown`. Never fails.
    pub fn parse(s: &str) -> SideEffect {
        match s {
            "read_only" => SideEffect::ReadOnly,
            "local_mutation" => SideEffect::LocalMutation,
            "remote_mutation" => SideEffect::RemoteMutation,
            "destructive" => SideEffect::Destructive,
            other => SideEffect::Unknown(other.to_string()),
        }
    }
}

/// What a consumer declares about a tool (agentrt's `ToolSpec`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolDef {
    /// The name decisions call the tool by; must not be empty, unique in a registry.
    pub name: String,
    /// What the tool does, for the model and the policy; part of the spec hash.
    pub description: String,
    /// The raw JSON Schema of the arguments, kept byte for byte (it is hashed as written).
    pub input_schema: Vec<u8>,
    /// What the tool may change; the default policy decides by it. `Unknown` is refused.
    pub side_effect: SideEffect,
    /// How long a call may take before the driver gives up on it (`tool_error` with failure
    /// `timeout`); must be greater than zero.
    pub timeout: Duration,
    /// A successful call completes the run with the tool's content as its result.
    pub terminal: bool,
}

impl ToolDef {
    /// The timeout in nanoseconds as Go stores a `time.Duration` (saturating).
    pub fn timeout_ns(&self) -> i64 {
        i64::try_from(self.timeout.as_nanos()).unwrap_or(i64::MAX)
    }

    /// The `ToolSpec` record of this declaration (spec 2).
    pub fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            input_schema: self.input_schema.clone(),
            side_effect: self.side_effect.as_str().to_string(),
            timeout_ns: self.timeout_ns(),
            terminal: self.terminal,
        }
    }
}

/// One invocation, as the tool is handed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The id of the run making the call.
    pub run_id: String,
    /// The id of the step that decided the call.
    pub step_id: String,
    /// That step's position in the run, from 0.
    pub step_index: i64,
    /// The arguments exactly as recorded (`{}` when the decision had none).
    pub args: Vec<u8>,
}

/// A successful call: JSON content (empty means `{}`) and a one-line summary.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolOutput {
    /// The result as JSON; empty or blank is recorded as `{}`. It must pass the boundary
    /// check (spec 5.2); otherwise the call is recorded as a `tool_error` with failure
    /// `invalid_content`, the bytes kept in it.
    pub content: Vec<u8>,
    /// A one-line summary, recorded as given with a `tool_result` (a refused content gets the
    /// driver's own summary instead).
    pub summary: String,
}

/// A failed call.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ToolError {
    /// The call failed; the agent sees the error and may try something else.
    #[error("{0}")]
    Failed(String),
    /// The tool asks to end the run (`tool_abort`).
    #[error("abort run: {0}")]
    AbortRun(String),
}

/// What [`Tool::call`] returns.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send>>;

/// A tool the runtime may call.
pub trait Tool: Send + Sync + 'static {
    /// The tool's declaration. Read once, at registration; what it says later is not used.
    fn def(&self) -> ToolDef;
    /// Runs one call. It runs in its own task: a panic (in `call` or in the future) is
    /// recorded as a `tool_error`, and at the timeout the task is aborted, so the future is
    /// dropped at its next await point (blocking code in it is not interrupted).
    fn call(&self, call: ToolCall) -> ToolFuture;
}

/// A tool made of a declaration and a closure (tests, examples).
pub struct FnTool<F> {
    def: ToolDef,
    f: F,
}

impl<F> FnTool<F>
where
    F: Fn(ToolCall) -> ToolFuture + Send + Sync + 'static,
{
    /// The tool, ready to register.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(def: ToolDef, f: F) -> Arc<dyn Tool> {
        Arc::new(FnTool { def, f })
    }
}

impl<F> Tool for FnTool<F>
where
    F: Fn(ToolCall) -> ToolFuture + Send + Sync + 'static,
{
    fn def(&self) -> ToolDef {
        self.def.clone()
    }
    fn call(&self, call: ToolCall) -> ToolFuture {
        (self.f)(call)
    }
}

/// Why a tool was refused at registration.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RegistryError {
    /// The declared name is empty.
    #[error("agentrt: tool has no name")]
    NoName,
    /// The input schema is empty or blank; holds the tool's name.
    #[error("agentrt: tool {} has no input schema", crate::runtime::json::go_quote(.0))]
    NoSchema(String),
    /// The input schema did not compile (or the spec record could not be encoded); holds the
    /// tool's name and why.
    #[error("agentrt: tool {}: {}", crate::runtime::json::go_quote(.0), .1)]
    BadSchema(String, SchemaError),
    /// The timeout is zero; holds the tool's name.
    #[error("agentrt: tool {} has no timeout; give it one greater than zero", crate::runtime::json::go_quote(.0))]
    NoTimeout(String),
    /// The side effect is not one of the four classes; holds the name and the class.
    #[error("agentrt: tool {} has an unknown side effect {}", crate::runtime::json::go_quote(.0), crate::runtime::json::go_quote(.1))]
    UnknownSideEffect(String, String),
    /// A tool of that name is already registered; holds the name.
    #[error("agentrt: tool {} is registered twice", crate::runtime::json::go_quote(.0))]
    Duplicate(String),
}

/// A registered tool: its declaration as it was at registration, the compiled schema and the
/// spec record (canonical JSON and its hash, spec 2).
pub struct Registered {
    /// The declaration read at registration.
    pub def: ToolDef,
    /// The compiled input schema every call's arguments are checked against.
    pub schema: Schema,
    /// The spec record (what a `ToolRequest` embeds).
    pub spec: ToolSpec,
    /// `tool_specs.spec_json`: canonical JSON of the spec.
    pub spec_json: Vec<u8>,
    /// `tool_specs.hash`.
    pub spec_hash: String,
    /// The tool itself.
    pub tool: Arc<dyn Tool>,
}

/// The set of tools a driver may call. Cheap to clone.
#[derive(Clone, Default)]
pub struct Registry {
    tools: BTreeMap<String, Arc<Registered>>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Registers a tool, refusing a missing name or schema, a schema that cannot be compiled or
    /// refers outside itself, a zero timeout, an unknown side effect, and a duplicate name.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let def = tool.def();
        if def.name.is_empty() {
            return Err(RegistryError::NoName);
        }
        if def.input_schema.iter().all(|b| b.is_ascii_whitespace()) {
            return Err(RegistryError::NoSchema(def.name));
        }
        if def.timeout.is_zero() {
            return Err(RegistryError::NoTimeout(def.name));
        }
        if let SideEffect::Unknown(s) = &def.side_effect {
            return Err(RegistryError::UnknownSideEffect(
                def.name.clone(),
                s.clone(),
            ));
        }
        if self.tools.contains_key(&def.name) {
            return Err(RegistryError::Duplicate(def.name));
        }
        let schema = Schema::compile(&def.input_schema)
            .map_err(|e| RegistryError::BadSchema(def.name.clone(), e))?;
        let spec = def.spec();
        let spec_json = spec.spec_json().map_err(|e| {
            RegistryError::BadSchema(def.name.clone(), SchemaError::NotJson(e.to_string()))
        })?;
        let spec_hash = json::sha256_hex(&spec_json);
        self.tools.insert(
            def.name.clone(),
            Arc::new(Registered {
                def,
                schema,
                spec,
                spec_json,
                spec_hash,
                tool,
            }),
        );
        Ok(())
    }

    /// Builder form of [`Registry::register`].
    pub fn with(mut self, tool: Arc<dyn Tool>) -> Result<Registry, RegistryError> {
        self.register(tool)?;
        Ok(self)
    }

    /// The tool registered under `name`, if any.
    pub fn get(&self, name: &str) -> Option<&Arc<Registered>> {
        self.tools.get(name)
    }

    /// Every registered tool, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Registered>> {
        self.tools.values()
    }

    /// How many tools are registered.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The spec hashes of every registered tool, by tool name (`run.created`'s `tools`).
    pub fn spec_hashes(&self) -> Vec<String> {
        self.tools.values().map(|r| r.spec_hash.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str, schema: &str, side: SideEffect, ms: u64) -> ToolDef {
        ToolDef {
            name: name.into(),
            description: "d".into(),
            input_schema: schema.as_bytes().to_vec(),
            side_effect: side,
            timeout: Duration::from_millis(ms),
            terminal: false,
        }
    }

    fn tool(d: ToolDef) -> Arc<dyn Tool> {
        FnTool::new(d, |_c| Box::pin(async { Ok(ToolOutput::default()) }))
    }

    #[test]
    fn new_driver_rejects_bad_tools() {
        let mut r = Registry::new();
        let obj = r#"{"type":"object"}"#;
        assert_eq!(
            r.register(tool(def("a", "", SideEffect::ReadOnly, 10))),
            Err(RegistryError::NoSchema("a".into()))
        );
        assert_eq!(
            r.register(tool(def("a", obj, SideEffect::ReadOnly, 0))),
            Err(RegistryError::NoTimeout("a".into()))
        );
        assert!(matches!(
            r.register(tool(def("a", obj, SideEffect::parse("sometimes"), 10))),
            Err(RegistryError::UnknownSideEffect(..))
        ));
        assert!(matches!(
            r.register(tool(def(
                "a",
                r#"{"$ref":"http://x/y"}"#,
                SideEffect::ReadOnly,
                10
            ))),
            Err(RegistryError::BadSchema(..))
        ));
        assert_eq!(
            r.register(tool(def("", obj, SideEffect::ReadOnly, 10))),
            Err(RegistryError::NoName)
        );
        assert!(r.is_empty());
        r.register(tool(def("a", obj, SideEffect::ReadOnly, 10)))
            .unwrap();
        assert_eq!(
            r.register(tool(def("a", obj, SideEffect::Destructive, 10))),
            Err(RegistryError::Duplicate("a".into()))
        );
        assert_eq!(r.len(), 1);
    }
}
