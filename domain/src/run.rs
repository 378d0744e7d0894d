//! Runs: one completed job's recorded result, identified by its cell.

use crate::catalogue::TestType;
use crate::ids::{AccountId, JobId, RunId};
use crate::job::{CasePin, Combination};
use crate::review::{JamCategory, Rating};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// An artifact a run kept, in the object store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    pub path: String,
    pub key: String,
    pub size: u64,
}

/// A run as stored and shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Run {
    pub id: RunId,
    pub job_id: JobId,
    pub case: CasePin,
    pub combination: Combination,
    pub gg_config_name: Option<String>,
    pub cell_key: String,
    pub test_type: TestType,
    pub loaded: bool,
    pub artifacts: Vec<Artifact>,
    pub completed_at: i64,
    /// A standard run's worst domain rating across every reviewer (`broken` … `flawless`); for
    /// display only. Null for other runs and before the first review.
    pub rating: Option<Rating>,
    /// A game-jam run's worst category across every reviewer (`poop` … `diamond`); for display
    /// only. Null for other runs and before the first review.
    pub category: Option<JamCategory>,
    pub review_count: i64,
    /// Set when the agent failed the task (its adapter's failure class `task`): the adapter's
    /// message. Such a run is a failed result, counted as evidence like any other.
    #[serde(default)]
    pub task_failure: Option<String>,
}

/// One account's review of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Review {
    pub run_id: RunId,
    pub account_id: AccountId,
    pub ratings: Option<BTreeMap<String, Rating>>,
    pub category: Option<JamCategory>,
    pub note: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}
