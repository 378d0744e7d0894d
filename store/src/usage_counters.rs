//! `usage_counters`: one row per meter and scope, `used` settled and `reserved` held by what is
//! still running. Every meter that counts usage lives here (the browser's seconds per UTC day and
//! runs per Candidate, the model calls per UTC day, the model cost per month and per Change); each
//! meter's module says what its scope is and when it reserves and settles.

use crate::StoreError;
use crate::Tx;
use sqlx::{AnyConnection, Row};

/// Settles on a counter: `used` takes `add_used`, `reserved` gives back `held` (never below zero).
pub(crate) async fn settle_counter(
    conn: &mut AnyConnection,
    meter: &str,
    scope: &str,
    add_used: i64,
    held: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "update usage_counters set used = used + $3, reserved = case when reserved > $4 then reserved - $4 else 0 end where meter = $1 and scope = $2",
    )
    .bind(meter)
    .bind(scope)
    .bind(add_used)
    .bind(held)
    .execute(conn)
    .await?;
    Ok(())
}

/// A counter's `(used, reserved)`; zeros when it has no row.
pub async fn usage_counter(tx: &mut Tx, meter: &str, scope: &str) -> Result<(u64, u64), StoreError> {
    let row = sqlx::query("select used, reserved from usage_counters where meter = $1 and scope = $2")
        .bind(meter)
        .bind(scope)
        .fetch_optional(tx.conn())
        .await?;
    Ok(match row {
        Some(r) => (
            r.try_get::<i64, _>("used")?.max(0) as u64,
            r.try_get::<i64, _>("reserved")?.max(0) as u64,
        ),
        None => (0, 0),
    })
}

crate::one_step! {
    read usage_counter(meter: &str, scope: &str) -> (u64, u64);
}
