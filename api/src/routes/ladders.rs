//! Ladders: rungs with stable ids, climbers and their steering, the board (`progress`), the
//! ladder top-up (TopUpWorkflow `topup-ladder-{id}`), enable / disable, the scoped review queue,
//! overrides, halt and halt all. A ladder is the caller's own: another account's is not found.
//!
//! A new ladder is disabled, and reading it (the ladder or its board) never enqueues. An enabled
//! ladder is fed by exactly three gestures: enabling it, `POST …/topup`, and a review of one of
//! its runs (with `autoTopUp`).

use super::coverage::{HaltAllInput, HaltAnswer, QueueQuery, check_gg_owned, pointer_refusal, start_top_up};
use crate::AppState;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ApiJson, ApiQuery, Caller, int_param};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use belay_domain::buffer::{BufferTarget, outstanding, target_in_force};
use belay_domain::coverage::{Cell, GroupKind, check_group_pointers};
use belay_domain::ids::{AccountId, LadderId};
use belay_domain::job::{Combination, JobStatus, Origin};
use belay_domain::ladder::{
    ClimberKey, Ladder, LadderInput, LadderTopUpAnswer, RungOrderInput, Steering, SteeringInput,
};
use belay_domain::progress::{Board, OutcomeInput, OverrideRefusal};
use belay_domain::queue::{ReviewQueue, queue_limit, review_queue};
use belay_domain::top_up::{Feed, Skipped, Trigger, starts_top_up};
use belay_store::Tx;
use belay_store::coverage;
use belay_store::ladders::{self, ResolvedLadder, mint_rung_id};
use belay_workflows::ladder::{ClimbInput, LadderClimbWorkflow, climb_workflow_id};
use belay_workflows::queues;
use serde::{Deserialize, Serialize};
use temporalio_client::{WorkflowIdConflictPolicy, WorkflowStartOptions};
use temporalio_common::search_attributes::SearchAttributes;
use utoipa::ToSchema;

fn ladder_not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("ladder {id} not found in this account"))
}

/// Makes sure the ladder's climb (LadderClimbWorkflow `ladder-{id}`) runs, and tells it to read
/// the board.
async fn climb(s: &AppState, account_id: &AccountId, id: &LadderId) -> ApiResult<()> {
    let described = belay_workflows::metadata::climb(id);
    let opts = WorkflowStartOptions::new(queues::WORKFLOWS, climb_workflow_id(id))
        .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
        .search_attributes(SearchAttributes::new(vec![
            belay_workflows::search::ORIGIN.value_set(Origin::Ladder(id.to_string()).to_string()),
            belay_workflows::search::LADDER_ID.value_set(id.to_string()),
        ]))
        .static_summary(described.summary)
        .static_details(described.details)
        .build();
    let input = ClimbInput {
        ladder_id: id.into(),
        account_id: account_id.into(),
        steps_per_run: None,
    };
    s.temporal
        .start_workflow(LadderClimbWorkflow::run, input, opts)
        .await
        .map_err(|e| ApiError::internal(&e))?;
    poke(s, id).await;
    Ok(())
}

/// Tells a running climb the ladder changed (a disabled or deleted ladder's climb then ends).
async fn poke(s: &AppState, id: &str) {
    if let Err(e) = belay_client::poke_climb(&s.temporal, id).await {
        tracing::info!(ladder.id = id, error = %e, "no climb to signal");
    }
}

/// Validates a ladder against the catalogue and the account's groups and configurations.
async fn check_ladder(tx: &mut Tx, account_id: &AccountId, input: LadderInput) -> ApiResult<LadderInput> {
    let cases = coverage::case_facts(tx).await?;
    let input = input.validated(&cases)?;
    let kinds = coverage::group_kinds(tx, account_id).await?;
    check_group_pointers("comboGroups", &input.combo_groups, GroupKind::Combo, &kinds).map_err(pointer_refusal)?;
    check_gg_owned(tx, account_id, "combinations", input.combinations.iter()).await?;
    Ok(input)
}

