//! The model meters, as `usage_counters` rows beside the browser's: the deployment's monthly
//! Anthropic budget (`model_cost_month`, scope `YYYY-MM`), its daily call cap (`model_calls`, scope
//! the UTC day `YYYY-MM-DD`) and each Change's budget (`model_cost_change`, scope the Change id).
//! Costs are micro-USD. A call counts one call and reserves its estimated cost before it is made,
//! by conditional upserts that refuse to pass a limit; once the answer is back the reservation
//! settles into `used` at the cost the API reported. A refused call is never made and counts
//! nothing; nor does a call whose connection could not be made (it is released).

use crate::StoreError;
use crate::Tx;
use crate::usage_counters::settle_counter;
use belay_domain::calendar;
use belay_domain::ids::ChangeId;

/// Amounts are micro-USD, so sums stay exact.
pub const MICRO: f64 = 1_000_000.0;

/// `usage_counters.meter` of the model calls of a UTC day (scope `YYYY-MM-DD`).
pub const MODEL_CALLS: &str = "model_calls";
/// `usage_counters.meter` of the deployment's model cost in a month (scope `YYYY-MM`).
pub const MODEL_COST_MONTH: &str = "model_cost_month";
/// `usage_counters.meter` of a Change's model cost (scope the Change id).
pub const MODEL_COST_CHANGE: &str = "model_cost_change";

pub use belay_domain::meter::{ModelLimits, ModelReservation};

/// The UTC civil date of a unix time in milliseconds: (year, month, day).
pub fn utc_date(ms: i64) -> (i64, u32, u32) {
    calendar::utc_date(ms.div_euclid(1000))
}

fn month_of(ms: i64) -> String {
    calendar::utc_month(ms.div_euclid(1000))
}

fn day_of(ms: i64) -> String {
    calendar::utc_day(ms.div_euclid(1000))
}

fn micro(usd: f64) -> i64 {
    (usd * MICRO).round() as i64
}

