//! Projects: the row behind a canonical repository. Only the owning account sees a project.

use crate::Tx;
use crate::{StoreError, events, new_id_body, now_ms};
use belay_domain::ids::{AccountId, ProjectId};
use belay_domain::project::{Project, ProjectInput, ProjectStatus};
use sqlx::Row;
use sqlx::any::AnyRow;

const COLUMNS: &str = "id, name, status, generation, canonical_commit, canonical_tree, policy_ref, workspace_policy, error, created_at, updated_at";

fn project_row(r: &AnyRow) -> Result<Project, StoreError> {
    let status: String = r.try_get("status")?;
    Ok(Project {
        id: r.try_get::<String, _>("id")?.into(),
        name: r.try_get("name")?,
        status: ProjectStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown project status {status:?}")))?,
        generation: r.try_get("generation")?,
        canonical_commit: r.try_get("canonical_commit")?,
        canonical_tree: r.try_get("canonical_tree")?,
        policy_ref: r.try_get("policy_ref")?,
        workspace_policy: crate::rows::json(&r.try_get::<String, _>("workspace_policy")?, "workspace_policy")?,
        error: r.try_get("error")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

/// Records a new project, `provisioning`, at generation 0.
pub async fn create_project(tx: &mut Tx, account_id: &AccountId, input: &ProjectInput) -> Result<Project, StoreError> {
    input.validate()?;
    let id = ProjectId::from_body(&new_id_body());
    let now = now_ms();
    sqlx::query(
        r#"insert into projects (id, account_id, name, status, generation, workspace_policy, created_at, updated_at)
           values ($1, $2, $3, 'provisioning', 0, $5, $4, $4)"#,
    )
    .bind(id.as_str())
    .bind(account_id.as_str())
    .bind(input.name.as_str())
    .bind(now)
    .bind(crate::rows::to_json(
        &input.workspace_policy.clone().unwrap_or_default(),
    ))
    .execute(tx.conn())
    .await?;
    events::append(
        tx.conn(),
        &id,
        "project.created",
        &serde_json::json!({ "name": input.name }),
    )
    .await?;
    get_project(tx, account_id, &id)
        .await?
        .ok_or_else(|| StoreError::not_found("project", id))
}

/// The project, if `account_id` owns it. A project being deleted is gone from the moment
/// its deletion is accepted, for it and everything in it.
pub async fn get_project(tx: &mut Tx, account_id: &AccountId, id: &ProjectId) -> Result<Option<Project>, StoreError> {
    let sql = format!("select {COLUMNS} from projects where id = $1 and account_id = $2 and status <> 'deleting'");
    let row = sqlx::query(&sql)
        .bind(id.as_str())
        .bind(account_id.as_str())
        .fetch_optional(tx.conn())
        .await?;
    row.as_ref().map(project_row).transpose()
}

pub async fn list_projects(tx: &mut Tx, account_id: &AccountId) -> Result<Vec<Project>, StoreError> {
    let sql = format!(
        "select {COLUMNS} from projects where account_id = $1 and status <> 'deleting' order by created_at, id"
    );
    let rows = sqlx::query(&sql).bind(account_id.as_str()).fetch_all(tx.conn()).await?;
    rows.iter().map(project_row).collect()
}

/// Records the canonical S0 commit and tree; a provisioned project is `ready` at generation 0.
/// Idempotent: a second call with the same commit changes nothing.
pub async fn mark_project_provisioned(tx: &mut Tx, id: &ProjectId, commit: &str, tree: &str) -> Result<(), StoreError> {
    let moved = sqlx::query(
        r#"update projects set status = 'ready', canonical_commit = $2, canonical_tree = $3, updated_at = $4
           where id = $1 and status = 'provisioning'"#,
    )
    .bind(id.as_str())
    .bind(commit)
    .bind(tree)
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    if moved.rows_affected() == 1 {
        events::append(
            tx.conn(),
            id,
            "project.provisioned",
            &serde_json::json!({ "commit": commit, "tree": tree }),
        )
        .await?;
    }
    Ok(())
}

/// Records that provisioning failed, with why.
pub async fn mark_project_failed(tx: &mut Tx, id: &ProjectId, error: &str) -> Result<(), StoreError> {
    sqlx::query(
        "update projects set status = 'failed', error = $2, updated_at = $3 where id = $1 and status = 'provisioning'",
    )
    .bind(id.as_str())
    .bind(error)
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    Ok(())
}

/// Marks a project the account owns as `deleting`; false when there is no such project.
pub async fn mark_project_deleting(tx: &mut Tx, account_id: &AccountId, id: &ProjectId) -> Result<bool, StoreError> {
    let r = sqlx::query("update projects set status = 'deleting', updated_at = $3 where id = $1 and account_id = $2")
        .bind(id.as_str())
        .bind(account_id.as_str())
        .bind(now_ms())
        .execute(tx.conn())
        .await?;
    Ok(r.rows_affected() == 1)
}

/// Every repository name one project's rows derive: its forks (workspace forks of its task
/// runs, edit-session forks), then its canonical repository last. Cleanup deletes only these names and never lists
/// the namespace, so it cannot touch another project's repositories.
pub async fn project_repository_names(tx: &mut Tx, id: &ProjectId) -> Result<Vec<String>, StoreError> {
    let runs = sqlx::query(
        r#"select r.id from task_runs r join tasks t on t.id = r.task_id join changes c on c.id = t.change_id
           where c.project_id = $1 order by r.id"#,
    )
    .bind(id.as_str())
    .fetch_all(tx.conn())
    .await?;
    let mut names = Vec::with_capacity(runs.len() + 1);
    for r in &runs {
        let run: String = r.try_get("id")?;
        names.push(belay_domain::repo::workspace_fork(&run).map_err(|e| StoreError::Corrupt(e.to_string()))?);
    }
    for r in sqlx::query("select id from edit_sessions where project_id = $1 order by id")
        .bind(id.as_str())
        .fetch_all(tx.conn())
        .await?
    {
        let session: String = r.try_get("id")?;
        names.push(belay_domain::repo::edit_fork(&session).map_err(|e| StoreError::Corrupt(e.to_string()))?);
    }
    for r in sqlx::query("select id from candidates where project_id = $1 order by id")
        .bind(id.as_str())
        .fetch_all(tx.conn())
        .await?
    {
        let candidate: String = r.try_get("id")?;
        names.push(belay_domain::repo::candidate_fork(&candidate).map_err(|e| StoreError::Corrupt(e.to_string()))?);
    }
    names.push(belay_domain::repo::canonical_repo(id).map_err(|e| StoreError::Corrupt(e.to_string()))?);
    Ok(names)
}

/// Removes a project's rows (ChangeSets, task runs, Tasks, Changes, the project) once its
/// repositories and objects are gone.
pub async fn delete_project_rows(tx: &mut Tx, id: &ProjectId) -> Result<(), StoreError> {
    let names = project_repository_names(tx, id).await?;
    for name in &names {
        sqlx::query("delete from swept_forks where repo = $1")
            .bind(name)
            .execute(tx.conn())
            .await?;
    }
    // Recorded while the project's row still names its owner, who alone sees the event.
    events::append(tx.conn(), id, "project.deleted", &serde_json::json!({})).await?;
    let scoped = "(select t.id from tasks t join changes c on c.id = t.change_id where c.project_id = $1)";
    for sql in [
        "delete from workspaces where project_id = $1".to_string(),
        "delete from edit_sessions where project_id = $1".to_string(),
        "delete from evidence where candidate_id in (select id from candidates where project_id = $1)".to_string(),
        "delete from candidates where project_id = $1".to_string(),
        "delete from project_policies where project_id = $1".to_string(),
        format!("delete from change_sets where task_id in {scoped}"),
        format!("delete from task_runs where task_id in {scoped}"),
        format!("delete from task_dependencies where task_id in {scoped}"),
        "delete from tasks where change_id in (select id from changes where project_id = $1)".to_string(),
        "delete from changes where project_id = $1".to_string(),
        "delete from projects where id = $1".to_string(),
    ] {
        sqlx::query(&sql).bind(id.as_str()).execute(tx.conn()).await?;
    }
    Ok(())
}

crate::one_step! {
    write create_project(account_id: &AccountId, input: &ProjectInput) -> Project;
    read get_project(account_id: &AccountId, id: &ProjectId) -> Option<Project>;
    read list_projects(account_id: &AccountId) -> Vec<Project>;
    write mark_project_provisioned(id: &ProjectId, commit: &str, tree: &str) -> ();
    write mark_project_failed(id: &ProjectId, error: &str) -> ();
    write mark_project_deleting(account_id: &AccountId, id: &ProjectId) -> bool;
    read project_repository_names(id: &ProjectId) -> Vec<String>;
    write delete_project_rows(id: &ProjectId) -> ();
}
