//! Coverage plans: groups, plans, the account's buffer target, the matrix, the schedule, top-up
//! (TopUpWorkflow), the scoped review queue, pause, halt and halt all. Everything is the caller's
//! own: another account's group or plan is not found.

use crate::AppState;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ApiJson, ApiQuery, Caller, int_param};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use belay_domain::ValidationError;
use belay_domain::buffer::{BufferTarget, CoverageSettings, DEFAULT_BUFFER_TARGET};
use belay_domain::coverage::{
    CoverageGroup, CoverageGroupInput, CoveragePlan, CoveragePlanInput, GroupKind, GroupMembers, check_group_pointers,
};
use belay_domain::ids::{AccountId, GroupId, PlanId};
use belay_domain::job::{Combination, JobStatus, Origin};
use belay_domain::matrix::Matrix;
use belay_domain::queue::{ReviewQueue, queue_limit, review_queue};
use belay_domain::top_up::{Feed, ScheduleLine, Skipped, TopUpAnswer, Trigger, starts_top_up};
use belay_store::Tx;
use belay_store::coverage::{self, ResolvedPlan};
use belay_workflows::queues;
use belay_workflows::top_up::{TopUpInput, TopUpOutcome, TopUpWorkflow, ladder_workflow_id, plan_workflow_id};
use serde::{Deserialize, Serialize};
use temporalio_client::errors::WorkflowStartError;
use temporalio_client::{WorkflowGetResultOptions, WorkflowIdConflictPolicy, WorkflowStartOptions};
use temporalio_common::search_attributes::SearchAttributes;
use utoipa::{IntoParams, ToSchema};

fn group_not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("coverage group {id} not found in this account"))
}

fn plan_not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("coverage plan {id} not found in this account"))
}

/// A gg member naming a configuration the caller does not own: refused as a launch is (403).
pub(crate) async fn check_gg_owned<'c>(
    tx: &mut Tx,
    account_id: &AccountId,
    field: &str,
    combos: impl IntoIterator<Item = &'c Combination> + Clone,
) -> ApiResult<()> {
    let foreign = coverage::foreign_gg_configs(tx, account_id, combos.clone()).await?;
    if let Some(id) = foreign.first() {
        let i = combos
            .into_iter()
            .position(|c| matches!(c, Combination::Gg { gg_config_id, .. } if gg_config_id == id))
            .unwrap_or(0);
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "gg_config_not_owned",
            format!("{field}[{i}].ggConfigId: no gg configuration {id} is owned by this account"),
        ));
    }
    Ok(())
}

async fn check_group(tx: &mut Tx, account_id: &AccountId, input: &CoverageGroupInput) -> ApiResult<()> {
    if let GroupMembers::Combo(combos) = input.validate()? {
        check_gg_owned(tx, account_id, "members", combos.iter()).await?;
    }
    Ok(())
}

/// A pointer to a group the account does not have (or of the other kind) conflicts with what
/// belay holds: 409 naming the field.
pub(crate) fn pointer_refusal(e: ValidationError) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "invalid_group_pointer",
        format!("{}: {}", e.field, e.rule),
    )
}

async fn check_plan(tx: &mut Tx, account_id: &AccountId, input: CoveragePlanInput) -> ApiResult<CoveragePlanInput> {
    let input = input.validated()?;
    let kinds = coverage::group_kinds(tx, account_id).await?;
    check_group_pointers("caseGroups", &input.case_groups, GroupKind::Case, &kinds).map_err(pointer_refusal)?;
    check_group_pointers("comboGroups", &input.combo_groups, GroupKind::Combo, &kinds).map_err(pointer_refusal)?;
    check_gg_owned(tx, account_id, "combinations", input.combinations.iter()).await?;
    Ok(input)
}

// ---- groups ----------------------------------------------------------------------------------

/// Saves a coverage group: combinations (`kind: "combo"`, both shapes side by side) or pinned
/// cases (`kind: "case"`), in the order given.
#[utoipa::path(post, path = "/v1/coverage-groups", tag = "coverage", request_body = CoverageGroupInput,
    responses((status = 201, body = CoverageGroup),
        (status = 403, body = ErrorBody, description = "A gg member names a configuration the caller does not own (`gg_config_not_owned`)"),
        (status = 422, body = ErrorBody)))]
