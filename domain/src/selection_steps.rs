//! What the steps of sibling selection hand each other: the claim's result with the Evidence
//! snapshot a tie shows the Integration Judge, and what applying the selection did.

use crate::ids::{CandidateId, EvidenceId, TaskId};
use serde::{Deserialize, Serialize};

/// What one Candidate of a tie shows the Integration Judge: its Evidence summaries and its
/// acceptance results, nothing it would have to fetch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JudgeSnapshotEntry {
    pub candidate_id: CandidateId,
    pub evidence: Vec<SnapshotEvidence>,
    pub acceptance: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotEvidence {
    pub id: EvidenceId,
    pub check_id: String,
    pub status: String,
    pub coverage: String,
    pub summary: String,
}

/// Where a run stands after the claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum SelectionStep {
    /// The Candidate has no siblings: the promotion path alone.
    NoSiblings,
    /// A sibling still composes or verifies: the last one selects.
    Pending,
    /// Another run holds the claim, or the group is decided.
    Stopped,
    /// This run holds the claim; `tie` is what the Judge decides on, if anything.
    Claimed {
        anchor: CandidateId,
        tie: Option<Vec<JudgeSnapshotEntry>>,
    },
}

/// What applying a selection did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum SelectionDone {
    /// `held`: the winner waits for a person (acceptance hold); `repair`: a repair Task was added.
    Winner {
        id: CandidateId,
        held: Option<String>,
        repair: Option<TaskId>,
    },
    AwaitingPerson {
        reason: String,
    },
    Failed,
    Repair {
        task: TaskId,
    },
    /// Another run applied it first.
    AlreadyApplied,
}
