//! belay's HTTP API: axum handlers over the store and the Temporal client, bearer-token auth,
//! one error shape, and an OpenAPI document generated from the handlers' annotations.

pub mod artifact_origin;
pub mod auth;
pub mod console;
mod constraints;
pub mod error;
pub mod extract;
pub mod git_http;
pub mod metrics;
mod openapi;
pub use belay_domain::repo_token;
mod routes;

use axum::Router;
use axum::http::StatusCode;
use belay_store::Store;
use std::future::Future;
use temporalio_client::Client;
use tokio::net::TcpListener;
use tower_http::trace::TraceLayer;
use utoipa_axum::router::OpenApiRouter;

pub use openapi::openapi_document;

/// The largest JSON request body the API reads (bytes); past it the answer is 413
/// `body_too_large`, naming this limit.
pub const BODY_LIMIT: usize = 2 * 1024 * 1024;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub temporal: Client,
    /// The smart-HTTP git endpoint, when this API serves one.
    pub git: Option<GitConfig>,
    /// The object store the workers write to: Evidence objects (the browser check's screenshots)
    /// and run artifacts are served from here.
    pub objects: std::sync::Arc<dyn object_store::ObjectStore>,
    /// The bound on failed authentication and whether tokens' last use is tracked.
    pub auth: auth::AuthGuard,
    /// Where run builds are served to be played, and how their URLs are signed; `None` when this
    /// API serves no artifact origin.
    pub artifacts: Option<artifact_origin::ArtifactOrigin>,
    /// Temporal's Web UI for belay's namespace (`http://host:port/namespaces/<ns>`), which the
    /// console links every page's workflows to; `None` when no Web UI is configured.
    pub temporal_ui: Option<String>,
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

