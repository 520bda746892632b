//! A deterministic model for tests and the demo: replies replayed from a recording, keyed by
//! the content hash of the request body (identical requests keep their order), else from a
//! plain script. No network.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use super::{Model, ModelError, ModelFuture, ModelReply, ModelRequest};
use crate::runtime::json::content_hash;

/// One scripted answer: a reply or an error, optionally after a delay.
#[derive(Debug, Clone)]
pub struct FakeReply {
    /// What the attempt returns.
    pub result: Result<ModelReply, ModelError>,
    /// How long the attempt sleeps (on tokio's timer) before returning it.
    pub delay: Duration,
}

impl FakeReply {
    /// A reply with `body` and `usage`, at once.
    pub fn ok(body: &str, usage: super::Usage) -> FakeReply {
        FakeReply {
            result: Ok(ModelReply {
                body: body.as_bytes().to_vec(),
                usage,
            }),
            delay: Duration::ZERO,
        }
    }
    /// An attempt that fails with `e`, at once.
    pub fn err(e: ModelError) -> FakeReply {
        FakeReply {
            result: Err(e),
            delay: Duration::ZERO,
        }
    }
    /// The same answer, given after `d`.
    pub fn after(mut self, d: Duration) -> FakeReply {
        self.delay = d;
        self
    }
}

/// The fake model.
pub struct FakeModel {
    name: String,
    script: Mutex<VecDeque<FakeReply>>,
    recorded: Mutex<HashMap<String, VecDeque<FakeReply>>>,
    seen: Mutex<Vec<ModelRequest>>,
}

impl FakeModel {
    /// A model named `name` that answers from `script` in order once no recorded reply
    /// matches; when both are used up an attempt fails with a `Fatal` error.
    pub fn new(name: &str, script: Vec<FakeReply>) -> FakeModel {
        FakeModel {
            name: name.into(),
            script: Mutex::new(script.into()),
            recorded: Mutex::new(HashMap::new()),
            seen: Mutex::new(Vec::new()),
        }
    }

    /// Records a reply for a request body (replayed in order for identical bodies).
    pub fn record(&self, body: &[u8], reply: FakeReply) {
        self.recorded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(content_hash(body))
            .or_default()
            .push_back(reply);
    }

    /// The requests seen so far.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Model for FakeModel {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn generate(&self, req: ModelRequest) -> ModelFuture {
        let key = content_hash(&req.body);
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(req);
        let replayed = self
            .recorded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&key)
            .and_then(|q| q.pop_front());
        let next = replayed.or_else(|| {
            self.script
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front()
        });
        Box::pin(async move {
            match next {
                Some(r) => {
                    if !r.delay.is_zero() {
                        tokio::time::sleep(r.delay).await;
                    }
                    r.result
                }
                None => Err(ModelError::Fatal(
                    "fake model: no recorded reply for this request".into(),
                )),
            }
        })
    }
}