/// Saves a ladder: 1–50 rungs (each a pinned case, its own `runs` optional), the climbers
/// (`comboGroups` and one-off `combinations`), `runsPerCell` (default 5), the gate (default floor
/// `scuffed`, count 1), `unloadedCountsAsBroken` (default on), `earlyStop` (default off),
/// `outerAxis` (`rung` default, or `combination`), a buffer override, `autoTopUp` (default on)
/// and `enabled` (default off). Creating a ladder enqueues nothing; one created enabled is
/// topped up as enabling does.
#[utoipa::path(post, path = "/v1/ladders", tag = "ladders", request_body = LadderInput,
    responses((status = 201, body = Ladder),
        (status = 403, body = ErrorBody, description = "A gg combination names a configuration the caller does not own (`gg_config_not_owned`)"),
        (status = 409, body = ErrorBody, description = "A group pointer names no combo group of this account (`invalid_group_pointer`)"),
        (status = 422, body = ErrorBody, description = "Bad input, named; a performance or game jam rung, with why nobody could clear it (the catalogue decides a case's type); a rung id (a new rung is sent without one); a count threshold above a rung's runs")))]
pub async fn create(
    Caller(a): Caller,
    State(s): State<AppState>,
    ApiJson(input): ApiJson<LadderInput>,
) -> ApiResult<(StatusCode, Json<Ladder>)> {
    let mut tx = s.store.begin().await?;
    let input = check_ladder(&mut tx, &a.id, input).await?;
    let rungs = input.rungs_with_ids(&[], mint_rung_id)?;
    let l = ladders::create_ladder(&mut tx, &a.id, &input, &rungs).await?;
    tx.commit().await?;
    if l.enabled {
        climb(&s, &a.id, &l.id).await?;
        top_up(&s, &a.id, &l.id).await?;
    }
    Ok((StatusCode::CREATED, Json(l)))
}

/// The caller's ladders.
#[utoipa::path(get, path = "/v1/ladders", tag = "ladders", responses((status = 200, body = [Ladder])))]
pub async fn list(Caller(a): Caller, State(s): State<AppState>) -> ApiResult<Json<Vec<Ladder>>> {
    let mut tx = s.store.begin_read().await?;
    let out = ladders::list_ladders(&mut tx, &a.id).await?;
    tx.commit().await?;
    Ok(Json(out))
}

/// One of the caller's ladders. A read: it never enqueues.
#[utoipa::path(get, path = "/v1/ladders/{id}", tag = "ladders", params(("id" = String, Path)),
    responses((status = 200, body = Ladder), (status = 404, body = ErrorBody)))]
pub async fn get(Caller(a): Caller, State(s): State<AppState>, Path(id): Path<LadderId>) -> ApiResult<Json<Ladder>> {
    let mut tx = s.store.begin_read().await?;
    let l = ladders::get_ladder(&mut tx, &a.id, &id).await?;
    tx.commit().await?;
    l.map(Json).ok_or_else(|| ladder_not_found(&id))
}

/// Replaces a ladder. A rung sent with its `id` keeps it (and its verdicts); one sent without
/// gets a new id; a rung left out is removed and its id never comes back. Bumping a rung's
/// version keeps the old verdicts, stale, and re-opens the rung. Turning `enabled` on is the
/// enable gesture: it tops the ladder up.
#[utoipa::path(put, path = "/v1/ladders/{id}", tag = "ladders", params(("id" = String, Path)), request_body = LadderInput,
    responses((status = 200, body = Ladder), (status = 404, body = ErrorBody),
        (status = 403, body = ErrorBody, description = "A gg combination names a configuration the caller does not own (`gg_config_not_owned`)"),
        (status = 409, body = ErrorBody, description = "A group pointer names no combo group of this account (`invalid_group_pointer`)"),
        (status = 422, body = ErrorBody, description = "Bad input, named; a performance or game jam rung, with why nobody could clear it; a rung id that is not a rung of this ladder; a count threshold above a rung's runs")))]
pub async fn update(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<LadderId>,
    ApiJson(input): ApiJson<LadderInput>,
) -> ApiResult<Json<Ladder>> {
    let mut tx = s.store.begin().await?;
    let Some(before) = ladders::get_ladder(&mut tx, &a.id, &id).await? else {
        return Err(ladder_not_found(&id));
    };
    let input = check_ladder(&mut tx, &a.id, input).await?;
    let current: Vec<_> = before.rungs.iter().map(|r| r.id.clone()).collect();
    let rungs = input.rungs_with_ids(&current, mint_rung_id)?;
    let l = ladders::update_ladder(&mut tx, &a.id, &id, &input, &rungs)
        .await?
        .ok_or_else(|| ladder_not_found(&id))?;
    tx.commit().await?;
    if l.enabled {
        climb(&s, &a.id, &id).await?;
        if !before.enabled {
            top_up(&s, &a.id, &id).await?;
        }
    } else {
        poke(&s, &id).await;
    }
    Ok(Json(l))
}

