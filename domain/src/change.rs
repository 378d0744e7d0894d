//! Changes, Tasks, task runs and ChangeSets: what agents produce against a project, and what
//! Candidates are composed from.

use crate::ids::{ChangeId, ChangeSetId, ProjectId, TaskId, TaskRunId};
use crate::validation::{ValidationError, check_object_id, check_slug, check_text};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// How much a Change could break, least first: the order is what "stricter" means when a policy
/// leaves a tier out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum RiskTier {
    Low,
    Medium,
    High,
    Critical,
}

impl RiskTier {
    /// Every tier, least strict first.
    pub const ALL: [RiskTier; 4] = [RiskTier::Low, RiskTier::Medium, RiskTier::High, RiskTier::Critical];

    pub fn as_str(self) -> &'static str {
        match self {
            RiskTier::Low => "low",
            RiskTier::Medium => "medium",
            RiskTier::High => "high",
            RiskTier::Critical => "critical",
        }
    }
}

/// Where a Change is: `running` while its Tasks work, `verifying` while Candidates are checked,
/// `awaiting_approval` when a person must decide; `promoted`, `failed` and `cancelled` end it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ChangeStatus {
    Running,
    Verifying,
    AwaitingApproval,
    Promoted,
    Failed,
    Cancelled,
}

impl ChangeStatus {
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            ChangeStatus::Promoted | ChangeStatus::Failed | ChangeStatus::Cancelled
        )
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChangeInput {
    pub goal: String,
    #[serde(default)]
    pub acceptance_criteria: Vec<String>,
    #[serde(default)]
    pub invariants: Vec<String>,
    #[serde(default)]
    pub risk_tier: Option<RiskTier>,
}

pub(crate) fn check_lines(field: &str, lines: &[String]) -> Result<(), ValidationError> {
    if lines.len() > 100 {
        return Err(ValidationError::new(field, "must list at most 100 entries"));
    }
    for (i, l) in lines.iter().enumerate() {
        check_text(&format!("{field}[{i}]"), l, 2000)?;
    }
    Ok(())
}

impl ChangeInput {
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_text("goal", &self.goal, 10_000)?;
        check_lines("acceptanceCriteria", &self.acceptance_criteria)?;
        check_lines("invariants", &self.invariants)
    }
}

/// `POST /v1/changes/{id}/cancel`: a person ends the Change, saying why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChangeCancelInput {
    pub reason: String,
}

impl ChangeCancelInput {
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_text("reason", &self.reason, 2000)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Change {
    pub id: ChangeId,
    pub project_id: ProjectId,
    pub goal: String,
    pub acceptance_criteria: Vec<String>,
    pub invariants: Vec<String>,
    pub risk_tier: Option<RiskTier>,
    pub status: ChangeStatus,
    pub created_at: i64,
    pub updated_at: i64,
}

/// Only these kinds of Task open a workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TaskKind {
    Implement,
    Migrate,
    Test,
    Other,
}

impl TaskKind {
    pub fn opens_workspace(self) -> bool {
        matches!(self, TaskKind::Implement | TaskKind::Migrate | TaskKind::Test)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskInput {
    /// Unique within the Change (`t1`, `repair`, …).
    pub key: String,
    pub kind: TaskKind,
    pub title: String,
    /// Planned semantic resources, e.g. `todos:api`.
    #[serde(default)]
    pub semantic_resources: Vec<String>,
    /// Keys of Tasks of the same Change this one depends on.
    #[serde(default)]
    pub dependencies: Vec<String>,
}

impl TaskInput {
    /// Checks the Task on its own and against the keys the Change already has.
    pub fn validate(&self, existing_keys: &BTreeSet<String>) -> Result<(), ValidationError> {
        self.validate_shape()?;
        self.validate_against(existing_keys)
    }

    /// The rules the Task keeps on its own, whatever its Change holds.
    pub fn validate_shape(&self) -> Result<(), ValidationError> {
        check_slug("key", &self.key, 64)?;
        check_text("title", &self.title, 500)?;
        for (i, r) in self.semantic_resources.iter().enumerate() {
            let ok = !r.is_empty()
                && r.len() <= 128
                && r.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, ':' | '-' | '_' | '.' | '/'));
            if !ok {
                return Err(ValidationError::new(
                    format!("semanticResources[{i}]"),
                    "must be 1-128 characters of a-z, 0-9, ':', '-', '_', '.', '/' (e.g. todos:api)",
                ));
            }
        }
        let mut seen = BTreeSet::new();
        for (i, d) in self.dependencies.iter().enumerate() {
            if !seen.insert(d) {
                return Err(ValidationError::new(
                    format!("dependencies[{i}]"),
                    "must not repeat a dependency",
                ));
            }
        }
        Ok(())
    }

