//! Changes, Tasks, task runs and ChangeSets. Each belongs to a project, and only the project's
//! owner reads or writes them.

use crate::Tx;
use crate::rows::{enum_from, enum_text, json, to_json};
use crate::{StoreError, events, new_id_body, now_ms};
use belay_domain::change::{
    Change, ChangeInput, ChangeSet, ChangeSetInput, ChangeStatus, RiskTier, Task, TaskInput, TaskKind, TaskRun,
    TaskRunStatus,
};
use belay_domain::ids::{AccountId, ChangeId, ChangeSetId, ProjectId, TaskId, TaskRunId};
use sqlx::Row;
use sqlx::any::AnyRow;
use std::collections::BTreeSet;

fn change_row(r: &AnyRow) -> Result<Change, StoreError> {
    let risk: Option<String> = r.try_get("risk_tier")?;
    Ok(Change {
        id: r.try_get::<String, _>("id")?.into(),
        project_id: r.try_get::<String, _>("project_id")?.into(),
        goal: r.try_get("goal")?,
        acceptance_criteria: json(&r.try_get::<String, _>("acceptance_criteria")?, "acceptance_criteria")?,
        invariants: json(&r.try_get::<String, _>("invariants")?, "invariants")?,
        risk_tier: risk
            .as_deref()
            .map(|t| enum_from::<RiskTier>(t, "risk tier"))
            .transpose()?,
        status: enum_from::<ChangeStatus>(&r.try_get::<String, _>("status")?, "change status")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

pub(crate) fn change_set_row(r: &AnyRow) -> Result<ChangeSet, StoreError> {
    Ok(ChangeSet {
        id: r.try_get::<String, _>("id")?.into(),
        task_id: r.try_get::<String, _>("task_id")?.into(),
        run_id: r.try_get::<String, _>("run_id")?.into(),
        commit: r.try_get("commit_id")?,
        contract_changes: json(&r.try_get::<String, _>("contract_changes")?, "contract_changes")?,
        data_changes: json(&r.try_get::<String, _>("data_changes")?, "data_changes")?,
        patch_ref: r.try_get("patch_ref")?,
        created_at: r.try_get("created_at")?,
    })
}

const CHANGE_COLUMNS: &str = "c.id, c.project_id, c.goal, c.acceptance_criteria, c.invariants, c.risk_tier, c.status, c.created_at, c.updated_at";

/// Inserts the ChangeSet `run_id` (a run of `task_id`) published: one per run, so a second insert
/// (a retried publish) inserts nothing and answers `None`. The one place a ChangeSet row is made.
pub(crate) async fn insert_change_set<'e>(
    exec: impl sqlx::Executor<'e, Database = sqlx::Any>,
    task_id: &str,
    run_id: &str,
    input: &ChangeSetInput,
) -> Result<Option<String>, StoreError> {
    let id = ChangeSetId::from_body(&new_id_body()).0;
    let inserted = sqlx::query(
        r#"insert into change_sets (id, task_id, run_id, commit_id, contract_changes, data_changes, created_at)
           values ($1, $2, $3, $4, $5, $6, $7) on conflict (run_id) do nothing"#,
    )
    .bind(id.as_str())
    .bind(task_id)
    .bind(run_id)
    .bind(input.commit.as_str())
    .bind(to_json(&input.contract_changes))
    .bind(to_json(&input.data_changes))
    .bind(now_ms())
    .execute(exec)
    .await?;
    Ok((inserted.rows_affected() == 1).then_some(id))
}

/// Opens a Change on a project the account owns (`running`).
pub async fn create_change(
    tx: &mut Tx,
    account_id: &AccountId,
    project_id: &ProjectId,
    input: &ChangeInput,
) -> Result<Change, StoreError> {
    input.validate()?;
    if crate::projects::get_project(tx, account_id, project_id)
        .await?
        .is_none()
    {
        return Err(StoreError::not_found("project", project_id.as_str()));
    }
    let id = ChangeId::from_body(&new_id_body());
    let now = now_ms();
    sqlx::query(
        r#"insert into changes (id, project_id, goal, acceptance_criteria, invariants, risk_tier, status, created_at, updated_at)
           values ($1, $2, $3, $4, $5, $6, 'running', $7, $7)"#,
    )
    .bind(id.as_str())
    .bind(project_id.as_str())
    .bind(input.goal.as_str())
    .bind(to_json(&input.acceptance_criteria))
    .bind(to_json(&input.invariants))
    .bind(input.risk_tier.as_ref().map(enum_text))
    .bind(now)
    .execute(tx.conn())
    .await?;
    events::append(
        tx.conn(),
        &id,
        "change.created",
        &serde_json::json!({ "projectId": project_id }),
    )
    .await?;
    get_change(tx, account_id, &id)
        .await?
        .ok_or_else(|| StoreError::not_found("change", id))
}

pub async fn get_change(tx: &mut Tx, account_id: &AccountId, id: &ChangeId) -> Result<Option<Change>, StoreError> {
    let sql = format!(
        "select {CHANGE_COLUMNS} from changes c join projects p on p.id = c.project_id \
         where c.id = $1 and p.account_id = $2 and p.status <> 'deleting'"
    );
    let row = sqlx::query(&sql)
        .bind(id.as_str())
        .bind(account_id.as_str())
        .fetch_optional(tx.conn())
        .await?;
    row.as_ref().map(change_row).transpose()
}

pub async fn list_changes(
    tx: &mut Tx,
    account_id: &AccountId,
    project_id: &ProjectId,
) -> Result<Vec<Change>, StoreError> {
    let sql = format!(
        "select {CHANGE_COLUMNS} from changes c join projects p on p.id = c.project_id \
         where c.project_id = $1 and p.account_id = $2 and p.status <> 'deleting' order by c.created_at, c.id"
    );
    let rows = sqlx::query(&sql)
        .bind(project_id.as_str())
        .bind(account_id.as_str())
        .fetch_all(tx.conn())
        .await?;
    rows.iter().map(change_row).collect()
}

/// The Tasks of a Change, each with the keys it depends on.
pub async fn list_tasks(tx: &mut Tx, account_id: &AccountId, change_id: &ChangeId) -> Result<Vec<Task>, StoreError> {
    if get_change(tx, account_id, change_id).await?.is_none() {
        return Err(StoreError::not_found("change", change_id.as_str()));
    }
    let rows = sqlx::query(
        "select id, change_id, key, kind, title, semantic_resources, created_at from tasks where change_id = $1 order by created_at, key",
    )
    .bind(change_id.as_str())
    .fetch_all(tx.conn())
    .await?;
    let mut tasks = Vec::with_capacity(rows.len());
    for r in &rows {
        let id: String = r.try_get("id")?;
        let deps = sqlx::query(
            "select t.key from task_dependencies d join tasks t on t.id = d.depends_on where d.task_id = $1 order by t.key",
        )
        .bind(id.as_str())
        .fetch_all(tx.conn())
        .await?
        .iter()
        .map(|d| d.try_get::<String, _>("key"))
        .collect::<Result<Vec<_>, _>>()?;
        tasks.push(Task {
            id: id.into(),
            change_id: r.try_get::<String, _>("change_id")?.into(),
            key: r.try_get("key")?,
            kind: enum_from::<TaskKind>(&r.try_get::<String, _>("kind")?, "task kind")?,
            title: r.try_get("title")?,
            semantic_resources: json(&r.try_get::<String, _>("semantic_resources")?, "semantic_resources")?,
            dependencies: deps,
            created_at: r.try_get("created_at")?,
        });
    }
    Ok(tasks)
}

/// Adds a Task to a Change; its dependencies must be Tasks the Change already has.
pub async fn add_task(
    tx: &mut Tx,
    account_id: &AccountId,
    change_id: &ChangeId,
    input: &TaskInput,
) -> Result<Task, StoreError> {
    let existing = list_tasks(tx, account_id, change_id).await?;
    let keys: BTreeSet<String> = existing.iter().map(|t| t.key.clone()).collect();
    input.validate_shape()?;
    // A key taken or a dependency the Change lacks conflicts with the Change as it is.
    input
        .validate_against(&keys)
        .map_err(|e| StoreError::Conflict(e.to_string()))?;
    let id = TaskId::from_body(&new_id_body()).0;
    let inserted = sqlx::query(
        r#"insert into tasks (id, change_id, key, kind, title, semantic_resources, created_at)
           values ($1, $2, $3, $4, $5, $6, $7) on conflict (change_id, key) do nothing"#,
    )
    .bind(id.as_str())
    .bind(change_id.as_str())
    .bind(input.key.as_str())
    .bind(enum_text(&input.kind))
    .bind(input.title.as_str())
    .bind(to_json(&input.semantic_resources))
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    if inserted.rows_affected() == 0 {
        return Err(StoreError::Conflict(format!(
            "key: the Change already has a Task {}",
            input.key
        )));
    }
    for dep in &input.dependencies {
        let target = existing.iter().find(|t| &t.key == dep).expect("validated");
        sqlx::query("insert into task_dependencies (task_id, depends_on) values ($1, $2)")
            .bind(id.as_str())
            .bind(target.id.as_str())
            .execute(tx.conn())
            .await?;
    }
    list_tasks(tx, account_id, change_id)
        .await?
        .into_iter()
        .find(|t| t.id == id)
        .ok_or_else(|| StoreError::not_found("task", id))
}

/// The Task, if the account owns its project.
pub(crate) async fn owned_task(tx: &mut Tx, account_id: &AccountId, task_id: &TaskId) -> Result<String, StoreError> {
    let row = sqlx::query(
        r#"select t.change_id from tasks t join changes c on c.id = t.change_id join projects p on p.id = c.project_id
           where t.id = $1 and p.account_id = $2 and p.status <> 'deleting'"#,
    )
    .bind(task_id.as_str())
    .bind(account_id.as_str())
    .fetch_optional(tx.conn())
    .await?
    .ok_or_else(|| StoreError::not_found("task", task_id.as_str()))?;
    Ok(row.try_get("change_id")?)
}

/// Starts a run of a Task.
pub async fn start_task_run(tx: &mut Tx, account_id: &AccountId, task_id: &TaskId) -> Result<TaskRun, StoreError> {
    owned_task(tx, account_id, task_id).await?;
    let run = TaskRun {
        id: TaskRunId::from_body(&new_id_body()),
        task_id: task_id.into(),
        status: TaskRunStatus::Running,
        started_at: now_ms(),
        ended_at: None,
    };
    sqlx::query("insert into task_runs (id, task_id, status, started_at) values ($1, $2, 'running', $3)")
        .bind(run.id.as_str())
        .bind(task_id.as_str())
        .bind(run.started_at)
        .execute(tx.conn())
        .await?;
    Ok(run)
}

/// Records the ChangeSet a run published: one per run.
pub async fn record_change_set(
    tx: &mut Tx,
    account_id: &AccountId,
    run_id: &TaskRunId,
    input: &ChangeSetInput,
) -> Result<ChangeSet, StoreError> {
    input.validate()?;
    let run = sqlx::query("select task_id from task_runs where id = $1")
        .bind(run_id.as_str())
        .fetch_optional(tx.conn())
        .await?
        .ok_or_else(|| StoreError::not_found("task run", run_id.as_str()))?;
    let task_id = TaskId(run.try_get("task_id")?);
    owned_task(tx, account_id, &task_id)
        .await
        .map_err(|_| StoreError::not_found("task run", run_id.as_str()))?;
    let Some(id) = insert_change_set(tx.conn(), &task_id, run_id, input).await? else {
        return Err(StoreError::Conflict(format!(
            "runId: run {run_id} already published a ChangeSet"
        )));
    };
    get_change_set(tx, account_id, &ChangeSetId(id.clone()))
        .await?
        .ok_or_else(|| StoreError::not_found("change set", id))
}

pub async fn get_change_set(
    tx: &mut Tx,
    account_id: &AccountId,
    id: &ChangeSetId,
) -> Result<Option<ChangeSet>, StoreError> {
    let row = sqlx::query(
        r#"select s.id, s.task_id, s.run_id, s.commit_id, s.contract_changes, s.data_changes, s.patch_ref, s.created_at
           from change_sets s join tasks t on t.id = s.task_id join changes c on c.id = t.change_id
           join projects p on p.id = c.project_id where s.id = $1 and p.account_id = $2 and p.status <> 'deleting'"#,
    )
    .bind(id.as_str())
    .bind(account_id.as_str())
    .fetch_optional(tx.conn())
    .await?;
    row.as_ref().map(change_set_row).transpose()
}

/// What cancelling a Change did.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeCancelled {
    pub change: Change,
    /// Candidates that were composing, verifying or verified, now `rejected`.
    pub rejected_candidates: Vec<String>,
    /// Task runs whose workspace was open: failed now; their workspaces are to be closed.
    pub stopped_runs: Vec<String>,
}

/// The spec's "Change cancelled" path, in one transaction: the Change `cancelled` (only from
/// `running`, `verifying` or `awaiting_approval`; a Change that has ended answers a conflict
/// naming its status), every Candidate still composing, verifying or verified `rejected`,
/// every request that waited on a person `cancelled`, every open workspace and running Task
/// run failed, the Decision Receipt `CHANGE_CANCELLED` and the event `change.cancelled` with
/// who and why. The caller then closes the stopped workspaces.
pub async fn cancel_change(
    tx: &mut Tx,
    account_id: &AccountId,
    change_id: &ChangeId,
    reason: &str,
) -> Result<ChangeCancelled, StoreError> {
    let before = get_change(tx, account_id, change_id)
        .await?
        .ok_or_else(|| StoreError::not_found("change", change_id.as_str()))?;
    let reason = reason.trim();
    let now = now_ms();
    let moved = sqlx::query(
        "update changes set status = 'cancelled', updated_at = $2 where id = $1 and status in ('running', 'verifying', 'awaiting_approval')",
    )
    .bind(change_id.as_str())
    .bind(now)
    .execute(tx.conn())
    .await?;
    if moved.rows_affected() == 0 {
        let status = get_change(tx, account_id, change_id)
            .await?
            .map_or(before.status, |c| c.status);
        return Err(StoreError::Conflict(format!(
            "status: the change has ended ({}); only a running, verifying or awaiting_approval change can be cancelled",
            enum_text(&status)
        )));
    }
    let why = format!("The change was cancelled: {reason}");
    let Stopped {
        rejected,
        approvals,
        stopped,
        runs,
    } = stop_change_work(tx, account_id, change_id, reason, &why, now).await?;
    let mut stopped_runs = stopped;
    stopped_runs.sort();
    let mut rejected = rejected;
    rejected.sort();
    let mut runs = runs;
    runs.sort();
    crate::receipts::insert_receipt(
        tx,
        change_id,
        belay_domain::receipt::ReceiptKind::ChangeCancelled,
        &format!("cancel:{change_id}"),
        &serde_json::json!({ "status": enum_text(&before.status), "by": account_id, "reason": reason }),
        &serde_json::json!({
            "status": "cancelled",
            "rejectedCandidates": rejected,
            "cancelledApprovals": approvals,
            "stoppedWorkspaces": stopped_runs,
            "failedTaskRuns": runs,
        }),
    )
    .await?;
    events::append(
        tx.conn(),
        change_id,
        "change.cancelled",
        &serde_json::json!({ "by": account_id, "reason": reason, "from": enum_text(&before.status) }),
    )
    .await?;
    let change = get_change(tx, account_id, change_id)
        .await?
        .ok_or_else(|| StoreError::not_found("change", change_id.as_str()))?;
    Ok(ChangeCancelled {
        change,
        rejected_candidates: rejected,
        stopped_runs,
    })
}

/// What cancelling a Change stopped, each list as the update returned it.
struct Stopped {
    rejected: Vec<String>,
    approvals: Vec<String>,
    stopped: Vec<String>,
    runs: Vec<String>,
}

/// Rejects the Change's Candidates still composing, verifying or verified, cancels the requests
/// that waited on a person, and fails its open workspaces and running Task runs, with their
/// events.
async fn stop_change_work(
    tx: &mut Tx,
    account_id: &AccountId,
    change_id: &ChangeId,
    reason: &str,
    why: &str,
    now: i64,
) -> Result<Stopped, StoreError> {
    let rejected: Vec<String> = sqlx::query_scalar(
        r#"update candidates set status = 'rejected', status_reason = $2, updated_at = $3
           where change_id = $1 and status in ('composing', 'verifying', 'verified') returning id"#,
    )
    .bind(change_id.as_str())
    .bind(why)
    .bind(now)
    .fetch_all(tx.conn())
    .await?;
    for id in &rejected {
        events::append(
            tx.conn(),
            id,
            "candidate.rejected",
            &serde_json::json!({ "reason": why, "changeId": change_id }),
        )
        .await?;
    }
    let approvals: Vec<String> = sqlx::query_scalar(
        r#"update approvals set status = 'cancelled', decided_at = $2, decided_by = $3, decision_reason = $4
           where change_id = $1 and status = 'requested' returning id"#,
    )
    .bind(change_id.as_str())
    .bind(now)
    .bind(account_id.as_str())
    .bind(reason)
    .fetch_all(tx.conn())
    .await?;
    let stopped: Vec<String> = sqlx::query_scalar(
        r#"update workspaces set status = 'failed', error = $2, ended_at = $3
           where change_id = $1 and status = 'open' returning run_id"#,
    )
    .bind(change_id.as_str())
    .bind(why)
    .bind(now)
    .fetch_all(tx.conn())
    .await?;
    let runs: Vec<String> = sqlx::query_scalar(
        r#"update task_runs set status = 'failed', ended_at = $2
           where status = 'running' and task_id in (select id from tasks where change_id = $1) returning id"#,
    )
    .bind(change_id.as_str())
    .bind(now)
    .fetch_all(tx.conn())
    .await?;
    for run in &runs {
        events::append(tx.conn(), run, "task_run.failed", &serde_json::json!({ "error": why })).await?;
    }
    Ok(Stopped {
        rejected,
        approvals,
        stopped,
        runs,
    })
}

crate::one_step! {
    write create_change(account_id: &AccountId, project_id: &ProjectId, input: &ChangeInput) -> Change;
    read get_change(account_id: &AccountId, id: &ChangeId) -> Option<Change>;
    read list_changes(account_id: &AccountId, project_id: &ProjectId) -> Vec<Change>;
    read list_tasks(account_id: &AccountId, change_id: &ChangeId) -> Vec<Task>;
    write add_task(account_id: &AccountId, change_id: &ChangeId, input: &TaskInput) -> Task;
    write start_task_run(account_id: &AccountId, task_id: &TaskId) -> TaskRun;
    write record_change_set(account_id: &AccountId, run_id: &TaskRunId, input: &ChangeSetInput) -> ChangeSet;
    read get_change_set(account_id: &AccountId, id: &ChangeSetId) -> Option<ChangeSet>;
    write cancel_change(account_id: &AccountId, change_id: &ChangeId, reason: &str) -> ChangeCancelled;
}
