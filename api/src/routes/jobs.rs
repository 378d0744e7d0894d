//! Jobs: launch by hand, read, cancel one (the atomic cancel transition) or in bulk by state set.

use super::catalogue::wake;
use crate::AppState;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ApiJson, ApiQuery, Caller, Operator, int_param};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use belay_domain::attempt::Attempt;
use belay_domain::ids::{GgConfigId, JobId};
use belay_domain::job::{Combination, Job, JobStatus, JobTransition, LaunchInput};
use belay_domain::launch::{HarnessFacts, Unlaunchable, check_launchable};
use belay_store::jobs::{JobFilter, NewJob};
use belay_workflows::{RunWorkflow, queues};
use serde::{Deserialize, Serialize};
use temporalio_client::WorkflowCancelOptions;
use utoipa::{IntoParams, ToSchema};

/// Launches one job by hand (origin null). Refused (409) when the combination cannot be launched: an
/// unknown harness, a model the catalogue cannot price, a gg configuration the caller does not own,
/// an unbound slot, or a bound model with no known context window.
#[utoipa::path(post, path = "/v1/jobs", tag = "jobs", request_body = LaunchInput,
    responses((status = 201, body = Job),
        (status = 403, body = ErrorBody, description = "The gg configuration is not the caller's (`gg_config_not_owned`)"),
        (status = 409, body = ErrorBody, description = "The catalogue cannot run the combination; the code says why (`unknown_harness`, `model_unpriced`, …)"),
        (status = 422, body = ErrorBody)))]
pub async fn launch(
    Caller(a): Caller,
    State(s): State<AppState>,
    ApiJson(input): ApiJson<LaunchInput>,
) -> ApiResult<(StatusCode, Json<Job>)> {
    input.validate()?;
    let harness = s
        .store
        .get_harness(input.combination.harness())
        .await?
        .map(|h| HarnessFacts {
            provider_routed: h.provider_routed,
        });
    let models = s.store.model_facts(&input.combination.models()).await?;
    let gg = match &input.combination {
        Combination::Gg { gg_config_id, .. } => {
            s.store
                .gg_config_facts(&a.id, &GgConfigId::from(gg_config_id.as_str()))
                .await?
        }
        Combination::Harness { .. } => None,
    };
    check_launchable(&input.combination, harness, &models, gg.as_ref()).map_err(refusal)?;
    let test_type = s
        .store
        .get_test_case_version(&input.case.slug, &input.case.version)
        .await?
        .map(|v| v.test_type);
    let job = s
        .store
        .enqueue(NewJob {
            case: input.case,
            combination: input.combination,
            gg_config_name: gg.as_ref().map(|g| g.name.clone()),
            capabilities: gg.map(|g| g.capabilities),
            test_type,
            user_id: Some(a.id),
            origin: None,
            attempt: 1,
            retry_of: None,
        })
        .await?;
    wake(&s).await;
    Ok((StatusCode::CREATED, Json(job)))
}

/// A launch the catalogue cannot run: the request is well formed, and conflicts with what the
/// catalogue holds (409), or names another account's configuration (403).
fn refusal(u: Unlaunchable) -> ApiError {
    let status = match u {
        Unlaunchable::GgConfigNotOwned { .. } => StatusCode::FORBIDDEN,
        _ => StatusCode::CONFLICT,
    };
    ApiError::new(status, u.code(), format!("{}: {u}", u.field()))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct JobsQuery {
    /// Comma-separated statuses (default: all).
    pub status: Option<String>,
    /// `plan:<id>` or `ladder:<id>`.
    pub origin: Option<String>,
    /// Jobs with a larger queue_seq than this.
    pub after_seq: Option<String>,
    pub limit: Option<String>,
}

fn parse_statuses(s: Option<&str>) -> Result<Vec<JobStatus>, ApiError> {
    let Some(s) = s else { return Ok(vec![]) };
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| JobStatus::parse(p).ok_or_else(|| ApiError::invalid("status", format!("unknown job status {p:?}"))))
        .collect()
}

