//! Jobs: enqueue (by hand or in batches), the dispatcher's claim, each status transition, cancel.
//!
//! Every change is a conditional update, so a retried call or two racing callers never move a job
//! twice: zero rows is an answer. Claims and enqueues first take the `dispatcher_lock` row, which
//! serializes them on both backends; this keeps `queue_seq` order equal to commit order and makes
//! a claim see every job enqueued before it.

use crate::Tx;
use crate::providers::{SharedLanes, shared_lanes};
use crate::rows::{self, JOB_COLUMNS, enum_text, status_list, timestamp_column, to_json};
use crate::{StoreError, events, new_id_body, now_ms, plans};
use belay_domain::attempt::FailureClass;
use belay_domain::budget::Reported;
use belay_domain::catalogue::{AdapterSpec, TestCaseVersion, TestType};
use belay_domain::dispatch::{ClaimPlan, Lane, LaneKey, Waiting, plan_claims};
use belay_domain::ids::{JobId, RunId};
use belay_domain::job::{CellKey, Combination, Job, JobStatus, JobTransition, RetryDecision, retry_decision};
use sqlx::Row;
use std::collections::{BTreeMap, BTreeSet};

/// A job about to be enqueued (the domain's; named here for the store's callers).
pub use belay_domain::job::NewJob;

/// Which jobs a listing returns.
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    pub statuses: Vec<JobStatus>,
    pub origin: Option<String>,
    pub after_seq: Option<i64>,
    pub limit: i64,
}

/// The result of asking a job to move to a status.
#[derive(Debug, Clone, PartialEq)]
pub enum Transition {
    /// It moved.
    Moved(Job),
    /// It was already there (a retried call).
    Already(Job),
    /// It is somewhere it cannot move from (cancelled, say).
    Refused(Job),
}

/// The result of recording a completed run.
#[derive(Debug, Clone, PartialEq)]
pub enum Completion {
    Recorded(belay_domain::run::Run),
    AlreadyRecorded(belay_domain::run::Run),
    Refused(Job),
}

/// The result of recording a failure.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub job: Job,
    /// What the retry rule decided (`None` when the job had already ended otherwise).
    pub decision: Option<RetryDecision>,
    /// The new attempt, when one was enqueued (or had been, by an earlier call).
    pub retry: Option<Job>,
}

/// The result of a cancel.
#[derive(Debug, Clone, PartialEq)]
pub struct Cancel {
    pub cancelled: bool,
    pub previous: JobStatus,
    pub job: Job,
}

/// What a run needs to know to execute its job.
#[derive(Debug, Clone, PartialEq)]
pub struct JobContext {
    pub job: Job,
    pub adapter: Option<AdapterSpec>,
    pub version: Option<TestCaseVersion>,
    pub capabilities: Option<serde_json::Value>,
}

/// How deep a claim first looks into each lane beyond its free slots (game-jam holds eat into it).
const LANE_SLACK: i64 = 16;

/// Serialises every write that changes what a claim sees (enqueue, claim, and any transition that
/// frees a slot). It is taken before the transaction records a transition, so on PostgreSQL, too,
/// the order of `job_transitions.seq` is the order in which those writes committed: a slot freed
/// by a completion whose row was numbered before a claim is one that claim saw free.
pub(crate) async fn take_dispatch_lock(tx: &mut Tx) -> Result<(), StoreError> {
    sqlx::query("update dispatcher_lock set claims = claims + 1 where id = 1")
        .execute(tx.conn())
        .await?;
    Ok(())
}

async fn record_transition(
    tx: &mut Tx,
    job_id: &JobId,
    from: Option<JobStatus>,
    to: JobStatus,
    at: i64,
) -> Result<(), StoreError> {
    // A job that ends without a run releases what a top-up reserved for it (decision 0054).
    if matches!(to, JobStatus::Failed | JobStatus::Canceled) {
        crate::budget::release(tx, job_id).await?;
    }
    sqlx::query("insert into job_transitions (job_id, from_status, to_status, at) values ($1, $2, $3, $4)")
        .bind(job_id.as_str())
        .bind(from.map(|s| enum_text(&s)))
        .bind(enum_text(&to))
        .bind(at)
        .execute(tx.conn())
        .await?;
    Ok(())
}

async fn insert_job(tx: &mut Tx, new: &NewJob, now: i64) -> Result<Option<JobId>, StoreError> {
    insert_keyed_job(tx, new, now, None).await
}

