//! The append-only event log: what happened to which entity, for later features to read.

use crate::{Store, StoreError, now_ms, rows::json};
use serde::Serialize;
use sqlx::{Any, Executor, Row};

/// One event as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub id: i64,
    pub entity: String,
    pub kind: String,
    pub payload: serde_json::Value,
    pub at: i64,
}

/// Appends an event with whatever executor the caller holds (usually its transaction), so the
/// event commits or rolls back with the change it describes.
pub async fn append<'e>(
    exec: impl Executor<'e, Database = Any>,
    entity: &str,
    kind: &str,
    payload: &serde_json::Value,
) -> Result<(), StoreError> {
    sqlx::query("insert into events (entity, kind, payload, at) values ($1, $2, $3, $4)")
        .bind(entity)
        .bind(kind)
        .bind(payload.to_string())
        .bind(now_ms())
        .execute(exec)
        .await?;
    Ok(())
}

/// [`append`] inside a transaction the caller owns.
pub async fn append_in(
    tx: &mut crate::Tx,
    entity: &str,
    kind: &str,
    payload: &serde_json::Value,
) -> Result<(), StoreError> {
    append(tx.conn(), entity, kind, payload).await
}

impl Store {
    /// Events after `after_id`, oldest first, optionally for one entity.
    pub async fn events(&self, after_id: i64, entity: Option<&str>, limit: i64) -> Result<Vec<Event>, StoreError> {
        let rows = match entity {
            Some(e) => sqlx::query(
                "select id, entity, kind, payload, at from events where id > $1 and entity = $2 order by id limit $3",
            )
            .bind(after_id)
            .bind(e)
            .bind(limit)
            .fetch_all(self.pool())
            .await?,
            None => {
                sqlx::query("select id, entity, kind, payload, at from events where id > $1 order by id limit $2")
                    .bind(after_id)
                    .bind(limit)
                    .fetch_all(self.pool())
                    .await?
            }
        };
        rows.iter()
            .map(|r| {
                Ok(Event {
                    id: r.try_get("id")?,
                    entity: r.try_get("entity")?,
                    kind: r.try_get("kind")?,
                    payload: json(&r.try_get::<String, _>("payload")?, "payload")?,
                    at: r.try_get("at")?,
                })
            })
            .collect()
    }
}
