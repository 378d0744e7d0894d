//! Accounts and their API tokens. A token's secret is shown once and stored only as a hash.

use crate::Tx;
use crate::{StoreError, events, new_id_body, now_ms};
use belay_domain::access::Role;
use belay_domain::api_token::TokenState;
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
    /// When an operator disabled it: every token of the account is refused until it is enabled.
    pub disabled_at: Option<i64>,
}

/// A token as its holder and operators see it: never its secret.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiToken {
    pub id: TokenId,
    pub account_id: AccountId,
    pub name: String,
    /// The secret's first characters, to recognise it by (none for a token made before prefixes
    /// were kept).
    pub prefix: Option<String>,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    /// The last request it authenticated, to the minute (`belay_domain::api_token::LAST_USED_EVERY_MS`).
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

/// What a presented bearer token amounts to.
#[derive(Debug, Clone, PartialEq)]
pub enum Authentication {
    /// The database knows no such token.
    Unknown,
    /// A token it knows that may not be used: revoked, expired or of a disabled account.
    Refused(TokenState),
    /// The account, and the id and name of the token it used.
    Valid {
        account: Account,
        token_id: TokenId,
        token_name: String,
    },
}

/// A change to an account by an operator.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AccountChange {
    pub role: Option<Role>,
    /// `Some(true)`: disable; `Some(false)`: enable.
    pub disabled: Option<bool>,
}

/// How many characters of a secret its prefix shows: `bly_` and 8 more.
const SHOWN_PREFIX: usize = TOKEN_PREFIX.len() + 8;

fn role_of(r: &sqlx::any::AnyRow) -> Result<Role, StoreError> {
    let role: String = r.try_get("role")?;
    Role::parse(&role).ok_or_else(|| StoreError::Corrupt(format!("account role {role:?}")))
}

fn account_of(r: &sqlx::any::AnyRow) -> Result<Account, StoreError> {
    Ok(Account {
        id: r.try_get::<String, _>("id")?.into(),
        name: r.try_get("name")?,
        created_at: r.try_get("created_at")?,
        role: role_of(r)?,
        disabled_at: r.try_get("disabled_at")?,
    })
}

fn token_of(r: &sqlx::any::AnyRow) -> Result<ApiToken, StoreError> {
    Ok(ApiToken {
        id: TokenId(r.try_get("id")?),
        account_id: r.try_get::<String, _>("account_id")?.into(),
        name: r.try_get("name")?,
        prefix: r.try_get("prefix")?,
        created_at: r.try_get("created_at")?,
        expires_at: r.try_get("expires_at")?,
        last_used_at: r.try_get("last_used_at")?,
        revoked_at: r.try_get("revoked_at")?,
    })
}

const ACCOUNT_COLUMNS: &str = "id, name, created_at, role, disabled_at";
const TOKEN_COLUMNS: &str = "id, account_id, name, prefix, created_at, expires_at, last_used_at, revoked_at";

fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Creates a member account and its first token; returns the account and the token's secret.
pub async fn create_account(tx: &mut Tx, name: &str) -> Result<(Account, String), StoreError> {
    create_account_with_role(tx, name, Role::Member).await
}

/// Creates an account of `role` and its first token, named `first`, that never expires.
pub async fn create_account_with_role(tx: &mut Tx, name: &str, role: Role) -> Result<(Account, String), StoreError> {
    belay_domain::validation::check_text("name", name, 200)?;
    let account = Account {
        id: AccountId::from_body(&new_id_body()),
        name: name.to_string(),
        created_at: now_ms(),
        role,
        disabled_at: None,
    };
    sqlx::query("insert into accounts (id, name, created_at, role) values ($1, $2, $3, $4)")
        .bind(account.id.as_str())
        .bind(&account.name)
        .bind(account.created_at)
        .bind(role.as_str())
        .execute(tx.conn())
        .await?;
    let (_, token) = insert_token(tx, &account.id, "first", None).await?;
    events::append(
        tx.conn(),
        &account.id,
        "account.created",
        &serde_json::json!({ "name": name, "role": role.as_str() }),
    )
    .await?;
    Ok((account, token))
}

/// Mints another token, named `first`, for an existing account.
pub async fn create_token(tx: &mut Tx, account_id: &AccountId) -> Result<String, StoreError> {
    create_named_token(tx, account_id, "first", None)
        .await
        .map(|(_, secret)| secret)
}

/// Mints a token named `name` for an account, expiring `expires_in_seconds` from now if
/// given; returns it and its secret, which is not stored and cannot be shown again.
pub async fn create_named_token(
    tx: &mut Tx,
    account_id: &AccountId,
    name: &str,
    expires_in_seconds: Option<i64>,
) -> Result<(ApiToken, String), StoreError> {
    belay_domain::validation::check_text("name", name, belay_domain::api_token::MAX_TOKEN_NAME)?;
    belay_domain::api_token::check_lifetime(expires_in_seconds)?;
    let expires_at = expires_in_seconds.map(|s| now_ms() + s * 1000);
    // It reads the account before it writes: on SQLite it must hold the write lock from the
    // start, or a writer committing in between makes it fail rather than wait.
    let exists = sqlx::query("select 1 from accounts where id = $1")
        .bind(account_id.as_str())
        .fetch_optional(tx.conn())
        .await?;
    if exists.is_none() {
        return Err(StoreError::not_found("account", account_id.as_str()));
    }
    let (token, secret) = insert_token(tx, account_id, name, expires_at).await?;
    events::append(
        tx.conn(),
        account_id,
        "account.token_created",
        &serde_json::json!({ "tokenId": token.id.0, "name": name, "expiresAt": expires_at }),
    )
    .await?;
    Ok((token, secret))
}