pub async fn create_group(
    Caller(a): Caller,
    State(s): State<AppState>,
    ApiJson(input): ApiJson<CoverageGroupInput>,
) -> ApiResult<(StatusCode, Json<CoverageGroup>)> {
    let mut tx = s.store.begin().await?;
    check_group(&mut tx, &a.id, &input).await?;
    let g = coverage::create_group(&mut tx, &a.id, &input).await?;
    tx.commit().await?;
    Ok((StatusCode::CREATED, Json(g)))
}

/// The caller's coverage groups.
#[utoipa::path(get, path = "/v1/coverage-groups", tag = "coverage", responses((status = 200, body = [CoverageGroup])))]
pub async fn list_groups(Caller(a): Caller, State(s): State<AppState>) -> ApiResult<Json<Vec<CoverageGroup>>> {
    let mut tx = s.store.begin_read().await?;
    let out = coverage::list_groups(&mut tx, &a.id).await?;
    tx.commit().await?;
    Ok(Json(out))
}

/// One of the caller's coverage groups.
#[utoipa::path(get, path = "/v1/coverage-groups/{id}", tag = "coverage", params(("id" = String, Path)),
    responses((status = 200, body = CoverageGroup), (status = 404, body = ErrorBody)))]
pub async fn get_group(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<GroupId>,
) -> ApiResult<Json<CoverageGroup>> {
    let mut tx = s.store.begin_read().await?;
    let g = coverage::get_group(&mut tx, &a.id, &id).await?;
    tx.commit().await?;
    g.map(Json).ok_or_else(|| group_not_found(&id))
}

/// Replaces a group; every plan pointing at it is reshaped.
#[utoipa::path(put, path = "/v1/coverage-groups/{id}", tag = "coverage", params(("id" = String, Path)), request_body = CoverageGroupInput,
    responses((status = 200, body = CoverageGroup), (status = 404, body = ErrorBody),
        (status = 403, body = ErrorBody, description = "A gg member names a configuration the caller does not own (`gg_config_not_owned`)"),
        (status = 422, body = ErrorBody)))]
pub async fn update_group(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<GroupId>,
    ApiJson(input): ApiJson<CoverageGroupInput>,
) -> ApiResult<Json<CoverageGroup>> {
    let mut tx = s.store.begin().await?;
    if coverage::get_group(&mut tx, &a.id, &id).await?.is_none() {
        return Err(group_not_found(&id));
    }
    check_group(&mut tx, &a.id, &input).await?;
    let g = coverage::update_group(&mut tx, &a.id, &id, &input).await?;
    tx.commit().await?;
    g.map(Json).ok_or_else(|| group_not_found(&id))
}

/// Deletes a group; plans pointing at it keep the pointer, which resolves to nothing.
#[utoipa::path(delete, path = "/v1/coverage-groups/{id}", tag = "coverage", params(("id" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, body = ErrorBody)))]
pub async fn delete_group(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<GroupId>,
) -> ApiResult<StatusCode> {
    let mut tx = s.store.begin().await?;
    let deleted = coverage::delete_group(&mut tx, &a.id, &id).await?;
    tx.commit().await?;
    if deleted {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(group_not_found(&id))
    }
}

// ---- plans -----------------------------------------------------------------------------------

/// Saves a coverage plan: group pointers and one-off members, `runsPerCell` (1–100), the outer
/// axis, a buffer override (`null` inherits), `autoTopUp`, `paused`, a `budget` (`{"usd": n}`,
/// `null`: none) and `estimatedRunUsd`. The plan reads back with `budgetUsd`, `spentUsd` and
/// `reservedUsd`.
#[utoipa::path(post, path = "/v1/coverage-plans", tag = "coverage", request_body = CoveragePlanInput,
    responses((status = 201, body = CoveragePlan),
        (status = 403, body = ErrorBody, description = "A gg combination names a configuration the caller does not own (`gg_config_not_owned`)"),
        (status = 409, body = ErrorBody, description = "A group pointer names no group of this account of that kind (`invalid_group_pointer`)"),
        (status = 422, body = ErrorBody)))]
