//! The caller's own account.

use crate::extract::Caller;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountView {
    pub id: belay_domain::ids::AccountId,
    pub name: String,
    pub created_at: i64,
    /// `operator` (may write the catalogue and cancel every account's jobs at once) or `member`.
    #[schema(value_type = String, example = "member")]
    pub role: belay_domain::access::Role,
}

/// Who the token belongs to.
#[utoipa::path(get, path = "/v1/account", tag = "accounts", responses((status = 200, body = AccountView), (status = 401, body = crate::error::ErrorBody)))]
pub async fn me(Caller(a): Caller) -> Json<AccountView> {
    Json(AccountView {
        id: a.id,
        name: a.name,
        created_at: a.created_at,
        role: a.role,
    })
}