/// Inserts a job carrying `topup_key`, the natural key of one repeat of one cell of one top-up
/// (unique): a retried top-up inserts nothing twice. `None` when the key (or the retry) exists.
pub(crate) async fn insert_keyed_job(
    tx: &mut Tx,
    new: &NewJob,
    now: i64,
    topup_key: Option<&str>,
) -> Result<Option<JobId>, StoreError> {
    let id = JobId::from_body(&new_id_body());
    let cell = CellKey::of(&new.case, &new.combination);
    let (model, provider, gg_id, bindings) = match &new.combination {
        Combination::Harness { model, provider, .. } => (Some(model.clone()), provider.clone(), None, None),
        Combination::Gg { gg_config_id, bindings } => (None, None, Some(gg_config_id.clone()), Some(to_json(bindings))),
    };
    let jam: Vec<&str> = if new.test_type == Some(TestType::GameJam) {
        new.combination.models()
    } else {
        vec![]
    };
    let kind = match new.combination {
        Combination::Harness { .. } => "harness",
        Combination::Gg { .. } => "gg",
    };
    let inserted = sqlx::query(
        r#"insert into jobs (id, status, case_slug, case_version, case_variant, engine, combo_kind, harness, model,
               provider, gg_config_id, gg_config_name, gg_bindings, capabilities, cell_key, test_type, jam_models,
               user_id, origin, attempt, retry_of, created_at, queued_at, topup_key)
           values ($1, 'queued', $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $21, $22)
           on conflict do nothing"#,
    )
    .bind(id.as_str())
    .bind(&new.case.slug)
    .bind(&new.case.version)
    .bind(&new.case.variant)
    .bind(&new.case.engine)
    .bind(kind)
    .bind(new.combination.harness())
    .bind(model)
    .bind(provider)
    .bind(gg_id)
    .bind(&new.gg_config_name)
    .bind(bindings)
    .bind(new.capabilities.as_ref().map(|c| c.to_string()))
    .bind(&cell.0)
    .bind(new.test_type.map(|t| enum_text(&t)))
    .bind(to_json(&jam))
    .bind(new.user_id.as_deref())
    .bind(new.origin.as_ref().map(|o| o.to_string()))
    .bind(new.attempt)
    .bind(new.retry_of.as_deref())
    .bind(now)
    .bind(topup_key)
    .execute(tx.conn())
    .await?;
    if inserted.rows_affected() == 0 {
        return Ok(None);
    }
    record_transition(tx, &id, None, JobStatus::Queued, now).await?;
    events::append(
        tx.conn(),
        &id,
        "job.enqueued",
        &serde_json::json!({ "cell": cell.0, "origin": new.origin.as_ref().map(|o| o.to_string()), "attempt": new.attempt }),
    )
    .await?;
    Ok(Some(id))
}

pub(crate) async fn job_in(tx: &mut Tx, id: &JobId) -> Result<Option<Job>, StoreError> {
    let sql = format!("select {JOB_COLUMNS} from jobs where id = $1");
    let row = sqlx::query(&sql).bind(id.as_str()).fetch_optional(tx.conn()).await?;
    row.as_ref().map(rows::job).transpose()
}

/// The job, which must exist.
async fn require_job(tx: &mut Tx, id: &JobId) -> Result<Job, StoreError> {
    job_in(tx, id)
        .await?
        .ok_or_else(|| StoreError::not_found("job", id.as_str()))
}

/// The jobs with these ids, in this order.
async fn require_jobs(tx: &mut Tx, ids: &[JobId]) -> Result<Vec<Job>, StoreError> {
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        out.push(require_job(tx, id).await?);
    }
    Ok(out)
}

/// Enqueues one job; it takes the next `queue_seq`.
pub async fn enqueue(tx: &mut Tx, new: NewJob) -> Result<Job, StoreError> {
    let mut jobs = enqueue_batch(tx, vec![new]).await?;
    jobs.pop()
        .ok_or_else(|| StoreError::Conflict("job was not enqueued".into()))
}

/// Enqueues jobs in the given order, in one transaction, so their `queue_seq`s are consecutive
/// in that order. A job that retries one already retried is not enqueued twice: the existing
/// retry is returned in its place.
pub async fn enqueue_batch(tx: &mut Tx, jobs: Vec<NewJob>) -> Result<Vec<Job>, StoreError> {
    let now = now_ms();
    take_dispatch_lock(tx).await?;
    let mut ids = Vec::with_capacity(jobs.len());
    for new in &jobs {
        let id = match insert_job(tx, new, now).await? {
            Some(id) => id,
            None => {
                let retry_of = new.retry_of.as_deref().unwrap_or_default();
                let r = sqlx::query("select id from jobs where retry_of = $1")
                    .bind(retry_of)
                    .fetch_optional(tx.conn())
                    .await?
                    .ok_or_else(|| StoreError::Conflict("job id collision".into()))?;
                r.try_get::<String, _>("id")?.into()
            }
        };
        ids.push(id);
    }
    let out = require_jobs(tx, &ids).await?;
    Ok(out)
}

pub async fn get_job(tx: &mut Tx, id: &JobId) -> Result<Option<Job>, StoreError> {
    let sql = format!("select {JOB_COLUMNS} from jobs where id = $1");
    let row = sqlx::query(&sql).bind(id.as_str()).fetch_optional(tx.conn()).await?;
    row.as_ref().map(rows::job).transpose()
}

