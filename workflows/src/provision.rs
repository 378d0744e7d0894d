//! ProjectProvisionWorkflow (id `provision-{project_id}`): creates the canonical repository at
//! generation 0 on the `git` pool, then records its commit and tree. A provisioning that cannot
//! succeed records why.

use crate::contracts::{GitApi, ProjectFailure, ProjectProvisioned, ProjectStoreApi, ProvisionedSource};
use crate::options;
use belay_domain::ids::ProjectId;
use std::time::Duration;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{WorkflowContext, WorkflowResult};

/// The workflow id of a project's provisioning.
pub fn provision_workflow_id(project_id: &str) -> String {
    format!("provision-{project_id}")
}

#[workflow]
#[derive(Default)]
pub struct ProjectProvisionWorkflow;

#[workflow_methods]
impl ProjectProvisionWorkflow {
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>, project_id: ProjectId) -> WorkflowResult<ProvisionedSource> {
        let git = options::git(Duration::from_secs(120));
        match ctx
            .execute_activity(GitApi::provision_project, project_id.clone(), git)
            .await
        {
            Ok(source) => {
                ctx.execute_activity(
                    ProjectStoreApi::mark_provisioned,
                    ProjectProvisioned {
                        project_id,
                        source: source.clone(),
                    },
                    options::db(),
                )
                .await?;
                Ok(source)
            }
            Err(e) => {
                let failure = ProjectFailure {
                    project_id,
                    error: e.to_string(),
                };
                ctx.execute_activity(ProjectStoreApi::mark_failed, failure, options::db())
                    .await?;
                Err(e.into())
            }
        }
    }
}

/// The workflow id of a project's deletion.
pub fn delete_workflow_id(project_id: &str) -> String {
    format!("delete-{project_id}")
}

/// ProjectDeleteWorkflow (id `delete-{project_id}`): deletes the repositories the project's rows
/// derive (forks first, canonical last) and its `source/` objects, then its rows.
#[workflow]
#[derive(Default)]
pub struct ProjectDeleteWorkflow;

#[workflow_methods]
impl ProjectDeleteWorkflow {
    #[run]
    pub async fn run(
        ctx: &mut WorkflowContext<Self>,
        project_id: ProjectId,
    ) -> WorkflowResult<crate::contracts::Removed> {
        use crate::contracts::{CleanupApi, CleanupStoreApi, ProjectSources};
        let names = ctx
            .execute_activity(CleanupStoreApi::repository_names, project_id.clone(), options::db())
            .await?;
        let git = options::git(Duration::from_secs(600));
        let removed = ctx
            .execute_activity(
                CleanupApi::remove_project_sources,
                ProjectSources {
                    project_id: project_id.clone(),
                    repositories: names,
                },
                git,
            )
            .await?;
        ctx.execute_activity(CleanupStoreApi::delete_rows, project_id, options::db())
            .await?;
        Ok(removed)
    }
}
