//! The Sandbox lease book: every worker of a deployment reads and changes the same rows before it
//! starts a Sandbox, starts a command in one, or removes one. The rules are
//! `belay_domain::sandbox_lease`; this module makes them hold under concurrency by taking the
//! `sandbox_lease_lock` row first in every write (SQLite serializes writers already).

use crate::{StoreError, Tx};
use belay_domain::ids::ProjectId;
use belay_domain::sandbox_lease::{LeaseFacts, LeaseState, admit, reapable};
use sqlx::Row;

/// The answer to [`Store::acquire_sandbox_lease`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseAcquired {
    /// The project already held a live lease; its last use is now.
    Held,
    /// A new lease: a slot under SANDBOX_MAX was taken.
    Taken,
    /// The Sandbox is being removed by some worker.
    Reaping,
    /// SANDBOX_MAX leases are held in the deployment.
    Full { held: usize, max: usize },
}

/// One lease as the book holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxLease {
    pub project_id: String,
    pub holder: String,
    pub state: LeaseState,
    pub last_use_ms: i64,
    pub in_flight: u32,
}

/// How long the start of a Sandbox command is remembered: far longer than any retry of the
/// activity that started it.
pub const COMMAND_STARTS_KEPT_MS: i64 = 7 * 24 * 3600 * 1000;

async fn lock(tx: &mut Tx) -> Result<(), StoreError> {
    sqlx::query("update sandbox_lease_lock set changes = changes + 1 where id = 1")
        .execute(tx.conn())
        .await?;
    Ok(())
}

async fn facts(tx: &mut Tx, now_ms: i64) -> Result<Vec<(SandboxLease, LeaseFacts)>, StoreError> {
    let rows = sqlx::query(
        "select l.project_id, l.holder, l.state, l.last_use_ms, l.state_since_ms, \
         (select count(*) from sandbox_execs e where e.project_id = l.project_id and e.expires_ms > $1) as in_flight \
         from sandbox_leases l order by l.project_id",
    )
    .bind(now_ms)
    .fetch_all(tx.conn())
    .await?;
    rows.into_iter()
        .map(|row| {
            let state: String = row.try_get("state")?;
            let state = LeaseState::parse(&state)
                .ok_or_else(|| StoreError::Corrupt(format!("sandbox lease state {state:?}")))?;
            let in_flight = row.try_get::<i64, _>("in_flight")?.max(0) as u32;
            let last_use_ms: i64 = row.try_get("last_use_ms")?;
            Ok((
                SandboxLease {
                    project_id: row.try_get("project_id")?,
                    holder: row.try_get("holder")?,
                    state,
                    last_use_ms,
                    in_flight,
                },
                LeaseFacts {
                    state,
                    last_use_ms,
                    state_since_ms: row.try_get("state_since_ms")?,
                    in_flight,
                },
            ))
        })
        .collect()
}

/// The project's lease: the one it holds (its last use is now), or a new one while fewer than
/// `max` are held in the deployment.
pub async fn acquire_sandbox_lease(
    tx: &mut Tx,
    project_id: &ProjectId,
    holder: &str,
    max: usize,
    now_ms: i64,
) -> Result<LeaseAcquired, StoreError> {
    lock(tx).await?;
    let found = sqlx::query("select state from sandbox_leases where project_id = $1")
        .bind(project_id.as_str())
        .fetch_optional(tx.conn())
        .await?;
    let answer = match found {
        Some(row) => {
            let state: String = row.try_get("state")?;
            if LeaseState::parse(&state) == Some(LeaseState::Live) {
                sqlx::query("update sandbox_leases set last_use_ms = $2 where project_id = $1")
                    .bind(project_id.as_str())
                    .bind(now_ms)
                    .execute(tx.conn())
                    .await?;
                LeaseAcquired::Held
            } else {
                LeaseAcquired::Reaping
            }
        }
        None => {
            let held: i64 = sqlx::query("select count(*) as n from sandbox_leases")
                .fetch_one(tx.conn())
                .await?
                .try_get("n")?;
            match admit(held.max(0) as usize, max) {
                Err((held, max)) => LeaseAcquired::Full { held, max },
                Ok(()) => {
                    sqlx::query(
                        "insert into sandbox_leases (project_id, holder, state, last_use_ms, state_since_ms, created_ms) values ($1, $2, 'live', $3, $3, $3)",
                    )
                    .bind(project_id.as_str())
                    .bind(holder)
                    .bind(now_ms)
                    .execute(tx.conn())
                    .await?;
                    LeaseAcquired::Taken
                }
            }
        }
    };
    Ok(answer)
}

/// Marks a command running in the project's Sandbox until `expires_ms`. `false` when the
/// project holds no live lease (the Sandbox was removed or is being removed): nothing starts.
pub async fn begin_sandbox_exec(
    tx: &mut Tx,
    project_id: &ProjectId,
    exec_id: &str,
    holder: &str,
    now_ms: i64,
    expires_ms: i64,
) -> Result<bool, StoreError> {
    lock(tx).await?;
    let live = sqlx::query("update sandbox_leases set last_use_ms = $2 where project_id = $1 and state = 'live'")
        .bind(project_id.as_str())
        .bind(now_ms)
        .execute(tx.conn())
        .await?
        .rows_affected()
        == 1;
    if live {
        sqlx::query(
            "insert into sandbox_execs (id, project_id, holder, started_ms, expires_ms) values ($1, $2, $3, $4, $5)",
        )
        .bind(exec_id)
        .bind(project_id.as_str())
        .bind(holder)
        .bind(now_ms)
        .bind(expires_ms)
        .execute(tx.conn())
        .await?;
    }
    Ok(live)
}

