//! Code edit sessions: one open per person per project, decided under the project's row lock so
//! two opens never both succeed; each open session of a project holds its own Sandbox uid.

use crate::Tx;
use crate::{StoreError, events, now_ms};
use belay_domain::edit_session::free_uid;
use belay_domain::ids::{AccountId, EditSessionId, ProjectId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct EditSession {
    pub id: String,
    pub project_id: String,
    pub account_id: String,
    /// The Sandbox user the session's commands run as.
    #[sqlx(try_from = "i64")]
    pub uid: u32,
    /// `open` or `ended`.
    pub status: String,
    /// Canonical `main` when the session forked it.
    pub start_commit: Option<String>,
    pub opened_at: i64,
    pub last_used_at: i64,
    pub ended_at: Option<i64>,
    pub end_reason: Option<String>,
}

/// The answer to an open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenSession {
    Opened(EditSession),
    /// This person already has an open session in the project.
    AlreadyOpen(EditSession),
    /// Every session uid is taken.
    Full,
}

const COLUMNS: &str =
    "id, project_id, account_id, uid, status, start_commit, opened_at, last_used_at, ended_at, end_reason";

fn row(r: &sqlx::any::AnyRow) -> Result<EditSession, StoreError> {
    Ok(<EditSession as sqlx::FromRow<_>>::from_row(r)?)
}

/// Opens a session `id` for `account_id` in a project it owns.
pub async fn open_edit_session(
    tx: &mut Tx,
    account_id: &AccountId,
    project_id: &ProjectId,
    id: &EditSessionId,
) -> Result<OpenSession, StoreError> {
    if crate::projects::get_project(tx, account_id, project_id)
        .await?
        .is_none()
    {
        return Err(StoreError::not_found("project", project_id.as_str()));
    }
    sqlx::query("update projects set updated_at = updated_at where id = $1")
        .bind(project_id.as_str())
        .execute(tx.conn())
        .await?;
    let sql = format!("select {COLUMNS} from edit_sessions where project_id = $1 and status = 'open'");
    let open: Vec<EditSession> = sqlx::query(&sql)
        .bind(project_id.as_str())
        .fetch_all(tx.conn())
        .await?
        .iter()
        .map(row)
        .collect::<Result<_, _>>()?;
    if let Some(mine) = open.iter().find(|s| s.account_id == account_id) {
        return Ok(OpenSession::AlreadyOpen(mine.clone()));
    }
    let used: BTreeSet<u32> = open.iter().map(|s| s.uid).collect();
    let Some(uid) = free_uid(&used) else {
        return Ok(OpenSession::Full);
    };
    let now = now_ms();
    sqlx::query(
        "insert into edit_sessions (id, project_id, account_id, uid, status, opened_at, last_used_at) values ($1, $2, $3, $4, 'open', $5, $5)",
    )
    .bind(id.as_str())
    .bind(project_id.as_str())
    .bind(account_id.as_str())
    .bind(i64::from(uid))
    .bind(now)
    .execute(tx.conn())
    .await?;
    events::append(
        tx.conn(),
        id,
        "edit_session.opened",
        &serde_json::json!({ "projectId": project_id }),
    )
    .await?;
    let sql = format!("select {COLUMNS} from edit_sessions where id = $1");
    let session = row(&sqlx::query(&sql).bind(id.as_str()).fetch_one(tx.conn()).await?)?;
    Ok(OpenSession::Opened(session))
}

/// The session, if `account_id` opened it.
pub async fn get_edit_session(
    tx: &mut Tx,
    account_id: &AccountId,
    id: &EditSessionId,
) -> Result<Option<EditSession>, StoreError> {
    let sql = format!(
        "select {COLUMNS} from edit_sessions where id = $1 and account_id = $2 \
         and project_id in (select id from projects where status <> 'deleting')"
    );
    let r = sqlx::query(&sql)
        .bind(id.as_str())
        .bind(account_id.as_str())
        .fetch_optional(tx.conn())
        .await?;
    r.as_ref().map(row).transpose()
}

pub async fn edit_session(tx: &mut Tx, id: &EditSessionId) -> Result<Option<EditSession>, StoreError> {
    let sql = format!("select {COLUMNS} from edit_sessions where id = $1");
    let r = sqlx::query(&sql).bind(id.as_str()).fetch_optional(tx.conn()).await?;
    r.as_ref().map(row).transpose()
}

pub async fn edit_session_forked(tx: &mut Tx, id: &EditSessionId, start_commit: &str) -> Result<(), StoreError> {
    sqlx::query("update edit_sessions set start_commit = $2 where id = $1")
        .bind(id.as_str())
        .bind(start_commit)
        .execute(tx.conn())
        .await?;
    Ok(())
}

/// Records a command's use (the overdue clock restarts).
pub async fn touch_edit_session(tx: &mut Tx, id: &EditSessionId) -> Result<(), StoreError> {
    sqlx::query("update edit_sessions set last_used_at = $2 where id = $1 and status = 'open'")
        .bind(id.as_str())
        .bind(now_ms())
        .execute(tx.conn())
        .await?;
    Ok(())
}

/// Ends an open session; ending one already ended changes nothing. True when it moved.
pub async fn end_edit_session(tx: &mut Tx, id: &EditSessionId, reason: &str) -> Result<bool, StoreError> {
    let moved = sqlx::query(
        "update edit_sessions set status = 'ended', ended_at = $2, end_reason = $3 where id = $1 and status = 'open'",
    )
    .bind(id.as_str())
    .bind(now_ms())
    .bind(reason)
    .execute(tx.conn())
    .await?;
    if moved.rows_affected() == 1 {
        events::append(
            tx.conn(),
            id,
            "edit_session.ended",
            &serde_json::json!({ "reason": reason }),
        )
        .await?;
    }
    Ok(moved.rows_affected() == 1)
}

/// Every session, for the forks sweep.
pub async fn all_edit_sessions(tx: &mut Tx) -> Result<Vec<EditSession>, StoreError> {
    let sql = format!("select {COLUMNS} from edit_sessions order by opened_at");
    sqlx::query(&sql).fetch_all(tx.conn()).await?.iter().map(row).collect()
}

crate::one_step! {
    write open_edit_session(account_id: &AccountId, project_id: &ProjectId, id: &EditSessionId) -> OpenSession;
    read get_edit_session(account_id: &AccountId, id: &EditSessionId) -> Option<EditSession>;
    read edit_session(id: &EditSessionId) -> Option<EditSession>;
    write edit_session_forked(id: &EditSessionId, start_commit: &str) -> ();
    write touch_edit_session(id: &EditSessionId) -> ();
    write end_edit_session(id: &EditSessionId, reason: &str) -> bool;
    read all_edit_sessions() -> Vec<EditSession>;
}