pub async fn create_plan(
    Caller(a): Caller,
    State(s): State<AppState>,
    ApiJson(input): ApiJson<CoveragePlanInput>,
) -> ApiResult<(StatusCode, Json<CoveragePlan>)> {
    let mut tx = s.store.begin().await?;
    let input = check_plan(&mut tx, &a.id, input).await?;
    let p = coverage::create_plan(&mut tx, &a.id, &input).await?;
    tx.commit().await?;
    Ok((StatusCode::CREATED, Json(p)))
}

/// The caller's coverage plans.
#[utoipa::path(get, path = "/v1/coverage-plans", tag = "coverage", responses((status = 200, body = [CoveragePlan])))]
pub async fn list_plans(Caller(a): Caller, State(s): State<AppState>) -> ApiResult<Json<Vec<CoveragePlan>>> {
    let mut tx = s.store.begin_read().await?;
    let out = coverage::list_plans(&mut tx, &a.id).await?;
    tx.commit().await?;
    Ok(Json(out))
}

/// One of the caller's plans.
#[utoipa::path(get, path = "/v1/coverage-plans/{id}", tag = "coverage", params(("id" = String, Path)),
    responses((status = 200, body = CoveragePlan), (status = 404, body = ErrorBody)))]
pub async fn get_plan(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<PlanId>,
) -> ApiResult<Json<CoveragePlan>> {
    let mut tx = s.store.begin_read().await?;
    let p = coverage::get_plan(&mut tx, &a.id, &id).await?;
    tx.commit().await?;
    p.map(Json).ok_or_else(|| plan_not_found(&id))
}

/// Replaces a plan.
#[utoipa::path(put, path = "/v1/coverage-plans/{id}", tag = "coverage", params(("id" = String, Path)), request_body = CoveragePlanInput,
    responses((status = 200, body = CoveragePlan), (status = 404, body = ErrorBody),
        (status = 403, body = ErrorBody, description = "A gg combination names a configuration the caller does not own (`gg_config_not_owned`)"),
        (status = 409, body = ErrorBody, description = "A group pointer names no group of this account of that kind (`invalid_group_pointer`)"),
        (status = 422, body = ErrorBody)))]
pub async fn update_plan(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<PlanId>,
    ApiJson(input): ApiJson<CoveragePlanInput>,
) -> ApiResult<Json<CoveragePlan>> {
    let mut tx = s.store.begin().await?;
    if coverage::get_plan(&mut tx, &a.id, &id).await?.is_none() {
        return Err(plan_not_found(&id));
    }
    let input = check_plan(&mut tx, &a.id, input).await?;
    let p = coverage::update_plan(&mut tx, &a.id, &id, &input).await?;
    tx.commit().await?;
    p.map(Json).ok_or_else(|| plan_not_found(&id))
}

/// Deletes a plan; the jobs it launched are left alone (they keep their `origin`).
#[utoipa::path(delete, path = "/v1/coverage-plans/{id}", tag = "coverage", params(("id" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, body = ErrorBody)))]
pub async fn delete_plan(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<PlanId>,
) -> ApiResult<StatusCode> {
    let mut tx = s.store.begin().await?;
    let deleted = coverage::delete_plan(&mut tx, &a.id, &id).await?;
    tx.commit().await?;
    if deleted {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(plan_not_found(&id))
    }
}

async fn resolved(s: &AppState, account_id: &AccountId, id: &PlanId) -> ApiResult<ResolvedPlan> {
    let mut tx = s.store.begin_read().await?;
    let r = coverage::resolve_plan(&mut tx, account_id, id).await?;
    tx.commit().await?;
    r.ok_or_else(|| plan_not_found(id))
}

async fn plan_matrix(s: &AppState, account_id: &AccountId, id: &PlanId) -> ApiResult<Matrix> {
    let mut tx = s.store.begin_read().await?;
    let r = coverage::resolve_plan(&mut tx, account_id, id)
        .await?
        .ok_or_else(|| plan_not_found(id))?;
    let mut m = coverage::cells_matrix(&mut tx, account_id, &r.cells, r.plan.runs_per_cell).await?;
    tx.commit().await?;
    m.spend = r.plan.spend;
    Ok(m)
}