/// Every operation of the API, each registered once: the route and its entry in the OpenAPI
/// document come from the same `#[utoipa::path]` annotation.
fn operations() -> OpenApiRouter<AppState> {
    use routes::*;
    OpenApiRouter::with_openapi(openapi::base())
        .routes(utoipa_axum::routes!(health::healthz))
        .routes(utoipa_axum::routes!(health::readyz))
        .routes(utoipa_axum::routes!(openapi::serve))
        .routes(utoipa_axum::routes!(accounts::me))
        .routes(utoipa_axum::routes!(accounts::create, accounts::list))
        .routes(utoipa_axum::routes!(accounts::update))
        .routes(utoipa_axum::routes!(accounts::create_token, accounts::list_tokens))
        .routes(utoipa_axum::routes!(accounts::revoke_token))
        .routes(utoipa_axum::routes!(
            catalogue::ingest_version,
            catalogue::list_test_cases
        ))
        .routes(utoipa_axum::routes!(catalogue::get_test_case))
        .routes(utoipa_axum::routes!(catalogue::get_version, catalogue::update_version))
        .routes(utoipa_axum::routes!(
            catalogue::create_harness,
            catalogue::list_harnesses
        ))
        .routes(utoipa_axum::routes!(catalogue::get_harness, catalogue::update_harness))
        .routes(utoipa_axum::routes!(catalogue::create_model, catalogue::list_models))
        .routes(utoipa_axum::routes!(catalogue::get_model, catalogue::update_model))
        .routes(utoipa_axum::routes!(
            catalogue::create_gg_config,
            catalogue::list_gg_configs
        ))
        .routes(utoipa_axum::routes!(
            catalogue::get_gg_config,
            catalogue::update_gg_config
        ))
        .routes(utoipa_axum::routes!(jobs::launch, jobs::list))
        .routes(utoipa_axum::routes!(jobs::cancel_bulk))
        .routes(utoipa_axum::routes!(jobs::get))
        .routes(utoipa_axum::routes!(jobs::cancel))
        .routes(utoipa_axum::routes!(jobs::attempts))
        .routes(utoipa_axum::routes!(jobs::retry))
        .routes(utoipa_axum::routes!(
            catalogue::create_provider,
            catalogue::list_providers
        ))
        .routes(utoipa_axum::routes!(
            catalogue::get_provider,
            catalogue::update_provider,
            catalogue::delete_provider
        ))
        .routes(utoipa_axum::routes!(jobs::transitions))
        .routes(utoipa_axum::routes!(runs::list))
        .routes(utoipa_axum::routes!(runs::get))
        .routes(utoipa_axum::routes!(runs::review))
        .routes(utoipa_axum::routes!(runs::reviews))
        .routes(utoipa_axum::routes!(runs::review_domains))
        .routes(utoipa_axum::routes!(events::list))
        .routes(utoipa_axum::routes!(projects::create, projects::list))
        .routes(utoipa_axum::routes!(projects::get, projects::delete))
        .routes(utoipa_axum::routes!(repo_tokens::issue))
        .routes(utoipa_axum::routes!(repo_tokens::revoke))
        .routes(utoipa_axum::routes!(changes::create, changes::list))
        .routes(utoipa_axum::routes!(changes::get))
        .routes(utoipa_axum::routes!(changes::cancel))
        .routes(utoipa_axum::routes!(changes::add_task, changes::tasks))
        .routes(utoipa_axum::routes!(changes::start_run))
        .routes(utoipa_axum::routes!(changes::record_change_set))
        .routes(utoipa_axum::routes!(changes::get_change_set))
        .routes(utoipa_axum::routes!(workspaces::get))
        .routes(utoipa_axum::routes!(workspaces::tool))
        .routes(utoipa_axum::routes!(workspaces::publish))
        .routes(utoipa_axum::routes!(workspaces::close))
        .routes(utoipa_axum::routes!(edit_sessions::open))
        .routes(utoipa_axum::routes!(edit_sessions::get))
        .routes(utoipa_axum::routes!(edit_sessions::command))
        .routes(utoipa_axum::routes!(edit_sessions::end))
        .routes(utoipa_axum::routes!(catalogue::delete_gg_config))
        .routes(utoipa_axum::routes!(coverage::create_group, coverage::list_groups))
        .routes(utoipa_axum::routes!(
            coverage::get_group,
            coverage::update_group,
            coverage::delete_group
        ))
        .routes(utoipa_axum::routes!(coverage::create_plan, coverage::list_plans))
        .routes(utoipa_axum::routes!(
            coverage::get_plan,
            coverage::update_plan,
            coverage::delete_plan
        ))
        .routes(utoipa_axum::routes!(coverage::matrix))
        .routes(utoipa_axum::routes!(coverage::open))
        .routes(utoipa_axum::routes!(coverage::topup))
        .routes(utoipa_axum::routes!(coverage::schedule))
        .routes(utoipa_axum::routes!(coverage::queue))
        .routes(utoipa_axum::routes!(coverage::pause))
        .routes(utoipa_axum::routes!(coverage::resume))
        .routes(utoipa_axum::routes!(coverage::halt))
        .routes(utoipa_axum::routes!(coverage::halt_all))
        .routes(utoipa_axum::routes!(coverage::get_settings, coverage::put_settings))
        .routes(utoipa_axum::routes!(candidates::get_policy, candidates::put_policy))
        .routes(utoipa_axum::routes!(candidates::start))
        .routes(utoipa_axum::routes!(candidates::compose, candidates::list))
        .routes(utoipa_axum::routes!(candidates::get))
        .routes(utoipa_axum::routes!(candidates::diff))
        .routes(utoipa_axum::routes!(runs::artifact))
        .routes(utoipa_axum::routes!(runs::artifact_url))
        .routes(utoipa_axum::routes!(promotion::decide))
        .routes(utoipa_axum::routes!(promotion::list))
        .routes(utoipa_axum::routes!(promotion::promote_candidate))
        .routes(utoipa_axum::routes!(promotion::promotability))
        .routes(utoipa_axum::routes!(ladders::create, ladders::list))
        .routes(utoipa_axum::routes!(ladders::get, ladders::update, ladders::delete))
        .routes(utoipa_axum::routes!(ladders::reorder))
        .routes(utoipa_axum::routes!(ladders::steer))
        .routes(utoipa_axum::routes!(ladders::progress))
        .routes(utoipa_axum::routes!(ladders::topup))
        .routes(utoipa_axum::routes!(ladders::enable))
        .routes(utoipa_axum::routes!(ladders::disable))
        .routes(utoipa_axum::routes!(ladders::queue))
        .routes(utoipa_axum::routes!(ladders::set_outcome, ladders::clear_outcome))
        .routes(utoipa_axum::routes!(ladders::halt))
        .routes(utoipa_axum::routes!(ladders::halt_all))
        .routes(utoipa_axum::routes!(conflicts::create))
        .routes(utoipa_axum::routes!(conflicts::receipts))
        .routes(utoipa_axum::routes!(screenshots::list))
        .routes(utoipa_axum::routes!(screenshots::get))
        .routes(utoipa_axum::routes!(evidence::output))
}

/// The smart-HTTP git endpoint of `state`, if it has one.
fn git_routes(state: &AppState) -> Option<Router> {
    state.git.clone().map(|g| {
        let store = state.store.clone();
        git_http::git_router(git_http::GitHttpState {
            root: g.root,
            secret: g.secret.to_vec(),
            revoked: std::sync::Arc::new(move |id: String| {
                let store = store.clone();
                Box::pin(async move {
                    // Fail closed: a token whose revocation cannot be checked is refused.
                    store
                        .repo_token_revoked(&belay_domain::ids::TokenId(id))
                        .await
                        .unwrap_or(true)
                })
            }),
            max_body: g.max_body,
        })
    })
}

