//! What the metrics endpoints read from the database at each scrape: every figure is derived
//! from rows every process sees, so the API and every worker answer the same numbers.

use crate::coverage::FeedRow;
use crate::{StoreError, Tx, new_id_body, now_ms};
use sqlx::Row;
use std::collections::BTreeMap;

/// One scrape's figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricsSnapshot {
    /// (harness, status, jobs).
    pub jobs: Vec<(String, String, i64)>,
    /// (to status, transitions recorded): counts only grow.
    pub transitions: Vec<(String, i64)>,
    /// Seconds from queued to dispatched (claimed), per job that was claimed.
    pub claim_seconds: Vec<f64>,
    /// Seconds from dispatched to running, per job that ran.
    pub dispatch_seconds: Vec<f64>,
    /// Seconds from running to completed or failed, per (harness, job) that ended.
    pub run_seconds: Vec<(String, f64)>,
    /// Sandboxes holding a lease in the deployment.
    pub live_sandboxes: i64,
    /// (project, month, seconds charged on its Sandbox meter).
    pub meter_seconds: Vec<(String, String, i64)>,
    /// (kind, outcome, top-ups): how top-ups of plans and ladders ended.
    pub top_ups: Vec<(String, String, i64)>,
    /// Seconds from claim to end, per (kind, top-up) that ran.
    pub top_up_seconds: Vec<(String, f64)>,
    /// (status, Candidates).
    pub candidates: Vec<(String, i64)>,
    /// Seconds from a Candidate's creation to its first verdict, per (verdict, Candidate):
    /// `verified` or `rejected`.
    pub verification_seconds: Vec<(String, f64)>,
    /// (check kind, status, Evidence records).
    pub checks: Vec<(String, String, i64)>,
    /// Seconds each check attempt took, per (check kind, Evidence record).
    pub check_seconds: Vec<(String, f64)>,
    /// (meter, used, reserved), summed over the meter's scopes (days, Candidates, months).
    pub usage: Vec<(String, i64, i64)>,
    /// (counter, value): what went wrong and was retried, e.g. [`RUN_START_FAILURES`].
    pub counters: Vec<(String, i64)>,
}

/// The counter of run workflow starts Temporal refused for a reason other than "already
/// started": each is logged with its job and retried with its batch.
pub const RUN_START_FAILURES: &str = "run_start_failures";

/// What a top-up fed.
pub use belay_domain::top_up::Feed;

/// How a top-up ended, as the metrics count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopUpEnd {
    /// It ran and recorded its answer (which may have enqueued nothing).
    Launched,
    /// It held the claim and recorded no answer.
    Failed,
    /// Another top-up of the same plan held it.
    Busy,
    /// The plan is paused (the ladder disabled).
    Paused,
}

impl TopUpEnd {
    pub fn as_str(self) -> &'static str {
        match self {
            TopUpEnd::Launched => "launched",
            TopUpEnd::Failed => "failed",
            TopUpEnd::Busy => "busy",
            TopUpEnd::Paused => "paused",
        }
    }
}

async fn insert_top_up(
    tx: &mut Tx,
    id: &str,
    kind: Feed,
    target: &str,
    end: TopUpEnd,
    started_ms: Option<i64>,
    ended_ms: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "insert into top_up_outcomes (id, kind, target_id, outcome, started_ms, ended_ms) values ($1, $2, $3, $4, $5, $6) on conflict do nothing",
    )
    .bind(id)
    .bind(kind.as_str())
    .bind(target)
    .bind(end.as_str())
    .bind(started_ms)
    .bind(ended_ms)
    .execute(tx.conn())
    .await?;
    Ok(())
}

/// Records that the top-up `holder` (its workflow run) of `target` was skipped (`Busy` or
/// `Paused`) when it tried to claim. Once per top-up, however often it is called.
pub async fn record_top_up_skipped(
    tx: &mut Tx,
    kind: Feed,
    target: &str,
    holder: &str,
    end: TopUpEnd,
) -> Result<(), StoreError> {
    let now = now_ms();
    insert_top_up(tx, holder, kind, target, end, Some(now), now).await
}

