//! The runtime's types: statuses, the JSON shapes of spec section 2 (Go-JSON encodings), the
//! database rows, and Go-compatible timestamps.

mod key;
mod money;
mod records;
mod said;
mod status;
pub(crate) mod time;
mod values;

pub use key::{AsKey, Key, lossy};
pub use money::dollars;
pub(crate) use records::push_decode_error;
pub use records::{Approval, Event, Lease, RawInvalid, Run, Step, stored};
pub use said::Said;
pub use status::{ApprovalStatus, DecisionKind, Origin, Outcome, RunStatus, StepStatus};
pub use time::{TimeError, Timestamp};
pub use values::{Decision, Limits, Observation, PolicyDecision, ToolRequest, ToolSpec};
