//! The monthly sandbox meter (SANDBOX_MONTHLY_SECONDS per project): reservations refused at the
//! cap, and settles that charge only the awake time a use adds. The arithmetic is
//! `belay_domain::meter`; this module makes it safe under concurrency by serializing each
//! project's meter on its `sandbox_usage` row.
//!
//! [`reserve`] and [`close`] are steps of a caller's transaction (a workspace's admission reserves
//! in the same transaction); the `Store` methods run each alone.

use crate::{StoreError, Tx, new_id_body, now_ms};
use belay_domain::ids::ProjectId;
use belay_domain::meter::{self, CapExceeded, Close, Interval, Reservation};
use sqlx::Row;

/// The answer to a reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reserve {
    Reserved {
        id: String,
        seconds: u64,
    },
    /// The cap would be exceeded (HTTP 429 `sandbox_cap`).
    Refused(CapExceeded),
}

async fn lock_usage(tx: &mut Tx, project_id: &ProjectId, month: &str) -> Result<u64, StoreError> {
    sqlx::query(
        "insert into sandbox_usage (project_id, month, charged_seconds) values ($1, $2, 0) on conflict (project_id, month) do nothing",
    )
    .bind(project_id.as_str())
    .bind(month)
    .execute(tx.conn())
    .await?;
    // Taking the row's lock serializes this project's meter on PostgreSQL (SQLite writers are
    // serialized already).
    let row = sqlx::query(
        "update sandbox_usage set charged_seconds = charged_seconds where project_id = $1 and month = $2 returning charged_seconds",
    )
    .bind(project_id.as_str())
    .bind(month)
    .fetch_one(tx.conn())
    .await?;
    Ok(row.try_get::<i64, _>("charged_seconds")?.max(0) as u64)
}

/// Reserves a purpose's seconds on the project's meter for the month of `now_secs`.
pub async fn reserve(
    tx: &mut Tx,
    project_id: &ProjectId,
    purpose: Reservation,
    now_secs: i64,
) -> Result<Reserve, StoreError> {
    let month = meter::month_of(now_secs);
    let used = lock_usage(tx, project_id, &month).await?;
    let open: i64 = sqlx::query(
        "select cast(coalesce(sum(seconds), 0) as bigint) as open from sandbox_reservations where project_id = $1 and month = $2 and status = 'open'",
    )
    .bind(project_id.as_str())
    .bind(month.as_str())
    .fetch_one(tx.conn())
    .await?
    .try_get("open")?;
    if let Err(cap) = meter::reserve(used, open.max(0) as u64, purpose.seconds()) {
        return Ok(Reserve::Refused(cap));
    }
    let id = format!("sres_{}", new_id_body());
    sqlx::query(
        r#"insert into sandbox_reservations (id, project_id, month, purpose, seconds, status, created_at)
           values ($1, $2, $3, $4, $5, 'open', $6)"#,
    )
    .bind(id.as_str())
    .bind(project_id.as_str())
    .bind(month.as_str())
    .bind(crate::rows::enum_text(&purpose))
    .bind(purpose.seconds() as i64)
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    Ok(Reserve::Reserved {
        id,
        seconds: purpose.seconds(),
    })
}

