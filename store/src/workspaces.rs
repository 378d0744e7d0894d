//! Agent workspaces (one per task run) and repository-token revocations.
//!
//! The workspace row exists for two things the workflow cannot do alone: admission (fewer than
//! four open workspaces in a Change, decided under the Change's row lock so two opens never both
//! take the fourth place) and the record of how each workspace ended, which the forks sweep reads.

use crate::meter::{self, Reserve};
use crate::rows::json;
use crate::{StoreError, Tx, events, now_ms};
use belay_domain::change::{ChangeSet, ChangeSetInput, TaskKind};
use belay_domain::ids::{ChangeId, ProjectId, TaskRunId, TokenId};
use belay_domain::meter::{CapExceeded, Reservation};
use belay_domain::workspace::{AdmissionStep, WorkspacePolicy, new_admission, readmission};
use serde::{Deserialize, Serialize};
use sqlx::Row;

/// A ChangeSet of a task this run is stacked on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stacked {
    pub change_set_id: String,
    pub task_key: String,
    pub run_id: String,
    pub commit: String,
}

/// Everything opening a run's workspace needs, read in one place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspacePlan {
    pub account_id: String,
    pub project_id: String,
    pub change_id: String,
    pub task_id: String,
    pub task_kind: TaskKind,
    /// `running`, `succeeded` or `failed`.
    pub run_status: String,
    /// Canonical `main` now: the base the workspace checks out.
    pub base_commit: Option<String>,
    /// The latest ChangeSet of each task this one depends on, in dependency order.
    pub stacked: Vec<Stacked>,
    /// Dependencies that have no ChangeSet yet (the workspace cannot open).
    pub unpublished: Vec<String>,
    pub policy: WorkspacePolicy,
}

/// A workspace as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceRow {
    pub run_id: String,
    pub change_id: String,
    pub project_id: String,
    pub status: String,
    pub base_commit: Option<String>,
    pub start_commit: Option<String>,
    pub reservation_id: Option<String>,
    pub error: Option<String>,
    pub opened_at: i64,
    pub ended_at: Option<i64>,
}

/// The answer to an admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Admitted, with its meter reservation (`reservation_id`).
    Admitted(Box<WorkspaceRow>),
    /// The Change already has this many open workspaces.
    Refused { open: i64 },
    /// The project's monthly meter cannot hold the reservation.
    CapRefused(CapExceeded),
}

fn workspace_row(r: &sqlx::any::AnyRow) -> Result<WorkspaceRow, StoreError> {
    Ok(<WorkspaceRow as sqlx::FromRow<_>>::from_row(r)?)
}

/// Ends a running task run with `status`, and records `event` when it moved.
async fn end_task_run(
    tx: &mut Tx,
    run_id: &TaskRunId,
    status: &str,
    now: i64,
    event: &str,
    payload: serde_json::Value,
) -> Result<(), StoreError> {
    let moved = sqlx::query("update task_runs set status = $3, ended_at = $2 where id = $1 and status = 'running'")
        .bind(run_id.as_str())
        .bind(now)
        .bind(status)
        .execute(tx.conn())
        .await?;
    if moved.rows_affected() == 1 {
        events::append(tx.conn(), run_id, event, &payload).await?;
    }
    Ok(())
}