/// Jobs in queue order.
#[utoipa::path(get, path = "/v1/jobs", tag = "jobs", params(JobsQuery), responses((status = 200, body = [Job]), (status = 422, body = ErrorBody)))]
pub async fn list(
    _c: Caller,
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<JobsQuery>,
) -> ApiResult<Json<Vec<Job>>> {
    let statuses = parse_statuses(q.status.as_deref())?;
    if let Some(o) = &q.origin {
        belay_domain::job::Origin::parse(o)?;
    }
    let filter = JobFilter {
        statuses,
        origin: q.origin,
        after_seq: Some(int_param("afterSeq", q.after_seq.as_deref(), 0, 0, i64::MAX)?),
        limit: int_param("limit", q.limit.as_deref(), 100, 1, 10_000)?,
    };
    Ok(Json(s.store.list_jobs(&filter).await?))
}

/// One job.
#[utoipa::path(get, path = "/v1/jobs/{id}", tag = "jobs", params(("id" = String, Path)), responses((status = 200, body = Job), (status = 404, body = ErrorBody)))]
pub async fn get(_c: Caller, State(s): State<AppState>, Path(id): Path<JobId>) -> ApiResult<Json<Job>> {
    s.store
        .get_job(&id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("job {id} not found")))
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CancelAnswer {
    /// Whether this call cancelled the job (false: it had already ended).
    pub cancelled: bool,
    pub previous_status: JobStatus,
    pub job: Job,
}

/// Cancels a job from any state that is not final; a running job's workflow is cancelled too.
#[utoipa::path(post, path = "/v1/jobs/{id}/cancel", tag = "jobs", params(("id" = String, Path)),
    responses((status = 200, body = CancelAnswer), (status = 403, body = ErrorBody, description = "A member cancels only the jobs it launched and those of its own plans and ladders (`not_your_job`)"), (status = 404, body = ErrorBody)))]
pub async fn cancel(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<JobId>,
) -> ApiResult<Json<CancelAnswer>> {
    let job = s
        .store
        .get_job(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("job {id} not found")))?;
    let origin_owner = match &job.origin {
        Some(o) => s.store.origin_owner(o).await?,
        None => None,
    };
    if !belay_domain::access::may_cancel_job(a.role, &a.id, job.user_id.as_deref(), origin_owner.as_deref()) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "not_your_job",
            format!(
                "job {id} was launched by another account; a member cancels its own jobs and those of its plans and ladders"
            ),
        ));
    }
    let c = s.store.cancel_job(&id).await?;
    if c.cancelled {
        after_cancel(&s, &[(c.job.id.to_string(), c.previous)]).await;
    }
    Ok(Json(CancelAnswer {
        cancelled: c.cancelled,
        previous_status: c.previous,
        job: c.job,
    }))
}

/// Which jobs a bulk cancel sweeps.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CancelScope {
    /// queued and pending: nothing spent yet.
    Queued,
    /// every in-flight state: queued, pending, dispatched, starting and running.
    InFlight,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BulkCancel {
    pub scope: CancelScope,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BulkCancelAnswer {
    /// How many jobs this call cancelled (0: nothing was in those states).
    pub cancelled: usize,
    pub job_ids: Vec<String>,
}

/// Cancels every job in a state set, whoever launched it (no origin filter).
#[utoipa::path(post, path = "/v1/jobs/cancel", tag = "jobs", request_body = BulkCancel,
    responses((status = 200, body = BulkCancelAnswer), (status = 403, body = ErrorBody, description = "The caller is a member (`operator_required`)"), (status = 422, body = ErrorBody)))]