/// The matrix: one cell per case × combination in the plan's outer-axis order, counted globally,
/// `unreviewed` the caller's alone; the plan's totals; and its `budgetUsd`, `spentUsd` and
/// `reservedUsd`. A pure read.
#[utoipa::path(get, path = "/v1/coverage-plans/{id}/coverage", tag = "coverage", params(("id" = String, Path)),
    responses((status = 200, body = Matrix), (status = 404, body = ErrorBody)))]
pub async fn matrix(Caller(a): Caller, State(s): State<AppState>, Path(id): Path<PlanId>) -> ApiResult<Json<Matrix>> {
    Ok(Json(plan_matrix(&s, &a.id, &id).await?))
}

/// Opens the plan: with `autoTopUp` on (and the plan not paused, its target not a bound of 0) a
/// top-up runs first; answers the matrix.
#[utoipa::path(post, path = "/v1/coverage-plans/{id}/open", tag = "coverage", params(("id" = String, Path)),
    responses((status = 200, body = Matrix), (status = 404, body = ErrorBody)))]
pub async fn open(Caller(a): Caller, State(s): State<AppState>, Path(id): Path<PlanId>) -> ApiResult<Json<Matrix>> {
    let r = resolved(&s, &a.id, &id).await?;
    if starts_top_up(Feed::Plan, Trigger::Opened, r.plan.auto_top_up, r.plan.paused, r.target) {
        top_up(&s, &a.id, &r).await?;
    }
    Ok(Json(plan_matrix(&s, &a.id, &id).await?))
}

/// Starts TopUpWorkflow for the plan (or, with `of: ladder`, the ladder) and, with `wait`, waits
/// for its outcome. `None` when one already runs (busy); `Some(None)` when started without
/// waiting.
pub(crate) async fn start_top_up(
    s: &AppState,
    account_id: &str,
    plan_id: &str,
    of: Feed,
    wait: bool,
) -> ApiResult<Option<Option<TopUpOutcome>>> {
    let (origin, workflow_id, mut attrs, described) = match of {
        Feed::Plan => (
            Origin::Plan(plan_id.to_string()),
            plan_workflow_id(plan_id),
            vec![belay_workflows::search::PLAN_ID.value_set(plan_id.to_string())],
            belay_workflows::metadata::top_up("plan", plan_id),
        ),
        Feed::Ladder => (
            Origin::Ladder(plan_id.to_string()),
            ladder_workflow_id(plan_id),
            vec![belay_workflows::search::LADDER_ID.value_set(plan_id.to_string())],
            belay_workflows::metadata::top_up("ladder", plan_id),
        ),
    };
    attrs.push(belay_workflows::search::ORIGIN.value_set(origin.to_string()));
    let opts = WorkflowStartOptions::new(queues::WORKFLOWS, workflow_id)
        .id_conflict_policy(WorkflowIdConflictPolicy::Fail)
        .search_attributes(SearchAttributes::new(attrs))
        .static_summary(described.summary)
        .static_details(described.details)
        .build();
    let input = TopUpInput {
        plan_id: plan_id.to_string(),
        account_id: account_id.into(),
        of,
    };
    let handle = match s.temporal.start_workflow(TopUpWorkflow::run, input, opts).await {
        Ok(h) => h,
        Err(WorkflowStartError::AlreadyStarted { .. }) => {
            record_busy(s, of, plan_id).await;
            return Ok(None);
        }
        Err(e) => return Err(ApiError::internal(&e)),
    };
    if !wait {
        return Ok(Some(None));
    }
    let out = handle
        .get_result(WorkflowGetResultOptions::default())
        .await
        .map_err(|e| ApiError::internal(&e))?;
    Ok(Some(Some(out)))
}

/// Counts a top-up answered busy for the metrics; a failure to count is logged, not answered.
async fn record_busy(s: &AppState, of: Feed, id: &str) {
    if let Err(e) = s.store.record_top_up_busy(of, id).await {
        tracing::warn!(plan.id = %id, error = %e, "a busy top-up was not counted");
    }
}