/// Jobs in queue order.
pub async fn list_jobs(tx: &mut Tx, filter: &JobFilter) -> Result<Vec<Job>, StoreError> {
    let statuses = if filter.statuses.is_empty() {
        JobStatus::ALL.to_vec()
    } else {
        filter.statuses.clone()
    };
    let mut sql = format!(
        "select {JOB_COLUMNS} from jobs where status in ({}) and queue_seq > $1",
        status_list(&statuses)
    );
    if filter.origin.is_some() {
        sql.push_str(" and origin = $3");
    }
    sql.push_str(" order by queue_seq limit $2");
    let mut q = sqlx::query(&sql)
        .bind(filter.after_seq.unwrap_or(0))
        .bind(filter.limit.clamp(1, 10_000));
    if let Some(o) = &filter.origin {
        q = q.bind(o);
    }
    let rows = q.fetch_all(tx.conn()).await?;
    rows.iter().map(rows::job).collect()
}

/// The dispatcher's claim. Dispatches waiting jobs strictly in ascending `queue_seq`, passing
/// over only a job whose harness is at its cap or a game-jam job of a model with a jam run in
/// flight, and marks held-back jobs `pending`. `claim_key` makes it idempotent: a retried claim
/// with the same key returns what the first one dispatched and dispatches nothing more.
pub async fn claim(tx: &mut Tx, claim_key: &str) -> Result<Vec<Job>, StoreError> {
    let sql = format!("select {JOB_COLUMNS} from jobs where claim_key = $1 order by queue_seq");
    let earlier = sqlx::query(&sql).bind(claim_key).fetch_all(tx.conn()).await?;
    if !earlier.is_empty() {
        return earlier.iter().map(rows::job).collect();
    }
    let now = now_ms();
    take_dispatch_lock(tx).await?;

    let (mut lanes, jams) = lanes_in_flight(tx).await?;
    let shared = shared_in_flight(tx).await?;
    let (plan, candidates) = walk_waiting(tx, &mut lanes, &shared, &jams).await?;
    let claimed = apply_claim(tx, &plan, &candidates, claim_key, now).await?;
    require_jobs(tx, &claimed).await
}

/// Each harness's lane (its cap and the jobs occupying it) and the models with a game-jam run in
/// flight.
async fn lanes_in_flight(tx: &mut Tx) -> Result<(BTreeMap<String, Lane>, BTreeSet<String>), StoreError> {
    let mut lanes: BTreeMap<String, Lane> = BTreeMap::new();
    for r in sqlx::query("select name, max_parallelism from harnesses")
        .fetch_all(tx.conn())
        .await?
    {
        lanes.insert(
            r.try_get("name")?,
            Lane {
                cap: r.try_get("max_parallelism")?,
                occupied: 0,
                truncated: false,
            },
        );
    }
    let occ_sql = format!(
        "select harness, count(*) as n from jobs where status in ({}) group by harness",
        status_list(&JobStatus::OCCUPYING)
    );
    for r in sqlx::query(&occ_sql).fetch_all(tx.conn()).await? {
        let h: String = r.try_get("harness")?;
        if let Some(l) = lanes.get_mut(&h) {
            l.occupied = r.try_get("n")?;
        }
    }
    let jam_sql = format!(
        "select jam_models from jobs where status in ({}) and jam_models <> '[]'",
        status_list(&JobStatus::OCCUPYING)
    );
    let mut jams = BTreeSet::new();
    for r in sqlx::query(&jam_sql).fetch_all(tx.conn()).await? {
        let models: Vec<String> = rows::json(&r.try_get::<String, _>("jam_models")?, "jam_models")?;
        jams.extend(models);
    }

    Ok((lanes, jams))
}

/// The provider and model lanes with a cap, each with the jobs occupying it (none are read when
/// no such lane exists, so a catalogue without them claims as before).
async fn shared_in_flight(tx: &mut Tx) -> Result<SharedLanes, StoreError> {
    let mut shared = shared_lanes(tx).await?;
    if shared.is_empty() {
        return Ok(shared);
    }
    let sql = format!(
        "select harness, provider, model, gg_bindings from jobs where status in ({})",
        status_list(&JobStatus::OCCUPYING)
    );
    let mut occupied: BTreeMap<LaneKey, i64> = BTreeMap::new();
    for r in sqlx::query(&sql).fetch_all(tx.conn()).await? {
        for k in job_lanes(&shared, &r)? {
            *occupied.entry(k).or_default() += 1;
        }
    }
    for (k, n) in occupied {
        if let Some(l) = shared.caps.get_mut(&k) {
            l.occupied = n;
        }
    }
    Ok(shared)
}

/// The shared lanes of a job row carrying `harness`, `provider`, `model` and `gg_bindings`.
fn job_lanes(shared: &SharedLanes, r: &sqlx::any::AnyRow) -> Result<Vec<LaneKey>, StoreError> {
    if shared.is_empty() {
        return Ok(vec![]);
    }
    let harness: String = r.try_get("harness")?;
    let provider: Option<String> = r.try_get("provider")?;
    let models: Vec<String> = match r.try_get::<Option<String>, _>("model")? {
        Some(m) => vec![m],
        None => match r.try_get::<Option<String>, _>("gg_bindings")? {
            Some(b) => rows::json::<BTreeMap<String, String>>(&b, "gg_bindings")?
                .into_values()
                .collect(),
            None => vec![],
        },
    };
    Ok(shared.of(&harness, provider.as_deref(), &models))
}

