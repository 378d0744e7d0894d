//! What the metrics endpoints read from the database at each scrape: every figure is derived
//! from rows every process sees, so the API and every worker answer the same numbers.

use crate::{Store, StoreError};
use sqlx::Row;

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
}

fn seconds(ms: i64) -> f64 {
    ms.max(0) as f64 / 1000.0
}

impl Store {
    pub async fn metrics_snapshot(&self) -> Result<MetricsSnapshot, StoreError> {
        let pool = self.pool();
        let mut out = MetricsSnapshot::default();
        for r in sqlx::query(
            "select harness, status, count(*) as n from jobs group by harness, status order by harness, status",
        )
        .fetch_all(pool)
        .await?
        {
            out.jobs
                .push((r.try_get("harness")?, r.try_get("status")?, r.try_get("n")?));
        }
        for r in
            sqlx::query("select to_status, count(*) as n from job_transitions group by to_status order by to_status")
                .fetch_all(pool)
                .await?
        {
            out.transitions.push((r.try_get("to_status")?, r.try_get("n")?));
        }
        for r in sqlx::query(
            "select harness, queued_at, dispatched_at, running_at, coalesce(completed_at, failed_at) as ended_at from jobs \
             where dispatched_at is not null",
        )
        .fetch_all(pool)
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
        out.live_sandboxes = sqlx::query("select count(*) as n from sandbox_leases")
            .fetch_one(pool)
            .await?
            .try_get("n")?;
        for r in sqlx::query("select project_id, month, charged_seconds from sandbox_usage order by project_id, month")
            .fetch_all(pool)
            .await?
        {
            out.meter_seconds.push((
                r.try_get("project_id")?,
                r.try_get("month")?,
                r.try_get("charged_seconds")?,
            ));
        }
        Ok(out)
    }
}
