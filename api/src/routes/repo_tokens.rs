//! Repository tokens for smart HTTP (`/git/<repo>.git/…`): one repository, read or write,
//! 600 s, revocable. Issued to the owner of the project the repository belongs to.

use crate::AppState;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ApiJson, Caller};
use crate::repo_token::{self, Scope, TOKEN_TTL_SECS};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use belay_domain::ids::{ProjectId, TokenId};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TokenScope {
    Read,
    Write,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenRequest {
    pub scope: TokenScope,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IssuedToken {
    pub token_id: String,
    /// Use as the password of `http://belay:<token>@host/git/<repository>.git`, or as a bearer token.
    pub token: String,
    pub repository: String,
    /// The smart-HTTP path of the repository.
    pub path: String,
    pub expires_at: i64,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Revoked {
    pub revoked: bool,
}

/// What [`repo_token::issue`] mints as a token id; the OpenAPI document says the same.
pub const TOKEN_ID_PATTERN: &str = "^rt_[0-9a-f]{32}$";

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Issues a token for the project's canonical repository.
#[utoipa::path(post, path = "/v1/projects/{id}/repo-tokens", tag = "projects", params(("id" = String, Path)),
    request_body = TokenRequest,
    responses((status = 201, body = IssuedToken), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn issue(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<ProjectId>,
    ApiJson(req): ApiJson<TokenRequest>,
) -> ApiResult<(StatusCode, Json<IssuedToken>)> {
    let git = s.git.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            "git_disabled",
            "this API serves no git endpoint (BELAY_GIT_TOKEN_SECRET is not set)",
        )
    })?;
    let project = s
        .store
        .get_project(&a.id, &id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("project {id} not found")))?;
    let repo = belay_domain::repo::canonical_repo(&project.id).map_err(|e| ApiError::invalid("id", e))?;
    // Canonical moves only by promotion (compare-and-swap, fast-forward): nobody pushes to it.
    let scope = match req.scope {
        TokenScope::Read => Scope::Read,
        TokenScope::Write => {
            return Err(ApiError::invalid(
                "scope",
                "the canonical repository is read-only over HTTP; write tokens are issued for forks",
            ));
        }
    };
    let now = now_secs();
    let token_id = repo_token::new_token_id(&uuid::Uuid::new_v4().simple().to_string());
    let token = repo_token::issue(&git.secret, &token_id, &repo, scope, now, TOKEN_TTL_SECS)
        .map_err(|e| ApiError::invalid("id", e))?;
    s.store
        .record_repo_token_issue(
            &TokenId::from(token_id.as_str()),
            &project.id,
            &a.id,
            now + TOKEN_TTL_SECS,
            now,
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(IssuedToken {
            token_id,
            token,
            path: format!("/git/{repo}.git"),
            repository: repo,
            expires_at: now + TOKEN_TTL_SECS,
        }),
    ))
}

/// Revokes a repository token before it expires.
#[utoipa::path(post, path = "/v1/repo-tokens/{token_id}/revoke", tag = "projects", params(("token_id" = String, Path)),
    responses((status = 200, body = Revoked), (status = 404, body = ErrorBody, description = "No token of a project the caller owns has this id"), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn revoke(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(token_id): Path<TokenId>,
) -> ApiResult<Json<Revoked>> {
    let git = s
        .git
        .as_ref()
        .ok_or_else(|| ApiError::new(StatusCode::CONFLICT, "git_disabled", "this API serves no git endpoint"))?;
    if !repo_token::is_token_id(&token_id) {
        return Err(ApiError::invalid(
            "tokenId",
            "must be a repository token id (rt_ and 32 lowercase hex digits)",
        ));
    }
    let _ = git;
    // Only the owner of the token's project revokes it; any other id is not found.
    if !s.store.owns_repo_token(&a.id, &token_id).await? {
        return Err(ApiError::not_found(format!("repository token {token_id} not found")));
    }
    let fresh = s.store.revoke_repo_token(&token_id, TOKEN_TTL_SECS).await?;
    Ok(Json(Revoked { revoked: fresh }))
}
