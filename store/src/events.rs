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
    // An owned entity's event carries its owner, found from the entity's own row in the same
    // transaction (a project, a Change, a task run, a Candidate, …); an event of a job, run,
    // review or catalogue entry carries none (every account sees it). See
    // `belay_domain::access`.
    let owned = belay_domain::access::event_is_owned(kind);
    let sql = if owned {
        OWNED_INSERT
    } else {
        "insert into events (entity, kind, payload, at) values ($1, $2, $3, $4)"
    };
    let mut q = sqlx::query(sql)
        .bind(entity)
        .bind(kind)
        .bind(payload.to_string())
        .bind(now_ms());
    if owned {
        // The owner the event names itself: the last word, for an entity whose row is gone (a
        // deleted plan's `coverage_plan.deleted`, written after its delete).
        q = q.bind(payload.get("accountId").and_then(|a| a.as_str()).map(str::to_owned));
    }
    q.execute(exec).await?;
    Ok(())
}

fn event_of(r: &sqlx::any::AnyRow) -> Result<Event, StoreError> {
    Ok(Event {
        id: r.try_get("id")?,
        entity: r.try_get("entity")?,
        kind: r.try_get("kind")?,
        payload: json(&r.try_get::<String, _>("payload")?, "payload")?,
        at: r.try_get("at")?,
    })
}

const OWNED_INSERT: &str = "insert into events (entity, kind, payload, at, account_id) values ($1, $2, $3, $4, coalesce(\
    (select p.account_id from projects p where p.id = $1), \
    (select p.account_id from changes c join projects p on p.id = c.project_id where c.id = $1), \
    (select p.account_id from task_runs r join tasks t on t.id = r.task_id join changes c on c.id = t.change_id \
        join projects p on p.id = c.project_id where r.id = $1), \
    (select p.account_id from candidates k join projects p on p.id = k.project_id where k.id = $1), \
    (select e.account_id from edit_sessions e where e.id = $1), \
    (select g.account_id from gg_configs g where g.id = $1), \
    (select a.id from accounts a where a.id = $1), \
    (select g.account_id from coverage_groups g where g.id = $1), \
    (select p.account_id from coverage_plans p where p.id = $1 or 'plan:' || p.id = $1), \
    (select l.account_id from ladders l where l.id = $1 or 'ladder:' || l.id = $1), \
    $5, \
    ''))";

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
    /// The events `viewer` may see (`belay_domain::access::event_visible`) after `after_id`,
    /// oldest first, optionally for one entity.
    pub async fn events_for(
        &self,
        viewer: &str,
        after_id: i64,
        entity: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Event>, StoreError> {
        let rows = sqlx::query(
            "select id, entity, kind, payload, at from events where id > $1 and ($2 = '' or entity = $2) \
             and (account_id is null or account_id = $3) order by id limit $4",
        )
        .bind(after_id)
        .bind(entity.unwrap_or(""))
        .bind(viewer)
        .bind(limit)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(event_of).collect()
    }

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
        rows.iter().map(event_of).collect()
    }
}
