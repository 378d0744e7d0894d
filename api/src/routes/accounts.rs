//! Accounts and their tokens (decision 0042): the caller's own account; accounts an operator
//! invites, lists, promotes, demotes, disables and enables (a member sees only itself); and the
//! tokens of an account, each named, optionally expiring, its secret shown once, revocable by its
//! holder or an operator.

use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiQuery, Caller, Operator};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use belay_domain::access::Role;
use belay_domain::ids::{AccountId, TokenId};
use belay_store::accounts::{Account, AccountChange, ApiToken};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountView {
    pub id: belay_domain::ids::AccountId,
    pub name: String,
    pub created_at: i64,
    /// `operator` (may write the catalogue, cancel every account's jobs at once and administer
    /// accounts) or `member`.
    #[schema(value_type = String, example = "member")]
    pub role: belay_domain::access::Role,
    /// Whether an operator disabled it (every token of a disabled account is refused).
    pub disabled: bool,
    /// When it was disabled, in milliseconds since the epoch.
    pub disabled_at: Option<i64>,
}

impl From<Account> for AccountView {
    fn from(a: Account) -> Self {
        AccountView {
            id: a.id,
            name: a.name,
            created_at: a.created_at,
            role: a.role,
            disabled: a.disabled_at.is_some(),
            disabled_at: a.disabled_at,
        }
    }
}

/// Who the token belongs to.
#[utoipa::path(get, path = "/v1/account", tag = "accounts", responses((status = 200, body = AccountView), (status = 401, body = crate::error::ErrorBody)))]
pub async fn me(Caller(a): Caller) -> Json<AccountView> {
    Json(a.into())
}

/// An account an operator invites.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccountInput {
    /// 1 to 200 characters, not blank.
    pub name: String,
    /// `operator` or `member` (the default).
    pub role: Option<RoleWord>,
}

/// A role as a request names it: `operator` or `member`.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RoleWord {
    Operator,
    Member,
}

impl From<RoleWord> for Role {
    fn from(r: RoleWord) -> Role {
        match r {
            RoleWord::Operator => Role::Operator,
            RoleWord::Member => Role::Member,
        }
    }
}

/// A new account and the secret of its first token (named `first`, never expiring), shown this
/// once: hand it to the account's holder.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedAccount {
    pub account: AccountView,
    pub token: String,
}

/// Invites an account (operators only): 201 with its first token's secret.
#[utoipa::path(post, path = "/v1/accounts", tag = "accounts", request_body = AccountInput,
    responses((status = 201, body = CreatedAccount), (status = 403, description = "A member may not (`operator_required`).", body = crate::error::ErrorBody)))]
pub async fn create(
    _operator: Operator,
    State(s): State<AppState>,
    ApiJson(input): ApiJson<AccountInput>,
) -> ApiResult<(StatusCode, Json<CreatedAccount>)> {
    let role = input.role.map(Role::from).unwrap_or(Role::Member);
    let (account, token) = s.store.create_account_with_role(&input.name, role).await?;
    Ok((
        StatusCode::CREATED,
        Json(CreatedAccount {
            account: account.into(),
            token,
        }),
    ))
}

/// Every account, oldest first, for an operator; a member's own, alone.
#[utoipa::path(get, path = "/v1/accounts", tag = "accounts", responses((status = 200, body = [AccountView])))]
pub async fn list(Caller(a): Caller, State(s): State<AppState>) -> ApiResult<Json<Vec<AccountView>>> {
    if a.role != Role::Operator {
        return Ok(Json(vec![a.into()]));
    }
    let accounts = s.store.list_accounts().await?;
    Ok(Json(accounts.into_iter().map(Into::into).collect()))
}

/// A change to an account: its role, or `disabled` true (every token refused at once) or false.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccountUpdate {
    pub role: Option<RoleWord>,
    pub disabled: Option<bool>,
}

/// Changes an account's role, or disables or enables it (operators only). The last enabled
/// operator can be neither demoted nor disabled: 409, nothing changed.
#[utoipa::path(patch, path = "/v1/accounts/{id}", tag = "accounts", params(("id" = String, Path)), request_body = AccountUpdate,
    responses((status = 200, body = AccountView), (status = 403, description = "A member may not (`operator_required`).", body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody), (status = 409, description = "The last enabled operator (`conflict`).", body = crate::error::ErrorBody)))]
