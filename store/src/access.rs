//! What the account boundaries need to know: who owns a job's plan or ladder, and which project
//! (and so which account) a repository token was issued for.

use crate::StoreError;
use crate::Tx;
use belay_domain::ids::{AccountId, ProjectId, TokenId};
use belay_domain::job::Origin;
use sqlx::Row;

/// The account that owns a plan or a ladder, if it exists.
pub async fn origin_owner(tx: &mut Tx, origin: &Origin) -> Result<Option<String>, StoreError> {
    let row = match origin {
        Origin::Plan(id) => {
            sqlx::query("select account_id from coverage_plans where id = $1")
                .bind(id)
                .fetch_optional(tx.conn())
                .await?
        }
        Origin::Ladder(id) => {
            sqlx::query("select account_id from ladders where id = $1")
                .bind(id)
                .fetch_optional(tx.conn())
                .await?
        }
    };
    Ok(row.map(|r| r.try_get("account_id")).transpose()?)
}

/// Records that the API issued `token_id` for `project_id` to `account_id`, valid until
/// `expires_at` (unix seconds). Rows past their expiry are dropped on the way.
pub async fn record_repo_token_issue(
    tx: &mut Tx,
    token_id: &TokenId,
    project_id: &ProjectId,
    account_id: &AccountId,
    expires_at: i64,
    now_secs: i64,
) -> Result<(), StoreError> {
    sqlx::query("delete from repo_token_issues where expires_at < $1")
        .bind(now_secs)
        .execute(tx.conn())
        .await?;
    sqlx::query("insert into repo_token_issues (token_id, project_id, account_id, expires_at) values ($1, $2, $3, $4)")
        .bind(token_id.as_str())
        .bind(project_id.as_str())
        .bind(account_id.as_str())
        .bind(expires_at)
        .execute(tx.conn())
        .await?;
    Ok(())
}

/// Whether `account_id` owns the project the API issued `token_id` for (false for a token it
/// did not issue, or one issued for another account's project).
pub async fn owns_repo_token(tx: &mut Tx, account_id: &AccountId, token_id: &TokenId) -> Result<bool, StoreError> {
    Ok(sqlx::query(
        "select 1 from repo_token_issues i join projects p on p.id = i.project_id \
         where i.token_id = $1 and p.account_id = $2 and p.status <> 'deleting'",
    )
    .bind(token_id.as_str())
    .bind(account_id.as_str())
    .fetch_optional(tx.conn())
    .await?
    .is_some())
}

crate::one_step! {
    read origin_owner(origin: &Origin) -> Option<String>;
    write record_repo_token_issue(token_id: &TokenId, project_id: &ProjectId, account_id: &AccountId, expires_at: i64, now_secs: i64) -> ();
    read owns_repo_token(account_id: &AccountId, token_id: &TokenId) -> bool;
}
