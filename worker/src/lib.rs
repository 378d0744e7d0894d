//! Hosts belay's workflows and activity pools, each on its own task queue.
//!
//! `belay worker --pools git,sandbox` serves only those queues, so each pool scales on its own;
//! `belay dev` runs every pool in its own process.

/// Replaying recorded histories (kept in `belay-client`; named here for the worker's callers).
pub use belay_client::replay;

use anyhow::{Context, bail};
use belay_activities::browser::BrowserActivities;
use belay_activities::git::GitActivities;
use belay_activities::harness::HarnessActivities;
use belay_activities::llm::LlmActivities;
use belay_activities::revocations::StoreRevocations;
use belay_activities::sandbox::SandboxActivities;
use belay_activities::sandbox_leases::StoreLeases;
use belay_activities::store::{LocalStoreActivities, StoreActivities};
use belay_activities::temporal::TemporalActivities;
use belay_client::ensure_dispatcher;
use belay_git::GitService;
use belay_git::source_objects::SourceObjects;
use belay_sandbox::git::SandboxGit;
use belay_sandbox::{SandboxConfig, Sandboxes};
use belay_store::Store;
use belay_workflows::queues;
use object_store::ObjectStore;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use temporalio_client::Client;
use temporalio_sdk::runtime::RuntimeOptions;
use temporalio_sdk::{Runtime, Worker, WorkerOptions};
use tracing::{info, warn};

/// A worker pool, by its `--pools` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pool {
    Workflows,
    Db,
    Git,
    Sandbox,
    Llm,
    Browser,
    Harness,
}

impl Pool {
    pub const ALL: [Pool; 7] = [
        Pool::Workflows,
        Pool::Db,
        Pool::Git,
        Pool::Sandbox,
        Pool::Llm,
        Pool::Browser,
        Pool::Harness,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Pool::Workflows => "workflows",
            Pool::Db => "db",
            Pool::Git => "git",
            Pool::Sandbox => "sandbox",
            Pool::Llm => "llm",
            Pool::Browser => "browser",
            Pool::Harness => "harness",
        }
    }

    pub fn task_queue(self) -> &'static str {
        queues::POOLS
            .iter()
            .find(|(n, _)| *n == self.name())
            .map(|(_, q)| *q)
            .expect("every pool has a queue")
    }

    /// Parses a comma-separated `--pools` list.
    pub fn parse_list(s: &str) -> anyhow::Result<Vec<Pool>> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some(p) = Pool::ALL.into_iter().find(|p| p.name() == part) else {
                bail!("--pools: unknown pool {part:?}; expected some of workflows,db,git,sandbox,llm,browser,harness");
            };
            if !out.contains(&p) {
                out.push(p);
            }
        }
        if out.is_empty() {
            bail!("--pools: name at least one pool");
        }
        Ok(out)
    }
}

/// What the pools need.
/// How long a top-up's claim holds by default ([`belay_store::coverage::TOP_UP_LEASE_MS`]).
pub const DEFAULT_TOP_UP_LEASE: Duration = Duration::from_millis(belay_store::coverage::TOP_UP_LEASE_MS as u64);

pub struct WorkerDeps {
    pub client: Client,
    pub store: Store,
    pub objects: Arc<dyn ObjectStore>,
    /// Scratch space for harness adapters.
    pub work_root: PathBuf,
    /// Bare repositories: `<data>/git/<namespace>`.
    pub git_root: PathBuf,
    /// How the dispatcher starts, if this worker is the one to start it.
    pub dispatcher: belay_workflows::dispatcher::DispatcherInput,
    /// The Sandbox pool's configuration; `None` leaves that pool without activities.
    pub sandbox: Option<SandboxDeps>,
    /// The Docker side of the Sandbox configuration, for the harness pool's adapters marked
    /// `sandbox` when `sandbox` is `None`; with neither, those adapters fail.
    pub sandbox_config: Option<SandboxConfig>,
    /// How long a top-up's claim holds its plan or ladder when the top-up never releases it.
    pub top_up_lease: Duration,
    /// CA certificates (DER) every outbound HTTPS client trusts besides the platform's roots
    /// (BELAY_CA_FILE): the model API's, the browser pool's fetches.
    pub http_roots: Vec<Vec<u8>>,
    /// What the pools' outside systems are configured with, read once by the `belay` command.
    pub settings: PoolSettings,
}