/// An account's tokens, revoked ones included, oldest first.
pub async fn list_tokens(tx: &mut Tx, account_id: &AccountId) -> Result<Vec<ApiToken>, StoreError> {
    let rows = sqlx::query(&format!(
        "select {TOKEN_COLUMNS} from api_tokens where account_id = $1 order by created_at, id"
    ))
    .bind(account_id.as_str())
    .fetch_all(tx.conn())
    .await?;
    rows.iter().map(token_of).collect()
}

/// Revokes token `id`. With `owner`, only a token of that account is found (another's is
/// not found, as if it did not exist); without, any. Revoking a revoked token changes
/// nothing and answers it as it is.
pub async fn revoke_token(tx: &mut Tx, id: &TokenId, owner: Option<&str>) -> Result<ApiToken, StoreError> {
    let now = now_ms();
    let revoked = sqlx::query(&format!(
        "update api_tokens set revoked_at = $1 where id = $2 and ($3 = '' or account_id = $3) \
         and revoked_at is null returning {TOKEN_COLUMNS}"
    ))
    .bind(now)
    .bind(id.as_str())
    .bind(owner.unwrap_or(""))
    .fetch_optional(tx.conn())
    .await?;
    let token = match revoked {
        Some(r) => {
            let token = token_of(&r)?;
            events::append(
                tx.conn(),
                token.account_id.as_str(),
                "account.token_revoked",
                &serde_json::json!({ "tokenId": token.id.0, "name": token.name }),
            )
            .await?;
            token
        }
        None => {
            let r = sqlx::query(&format!(
                "select {TOKEN_COLUMNS} from api_tokens where id = $1 and ($2 = '' or account_id = $2)"
            ))
            .bind(id.as_str())
            .bind(owner.unwrap_or(""))
            .fetch_optional(tx.conn())
            .await?
            .ok_or_else(|| StoreError::not_found("token", id.as_str()))?;
            token_of(&r)?
        }
    };
    Ok(token)
}

/// What the bearer token `token` amounts to at `now`. The revocation, the expiry and the
/// account's state are read from the database on every call, so a revocation or a disable
/// holds on the next request in every API process. With `track_last_used`, a valid token's
/// last use is written when the last one written is a minute old or more (at most once a
/// minute per token, so most requests write nothing).
pub async fn authenticate_token(
    tx: &mut Tx,
    token: &str,
    now: i64,
    track_last_used: bool,
) -> Result<Authentication, StoreError> {
    if !token.starts_with(TOKEN_PREFIX) || token.len() > 200 {
        return Ok(Authentication::Unknown);
    }
    let row = sqlx::query(
        r#"select t.id as token_id, t.name as token_name, t.revoked_at, t.expires_at, t.last_used_at,
                  a.id, a.name, a.created_at, a.role, a.disabled_at
           from api_tokens t join accounts a on a.id = t.account_id
           where t.token_hash = $1"#,
    )
    .bind(hash(token))
    .fetch_optional(tx.conn())
    .await?;
    let Some(r) = row else {
        return Ok(Authentication::Unknown);
    };
    let account = account_of(&r)?;
    let state = belay_domain::api_token::token_state(
        now,
        r.try_get("revoked_at")?,
        r.try_get("expires_at")?,
        account.disabled_at,
    );
    if state != TokenState::Valid {
        return Ok(Authentication::Refused(state));
    }
    let token_id: String = r.try_get("token_id")?;
    let last_used_at: Option<i64> = r.try_get("last_used_at")?;
    if track_last_used && belay_domain::api_token::last_used_due(now, last_used_at) {
        // Conditional, so two processes that both saw it due write it once.
        sqlx::query(
            "update api_tokens set last_used_at = $1 where id = $2 and (last_used_at is null or last_used_at <= $3)",
        )
        .bind(now)
        .bind(&token_id)
        .bind(now - belay_domain::api_token::LAST_USED_EVERY_MS)
        .execute(tx.conn())
        .await?;
    }
    Ok(Authentication::Valid {
        account,
        token_id: TokenId(token_id),
        token_name: r.try_get("token_name")?,
    })
}

/// The account a bearer token belongs to, if the token may be used now (its last use is
/// not tracked).
pub async fn authenticate(tx: &mut Tx, token: &str) -> Result<Option<Account>, StoreError> {
    Ok(match authenticate_token(tx, token, now_ms(), false).await? {
        Authentication::Valid { account, .. } => Some(account),
        _ => None,
    })
}

