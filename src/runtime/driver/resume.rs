//! Resume (spec 8.2, 8.3).

use std::sync::Arc;

use super::ctx::RunCtx;
use super::{Inner, RuntimeError};
use crate::runtime::types::{Approval, Run, Step};

/// What a reconciliation hook decides about a run taken over after a crash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reconciliation {
    Continue,
    Completed {
        result: Vec<u8>,
        detail: String,
    },
    Conflict {
        detail: String,
    },
    Waiting {
        pause: Option<crate::runtime::types::PolicyDecision>,
        detail: String,
    },
    Unknown(String),
}

/// The crash-recovery hook (spec 8.3 step 6), handed copies of the run, steps, approvals.
pub trait Reconcile: Send + Sync + 'static {
    fn reconcile(
        &self,
        run: &Run,
        steps: &[Step],
        approvals: &[Approval],
    ) -> Result<Reconciliation, String>;
}

pub(crate) enum Attached {
    Done(Run),
    Continue(Box<RunCtx>),
}

pub(crate) async fn attach(inner: Arc<Inner>, run_id: &str) -> Result<Attached, RuntimeError> {
    let _ = (inner, run_id);
    Err(RuntimeError::Config("resume is not implemented yet".into()))
}
