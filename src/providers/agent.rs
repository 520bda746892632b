//! An agent on a model: each step renders the run as a conversation, calls the model through
//! the step's accounted handle, and turns the reply into a decision (render layer).

use super::render::{self, Options};
use super::wire::{ChatRequest, ChatResponse};
use crate::runtime::agent::{Agent, DecideFuture, StepInput};

/// The agent. It never decides `complete`: the run ends through a terminal tool.
pub struct ModelAgent {
    pub options: Options,
    pub system: String,
    /// The output cap of each request (0: the run's per-call cap, else none).
    pub max_output_tokens: i64,
}

impl ModelAgent {
    /// The request this agent sends for a step.
    pub fn request(&self, input: &StepInput) -> ChatRequest {
        ChatRequest {
            system: self.system.clone(),
            messages: render::messages(input, &self.options),
            tools: input.tools.clone(),
            max_output_tokens: self.max_output_tokens,
        }
    }
}

impl Agent for ModelAgent {
    fn decide(&self, input: StepInput) -> DecideFuture {
        let req = self.request(&input).to_model_request();
        Box::pin(async move {
            let model = input
                .model
                .clone()
                .ok_or_else(|| "the driver has no model configured".to_string())?;
            let req = req.map_err(|e| format!("the request does not encode: {e}"))?;
            let reply = model.call(req).await.map_err(|e| e.to_string())?;
            let resp = ChatResponse::decode(&reply.body)?;
            Ok(render::decide(&resp))
        })
    }
}
