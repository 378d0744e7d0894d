//! Runs and reviews. One review per (run, account), replaceable; the run's displayed rating is
//! the worst domain across every reviewer.

use crate::AppState;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ApiJson, ApiQuery, Caller, int_param};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use belay_domain::ids::RunId;
use belay_domain::review::{OfferedDomains, ReviewInput};
use belay_domain::run::{Review, Run};
use belay_store::runs::RunFilter;
use serde::Deserialize;
use utoipa::IntoParams;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct RunsQuery {
    pub cell_key: Option<String>,
    pub job_id: Option<String>,
    pub limit: Option<String>,
}

/// Runs, newest first.
#[utoipa::path(get, path = "/v1/runs", tag = "runs", params(RunsQuery), responses((status = 200, body = [Run])))]
pub async fn list(
    _c: Caller,
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<RunsQuery>,
) -> ApiResult<Json<Vec<Run>>> {
    let filter = RunFilter {
        cell_key: q.cell_key,
        job_id: q.job_id,
        limit: int_param("limit", q.limit.as_deref(), 100, 1, 1000)?,
    };
    Ok(Json(s.store.list_runs(&filter).await?))
}

/// One run.
#[utoipa::path(get, path = "/v1/runs/{id}", tag = "runs", params(("id" = String, Path)), responses((status = 200, body = Run), (status = 404, body = ErrorBody)))]
pub async fn get(_c: Caller, State(s): State<AppState>, Path(id): Path<RunId>) -> ApiResult<Json<Run>> {
    s.store
        .get_run(&id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("run {id} not found")))
}

/// Submits or replaces the caller's review: a rating per domain, or a category for a game-jam run.
#[utoipa::path(post, path = "/v1/runs/{id}/review", tag = "runs", params(("id" = String, Path)), request_body = ReviewInput,
    responses((status = 200, body = Review), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The run takes another kind of review (`review_kind_mismatch`): ratings for a standard run, a category for a game-jam run, none for a performance run"),
        (status = 422, body = ErrorBody)))]
pub async fn review(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<RunId>,
    ApiJson(input): ApiJson<ReviewInput>,
) -> ApiResult<Json<Review>> {
    let run = s
        .store
        .get_run(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("run {id} not found")))?;
    input.validate()?;
    // A review of the wrong kind for this run is well formed; it does not fit the run.
    input
        .fits(run.test_type)
        .map_err(|e| ApiError::new(StatusCode::CONFLICT, "review_kind_mismatch", e.to_string()))?;
    let review = s.store.submit_review(&id, &a.id, &input).await?;
    // A review of a run in one of the reviewer's plans or ladders tops it up; the answer does not wait.
    let (state, account, cell) = (s.clone(), a.id.clone(), run.cell_key.clone());
    tokio::spawn(async move {
        super::coverage::after_review(&state, &account, &cell).await;
        super::ladders::after_review(&state, &account, &cell).await;
    });
    Ok(Json(review))
}

/// Every review of a run.
#[utoipa::path(get, path = "/v1/runs/{id}/reviews", tag = "runs", params(("id" = String, Path)), responses((status = 200, body = [Review]), (status = 404, body = ErrorBody)))]
pub async fn reviews(_c: Caller, State(s): State<AppState>, Path(id): Path<RunId>) -> ApiResult<Json<Vec<Review>>> {
    s.store
        .get_run(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("run {id} not found")))?;
    Ok(Json(s.store.reviews_of(&id).await?))
}

/// The domains the caller's review of a run is offered: the run's case version's `reviewDomains`
/// when it declares them, else the caller's own domains as their last review of an undeclared
/// version named them, else `overall`; none for a game-jam or performance run. A review may still
/// rate other domains.
#[utoipa::path(get, path = "/v1/runs/{id}/review-domains", tag = "runs", params(("id" = String, Path)),
    responses((status = 200, body = OfferedDomains), (status = 404, body = ErrorBody)))]
pub async fn review_domains(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<RunId>,
) -> ApiResult<Json<OfferedDomains>> {
    s.store
        .offered_review_domains(&id, &a.id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("run {id} not found")))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ArtifactQuery {
    /// The artifact's `path`, as the run lists it.
    pub path: String,
}

/// The media type an artifact is served as, from its file name; anything unknown is bytes.
fn media_type(path: &str) -> &'static str {
    let ext = path
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "txt" | "log" | "md" => "text/plain; charset=utf-8",
        "json" => "application/json",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "svg" => "image/svg+xml",
        "css" => "text/css; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// One artifact of a run, as the adapter kept it. It is served inert: a sandboxing policy with no
/// network and no scripts (`Content-Security-Policy: sandbox; default-src 'none'`), so an HTML
/// artifact opened directly cannot act as belay's origin or reach anything.
#[utoipa::path(get, path = "/v1/runs/{id}/artifact", tag = "runs", params(("id" = String, Path), ArtifactQuery),
    responses((status = 200, description = "The artifact's bytes", content_type = "application/octet-stream"),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody),
        (status = 503, body = ErrorBody, description = "The object store could not be read (`objects_unavailable`)")))]
pub async fn artifact(
    _c: Caller,
    State(s): State<AppState>,
    Path(id): Path<RunId>,
    ApiQuery(q): ApiQuery<ArtifactQuery>,
) -> ApiResult<axum::response::Response> {
    use axum::http::header;
    use axum::response::IntoResponse;
    let run = s
        .store
        .get_run(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("run {id} not found")))?;
    let artifact = run
        .artifacts
        .iter()
        .find(|a| a.path == q.path)
        .ok_or_else(|| ApiError::not_found(format!("run {id} has no artifact at path {:?}", q.path)))?;
    let objects = &s.objects;
    let key = object_store::path::Path::from(artifact.key.as_str());
    let bytes = match objects.get(&key).await {
        Ok(got) => got.bytes().await,
        Err(e) => Err(e),
    }
    .map_err(|e| match e {
        object_store::Error::NotFound { .. } => {
            ApiError::not_found(format!("run {id}'s artifact {:?} is not in the object store", q.path))
        }
        e => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "objects_unavailable", e.to_string()),
    })?;
    Ok((
        [
            (header::CONTENT_TYPE, media_type(&artifact.path)),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (
                header::CONTENT_SECURITY_POLICY,
                "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'",
            ),
        ],
        bytes,
    )
        .into_response())
}
