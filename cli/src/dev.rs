//! `belay dev`: everything on one machine in one process tree. Starts (or reuses) the Temporal
//! dev server with its SQLite file in the data dir, migrates belay's SQLite database, creates the
//! bootstrap account on first start, runs every worker pool and the API in this process, prints
//! where everything is, and stops it all on SIGINT or SIGTERM. A second start on the same data
//! dir resumes with all state.

use crate::objects::dir_store;
use crate::serve::shutdown_signal;
use crate::temporal::{self, DevServer};
use anyhow::Context;
use belay_store::Store;
use belay_worker::{Pool, WorkerDeps};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

#[derive(Debug, Clone, clap::Args)]
pub struct DevArgs {
    /// Where belay keeps its database, Temporal's database, objects and tools.
    #[arg(long, env = "BELAY_DATA_DIR", default_value = ".belay")]
    pub data_dir: PathBuf,
    /// API port.
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Temporal frontend port (an existing server there is reused).
    #[arg(long, default_value_t = 7233)]
    pub temporal_port: u16,
    /// Temporal Web UI port.
    #[arg(long, default_value_t = 8233)]
    pub ui_port: u16,
    /// Port of the artifact origin, where run builds are served to be played in the console
    /// (0: any free port; the console learns it from the API).
    #[arg(long, default_value_t = 0)]
    pub artifact_port: u16,
    #[command(flatten)]
    pub artifact_ttl: crate::artifact_origin::ArtifactTtl,
    /// Seed a demo catalogue (a case, a script harness, a priced model).
    #[arg(long)]
    pub demo: bool,
    #[command(flatten)]
    pub http_tls: crate::tls::HttpTlsArgs,
    #[command(flatten)]
    pub outside: crate::settings::Outside,
    #[command(flatten)]
    pub auth: crate::settings::AuthSettings,
}

const TOKEN_FILE: &str = "dev-token";
/// belay's SQLite database, in the data dir.
const DATABASE_FILE: &str = "belay.db";

fn database_url(data_dir: &Path) -> String {
    format!("sqlite:{}", data_dir.join(DATABASE_FILE).display())
}

/// The database of the `belay dev` whose data dir is `data_dir`, which must have started once.
pub fn existing_database_url(data_dir: &Path) -> anyhow::Result<String> {
    let file = data_dir.join(DATABASE_FILE);
    anyhow::ensure!(
        file.is_file(),
        "{} has no belay dev database ({DATABASE_FILE}); start `belay dev --data-dir {}` once first",
        data_dir.display(),
        data_dir.display()
    );
    Ok(database_url(data_dir))
}

pub async fn run(args: DevArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let shutdown = shutdown_signal();
    std::fs::create_dir_all(&args.data_dir).with_context(|| format!("creating {}", args.data_dir.display()))?;
    let data_dir = std::fs::canonicalize(&args.data_dir)?;

    let server = if temporal::listening(args.temporal_port) {
        eprintln!("belay: reusing the Temporal server on port {}", args.temporal_port);
        None
    } else {
        let bin = temporal::find_or_install(&data_dir.join("tools")).await?;
        Some(DevServer::start(&bin, &data_dir, args.temporal_port, args.ui_port).await?)
    };
    // A signal that arrives during startup is kept by its handler and stops belay as soon as
    // the pools run; either way the dev server is stopped below.
    let result = run_with_server(&args, &data_dir, started, shutdown).await;
    if let Some(server) = server {
        server.stop().await;
    }
    result
}