/// Starts a top-up after a review without waiting for it. A top-up already running may have read
/// the counts before this review landed: once it ends, another is started, so the review's slot
/// is not lost.
pub(crate) async fn top_up_after_review(s: &AppState, account_id: &AccountId, id: &str, of: Feed) {
    let workflow_id = match of {
        Feed::Plan => plan_workflow_id(id),
        Feed::Ladder => ladder_workflow_id(id),
    };
    let mut attempts = 0;
    loop {
        attempts += 1;
        match start_top_up(s, account_id, id, of, false).await {
            Ok(Some(_)) => break,
            Ok(None) if attempts < 5 => {
                let running = s.temporal.get_workflow_handle::<TopUpWorkflow>(workflow_id.clone());
                let _ = running.get_result(WorkflowGetResultOptions::default()).await;
            }
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(id, error = e.message, "could not start a top-up after a review");
                break;
            }
        }
    }
}

/// One top-up through TopUpWorkflow, answered in full.
async fn top_up(s: &AppState, account_id: &AccountId, r: &ResolvedPlan) -> ApiResult<TopUpAnswer> {
    let id = r.plan.id.as_str();
    let Some(Some(out)) = start_top_up(s, account_id, id, Feed::Plan, true).await? else {
        return Ok(TopUpAnswer::skipped(r.target, Skipped::Busy));
    };
    if out.missing {
        return Err(plan_not_found(id));
    }
    if let Some(why) = out.skipped {
        return Ok(TopUpAnswer::skipped(r.target, why));
    }
    let topup_id = out
        .topup_id
        .ok_or_else(|| ApiError::internal(&std::io::Error::other("a top-up that ran has no id")))?;
    let mut tx = s.store.begin_read().await?;
    let answer = coverage::top_up_answer(&mut tx, &topup_id).await?;
    tx.commit().await?;
    answer.ok_or_else(|| ApiError::internal(&std::io::Error::other("a top-up's answer was not recorded")))
}

/// Tops the plan up now (TopUpWorkflow `topup-plan-{id}`): the buffer target in force, the
/// occupancy it observed, the cells it launched in emission order with their job ids, the cells it
/// could not launch with why, the cells its budget held back (`held`, reason `budget`), and
/// `skipped` (`null`; `busy` while another top-up of the plan runs; `paused`; `budget` when the
/// budget held back everything it would have emitted).
#[utoipa::path(post, path = "/v1/coverage-plans/{id}/topup", tag = "coverage", params(("id" = String, Path)),
    responses((status = 200, body = TopUpAnswer), (status = 404, body = ErrorBody)))]
pub async fn topup(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<PlanId>,
) -> ApiResult<Json<TopUpAnswer>> {
    let r = resolved(&s, &a.id, &id).await?;
    Ok(Json(top_up(&s, &a.id, &r).await?))
}

/// Starts a top-up of each of the reviewer's plans holding `cell` that the review trigger starts
/// one for, without waiting for any.
pub(crate) async fn after_review(s: &AppState, account_id: &AccountId, cell: &str) {
    let cell = belay_domain::job::CellKey(cell.to_string());
    let plans = async {
        let mut tx = s.store.begin_read().await?;
        let plans = coverage::plans_with_cell(&mut tx, account_id, &cell).await?;
        let setting = coverage::buffer_setting(&mut tx, account_id).await?;
        tx.commit().await?;
        Ok::<_, belay_store::StoreError>((plans, setting))
    };
    let (plans, setting) = match plans.await {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, "could not find the plans a review tops up");
            return;
        }
    };
    for p in plans {
        let target = belay_domain::buffer::target_in_force(setting, p.buffer_target);
        if !starts_top_up(Feed::Plan, Trigger::ReviewSubmitted, p.auto_top_up, p.paused, target) {
            continue;
        }
        top_up_after_review(s, account_id, p.id.as_str(), Feed::Plan).await;
    }
}

/// `GET …/schedule`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Schedule {
    pub buffer_target: BufferTarget,
    /// Outstanding runs now.
    pub occupancy: i64,
    /// Jobs a top-up would enqueue now.
    pub enqueued: i64,
    /// One line per cell, in emission order: the first pass, then the deferred cells.
    pub lines: Vec<ScheduleLine>,
}

/// What a top-up would do now, cell by cell, in emission order (launch / defer / skip with
/// reason), computed by the same walk; writes nothing.
#[utoipa::path(get, path = "/v1/coverage-plans/{id}/schedule", tag = "coverage", params(("id" = String, Path)),
    responses((status = 200, body = Schedule), (status = 404, body = ErrorBody)))]