/// Closes a reservation (see `belay_domain::meter::Close`): a settle charges only the awake time
/// the use `[start, end]` adds to the project's container (overlapping uses once, each with its
/// idle tail); a release charges nothing. Returns the seconds charged; closing a reservation a
/// second time changes nothing and answers what the first close charged.
pub async fn close(tx: &mut Tx, reservation_id: &str, how: Close) -> Result<u64, StoreError> {
    let r = sqlx::query("select project_id, month from sandbox_reservations where id = $1")
        .bind(reservation_id)
        .fetch_optional(tx.conn())
        .await?
        .ok_or_else(|| StoreError::not_found("sandbox reservation", reservation_id))?;
    let project_id = ProjectId(r.try_get("project_id")?);
    let month: String = r.try_get("month")?;
    lock_usage(tx, &project_id, &month).await?;
    // Read again under the lock: a concurrent close may have settled it meanwhile.
    let r = sqlx::query("select status, charged_seconds from sandbox_reservations where id = $1")
        .bind(reservation_id)
        .fetch_one(tx.conn())
        .await?;
    if r.try_get::<String, _>("status")? == "settled" {
        let charged: Option<i64> = r.try_get("charged_seconds")?;
        return Ok(charged.unwrap_or(0).max(0) as u64);
    }
    let charged = match how {
        Close::Release => 0,
        Close::Settle { start, end } => {
            let awake: Vec<Interval> = sqlx::query("select start_at, end_at from sandbox_awake where project_id = $1")
                .bind(project_id.as_str())
                .fetch_all(tx.conn())
                .await?
                .iter()
                .map(|r| {
                    Ok(Interval {
                        start: r.try_get("start_at")?,
                        end: r.try_get("end_at")?,
                    })
                })
                .collect::<Result<_, StoreError>>()?;
            let settlement = meter::settle(&awake, start, end)
                .map_err(|e| StoreError::Invalid(belay_domain::ValidationError::new("use", e.to_string())))?;
            sqlx::query("delete from sandbox_awake where project_id = $1")
                .bind(project_id.as_str())
                .execute(tx.conn())
                .await?;
            for i in &settlement.awake {
                sqlx::query("insert into sandbox_awake (project_id, start_at, end_at) values ($1, $2, $3)")
                    .bind(project_id.as_str())
                    .bind(i.start)
                    .bind(i.end)
                    .execute(tx.conn())
                    .await?;
            }
            sqlx::query(
                "update sandbox_usage set charged_seconds = charged_seconds + $3 where project_id = $1 and month = $2",
            )
            .bind(project_id.as_str())
            .bind(month.as_str())
            .bind(settlement.charged_seconds as i64)
            .execute(tx.conn())
            .await?;
            settlement.charged_seconds
        }
    };
    sqlx::query(
        "update sandbox_reservations set status = 'settled', charged_seconds = $2, settled_at = $3 where id = $1",
    )
    .bind(reservation_id)
    .bind(charged as i64)
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    Ok(charged)
}

/// [`reserve`] in a transaction of its own.
pub async fn reserve_sandbox(
    tx: &mut Tx,
    project_id: &ProjectId,
    purpose: Reservation,
    now_secs: i64,
) -> Result<Reserve, StoreError> {
    let r = reserve(tx, project_id, purpose, now_secs).await?;
    Ok(r)
}

/// [`close`] in a transaction of its own.
pub async fn close_sandbox(tx: &mut Tx, reservation_id: &str, how: Close) -> Result<u64, StoreError> {
    let charged = close(tx, reservation_id, how).await?;
    Ok(charged)
}

/// Settles a reservation with the use `[use_start, use_end]` it paid for (see [`close`]).
pub async fn settle_sandbox(
    tx: &mut Tx,
    reservation_id: &str,
    use_start: i64,
    use_end: i64,
) -> Result<u64, StoreError> {
    close_sandbox(
        tx,
        reservation_id,
        Close::Settle {
            start: use_start,
            end: use_end,
        },
    )
    .await
}

/// Releases a reservation whose use never started: nothing is charged.
pub async fn release_sandbox(tx: &mut Tx, reservation_id: &str) -> Result<(), StoreError> {
    close_sandbox(tx, reservation_id, Close::Release).await.map(|_| ())
}

/// How many of the project's reservations are open (taken, not yet settled or released).
pub async fn open_reservations(tx: &mut Tx, project_id: &ProjectId) -> Result<i64, StoreError> {
    let row = sqlx::query("select count(*) as n from sandbox_reservations where project_id = $1 and status = 'open'")
        .bind(project_id.as_str())
        .fetch_one(tx.conn())
        .await?;
    Ok(row.try_get("n")?)
}

/// Seconds charged to the project in the month of `now_secs`.
pub async fn sandbox_charged(tx: &mut Tx, project_id: &ProjectId, now_secs: i64) -> Result<u64, StoreError> {
    let row = sqlx::query("select charged_seconds from sandbox_usage where project_id = $1 and month = $2")
        .bind(project_id.as_str())
        .bind(meter::month_of(now_secs))
        .fetch_optional(tx.conn())
        .await?;
    Ok(match row {
        Some(r) => r.try_get::<i64, _>("charged_seconds")?.max(0) as u64,
        None => 0,
    })
}

crate::one_step! {
    write reserve_sandbox(project_id: &ProjectId, purpose: Reservation, now_secs: i64) -> Reserve;
    write close_sandbox(reservation_id: &str, how: Close) -> u64;
    write settle_sandbox(reservation_id: &str, use_start: i64, use_end: i64) -> u64;
    write release_sandbox(reservation_id: &str) -> ();
    read open_reservations(project_id: &ProjectId) -> i64;
    read sandbox_charged(project_id: &ProjectId, now_secs: i64) -> u64;
}