pub async fn cancel_bulk(
    _c: Operator,
    State(s): State<AppState>,
    ApiJson(b): ApiJson<BulkCancel>,
) -> ApiResult<Json<BulkCancelAnswer>> {
    let states: &[JobStatus] = match b.scope {
        CancelScope::Queued => &JobStatus::WAITING,
        CancelScope::InFlight => &JobStatus::IN_FLIGHT,
    };
    let cancelled = s.store.cancel_jobs(states, None).await?;
    let pairs: Vec<(String, JobStatus)> = cancelled.iter().map(|(j, prev)| (j.id.to_string(), *prev)).collect();
    after_cancel(&s, &pairs).await;
    Ok(Json(BulkCancelAnswer {
        cancelled: pairs.len(),
        job_ids: pairs.into_iter().map(|(id, _)| id).collect(),
    }))
}

/// Cancels the workflows of jobs that had been claimed, then wakes the dispatcher.
pub(crate) async fn after_cancel(s: &AppState, jobs: &[(String, JobStatus)]) {
    for (id, prev) in jobs {
        if prev.occupies_slot() {
            let handle = s
                .temporal
                .get_workflow_handle::<RunWorkflow>(queues::run_workflow_id(id));
            if let Err(e) = handle
                .cancel(
                    WorkflowCancelOptions::builder()
                        .reason("job cancelled".to_string())
                        .build(),
                )
                .await
            {
                // Not started yet, or already finished: the run checks the job's status itself.
                tracing::info!(job.id = %id, error = %e, "run workflow not cancelled");
            }
        }
    }
    if !jobs.is_empty() {
        wake(s).await;
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct TransitionsQuery {
    pub after_seq: Option<String>,
    pub limit: Option<String>,
}

/// Every recorded job status transition, in the order recorded.
#[utoipa::path(get, path = "/v1/job-transitions", tag = "jobs", params(TransitionsQuery), responses((status = 200, body = [JobTransition])))]
pub async fn transitions(
    _c: Caller,
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<TransitionsQuery>,
) -> ApiResult<Json<Vec<JobTransition>>> {
    let after = int_param("afterSeq", q.after_seq.as_deref(), 0, 0, i64::MAX)?;
    let limit = int_param("limit", q.limit.as_deref(), 1000, 1, 10_000)?;
    Ok(Json(s.store.transitions(after, limit).await?))
}

/// Every attempt of a job's adapter, across its retry chain (the job it retries and those that
/// retry it), in the order they ran: when and where each ran, its exit, the adapter's failure
/// message and log tail, and its failure class.
#[utoipa::path(get, path = "/v1/jobs/{id}/attempts", tag = "jobs", params(("id" = String, Path)),
    responses((status = 200, body = [Attempt]), (status = 404, body = ErrorBody)))]
pub async fn attempts(_c: Caller, State(s): State<AppState>, Path(id): Path<JobId>) -> ApiResult<Json<Vec<Attempt>>> {
    s.store
        .list_attempts(&id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("job {id} not found")))
}

/// Retries a failed job now: a new job (the next attempt) with the same origin and launcher.
/// Refused (409) unless the job failed, when it was retried already, or while its plan or ladder
/// is paused.
#[utoipa::path(post, path = "/v1/jobs/{id}/retry", tag = "jobs", params(("id" = String, Path)),
    responses((status = 201, body = Job),
        (status = 403, body = ErrorBody, description = "A member retries only the jobs it launched and those of its own plans and ladders (`not_your_job`)"),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The job did not fail, was retried already, or its plan or ladder is paused")))]
pub async fn retry(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<JobId>,
) -> ApiResult<(StatusCode, Json<Job>)> {
    let job = s
        .store
        .get_job(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("job {id} not found")))?;
    let origin_owner = match &job.origin {
        Some(o) => s.store.origin_owner(o).await?,
        None => None,
    };
    if !belay_domain::access::may_cancel_job(a.role, &a.id, job.user_id.as_deref(), origin_owner.as_deref()) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "not_your_job",
            format!(
                "job {id} was launched by another account; a member retries its own jobs and those of its plans and ladders"
            ),
        ));
    }
    let retry = s.store.retry_now(&id).await?;
    wake(&s).await;
    Ok((StatusCode::CREATED, Json(retry)))
}
