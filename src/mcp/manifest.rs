//! The pin file (agentrt mcp 1.7): per tool the canonical schema, its hash, the description
//! as the server sent it and its hash, and the annotations as sent.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::canonical::json_string;
use super::owned::read_owned;

/// The hints a server may attach to a tool (the MCP `ToolAnnotations`). They can only refuse a
/// classification, never relax one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Annotations {
    #[serde(rename = "destructiveHint", default)]
    pub destructive_hint: Option<bool>,
    #[serde(rename = "idempotentHint", default)]
    pub idempotent_hint: Option<bool>,
    #[serde(rename = "openWorldHint", default)]
    pub open_world_hint: Option<bool>,
    #[serde(rename = "readOnlyHint", default)]
    pub read_only_hint: Option<bool>,
    #[serde(default)]
    pub title: Option<String>,
}

impl Annotations {
    /// As agentrt's manifest writes them: the Go SDK's field order, `readOnlyHint` and
    /// `idempotentHint` omitted unless true, the pointer hints kept when sent, `title` omitted
    /// when empty.
    pub fn to_json(&self) -> Vec<u8> {
        let mut parts: Vec<Vec<u8>> = Vec::new();
        let b = |v: bool| if v { "true" } else { "false" };
        if let Some(v) = self.destructive_hint {
            parts.push(format!("\"destructiveHint\":{}", b(v)).into_bytes());
        }
        if self.idempotent_hint == Some(true) {
            parts.push(b"\"idempotentHint\":true".to_vec());
        }
        if let Some(v) = self.open_world_hint {
            parts.push(format!("\"openWorldHint\":{}", b(v)).into_bytes());
        }
        if self.read_only_hint == Some(true) {
            parts.push(b"\"readOnlyHint\":true".to_vec());
        }
        if let Some(t) = self.title.as_deref().filter(|t| !t.is_empty()) {
            let mut p = b"\"title\":".to_vec();
            p.extend_from_slice(&json_string(t));
            parts.push(p);
        }
        let mut out = b"{".to_vec();
        out.extend_from_slice(&parts.join(&b","[..]));
        out.push(b'}');
        out
    }
}

/// One pinned tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedTool {
    pub name: String,
    pub description: String,
    /// The canonical schema bytes.
    pub input_schema: Vec<u8>,
    pub schema_hash: String,
    pub description_hash: String,
    pub annotations: Option<Annotations>,
}

/// A server's pin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub server: String,
    /// RFC3339Nano, UTC.
    pub pinned_at: String,
    pub tools: BTreeMap<String, PinnedTool>,
}

#[derive(Deserialize)]
struct FileManifest {
    #[serde(default)]
    server: String,
    #[serde(default)]
    pinned_at: String,
    #[serde(default)]
    tools: BTreeMap<String, FileTool>,
}

#[derive(Deserialize)]
struct FileTool {
    #[serde(default)]
    name: String,
    #[serde(default)]
    description: String,
    input_schema: Option<Box<RawValue>>,
    #[serde(default)]
    schema_hash: String,
    #[serde(default)]
    description_hash: String,
    annotations: Option<Annotations>,
}

impl Manifest {
    /// The manifest file's bytes: two-space indented JSON and a newline, keys as agentrt's
    /// manifest orders them (tools sorted by name).
    pub fn to_file_bytes(&self) -> Vec<u8> {
        let mut o = Vec::new();
        let w = |o: &mut Vec<u8>, s: &str| o.extend_from_slice(s.as_bytes());
        w(&mut o, "{\n  \"server\": ");
        o.extend_from_slice(&json_string(&self.server));
        w(&mut o, ",\n  \"pinned_at\": ");
        o.extend_from_slice(&json_string(&self.pinned_at));
        w(&mut o, ",\n  \"tools\": {");
        for (n, (key, t)) in self.tools.iter().enumerate() {
            w(&mut o, if n == 0 { "\n    " } else { ",\n    " });
            o.extend_from_slice(&json_string(key));
            w(&mut o, ": {\n      \"name\": ");
            o.extend_from_slice(&json_string(&t.name));
            w(&mut o, ",\n      \"description\": ");
            o.extend_from_slice(&json_string(&t.description));
            w(&mut o, ",\n      \"input_schema\": ");
            o.extend_from_slice(&t.input_schema);
            w(&mut o, ",\n      \"schema_hash\": ");
            o.extend_from_slice(&json_string(&t.schema_hash));
            w(&mut o, ",\n      \"description_hash\": ");
            o.extend_from_slice(&json_string(&t.description_hash));
            if let Some(a) = &t.annotations {
                w(&mut o, ",\n      \"annotations\": ");
                o.extend_from_slice(&a.to_json());
            }
            w(&mut o, "\n    }");
        }
        w(
            &mut o,
            if self.tools.is_empty() {
                "}\n}\n"
            } else {
                "\n  }\n}\n"
            },
        );
        o
    }

    /// Parses a manifest: the runtime's boundary check first (a repeated key could read two
    /// ways), then a lenient decode (unknown fields ignored, as agentrt reads it).
    pub fn parse(bytes: &[u8]) -> Result<Manifest, String> {
        crate::runtime::json::check_json(bytes).map_err(|e| format!("not usable JSON: {e}"))?;
        let f: FileManifest = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let tools = f
            .tools
            .into_iter()
            .map(|(k, t)| {
                let schema = t
                    .input_schema
                    .map(|r| r.get().as_bytes().to_vec())
                    .unwrap_or_else(|| b"null".to_vec());
                // Stored canonical; re-canonicalised so a hand-indented file compares the same.
                let input_schema = super::canonical::canonical_schema(&schema)
                    .map_err(|e| format!("tool {}: input_schema: {e}", super::quote(&k)))?;
                Ok((
                    k,
                    PinnedTool {
                        name: t.name,
                        description: t.description,
                        input_schema,
                        schema_hash: t.schema_hash,
                        description_hash: t.description_hash,
                        annotations: t.annotations,
                    },
                ))
            })
            .collect::<Result<_, String>>()?;
        Ok(Manifest {
            server: f.server,
            pinned_at: f.pinned_at,
            tools,
        })
    }

    /// Reads a manifest file the current user owns and only they can write.
    pub fn read(path: &Path) -> Result<Manifest, String> {
        let bytes = read_owned(path)?;
        Manifest::parse(&bytes).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Writes the manifest owner-only (0600, also when the file existed), through a temporary
    /// file renamed over the old one so a reader never sees half a pin.
    pub fn write(&self, path: &Path) -> Result<(), String> {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let shown = path.display();
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        let name = path
            .file_name()
            .ok_or_else(|| format!("{shown}: not a file name"))?;
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".{}.tmp", std::process::id()));
        let tmp = match dir {
            Some(d) => d.join(&tmp_name),
            None => std::path::PathBuf::from(&tmp_name),
        };
        let res = (|| {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
            f.write_all(&self.to_file_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        if let Err(e) = res {
            let _ = std::fs::remove_file(&tmp);
            return Err(format!("{shown}: {e}"));
        }
        Ok(())
    }
}
