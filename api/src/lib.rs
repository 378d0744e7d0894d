//! belay's HTTP API: axum handlers over the store and the Temporal client, bearer-token auth,
//! one error shape, and an OpenAPI document generated from the handlers' annotations.

pub mod error;
pub mod extract;
pub mod git_http;
mod openapi;
pub use belay_domain::repo_token;
mod routes;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::{get, post};
use belay_store::Store;
use std::future::Future;
use temporalio_client::Client;
use tokio::net::TcpListener;
use tower_http::trace::TraceLayer;

pub use openapi::openapi_document;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub temporal: Client,
    /// The smart-HTTP git endpoint, when this API serves one.
    pub git: Option<GitConfig>,
}

/// Where the bare repositories are and how repository tokens are signed. Revocations live in the
/// database, so every API process (and the workers that revoke after use) share them.
#[derive(Clone)]
pub struct GitConfig {
    pub root: std::path::PathBuf,
    pub secret: std::sync::Arc<Vec<u8>>,
    pub max_body: usize,
}

impl GitConfig {
    pub fn new(root: std::path::PathBuf, secret: Vec<u8>) -> Self {
        Self {
            root,
            secret: std::sync::Arc::new(secret),
            max_body: 512 * 1024 * 1024,
        }
    }
}

/// The whole API.
pub fn router(state: AppState) -> Router {
    use routes::*;
    let git = state.git.clone().map(|g| {
        let store = state.store.clone();
        git_http::git_router(git_http::GitHttpState {
            root: g.root,
            secret: g.secret.to_vec(),
            revoked: std::sync::Arc::new(move |id: String| {
                let store = store.clone();
                Box::pin(async move {
                    // Fail closed: a token whose revocation cannot be checked is refused.
                    store.repo_token_revoked(&id).await.unwrap_or(true)
                })
            }),
            max_body: g.max_body,
        })
    });
    let api = Router::new()
        .route("/v1/healthz", get(health::healthz))
        .route("/v1/readyz", get(health::readyz))
        .route("/v1/openapi.json", get(openapi::serve))
        .route("/v1/account", get(accounts::me))
        .route(
            "/v1/test-cases",
            post(catalogue::ingest_version).get(catalogue::list_test_cases),
        )
        .route("/v1/test-cases/{slug}", get(catalogue::get_test_case))
        .route(
            "/v1/test-cases/{slug}/versions/{version}",
            get(catalogue::get_version).put(catalogue::update_version),
        )
        .route(
            "/v1/harnesses",
            post(catalogue::create_harness).get(catalogue::list_harnesses),
        )
        .route(
            "/v1/harnesses/{name}",
            get(catalogue::get_harness).patch(catalogue::update_harness),
        )
        .route("/v1/models", post(catalogue::create_model).get(catalogue::list_models))
        .route(
            "/v1/models/{id}",
            get(catalogue::get_model).put(catalogue::update_model),
        )
        .route(
            "/v1/gg-configs",
            post(catalogue::create_gg_config).get(catalogue::list_gg_configs),
        )
        .route(
            "/v1/gg-configs/{id}",
            get(catalogue::get_gg_config).patch(catalogue::update_gg_config),
        )
        .route("/v1/jobs", post(jobs::launch).get(jobs::list))
        .route("/v1/jobs/cancel", post(jobs::cancel_bulk))
        .route("/v1/jobs/{id}", get(jobs::get))
        .route("/v1/jobs/{id}/cancel", post(jobs::cancel))
        .route("/v1/job-transitions", get(jobs::transitions))
        .route("/v1/runs", get(runs::list))
        .route("/v1/runs/{id}", get(runs::get))
        .route("/v1/runs/{id}/review", post(runs::review))
        .route("/v1/runs/{id}/reviews", get(runs::reviews))
        .route("/v1/events", get(events::list))
        .route("/v1/projects", post(projects::create).get(projects::list))
        .route("/v1/projects/{id}", get(projects::get).delete(projects::delete))
        .route("/v1/projects/{id}/repo-tokens", post(repo_tokens::issue))
        .route("/v1/repo-tokens/{token_id}/revoke", post(repo_tokens::revoke))
        .route("/v1/projects/{id}/changes", post(changes::create).get(changes::list))
        .route("/v1/changes/{id}", get(changes::get))
        .route("/v1/changes/{id}/tasks", post(changes::add_task).get(changes::tasks))
        .route("/v1/tasks/{id}/runs", post(changes::start_run))
        .route("/v1/task-runs/{id}/change-set", post(changes::record_change_set))
        .route("/v1/change-sets/{id}", get(changes::get_change_set))
        .route("/v1/task-runs/{id}/workspace", get(workspaces::get))
        .route("/v1/task-runs/{id}/workspace/tools", post(workspaces::tool))
        .route("/v1/task-runs/{id}/workspace/publish", post(workspaces::publish))
        .route("/v1/task-runs/{id}/workspace/close", post(workspaces::close))
        .route("/v1/projects/{id}/edit-sessions", post(edit_sessions::open))
        .route("/v1/edit-sessions/{id}", get(edit_sessions::get))
        .route("/v1/edit-sessions/{id}/commands", post(edit_sessions::command))
        .route("/v1/edit-sessions/{id}/end", post(edit_sessions::end))
        .fallback(|| async { error::ApiError::not_found("no such route") })
        .method_not_allowed_fallback(|| async {
            error::ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this route does not take that method",
            )
        })
        .layer(TraceLayer::new_for_http())
        .with_state(state);
    match git {
        Some(git) => git.merge(api),
        None => api,
    }
}

/// Serves the API on `listener` until `shutdown` resolves; requests in flight finish first.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}