    /// The rules that depend on the Change: a new key, and dependencies on Tasks it already has.
    pub fn validate_against(&self, existing_keys: &BTreeSet<String>) -> Result<(), ValidationError> {
        if existing_keys.contains(&self.key) {
            return Err(ValidationError::new(
                "key",
                format!("the Change already has a Task {}", self.key),
            ));
        }
        for (i, d) in self.dependencies.iter().enumerate() {
            if d == &self.key {
                return Err(ValidationError::new(
                    format!("dependencies[{i}]"),
                    "a Task cannot depend on itself",
                ));
            }
            if !existing_keys.contains(d) {
                return Err(ValidationError::new(
                    format!("dependencies[{i}]"),
                    format!("the Change has no Task {d}"),
                ));
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: TaskId,
    pub change_id: ChangeId,
    pub key: String,
    pub kind: TaskKind,
    pub title: String,
    pub semantic_resources: Vec<String>,
    pub dependencies: Vec<String>,
    pub created_at: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TaskRunStatus {
    Running,
    Succeeded,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TaskRun {
    pub id: TaskRunId,
    pub task_id: TaskId,
    pub status: TaskRunStatus,
    pub started_at: i64,
    pub ended_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChangeSetInput {
    /// The commit in the run's workspace fork (40 hex digits).
    pub commit: String,
    /// The contract lines the agent declared.
    #[serde(default)]
    pub contract_changes: Vec<String>,
    #[serde(default)]
    pub data_changes: Vec<String>,
}

impl ChangeSetInput {
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_object_id("commit", &self.commit, "commit")?;
        check_lines("contractChanges", &self.contract_changes)?;
        check_lines("dataChanges", &self.data_changes)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ChangeSet {
    pub id: ChangeSetId,
    pub task_id: TaskId,
    pub run_id: TaskRunId,
    pub commit: String,
    pub contract_changes: Vec<String>,
    pub data_changes: Vec<String>,
    /// `source/<project>/patches/changesets/<cs>.patch`, once the patch is stored.
    pub patch_ref: Option<String>,
    pub created_at: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(key: &str, deps: &[&str]) -> TaskInput {
        TaskInput {
            key: key.into(),
            kind: TaskKind::Implement,
            title: "Add the API".into(),
            semantic_resources: vec!["todos:api".into()],
            dependencies: deps.iter().map(|d| d.to_string()).collect(),
        }
    }

    #[test]
    fn a_task_depends_only_on_tasks_the_change_already_has() {
        let keys: BTreeSet<String> = ["t1".to_string()].into();
        assert!(task("t2", &["t1"]).validate(&keys).is_ok());
        assert_eq!(
            task("t2", &["t9"]).validate(&keys).unwrap_err().field,
            "dependencies[0]"
        );
        assert_eq!(task("t1", &[]).validate(&keys).unwrap_err().field, "key");
    }

    #[test]
    fn only_implement_migrate_and_test_open_a_workspace() {
        assert!(TaskKind::Implement.opens_workspace() && TaskKind::Test.opens_workspace());
        assert!(!TaskKind::Other.opens_workspace());
    }

    #[test]
    fn a_change_set_names_a_full_commit_id() {
        let mut cs = ChangeSetInput {
            commit: "abc".into(),
            contract_changes: vec![],
            data_changes: vec![],
        };
        assert_eq!(cs.validate().unwrap_err().field, "commit");
        cs.commit = "0123456789abcdef0123456789abcdef01234567".into();
        assert!(cs.validate().is_ok());
    }
}