/// The command has finished: its mark goes and the Sandbox's last use is now.
pub async fn end_sandbox_exec(
    tx: &mut Tx,
    project_id: &ProjectId,
    exec_id: &str,
    now_ms: i64,
) -> Result<(), StoreError> {
    lock(tx).await?;
    sqlx::query("delete from sandbox_execs where id = $1")
        .bind(exec_id)
        .execute(tx.conn())
        .await?;
    sqlx::query("update sandbox_leases set last_use_ms = $2 where project_id = $1 and last_use_ms < $2")
        .bind(project_id.as_str())
        .bind(now_ms)
        .execute(tx.conn())
        .await?;
    Ok(())
}

/// Takes every Sandbox the record says may be removed now (see
/// `belay_domain::sandbox_lease::reapable`) into the `reaping` state, and returns their
/// projects: no command starts in them from here on, and the caller removes them.
pub async fn take_idle_sandboxes(
    tx: &mut Tx,
    holder: &str,
    now_ms: i64,
    idle_ms: i64,
) -> Result<Vec<String>, StoreError> {
    lock(tx).await?;
    let mut taken = Vec::new();
    for (lease, facts) in facts(tx, now_ms).await? {
        if !reapable(&facts, now_ms, idle_ms) {
            continue;
        }
        sqlx::query(
            "update sandbox_leases set state = 'reaping', state_since_ms = $2, holder = $3 where project_id = $1",
        )
        .bind(&lease.project_id)
        .bind(now_ms)
        .bind(holder)
        .execute(tx.conn())
        .await?;
        taken.push(lease.project_id);
    }
    Ok(taken)
}

/// The Sandbox is gone: its lease and marks go, and its slot is free.
pub async fn release_sandbox_lease(tx: &mut Tx, project_id: &ProjectId) -> Result<(), StoreError> {
    lock(tx).await?;
    sqlx::query("delete from sandbox_execs where project_id = $1")
        .bind(project_id.as_str())
        .execute(tx.conn())
        .await?;
    sqlx::query("delete from sandbox_leases where project_id = $1")
        .bind(project_id.as_str())
        .execute(tx.conn())
        .await?;
    Ok(())
}

/// Every lease, with the commands running at `now_ms`.
pub async fn sandbox_leases(tx: &mut Tx, now_ms: i64) -> Result<Vec<SandboxLease>, StoreError> {
    Ok(facts(tx, now_ms).await?.into_iter().map(|(l, _)| l).collect())
}

/// Records, before the command is handed to the project's Sandbox, that the activity whose
/// identity is `activity` (the same for every attempt) starts its command. `false` when an
/// earlier attempt recorded it: that attempt may have run the command, so this one must not.
/// Records older than [`COMMAND_STARTS_KEPT_MS`] go at the same time.
pub async fn record_command_start(
    tx: &mut Tx,
    activity: &str,
    project_id: &ProjectId,
    now_ms: i64,
) -> Result<bool, StoreError> {
    sqlx::query("delete from sandbox_command_starts where started_ms < $1")
        .bind(now_ms - COMMAND_STARTS_KEPT_MS)
        .execute(tx.conn())
        .await?;
    let first = sqlx::query(
        "insert into sandbox_command_starts (activity, project_id, started_ms) values ($1, $2, $3) on conflict do nothing",
    )
    .bind(activity)
    .bind(project_id.as_str())
    .bind(now_ms)
    .execute(tx.conn())
    .await?
    .rows_affected()
        == 1;
    Ok(first)
}

/// The deployment's identity, made when the database was first migrated.
pub async fn deployment_name(tx: &mut Tx) -> Result<String, StoreError> {
    Ok(sqlx::query("select name from deployment where id = 1")
        .fetch_one(tx.conn())
        .await?
        .try_get("name")?)
}

crate::one_step! {
    write acquire_sandbox_lease(project_id: &ProjectId, holder: &str, max: usize, now_ms: i64) -> LeaseAcquired;
    write begin_sandbox_exec(project_id: &ProjectId, exec_id: &str, holder: &str, now_ms: i64, expires_ms: i64) -> bool;
    write end_sandbox_exec(project_id: &ProjectId, exec_id: &str, now_ms: i64) -> ();
    write take_idle_sandboxes(holder: &str, now_ms: i64, idle_ms: i64) -> Vec<String>;
    write release_sandbox_lease(project_id: &ProjectId) -> ();
    write sandbox_leases(now_ms: i64) -> Vec<SandboxLease>;
    write record_command_start(activity: &str, project_id: &ProjectId, now_ms: i64) -> bool;
    read deployment_name() -> String;
}
