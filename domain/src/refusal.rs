//! Why a workflow or an activity declined a call (a workspace tool call, an edit-session command,
//! an admission): a reason from a closed list and a message for the caller. Workflows carry these
//! as values; the API alone decides which HTTP status each reason answers with, in one table.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The reason, serialized as its stable error code (`workspace_cap`, `sandbox_cap`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalReason {
    /// The thing named does not exist (or is not the caller's).
    NotFound,
    /// The request broke a rule about one of its fields.
    InvalidField,
    /// The project's canonical repository is not provisioned yet.
    ProjectNotReady,
    /// A task this one depends on has published no ChangeSet yet.
    StackUnpublished,
    /// The stacked ChangeSets do not merge.
    StackConflict,
    /// The Change already has as many open workspaces as it may.
    WorkspaceCap,
    /// The project's monthly Sandbox meter would pass its cap.
    SandboxCap,
    /// The Sandbox could not be reached; the same call may succeed later.
    SandboxUnavailable,
    /// The Sandbox was lost while the call ran; what it did may be gone.
    SandboxLost,
    /// The workspace is not open (it ended, or is closing).
    WorkspaceClosed,
    /// The workspace could not be opened (the checkout or the install failed).
    WorkspaceOpenFailed,
    /// The workspace's Sandbox was lost with unpublished edits.
    WorkspaceLost,
    /// A publish found no change to publish.
    NothingToPublish,
    /// The edit session has ended.
    SessionEnded,
}

impl RefusalReason {
    /// The stable code clients match on.
    pub fn code(self) -> &'static str {
        match self {
            RefusalReason::NotFound => "not_found",
            RefusalReason::InvalidField => "invalid_field",
            RefusalReason::ProjectNotReady => "project_not_ready",
            RefusalReason::StackUnpublished => "stack_unpublished",
            RefusalReason::StackConflict => "stack_conflict",
            RefusalReason::WorkspaceCap => "workspace_cap",
            RefusalReason::SandboxCap => "sandbox_cap",
            RefusalReason::SandboxUnavailable => "sandbox_unavailable",
            RefusalReason::SandboxLost => "sandbox_lost",
            RefusalReason::WorkspaceClosed => "workspace_closed",
            RefusalReason::WorkspaceOpenFailed => "workspace_open_failed",
            RefusalReason::WorkspaceLost => "workspace_lost",
            RefusalReason::NothingToPublish => "nothing_to_publish",
            RefusalReason::SessionEnded => "session_ended",
        }
    }
}

impl fmt::Display for RefusalReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// A declined call. Serialized as `{"code": …, "message": …}`; histories recorded before the
/// reason became an enum also carry an HTTP `status`, which is ignored when they are read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    #[serde(rename = "code")]
    pub reason: RefusalReason,
    pub message: String,
}

impl Refusal {
    pub fn new(reason: RefusalReason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_serializes_as_its_code_and_message() {
        let r = Refusal::new(RefusalReason::WorkspaceCap, "4 open");
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            serde_json::json!({"code": "workspace_cap", "message": "4 open"})
        );
    }

    #[test]
    fn a_refusal_recorded_with_an_http_status_still_reads() {
        let old = r#"{"status":429,"code":"sandbox_cap","message":"cap"}"#;
        let r: Refusal = serde_json::from_str(old).unwrap();
        assert_eq!(r, Refusal::new(RefusalReason::SandboxCap, "cap"));
    }

    #[test]
    fn every_reasons_code_is_its_serialized_name() {
        for reason in [
            RefusalReason::NotFound,
            RefusalReason::InvalidField,
            RefusalReason::ProjectNotReady,
            RefusalReason::StackUnpublished,
            RefusalReason::StackConflict,
            RefusalReason::WorkspaceCap,
            RefusalReason::SandboxCap,
            RefusalReason::SandboxUnavailable,
            RefusalReason::SandboxLost,
            RefusalReason::WorkspaceClosed,
            RefusalReason::WorkspaceOpenFailed,
            RefusalReason::WorkspaceLost,
            RefusalReason::NothingToPublish,
            RefusalReason::SessionEnded,
        ] {
            assert_eq!(serde_json::to_value(reason).unwrap(), serde_json::json!(reason.code()));
        }
    }
}