/// Admits the workspace of `run_id` if its Change has fewer than four open ones, and reserves its
/// seconds on the project's monthly meter, as steps of the caller's transaction (a refusal of
/// either is answered, and the caller rolls back). A run admitted before (an activity retried) is
/// admitted again, with its reservation, without counting or reserving twice.
pub async fn admit(
    tx: &mut Tx,
    run_id: &TaskRunId,
    change_id: &ChangeId,
    project_id: &ProjectId,
    now_secs: i64,
) -> Result<Admission, StoreError> {
    // The Change's row lock serializes admissions to one Change on PostgreSQL.
    sqlx::query("update changes set updated_at = updated_at where id = $1")
        .bind(change_id.as_str())
        .execute(tx.conn())
        .await?;
    let sql = format!("select {WS_COLUMNS} from workspaces where run_id = $1");
    if let Some(row) = sqlx::query(&sql)
        .bind(run_id.as_str())
        .fetch_optional(tx.conn())
        .await?
    {
        let row = workspace_row(&row)?;
        if readmission(row.status == "open", row.reservation_id.is_some()) == AdmissionStep::AsBefore {
            return Ok(Admission::Admitted(Box::new(row)));
        }
        let reservation = match meter::reserve(tx, project_id, Reservation::OpenWorkspace, now_secs).await? {
            Reserve::Reserved { id, .. } => id,
            Reserve::Refused(cap) => return Ok(Admission::CapRefused(cap)),
        };
        sqlx::query("update workspaces set reservation_id = $2 where run_id = $1")
            .bind(run_id.as_str())
            .bind(&reservation)
            .execute(tx.conn())
            .await?;
        return Ok(Admission::Admitted(Box::new(WorkspaceRow {
            reservation_id: Some(reservation),
            ..row
        })));
    }
    let open: i64 = sqlx::query("select count(*) as n from workspaces where change_id = $1 and status = 'open'")
        .bind(change_id.as_str())
        .fetch_one(tx.conn())
        .await?
        .try_get("n")?;
    if let AdmissionStep::Refused { open } = new_admission(open) {
        return Ok(Admission::Refused { open });
    }
    let reservation = match meter::reserve(tx, project_id, Reservation::OpenWorkspace, now_secs).await? {
        Reserve::Reserved { id, .. } => id,
        Reserve::Refused(cap) => return Ok(Admission::CapRefused(cap)),
    };
    sqlx::query(
        r#"insert into workspaces (run_id, change_id, project_id, status, reservation_id, opened_at)
           values ($1, $2, $3, 'open', $4, $5)"#,
    )
    .bind(run_id.as_str())
    .bind(change_id.as_str())
    .bind(project_id.as_str())
    .bind(&reservation)
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    events::append(
        tx.conn(),
        run_id,
        "workspace.admitted",
        &serde_json::json!({ "changeId": change_id }),
    )
    .await?;
    let row = sqlx::query(&sql).bind(run_id.as_str()).fetch_one(tx.conn()).await?;
    Ok(Admission::Admitted(Box::new(workspace_row(&row)?)))
}

const WS_COLUMNS: &str =
    "run_id, change_id, project_id, status, base_commit, start_commit, reservation_id, error, opened_at, ended_at";

/// What opening the workspace of `run_id` needs; `None` when the run does not exist.
pub async fn workspace_plan(tx: &mut Tx, run_id: &TaskRunId) -> Result<Option<WorkspacePlan>, StoreError> {
    let Some(r) = sqlx::query(
        r#"select r.status as run_status, t.id as task_id, t.kind, c.id as change_id, p.id as project_id,
                  p.account_id, p.canonical_commit, p.workspace_policy
           from task_runs r join tasks t on t.id = r.task_id join changes c on c.id = t.change_id
           join projects p on p.id = c.project_id where r.id = $1"#,
    )
    .bind(run_id.as_str())
    .fetch_optional(tx.conn())
    .await?
    else {
        return Ok(None);
    };
    let task_id: String = r.try_get("task_id")?;
    let kind: String = r.try_get("kind")?;
    let task_kind: TaskKind = crate::rows::enum_from(&kind, "task kind")?;
    let deps = sqlx::query(
        r#"select t.id, t.key from task_dependencies d join tasks t on t.id = d.depends_on
           where d.task_id = $1 order by t.created_at, t.key"#,
    )
    .bind(&task_id)
    .fetch_all(tx.conn())
    .await?;
    let mut stacked = Vec::new();
    let mut unpublished = Vec::new();
    for d in &deps {
        let dep_id: String = d.try_get("id")?;
        let key: String = d.try_get("key")?;
        let cs = sqlx::query(
            "select id, run_id, commit_id from change_sets where task_id = $1 order by created_at desc, id desc limit 1",
        )
        .bind(&dep_id)
        .fetch_optional(tx.conn())
        .await?;
        match cs {
            Some(cs) => stacked.push(Stacked {
                change_set_id: cs.try_get("id")?,
                task_key: key,
                run_id: cs.try_get("run_id")?,
                commit: cs.try_get("commit_id")?,
            }),
            None => unpublished.push(key),
        }
    }
    Ok(Some(WorkspacePlan {
        account_id: r.try_get("account_id")?,
        project_id: r.try_get("project_id")?,
        change_id: r.try_get("change_id")?,
        task_id,
        task_kind,
        run_status: r.try_get("run_status")?,
        base_commit: r.try_get("canonical_commit")?,
        stacked,
        unpublished,
        policy: json(&r.try_get::<String, _>("workspace_policy")?, "workspace_policy")?,
    }))
}

