//! Attempts: every run of a job's adapter, kept with its failure class, and what a refusal by a
//! provider does to the plan or ladder that launched the job (it is paused, with an event).
//!
//! A job's attempts are read across its retry chain (the job it retries and the jobs that retry
//! it), since an infrastructure retry is a job of its own.

use crate::Tx;
use crate::{StoreError, events, now_ms};
use belay_domain::attempt::{Attempt, FailureClass, log_tail};
use belay_domain::ids::JobId;
use belay_domain::job::{Combination, Job, Origin};
use sqlx::Row;

/// One attempt as the run reports it; `n` is its number within the job (the natural key, so a
/// retried report writes nothing twice).
#[derive(Debug, Clone, PartialEq)]
pub struct NewAttempt {
    pub job_id: JobId,
    pub n: i64,
    pub started_at: i64,
    pub ended_at: i64,
    pub worker: Option<String>,
    pub exit: Option<i64>,
    pub failure_class: Option<FailureClass>,
    pub message: Option<String>,
    pub log_tail: Option<String>,
}

/// Keeps one attempt (once per job and number).
pub async fn record_attempt(tx: &mut Tx, a: &NewAttempt) -> Result<(), StoreError> {
    let message: Option<String> = a.message.as_deref().map(|m| m.chars().take(4000).collect());
    sqlx::query(
        r#"insert into job_attempts (job_id, n, started_at, ended_at, worker, exit_code, failure_class, message, log_tail)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9) on conflict do nothing"#,
    )
    .bind(a.job_id.as_str())
    .bind(a.n)
    .bind(a.started_at)
    .bind(a.ended_at)
    .bind(a.worker.as_deref())
    .bind(a.exit)
    .bind(a.failure_class.map(FailureClass::as_str))
    .bind(message)
    .bind(a.log_tail.as_deref().map(log_tail))
    .execute(tx.conn())
    .await?;
    Ok(())
}

/// The jobs of `id`'s retry chain, first attempt first.
async fn retry_chain(tx: &mut Tx, id: &JobId) -> Result<Vec<(JobId, i64)>, StoreError> {
    let mut root = id.clone();
    // A chain is a handful of jobs; the bound only guards against a cycle in corrupt data.
    for _ in 0..1000 {
        let r = sqlx::query("select retry_of from jobs where id = $1")
            .bind(root.as_str())
            .fetch_optional(tx.conn())
            .await?;
        match r.and_then(|r| r.try_get::<Option<String>, _>("retry_of").ok().flatten()) {
            Some(up) => root = up.into(),
            None => break,
        }
    }
    let mut chain = Vec::new();
    let mut next = Some(root);
    while let Some(id) = next.take() {
        if chain.len() >= 1000 {
            break;
        }
        let r = sqlx::query("select attempt from jobs where id = $1")
            .bind(id.as_str())
            .fetch_optional(tx.conn())
            .await?;
        let Some(r) = r else { break };
        chain.push((id.clone(), r.try_get::<i64, _>("attempt")?));
        next = sqlx::query("select id from jobs where retry_of = $1")
            .bind(id.as_str())
            .fetch_optional(tx.conn())
            .await?
            .map(|r| r.try_get::<String, _>("id"))
            .transpose()?
            .map(Into::into);
    }
    Ok(chain)
}

/// Every attempt of the job and of its retry chain, in the order they ran; `None` when the job
/// does not exist.
pub async fn list_attempts(tx: &mut Tx, id: &JobId) -> Result<Option<Vec<Attempt>>, StoreError> {
    if crate::jobs::get_job(tx, id).await?.is_none() {
        return Ok(None);
    }
    let mut out = Vec::new();
    for (job_id, job_attempt) in retry_chain(tx, id).await? {
        let rows = sqlx::query(
            r#"select n, started_at, ended_at, worker, exit_code, failure_class, message, log_tail
               from job_attempts where job_id = $1 order by n"#,
        )
        .bind(job_id.as_str())
        .fetch_all(tx.conn())
        .await?;
        for r in &rows {
            let class: Option<String> = r.try_get("failure_class")?;
            out.push(Attempt {
                job_id: job_id.clone(),
                n: r.try_get("n")?,
                job_attempt,
                started_at: r.try_get("started_at")?,
                ended_at: r.try_get("ended_at")?,
                worker: r.try_get("worker")?,
                exit: r.try_get("exit_code")?,
                failure_class: class
                    .as_deref()
                    .map(|c| FailureClass::parse(c).ok_or_else(|| StoreError::Corrupt(format!("failure class {c}"))))
                    .transpose()?,
                message: r.try_get("message")?,
                log_tail: r.try_get("log_tail")?,
            });
        }
    }
    Ok(Some(out))
}

/// The provider a job's calls went to: its combination's, else its harness's, else its (first)
/// model's that names one.
async fn provider_of(tx: &mut Tx, job: &Job) -> Result<Option<String>, StoreError> {
    if let Combination::Harness { provider: Some(p), .. } = &job.combination {
        return Ok(Some(p.clone()));
    }
    let h = sqlx::query("select provider from harnesses where name = $1")
        .bind(job.combination.harness())
        .fetch_optional(tx.conn())
        .await?;
    if let Some(p) = h
        .map(|r| r.try_get::<Option<String>, _>("provider"))
        .transpose()?
        .flatten()
    {
        return Ok(Some(p));
    }
    for m in job.combination.models() {
        let r = sqlx::query("select provider from models where id = $1")
            .bind(m)
            .fetch_optional(tx.conn())
            .await?;
        if let Some(p) = r
            .map(|r| r.try_get::<Option<String>, _>("provider"))
            .transpose()?
            .flatten()
        {
            return Ok(Some(p));
        }
    }
    Ok(None)
}

/// A provider refused a job (a bad key, a spend cap reached): the plan or ladder that launched it
/// is paused (a ladder is disabled) and an event names the provider and the cause. A job
/// launched by hand pauses nothing; the event is written all the same.
pub(crate) async fn provider_refused(tx: &mut Tx, job: &Job, cause: &str) -> Result<(), StoreError> {
    let provider = provider_of(tx, job).await?;
    let paused = match &job.origin {
        Some(Origin::Plan(id)) => {
            sqlx::query("update coverage_plans set paused = 1, updated_at = $2 where id = $1 and paused = 0")
                .bind(id)
                .bind(now_ms())
                .execute(tx.conn())
                .await?
                .rows_affected()
                > 0
        }
        Some(Origin::Ladder(id)) => {
            sqlx::query("update ladders set enabled = 0 where id = $1 and enabled = 1")
                .bind(id)
                .execute(tx.conn())
                .await?
                .rows_affected()
                > 0
        }
        None => false,
    };
    let payload = serde_json::json!({
        "provider": provider,
        "cause": cause,
        "origin": job.origin.as_ref().map(|o| o.to_string()),
        "paused": paused,
    });
    events::append(tx.conn(), &job.id, "provider.refused", &payload).await?;
    if let Some(origin) = &job.origin {
        tracing::warn!(job.id = %job.id, origin = %origin, provider = ?provider, "a provider refused a job: its origin is paused");
    }
    Ok(())
}

crate::one_step! {
    write record_attempt(a: &NewAttempt) -> ();
    read list_attempts(id: &JobId) -> Option<Vec<Attempt>>;
}
