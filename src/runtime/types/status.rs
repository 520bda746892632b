//! Run, step and approval statuses (spec 3.1, 3.2, 4.1), and the closed vocabularies inside the
//! stored JSON shapes (a decision's kind and origin, a policy's outcome). A database may hold
//! anything, so each has an `Unknown` arm carrying the stored text: reading and writing it back
//! gives the same bytes.

macro_rules! status_enum {
    // `default X`: the value `Default` gives (otherwise `Unknown("")`, a value not stored).
    ($(#[$doc:meta])* $name:ident $(default $default:ident)? { $($(#[$vdoc:meta])* $variant:ident = $text:literal),* $(,)? }) => {
        status_enum!(@def $(#[$doc])* $name { $($(#[$vdoc])* $variant = $text),* });

        impl Default for $name {
            fn default() -> Self {
                status_enum!(@default $name $($default)?)
            }
        }
    };
    (@default $name:ident) => { $name::Unknown(String::new()) };
    (@default $name:ident $default:ident) => { $name::$default };
    (@def $(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal),* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)*
            /// A value this build does not know, as stored.
            Unknown(String),
        }

        impl $name {
            /// Every stored text this build knows, in the order the spec lists them.
            pub const KNOWN: &[&str] = &[$($text),*];

            /// The stored text.
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$variant => $text,)*
                    $name::Unknown(s) => s,
                }
            }

            /// From the stored text (never fails).
            pub fn parse(s: &str) -> Self {
                match s {
                    $($text => $name::$variant,)*
                    other => $name::Unknown(other.to_string()),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        /// Compares the stored text (`Unknown` included), e.g. `kind == "tool_call"`.
        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl From<&str> for $name {
            /// As [`Self::parse`].
            fn from(s: &str) -> Self {
                Self::parse(s)
            }
        }

        /// As the stored text.
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Ok(match Self::parse(&s) {
                    $name::Unknown(_) => $name::Unknown(s),
                    known => known,
                })
            }
        }
    };
}

status_enum!(
    /// `runs.status`.
    RunStatus {
        /// Stepping, or ready to step.
        Running = "RUNNING",
        /// Paused until a reviewer decides its pending approval.
        WaitingForApproval = "WAITING_FOR_APPROVAL",
        /// Never written by the runtime; accepted by Resume and Cancel like RUNNING.
        Interrupted = "INTERRUPTED",
        /// Ended: the agent completed.
        Completed = "COMPLETED",
        /// Ended: failed (see `reason`).
        Failed = "FAILED",
        /// Ended: an operator cancelled it.
        Cancelled = "CANCELLED",
    }
);

status_enum!(
    /// `steps.status`.
    StepStatus {
        /// The agent is deciding what to do.
        Deciding = "deciding",
        /// The tool call waits for a reviewer.
        AwaitingApproval = "awaiting_approval",
        /// The tool call is running.
        Executing = "executing",
        /// Finished with an observation.
        Done = "done",
        /// Finished without a usable observation.
        Failed = "failed",
        /// Cut short by a crash or cancel.
        Interrupted = "interrupted",
    }
);

status_enum!(
    /// `approvals.status`.
    ApprovalStatus {
        /// Not decided yet.
        Pending = "pending",
        /// A reviewer approved it.
        Approved = "approved",
        /// A reviewer rejected it.
        Rejected = "rejected",
        /// It expired before anyone decided.
        Expired = "expired",
    }
);

status_enum!(
    /// `Decision.kind`: what the agent decided to do. Any other kind is an invalid decision
    /// (the step fails `invalid_decision`); it is kept as written.
    DecisionKind {
        /// Call a registered tool with arguments.
        ToolCall = "tool_call",
        /// End the run COMPLETED, with an optional result.
        Complete = "complete",
        /// End the run FAILED, with a message.
        Fail = "fail",
    }
);

status_enum!(
    /// `Decision.origin`: who made the decision. Absent (empty, left out of the JSON) is
    /// valid; any other text makes the decision invalid and is kept as written.
    Origin default Absent {
        /// Not stated (the JSON has no `origin`).
        Absent = "",
        /// The model chose it.
        Model = "model",
        /// A plan chose it.
        Plan = "plan",
        /// An operator chose it.
        Operator = "operator",
    }
);

status_enum!(
    /// `PolicyDecision.outcome`: the four outcomes, and whatever else a policy might say
    /// (which fails the run `internal_error`, "unknown policy outcome", and runs nothing).
    Outcome {
        /// `allow`: the tool call runs now.
        Allow = "allow",
        /// `deny`: the call does not run; the step fails (`policy_denied`) and the run goes on.
        Deny = "deny",
        /// `abort`: the call does not run and the run ends FAILED (`policy_abort`).
        Abort = "abort",
        /// `require_approval`: the run pauses until an operator decides (spec 4.3).
        RequireApproval = "require_approval",
    }
);

impl RunStatus {
    /// COMPLETED, FAILED or CANCELLED.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip_and_keep_unknown_text() {
        for &s in RunStatus::KNOWN {
            assert_eq!(RunStatus::parse(s).as_str(), s);
            assert!(!matches!(RunStatus::parse(s), RunStatus::Unknown(_)));
        }
        assert_eq!(
            RunStatus::parse("CREATED"),
            RunStatus::Unknown("CREATED".into())
        );
        assert_eq!(
            StepStatus::parse("awaiting_approval"),
            StepStatus::AwaitingApproval
        );
        assert_eq!(ApprovalStatus::parse("expired"), ApprovalStatus::Expired);
        assert!(RunStatus::Cancelled.is_terminal() && !RunStatus::Interrupted.is_terminal());
    }
}