/// [`admit`] in a transaction of its own: the workspace's admission and its meter reservation
/// commit together, or neither does.
pub async fn admit_workspace(
    tx: &mut Tx,
    run_id: &TaskRunId,
    change_id: &ChangeId,
    project_id: &ProjectId,
    now_secs: i64,
) -> Result<Admission, StoreError> {
    tx.begin_step().await?;
    let admission = admit(tx, run_id, change_id, project_id, now_secs).await?;
    match &admission {
        Admission::Admitted(_) => tx.end_step().await?,
        // Nothing of a refusal is kept.
        Admission::Refused { .. } | Admission::CapRefused(_) => tx.undo_step().await?,
    }
    Ok(admission)
}

/// Records what the workspace opened on: its base, its start commit (base plus the stacked
/// merges) and its meter reservation.
pub async fn workspace_opened(
    tx: &mut Tx,
    run_id: &TaskRunId,
    base_commit: &str,
    start_commit: &str,
    reservation_id: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "update workspaces set base_commit = $2, start_commit = $3, reservation_id = $4 where run_id = $1 and status = 'open'",
    )
    .bind(run_id.as_str())
    .bind(base_commit)
    .bind(start_commit)
    .bind(reservation_id)
    .execute(tx.conn())
    .await?;
    Ok(())
}

pub async fn get_workspace(tx: &mut Tx, run_id: &TaskRunId) -> Result<Option<WorkspaceRow>, StoreError> {
    let sql = format!("select {WS_COLUMNS} from workspaces where run_id = $1");
    let row = sqlx::query(&sql)
        .bind(run_id.as_str())
        .fetch_optional(tx.conn())
        .await?;
    row.as_ref().map(workspace_row).transpose()
}

/// Ends an open workspace that published nothing: the workspace and its task run fail with
/// `error`. Ending one already ended changes nothing.
pub async fn fail_workspace(tx: &mut Tx, run_id: &TaskRunId, error: &str) -> Result<(), StoreError> {
    let now = now_ms();
    let error: String = error.chars().take(4000).collect();
    sqlx::query(
        "update workspaces set status = 'failed', error = $2, ended_at = $3 where run_id = $1 and status = 'open'",
    )
    .bind(run_id.as_str())
    .bind(&error)
    .bind(now)
    .execute(tx.conn())
    .await?;
    end_task_run(
        tx,
        run_id,
        "failed",
        now,
        "task_run.failed",
        serde_json::json!({ "error": error }),
    )
    .await?;
    Ok(())
}

/// Records the ChangeSet a workspace published (once: a retried activity gets the same row).
pub async fn insert_published_change_set(
    tx: &mut Tx,
    run_id: &TaskRunId,
    input: &ChangeSetInput,
) -> Result<ChangeSet, StoreError> {
    input.validate()?;
    let task_id: String = sqlx::query("select task_id from task_runs where id = $1")
        .bind(run_id.as_str())
        .fetch_optional(tx.conn())
        .await?
        .ok_or_else(|| StoreError::not_found("task run", run_id.as_str()))?
        .try_get("task_id")?;
    // A retried publish finds the ChangeSet its first attempt made.
    crate::changes::insert_change_set(tx.conn(), &task_id, run_id, input).await?;
    change_set_of_run(tx, run_id)
        .await?
        .ok_or_else(|| StoreError::not_found("change set of run", run_id.as_str()))
}

