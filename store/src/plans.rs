//! The little of plans and ladders the run lane needs: whether a job's origin is paused, so a
//! retry can be withheld. The coverage and ladder features own these tables and extend them.

use crate::Tx;
use crate::{StoreError, now_ms};
use belay_domain::ids::{AccountId, LadderId, PlanId};
use belay_domain::job::Origin;
use sqlx::{Any, Executor, Row};

/// Whether the plan or ladder `origin` names is paused (a ladder is paused while disabled).
/// An origin whose plan or ladder no longer exists is not paused.
pub async fn origin_paused<'e>(exec: impl Executor<'e, Database = Any>, origin: &Origin) -> Result<bool, StoreError> {
    let row = match origin {
        Origin::Plan(id) => {
            sqlx::query("select paused as held from coverage_plans where id = $1")
                .bind(id)
                .fetch_optional(exec)
                .await?
        }
        Origin::Ladder(id) => {
            sqlx::query("select 1 - enabled as held from ladders where id = $1")
                .bind(id)
                .fetch_optional(exec)
                .await?
        }
    };
    Ok(match row {
        Some(r) => r.try_get::<i64, _>("held")? != 0,
        None => false,
    })
}

/// Records a plan's pause flag (creating the plan's row if needed).
pub async fn set_plan_paused(
    tx: &mut Tx,
    plan_id: &PlanId,
    account_id: &AccountId,
    paused: bool,
) -> Result<(), StoreError> {
    sqlx::query(
        r#"insert into coverage_plans (id, account_id, paused, created_at) values ($1, $2, $3, $4)
           on conflict (id) do update set paused = excluded.paused"#,
    )
    .bind(plan_id.as_str())
    .bind(account_id.as_str())
    .bind(paused as i64)
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    Ok(())
}

/// Records a ladder's enabled flag (creating the ladder's row if needed).
pub async fn set_ladder_enabled(
    tx: &mut Tx,
    ladder_id: &LadderId,
    account_id: &AccountId,
    enabled: bool,
) -> Result<(), StoreError> {
    sqlx::query(
        r#"insert into ladders (id, account_id, enabled, created_at) values ($1, $2, $3, $4)
           on conflict (id) do update set enabled = excluded.enabled"#,
    )
    .bind(ladder_id.as_str())
    .bind(account_id.as_str())
    .bind(enabled as i64)
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    Ok(())
}

crate::one_step! {
    write set_plan_paused(plan_id: &PlanId, account_id: &AccountId, paused: bool) -> ();
    write set_ladder_enabled(ladder_id: &LadderId, account_id: &AccountId, enabled: bool) -> ();
}