pub async fn schedule(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<PlanId>,
) -> ApiResult<Json<Schedule>> {
    let mut tx = s.store.begin_read().await?;
    let r = coverage::resolve_plan(&mut tx, &a.id, &id)
        .await?
        .ok_or_else(|| plan_not_found(&id))?;
    let origin = Origin::Plan(id.to_string());
    let (plan, _) = coverage::plan_walk(&mut tx, &a.id, &r.cells, r.plan.runs_per_cell, r.target, &origin).await?;
    tx.commit().await?;
    Ok(Json(Schedule {
        buffer_target: plan.buffer_target,
        occupancy: plan.occupancy,
        enqueued: plan.enqueued,
        lines: plan.schedule,
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct QueueQuery {
    /// At most this many runs (default 50, at most 200).
    pub limit: Option<String>,
}

/// The plan's completed runs the caller has not reviewed, in the order their cells were emitted
/// (a cell's repeats adjacent, and grouped by cell in `cells`); capped, with `truncated`.
/// Auto-graded runs never appear.
#[utoipa::path(get, path = "/v1/coverage-plans/{id}/queue", tag = "coverage", params(("id" = String, Path), QueueQuery),
    responses((status = 200, body = ReviewQueue), (status = 404, body = ErrorBody)))]
pub async fn queue(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<PlanId>,
    ApiQuery(q): ApiQuery<QueueQuery>,
) -> ApiResult<Json<ReviewQueue>> {
    let limit = queue_limit(Some(int_param("limit", q.limit.as_deref(), 50, 1, 200)?))?;
    let mut tx = s.store.begin_read().await?;
    let r = coverage::resolve_plan(&mut tx, &a.id, &id)
        .await?
        .ok_or_else(|| plan_not_found(&id))?;
    let runs = coverage::unreviewed_runs(&mut tx, &a.id, &r.cells).await?;
    tx.commit().await?;
    Ok(Json(review_queue(
        r.cells.iter().map(|c| &c.cell_key),
        &runs,
        false,
        belay_domain::queue::QueueOrder::Emission,
        limit,
    )))
}

async fn set_paused(
    s: &AppState,
    account_id: &AccountId,
    id: &PlanId,
    paused: bool,
    why: &str,
) -> ApiResult<CoveragePlan> {
    let mut tx = s.store.begin().await?;
    let p = coverage::set_paused(&mut tx, account_id, id, paused, why).await?;
    tx.commit().await?;
    p.ok_or_else(|| plan_not_found(id))
}

/// Pauses the plan: top-ups stop (and a failed job's retry is withheld); the queue is left alone.
#[utoipa::path(post, path = "/v1/coverage-plans/{id}/pause", tag = "coverage", params(("id" = String, Path)),
    responses((status = 200, body = CoveragePlan), (status = 404, body = ErrorBody)))]
pub async fn pause(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<PlanId>,
) -> ApiResult<Json<CoveragePlan>> {
    Ok(Json(set_paused(&s, &a.id, &id, true, "pause").await?))
}

/// Resumes a paused plan.
#[utoipa::path(post, path = "/v1/coverage-plans/{id}/resume", tag = "coverage", params(("id" = String, Path)),
    responses((status = 200, body = CoveragePlan), (status = 404, body = ErrorBody)))]
pub async fn resume(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<PlanId>,
) -> ApiResult<Json<CoveragePlan>> {
    Ok(Json(set_paused(&s, &a.id, &id, false, "resume").await?))
}

/// What a halt cancelled.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HaltAnswer {
    /// How many of the plan's or ladder's jobs this call cancelled (0: there were none in those
    /// states).
    pub cancelled: usize,
    pub job_ids: Vec<String>,
}

async fn halt_plan(
    s: &AppState,
    account_id: &AccountId,
    id: &PlanId,
    statuses: &[JobStatus],
    kind: &str,
) -> ApiResult<HaltAnswer> {
    set_paused(s, account_id, id, true, kind).await?;
    cancel_origin_jobs(
        s,
        account_id,
        &Origin::Plan(id.to_string()),
        statuses,
        &format!("coverage_plan.{kind}"),
    )
    .await
}