/// Deletes a ladder with its steering and verdicts; the jobs it launched are left alone (they
/// keep their `origin`). Halt first to cancel them.
#[utoipa::path(delete, path = "/v1/ladders/{id}", tag = "ladders", params(("id" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, body = ErrorBody)))]
pub async fn delete(Caller(a): Caller, State(s): State<AppState>, Path(id): Path<LadderId>) -> ApiResult<StatusCode> {
    let mut tx = s.store.begin().await?;
    let deleted = ladders::delete_ladder(&mut tx, &a.id, &id).await?;
    tx.commit().await?;
    if deleted {
        poke(&s, &id).await;
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ladder_not_found(&id))
    }
}

/// Reorders the rungs: `rungIds` must be a permutation of the ladder's current rung ids and
/// nothing else. Verdicts stay with their rung ids; each climber then stands on the first rung,
/// in the new order, it has not advanced past.
#[utoipa::path(post, path = "/v1/ladders/{id}/rungs/order", tag = "ladders", params(("id" = String, Path)), request_body = RungOrderInput,
    responses((status = 200, body = Ladder), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "Not a permutation of the current rung ids (an id of no rung of this ladder, a rung left out, an id listed twice), named: nothing changed")))]
pub async fn reorder(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<LadderId>,
    ApiJson(input): ApiJson<RungOrderInput>,
) -> ApiResult<Json<Ladder>> {
    let mut tx = s.store.begin().await?;
    let Some(before) = ladders::get_ladder(&mut tx, &a.id, &id).await? else {
        return Err(ladder_not_found(&id));
    };
    let current: Vec<_> = before.rungs.iter().map(|r| r.id.clone()).collect();
    input.check(&current)?;
    let l = ladders::reorder_rungs(&mut tx, &a.id, &id, &input.rung_ids)
        .await?
        .ok_or_else(|| ladder_not_found(&id))?;
    tx.commit().await?;
    Ok(Json(l))
}

/// One climber's steering.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClimberSteering {
    #[schema(value_type = String)]
    pub climber_key: ClimberKey,
    pub combination: Combination,
    pub steering: Steering,
}

/// Sets a climber's steering (`priority` -1000..=1000, higher first; `focused`, the tiebreak;
/// `held`, stop where it stands), keyed by its combination; an absent field keeps its value.
#[utoipa::path(post, path = "/v1/ladders/{id}/climbers", tag = "ladders", params(("id" = String, Path)), request_body = SteeringInput,
    responses((status = 200, body = ClimberSteering), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The combination is not a climber of this ladder (`conflict`)"),
        (status = 422, body = ErrorBody)))]
pub async fn steer(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<LadderId>,
    ApiJson(input): ApiJson<SteeringInput>,
) -> ApiResult<Json<ClimberSteering>> {
    let mut tx = s.store.begin().await?;
    let r = ladders::resolve_ladder(&mut tx, &a.id, &id)
        .await?
        .ok_or_else(|| ladder_not_found(&id))?;
    let climbers: Vec<Combination> = r.climbers.iter().map(|c| c.combination.clone()).collect();
    input.validate(&climbers)?;
    let key = ClimberKey::of(&input.combination);
    let current = r
        .climbers
        .iter()
        .find(|c| ClimberKey::of(&c.combination) == key)
        .map(|c| c.steering)
        .unwrap_or_default();
    let steering = input.apply(current);
    ladders::put_steering(&mut tx, &id, &key, steering).await?;
    tx.commit().await?;
    poke(&s, &id).await;
    Ok(Json(ClimberSteering {
        climber_key: key,
        combination: input.combination,
        steering,
    }))
}

/// `GET /ladders/{id}/progress`: the board, and the buffer figures drawn from the same set of
/// runs as the queue.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LadderProgress {
    #[serde(flatten)]
    pub board: Board,
    pub enabled: bool,
    pub buffer_target: BufferTarget,
    /// Outstanding runs over every reached rung: in flight plus completed and not judged by you.
    pub buffered: i64,
    /// Completed runs of every reached rung waiting on your review.
    pub to_review: i64,
    /// The ladder's `budgetUsd`, `spentUsd` and `reservedUsd`.
    #[serde(flatten)]
    pub spend: belay_domain::budget::Ledger,
}

