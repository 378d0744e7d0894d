//! Code edit sessions: open one per person per project, run commands one at a time, end it. Each
//! session is an EditSessionWorkflow (`edit-<hex>`); commands and the end are its Updates.

use crate::AppState;
use crate::error::{ApiError, ApiResult, ErrorBody, update_failed};
use crate::extract::{ApiJson, Caller};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use belay_domain::edit_session::CommandInput;
use belay_domain::ids::{AccountId, EditSessionId, ProjectId};
use belay_store::edit_sessions::{EditSession, OpenSession};
use belay_workflows::edit_session::{CommandOutput, CommandReply, EditInput, EditSessionWorkflow, edit_workflow_id};
use belay_workflows::queues;
use temporalio_client::{WorkflowExecuteUpdateOptions, WorkflowIdConflictPolicy, WorkflowStartOptions};

async fn open_session(s: &AppState, account: &AccountId, id: &EditSessionId) -> ApiResult<EditSession> {
    let session = s
        .store
        .get_edit_session(account, id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("edit session {id} not found")))?;
    if session.status != "open" {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "session_ended",
            "the session has ended",
        ));
    }
    Ok(session)
}

/// Opens a code edit session on a project: its fork `edit-<hex>` of canonical `main`. It starts
/// no Sandbox. One open session per person per project.
#[utoipa::path(post, path = "/v1/projects/{id}/edit-sessions", tag = "edit-sessions", params(("id" = String, Path)),
    responses((status = 201, body = Object), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn open(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(project): Path<ProjectId>,
) -> ApiResult<(StatusCode, Json<EditSession>)> {
    let p = s
        .store
        .get_project(&a.id, &project)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("project {project} not found")))?;
    if p.canonical_commit.is_none() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "project_not_ready",
            "the project is not provisioned",
        ));
    }
    let id = EditSessionId::from_body(&uuid::Uuid::new_v4().simple().to_string());
    let session = match s.store.open_edit_session(&a.id, &project, &id).await? {
        OpenSession::Opened(session) => session,
        OpenSession::AlreadyOpen(existing) => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "edit_session_open",
                format!("you already have edit session {} open in this project", existing.id),
            ));
        }
        OpenSession::Full => {
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "edit_sessions_full",
                "every session user of this project is taken",
            ));
        }
    };
    let described = belay_workflows::metadata::edit_session(&id, &project);
    let opts = WorkflowStartOptions::new(queues::WORKFLOWS, edit_workflow_id(&id))
        .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
        .search_attributes(temporalio_common::search_attributes::SearchAttributes::new(vec![
            belay_workflows::search::PROJECT_ID.value_set(project.to_string()),
        ]))
        .static_summary(described.summary)
        .static_details(described.details)
        .build();
    let input = EditInput {
        session_id: id.clone(),
        project_id: project,
        uid: session.uid,
    };
    if let Err(e) = s.temporal.start_workflow(EditSessionWorkflow::run, input, opts).await {
        let _ = s.store.end_edit_session(&id, "the session could not start").await;
        return Err(ApiError::internal(&e));
    }
    Ok((StatusCode::CREATED, Json(session)))
}

/// One of the caller's edit sessions.
#[utoipa::path(get, path = "/v1/edit-sessions/{id}", tag = "edit-sessions", params(("id" = String, Path)),
    responses((status = 200, body = Object), (status = 404, body = ErrorBody)))]
pub async fn get(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<EditSessionId>,
) -> ApiResult<Json<EditSession>> {
    s.store
        .get_edit_session(&a.id, &id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("edit session {id} not found")))
}

/// Runs one command (`sh -c`) as the session's user: 120 s, 480 s reserved on the meter; every
/// process it leaves is killed when it returns.
#[utoipa::path(post, path = "/v1/edit-sessions/{id}/commands", tag = "edit-sessions", params(("id" = String, Path)),
    request_body = CommandInput,
    responses((status = 200, body = Object), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 422, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn command(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<EditSessionId>,
    ApiJson(input): ApiJson<CommandInput>,
) -> ApiResult<Json<CommandOutput>> {
    input.validate()?;
    open_session(&s, &a.id, &id).await?;
    let handle = s
        .temporal
        .get_workflow_handle::<EditSessionWorkflow>(edit_workflow_id(&id));
    match handle
        .execute_update(
            EditSessionWorkflow::command,
            input.command,
            WorkflowExecuteUpdateOptions::default(),
        )
        .await
        .map_err(|e| update_failed(e, "session_ended", "session"))?
    {
        CommandReply::Done(out) => Ok(Json(out)),
        CommandReply::Refused(r) => Err(r.into()),
    }
}

/// Ends the session: its processes are killed, its directory removed and its fork deleted.
#[utoipa::path(post, path = "/v1/edit-sessions/{id}/end", tag = "edit-sessions", params(("id" = String, Path)),
    responses((status = 200, body = Object), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub async fn end(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<EditSessionId>,
) -> ApiResult<Json<EditSession>> {
    open_session(&s, &a.id, &id).await?;
    let handle = s
        .temporal
        .get_workflow_handle::<EditSessionWorkflow>(edit_workflow_id(&id));
    if let CommandReply::Refused(r) = handle
        .execute_update(
            EditSessionWorkflow::end,
            "ended by its owner".to_owned(),
            WorkflowExecuteUpdateOptions::default(),
        )
        .await
        .map_err(|e| update_failed(e, "session_ended", "session"))?
    {
        return Err(r.into());
    }
    s.store
        .get_edit_session(&a.id, &id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("edit session {id} not found")))
}
