//! Conflicts between two Tasks' ChangeSets, as the conflict review (outside belay) reported them,
//! and the Decision Receipts of a Change. A finding cites the ChangeSet ids of both sides and the
//! paths (or declared contract lines) in them that collide; code checks every citation against
//! the ChangeSets' real patches, and a bad one answers 422 naming it, writing nothing.

use crate::AppState;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ApiJson, Caller};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use belay_domain::conflict::{Conflict, ConflictInput};
use belay_domain::ids::ChangeId;
use belay_domain::receipt::DecisionReceipt;
use std::collections::BTreeMap;

/// Records a conflict the review found between two Tasks' ChangeSets.
#[utoipa::path(post, path = "/v1/changes/{id}/conflicts", tag = "verification", params(("id" = String, Path)),
    request_body = ConflictInput,
    responses((status = 201, body = Conflict), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "Bad input, named; a bad citation (a Task not of the Change, a ChangeSet not of the side's Task, a path not in the cited patches, a contract line not declared): the finding is unsupported, nothing written"), (status = 503, body = ErrorBody)))]
pub async fn create(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<ChangeId>,
    ApiJson(input): ApiJson<ConflictInput>,
) -> ApiResult<(StatusCode, Json<Conflict>)> {
    let origins = s.store.change_set_origins(&a.id, &id).await?;
    let Some(g) = &s.git else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "git_unavailable",
            "this API serves no git repositories, so it cannot read the cited patches",
        ));
    };
    let git = belay_git::GitService::new(g.root.clone());
    let mut paths: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (cs, start) in &origins {
        let Some(start) = start else { continue };
        let fork = belay_domain::repo::workspace_fork(cs.run_id.as_str()).map_err(|e| ApiError::internal(&e))?;
        let changed = git
            .changed_paths(&fork, start, &cs.commit)
            .await
            .map_err(|e| ApiError::internal(&e))?;
        paths.insert(cs.id.to_string(), changed);
    }
    let conflict = s.store.record_conflict(&a.id, &id, &input, &paths).await?;
    Ok((StatusCode::CREATED, Json(conflict)))
}

/// The Decision Receipts of a Change, oldest first: each with its kind, inputs and outcome.
#[utoipa::path(get, path = "/v1/changes/{id}/receipts", tag = "verification", params(("id" = String, Path)),
    responses((status = 200, body = [DecisionReceipt]), (status = 404, body = ErrorBody)))]
pub async fn receipts(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<ChangeId>,
) -> ApiResult<Json<Vec<DecisionReceipt>>> {
    Ok(Json(s.store.list_receipts(&a.id, &id).await?))
}
