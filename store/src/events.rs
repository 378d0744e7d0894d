//! The append-only event log: what happened to which entity, for later features to read.

use crate::Tx;
use crate::{StoreError, now_ms, rows::json};
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
    /// Who wrote it through the API; none for what a worker or a command line wrote.
    pub actor: Option<Actor>,
}

/// The account and token behind a write through the API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Actor {
    pub account_id: String,
    pub account_name: String,
    pub token_name: String,
}

/// The actor of the request being served, filled in once its caller is authenticated, and how
/// many events the request appended.
#[derive(Debug, Default)]
pub struct ActorSlot {
    actor: std::sync::Mutex<Option<Actor>>,
    appended: std::sync::atomic::AtomicUsize,
}

impl ActorSlot {
    pub fn set(&self, actor: Actor) {
        *self.actor.lock().unwrap_or_else(|p| p.into_inner()) = Some(actor);
    }

    pub fn actor(&self) -> Option<Actor> {
        self.actor.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Events appended while this slot was the request's.
    pub fn appended(&self) -> usize {
        self.appended.load(std::sync::atomic::Ordering::Relaxed)
    }
}

tokio::task_local! {
    /// The slot of the API request this task serves ([`with_actor_slot`]). Every event appended
    /// within it names the request's actor, so no write path can forget to.
    static ACTOR: std::sync::Arc<ActorSlot>;
}

/// Runs `f` (an API request) with `slot` as its actor slot.
pub async fn with_actor_slot<F: std::future::Future>(slot: std::sync::Arc<ActorSlot>, f: F) -> F::Output {
    ACTOR.scope(slot, f).await
}

/// The slot of the request this task serves, if it serves one.
pub fn current_actor_slot() -> Option<std::sync::Arc<ActorSlot>> {
    ACTOR.try_with(|s| s.clone()).ok()
}

fn current_actor() -> Option<Actor> {
    ACTOR
        .try_with(|s| {
            s.appended.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            s.actor()
        })
        .ok()
        .flatten()
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
        "insert into events (entity, kind, payload, at, actor_account_id, actor_account_name, actor_token_name) \
         values ($1, $2, $3, $4, $5, $6, $7)"
    };
    let actor = current_actor();
    let mut q = sqlx::query(sql)
        .bind(entity)
        .bind(kind)
        .bind(payload.to_string())
        .bind(now_ms());
    q = q
        .bind(actor.as_ref().map(|a| a.account_id.clone()))
        .bind(actor.as_ref().map(|a| a.account_name.clone()))
        .bind(actor.as_ref().map(|a| a.token_name.clone()));
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
        actor: match r.try_get::<Option<String>, _>("actor_account_id")? {
            Some(account_id) => Some(Actor {
                account_id,
                account_name: r
                    .try_get::<Option<String>, _>("actor_account_name")?
                    .unwrap_or_default(),
                token_name: r.try_get::<Option<String>, _>("actor_token_name")?.unwrap_or_default(),
            }),
            None => None,
        },
    })
}

const EVENT_COLUMNS: &str = "id, entity, kind, payload, at, actor_account_id, actor_account_name, actor_token_name";

const OWNED_INSERT: &str = "insert into events (entity, kind, payload, at, actor_account_id, actor_account_name, \
    actor_token_name, account_id) values ($1, $2, $3, $4, $5, $6, $7, coalesce(\
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
    $8, \
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

/// Which events a reader asks for.
#[derive(Debug, Clone, Default)]
pub struct EventFilter<'a> {
    /// Events with a larger id.
    pub after_id: i64,
    pub entity: Option<&'a str>,
    /// Events written through the API by this account.
    pub actor: Option<&'a str>,
    pub limit: i64,
}

/// The events a member `viewer` may see after `after_id`, oldest first, optionally for one
/// entity.
pub async fn events_for(
    tx: &mut Tx,
    viewer: &str,
    after_id: i64,
    entity: Option<&str>,
    limit: i64,
) -> Result<Vec<Event>, StoreError> {
    let filter = EventFilter {
        after_id,
        entity,
        actor: None,
        limit,
    };
    events_seen_by(tx, viewer, false, &filter).await
}

/// The events `viewer` may see (`belay_domain::access::event_visible`; every event, for an
/// operator), oldest first.
pub async fn events_seen_by(
    tx: &mut Tx,
    viewer: &str,
    operator: bool,
    filter: &EventFilter<'_>,
) -> Result<Vec<Event>, StoreError> {
    let rows = sqlx::query(&format!(
        "select {EVENT_COLUMNS} from events where id > $1 and ($2 = '' or entity = $2) \
         and ($5 = 1 or account_id is null or account_id = $3) and ($6 = '' or actor_account_id = $6) \
         order by id limit $4"
    ))
    .bind(filter.after_id)
    .bind(filter.entity.unwrap_or(""))
    .bind(viewer)
    .bind(filter.limit)
    .bind(i64::from(operator))
    .bind(filter.actor.unwrap_or(""))
    .fetch_all(tx.conn())
    .await?;
    rows.iter().map(event_of).collect()
}

/// Records a write through the API that appended no event of its own (a signal to a workflow,
/// whose effects a worker records), so that every write names its actor.
pub async fn record_api_write(tx: &mut Tx, method: &str, path: &str, status: u16) -> Result<(), StoreError> {
    let owner = current_actor().map(|a| a.account_id);
    let Some(owner) = owner else { return Ok(()) };
    append(
        tx.conn(),
        path,
        "api.write",
        &serde_json::json!({ "method": method, "path": path, "status": status, "accountId": owner }),
    )
    .await?;
    Ok(())
}

/// Events after `after_id`, oldest first, optionally for one entity.
pub async fn events(tx: &mut Tx, after_id: i64, entity: Option<&str>, limit: i64) -> Result<Vec<Event>, StoreError> {
    let rows = match entity {
        Some(e) => {
            sqlx::query(&format!(
                "select {EVENT_COLUMNS} from events where id > $1 and entity = $2 order by id limit $3"
            ))
            .bind(after_id)
            .bind(e)
            .bind(limit)
            .fetch_all(tx.conn())
            .await?
        }
        None => {
            sqlx::query(&format!(
                "select {EVENT_COLUMNS} from events where id > $1 order by id limit $2"
            ))
            .bind(after_id)
            .bind(limit)
            .fetch_all(tx.conn())
            .await?
        }
    };
    rows.iter().map(event_of).collect()
}

crate::one_step! {
    read events_for(viewer: &str, after_id: i64, entity: Option<&str>, limit: i64) -> Vec<Event>;
    read events_seen_by(viewer: &str, operator: bool, filter: &EventFilter<'_>) -> Vec<Event>;
    write record_api_write(method: &str, path: &str, status: u16) -> ();
    read events(after_id: i64, entity: Option<&str>, limit: i64) -> Vec<Event>;
}