/// Reads each lane's waiting jobs in `queue_seq` order, a screenful deeper than its free slots,
/// and plans the claim over them; a lane the plan starved (every job read was passed over while
/// slots stayed free) is read four times deeper and the plan made again.
async fn walk_waiting(
    tx: &mut Tx,
    lanes: &mut BTreeMap<String, Lane>,
    shared: &SharedLanes,
    jams: &BTreeSet<String>,
) -> Result<(ClaimPlan, BTreeMap<String, Vec<Waiting>>), StoreError> {
    let lane_sql = format!(
        "select id, queue_seq, harness, provider, model, gg_bindings, jam_models, status, held_by from jobs \
         where harness = $1 and status in ({}) order by queue_seq limit $2",
        status_list(&JobStatus::WAITING)
    );
    // A harness whose bound provider lane is full at the start takes nothing: not read.
    let bound_full = |h: &str| {
        shared
            .bound
            .get(h)
            .and_then(|k| shared.caps.get(k))
            .is_some_and(|l| l.free() == 0)
    };
    let mut depth: BTreeMap<String, i64> = lanes
        .iter()
        .filter(|(h, l)| l.free() > 0 && !bound_full(h))
        .map(|(h, l)| (h.clone(), l.free() + LANE_SLACK))
        .collect();
    let mut candidates: BTreeMap<String, Vec<Waiting>> = BTreeMap::new();
    let plan = loop {
        for (h, limit) in &depth {
            if candidates.get(h).is_some_and(|c| (c.len() as i64) >= *limit) {
                continue;
            }
            let rows = sqlx::query(&lane_sql).bind(h).bind(*limit).fetch_all(tx.conn()).await?;
            let mut list = Vec::with_capacity(rows.len());
            for r in &rows {
                list.push(Waiting {
                    id: r.try_get::<String, _>("id")?.into(),
                    queue_seq: r.try_get("queue_seq")?,
                    harness: r.try_get("harness")?,
                    lanes: job_lanes(shared, r)?,
                    jam_models: rows::json(&r.try_get::<String, _>("jam_models")?, "jam_models")?,
                    pending: r.try_get::<String, _>("status")? == "pending",
                    held_by: r.try_get("held_by")?,
                });
            }
            if let Some(lane) = lanes.get_mut(h) {
                lane.truncated = (list.len() as i64) == *limit;
            }
            candidates.insert(h.clone(), list);
        }
        let all: Vec<Waiting> = candidates.values().flatten().cloned().collect();
        let plan = plan_claims(&all, lanes, &shared.caps, &shared.bound, jams);
        if plan.starved.is_empty() {
            break plan;
        }
        for h in &plan.starved {
            if let Some(d) = depth.get_mut(h) {
                *d *= 4;
            }
        }
    };

    Ok((plan, candidates))
}

/// Dispatches the planned jobs (those still waiting), holds back the passed-over ones as
/// `pending` and every queued job of a full lane, each with its transition.
async fn apply_claim(
    tx: &mut Tx,
    plan: &ClaimPlan,
    candidates: &BTreeMap<String, Vec<Waiting>>,
    claim_key: &str,
    now: i64,
) -> Result<Vec<JobId>, StoreError> {
    let by_id: BTreeMap<&str, &Waiting> = candidates.values().flatten().map(|w| (w.id.as_str(), w)).collect();
    let mut claimed = Vec::with_capacity(plan.dispatch.len());
    for id in &plan.dispatch {
        let from = if by_id[id.as_str()].pending {
            JobStatus::Pending
        } else {
            JobStatus::Queued
        };
        let moved = sqlx::query(&format!(
            "update jobs set status = 'dispatched', dispatched_at = $2, claim_key = $3, held_by = null where id = $1 and status in ({})",
            status_list(&JobStatus::WAITING)
        ))
        .bind(id.as_str())
        .bind(now)
        .bind(claim_key)
        .execute(tx.conn())
        .await?;
        if moved.rows_affected() == 1 {
            record_transition(tx, id, Some(from), JobStatus::Dispatched, now).await?;
            claimed.push(id.clone());
        }
    }
    for held in &plan.hold {
        let id = &held.id;
        let moved = sqlx::query(
            "update jobs set status = 'pending', pending_at = $2, held_by = $3 where id = $1 and status = 'queued'",
        )
        .bind(id.as_str())
        .bind(now)
        .bind(&held.by)
        .execute(tx.conn())
        .await?;
        if moved.rows_affected() == 1 {
            record_transition(tx, id, Some(JobStatus::Queued), JobStatus::Pending, now).await?;
        } else {
            // Already pending, now held by another lane: name it (no transition).
            sqlx::query("update jobs set held_by = $2 where id = $1 and status = 'pending'")
                .bind(id.as_str())
                .bind(&held.by)
                .execute(tx.conn())
                .await?;
        }
    }
    for (h, by) in &plan.full {
        let held = sqlx::query(
            "update jobs set status = 'pending', pending_at = $2, held_by = $3 where harness = $1 and status = 'queued' returning id",
        )
        .bind(h)
        .bind(now)
        .bind(by)
        .fetch_all(tx.conn())
        .await?;
        let ids: Vec<String> = held.iter().map(|r| r.try_get("id")).collect::<Result<_, _>>()?;
        for chunk in ids.chunks(200) {
            let values: Vec<String> = (0..chunk.len())
                .map(|i| format!("(${}, 'queued', 'pending', $1)", i + 2))
                .collect();
            let sql = format!(
                "insert into job_transitions (job_id, from_status, to_status, at) values {}",
                values.join(", ")
            );
            let mut q = sqlx::query(&sql).bind(now);
            for id in chunk {
                q = q.bind(id);
            }
            q.execute(tx.conn()).await?;
        }
    }
    Ok(claimed)
}

