//! Run, step and approval statuses (spec 3.1, 3.2, 4.1). A database may hold anything, so each
//! has an `Unknown` arm carrying the stored text.

macro_rules! status_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)*
            /// A value this build does not know, as stored.
            Unknown(String),
        }

        impl $name {
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

        impl Default for $name {
            fn default() -> Self {
                $name::Unknown(String::new())
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
        for s in [
            "RUNNING",
            "WAITING_FOR_APPROVAL",
            "INTERRUPTED",
            "COMPLETED",
            "FAILED",
            "CANCELLED",
        ] {
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
