//! Agent workspaces: the tool calls and the publish of one task run, each an Update of the run's
//! WorkspaceWorkflow (`ws-{run}`), which the first call starts.

use crate::AppState;
use crate::error::{ApiError, ApiResult, ErrorBody, update_failed};
use crate::extract::{ApiJson, Caller};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use belay_domain::change::ChangeSet;
use belay_domain::ids::{AccountId, ProjectId, TaskRunId};
use belay_domain::workspace::{PublishInput, ToolCall, ToolRefusal};
use belay_store::workspaces::WorkspacePlan;
use belay_workflows::queues;
use belay_workflows::workspace::{
    PublishReply, PublishRequest, ToolOutput, ToolReply, WorkspaceInput, WorkspaceStatus, WorkspaceWorkflow,
    workspace_workflow_id,
};
use serde::Serialize;
use temporalio_client::{
    WorkflowExecuteUpdateOptions, WorkflowIdConflictPolicy, WorkflowIdReusePolicy, WorkflowQueryOptions,
    WorkflowStartOptions,
};
use utoipa::ToSchema;

/// The run's plan, if the caller owns the run and its project is not being deleted.
async fn owned_plan(s: &AppState, account: &AccountId, run_id: &TaskRunId) -> ApiResult<WorkspacePlan> {
    match s.store.workspace_plan(run_id).await? {
        Some(plan)
            if plan.account_id == account
                && s.store
                    .get_project(account, &ProjectId::from(plan.project_id.as_str()))
                    .await?
                    .is_some() =>
        {
            Ok(plan)
        }
        _ => Err(ApiError::not_found(format!("task run {run_id} not found"))),
    }
}

/// Starts the run's workspace workflow unless it runs already.
async fn workspace(
    s: &AppState,
    run_id: &str,
) -> ApiResult<temporalio_client::WorkflowHandle<temporalio_client::Client, WorkspaceWorkflow>> {
    // `start_workflow`'s handle is typed by the run method; a handle by id is typed by the workflow.
    let described = belay_workflows::metadata::workspace(run_id);
    let opts = WorkflowStartOptions::new(queues::WORKFLOWS, workspace_workflow_id(run_id))
        .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
        .id_reuse_policy(WorkflowIdReusePolicy::AllowDuplicate)
        .search_attributes(temporalio_common::search_attributes::SearchAttributes::new(vec![
            belay_workflows::search::RUN_ID.value_set(run_id.to_string()),
        ]))
        .static_summary(described.summary)
        .static_details(described.details)
        .build();
    s.temporal
        .start_workflow(WorkspaceWorkflow::run, WorkspaceInput { run_id: run_id.into() }, opts)
        .await
        .map_err(|e| ApiError::internal(&e))?;
    Ok(s.temporal
        .get_workflow_handle::<WorkspaceWorkflow>(workspace_workflow_id(run_id)))
}

fn check_run(plan: &WorkspacePlan) -> ApiResult<()> {
    if !plan.task_kind.opens_workspace() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "no_workspace",
            "task.kind: only implement, migrate and test tasks open a workspace",
        ));
    }
    if plan.run_status != "running" {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "workspace_closed",
            format!("the task run has ended ({})", plan.run_status),
        ));
    }
    Ok(())
}

