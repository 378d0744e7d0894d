//! The production processes: `belay api` and `belay worker`, and the pieces `belay dev` shares
//! with them.

use crate::{Conn, Storage};
use anyhow::Context;
use belay_store::Store;
use belay_worker::{Pool, WorkerDeps};
use object_store::ObjectStore;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// Resolves when the process receives SIGINT or SIGTERM. The handlers are installed when this is
/// called, not when the future is first polled, so a signal during startup is not lost (it would
/// otherwise kill the process and orphan its children).
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    async move {
        tokio::select! {
            _ = term.recv() => {},
            _ = int.recv() => {},
        }
    }
}

pub fn object_store_at(dir: &Path) -> anyhow::Result<Arc<dyn ObjectStore>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir)?))
}

pub async fn api(
    conn: &Conn,
    storage: &Storage,
    git_token_secret: Option<String>,
    host: &str,
    port: u16,
    git_listen: Option<&str>,
) -> anyhow::Result<()> {
    let store = Store::connect(&conn.database_url).await?;
    let temporal = belay_client::connect(&conn.temporal_address, &conn.namespace, "belay-api").await?;
    let listener = TcpListener::bind((host, port))
        .await
        .with_context(|| format!("binding {host}:{port}"))?;
    tracing::info!(api.url = %format!("http://{}", listener.local_addr()?), "API listening");
    let state = belay_api::AppState {
        store,
        temporal,
        git: git_token_secret.map(|secret| {
            belay_api::GitConfig::new(
                storage.data_dir.join("git").join(&storage.git_namespace),
                secret.into_bytes(),
            )
        }),
        objects: object_store_at(
            &storage
                .object_store
                .clone()
                .unwrap_or_else(|| storage.data_dir.join("objects")),
        )?,
    };
    let git_only = match git_listen {
        Some(addr) => {
            let git_listener = TcpListener::bind(addr)
                .await
                .with_context(|| format!("binding {addr} (BELAY_API_GIT_LISTEN)"))?;
            tracing::info!(git.url = %format!("http://{}", git_listener.local_addr()?), "serving /git only for Sandboxes");
            Some(tokio::spawn(belay_api::serve_git_only(
                git_listener,
                state.clone(),
                shutdown_signal(),
            )))
        }
        None => None,
    };
    belay_api::serve(listener, state, shutdown_signal()).await?;
    if let Some(git_only) = git_only {
        git_only.await??;
    }
    Ok(())
}

pub async fn worker(
    conn: &Conn,
    storage: &Storage,
    pools: &str,
    claims_per_run: Option<u64>,
    top_up_lease: Duration,
) -> anyhow::Result<()> {
    let pools = Pool::parse_list(pools)?;
    let store = Store::connect(&conn.database_url).await?;
    let client = belay_client::connect(
        &conn.temporal_address,
        &conn.namespace,
        &format!("belay-worker@{}", std::process::id()),
    )
    .await?;
    let objects = object_store_at(
        &storage
            .object_store
            .clone()
            .unwrap_or_else(|| storage.data_dir.join("objects")),
    )?;
    let deps = WorkerDeps {
        client,
        store,
        objects,
        work_root: storage.data_dir.join("work"),
        sandbox: if pools.contains(&Pool::Sandbox) || pools.contains(&Pool::Browser) {
            belay_worker::SandboxDeps::from_env()?
        } else {
            None
        },
        dispatcher: belay_workflows::dispatcher::DispatcherInput {
            carried_wakes: 0,
            claims_per_run,
        },
        git_root: storage.data_dir.join("git").join(&storage.git_namespace),
        top_up_lease,
    };
    // BELAY_METRICS_ADDR: this process's `GET /metrics` (the same figures as the API's).
    if let Some(addr) = std::env::var("BELAY_METRICS_ADDR").ok().filter(|a| !a.is_empty()) {
        let listener = TcpListener::bind(addr.as_str())
            .await
            .with_context(|| format!("binding {addr} (BELAY_METRICS_ADDR)"))?;
        tracing::info!(metrics.url = %format!("http://{}/metrics", listener.local_addr()?), "worker metrics");
        tokio::spawn(belay_api::metrics::serve_metrics(
            listener,
            deps.store.clone(),
            shutdown_signal(),
        ));
    }
    belay_worker::run_pools(&pools, deps, shutdown_signal()).await
}
