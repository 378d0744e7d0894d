//! Repository-token revocations recorded in the database, where every API process checks them:
//! the store side of the Sandbox's issue → use → revoke lifecycle (`belay_sandbox::git`).

use belay_domain::ids::TokenId;
use belay_domain::repo_token::TOKEN_TTL_SECS;
use belay_store::Store;

#[derive(Clone)]
pub struct StoreRevocations(pub Store);

impl belay_sandbox::git::Revocations for StoreRevocations {
    async fn revoke(&self, token_id: &str) -> Result<(), String> {
        self.0
            .revoke_repo_token(&TokenId::from(token_id), TOKEN_TTL_SECS)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}
