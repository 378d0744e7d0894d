//! Runs and reviews. One review per (run, account), replaceable; the run's displayed rating is
//! the worst domain across every reviewer.

use crate::AppState;
use crate::artifact_origin::{media_type, read_object};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ApiJson, ApiQuery, Caller, int_param};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use belay_domain::ids::RunId;
use belay_domain::review::{OfferedDomains, ReviewInput};
use belay_domain::run::{Review, Run};
use belay_store::runs::RunFilter;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

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
    let bytes = read_object(s.objects.as_ref(), &artifact.key, || {
        format!("run {id}'s artifact {:?}", q.path)
    })
    .await?;
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

/// A signed URL to a run's artifacts on the artifact origin.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactUrl {
    /// The run's artifact tree: append an artifact's `path` (`…/index.html`, `…/js/game.js`).
    /// Relative links between artifacts resolve under it.
    pub url: String,
    /// The whole tree as one `tar.gz` archive, every artifact under a folder named after the run.
    pub archive_url: String,
    /// When both URLs stop working (Unix seconds); mint a fresh one after.
    pub expires_at: i64,
}

/// Mints a short-lived URL granting reading this run's artifacts, and nothing else, from the
/// artifact origin: a listener of its own, where a build's scripts run away from the console and
/// the API (it carries no account token).
#[utoipa::path(post, path = "/v1/runs/{id}/artifact-url", tag = "runs", params(("id" = String, Path)),
    responses((status = 200, body = ArtifactUrl), (status = 404, body = ErrorBody),
        (status = 503, body = ErrorBody, description = "This API serves no artifact origin (`artifact_origin_off`): its operator sets `BELAY_API_ARTIFACT_LISTEN`")))]
pub async fn artifact_url(
    _c: Caller,
    State(s): State<AppState>,
    Path(id): Path<RunId>,
) -> ApiResult<Json<ArtifactUrl>> {
    s.store
        .get_run(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("run {id} not found")))?;
    let Some(origin) = &s.artifacts else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "artifact_origin_off",
            "this API serves no artifact origin: its operator sets BELAY_API_ARTIFACT_LISTEN",
        ));
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let token = belay_domain::artifact_url::issue(&origin.secret, &id, now, origin.ttl_secs)
        .map_err(|e| ApiError::internal(&e))?;
    Ok(Json(ArtifactUrl {
        url: origin.tree_url(id.as_str(), &token),
        archive_url: origin.archive_url(id.as_str(), &token),
        expires_at: now + origin.ttl_secs,
    }))
}