async fn run_with_server(
    args: &DevArgs,
    data_dir: &Path,
    started: Instant,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let address = format!("127.0.0.1:{}", args.temporal_port);
    let client = connect_with_retry(&address).await?;

    let database_url = database_url(data_dir);
    let store = Store::connect(&database_url).await?;
    store.migrate().await?;
    let token = bootstrap_token(&store, data_dir).await?;
    if args.demo {
        crate::demo::seed(&store).await?;
    }

    let listener = TcpListener::bind(("127.0.0.1", args.port))
        .await
        .with_context(|| format!("binding 127.0.0.1:{}", args.port))?;
    let api_url = format!("http://{}", listener.local_addr()?);
    let secret = git_secret(data_dir)?;
    let sandbox = dev_sandbox(args.outside.sandbox.config(), listener.local_addr()?.port(), &secret).await;
    let objects = dir_store(&data_dir.join("objects"))?;
    let http_roots = args.http_tls.extra_roots()?;
    let deps = WorkerDeps {
        client: client.clone(),
        store: store.clone(),
        objects: objects.clone(),
        work_root: data_dir.join("work"),
        dispatcher: Default::default(),
        sandbox: sandbox.as_ref().ok().map(|(deps, _)| deps.clone()),
        sandbox_config: args.outside.sandbox.config().ok(),
        git_root: data_dir.join("git").join("belay"),
        top_up_lease: belay_worker::DEFAULT_TOP_UP_LEASE,
        http_roots,
        settings: args.outside.pools(true, None)?,
    };

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    // Run builds on an origin of their own: another port, framed by this console only.
    let artifact_listener = TcpListener::bind(("127.0.0.1", args.artifact_port))
        .await
        .with_context(|| format!("binding 127.0.0.1:{} (--artifact-port)", args.artifact_port))?;
    let artifact_origin = crate::artifact_origin::artifact_origin(
        artifact_listener.local_addr()?,
        None,
        &crate::artifact_origin::default_console_origins("127.0.0.1", listener.local_addr()?.port())?,
        dev_secret(data_dir, "artifact-url-secret")?,
        &args.artifact_ttl,
    )?;
    let artifacts_url = artifact_origin.public_url.clone();
    let state = belay_api::AppState {
        store,
        temporal: client,
        git: Some(belay_api::GitConfig::new(data_dir.join("git").join("belay"), secret)),
        objects: dir_store(&data_dir.join("objects"))?,
        auth: args.auth.guard()?,
        artifacts: Some(artifact_origin),
        temporal_ui: Some(belay_api::console::temporal_ui_for(
            &format!("http://127.0.0.1:{}", args.ui_port),
            "default",
        )),
    };
    let artifacts = tokio::spawn(belay_api::artifact_origin::serve_artifacts(
        artifact_listener,
        state.clone(),
        stopped(stop_rx.clone()),
    ));
    let sandbox_line = match sandbox {
        Ok((deps, gateway)) => {
            // The same API on the Sandbox network's host address: how Sandboxes reach git.
            // The Sandbox network sees /git only.
            tokio::spawn(belay_api::serve_git_only(
                gateway,
                state.clone(),
                stopped(stop_rx.clone()),
            ));
            format!("on (network {}, git at {})", deps.config.network, deps.git.url)
        }
        Err(why) => format!("off: {why}"),
    };
    let api = tokio::spawn(belay_api::serve(listener, state, stopped(stop_rx.clone())));
    let signals = async move {
        shutdown.await;
        eprintln!("belay: stopping");
        let _ = stop_tx.send(true);
    };
    println!("belay dev is ready in {:.1} s", started.elapsed().as_secs_f64());
    println!("  API:          {api_url}");
    println!("  Console:      {api_url}/ (sign in with the token below)");
    println!("  Temporal UI:  http://127.0.0.1:{}", args.ui_port);
    println!("  Temporal:     {address}");
    println!("  Data:         {}", data_dir.display());
    println!("  Sandboxes:    {sandbox_line}");
    println!("  Artifacts:    {artifacts_url} (run builds, played in the console)");
    println!("  Metrics:      {api_url}/metrics (Prometheus; the in-process workers' figures too)");
    println!("  Token:        {token}");
    if args.demo {
        println!("  Try:          curl -s -H \"Authorization: Bearer {token}\" -X POST {api_url}/v1/jobs \\");
        println!(
            "                  -d '{{\"case\":{{\"slug\":\"hello\",\"version\":\"1.0.0\",\"variant\":\"default\"}},\"combination\":{{\"kind\":\"harness\",\"harness\":\"script\",\"model\":\"demo-model\"}}}}'"
        );
    }
    let pools = tokio::join!(
        belay_worker::run_pools(&Pool::ALL, deps, stopped(stop_rx.clone())),
        signals
    )
    .0;
    pools?;
    api.await??;
    artifacts.await??;
    Ok(())
}

/// The sandbox pool's configuration for `belay dev`, and a listener on the Sandbox network's host
/// address (same port as the API) through which Sandboxes reach git; or why Sandboxes are off
/// (no Docker Engine, say): everything else works without them.
async fn dev_sandbox(
    config: Result<belay_sandbox::SandboxConfig, belay_sandbox::SandboxError>,
    port: u16,
    secret: &[u8],
) -> Result<(belay_worker::SandboxDeps, TcpListener), String> {
    use belay_sandbox::Sandboxes;
    let config = config.map_err(|e| e.to_string())?;
    let sandboxes = Sandboxes::connect(config.clone())
        .await
        .map_err(|e| format!("no Docker Engine ({e})"))?;
    let gateway = sandboxes.network_gateway().await.map_err(|e| e.to_string())?;
    let listener = TcpListener::bind((gateway.as_str(), port))
        .await
        .map_err(|e| format!("cannot listen on {gateway}:{port} ({e})"))?;
    Ok((
        belay_worker::SandboxDeps {
            config,
            git: belay_sandbox::git::SandboxGit {
                url: format!("http://{gateway}:{port}"),
                token_secret: secret.to_vec(),
            },
        },
        listener,
    ))
}

async fn connect_with_retry(address: &str) -> anyhow::Result<temporalio_client::Client> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match belay_client::connect(address, "default", "belay-dev").await {
            Ok(c) => return Ok(c),
            Err(e) if Instant::now() > deadline => return Err(e.into()),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// The bootstrap account's token: created on first start and kept in the data dir (mode 0600),
/// since only its hash is in the database.
async fn bootstrap_token(store: &Store, data_dir: &Path) -> anyhow::Result<String> {
    let path = data_dir.join(TOKEN_FILE);
    if let Ok(t) = std::fs::read_to_string(&path) {
        let t = t.trim().to_string();
        if store.authenticate(&t).await?.is_some() {
            return Ok(t);
        }
    }
    let (_, token) = store
        .create_account_with_role("dev", belay_domain::access::Role::Operator)
        .await?;
    write_private(&path, &token)?;
    Ok(token)
}

/// The secret that signs repository tokens: made once, kept in the data dir (mode 0600).
fn git_secret(data_dir: &Path) -> anyhow::Result<Vec<u8>> {
    dev_secret(data_dir, "git-token-secret")
}

/// A signing secret kept in the data dir as `name` (mode 0600), made on first start.
fn dev_secret(data_dir: &Path, name: &str) -> anyhow::Result<Vec<u8>> {
    let path = data_dir.join(name);
    if let Ok(s) = std::fs::read_to_string(&path)
        && s.trim().len() >= 32
    {
        return Ok(s.trim().as_bytes().to_vec());
    }
    let secret = format!("{}{}", uuid_hex(), uuid_hex());
    write_private(&path, &secret)?;
    Ok(secret.into_bytes())
}

fn uuid_hex() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

fn write_private(path: &Path, contents: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(contents.as_bytes())?;
    Ok(())
}