/// Moves a job to `to` if its current status allows it.
pub async fn advance_job(tx: &mut Tx, id: &JobId, to: JobStatus) -> Result<Transition, StoreError> {
    let now = now_ms();
    let job = require_job(tx, id).await?;
    if job.status == to {
        return Ok(Transition::Already(job));
    }
    if !job.status.can_become(to) {
        return Ok(Transition::Refused(job));
    }
    let sql = format!(
        "update jobs set status = $3, {} = $4 where id = $1 and status = $2",
        timestamp_column(to)
    );
    let moved = sqlx::query(&sql)
        .bind(id.as_str())
        .bind(enum_text(&job.status))
        .bind(enum_text(&to))
        .bind(now)
        .execute(tx.conn())
        .await?;
    if moved.rows_affected() == 0 {
        let current = require_job(tx, id).await?;
        return Ok(if current.status == to {
            Transition::Already(current)
        } else {
            Transition::Refused(current)
        });
    }
    record_transition(tx, id, Some(job.status), to, now).await?;
    let job = require_job(tx, id).await?;
    Ok(Transition::Moved(job))
}

/// [`complete_job_reported`] for a run whose adapter reported no cost.
pub async fn complete_job(
    tx: &mut Tx,
    id: &JobId,
    loaded: bool,
    artifacts: &[belay_domain::run::Artifact],
) -> Result<Completion, StoreError> {
    complete_job_as(tx, id, loaded, artifacts, None).await
}

/// As [`complete_job`]; with `task_failure`, the agent failed the task: the run is recorded as a
/// failed result (class `task`, with the adapter's message), which counts as evidence.
pub async fn complete_job_as(
    tx: &mut Tx,
    id: &JobId,
    loaded: bool,
    artifacts: &[belay_domain::run::Artifact],
    task_failure: Option<&str>,
) -> Result<Completion, StoreError> {
    complete_job_reported(tx, id, loaded, artifacts, task_failure, Reported::default()).await
}

/// Records the run of a job that completed: the job moves running → completed and the run row
/// is written in the same transaction, with its cost from what the adapter `reported` (a budgeted
/// job's reservation settled to it). With `task_failure` the run is a failed result (class
/// `task`). A second call returns the run the first one wrote.
pub async fn complete_job_reported(
    tx: &mut Tx,
    id: &JobId,
    loaded: bool,
    artifacts: &[belay_domain::run::Artifact],
    task_failure: Option<&str>,
    reported: Reported,
) -> Result<Completion, StoreError> {
    if let Some(run) = crate::runs::run_of_job(tx, id).await? {
        return Ok(Completion::AlreadyRecorded(run));
    }
    let now = now_ms();
    take_dispatch_lock(tx).await?;
    let job = require_job(tx, id).await?;
    if job.status != JobStatus::Running {
        return Ok(Completion::Refused(job));
    }
    let task_class = task_failure.map(|_| FailureClass::Task.as_str());
    let moved = sqlx::query(
        "update jobs set status = 'completed', completed_at = $2, failure_class = $3, error = $4 where id = $1 and status = 'running'",
    )
    .bind(id.as_str())
    .bind(now)
    .bind(task_class)
    .bind(task_failure)
    .execute(tx.conn())
    .await?;
    if moved.rows_affected() == 0 {
        let job = require_job(tx, id).await?;
        return Ok(Completion::Refused(job));
    }
    record_transition(tx, id, Some(JobStatus::Running), JobStatus::Completed, now).await?;
    let test_type = match job.test_type {
        Some(t) => t,
        None => {
            let r = sqlx::query("select test_type from test_case_versions where slug = $1 and version = $2")
                .bind(&job.case.slug)
                .bind(&job.case.version)
                .fetch_optional(tx.conn())
                .await?;
            match r {
                Some(r) => rows::test_type(&r.try_get::<String, _>("test_type")?)?,
                None => TestType::Standard,
            }
        }
    };
    let run_id = RunId::for_job(id);
    sqlx::query(
        r#"insert into runs (id, job_id, case_slug, case_version, case_variant, engine, combo_kind, harness, model,
               provider, gg_config_id, gg_config_name, gg_bindings, cell_key, test_type, loaded, artifacts,
               user_id, origin, completed_at, failure_class, failure)
           select $1, id, case_slug, case_version, case_variant, engine, combo_kind, harness, model, provider,
               gg_config_id, gg_config_name, gg_bindings, cell_key, $3, $4, $5, user_id, origin, $6, $7, $8
           from jobs where id = $2"#,
    )
    .bind(run_id.as_str())
    .bind(id.as_str())
    .bind(enum_text(&test_type))
    .bind(loaded as i64)
    .bind(to_json(&artifacts))
    .bind(now)
    .bind(task_class)
    .bind(task_failure)
    .execute(tx.conn())
    .await?;
    crate::budget::settle_run(tx, &job, &run_id, reported).await?;
    events::append(
        tx.conn(),
        id,
        "run.recorded",
        &serde_json::json!({ "runId": run_id, "loaded": loaded }),
    )
    .await?;
    let run = crate::runs::get_run(tx, &run_id)
        .await?
        .ok_or_else(|| StoreError::not_found("run", &run_id))?;
    Ok(Completion::Recorded(run))
}