/// The pools' settings for the systems outside belay, as the `belay` command read them (flags and
/// their environment variables, once, at start): nothing below reads the environment.
#[derive(Debug, Clone)]
pub struct PoolSettings {
    /// The llm pool's model client (BELAY_ANTHROPIC_*); required when this worker runs that pool.
    pub llm: Option<belay_llm::LlmConfig>,
    /// The browser pool's Chromium (BELAY_CHROMIUM, BELAY_BROWSER_SESSION_MS).
    pub browser: belay_browser::BrowserConfig,
    /// The browser meter's daily seconds per project (BROWSER_DAILY_SECONDS, parsed).
    pub browser_daily_seconds: u64,
    /// Where the Temporal SDK serves its worker metrics (BELAY_TEMPORAL_METRICS_ADDR).
    pub temporal_metrics_addr: Option<std::net::SocketAddr>,
    /// The worker's variables a harness adapter inherits.
    pub adapter_env: belay_harness::InheritedEnv,
}

impl Default for PoolSettings {
    /// Every setting unset: no model client, Chromium where the distribution puts it, the
    /// browser meter's default day, no SDK metrics, nothing inherited.
    fn default() -> Self {
        Self {
            llm: None,
            browser: belay_browser::BrowserConfig::default(),
            browser_daily_seconds: belay_domain::browser::parse_browser_daily_seconds(None),
            temporal_metrics_addr: None,
            adapter_env: belay_harness::InheritedEnv::default(),
        }
    }
}

/// What the `sandbox` pool needs: the Docker configuration, and where (and with which token key)
/// a Sandbox reaches the git service.
#[derive(Clone)]
pub struct SandboxDeps {
    pub config: SandboxConfig,
    pub git: SandboxGit,
}

/// `config` with its deployment: BELAY_DEPLOYMENT when set, else the name the database's first
/// migration made, so every worker on one database (the harness, sandbox and browser pools alike)
/// labels its containers the same and counts only those.
async fn with_deployment(mut config: SandboxConfig, store: &Store) -> anyhow::Result<SandboxConfig> {
    if config.deployment.is_none() {
        config.deployment = Some(
            store
                .deployment_name()
                .await
                .context("reading the deployment's name from the database")?,
        );
    }
    Ok(config)
}

/// Removes the Sandboxes the deployment's lease book says have been idle for two minutes
/// (BELAY_SANDBOX_IDLE_SECONDS) with nothing running, whichever worker used them; every 15 s for
/// as long as the process runs.
async fn reap_idle(sandboxes: Arc<Sandboxes>) {
    let idle = sandboxes.config().idle_after;
    let mut tick = tokio::time::interval(sandboxes.config().reap_every());
    loop {
        tick.tick().await;
        match sandboxes.reap_idle(std::time::Instant::now(), idle).await {
            Ok(removed) if !removed.is_empty() => info!(projects = ?removed, "removed idle Sandboxes"),
            Ok(_) => {}
            Err(e) => warn!(error = %e, "reaping idle Sandboxes failed"),
        }
    }
}

/// The Temporal SDK runtime's options: with a metrics address (BELAY_TEMPORAL_METRICS_ADDR), the
/// SDK's own worker metrics (task slots, poll and schedule-to-start latencies, sticky cache, …) in
/// Prometheus's format on that address's `/metrics`, served by the SDK's exporter.
fn runtime_options(metrics: Option<std::net::SocketAddr>) -> anyhow::Result<temporalio_sdk::runtime::RuntimeOptions> {
    let Some(addr) = metrics else {
        return RuntimeOptions::builder().build().map_err(anyhow::Error::msg);
    };
    let started = temporalio_common::telemetry::start_prometheus_metric_exporter(
        temporalio_common::telemetry::PrometheusExporterOptions::builder()
            .socket_addr(addr)
            .build(),
    )?;
    info!(metrics.url = %format!("http://{}/metrics", started.bound_addr), "Temporal SDK worker metrics");
    let meter: Arc<dyn temporalio_common::telemetry::metrics::CoreMeter> = started.meter;
    let telemetry = temporalio_common::telemetry::TelemetryOptions::builder()
        .metrics(meter)
        .build();
    RuntimeOptions::builder()
        .telemetry_options(telemetry)
        .build()
        .map_err(anyhow::Error::msg)
}