/// Adds `used` and `reserved` to a counter unless its `used + reserved` would pass `limit`; true
/// when they were added.
async fn add_within(
    tx: &mut Tx,
    meter: &str,
    scope: &str,
    (used, reserved): (i64, i64),
    limit: i64,
) -> Result<bool, StoreError> {
    if used + reserved > limit {
        return Ok(false);
    }
    let done = sqlx::query(
        r#"insert into usage_counters (meter, scope, used, reserved) values ($1, $2, $3, $4)
           on conflict (meter, scope) do update
           set used = usage_counters.used + $3, reserved = usage_counters.reserved + $4
           where usage_counters.used + usage_counters.reserved + $3 + $4 <= $5"#,
    )
    .bind(meter)
    .bind(scope)
    .bind(used)
    .bind(reserved)
    .bind(limit)
    .execute(tx.conn())
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Reserves one model call of at most `estimate_usd` for `change_id` at `now_ms`: `Ok(Err(why))`
/// names the meter that refused it (and nothing is counted).
pub async fn reserve_model_call(
    tx: &mut Tx,
    change_id: &ChangeId,
    estimate_usd: f64,
    limits: ModelLimits,
    now_ms: i64,
) -> Result<Result<ModelReservation, String>, StoreError> {
    let month = month_of(now_ms);
    let day = day_of(now_ms);
    let estimate = micro(estimate_usd).max(0);
    tx.begin_step().await?;
    if !add_within(tx, MODEL_CALLS, &day, (1, 0), limits.daily_call_cap).await? {
        tx.undo_step().await?;
        return Ok(Err(format!(
            "the daily model call cap ({} calls on {day} UTC) is reached",
            limits.daily_call_cap
        )));
    }
    if !add_within(
        tx,
        MODEL_COST_MONTH,
        &month,
        (0, estimate),
        micro(limits.monthly_budget_usd),
    )
    .await?
    {
        tx.undo_step().await?;
        return Ok(Err(format!(
            "the monthly Anthropic budget (${:.2} in {month}) would be passed",
            limits.monthly_budget_usd
        )));
    }
    if !add_within(
        tx,
        MODEL_COST_CHANGE,
        change_id,
        (0, estimate),
        micro(limits.change_budget_usd),
    )
    .await?
    {
        tx.undo_step().await?;
        return Ok(Err(format!(
            "the Change budget (${:.2}) would be passed",
            limits.change_budget_usd
        )));
    }
    tx.end_step().await?;
    Ok(Ok(ModelReservation {
        change_id: change_id.to_string(),
        month,
        estimate_micro: estimate,
        day,
    }))
}

/// Settles a reservation at the cost the API reported (zero for a call that failed before
/// any usage was reported): the estimate leaves `reserved`, the cost joins `used`.
pub async fn settle_model_call(tx: &mut Tx, r: &ModelReservation, cost_usd: f64) -> Result<(), StoreError> {
    let cost = micro(cost_usd).max(0);
    settle_counter(tx.conn(), MODEL_COST_MONTH, &r.month, cost, r.estimate_micro).await?;
    settle_counter(tx.conn(), MODEL_COST_CHANGE, &r.change_id, cost, r.estimate_micro).await?;
    Ok(())
}

/// Releases a reservation whose call was never sent (its connection could not be made): the
/// estimate leaves `reserved` and the call leaves the day's count, as if it had been refused.
pub async fn release_model_call(tx: &mut Tx, r: &ModelReservation) -> Result<(), StoreError> {
    settle_counter(tx.conn(), MODEL_COST_MONTH, &r.month, 0, r.estimate_micro).await?;
    settle_counter(tx.conn(), MODEL_COST_CHANGE, &r.change_id, 0, r.estimate_micro).await?;
    if !r.day.is_empty() {
        sqlx::query(
            "update usage_counters set used = case when used > 0 then used - 1 else 0 end where meter = $1 and scope = $2",
        )
        .bind(MODEL_CALLS)
        .bind(&r.day)
        .execute(tx.conn())
        .await?;
    }
    Ok(())
}

/// What a Change's settled model calls cost so far (USD).
pub async fn change_model_cost(tx: &mut Tx, change_id: &ChangeId) -> Result<f64, StoreError> {
    usd(tx, MODEL_COST_CHANGE, change_id).await
}

/// Model calls made on the UTC day of `now_ms`.
pub async fn model_calls_on(tx: &mut Tx, now_ms: i64) -> Result<i64, StoreError> {
    Ok(crate::usage_counters::usage_counter(tx, MODEL_CALLS, &day_of(now_ms))
        .await?
        .0 as i64)
}

/// The deployment's settled model cost in the month of `now_ms` (USD).
pub async fn model_cost_in_month(tx: &mut Tx, now_ms: i64) -> Result<f64, StoreError> {
    usd(tx, MODEL_COST_MONTH, &month_of(now_ms)).await
}

pub(crate) async fn usd(tx: &mut Tx, meter: &str, scope: &str) -> Result<f64, StoreError> {
    Ok(crate::usage_counters::usage_counter(tx, meter, scope).await?.0 as f64 / MICRO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates_follow_the_calendar() {
        assert_eq!(utc_date(0), (1970, 1, 1));
        // 2026-12-01T15:00:00Z
        assert_eq!(utc_date(1_796_137_200_000), (2026, 12, 1));
        // 2024-02-29T23:59:59Z, a leap day
        assert_eq!(utc_date(1_709_251_199_000), (2024, 2, 29));
        assert_eq!(month_of(1_709_251_200_000), "2024-03");
    }
}

crate::one_step! {
    write reserve_model_call(change_id: &ChangeId, estimate_usd: f64, limits: ModelLimits, now_ms: i64) -> Result<ModelReservation, String>;
    write settle_model_call(r: &ModelReservation, cost_usd: f64) -> ();
    write release_model_call(r: &ModelReservation) -> ();
    read change_model_cost(change_id: &ChangeId) -> f64;
    read model_calls_on(now_ms: i64) -> i64;
    read model_cost_in_month(now_ms: i64) -> f64;
}
