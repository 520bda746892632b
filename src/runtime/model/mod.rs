//! Model accounting (spec 15): every attempt reserved as a `model_calls` row before it is
//! dispatched, its outcome recorded and charged to the run (saturating), and the run's model
//! limits projected before the call that would cross them.

mod caller;
mod fake;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;

pub use caller::ModelCaller;
pub use fake::{FakeModel, FakeReply};

/// Token usage as a provider reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Tokens the request used, cached ones included.
    pub input_tokens: i64,
    /// Tokens the model wrote.
    pub output_tokens: i64,
    /// The part of `input_tokens` served from the provider's cache (priced apart); never more
    /// than `input_tokens` in a usable report.
    pub cached_input_tokens: i64,
}

impl Usage {
    /// Go JSON of the struct (`cached_input_tokens` omitted when zero).
    pub fn go_json(&self) -> Vec<u8> {
        crate::runtime::json::gojson::Object::new()
            .int("input_tokens", self.input_tokens)
            .int("output_tokens", self.output_tokens)
            .int_opt("cached_input_tokens", self.cached_input_tokens)
            .finish()
    }

    /// Negative counts or more cached than input tokens.
    pub fn is_unusable(&self) -> bool {
        self.input_tokens < 0
            || self.output_tokens < 0
            || self.cached_input_tokens < 0
            || self.cached_input_tokens > self.input_tokens
    }
}

/// One request to a model: its JSON body and its output cap (0 = none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelRequest {
    /// The request as the provider takes it. Its length is what the input estimate is made
    /// from; the fake model keys recorded replies on its content hash.
    pub body: Vec<u8>,
    /// The most output tokens the reply may use; 0 = no cap. The caller lowers it to the
    /// run's `max_output_tokens_per_call` when that is set and smaller (or this is 0). A call
    /// still without a cap cannot be projected, so it is refused when the run has a token
    /// limit, or a cost limit and a price for the model.
    pub max_output_tokens: i64,
}

impl ModelRequest {
    /// agentrt's input estimate: len(JSON of the request)/3 + 1 tokens.
    pub fn input_estimate(&self) -> i64 {
        (self.body.len() / 3) as i64 + 1
    }
}

/// A model's reply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelReply {
    /// The reply as the provider sent it; the runtime does not read it.
    pub body: Vec<u8>,
    /// What the provider reports the call used; charged as given when usable, else the
    /// attempt is recorded as an error and charged the estimate.
    pub usage: Usage,
}

/// How an attempt failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ModelError {
    /// Worth retrying (rate limit, 5xx); nothing was served.
    #[error("{0}")]
    Transient(String),
    /// The outcome is unknown (timeout, connection lost): charged the estimate.
    #[error("{0}")]
    Ambiguous(String),
    /// The provider served an error and reported usage: charged, not retried.
    #[error("{message}")]
    Served {
        /// The provider's error message, recorded as the attempt's error.
        message: String,
        /// What the provider reports the call used (the estimate when unusable).
        usage: Usage,
    },
    /// Worth retrying, but not before `after` (a rate limit's `Retry-After`); nothing was
    /// served. A wait longer than `ModelSetup::max_retry_after` cannot fit: the call is
    /// unavailable at once.
    #[error("{message}")]
    RetryAfter {
        /// The provider's error message, recorded as the attempt's error.
        message: String,
        /// The least wait before the next attempt; a longer backoff is not shortened.
        after: Duration,
    },
    /// Not retried (bad request, auth).
    #[error("{0}")]
    Fatal(String),
    /// The provider's usage report cannot be charged: the attempt is charged the estimate and
    /// not retried; the call fails [`ModelCallError::Unavailable`].
    #[error("unusable usage: {0}")]
    UnusableUsage(String),
}

/// What [`Model::generate`] returns.
pub type ModelFuture = Pin<Box<dyn Future<Output = Result<ModelReply, ModelError>> + Send>>;

/// A model provider.
pub trait Model: Send + Sync + 'static {
    /// The model's name: recorded on each `model_calls` row and event, and the key of its
    /// price in [`ModelSetup::prices`]. Read once per attempt.
    fn name(&self) -> String;
    /// Makes one attempt. The caller enforces the attempt timeout by dropping this future,
    /// and then charges the attempt as ambiguous; the model need not time out itself.
    fn generate(&self, req: ModelRequest) -> ModelFuture;
}