pub async fn update(
    _operator: Operator,
    State(s): State<AppState>,
    Path(id): Path<AccountId>,
    ApiJson(input): ApiJson<AccountUpdate>,
) -> ApiResult<Json<AccountView>> {
    let change = AccountChange {
        role: input.role.map(Role::from),
        disabled: input.disabled,
    };
    Ok(Json(s.store.update_account(&id, &change).await?.into()))
}

/// A token as listed: never its secret.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenView {
    pub id: belay_domain::ids::TokenId,
    pub account_id: belay_domain::ids::AccountId,
    pub name: String,
    /// The secret's first characters (`bly_` and 8 more), to recognise it by; none for a token
    /// made before prefixes were kept.
    pub prefix: Option<String>,
    pub created_at: i64,
    /// When it stops being accepted (none: never), in milliseconds since the epoch.
    pub expires_at: Option<i64>,
    /// The last request it authenticated, to the minute.
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

impl From<ApiToken> for TokenView {
    fn from(t: ApiToken) -> Self {
        TokenView {
            id: t.id,
            account_id: t.account_id,
            name: t.name,
            prefix: t.prefix,
            created_at: t.created_at,
            expires_at: t.expires_at,
            last_used_at: t.last_used_at,
            revoked_at: t.revoked_at,
        }
    }
}

/// A token the caller makes for itself.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenInput {
    /// What it is for (`ci`, `second laptop`): 1 to 200 characters, not blank.
    pub name: String,
    /// It expires this many seconds from now: 1 to 31536000 (a year). Absent: it never expires.
    pub expires_in_seconds: Option<i64>,
}

/// A new token and its secret, shown this once.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedToken {
    pub token: TokenView,
    pub secret: String,
}

/// Makes a token for the caller's account: 201 with its secret, which is not stored.
#[utoipa::path(post, path = "/v1/account/tokens", tag = "accounts", request_body = TokenInput, responses((status = 201, body = CreatedToken)))]
pub async fn create_token(
    Caller(a): Caller,
    State(s): State<AppState>,
    ApiJson(input): ApiJson<TokenInput>,
) -> ApiResult<(StatusCode, Json<CreatedToken>)> {
    let (token, secret) = s
        .store
        .create_named_token(&a.id, &input.name, input.expires_in_seconds)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(CreatedToken {
            token: token.into(),
            secret,
        }),
    ))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct TokensQuery {
    /// Another account's tokens (operators only; a member naming another account finds none
    /// such: 404).
    pub account: Option<String>,
}

/// The tokens of the caller's account (or, for an operator, of `account`), revoked ones
/// included, oldest first.
#[utoipa::path(get, path = "/v1/account/tokens", tag = "accounts", params(TokensQuery),
    responses((status = 200, body = [TokenView]), (status = 404, body = crate::error::ErrorBody)))]
pub async fn list_tokens(
    Caller(a): Caller,
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<TokensQuery>,
) -> ApiResult<Json<Vec<TokenView>>> {
    let account = match q.account.as_deref() {
        None => a.id.clone(),
        Some(id) if id == a.id.as_str() => a.id.clone(),
        Some(id) if a.role == Role::Operator => s.store.get_account(&AccountId::from(id)).await?.id,
        Some(id) => return Err(ApiError::not_found(format!("account {id} not found"))),
    };
    let tokens = s.store.list_tokens(&account).await?;
    Ok(Json(tokens.into_iter().map(Into::into).collect()))
}

/// Revokes a token: refused from the next request on, in every API process. A member revokes
/// its own (another's is 404); an operator, any. Revoking a revoked token changes nothing.
#[utoipa::path(delete, path = "/v1/account/tokens/{id}", tag = "accounts", params(("id" = String, Path)),
    responses((status = 200, body = TokenView), (status = 404, body = crate::error::ErrorBody)))]
pub async fn revoke_token(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<TokenId>,
) -> ApiResult<Json<TokenView>> {
    let owner = (a.role != Role::Operator).then(|| a.id.to_string());
    Ok(Json(s.store.revoke_token(&id, owner.as_deref()).await?.into()))
}