/// Records that a claimed job failed. An infrastructure failure is retried as a new job with
/// `attempt + 1` that keeps the launcher and the origin, unless the origin is paused.
pub async fn fail_job(tx: &mut Tx, id: &JobId, reason: &str, infrastructure: bool) -> Result<Failure, StoreError> {
    fail_job_as(tx, id, reason, infrastructure, None).await
}

/// As [`fail_job`], recording the attempt's failure class. A `provider_refused` failure is never
/// retried: the plan or ladder that launched the job is paused and an event names the provider
/// and the cause.
pub async fn fail_job_as(
    tx: &mut Tx,
    id: &JobId,
    reason: &str,
    infrastructure: bool,
    class: Option<FailureClass>,
) -> Result<Failure, StoreError> {
    let infrastructure = infrastructure && class.is_none_or(|c| c == FailureClass::Infra);
    let now = now_ms();
    take_dispatch_lock(tx).await?;
    let job = require_job(tx, id).await?;
    if job.status == JobStatus::Failed {
        let sql = format!("select {JOB_COLUMNS} from jobs where retry_of = $1");
        let retry = sqlx::query(&sql).bind(id.as_str()).fetch_optional(tx.conn()).await?;
        let retry = retry.as_ref().map(rows::job).transpose()?;
        return Ok(Failure {
            job,
            decision: None,
            retry,
        });
    }
    if !job.status.can_become(JobStatus::Failed) {
        return Ok(Failure {
            job,
            decision: None,
            retry: None,
        });
    }
    let reason: String = reason.chars().take(4000).collect();
    let moved = sqlx::query(
        "update jobs set status = 'failed', failed_at = $3, error = $4, failure_class = $5 where id = $1 and status = $2",
    )
    .bind(id.as_str())
    .bind(enum_text(&job.status))
    .bind(now)
    .bind(&reason)
    .bind(class.map(FailureClass::as_str))
    .execute(tx.conn())
    .await?;
    if moved.rows_affected() == 0 {
        let job = require_job(tx, id).await?;
        return Ok(Failure {
            job,
            decision: None,
            retry: None,
        });
    }
    record_transition(tx, id, Some(job.status), JobStatus::Failed, now).await?;
    if class == Some(FailureClass::ProviderRefused) {
        crate::attempts::provider_refused(tx, &job, &reason).await?;
    }
    let paused = match &job.origin {
        Some(o) => plans::origin_paused(tx.conn(), o).await?,
        None => false,
    };
    let decision = retry_decision(job.attempt, infrastructure, job.origin.as_ref(), paused);
    if decision == RetryDecision::Withheld {
        sqlx::query("update jobs set retry_withheld = 1 where id = $1")
            .bind(id.as_str())
            .execute(tx.conn())
            .await?;
    }
    events::append(
        tx.conn(),
        id,
        "job.failed",
        &serde_json::json!({ "reason": reason, "decision": format!("{decision:?}") }),
    )
    .await?;
    let mut retry = None;
    if matches!(decision, RetryDecision::Retry { .. }) {
        let capabilities: Option<String> = sqlx::query("select capabilities from jobs where id = $1")
            .bind(id.as_str())
            .fetch_one(tx.conn())
            .await?
            .try_get("capabilities")?;
        let capabilities = capabilities
            .as_deref()
            .map(|c| rows::json(c, "capabilities"))
            .transpose()?;
        if let Some(new) = job.retry(&decision, capabilities)
            && let Some(new_id) = insert_job(tx, &new, now).await?
        {
            crate::budget::carry_to_retry(tx, id, &new_id).await?;
            retry = job_in(tx, &new_id).await?;
        }
    }
    let job = require_job(tx, id).await?;
    Ok(Failure {
        job,
        decision: Some(decision),
        retry,
    })
}