/// Runs the given pools until `shutdown` resolves, then drains them.
///
/// Temporal workers are not `Send`, so this future must be awaited on the task that owns it
/// (the binary's main task), not spawned.
pub async fn run_pools(pools: &[Pool], deps: WorkerDeps, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let runtime = Runtime::from_current_tokio(runtime_options(deps.settings.temporal_metrics_addr)?)?;
    let mut workers = Vec::new();
    for &pool in pools {
        let Some(options) = pool_options(pool, &deps).await? else {
            warn!(
                pool = pool.name(),
                "this pool has no activities yet; not polling its queue"
            );
            continue;
        };
        workers.push((pool, Worker::new(&runtime, deps.client.clone(), options)?));
    }
    if pools.contains(&Pool::Workflows) {
        ensure_dispatcher(&deps.client, deps.dispatcher.clone())
            .await
            .context("starting the dispatcher")?;
        belay_client::ensure_forks_sweep_schedule(&deps.client)
            .await
            .context("creating the forks-sweep schedule")?;
    }
    info!(pools = ?workers.iter().map(|(p, _)| p.name()).collect::<Vec<_>>(), "worker pools started");
    let stops: Vec<_> = workers.iter().map(|(_, w)| w.shutdown_handle()).collect();
    let runs = futures::future::join_all(workers.iter_mut().map(|(_, w)| w.run()));
    let stopper = async {
        shutdown.await;
        info!("stopping worker pools");
        for stop in &stops {
            stop();
        }
        std::future::pending::<()>().await
    };
    tokio::select! {
        results = runs => {
            for r in results {
                r?;
            }
        }
        _ = stopper => {}
    }
    Ok(())
}

/// The worker options of one pool: its task queue, with the activities (and for `workflows` the
/// workflows) it serves over `deps`; `None` for a pool with nothing to serve here (the sandbox
/// and browser pools without a Sandbox configuration).
async fn pool_options(pool: Pool, deps: &WorkerDeps) -> anyhow::Result<Option<WorkerOptions>> {
    let base = WorkerOptions::new(pool.task_queue()).graceful_shutdown_period(Duration::from_secs(5));
    Ok(Some(match pool {
        // The run lane's store steps (claim, start, mark running, complete, fail), the
        // dispatcher's run starts and promotion's store steps (facts, compare-and-swap,
        // released) run as local activities of the workflow worker.
        Pool::Workflows => belay_workflows::register_every_workflow!(base)?
            .register_activities(LocalStoreActivities(Arc::new(store_activities(deps))))
            .register_activities(TemporalActivities {
                client: deps.client.clone(),
                store: deps.store.clone(),
            })
            .build(),
        Pool::Db => base.register_activities(store_activities(deps)).build(),
        Pool::Harness => base.register_activities(harness_activities(deps).await?).build(),
        Pool::Git => {
            std::fs::create_dir_all(&deps.git_root).with_context(|| format!("creating {}", deps.git_root.display()))?;
            base.register_activities(GitActivities {
                git: GitService::new(deps.git_root.clone()),
                sources: SourceObjects::new(deps.objects.clone()),
            })
            .build()
        }
        Pool::Sandbox if deps.sandbox.is_some() => {
            let sandbox = deps.sandbox.clone().expect("checked");
            let config = with_deployment(sandbox.config, &deps.store).await?;
            info!(deployment = ?config.deployment, "the sandbox pool's containers carry this deployment label");
            let leases = Arc::new(StoreLeases::new(deps.store.clone()));
            let sandboxes = Arc::new(
                Sandboxes::connect_with_leases(config, leases)
                    .await
                    .context("connecting to the Docker Engine for the sandbox pool")?,
            );
            tokio::spawn(reap_idle(sandboxes.clone()));
            base.register_activities(sandbox_activities(deps, sandbox.git, sandboxes))
                .build()
        }
        Pool::Llm => {
            let mut config = deps
                .settings
                .llm
                .clone()
                .context("the llm pool has no model client configuration")?;
            config.extra_roots = deps.http_roots.clone();
            if config.api_key.is_none() {
                warn!("BELAY_ANTHROPIC_API_KEY is unset: every model call is refused before it is made");
            }
            base.register_activities(LlmActivities {
                store: deps.store.clone(),
                client: Arc::new(belay_llm::AnthropicClient::new(config)?),
            })
            .build()
        }
        Pool::Browser if deps.sandbox.is_some() => {
            let sandbox = deps.sandbox.clone().expect("checked");
            base.register_activities(browser_activities(deps, sandbox).await?)
                .build()
        }
        Pool::Sandbox | Pool::Browser => return Ok(None),
    }))
}

