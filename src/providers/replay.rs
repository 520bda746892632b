//! Replay (spec §11): record a live run's model exchanges to an owner-only directory, and
//! serve them back by the request's key, byte for byte and offline.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::value::RawValue;

use super::wire::{ChatRequest, ChatResponse};
use crate::runtime::json::{canonical_json, gojson, sha256_hex};
use crate::runtime::model::{Model, ModelError, ModelFuture, ModelRequest};

/// The replay key: hex SHA-256 of the canonical JSON of `{"model":…,"request":…}`, the
/// request in its Go JSON (keys sorted, numbers as written, HTML characters escaped as Go
/// does).
pub fn key(model: &str, request: &ChatRequest) -> Result<String, String> {
    let req = request.go_json().map_err(|e| format!("replay: {e}"))?;
    let mut o = gojson::Object::new();
    o.str("model", model).encoded("request", &req);
    Ok(sha256_hex(&canonical_json(&o.finish())))
}

fn file_name(key: &str, n: usize) -> String {
    if n <= 1 {
        format!("{key}.json")
    } else {
        format!("{key}.{n}.json")
    }
}

/// Wraps a model and writes each successful exchange to `dir` (errors pass through
/// unrecorded). The directory is created `0700` (an existing one is tightened to it); each
/// file is written `0600` through a new file of the recorder's own making, synced, then
/// renamed into place.
pub struct Recorder {
    inner: Arc<dyn Model>,
    dir: PathBuf,
    seen: Arc<Mutex<HashMap<String, usize>>>,
}

impl Recorder {
    pub fn new(inner: Arc<dyn Model>, dir: &Path) -> Result<Recorder, String> {
        owner_only_dir(dir)?;
        Ok(Recorder {
            inner,
            dir: dir.to_path_buf(),
            seen: Arc::new(Mutex::new(HashMap::new())),
        })
    }
}

#[cfg(unix)]
fn owner_only_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let e = |e: std::io::Error| format!("replay: {}: {e}", dir.display());
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(e)?;
    let m = std::fs::symlink_metadata(dir).map_err(e)?;
    if !m.is_dir() {
        return Err(format!("replay: {} is not a directory", dir.display()));
    }
    if m.uid() != euid() {
        return Err(format!("replay: {} belongs to another user", dir.display()));
    }
    if m.mode() & 0o777 != 0o700 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(e)?;
    }
    Ok(())
}

#[cfg(unix)]
fn euid() -> u32 {
    // The owner of a file this process just made is this process's effective user.
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(not(unix))]
fn owner_only_dir(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("replay: {}: {e}", dir.display()))
}

#[derive(Serialize)]
struct Recording<'a> {
    model: &'a str,
    request: &'a RawValue,
    response: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    raw_bytes: Option<String>,
}

fn write_recording(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), String> {
    use rand::RngCore;
    let mut r = [0u8; 12];
    rand::rng().fill_bytes(&mut r);
    let tmp = dir.join(format!(".{}.tmp", hex::encode(r)));
    let e = |e: std::io::Error| format!("replay: {}: {e}", tmp.display());
    let mut opts = std::fs::OpenOptions::new();
    // create_new: a name planted in advance (a symlink too) is never opened, let alone
    // written through.
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(&tmp).map_err(e)?;
    let done = f
        .write_all(bytes)
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, dir.join(name)));
    if let Err(err) = done {
        let _ = std::fs::remove_file(&tmp);
        return Err(e(err));
    }
    Ok(())
}

fn record(
    dir: &Path,
    seen: &Mutex<HashMap<String, usize>>,
    model: &str,
    chat: &ChatRequest,
    resp: &ChatResponse,
) -> Result<(), String> {
    let k = key(model, chat)?;
    let n = {
        let mut s = seen.lock().unwrap_or_else(|e| e.into_inner());
        let n = s.entry(k.clone()).or_insert(0);
        *n += 1;
        *n
    };
    if n == 1 {
        // Re-recording leaves nothing stale: the older `<key>.<n>.json` files go.
        if let Ok(rd) = std::fs::read_dir(dir) {
            for ent in rd.flatten() {
                let name = ent.file_name().to_string_lossy().into_owned();
                if name.starts_with(&format!("{k}."))
                    && name.ends_with(".json")
                    && name != format!("{k}.json")
                {
                    let _ = std::fs::remove_file(ent.path());
                }
            }
        }
    }
    let req = chat.go_json().map_err(|e| format!("replay: {e}"))?;
    let res = resp.go_json(false).map_err(|e| format!("replay: {e}"))?;
    let req = RawValue::from_string(String::from_utf8_lossy(&req).into_owned())
        .map_err(|e| format!("replay: {e}"))?;
    let res = RawValue::from_string(String::from_utf8_lossy(&res).into_owned())
        .map_err(|e| format!("replay: {e}"))?;
    let rec = Recording {
        model,
        request: &req,
        response: &res,
        raw_bytes: (!resp.raw.is_empty()).then(|| String::from_utf8_lossy(&resp.raw).into_owned()),
    };
    let mut bytes = serde_json::to_vec_pretty(&rec).map_err(|e| format!("replay: {e}"))?;
    bytes.push(b'\n');
    write_recording(dir, &file_name(&k, n), &bytes)
}

