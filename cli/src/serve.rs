//! The production processes: `belay api` and `belay worker`, and the pieces `belay dev` shares
//! with them.

use crate::{Conn, SandboxGitArgs, Storage};
use anyhow::Context;
use belay_store::Store;
use belay_worker::{Pool, WorkerDeps};
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

/// The listeners `belay api` serves beside the API: `/git/` only for Sandboxes, run artifacts
/// only for reviewers' browsers.
pub struct SideListeners<'a> {
    pub git: Option<&'a str>,
    pub artifacts: &'a crate::artifact_origin::ArtifactArgs,
}

pub async fn api(
    conn: &Conn,
    storage: &Storage,
    git_token_secret: Option<String>,
    host: &str,
    port: u16,
    side: SideListeners<'_>,
    auth: &crate::settings::AuthSettings,
) -> anyhow::Result<()> {
    let SideListeners {
        git: git_listen,
        artifacts,
    } = side;
    let checked = conn.check()?;
    // Checked and bound before anything connects: a setting belay cannot use stops it here.
    let artifact_origin = artifacts.open(host, port).await?;
    let objects = storage.objects.open(&storage.data_dir, &checked.http_roots)?;
    let store = Store::connect(&conn.database_url)
        .await
        .context("DATABASE_URL: cannot connect")?;
    let temporal = conn.temporal(&checked, "belay-api").await?;
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
        objects,
        auth: auth.guard()?,
        artifacts: artifact_origin.as_ref().map(|(_, o)| o.clone()),
        temporal_ui: conn.temporal_ui(),
    };
    let artifacts_only = match artifact_origin {
        Some((listener, origin)) => {
            tracing::info!(artifacts.url = %origin.public_url, artifacts.listen = %listener.local_addr()?, "serving run artifacts on an origin of their own");
            Some(tokio::spawn(belay_api::artifact_origin::serve_artifacts(
                listener,
                state.clone(),
                shutdown_signal(),
            )))
        }
        None => None,
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
    if let Some(artifacts_only) = artifacts_only {
        artifacts_only.await??;
    }
    Ok(())
}

/// `belay worker`'s own arguments, besides where the database, Temporal and the files are.
pub struct WorkerSettings<'a> {
    pub pools: &'a str,
    pub claims_per_run: Option<u64>,
    pub top_up_lease: Duration,
    pub sandbox_git: &'a SandboxGitArgs,
    pub outside: &'a crate::settings::Outside,
    pub extras: &'a crate::settings::WorkerExtras,
}

pub async fn worker(conn: &Conn, storage: &Storage, settings: WorkerSettings<'_>) -> anyhow::Result<()> {
    let WorkerSettings {
        pools,
        claims_per_run,
        top_up_lease,
        sandbox_git,
        outside,
        extras,
    } = settings;
    // Everything this worker cannot use stops it here, before it connects or serves anything.
    let pools = Pool::parse_list(pools)?;
    let checked = conn.check()?;
    let objects = storage.objects.open(&storage.data_dir, &checked.http_roots)?;
    let pool_settings = outside.pools(pools.contains(&Pool::Llm), extras.temporal_metrics_addr()?)?;
    let sandbox_config = outside.sandbox.config()?;
    let sandbox = if let Some(pool) = pools.iter().find(|p| matches!(p, Pool::Sandbox | Pool::Browser)) {
        Some(sandbox_deps(pool.name(), sandbox_config.clone(), sandbox_git)?)
    } else {
        None
    };
    let store = Store::connect(&conn.database_url)
        .await
        .context("DATABASE_URL: cannot connect")?;
    let client = conn
        .temporal(&checked, &format!("belay-worker@{}", std::process::id()))
        .await?;
    let deps = WorkerDeps {
        client,
        store,
        objects,
        work_root: storage.data_dir.join("work"),
        sandbox,
        sandbox_config: Some(sandbox_config),
        dispatcher: belay_workflows::dispatcher::DispatcherInput {
            carried_wakes: 0,
            claims_per_run,
        },
        git_root: storage.data_dir.join("git").join(&storage.git_namespace),
        top_up_lease,
        http_roots: checked.http_roots,
        settings: pool_settings,
    };
    // BELAY_METRICS_ADDR: this process's `GET /metrics` (the same figures as the API's).
    if let Some(addr) = extras.metrics_addr() {
        let listener = TcpListener::bind(addr)
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

/// What the sandbox and browser pools need to give Sandboxes their repositories; `pool` names the
/// first of them in `--pools`, for the error.
fn sandbox_deps(
    pool: &str,
    config: belay_sandbox::SandboxConfig,
    git: &SandboxGitArgs,
) -> anyhow::Result<belay_worker::SandboxDeps> {
    Ok(belay_worker::SandboxDeps {
        config,
        git: sandbox_git(pool, git)?,
    })
}

/// Where Sandboxes clone from and the secret their tokens are signed with, refused in one line
/// when either is missing.
pub fn sandbox_git(pool: &str, git: &SandboxGitArgs) -> anyhow::Result<belay_sandbox::git::SandboxGit> {
    let url = git.sandbox_git_url.as_deref().map(str::trim).filter(|u| !u.is_empty());
    let Some(url) = url else {
        anyhow::bail!(
            "BELAY_SANDBOX_GIT_URL is unset: the {pool} pool clones into Sandboxes over the API's /git/ listener as a Sandbox sees it (e.g. http://belay-git:8080)"
        );
    };
    anyhow::ensure!(
        url.starts_with("http://") || url.starts_with("https://"),
        "BELAY_SANDBOX_GIT_URL {url:?}: the API's /git/ listener is an http:// or https:// URL"
    );
    let Some(secret) = git.git_token_secret.as_deref().filter(|s| !s.is_empty()) else {
        anyhow::bail!(
            "BELAY_GIT_TOKEN_SECRET is unset: the {pool} pool signs the Sandboxes' repository tokens with the API's secret"
        );
    };
    Ok(belay_sandbox::git::SandboxGit {
        url: url.trim_end_matches('/').to_owned(),
        token_secret: secret.as_bytes().to_vec(),
    })
}