/// The halt of a plan or a ladder once it is paused or disabled: cancels its jobs in `statuses`
/// through the one cancel transition and records `event` on it, in one transaction, then tells
/// the cancelled jobs' workflows.
pub(crate) async fn cancel_origin_jobs(
    s: &AppState,
    account_id: &AccountId,
    origin: &Origin,
    statuses: &[JobStatus],
    event: &str,
) -> ApiResult<HaltAnswer> {
    let mut tx = s.store.begin().await?;
    let cancelled = coverage::cancel_origin(&mut tx, origin, statuses).await?;
    belay_store::events::append_in(
        &mut tx,
        origin.id(),
        event,
        &serde_json::json!({ "accountId": account_id, "cancelled": cancelled.len() }),
    )
    .await?;
    tx.commit().await?;
    let pairs: Vec<(String, JobStatus)> = cancelled.iter().map(|(j, prev)| (j.id.to_string(), *prev)).collect();
    super::jobs::after_cancel(s, &pairs).await;
    Ok(HaltAnswer {
        cancelled: pairs.len(),
        job_ids: pairs.into_iter().map(|(id, _)| id).collect(),
    })
}

/// Halts the plan: pauses it, then cancels its `queued` and `pending` jobs (nothing spent yet)
/// through the one cancel transition. A job launched by hand is never touched.
#[utoipa::path(post, path = "/v1/coverage-plans/{id}/halt", tag = "coverage", params(("id" = String, Path)),
    responses((status = 200, body = HaltAnswer), (status = 404, body = ErrorBody)))]
pub async fn halt(Caller(a): Caller, State(s): State<AppState>, Path(id): Path<PlanId>) -> ApiResult<Json<HaltAnswer>> {
    Ok(Json(halt_plan(&s, &a.id, &id, &JobStatus::WAITING, "halted").await?))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HaltAllInput {
    /// Must be `true`: halt all cancels runs that are partly or wholly paid for.
    #[serde(default)]
    pub confirm: bool,
}

/// Halts all of the plan: pauses it, then cancels its `queued`, `pending`, `dispatched`,
/// `starting` and `running` jobs. Only with `{"confirm": true}`.
#[utoipa::path(post, path = "/v1/coverage-plans/{id}/halt-all", tag = "coverage", params(("id" = String, Path)), request_body = HaltAllInput,
    responses((status = 200, body = HaltAnswer), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Not confirmed (`confirmation_required`): nothing was cancelled")))]
pub async fn halt_all(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<PlanId>,
    ApiJson(input): ApiJson<HaltAllInput>,
) -> ApiResult<Json<HaltAnswer>> {
    resolved(&s, &a.id, &id).await?;
    if !input.confirm {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "confirmation_required",
            "confirm: halt all cancels dispatched, starting and running jobs too; send {\"confirm\": true}",
        ));
    }
    Ok(Json(
        halt_plan(&s, &a.id, &id, &JobStatus::IN_FLIGHT, "halted_all").await?,
    ))
}

// ---- settings --------------------------------------------------------------------------------

/// The caller's buffer target (default a bound of 10).
#[utoipa::path(get, path = "/v1/coverage-settings", tag = "coverage", responses((status = 200, body = CoverageSettings)))]
pub async fn get_settings(Caller(a): Caller, State(s): State<AppState>) -> ApiResult<Json<CoverageSettings>> {
    let mut tx = s.store.begin_read().await?;
    let t = coverage::buffer_setting(&mut tx, &a.id).await?;
    tx.commit().await?;
    Ok(Json(CoverageSettings {
        buffer_target: t.unwrap_or(DEFAULT_BUFFER_TARGET),
    }))
}

/// Sets the caller's buffer target: a bound above 500 is stored (and shown) as 500; a negative
/// bound is refused.
#[utoipa::path(put, path = "/v1/coverage-settings", tag = "coverage", request_body = CoverageSettings,
    responses((status = 200, body = CoverageSettings), (status = 422, body = ErrorBody)))]
pub async fn put_settings(
    Caller(a): Caller,
    State(s): State<AppState>,
    ApiJson(input): ApiJson<CoverageSettings>,
) -> ApiResult<Json<CoverageSettings>> {
    let settings = input.validated()?;
    let mut tx = s.store.begin().await?;
    coverage::put_buffer_setting(&mut tx, &a.id, settings.buffer_target).await?;
    tx.commit().await?;
    Ok(Json(settings))
}