impl Model for Recorder {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn generate(&self, req: ModelRequest) -> ModelFuture {
        let fut = self.inner.generate(req.clone());
        let (dir, seen, model) = (self.dir.clone(), self.seen.clone(), self.inner.name());
        Box::pin(async move {
            let reply = fut.await?;
            let chat = ChatRequest::from_model_request(&req).map_err(ModelError::Fatal)?;
            let resp = ChatResponse::decode(&reply.body).map_err(ModelError::Fatal)?;
            // A recording that cannot be written fails the attempt: a replay that silently
            // lacks it would be worse. The call was served, so it is charged.
            record(&dir, &seen, &model, &chat, &resp).map_err(|message| ModelError::Served {
                message,
                usage: reply.usage,
            })?;
            Ok(reply)
        })
    }
}

/// Serves recorded exchanges: `<key>.json`, then `<key>.2.json`, … for identical requests.
pub struct Replayer {
    name: String,
    dir: PathBuf,
    served: Mutex<HashMap<String, usize>>,
}

impl Replayer {
    pub fn new(model_name: &str, dir: &Path) -> Replayer {
        Replayer {
            name: model_name.into(),
            dir: dir.to_path_buf(),
            served: Mutex::new(HashMap::new()),
        }
    }

    fn serve(&self, req: &ModelRequest) -> Result<crate::runtime::model::ModelReply, ModelError> {
        let chat = ChatRequest::from_model_request(req).map_err(ModelError::Fatal)?;
        let k = key(&self.name, &chat).map_err(ModelError::Fatal)?;
        let n = {
            let mut s = self.served.lock().unwrap_or_else(|e| e.into_inner());
            let n = s.entry(k.clone()).or_insert(0);
            *n += 1;
            *n
        };
        let path = self.dir.join(file_name(&k, n));
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let short = &k[..12];
                return Err(ModelError::Fatal(if n == 1 {
                    format!("replay: no recorded response for this request (key {short})")
                } else {
                    format!(
                        "replay: no recorded response for this request (key {short}: recorded {} times, requested {n})",
                        n - 1
                    )
                }));
            }
            Err(e) => {
                return Err(ModelError::Fatal(format!(
                    "replay: {}: {e}",
                    path.display()
                )));
            }
        };
        #[derive(serde::Deserialize)]
        struct Rec {
            response: Box<RawValue>,
            raw_bytes: Option<String>,
        }
        let rec: Rec = serde_json::from_slice(&bytes)
            .map_err(|e| ModelError::Fatal(format!("replay: {}: {e}", path.display())))?;
        let mut resp = ChatResponse::decode(rec.response.get().as_bytes())
            .map_err(|e| ModelError::Fatal(format!("replay: {}: {e}", path.display())))?;
        if let Some(raw) = rec.raw_bytes {
            resp.raw = raw.into_bytes();
        }
        resp.to_model_reply()
            .map_err(|e| ModelError::Fatal(format!("replay: {e}")))
    }
}

impl Model for Replayer {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn generate(&self, req: ModelRequest) -> ModelFuture {
        let out = self.serve(&req);
        Box::pin(async move { out })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::wire::{ContentBlock, Message};
    use crate::runtime::types::ToolSpec;

    #[test]
    fn key_is_pinned_and_large_integers_do_not_collide() {
        let req = ChatRequest {
            system: "sys <b> & co".into(),
            max_output_tokens: 4096,
            tools: vec![ToolSpec {
                name: "read".into(),
                description: "d".into(),
                input_schema:
                    br#"{"type":"object","properties":{"n":{"type":"integer","maximum":100}}}"#
                        .to_vec(),
                side_effect: "read_only".into(),
                timeout_ns: 0,
                terminal: false,
            }],
            messages: vec![
                Message::user(vec![ContentBlock::text("hello é 🙂")]),
                Message::assistant(vec![ContentBlock::tool_use(
                    "t1",
                    "read",
                    br#"{"n":42,"f":0.5}"#,
                )]),
            ],
        };
        assert_eq!(
            key("claude-opus-5", &req).unwrap(),
            "8b7c5f45e2045e72856cd3d8b8a6a559cce84ca6ee2967fbebe279c80609078e"
        );
        let with = |n: &str| ChatRequest {
            messages: vec![Message::assistant(vec![ContentBlock::tool_use(
                "t",
                "x",
                format!("{{\"n\":{n}}}").as_bytes(),
            )])],
            ..ChatRequest::default()
        };
        assert_ne!(
            key("m", &with("9007199254740993")).unwrap(),
            key("m", &with("9007199254740992")).unwrap()
        );
    }
}