async fn board(s: &AppState, account_id: &AccountId, id: &LadderId) -> ApiResult<(ResolvedLadder, Board)> {
    let mut tx = s.store.begin_read().await?;
    let r = ladders::resolve_ladder(&mut tx, account_id, id)
        .await?
        .ok_or_else(|| ladder_not_found(id))?;
    let (p, _) = ladders::read_progress(&mut tx, account_id, &r).await?;
    tx.commit().await?;
    Ok((r, p.board))
}

/// The board: per climber its status (`climbing`, `awaitingReview`, `walled`, `held`,
/// `toppedOut`), its current rung and, per reached rung, the verdict (`recorded: false` for one
/// computed live that no top-up has written yet), the version it was decided against, `stale`, any
/// override and the tally; per rung its `latestVersion` and whether the pin is behind. A read: it
/// writes and enqueues nothing.
#[utoipa::path(get, path = "/v1/ladders/{id}/progress", tag = "ladders", params(("id" = String, Path)),
    responses((status = 200, body = LadderProgress), (status = 404, body = ErrorBody)))]
pub async fn progress(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<LadderId>,
) -> ApiResult<Json<LadderProgress>> {
    let (r, board) = board(&s, &a.id, &id).await?;
    let reached = board.reached_cells();
    let buffered = outstanding(reached.iter().copied());
    let to_review = reached.iter().map(|c| c.unreviewed).sum();
    Ok(Json(LadderProgress {
        enabled: r.ladder.enabled,
        buffer_target: r.target,
        buffered,
        to_review,
        spend: r.ladder.spend,
        board,
    }))
}

/// One ladder top-up through TopUpWorkflow, answered in full.
async fn top_up(s: &AppState, account_id: &AccountId, id: &LadderId) -> ApiResult<LadderTopUpAnswer> {
    let target = {
        let mut tx = s.store.begin_read().await?;
        let l = ladders::get_ladder(&mut tx, account_id, id)
            .await?
            .ok_or_else(|| ladder_not_found(id))?;
        let t = target_in_force(coverage::buffer_setting(&mut tx, account_id).await?, l.buffer_target);
        tx.commit().await?;
        t
    };
    let Some(Some(out)) = start_top_up(s, account_id, id, Feed::Ladder, true).await? else {
        return Ok(LadderTopUpAnswer::skipped(target, Skipped::Busy));
    };
    if out.missing {
        return Err(ladder_not_found(id));
    }
    if let Some(why) = out.skipped {
        return Ok(LadderTopUpAnswer::skipped(target, why));
    }
    let topup_id = out
        .topup_id
        .ok_or_else(|| ApiError::internal(&std::io::Error::other("a top-up that ran has no id")))?;
    let mut tx = s.store.begin_read().await?;
    let answer = ladders::top_up_answer(&mut tx, &topup_id).await?;
    tx.commit().await?;
    answer.ok_or_else(|| ApiError::internal(&std::io::Error::other("a top-up's answer was not recorded")))
}

/// Tops the ladder up now (TopUpWorkflow `topup-ladder-{id}`): it first records the verdicts the
/// gate has decided and applies the early-stop cancellations, then walks each climber's current
/// rung in the ladder's order under the buffer counted over every reached rung. `skipped:
/// "paused"` for a disabled ladder, `busy` while another top-up of it runs.
#[utoipa::path(post, path = "/v1/ladders/{id}/topup", tag = "ladders", params(("id" = String, Path)),
    responses((status = 200, body = LadderTopUpAnswer), (status = 404, body = ErrorBody)))]
pub async fn topup(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<LadderId>,
) -> ApiResult<Json<LadderTopUpAnswer>> {
    Ok(Json(top_up(&s, &a.id, &id).await?))
}

/// A ladder and the top-up enabling it started.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Enabled {
    pub ladder: Ladder,
    pub top_up: LadderTopUpAnswer,
}

/// Enables the ladder, the one gesture that says "start spending on this climb", and tops it up.
#[utoipa::path(post, path = "/v1/ladders/{id}/enable", tag = "ladders", params(("id" = String, Path)),
    responses((status = 200, body = Enabled), (status = 404, body = ErrorBody)))]
pub async fn enable(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<LadderId>,
) -> ApiResult<Json<Enabled>> {
    let ladder = set_enabled(&s, &a.id, &id, true, "enable").await?;
    climb(&s, &a.id, &id).await?;
    let top_up = top_up(&s, &a.id, &id).await?;
    Ok(Json(Enabled { ladder, top_up }))
}