/// Records, before the top-up `holder` releases its claim on `target`, how it ended: `launched`
/// when its answer was recorded, `failed` when not; its start is the claim's time. Once per
/// top-up, however often it is called.
pub async fn record_top_up_end(tx: &mut Tx, kind: Feed, target: &str, holder: &str) -> Result<(), StoreError> {
    let sql = format!(
        "select topping_up_at from {} where id = $1 and topping_up_by = $2",
        kind.table()
    );
    let started: Option<i64> = match sqlx::query(&sql)
        .bind(target)
        .bind(holder)
        .fetch_optional(tx.conn())
        .await?
    {
        Some(r) => r.try_get("topping_up_at")?,
        None => None,
    };
    let answered = sqlx::query("select 1 as one from coverage_topups where id = $1")
        .bind(holder)
        .fetch_optional(tx.conn())
        .await?
        .is_some();
    let end = if answered { TopUpEnd::Launched } else { TopUpEnd::Failed };
    insert_top_up(tx, holder, kind, target, end, started, now_ms()).await
}

fn seconds(ms: i64) -> f64 {
    ms.max(0) as f64 / 1000.0
}

/// Adds `n` to counter `name` (one of this module's counter names).
pub async fn count(tx: &mut Tx, name: &str, n: i64) -> Result<(), StoreError> {
    sqlx::query(
        "insert into counters (name, value) values ($1, $2) \
         on conflict (name) do update set value = counters.value + excluded.value",
    )
    .bind(name)
    .bind(n)
    .execute(tx.conn())
    .await?;
    Ok(())
}

/// Records a top-up answered `busy` before any started (one of the same plan was running).
pub async fn record_top_up_busy(tx: &mut Tx, kind: Feed, target: &str) -> Result<(), StoreError> {
    let id = format!("busy_{}", new_id_body());
    let now = now_ms();
    insert_top_up(tx, &id, kind, target, TopUpEnd::Busy, Some(now), now).await?;
    Ok(())
}

/// Everything `/metrics` reports, read in the caller's transaction (one consistent view).
pub async fn metrics_snapshot(tx: &mut Tx) -> Result<MetricsSnapshot, StoreError> {
    let mut out = MetricsSnapshot::default();
    run_lane_metrics(tx, &mut out).await?;
    sandbox_metrics(tx, &mut out).await?;
    top_up_metrics(tx, &mut out).await?;
    verification_metrics(tx, &mut out).await?;
    counter_metrics(tx, &mut out).await?;
    Ok(out)
}

/// Jobs by harness and status, the transitions, and each job's claim, dispatch and run durations.
async fn run_lane_metrics(tx: &mut Tx, out: &mut MetricsSnapshot) -> Result<(), StoreError> {
    for r in
        sqlx::query("select harness, status, count(*) as n from jobs group by harness, status order by harness, status")
            .fetch_all(tx.conn())
            .await?
    {
        out.jobs
            .push((r.try_get("harness")?, r.try_get("status")?, r.try_get("n")?));
    }
    for r in sqlx::query("select to_status, count(*) as n from job_transitions group by to_status order by to_status")
        .fetch_all(tx.conn())
        .await?
    {
        out.transitions.push((r.try_get("to_status")?, r.try_get("n")?));
    }
    for r in sqlx::query(
        "select harness, queued_at, dispatched_at, running_at, coalesce(completed_at, failed_at) as ended_at from jobs \
         where dispatched_at is not null",
    )
    .fetch_all(tx.conn())
    .await?
    {
        let queued: Option<i64> = r.try_get("queued_at")?;
        let dispatched: Option<i64> = r.try_get("dispatched_at")?;
        let running: Option<i64> = r.try_get("running_at")?;
        let ended: Option<i64> = r.try_get("ended_at")?;
        if let (Some(q), Some(d)) = (queued, dispatched) {
            out.claim_seconds.push(seconds(d - q));
        }
        if let (Some(d), Some(run)) = (dispatched, running) {
            out.dispatch_seconds.push(seconds(run - d));
        }
        if let (Some(run), Some(e)) = (running, ended) {
            out.run_seconds.push((r.try_get("harness")?, seconds(e - run)));
        }
    }
    Ok(())
}

