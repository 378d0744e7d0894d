//! The browser meters, as `usage_counters` rows: browser-seconds per UTC day (`used` settled,
//! `reserved` held by open sessions) and browser-runs per Candidate (`used`). A session reserves
//! 60 s and one run before it opens, in one transaction, and settles to its measured seconds
//! after it closes. The rule is `belay_domain::browser::reserve_browser_session`; this module
//! makes it safe under concurrency by taking the day's row lock first, then the Candidate's.

use crate::usage_counters::settle_counter;
use crate::{StoreError, Tx, new_id_body, now_ms};
use belay_domain::browser::{BROWSER_RESERVATION_SECONDS, BrowserMeter, day_of, reserve_browser_session};
use belay_domain::ids::CandidateId;
use sqlx::Row;

/// `usage_counters.meter` of the browser-seconds of a UTC day (scope `YYYY-MM-DD`).
pub const BROWSER_SECONDS: &str = "browser_seconds";
/// `usage_counters.meter` of the browser runs of a Candidate (scope the Candidate id).
pub const BROWSER_RUNS: &str = "browser_runs";

/// The answer to a browser reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BrowserReserve {
    Reserved { id: String, day: String },
    Refused(BrowserMeter),
}

/// A counter's `(used, reserved)`, its row locked for the rest of the transaction.
async fn lock_counter(tx: &mut Tx, meter: &str, scope: &str) -> Result<(u64, u64), StoreError> {
    sqlx::query(
        "insert into usage_counters (meter, scope, used, reserved) values ($1, $2, 0, 0) on conflict (meter, scope) do nothing",
    )
    .bind(meter)
    .bind(scope)
    .execute(tx.conn())
    .await?;
    let row =
        sqlx::query("update usage_counters set used = used where meter = $1 and scope = $2 returning used, reserved")
            .bind(meter)
            .bind(scope)
            .fetch_one(tx.conn())
            .await?;
    let n = |c: &str| -> Result<u64, StoreError> { Ok(row.try_get::<i64, _>(c)?.max(0) as u64) };
    Ok((n("used")?, n("reserved")?))
}

/// One more run for the Candidate and 60 s of the day of `now_secs`, within `daily_limit`;
/// refused (and nothing written) when either meter is spent.
pub async fn reserve_browser(
    tx: &mut Tx,
    candidate_id: &CandidateId,
    now_secs: i64,
    daily_limit: u64,
) -> Result<BrowserReserve, StoreError> {
    let day = day_of(now_secs);
    tx.begin_step().await?;
    let (used, reserved) = lock_counter(tx, BROWSER_SECONDS, &day).await?;
    let (runs, _) = lock_counter(tx, BROWSER_RUNS, candidate_id).await?;
    if let Err(meter) = reserve_browser_session(runs.min(u32::MAX as u64) as u32, used, reserved, daily_limit) {
        tx.undo_step().await?;
        return Ok(BrowserReserve::Refused(meter));
    }
    sqlx::query("update usage_counters set reserved = reserved + $3 where meter = $1 and scope = $2")
        .bind(BROWSER_SECONDS)
        .bind(&day)
        .bind(BROWSER_RESERVATION_SECONDS as i64)
        .execute(tx.conn())
        .await?;
    sqlx::query("update usage_counters set used = used + 1 where meter = $1 and scope = $2")
        .bind(BROWSER_RUNS)
        .bind(candidate_id.as_str())
        .execute(tx.conn())
        .await?;
    let id = format!("bres_{}", new_id_body());
    sqlx::query(
        r#"insert into browser_reservations (id, candidate_id, day, seconds, status, created_at)
           values ($1, $2, $3, $4, 'open', $5)"#,
    )
    .bind(&id)
    .bind(candidate_id.as_str())
    .bind(&day)
    .bind(BROWSER_RESERVATION_SECONDS as i64)
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    tx.end_step().await?;
    Ok(BrowserReserve::Reserved { id, day })
}

/// Settles a reservation to `seconds`: the day's `reserved` gives back what it held and
/// `used` takes the measured seconds. A second settle changes nothing and answers the first.
pub async fn settle_browser(tx: &mut Tx, reservation_id: &str, seconds: u64) -> Result<u64, StoreError> {
    let r = sqlx::query("select day from browser_reservations where id = $1")
        .bind(reservation_id)
        .fetch_optional(tx.conn())
        .await?
        .ok_or_else(|| StoreError::not_found("browser reservation", reservation_id))?;
    let day: String = r.try_get("day")?;
    lock_counter(tx, BROWSER_SECONDS, &day).await?;
    // Read again under the lock: a concurrent settle may have closed it meanwhile.
    let r = sqlx::query("select status, seconds, charged_seconds from browser_reservations where id = $1")
        .bind(reservation_id)
        .fetch_one(tx.conn())
        .await?;
    if r.try_get::<String, _>("status")? == "settled" {
        let charged: Option<i64> = r.try_get("charged_seconds")?;
        return Ok(charged.unwrap_or(0).max(0) as u64);
    }
    let held: i64 = r.try_get("seconds")?;
    settle_counter(tx.conn(), BROWSER_SECONDS, &day, seconds as i64, held).await?;
    sqlx::query(
        "update browser_reservations set status = 'settled', charged_seconds = $2, settled_at = $3 where id = $1",
    )
    .bind(reservation_id)
    .bind(seconds as i64)
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    Ok(seconds)
}

/// Settles the Candidate's reservations left open by a session that never reported (a
/// worker that died mid-session) at the seconds they held: its length is unknown.
pub async fn settle_open_browser_reservations(tx: &mut Tx, candidate_id: &CandidateId) -> Result<usize, StoreError> {
    let open: Vec<(String, i64)> =
        sqlx::query("select id, seconds from browser_reservations where candidate_id = $1 and status = 'open'")
            .bind(candidate_id.as_str())
            .fetch_all(tx.conn())
            .await?
            .iter()
            .map(|r| Ok((r.try_get("id")?, r.try_get("seconds")?)))
            .collect::<Result<_, StoreError>>()?;
    for (id, seconds) in &open {
        settle_browser(tx, id, (*seconds).max(0) as u64).await?;
    }
    Ok(open.len())
}

crate::one_step! {
    write reserve_browser(candidate_id: &CandidateId, now_secs: i64, daily_limit: u64) -> BrowserReserve;
    write settle_browser(reservation_id: &str, seconds: u64) -> u64;
    write settle_open_browser_reservations(candidate_id: &CandidateId) -> usize;
}