pub async fn get_account(tx: &mut Tx, id: &AccountId) -> Result<Account, StoreError> {
    let r = sqlx::query(&format!("select {ACCOUNT_COLUMNS} from accounts where id = $1"))
        .bind(id.as_str())
        .fetch_optional(tx.conn())
        .await?
        .ok_or_else(|| StoreError::not_found("account", id.as_str()))?;
    account_of(&r)
}

/// Every account, oldest first.
pub async fn list_accounts(tx: &mut Tx) -> Result<Vec<Account>, StoreError> {
    let rows = sqlx::query(&format!(
        "select {ACCOUNT_COLUMNS} from accounts order by created_at, id"
    ))
    .fetch_all(tx.conn())
    .await?;
    rows.iter().map(account_of).collect()
}

/// Changes an account's role or disables or enables it. The last enabled operator can be
/// neither demoted nor disabled (a conflict, nothing written). Concurrent changes are
/// serialized (SQLite: the write lock from the start; PostgreSQL: the operators' rows
/// locked first), so two operators demoting each other cannot leave none.
pub async fn update_account(tx: &mut Tx, id: &AccountId, change: &AccountChange) -> Result<Account, StoreError> {
    crate::dialect::lock_rows(
        tx.backend(),
        tx.conn(),
        "select id from accounts where role = 'operator' and disabled_at is null order by id for update",
    )
    .await?;
    let r = sqlx::query(&format!("select {ACCOUNT_COLUMNS} from accounts where id = $1"))
        .bind(id.as_str())
        .fetch_optional(tx.conn())
        .await?
        .ok_or_else(|| StoreError::not_found("account", id.as_str()))?;
    let before = account_of(&r)?;
    let role = change.role.unwrap_or(before.role);
    let disabled_at = match change.disabled {
        Some(true) => before.disabled_at.or(Some(now_ms())),
        Some(false) => None,
        None => before.disabled_at,
    };
    let was_operating = before.role == Role::Operator && before.disabled_at.is_none();
    let operating = role == Role::Operator && disabled_at.is_none();
    if was_operating && !operating {
        let n: i64 = sqlx::query("select count(*) as n from accounts where role = 'operator' and disabled_at is null")
            .fetch_one(tx.conn())
            .await?
            .try_get("n")?;
        if !belay_domain::api_token::may_stop_operating(true, n) {
            return Err(StoreError::Conflict(format!(
                "account {} is the last enabled operator: it can be neither demoted nor disabled until another operator is enabled",
                before.name
            )));
        }
    }
    let after = Account {
        role,
        disabled_at,
        ..before.clone()
    };
    if after != before {
        sqlx::query("update accounts set role = $1, disabled_at = $2 where id = $3")
            .bind(role.as_str())
            .bind(disabled_at)
            .bind(id.as_str())
            .execute(tx.conn())
            .await?;
        events::append(
            tx.conn(),
            id,
            "account.updated",
            &serde_json::json!({
                "role": role.as_str(),
                "disabled": disabled_at.is_some(),
                "roleBefore": before.role.as_str(),
                "disabledBefore": before.disabled_at.is_some(),
            }),
        )
        .await?;
    }
    Ok(after)
}

async fn insert_token(
    tx: &mut Tx,
    account_id: &AccountId,
    name: &str,
    expires_at: Option<i64>,
) -> Result<(ApiToken, String), StoreError> {
    let secret = format!("{TOKEN_PREFIX}{}{}", new_id_body(), new_id_body());
    let token = ApiToken {
        id: TokenId::from_body(&new_id_body()),
        account_id: account_id.to_string().into(),
        name: name.to_string(),
        prefix: Some(secret.chars().take(SHOWN_PREFIX).collect()),
        created_at: now_ms(),
        expires_at,
        last_used_at: None,
        revoked_at: None,
    };
    sqlx::query(
        "insert into api_tokens (id, account_id, token_hash, created_at, name, prefix, expires_at) \
         values ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(&token.id.0)
    .bind(account_id.as_str())
    .bind(hash(&secret))
    .bind(token.created_at)
    .bind(name)
    .bind(&token.prefix)
    .bind(expires_at)
    .execute(tx.conn())
    .await?;
    Ok((token, secret))
}

crate::one_step! {
    write create_account(name: &str) -> (Account, String);
    write create_account_with_role(name: &str, role: Role) -> (Account, String);
    write create_token(account_id: &AccountId) -> String;
    write create_named_token(account_id: &AccountId, name: &str, expires_in_seconds: Option<i64>) -> (ApiToken, String);
    read list_tokens(account_id: &AccountId) -> Vec<ApiToken>;
    write revoke_token(id: &TokenId, owner: Option<&str>) -> ApiToken;
    write authenticate_token(token: &str, now: i64, track_last_used: bool) -> Authentication;
    read authenticate(token: &str) -> Option<Account>;
    read get_account(id: &AccountId) -> Account;
    read list_accounts() -> Vec<Account>;
    write update_account(id: &AccountId, change: &AccountChange) -> Account;
}
