//! Projects: creating one provisions its canonical repository (ProjectProvisionWorkflow on the
//! `git` pool); only the owner sees it.

use crate::AppState;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ApiJson, Caller};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use belay_domain::ids::ProjectId;
use belay_domain::project::{Project, ProjectInput, ProjectStatus};
use belay_workflows::provision::{
    ProjectDeleteWorkflow, ProjectProvisionWorkflow, delete_workflow_id, provision_workflow_id,
};
use belay_workflows::queues;
use temporalio_client::{WorkflowIdConflictPolicy, WorkflowStartOptions};

/// Creates a project; its canonical repository (generation 0: one commit holding `.gitignore`)
/// is provisioned in the background, and the project turns `ready` with its commit and tree.
#[utoipa::path(post, path = "/v1/projects", tag = "projects", request_body = ProjectInput,
    responses((status = 201, body = Project), (status = 422, body = ErrorBody)))]
pub async fn create(
    Caller(a): Caller,
    State(s): State<AppState>,
    ApiJson(input): ApiJson<ProjectInput>,
) -> ApiResult<(StatusCode, Json<Project>)> {
    input.validate()?;
    let project = s.store.create_project(&a.id, &input).await?;
    let described = belay_workflows::metadata::project(&project.id, false);
    let opts = WorkflowStartOptions::new(queues::WORKFLOWS, provision_workflow_id(&project.id))
        .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
        .search_attributes(project_attributes(&project.id))
        .static_summary(described.summary)
        .static_details(described.details)
        .build();
    if let Err(e) = s
        .temporal
        .start_workflow(ProjectProvisionWorkflow::run, project.id.clone(), opts)
        .await
    {
        let _ = s
            .store
            .mark_project_failed(&project.id, &format!("provisioning could not start: {e}"))
            .await;
        return Err(ApiError::internal(&e));
    }
    Ok((StatusCode::CREATED, Json(project)))
}

/// The caller's projects.
#[utoipa::path(get, path = "/v1/projects", tag = "projects", responses((status = 200, body = [Project])))]
pub async fn list(Caller(a): Caller, State(s): State<AppState>) -> ApiResult<Json<Vec<Project>>> {
    Ok(Json(s.store.list_projects(&a.id).await?))
}

/// One of the caller's projects.
#[utoipa::path(get, path = "/v1/projects/{id}", tag = "projects", params(("id" = String, Path)),
    responses((status = 200, body = Project), (status = 404, body = ErrorBody)))]
pub async fn get(Caller(a): Caller, State(s): State<AppState>, Path(id): Path<ProjectId>) -> ApiResult<Json<Project>> {
    s.store
        .get_project(&a.id, &id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("project {id} not found")))
}

/// Deletes a project: its repositories (forks first, canonical last), its `source/` objects and
/// its rows, in ProjectDeleteWorkflow. Answers 202 with the project `deleting`; from then on the
/// project and everything in it answer 404, and so does a second deletion (which makes sure the
/// workflow runs, should the first answer have failed after the project was marked).
#[utoipa::path(delete, path = "/v1/projects/{id}", tag = "projects", params(("id" = String, Path)),
    responses((status = 202, body = Project), (status = 404, body = ErrorBody)))]
pub async fn delete(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<ProjectId>,
) -> ApiResult<(StatusCode, Json<Project>)> {
    let visible = s.store.get_project(&a.id, &id).await?;
    if !s.store.mark_project_deleting(&a.id, &id).await? {
        return Err(ApiError::not_found(format!("project {id} not found")));
    }
    let described = belay_workflows::metadata::project(&id, true);
    let opts = WorkflowStartOptions::new(queues::WORKFLOWS, delete_workflow_id(&id))
        .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
        .search_attributes(project_attributes(&id))
        .static_summary(described.summary)
        .static_details(described.details)
        .build();
    s.temporal
        .start_workflow(ProjectDeleteWorkflow::run, ProjectId::from(id.as_str()), opts)
        .await
        .map_err(|e| ApiError::internal(&e))?;
    let mut project = visible.ok_or_else(|| ApiError::not_found(format!("project {id} not found")))?;
    project.status = ProjectStatus::Deleting;
    Ok((StatusCode::ACCEPTED, Json(project)))
}

/// `BelayProjectId`: a project's provisioning and deletion are found by the project.
fn project_attributes(id: &str) -> temporalio_common::search_attributes::SearchAttributes {
    temporalio_common::search_attributes::SearchAttributes::new(vec![
        belay_workflows::search::PROJECT_ID.value_set(id.to_string()),
    ])
}