/// One tool call in the run's workspace; the first call opens it (fork, clone, stacked merges,
/// install). `run_command` accepts only the workspace's allowlist, 180 s each.
#[utoipa::path(post, path = "/v1/task-runs/{id}/workspace/tools", tag = "workspaces", params(("id" = String, Path)),
    request_body = ToolCall,
    responses((status = 200, body = Object, description = "The tool's output"),
        (status = 403, body = ErrorBody, description = "The command is not on the project's allowlist (`command_not_allowed`)"),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody),
        (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn tool(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<TaskRunId>,
    ApiJson(call): ApiJson<ToolCall>,
) -> ApiResult<Json<ToolOutput>> {
    let plan = owned_plan(&s, &a.id, &id).await?;
    check_run(&plan)?;
    let allowed = call.validate(&plan.policy).map_err(|r| match r {
        ToolRefusal::Invalid(e) => e.into(),
        ToolRefusal::NotAllowed(e) => ApiError::new(StatusCode::FORBIDDEN, "command_not_allowed", e.to_string()),
    })?;
    let handle = workspace(&s, &id).await?;
    match handle
        .execute_update(
            WorkspaceWorkflow::tool,
            (call, allowed),
            WorkflowExecuteUpdateOptions::default(),
        )
        .await
        .map_err(|e| update_failed(e, "workspace_closed", "workspace"))?
    {
        ToolReply::Done(out) => Ok(Json(out)),
        ToolReply::Refused(r) => Err(r.into()),
    }
}

/// Publishes the run's work: commit, push to `ws-<run>` with a write token (revoked after), the
/// ChangeSet with its patch object, the meter settled, the run directory removed.
#[utoipa::path(post, path = "/v1/task-runs/{id}/workspace/publish", tag = "workspaces", params(("id" = String, Path)),
    request_body = PublishInput,
    responses((status = 201, body = ChangeSet), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 422, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn publish(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<TaskRunId>,
    ApiJson(input): ApiJson<PublishInput>,
) -> ApiResult<(StatusCode, Json<serde_json::Value>)> {
    input.validate()?;
    let plan = owned_plan(&s, &a.id, &id).await?;
    check_run(&plan)?;
    if s.store.get_workspace(&id).await?.is_none() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "workspace_not_open",
            "the workspace has not been opened: make a tool call first",
        ));
    }
    let handle = workspace(&s, &id).await?;
    let request = PublishRequest {
        message: input.message,
        contract_changes: input.contract_changes,
        data_changes: input.data_changes,
    };
    match handle
        .execute_update(
            WorkspaceWorkflow::publish,
            request,
            WorkflowExecuteUpdateOptions::default(),
        )
        .await
        .map_err(|e| update_failed(e, "workspace_closed", "workspace"))?
    {
        PublishReply::Published(cs) => Ok((StatusCode::CREATED, Json(cs))),
        PublishReply::Refused(r) => Err(r.into()),
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Closed {
    pub closed: bool,
}

/// Ends the workspace without a ChangeSet; the run fails.
#[utoipa::path(post, path = "/v1/task-runs/{id}/workspace/close", tag = "workspaces", params(("id" = String, Path)),
    responses((status = 200, body = Closed), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub async fn close(Caller(a): Caller, State(s): State<AppState>, Path(id): Path<TaskRunId>) -> ApiResult<Json<Closed>> {
    let plan = owned_plan(&s, &a.id, &id).await?;
    check_run(&plan)?;
    if s.store.get_workspace(&id).await?.is_none_or(|w| w.status != "open") {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "workspace_not_open",
            "the workspace is not open",
        ));
    }
    let handle = workspace(&s, &id).await?;
    match handle
        .execute_update(WorkspaceWorkflow::close, (), WorkflowExecuteUpdateOptions::default())
        .await
        .map_err(|e| update_failed(e, "workspace_closed", "workspace"))?
    {
        PublishReply::Refused(r) if r.reason == belay_domain::refusal::RefusalReason::WorkspaceClosed => {
            Ok(Json(Closed { closed: true }))
        }
        PublishReply::Refused(r) => Err(r.into()),
        PublishReply::Published(_) => Ok(Json(Closed { closed: false })),
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceView {
    pub run_id: String,
    /// `open`, `published` or `failed`; `none` before the first call.
    pub status: String,
    pub base_commit: Option<String>,
    pub start_commit: Option<String>,
    pub error: Option<String>,
    /// Unpublished edits were made since the workspace opened.
    pub dirty: bool,
    /// The Sandbox was lost after edits: this run cannot publish.
    pub edits_lost: bool,
    /// How often the workspace was restored after a Sandbox loss.
    pub restores: u32,
}

/// The run's workspace.
#[utoipa::path(get, path = "/v1/task-runs/{id}/workspace", tag = "workspaces", params(("id" = String, Path)),
    responses((status = 200, body = WorkspaceView), (status = 404, body = ErrorBody)))]
pub async fn get(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<TaskRunId>,
) -> ApiResult<Json<WorkspaceView>> {
    owned_plan(&s, &a.id, &id).await?;
    let row = s.store.get_workspace(&id).await?;
    // A query needs a live workflow worker; without one the rows alone answer.
    let live = match row.as_ref().map(|r| r.status.as_str()) {
        Some("open") => tokio::time::timeout(
            std::time::Duration::from_secs(2),
            s.temporal
                .get_workflow_handle::<WorkspaceWorkflow>(workspace_workflow_id(&id))
                .query(WorkspaceWorkflow::status, (), WorkflowQueryOptions::default()),
        )
        .await
        .ok()
        .and_then(Result::ok),
        _ => None,
    }
    .unwrap_or_else(WorkspaceStatus::default);
    Ok(Json(WorkspaceView {
        run_id: id.0,
        status: row.as_ref().map_or_else(|| "none".to_owned(), |r| r.status.clone()),
        base_commit: row.as_ref().and_then(|r| r.base_commit.clone()),
        start_commit: row.as_ref().and_then(|r| r.start_commit.clone()),
        error: row.as_ref().and_then(|r| r.error.clone()),
        dirty: live.dirty,
        edits_lost: live.edits_lost,
        restores: live.restores,
    }))
}