/// Prices in micros per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Price {
    /// Micros per million uncached input tokens.
    pub input: i64,
    /// Micros per million cached input tokens.
    pub cached_input: i64,
    /// Micros per million output tokens.
    pub output: i64,
}

impl Price {
    /// `(input−cached)×in/1e6 + cached×cached/1e6 + output×out/1e6`, saturating, ≥ 0.
    pub fn cost(&self, u: &Usage) -> i64 {
        let part = |tokens: i64, price: i64| -> i128 {
            (tokens.max(0) as i128) * (price.max(0) as i128) / 1_000_000
        };
        let uncached = (u.input_tokens - u.cached_input_tokens).max(0);
        let total = part(uncached, self.input)
            + part(u.cached_input_tokens, self.cached_input)
            + part(u.output_tokens, self.output);
        total.clamp(0, i64::MAX as i128) as i64
    }
}

/// The model a driver's agents call, with its accounting settings.
#[derive(Clone)]
pub struct ModelSetup {
    /// The provider every accounted call goes to.
    pub model: Arc<dyn Model>,
    /// Prices by model name (a missing model is free).
    pub prices: HashMap<String, Price>,
    /// Retries after a transient or ambiguous failure (0 = none).
    pub max_retries: u32,
    /// Per-attempt timeout (zero: 2 min).
    pub attempt_timeout: Duration,
    /// First backoff (doubling).
    pub backoff: Duration,
    /// The longest `Retry-After` the caller waits (agentrt's `MaxRetryAfter`, 1 min).
    pub max_retry_after: Duration,
    /// The longest backoff between attempts (the doubling stops here; 30 s).
    pub max_backoff: Duration,
    /// How the caller waits (tokio's timer; a test passes its own to see each wait).
    pub sleep: crate::runtime::clock::Sleep,
}

impl ModelSetup {
    /// A setup with no prices (every call free) and no retries; a 2 min attempt timeout, 1 s
    /// first backoff, 30 s backoff cap, 1 min `Retry-After` cap, and tokio's timer.
    pub fn new(model: Arc<dyn Model>) -> ModelSetup {
        ModelSetup {
            model,
            prices: HashMap::new(),
            max_retries: 0,
            attempt_timeout: Duration::from_secs(120),
            backoff: Duration::from_secs(1),
            max_retry_after: Duration::from_secs(60),
            max_backoff: Duration::from_secs(30),
            sleep: crate::runtime::clock::tokio_sleep(),
        }
    }

    fn price(&self, name: &str) -> Option<Price> {
        self.prices.get(name).copied()
    }
}

/// Why an accounted call failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ModelCallError {
    /// A model limit (`limit_model_calls`, `limit_tokens`, `limit_cost`): `<reason>: <detail>`.
    /// Also the run's elapsed or active time limit (`limit_elapsed_time`, `limit_active_time`)
    /// when no time is left for an attempt. Nothing was dispatched for the refused attempt. If
    /// the agent then returns an error, the run ends with `reason`.
    #[error("{reason}: {detail}")]
    Limit {
        /// The run's end reason (spec 3.3), e.g. `limit_tokens`.
        reason: String,
        /// What was reached, e.g. `projected tokens 1200 exceed limit 1000`.
        detail: String,
    },
    /// agentrt's `ErrModelUnavailable`: the last attempt failed and no other may be made (not
    /// retryable, retries used up, or the wait would pass `max_retry_after` or a time limit).
    /// If the agent then returns an error, the run ends `model_unavailable`.
    #[error("model unavailable after {attempts} attempt(s): {last}")]
    Unavailable {
        /// How many attempts this call made.
        attempts: u32,
        /// The last attempt's error.
        last: String,
    },
    /// The run's lease lapsed or was taken before an attempt could be dispatched; holds which
    /// run (or the store's account of it).
    #[error("agentrt: run lease lost: {0}")]
    LeaseLost(String),
    /// Reading or writing the database failed; holds the store error's text.
    #[error("{0}")]
    Store(String),
}

impl From<crate::runtime::store::StoreError> for ModelCallError {
    fn from(e: crate::runtime::store::StoreError) -> Self {
        ModelCallError::Store(e.to_string())
    }
}
