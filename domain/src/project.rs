//! Projects: the canonical repository and its generation. A project starts at canonical
//! generation 0 (S0): one commit holding only `.gitignore`.

use crate::ids::ProjectId;
use crate::validation::{ValidationError, check_text};
use crate::workspace::WorkspacePolicy;
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// A project being provisioned is not yet usable; a failed provisioning keeps its error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ProjectStatus {
    Provisioning,
    Ready,
    Failed,
    /// Its repositories and source objects are being removed; then the project is gone.
    Deleting,
}

impl ProjectStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ProjectStatus::Provisioning => "provisioning",
            ProjectStatus::Ready => "ready",
            ProjectStatus::Failed => "failed",
            ProjectStatus::Deleting => "deleting",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            ProjectStatus::Provisioning,
            ProjectStatus::Ready,
            ProjectStatus::Failed,
            ProjectStatus::Deleting,
        ]
        .into_iter()
        .find(|p| p.as_str() == s)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProjectInput {
    pub name: String,
    /// How agent workspaces of this project install, build and which commands they may run.
    #[serde(default)]
    pub workspace_policy: Option<WorkspacePolicy>,
}

impl ProjectInput {
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_text("name", &self.name, 200)?;
        if let Some(p) = &self.workspace_policy {
            p.validate()?;
        }
        Ok(())
    }
}

/// A project as stored and shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Project {
    pub id: ProjectId,
    pub name: String,
    pub status: ProjectStatus,
    /// The canonical generation: 0 at provisioning, + 1 at each promotion.
    pub generation: i64,
    /// `main` of the canonical repository.
    pub canonical_commit: Option<String>,
    pub canonical_tree: Option<String>,
    /// The policy the project verifies with (`None`: the default policy).
    pub policy_ref: Option<String>,
    /// The agent workspace policy (defaults when empty).
    pub workspace_policy: WorkspacePolicy,
    pub error: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}