/// The harness pool's activities: the adapters' scratch space, and the Docker Engine for the
/// adapters marked `sandbox` (without one, those adapters fail).
async fn harness_activities(deps: &WorkerDeps) -> anyhow::Result<HarnessActivities> {
    std::fs::create_dir_all(&deps.work_root).with_context(|| format!("creating {}", deps.work_root.display()))?;
    // Adapters marked `sandbox` need only the Docker side of the configuration.
    let config = match &deps.sandbox {
        Some(s) => Some(s.config.clone()),
        None => deps.sandbox_config.clone(),
    };
    let sandbox = match config {
        Some(config) => {
            let config = with_deployment(config, &deps.store).await?;
            match Sandboxes::connect(config).await {
                Ok(s) => Some(Arc::new(s)),
                Err(e) => {
                    warn!(error = %e, "no Docker Engine for the harness pool: adapters marked sandbox will fail");
                    None
                }
            }
        }
        None => None,
    };
    Ok(HarnessActivities {
        objects: deps.objects.clone(),
        work_root: deps.work_root.clone(),
        sandbox,
        env: deps.settings.adapter_env.clone(),
        worker: belay_activities::harness::worker_name(),
    })
}

/// The browser pool's activities: the project's Sandbox (the checkout and the dev command) and
/// headless Chromium (`BELAY_CHROMIUM`), metered by `BROWSER_DAILY_SECONDS`.
async fn browser_activities(deps: &WorkerDeps, sandbox: SandboxDeps) -> anyhow::Result<BrowserActivities> {
    let config = with_deployment(sandbox.config, &deps.store).await?;
    let leases = Arc::new(StoreLeases::new(deps.store.clone()));
    let sandboxes = Arc::new(
        Sandboxes::connect_with_leases(config, leases)
            .await
            .context("connecting to the Docker Engine for the browser pool")?,
    );
    let mut browser = deps.settings.browser.clone();
    browser.extra_roots = deps.http_roots.clone();
    if !browser.chromium.exists() {
        warn!(chromium = %browser.chromium.display(), "no Chromium there: every browser check will be an error (set BELAY_CHROMIUM)");
    }
    Ok(BrowserActivities {
        sandbox: Arc::new(sandbox_activities(deps, sandbox.git, sandboxes)),
        config: browser,
        daily_seconds: deps.settings.browser_daily_seconds,
    })
}

/// The database's activities over `deps`: the `belay.db` pool serves them all, the workflow
/// worker the run lane's and promotion's ([`LocalStoreActivities`]).
fn store_activities(deps: &WorkerDeps) -> StoreActivities {
    StoreActivities {
        store: deps.store.clone(),
        objects: deps.objects.clone(),
        client: Some(deps.client.clone()),
        top_up_lease_ms: i64::try_from(deps.top_up_lease.as_millis()).unwrap_or(i64::MAX),
    }
}

/// The Sandbox's activities over `sandboxes`, for the sandbox pool and the browser pool's checkouts.
fn sandbox_activities(deps: &WorkerDeps, git: SandboxGit, sandboxes: Arc<Sandboxes>) -> SandboxActivities {
    SandboxActivities {
        sandboxes,
        store: deps.store.clone(),
        objects: deps.objects.clone(),
        revocations: StoreRevocations(deps.store.clone()),
        git,
        checkouts: Default::default(),
    }
}