/// Retries a failed job now, by hand: a new job with the next attempt number, the same pin,
/// combination, launcher and origin, `retry_of` naming this one. Refused (409) unless the job
/// failed, when it was retried already, or while its plan or ladder is paused.
pub async fn retry_now(tx: &mut Tx, id: &JobId) -> Result<Job, StoreError> {
    let now = now_ms();
    take_dispatch_lock(tx).await?;
    let job = require_job(tx, id).await?;
    if job.status != JobStatus::Failed {
        return Err(StoreError::Conflict(format!(
            "status: job {id} is {}, and only a failed job is retried",
            job.status
        )));
    }
    let sql = format!("select {JOB_COLUMNS} from jobs where retry_of = $1");
    if let Some(r) = sqlx::query(&sql).bind(id.as_str()).fetch_optional(tx.conn()).await? {
        let retry = rows::job(&r)?;
        return Err(StoreError::Conflict(format!(
            "job {id} was retried already, by job {}",
            retry.id
        )));
    }
    if let Some(o) = &job.origin
        && plans::origin_paused(tx.conn(), o).await?
    {
        return Err(StoreError::Conflict(format!(
            "origin: {o} is paused; resume it before retrying its jobs"
        )));
    }
    let capabilities: Option<String> = sqlx::query("select capabilities from jobs where id = $1")
        .bind(id.as_str())
        .fetch_one(tx.conn())
        .await?
        .try_get("capabilities")?;
    let capabilities = capabilities
        .as_deref()
        .map(|c| rows::json(c, "capabilities"))
        .transpose()?;
    let decision = RetryDecision::Retry {
        attempt: job.attempt + 1,
    };
    let new = job
        .retry(&decision, capabilities)
        .ok_or_else(|| StoreError::Conflict("job was not retried".into()))?;
    let new_id = insert_job(tx, &new, now)
        .await?
        .ok_or_else(|| StoreError::Conflict(format!("job {id} was retried already")))?;
    events::append(
        tx.conn(),
        id,
        "job.retried",
        &serde_json::json!({ "retry": new_id, "by": "hand" }),
    )
    .await?;
    require_job(tx, &new_id).await
}

/// The one atomic cancel transition, from any state that is not final.
pub async fn cancel_job(tx: &mut Tx, id: &JobId) -> Result<Cancel, StoreError> {
    let now = now_ms();
    take_dispatch_lock(tx).await?;
    let job = require_job(tx, id).await?;
    let cancelled = cancel_in(tx, &job, now).await?;
    let current = require_job(tx, id).await?;
    Ok(Cancel {
        cancelled,
        previous: job.status,
        job: current,
    })
}

/// Cancels every job in one of `statuses` (optionally of one origin); returns each cancelled
/// job with the status it was cancelled from.
pub async fn cancel_jobs(
    tx: &mut Tx,
    statuses: &[JobStatus],
    origin: Option<&str>,
) -> Result<Vec<(Job, JobStatus)>, StoreError> {
    let statuses: Vec<JobStatus> = statuses.iter().copied().filter(|s| !s.is_final()).collect();
    if statuses.is_empty() {
        return Ok(vec![]);
    }
    let now = now_ms();
    take_dispatch_lock(tx).await?;
    let mut sql = format!(
        "select {JOB_COLUMNS} from jobs where status in ({})",
        status_list(&statuses)
    );
    if origin.is_some() {
        sql.push_str(" and origin = $1");
    }
    sql.push_str(" order by queue_seq");
    let mut q = sqlx::query(&sql);
    if let Some(o) = origin {
        q = q.bind(o);
    }
    let jobs: Vec<Job> = q
        .fetch_all(tx.conn())
        .await?
        .iter()
        .map(rows::job)
        .collect::<Result<_, _>>()?;
    let mut out = Vec::new();
    for job in jobs {
        if cancel_in(tx, &job, now).await? {
            let current = require_job(tx, &job.id).await?;
            out.push((current, job.status));
        }
    }
    Ok(out)
}

/// The status transitions recorded after `after_seq`, in the order they were recorded.
pub async fn transitions(tx: &mut Tx, after_seq: i64, limit: i64) -> Result<Vec<JobTransition>, StoreError> {
    let rows = sqlx::query(
        r#"select t.seq, t.job_id, j.harness, j.queue_seq, t.from_status, t.to_status, t.at
           from job_transitions t join jobs j on j.id = t.job_id
           where t.seq > $1 order by t.seq limit $2"#,
    )
    .bind(after_seq)
    .bind(limit)
    .fetch_all(tx.conn())
    .await?;
    rows.iter()
        .map(|r| {
            let from: Option<String> = r.try_get("from_status")?;
            Ok(JobTransition {
                seq: r.try_get("seq")?,
                job_id: r.try_get::<String, _>("job_id")?.into(),
                harness: r.try_get("harness")?,
                queue_seq: r.try_get("queue_seq")?,
                from: from.as_deref().map(rows::status).transpose()?,
                to: rows::status(&r.try_get::<String, _>("to_status")?)?,
                at: r.try_get("at")?,
            })
        })
        .collect()
}