/// The live Sandboxes and each project's charged seconds by month.
async fn sandbox_metrics(tx: &mut Tx, out: &mut MetricsSnapshot) -> Result<(), StoreError> {
    out.live_sandboxes = sqlx::query("select count(*) as n from sandbox_leases")
        .fetch_one(tx.conn())
        .await?
        .try_get("n")?;
    for r in sqlx::query("select project_id, month, charged_seconds from sandbox_usage order by project_id, month")
        .fetch_all(tx.conn())
        .await?
    {
        out.meter_seconds.push((
            r.try_get("project_id")?,
            r.try_get("month")?,
            r.try_get("charged_seconds")?,
        ));
    }
    Ok(())
}

/// Top-ups by kind and outcome, and how long each launched one took.
async fn top_up_metrics(tx: &mut Tx, out: &mut MetricsSnapshot) -> Result<(), StoreError> {
    for r in sqlx::query(
        "select kind, outcome, count(*) as n from top_up_outcomes group by kind, outcome order by kind, outcome",
    )
    .fetch_all(tx.conn())
    .await?
    {
        out.top_ups
            .push((r.try_get("kind")?, r.try_get("outcome")?, r.try_get("n")?));
    }
    for r in sqlx::query(
        "select kind, started_ms, ended_ms from top_up_outcomes where outcome = 'launched' and started_ms is not null",
    )
    .fetch_all(tx.conn())
    .await?
    {
        let (started, ended): (i64, i64) = (r.try_get("started_ms")?, r.try_get("ended_ms")?);
        out.top_up_seconds.push((r.try_get("kind")?, seconds(ended - started)));
    }
    Ok(())
}

/// Candidates by status, each one's time to its first verdict, and the checks' Evidence.
async fn verification_metrics(tx: &mut Tx, out: &mut MetricsSnapshot) -> Result<(), StoreError> {
    for r in sqlx::query("select status, count(*) as n from candidates group by status order by status")
        .fetch_all(tx.conn())
        .await?
    {
        out.candidates.push((r.try_get("status")?, r.try_get("n")?));
    }
    // Each Candidate's first verdict: the earliest of its verified and rejected events.
    let mut first: BTreeMap<String, (i64, String, i64)> = BTreeMap::new();
    for r in sqlx::query(
        "select c.id, c.created_at, e.kind, min(e.at) as at from candidates c \
         join events e on e.entity = c.id and e.kind in ('candidate.verified', 'candidate.rejected') \
         group by c.id, c.created_at, e.kind",
    )
    .fetch_all(tx.conn())
    .await?
    {
        let (id, created, kind, at): (String, i64, String, i64) = (
            r.try_get("id")?,
            r.try_get("created_at")?,
            r.try_get("kind")?,
            r.try_get("at")?,
        );
        let verdict = kind.trim_start_matches("candidate.").to_owned();
        match first.get(&id) {
            Some((earlier, _, _)) if *earlier <= at => {}
            _ => {
                first.insert(id, (at, verdict, created));
            }
        }
    }
    out.verification_seconds = first
        .into_values()
        .map(|(at, verdict, created)| (verdict, seconds(at - created)))
        .collect();
    for r in sqlx::query("select kind, status, count(*) as n from evidence group by kind, status order by kind, status")
        .fetch_all(tx.conn())
        .await?
    {
        out.checks
            .push((r.try_get("kind")?, r.try_get("status")?, r.try_get("n")?));
    }
    for r in sqlx::query("select kind, duration_ms from evidence")
        .fetch_all(tx.conn())
        .await?
    {
        out.check_seconds
            .push((r.try_get("kind")?, seconds(r.try_get("duration_ms")?)));
    }
    Ok(())
}

/// The counters and the usage meters.
async fn counter_metrics(tx: &mut Tx, out: &mut MetricsSnapshot) -> Result<(), StoreError> {
    for r in sqlx::query("select name, value from counters order by name")
        .fetch_all(tx.conn())
        .await?
    {
        out.counters.push((r.try_get("name")?, r.try_get("value")?));
    }
    for r in sqlx::query(
        "select meter, cast(sum(used) as bigint) as used, cast(sum(reserved) as bigint) as reserved from usage_counters \
         group by meter order by meter",
    )
    .fetch_all(tx.conn())
    .await?
    {
        out.usage
            .push((r.try_get("meter")?, r.try_get("used")?, r.try_get("reserved")?));
    }
    Ok(())
}

crate::one_step! {
    write count(name: &str, n: i64) -> ();
    write record_top_up_busy(kind: Feed, target: &str) -> ();
    read metrics_snapshot() -> MetricsSnapshot;
}
