//! The monthly sandbox meter (SANDBOX_MONTHLY_SECONDS per project): reservations refused at the
//! cap, and settles that charge only the awake time a use adds. The arithmetic is
//! `belay_domain::meter`; this module makes it safe under concurrency by serializing each
//! project's meter on its `sandbox_usage` row.

use crate::{Store, StoreError, new_id_body, now_ms};
use belay_domain::meter::{self, CapExceeded, Interval, Reservation};
use sqlx::{Any, Row, Transaction};

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

async fn lock_usage(tx: &mut Transaction<'_, Any>, project_id: &str, month: &str) -> Result<u64, StoreError> {
    sqlx::query(
        "insert into sandbox_usage (project_id, month, charged_seconds) values ($1, $2, 0) on conflict (project_id, month) do nothing",
    )
    .bind(project_id)
    .bind(month)
    .execute(&mut **tx)
    .await?;
    // Taking the row's lock serializes this project's meter on PostgreSQL (SQLite writers are
    // serialized already).
    let row = sqlx::query(
        "update sandbox_usage set charged_seconds = charged_seconds where project_id = $1 and month = $2 returning charged_seconds",
    )
    .bind(project_id)
    .bind(month)
    .fetch_one(&mut **tx)
    .await?;
    Ok(row.try_get::<i64, _>("charged_seconds")?.max(0) as u64)
}

impl Store {
    /// Reserves a purpose's seconds on the project's meter for the month of `now_secs`.
    pub async fn reserve_sandbox(
        &self,
        project_id: &str,
        purpose: Reservation,
        now_secs: i64,
    ) -> Result<Reserve, StoreError> {
        let month = meter::month_of(now_secs);
        let mut tx = self.begin_write().await?;
        let used = lock_usage(&mut tx, project_id, &month).await?;
        let open: i64 = sqlx::query(
            "select cast(coalesce(sum(seconds), 0) as bigint) as open from sandbox_reservations where project_id = $1 and month = $2 and status = 'open'",
        )
        .bind(project_id)
        .bind(&month)
        .fetch_one(&mut *tx)
        .await?
        .try_get("open")?;
        if let Err(cap) = meter::reserve(used, open.max(0) as u64, purpose.seconds()) {
            tx.rollback().await?;
            return Ok(Reserve::Refused(cap));
        }
        let id = format!("sres_{}", new_id_body());
        sqlx::query(
            r#"insert into sandbox_reservations (id, project_id, month, purpose, seconds, status, created_at)
               values ($1, $2, $3, $4, $5, 'open', $6)"#,
        )
        .bind(&id)
        .bind(project_id)
        .bind(&month)
        .bind(
            serde_json::to_value(purpose)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
        )
        .bind(purpose.seconds() as i64)
        .bind(now_ms())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Reserve::Reserved {
            id,
            seconds: purpose.seconds(),
        })
    }

    /// Settles a reservation with the use it paid for, `[use_start, use_end]` in unix seconds:
    /// charges only the awake time it adds to the project's container (overlapping uses once,
    /// each with its idle tail) and releases the reservation. Returns the seconds charged; a
    /// second settle of the same reservation charges nothing more.
    pub async fn settle_sandbox(&self, reservation_id: &str, use_start: i64, use_end: i64) -> Result<u64, StoreError> {
        let mut tx = self.begin_write().await?;
        let r =
            sqlx::query("select project_id, month, status, charged_seconds from sandbox_reservations where id = $1")
                .bind(reservation_id)
                .fetch_optional(&mut *tx)
                .await?
                .ok_or_else(|| StoreError::not_found("sandbox reservation", reservation_id))?;
        let project_id: String = r.try_get("project_id")?;
        let month: String = r.try_get("month")?;
        lock_usage(&mut tx, &project_id, &month).await?;
        let status: String = sqlx::query("select status from sandbox_reservations where id = $1")
            .bind(reservation_id)
            .fetch_one(&mut *tx)
            .await?
            .try_get("status")?;
        if status == "settled" {
            let charged: Option<i64> = r.try_get("charged_seconds")?;
            tx.commit().await?;
            return Ok(charged.unwrap_or(0).max(0) as u64);
        }
        let awake: Vec<Interval> = sqlx::query("select start_at, end_at from sandbox_awake where project_id = $1")
            .bind(&project_id)
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(|r| {
                Ok(Interval {
                    start: r.try_get("start_at")?,
                    end: r.try_get("end_at")?,
                })
            })
            .collect::<Result<_, StoreError>>()?;
        let settlement = meter::settle(&awake, use_start, use_end)
            .map_err(|e| StoreError::Invalid(belay_domain::ValidationError::new("use", e.to_string())))?;
        sqlx::query("delete from sandbox_awake where project_id = $1")
            .bind(&project_id)
            .execute(&mut *tx)
            .await?;
        for i in &settlement.awake {
            sqlx::query("insert into sandbox_awake (project_id, start_at, end_at) values ($1, $2, $3)")
                .bind(&project_id)
                .bind(i.start)
                .bind(i.end)
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query(
            "update sandbox_usage set charged_seconds = charged_seconds + $3 where project_id = $1 and month = $2",
        )
        .bind(&project_id)
        .bind(&month)
        .bind(settlement.charged_seconds as i64)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "update sandbox_reservations set status = 'settled', charged_seconds = $2, settled_at = $3 where id = $1",
        )
        .bind(reservation_id)
        .bind(settlement.charged_seconds as i64)
        .bind(now_ms())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(settlement.charged_seconds)
    }

    /// Releases a reservation whose use never started (the workspace failed before its checkout):
    /// nothing is charged. A reservation already settled stays as it is.
    pub async fn release_sandbox(&self, reservation_id: &str) -> Result<(), StoreError> {
        sqlx::query(
            "update sandbox_reservations set status = 'settled', charged_seconds = 0, settled_at = $2 where id = $1 and status = 'open'",
        )
        .bind(reservation_id)
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Seconds charged to the project in the month of `now_secs`.
    pub async fn sandbox_charged(&self, project_id: &str, now_secs: i64) -> Result<u64, StoreError> {
        let row = sqlx::query("select charged_seconds from sandbox_usage where project_id = $1 and month = $2")
            .bind(project_id)
            .bind(meter::month_of(now_secs))
            .fetch_optional(self.pool())
            .await?;
        Ok(match row {
            Some(r) => r.try_get::<i64, _>("charged_seconds")?.max(0) as u64,
            None => 0,
        })
    }
}