/// Everything a run needs: the job, its harness's adapter, the case version (if ingested) and
/// the gg capability set recorded at launch.
pub async fn job_context(tx: &mut Tx, id: &JobId) -> Result<JobContext, StoreError> {
    let job = get_job(tx, id)
        .await?
        .ok_or_else(|| StoreError::not_found("job", id.as_str()))?;
    let adapter = crate::catalogue::get_harness(tx, job.combination.harness())
        .await?
        .map(|h| h.adapter);
    let version = crate::catalogue::get_test_case_version(tx, &job.case.slug, &job.case.version).await?;
    let caps: Option<String> = sqlx::query("select capabilities from jobs where id = $1")
        .bind(id.as_str())
        .fetch_one(tx.conn())
        .await?
        .try_get("capabilities")?;
    let capabilities = caps.as_deref().map(|c| rows::json(c, "capabilities")).transpose()?;
    Ok(JobContext {
        job,
        adapter,
        version,
        capabilities,
    })
}

/// How many jobs each status holds (for dashboards and tests).
pub async fn job_status_counts(tx: &mut Tx) -> Result<BTreeMap<JobStatus, i64>, StoreError> {
    let rows = sqlx::query("select status, count(*) as n from jobs group by status")
        .fetch_all(tx.conn())
        .await?;
    rows.iter()
        .map(|r| Ok((rows::status(&r.try_get::<String, _>("status")?)?, r.try_get("n")?)))
        .collect()
}

/// The raw rate a backend sustains for single-row conditional updates, for the claim benchmark:
/// moves each of `ids` from queued to dispatched, one statement and one commit each.
pub async fn bench_single_row_updates(tx: &mut Tx, ids: &[JobId]) -> Result<u64, StoreError> {
    let mut n = 0;
    for id in ids {
        let r = sqlx::query(
            "update jobs set status = 'dispatched', dispatched_at = $2 where id = $1 and status = 'queued'",
        )
        .bind(id.as_str())
        .bind(now_ms())
        .execute(tx.conn())
        .await?;
        n += r.rows_affected();
    }
    Ok(n)
}

pub(crate) async fn cancel_in(tx: &mut Tx, job: &Job, now: i64) -> Result<bool, StoreError> {
    let mut current = job.status;
    // The job may move on between the read and the update (it started, say); cancel from
    // wherever it is now, until it is final.
    for _ in 0..8 {
        if current.is_final() {
            return Ok(false);
        }
        let moved = sqlx::query("update jobs set status = 'canceled', canceled_at = $3 where id = $1 and status = $2")
            .bind(job.id.as_str())
            .bind(enum_text(&current))
            .bind(now)
            .execute(tx.conn())
            .await?;
        if moved.rows_affected() == 1 {
            record_transition(tx, &job.id, Some(current), JobStatus::Canceled, now).await?;
            events::append(
                tx.conn(),
                &job.id,
                "job.canceled",
                &serde_json::json!({ "from": current.as_str() }),
            )
            .await?;
            return Ok(true);
        }
        current = require_job(tx, &job.id).await?.status;
    }
    Err(StoreError::Conflict(format!(
        "job {} kept changing status while being cancelled",
        job.id
    )))
}

crate::one_step! {
    write enqueue(new: NewJob) -> Job;
    write enqueue_batch(jobs: Vec<NewJob>) -> Vec<Job>;
    read get_job(id: &JobId) -> Option<Job>;
    read list_jobs(filter: &JobFilter) -> Vec<Job>;
    write claim(claim_key: &str) -> Vec<Job>;
    write advance_job(id: &JobId, to: JobStatus) -> Transition;
    write complete_job(id: &JobId, loaded: bool, artifacts: &[belay_domain::run::Artifact]) -> Completion;
    write complete_job_as(id: &JobId, loaded: bool, artifacts: &[belay_domain::run::Artifact], task_failure: Option<&str>) -> Completion;
    write complete_job_reported(id: &JobId, loaded: bool, artifacts: &[belay_domain::run::Artifact], task_failure: Option<&str>, reported: Reported) -> Completion;
    write fail_job(id: &JobId, reason: &str, infrastructure: bool) -> Failure;
    write fail_job_as(id: &JobId, reason: &str, infrastructure: bool, class: Option<FailureClass>) -> Failure;
    write cancel_job(id: &JobId) -> Cancel;
    write retry_now(id: &JobId) -> Job;
    write cancel_jobs(statuses: &[JobStatus], origin: Option<&str>) -> Vec<(Job, JobStatus)>;
    read transitions(after_seq: i64, limit: i64) -> Vec<JobTransition>;
    read job_context(id: &JobId) -> JobContext;
    read job_status_counts() -> BTreeMap<JobStatus, i64>;
    write bench_single_row_updates(ids: &[JobId]) -> u64;
}