/// What a Sandbox sees of the API: `/git/…` only; every other path is 404 in the error schema.
/// Served on the Sandbox network's host address (`belay dev`, `belay api --git-listen`), so that
/// code running in a Sandbox can clone and push with its repository token and reach nothing else.
pub fn git_only_router(state: AppState) -> Router {
    let none = Router::new()
        .fallback(|| async { error::ApiError::not_found("only /git/… is served on the Sandbox network") });
    let router = match git_routes(&state) {
        Some(git) => git.merge(none),
        None => none,
    };
    router.layer(TraceLayer::new_for_http())
}

/// `listener` with Nagle's algorithm off on every connection it accepts. A smart-HTTP fetch
/// writes its pack in many small frames and the client answers each request before the next:
/// with Nagle on, a small last segment waits for the peer's delayed acknowledgement (tens of
/// milliseconds per round trip), which `belay bench source` measured as most of the clone's
/// overhead. Every listener belay serves goes through this.
pub fn without_delay(listener: TcpListener) -> axum::serve::TapIo<TcpListener, fn(&mut tokio::net::TcpStream)> {
    use axum::serve::ListenerExt;
    listener.tap_io(nodelay)
}

fn nodelay(tcp: &mut tokio::net::TcpStream) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::warn!(error = %e, "turning Nagle's algorithm off failed; serving the connection as it is");
    }
}

/// Serves [`git_only_router`] on `listener` until `shutdown` resolves.
pub async fn serve_git_only(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(without_delay(listener), git_only_router(state))
        .with_graceful_shutdown(shutdown)
        .await
}

/// The whole API.
pub fn router(state: AppState) -> Router {
    let git = git_routes(&state);
    let artifact_origin = state.artifacts.as_ref().map(|a| a.public_url.clone());
    let temporal_ui = state.temporal_ui.clone();
    let guard = state.auth.clone();
    let metrics = metrics::metrics_router_with(state.store.clone(), std::sync::Arc::new(move || guard.exposition()));
    let (api, _) = operations().split_for_parts();
    let api = api
        .fallback(|| async { error::ApiError::not_found("no such route") })
        .method_not_allowed_fallback(|| async {
            error::ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this route does not take that method",
            )
        })
        .layer(axum::middleware::from_fn_with_state(state.clone(), audit))
        .layer(TraceLayer::new_for_http())
        .with_state(state);
    // `GET /metrics`: Prometheus's exposition format, outside `/v1` and its bearer token, as a
    // scraper expects (the figures are counts, no names or contents).
    let api = metrics.merge(api);
    // The console's pages and assets: outside `/v1`, no token (its script sends the caller's).
    let api = console::router(artifact_origin.as_deref(), temporal_ui.as_deref()).merge(api);
    match git {
        Some(git) => git.merge(api),
        None => api,
    }
}

/// Serves a request with an actor slot of its own (`belay_store::events`): every event it
/// appends names the account and token that authenticated it. A write that succeeded without
/// appending an event itself (a signal to a workflow, whose worker records the effects) is
/// recorded as an `api.write` event, so that every write through the API names its actor.
async fn audit(
    axum::extract::State(state): axum::extract::State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let slot = std::sync::Arc::new(belay_store::events::ActorSlot::default());
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let response = belay_store::events::with_actor_slot(slot.clone(), next.run(req)).await;
    let write = !matches!(
        method,
        axum::http::Method::GET | axum::http::Method::HEAD | axum::http::Method::OPTIONS
    );
    if write && response.status().is_success() && slot.actor().is_some() && slot.appended() == 0 {
        let status = response.status().as_u16();
        let recorded =
            belay_store::events::with_actor_slot(slot, state.store.record_api_write(method.as_str(), &path, status))
                .await;
        if let Err(e) = recorded {
            tracing::error!(error = %e, http.path = %path, "recording the write's actor failed");
        }
    }
    response
}

/// Serves the API on `listener` until `shutdown` resolves; requests in flight finish first.
/// Each request knows its client's address, which bounds failed authentication.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(
        without_delay(listener),
        router(state).into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
}

#[cfg(test)]
mod tests {
    use axum::serve::Listener;

    /// Every connection a served listener accepts has Nagle's algorithm off.
    #[tokio::test]
    async fn accepted_connections_have_no_delay() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::spawn(tokio::net::TcpStream::connect(addr));
        let mut served = super::without_delay(listener);
        let (stream, _) = served.accept().await;
        assert!(
            stream.nodelay().unwrap(),
            "the accepted connection still has Nagle's algorithm on"
        );
        drop(client.await.unwrap().unwrap());

        // The same listener without the wrapper: the default this guards against.
        let plain = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = plain.local_addr().unwrap();
        let client = tokio::spawn(tokio::net::TcpStream::connect(addr));
        let (stream, _) = plain.accept().await.unwrap();
        assert!(!stream.nodelay().unwrap());
        drop(client.await.unwrap().unwrap());
    }
}