/// Disables the ladder: nothing further is enqueued; what is queued or running carries on (halt
/// cancels it).
#[utoipa::path(post, path = "/v1/ladders/{id}/disable", tag = "ladders", params(("id" = String, Path)),
    responses((status = 200, body = Ladder), (status = 404, body = ErrorBody)))]
pub async fn disable(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<LadderId>,
) -> ApiResult<Json<Ladder>> {
    Ok(Json(set_enabled(&s, &a.id, &id, false, "disable").await?))
}

async fn set_enabled(
    s: &AppState,
    account_id: &AccountId,
    id: &LadderId,
    enabled: bool,
    why: &str,
) -> ApiResult<Ladder> {
    let mut tx = s.store.begin().await?;
    let l = ladders::set_enabled(&mut tx, account_id, id, enabled, why).await?;
    tx.commit().await?;
    let l = l.ok_or_else(|| ladder_not_found(id))?;
    if !enabled {
        poke(s, id).await;
    }
    Ok(l)
}

/// The completed runs of every rung each climber has reached (advanced past, standing on, walled
/// at) that the caller has not judged, in the ladder's order; capped, with `truncated`. Runs the
/// gate judges broken because they never loaded do not appear.
#[utoipa::path(get, path = "/v1/ladders/{id}/queue", tag = "ladders", params(("id" = String, Path), QueueQuery),
    responses((status = 200, body = ReviewQueue), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn queue(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<LadderId>,
    ApiQuery(q): ApiQuery<QueueQuery>,
) -> ApiResult<Json<ReviewQueue>> {
    let limit = queue_limit(Some(int_param("limit", q.limit.as_deref(), 50, 1, 200)?))?;
    let mut tx = s.store.begin_read().await?;
    let r = ladders::resolve_ladder(&mut tx, &a.id, &id)
        .await?
        .ok_or_else(|| ladder_not_found(&id))?;
    let (p, _) = ladders::read_progress(&mut tx, &a.id, &r).await?;
    let reached: Vec<Cell> = p
        .board
        .reached_cells()
        .into_iter()
        .map(|c| Cell::new(c.case.clone(), c.combination.clone()))
        .collect();
    let runs = coverage::unreviewed_runs(&mut tx, &a.id, &reached).await?;
    tx.commit().await?;
    Ok(Json(review_queue(
        reached.iter().map(|c| &c.cell_key),
        &runs,
        r.ladder.unloaded_counts_as_broken,
        belay_domain::queue::QueueOrder::Given,
        limit,
    )))
}

/// Imposes `advance` or `wall` on a rung the gate has decided for a climber, stored beside the
/// gate's verdict; `outcome: null` clears it and restores the gate's verdict.
#[utoipa::path(post, path = "/v1/ladders/{id}/outcomes", tag = "ladders", params(("id" = String, Path)), request_body = OutcomeInput,
    responses((status = 200, body = LadderProgress), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The gate has not decided the rung (`rung_undecided`): hold the climber instead; a combination not a climber or a rung id not of this ladder (`conflict`)"),
        (status = 422, body = ErrorBody)))]
pub async fn set_outcome(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<LadderId>,
    ApiJson(input): ApiJson<OutcomeInput>,
) -> ApiResult<Json<LadderProgress>> {
    put_outcome(&s, &a.id, &id, input).await?;
    progress(Caller(a), State(s), Path(id)).await
}

/// `DELETE /ladders/{id}/outcomes`: which override to clear.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClearOutcome {
    pub combination: Combination,
    #[schema(value_type = String)]
    pub rung_id: belay_domain::ids::RungId,
}

/// Clears an override: the gate's own verdict governs again.
#[utoipa::path(delete, path = "/v1/ladders/{id}/outcomes", tag = "ladders", params(("id" = String, Path)), request_body = ClearOutcome,
    responses((status = 200, body = LadderProgress), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "A combination not a climber or a rung id not of this ladder (`conflict`)"),
        (status = 422, body = ErrorBody)))]
pub async fn clear_outcome(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<LadderId>,
    ApiJson(input): ApiJson<ClearOutcome>,
) -> ApiResult<Json<LadderProgress>> {
    let input = OutcomeInput {
        combination: input.combination,
        rung_id: input.rung_id,
        outcome: None,
    };
    put_outcome(&s, &a.id, &id, input).await?;
    progress(Caller(a), State(s), Path(id)).await
}

