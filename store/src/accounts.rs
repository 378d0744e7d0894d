//! Accounts and their API tokens. A token's secret is shown once and stored only as a hash.

use crate::{Store, StoreError, events, new_id_body, now_ms};
use belay_domain::access::Role;
use belay_domain::ids::{AccountId, TokenId};
use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::Row;

/// The prefix every API token carries, so a leaked one is recognisable.
pub const TOKEN_PREFIX: &str = "bly_";

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Account {
    pub id: AccountId,
    pub name: String,
    pub created_at: i64,
    /// Operators take cabinet-wide actions (`belay_domain::access`).
    pub role: Role,
}

fn role_of(r: &sqlx::any::AnyRow) -> Result<Role, StoreError> {
    let role: String = r.try_get("role")?;
    Role::parse(&role).ok_or_else(|| StoreError::Corrupt(format!("account role {role:?}")))
}

fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

impl Store {
    /// Creates a member account and its first token; returns the account and the token's secret.
    pub async fn create_account(&self, name: &str) -> Result<(Account, String), StoreError> {
        self.create_account_with_role(name, Role::Member).await
    }

    /// Creates an account of `role` and its first token.
    pub async fn create_account_with_role(&self, name: &str, role: Role) -> Result<(Account, String), StoreError> {
        belay_domain::validation::check_text("name", name, 200)?;
        let account = Account {
            id: AccountId::from_body(&new_id_body()),
            name: name.to_string(),
            created_at: now_ms(),
            role,
        };
        let mut tx = self.pool().begin().await?;
        sqlx::query("insert into accounts (id, name, created_at, role) values ($1, $2, $3, $4)")
            .bind(account.id.as_str())
            .bind(&account.name)
            .bind(account.created_at)
            .bind(role.as_str())
            .execute(&mut *tx)
            .await?;
        let token = insert_token(&mut tx, &account.id).await?;
        events::append(
            &mut *tx,
            &account.id,
            "account.created",
            &serde_json::json!({ "name": name }),
        )
        .await?;
        tx.commit().await?;
        Ok((account, token))
    }

    /// Mints another token for an existing account.
    pub async fn create_token(&self, account_id: &str) -> Result<String, StoreError> {
        let mut tx = self.pool().begin().await?;
        let exists = sqlx::query("select 1 from accounts where id = $1")
            .bind(account_id)
            .fetch_optional(&mut *tx)
            .await?;
        if exists.is_none() {
            return Err(StoreError::not_found("account", account_id));
        }
        let token = insert_token(&mut tx, account_id).await?;
        tx.commit().await?;
        Ok(token)
    }

    /// The account a bearer token belongs to, if the token is known and not revoked.
    pub async fn authenticate(&self, token: &str) -> Result<Option<Account>, StoreError> {
        if !token.starts_with(TOKEN_PREFIX) || token.len() > 200 {
            return Ok(None);
        }
        let row = sqlx::query(
            r#"select a.id, a.name, a.created_at, a.role from api_tokens t join accounts a on a.id = t.account_id
               where t.token_hash = $1 and t.revoked_at is null"#,
        )
        .bind(hash(token))
        .fetch_optional(self.pool())
        .await?;
        row.map(|r| {
            Ok(Account {
                id: r.try_get::<String, _>("id")?.into(),
                name: r.try_get("name")?,
                created_at: r.try_get("created_at")?,
                role: role_of(&r)?,
            })
        })
        .transpose()
    }

    pub async fn get_account(&self, id: &str) -> Result<Account, StoreError> {
        let r = sqlx::query("select id, name, created_at, role from accounts where id = $1")
            .bind(id)
            .fetch_optional(self.pool())
            .await?
            .ok_or_else(|| StoreError::not_found("account", id))?;
        Ok(Account {
            id: r.try_get::<String, _>("id")?.into(),
            name: r.try_get("name")?,
            created_at: r.try_get("created_at")?,
            role: role_of(&r)?,
        })
    }
}

async fn insert_token(tx: &mut sqlx::Transaction<'_, sqlx::Any>, account_id: &str) -> Result<String, StoreError> {
    let secret = format!("{TOKEN_PREFIX}{}{}", new_id_body(), new_id_body());
    sqlx::query("insert into api_tokens (id, account_id, token_hash, created_at) values ($1, $2, $3, $4)")
        .bind(TokenId::from_body(&new_id_body()).0)
        .bind(account_id)
        .bind(hash(&secret))
        .bind(now_ms())
        .execute(&mut **tx)
        .await?;
    Ok(secret)
}
