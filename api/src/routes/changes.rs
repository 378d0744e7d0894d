//! Changes, Tasks, task runs and ChangeSets: enough to compose Candidates from. Only the owner
//! of the project reads or writes them; anything else is not found.

use crate::AppState;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ApiJson, Caller};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use belay_domain::change::{
    Change, ChangeCancelInput, ChangeInput, ChangeSet, ChangeSetInput, Task, TaskInput, TaskRun,
};
use belay_domain::ids::{ChangeId, ChangeSetId, ProjectId, TaskId, TaskRunId};
use belay_workflows::workspace::{WorkspaceWorkflow, workspace_workflow_id};
use temporalio_client::WorkflowExecuteUpdateOptions;

/// Opens a Change on a project.
#[utoipa::path(post, path = "/v1/projects/{id}/changes", tag = "changes", params(("id" = String, Path)), request_body = ChangeInput,
    responses((status = 201, body = Change), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn create(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<ProjectId>,
    ApiJson(input): ApiJson<ChangeInput>,
) -> ApiResult<(StatusCode, Json<Change>)> {
    input.validate()?;
    Ok((
        StatusCode::CREATED,
        Json(s.store.create_change(&a.id, &id, &input).await?),
    ))
}

/// The Changes of a project.
#[utoipa::path(get, path = "/v1/projects/{id}/changes", tag = "changes", params(("id" = String, Path)),
    responses((status = 200, body = [Change]), (status = 404, body = ErrorBody)))]
pub async fn list(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<ProjectId>,
) -> ApiResult<Json<Vec<Change>>> {
    if s.store.get_project(&a.id, &id).await?.is_none() {
        return Err(ApiError::not_found(format!("project {id} not found")));
    }
    Ok(Json(s.store.list_changes(&a.id, &id).await?))
}

/// One Change.
#[utoipa::path(get, path = "/v1/changes/{id}", tag = "changes", params(("id" = String, Path)),
    responses((status = 200, body = Change), (status = 404, body = ErrorBody)))]
pub async fn get(Caller(a): Caller, State(s): State<AppState>, Path(id): Path<ChangeId>) -> ApiResult<Json<Change>> {
    s.store
        .get_change(&a.id, &id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("change {id} not found")))
}

/// Adds a Task to a Change.
#[utoipa::path(post, path = "/v1/changes/{id}/tasks", tag = "changes", params(("id" = String, Path)), request_body = TaskInput,
    responses((status = 201, body = Task), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn add_task(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<ChangeId>,
    ApiJson(input): ApiJson<TaskInput>,
) -> ApiResult<(StatusCode, Json<Task>)> {
    Ok((StatusCode::CREATED, Json(s.store.add_task(&a.id, &id, &input).await?)))
}

/// The Tasks of a Change.
#[utoipa::path(get, path = "/v1/changes/{id}/tasks", tag = "changes", params(("id" = String, Path)),
    responses((status = 200, body = [Task]), (status = 404, body = ErrorBody)))]
pub async fn tasks(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<ChangeId>,
) -> ApiResult<Json<Vec<Task>>> {
    Ok(Json(s.store.list_tasks(&a.id, &id).await?))
}

/// Starts a run of a Task.
#[utoipa::path(post, path = "/v1/tasks/{id}/runs", tag = "changes", params(("id" = String, Path)),
    responses((status = 201, body = TaskRun), (status = 404, body = ErrorBody)))]
pub async fn start_run(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<TaskId>,
) -> ApiResult<(StatusCode, Json<TaskRun>)> {
    Ok((StatusCode::CREATED, Json(s.store.start_task_run(&a.id, &id).await?)))
}

/// Records the ChangeSet a task run published (one per run).
#[utoipa::path(post, path = "/v1/task-runs/{id}/change-set", tag = "changes", params(("id" = String, Path)), request_body = ChangeSetInput,
    responses((status = 201, body = ChangeSet), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn record_change_set(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<TaskRunId>,
    ApiJson(input): ApiJson<ChangeSetInput>,
) -> ApiResult<(StatusCode, Json<ChangeSet>)> {
    input.validate()?;
    Ok((
        StatusCode::CREATED,
        Json(s.store.record_change_set(&a.id, &id, &input).await?),
    ))
}

/// One ChangeSet.
#[utoipa::path(get, path = "/v1/change-sets/{id}", tag = "changes", params(("id" = String, Path)),
    responses((status = 200, body = ChangeSet), (status = 404, body = ErrorBody)))]
pub async fn get_change_set(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<ChangeSetId>,
) -> ApiResult<Json<ChangeSet>> {
    s.store
        .get_change_set(&a.id, &id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("change set {id} not found")))
}

/// What a cancel did: the Change as it is now, the Candidates it rejected and the task runs whose
/// workspaces it closed.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CancelView {
    pub change: Change,
    pub rejected_candidates: Vec<String>,
    pub stopped_runs: Vec<String>,
}

/// Cancels a Change, with a reason (the spec's "Change cancelled" path): running Candidates end
/// `rejected`, open workspaces and Tasks stop, what waited on a person is cancelled, and the
/// decision is a Decision Receipt (`CHANGE_CANCELLED`) and the event `change.cancelled` with who
/// and why. A Change that has ended answers 409 with its status.
#[utoipa::path(post, path = "/v1/changes/{id}/cancel", tag = "changes", params(("id" = String, Path)), request_body = ChangeCancelInput,
    responses((status = 200, body = CancelView), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn cancel(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<ChangeId>,
    ApiJson(input): ApiJson<ChangeCancelInput>,
) -> ApiResult<Json<CancelView>> {
    input.validate()?;
    let done = s.store.cancel_change(&a.id, &id, &input.reason).await?;
    // The rows say the workspaces stopped; their workflows now remove the run directories and
    // settle the meter (the workspace's own close). A workflow that already ended has nothing
    // left to close.
    for run in &done.stopped_runs {
        let handle = s
            .temporal
            .get_workflow_handle::<WorkspaceWorkflow>(workspace_workflow_id(run));
        if let Err(e) = handle
            .execute_update(WorkspaceWorkflow::close, (), WorkflowExecuteUpdateOptions::default())
            .await
        {
            tracing::info!(run.id = %run, error = %e, "no open workspace workflow to close");
        }
    }
    Ok(Json(CancelView {
        change: done.change,
        rejected_candidates: done.rejected_candidates,
        stopped_runs: done.stopped_runs,
    }))
}