async fn put_outcome(s: &AppState, account_id: &AccountId, id: &LadderId, input: OutcomeInput) -> ApiResult<()> {
    input.combination.validate_shape()?;
    let mut tx = s.store.begin().await?;
    let r = ladders::resolve_ladder(&mut tx, account_id, id)
        .await?
        .ok_or_else(|| ladder_not_found(id))?;
    let (p, _) = ladders::read_progress(&mut tx, account_id, &r).await?;
    let row = p
        .board
        .override_target(&input.combination, &input.rung_id, input.outcome)
        .map_err(|e| match e {
            OverrideRefusal::UnknownClimber | OverrideRefusal::UnknownRung => {
                ApiError::new(StatusCode::CONFLICT, "conflict", e.to_string())
            }
            OverrideRefusal::Undecided => ApiError::new(StatusCode::CONFLICT, "rung_undecided", e.to_string()),
        })?;
    ladders::put_override(&mut tx, id, &row).await?;
    tx.commit().await?;
    poke(s, id).await;
    Ok(())
}

async fn halt_ladder(
    s: &AppState,
    account_id: &AccountId,
    id: &LadderId,
    statuses: &[JobStatus],
    kind: &str,
) -> ApiResult<HaltAnswer> {
    set_enabled(s, account_id, id, false, kind).await?;
    super::coverage::cancel_origin_jobs(
        s,
        account_id,
        &Origin::Ladder(id.to_string()),
        statuses,
        &format!("ladder.{kind}"),
    )
    .await
}

/// Halts the ladder: disables it, then cancels its `queued` and `pending` jobs through the one
/// cancel transition. A job launched by hand, or by another ladder or plan, is never touched.
#[utoipa::path(post, path = "/v1/ladders/{id}/halt", tag = "ladders", params(("id" = String, Path)),
    responses((status = 200, body = HaltAnswer), (status = 404, body = ErrorBody)))]
pub async fn halt(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<LadderId>,
) -> ApiResult<Json<HaltAnswer>> {
    Ok(Json(halt_ladder(&s, &a.id, &id, &JobStatus::WAITING, "halted").await?))
}

/// Halts all of the ladder: disables it, then cancels its `queued`, `pending`, `dispatched`,
/// `starting` and `running` jobs. Only with `{"confirm": true}`.
#[utoipa::path(post, path = "/v1/ladders/{id}/halt-all", tag = "ladders", params(("id" = String, Path)), request_body = HaltAllInput,
    responses((status = 200, body = HaltAnswer), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Not confirmed (`confirmation_required`): nothing was cancelled")))]
pub async fn halt_all(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<LadderId>,
    ApiJson(input): ApiJson<HaltAllInput>,
) -> ApiResult<Json<HaltAnswer>> {
    {
        let mut tx = s.store.begin_read().await?;
        let found = ladders::get_ladder(&mut tx, &a.id, &id).await?;
        tx.commit().await?;
        found.ok_or_else(|| ladder_not_found(&id))?;
    }
    if !input.confirm {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "confirmation_required",
            "confirm: halt all cancels dispatched, starting and running jobs too; send {\"confirm\": true}",
        ));
    }
    Ok(Json(
        halt_ladder(&s, &a.id, &id, &JobStatus::IN_FLIGHT, "halted_all").await?,
    ))
}

/// Starts a top-up of each of the reviewer's enabled ladders holding `cell` (with `autoTopUp`),
/// without waiting for any.
pub(crate) async fn after_review(s: &AppState, account_id: &AccountId, cell: &str) {
    let cell = belay_domain::job::CellKey(cell.to_string());
    let found = async {
        let mut tx = s.store.begin_read().await?;
        let found = ladders::ladders_with_cell(&mut tx, account_id, &cell).await?;
        let setting = coverage::buffer_setting(&mut tx, account_id).await?;
        tx.commit().await?;
        Ok::<_, belay_store::StoreError>((found, setting))
    };
    let (found, setting) = match found.await {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(error = %e, "could not find the ladders a review tops up");
            return;
        }
    };
    for l in found {
        if l.enabled {
            // The review may decide a rung: the climb applies an early stop at once.
            poke(s, l.id.as_str()).await;
        }
        let target = target_in_force(setting, l.buffer_target);
        if starts_top_up(
            Feed::Ladder,
            Trigger::ReviewSubmitted,
            l.auto_top_up,
            !l.enabled,
            target,
        ) {
            super::coverage::top_up_after_review(s, account_id, l.id.as_str(), Feed::Ladder).await;
        }
    }
}