pub async fn change_set_of_run(tx: &mut Tx, run_id: &TaskRunId) -> Result<Option<ChangeSet>, StoreError> {
    let row = sqlx::query(
        "select id, task_id, run_id, commit_id, contract_changes, data_changes, patch_ref, created_at from change_sets where run_id = $1",
    )
    .bind(run_id.as_str())
    .fetch_optional(tx.conn())
    .await?;
    row.as_ref().map(crate::changes::change_set_row).transpose()
}

/// Completes a publish: the ChangeSet gets its patch object, the workspace is `published` and
/// the task run `succeeded`, in one transaction. Idempotent.
pub async fn finish_publish(tx: &mut Tx, run_id: &TaskRunId, patch_ref: &str) -> Result<ChangeSet, StoreError> {
    let now = now_ms();
    sqlx::query("update change_sets set patch_ref = $2 where run_id = $1")
        .bind(run_id.as_str())
        .bind(patch_ref)
        .execute(tx.conn())
        .await?;
    sqlx::query("update workspaces set status = 'published', ended_at = $2 where run_id = $1 and status = 'open'")
        .bind(run_id.as_str())
        .bind(now)
        .execute(tx.conn())
        .await?;
    end_task_run(
        tx,
        run_id,
        "succeeded",
        now,
        "task_run.published",
        serde_json::json!({ "patchRef": patch_ref }),
    )
    .await?;
    change_set_of_run(tx, run_id)
        .await?
        .ok_or_else(|| StoreError::not_found("change set of run", run_id.as_str()))
}

/// Revokes a repository token for every API process. True when it was not revoked before.
/// Revocations older than a token's whole life are forgotten: every token they could refuse
/// has expired.
pub async fn revoke_repo_token(tx: &mut Tx, token_id: &TokenId, ttl_secs: i64) -> Result<bool, StoreError> {
    let now = now_ms();
    sqlx::query("delete from repo_token_revocations where revoked_at < $1")
        .bind(now - (ttl_secs + 60) * 1000)
        .execute(tx.conn())
        .await?;
    let inserted =
        sqlx::query("insert into repo_token_revocations (token_id, revoked_at) values ($1, $2) on conflict do nothing")
            .bind(token_id.as_str())
            .bind(now)
            .execute(tx.conn())
            .await?;
    Ok(inserted.rows_affected() == 1)
}

pub async fn repo_token_revoked(tx: &mut Tx, token_id: &TokenId) -> Result<bool, StoreError> {
    Ok(
        sqlx::query("select 1 as one from repo_token_revocations where token_id = $1")
            .bind(token_id.as_str())
            .fetch_optional(tx.conn())
            .await?
            .is_some(),
    )
}

crate::one_step! {
    read workspace_plan(run_id: &TaskRunId) -> Option<WorkspacePlan>;
    write admit_workspace(run_id: &TaskRunId, change_id: &ChangeId, project_id: &ProjectId, now_secs: i64) -> Admission;
    write workspace_opened(run_id: &TaskRunId, base_commit: &str, start_commit: &str, reservation_id: &str) -> ();
    read get_workspace(run_id: &TaskRunId) -> Option<WorkspaceRow>;
    write fail_workspace(run_id: &TaskRunId, error: &str) -> ();
    write insert_published_change_set(run_id: &TaskRunId, input: &ChangeSetInput) -> ChangeSet;
    read change_set_of_run(run_id: &TaskRunId) -> Option<ChangeSet>;
    write finish_publish(run_id: &TaskRunId, patch_ref: &str) -> ChangeSet;
    write revoke_repo_token(token_id: &TokenId, ttl_secs: i64) -> bool;
    read repo_token_revoked(token_id: &TokenId) -> bool;
}
