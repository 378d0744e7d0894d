//! What the daily forks sweep reads: for every fork the rows derive and the sweep has not yet
//! deleted, its kind, when its run or session ended, and the facts the rule needs. The rule
//! itself is `belay_domain::repo::fork_due_for_deletion`.

use crate::Tx;
use crate::{StoreError, now_ms};
use belay_domain::edit_session::due_at;
use belay_domain::repo::{ForkFacts, ForkKind, SweepFork, edit_fork, workspace_fork};
use sqlx::Row;

fn secs(ms: Option<i64>) -> Option<i64> {
    ms.map(|m| m.div_euclid(1000))
}

/// Every workspace and edit-session fork not yet swept.
pub async fn sweep_forks(tx: &mut Tx) -> Result<Vec<SweepFork>, StoreError> {
    let mut out = Vec::new();
    let runs = sqlx::query(
        r#"select r.id, r.status, r.ended_at, c.status as change_status, c.project_id,
                  (select count(*) from change_sets s where s.run_id = r.id) as change_sets
           from task_runs r join tasks t on t.id = r.task_id join changes c on c.id = t.change_id
           order by r.started_at"#,
    )
    .fetch_all(tx.conn())
    .await?;
    let swept: std::collections::BTreeSet<String> = sqlx::query("select repo from swept_forks")
        .fetch_all(tx.conn())
        .await?
        .iter()
        .map(|r| r.try_get("repo"))
        .collect::<Result<_, _>>()?;
    for r in &runs {
        let id: String = r.try_get("id")?;
        let repo = workspace_fork(&id).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        if swept.contains(&repo) {
            continue;
        }
        let change_status: String = r.try_get("change_status")?;
        let finished = serde_json::from_value::<belay_domain::change::ChangeStatus>(serde_json::Value::String(
            change_status.clone(),
        ))
        .map_err(|_| StoreError::Corrupt(format!("unknown change status {change_status:?}")))?
        .is_finished();
        out.push(SweepFork {
            kind: ForkKind::Workspace,
            repo,
            project_id: r.try_get::<String, _>("project_id")?.into(),
            ended_at_secs: secs(r.try_get("ended_at")?),
            facts: ForkFacts {
                run_failed: r.try_get::<String, _>("status")? == "failed",
                run_has_change_set: r.try_get::<i64, _>("change_sets")? > 0,
                change_finished: finished,
                ..Default::default()
            },
            session: None,
        });
    }
    for s in crate::edit_sessions::all_edit_sessions(tx).await? {
        let repo = edit_fork(&s.id).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        if swept.contains(&repo) {
            continue;
        }
        out.push(SweepFork {
            kind: ForkKind::EditSession,
            repo,
            project_id: s.project_id.clone().into(),
            ended_at_secs: secs(s.ended_at),
            facts: ForkFacts {
                session_due_at_secs: Some(due_at(s.last_used_at.div_euclid(1000))),
                ..Default::default()
            },
            session: (s.status == "open").then(|| (s.id.clone().into(), s.uid)),
        });
    }
    Ok(out)
}

/// Records forks the sweep deleted (or found gone).
pub async fn mark_forks_swept(tx: &mut Tx, repos: &[String]) -> Result<(), StoreError> {
    let now = now_ms();
    for repo in repos {
        sqlx::query("insert into swept_forks (repo, swept_at) values ($1, $2) on conflict do nothing")
            .bind(repo)
            .bind(now)
            .execute(tx.conn())
            .await?;
    }
    Ok(())
}

crate::one_step! {
    read sweep_forks() -> Vec<SweepFork>;
    write mark_forks_swept(repos: &[String]) -> ();
}
