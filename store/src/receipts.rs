//! Decision Receipts: one row per decision, written in the transaction that carries the decision
//! out. A retried decision names the same `dedupe_key` and writes nothing more.

use crate::Tx;
use crate::rows::{enum_from, json, to_json};
use crate::{StoreError, new_id_body, now_ms};
use belay_domain::ids::{AccountId, ChangeId, ReceiptId};
use belay_domain::receipt::{DecisionReceipt, ReceiptKind};
use sqlx::Row;

/// Writes a receipt in the caller's transaction; false when `dedupe_key` already has one.
pub async fn insert_receipt(
    tx: &mut Tx,
    change_id: &ChangeId,
    kind: ReceiptKind,
    dedupe_key: &str,
    inputs: &serde_json::Value,
    outcome: &serde_json::Value,
) -> Result<bool, StoreError> {
    let id = ReceiptId::from_body(&new_id_body());
    let done = sqlx::query(
        r#"insert into decision_receipts (id, change_id, kind, dedupe_key, inputs_json, outcome_json, created_at)
           values ($1, $2, $3, $4, $5, $6, $7) on conflict (dedupe_key) do nothing"#,
    )
    .bind(id.as_str())
    .bind(change_id.as_str())
    .bind(kind.as_str())
    .bind(dedupe_key)
    .bind(to_json(inputs))
    .bind(to_json(outcome))
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The Decision Receipts of a Change the account owns, oldest first.
pub async fn list_receipts(
    tx: &mut Tx,
    account_id: &AccountId,
    change_id: &ChangeId,
) -> Result<Vec<DecisionReceipt>, StoreError> {
    if crate::changes::get_change(tx, account_id, change_id).await?.is_none() {
        return Err(StoreError::not_found("change", change_id.as_str()));
    }
    receipts_of(tx, change_id).await
}

/// The Decision Receipts of a Change, oldest first (no account check).
pub async fn receipts_of(tx: &mut Tx, change_id: &ChangeId) -> Result<Vec<DecisionReceipt>, StoreError> {
    let rows = sqlx::query(
        "select id, change_id, kind, inputs_json, outcome_json, created_at from decision_receipts \
         where change_id = $1 order by created_at, id",
    )
    .bind(change_id.as_str())
    .fetch_all(tx.conn())
    .await?;
    rows.iter()
        .map(|r| {
            Ok(DecisionReceipt {
                id: r.try_get::<String, _>("id")?.into(),
                change_id: r.try_get::<String, _>("change_id")?.into(),
                kind: enum_from(&r.try_get::<String, _>("kind")?, "receipt kind")?,
                inputs: json(&r.try_get::<String, _>("inputs_json")?, "inputs_json")?,
                outcome: json(&r.try_get::<String, _>("outcome_json")?, "outcome_json")?,
                created_at: r.try_get("created_at")?,
            })
        })
        .collect()
}

crate::one_step! {
    read list_receipts(account_id: &AccountId, change_id: &ChangeId) -> Vec<DecisionReceipt>;
    read receipts_of(change_id: &ChangeId) -> Vec<DecisionReceipt>;
}
