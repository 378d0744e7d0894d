//! The model meters in `model_usage_counters`: the deployment's monthly Anthropic budget (USD), its
//! daily call cap (UTC day) and each Change's budget. A call reserves its estimated cost and one
//! call before it is made, by conditional updates that refuse to pass a limit; once the answer is
//! back it settles at the cost the API reported. A refused call is never made.

use crate::{Store, StoreError};

/// Amounts are micro-USD, so sums stay exact.
pub const MICRO: f64 = 1_000_000.0;

const CALLS: &str = "model_calls";
const MONTHLY: &str = "model_cost_month";
const CHANGE: &str = "model_cost_change";
const DEPLOYMENT: &str = "deployment";
const ALL_TIME: &str = "all";

/// The limits a model call is held to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelLimits {
    pub monthly_budget_usd: f64,
    pub daily_call_cap: i64,
    pub change_budget_usd: f64,
}

/// A reservation to settle: what was reserved, and where.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ModelReservation {
    pub change_id: String,
    pub month: String,
    pub estimate_micro: i64,
}

/// The UTC civil date of a unix time in milliseconds: (year, month, day).
pub fn utc_date(ms: i64) -> (i64, u32, u32) {
    // Howard Hinnant's days-to-civil.
    let z = ms.div_euclid(86_400_000) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn month_of(ms: i64) -> String {
    let (y, m, _) = utc_date(ms);
    format!("{y:04}-{m:02}")
}

fn day_of(ms: i64) -> String {
    let (y, m, d) = utc_date(ms);
    format!("{y:04}-{m:02}-{d:02}")
}

fn micro(usd: f64) -> i64 {
    (usd * MICRO).round() as i64
}

/// Adds `by` to a counter unless that passes `limit`; true when it was added.
async fn add_within(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    meter: &str,
    scope: &str,
    period: &str,
    by: i64,
    limit: i64,
    now: i64,
) -> Result<bool, StoreError> {
    if by > limit {
        return Ok(false);
    }
    let done = sqlx::query(
        r#"insert into model_usage_counters (meter, scope, period, amount, updated_at) values ($1, $2, $3, $4, $6)
           on conflict (meter, scope, period) do update set amount = model_usage_counters.amount + $4, updated_at = $6
           where model_usage_counters.amount + $4 <= $5"#,
    )
    .bind(meter)
    .bind(scope)
    .bind(period)
    .bind(by)
    .bind(limit)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

async fn add(
    exec: impl sqlx::Executor<'_, Database = sqlx::Any>,
    meter: &str,
    scope: &str,
    period: &str,
    by: i64,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        r#"insert into model_usage_counters (meter, scope, period, amount, updated_at) values ($1, $2, $3, $4, $5)
           on conflict (meter, scope, period) do update set amount = model_usage_counters.amount + $4, updated_at = $5"#,
    )
    .bind(meter)
    .bind(scope)
    .bind(period)
    .bind(by)
    .bind(now)
    .execute(exec)
    .await?;
    Ok(())
}

impl Store {
    /// Reserves one model call of at most `estimate_usd` for `change_id` at `now_ms`: `Ok(Err(why))`
    /// names the meter that refused it (and nothing is counted).
    pub async fn reserve_model_call(
        &self,
        change_id: &str,
        estimate_usd: f64,
        limits: ModelLimits,
        now_ms: i64,
    ) -> Result<Result<ModelReservation, String>, StoreError> {
        let month = month_of(now_ms);
        let day = day_of(now_ms);
        let estimate = micro(estimate_usd).max(0);
        let mut tx = self.begin_write().await?;
        if !add_within(&mut tx, CALLS, DEPLOYMENT, &day, 1, limits.daily_call_cap, now_ms).await? {
            tx.rollback().await?;
            return Ok(Err(format!(
                "the daily model call cap ({} calls on {day} UTC) is reached",
                limits.daily_call_cap
            )));
        }
        if !add_within(
            &mut tx,
            MONTHLY,
            DEPLOYMENT,
            &month,
            estimate,
            micro(limits.monthly_budget_usd),
            now_ms,
        )
        .await?
        {
            tx.rollback().await?;
            return Ok(Err(format!(
                "the monthly Anthropic budget (${:.2} in {month}) would be passed",
                limits.monthly_budget_usd
            )));
        }
        if !add_within(
            &mut tx,
            CHANGE,
            change_id,
            ALL_TIME,
            estimate,
            micro(limits.change_budget_usd),
            now_ms,
        )
        .await?
        {
            tx.rollback().await?;
            return Ok(Err(format!(
                "the Change budget (${:.2}) would be passed",
                limits.change_budget_usd
            )));
        }
        tx.commit().await?;
        Ok(Ok(ModelReservation {
            change_id: change_id.to_owned(),
            month,
            estimate_micro: estimate,
        }))
    }

    /// Settles a reservation at the cost the API reported (zero for a call that failed before
    /// any usage was reported).
    pub async fn settle_model_call(&self, r: &ModelReservation, cost_usd: f64, now_ms: i64) -> Result<(), StoreError> {
        let delta = micro(cost_usd) - r.estimate_micro;
        let mut tx = self.begin_write().await?;
        add(&mut *tx, MONTHLY, DEPLOYMENT, &r.month, delta, now_ms).await?;
        add(&mut *tx, CHANGE, &r.change_id, ALL_TIME, delta, now_ms).await?;
        tx.commit().await?;
        Ok(())
    }

    /// What a Change's model calls cost so far (USD).
    pub async fn change_model_cost(&self, change_id: &str) -> Result<f64, StoreError> {
        self.counter(CHANGE, change_id, ALL_TIME)
            .await
            .map(|m| m as f64 / MICRO)
    }

    /// Model calls made on the UTC day of `now_ms`.
    pub async fn model_calls_on(&self, now_ms: i64) -> Result<i64, StoreError> {
        self.counter(CALLS, DEPLOYMENT, &day_of(now_ms)).await
    }

    /// The deployment's model cost in the month of `now_ms` (USD).
    pub async fn model_cost_in_month(&self, now_ms: i64) -> Result<f64, StoreError> {
        self.counter(MONTHLY, DEPLOYMENT, &month_of(now_ms))
            .await
            .map(|m| m as f64 / MICRO)
    }

    async fn counter(&self, meter: &str, scope: &str, period: &str) -> Result<i64, StoreError> {
        let row: Option<(i64,)> =
            sqlx::query_as("select amount from model_usage_counters where meter = $1 and scope = $2 and period = $3")
                .bind(meter)
                .bind(scope)
                .bind(period)
                .fetch_optional(self.pool())
                .await?;
        Ok(row.map_or(0, |r| r.0))
    }
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
