//! What the benches share: timing and its statistics, the floors' tools (git, a Temporal dev
//! server, a fresh database), belay's own stack in this process (worker pools, the API), and the
//! seeded data more than one bench measures. A bench file uses this and never another bench.

use crate::objects::dir_store;
use anyhow::{Context, bail, ensure};
use belay_domain::catalogue::{AdapterSpec, HarnessInput, ListPrice, ModelInput, TestCaseVersionInput, TestType};
use belay_domain::change::{Change, ChangeInput, ChangeSet, ChangeSetInput, RiskTier, Task, TaskInput, TaskKind};
use belay_domain::coverage::{Cell, OuterAxis, cross};
use belay_domain::ids::{AccountId, ChangeId, ProjectId};
use belay_domain::job::{CasePin, Combination};
use belay_git::{GitService, StackedFork, Tip};
use belay_store::Store;
use belay_store::jobs::NewJob;
use belay_worker::{Pool, WorkerDeps};
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// ---- Timing and statistics ----

pub(crate) fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `ours` over `floor`: the figure every bench reports.
pub(crate) fn ratio(ours: Duration, floor: Duration) -> f64 {
    ours.as_secs_f64() / floor.as_secs_f64()
}

/// The median and the 95th percentile of `v` (milliseconds).
pub(crate) fn stats(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
    let at = |p: f64| v[(((v.len() - 1) as f64) * p).round() as usize];
    (at(0.5), at(0.95))
}

/// The value at `p` (0 to 1) of an ascending `sorted`.
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// Runs `work` on a task of its own and times it there, in milliseconds. The bench's own task
/// also drives the worker pools (`run_stack`), so a read awaited on it is polled alongside them;
/// an API handler runs on a task of its own, and so does what is measured against it.
pub(crate) async fn timed<T: Send + 'static>(
    work: impl std::future::Future<Output = anyhow::Result<T>> + Send + 'static,
) -> anyhow::Result<(f64, T)> {
    tokio::spawn(async move {
        let t = Instant::now();
        let out = work.await?;
        Ok((t.elapsed().as_secs_f64() * 1000.0, out))
    })
    .await?
}

/// `GET {url}` with `token`, timed on a task of its own until the whole body has arrived, then
/// decoded (the client's work, not timed).
pub(crate) async fn timed_get(http: &reqwest::Client, url: String, token: &str) -> anyhow::Result<(f64, Value)> {
    let request = http.get(url.clone()).bearer_auth(token);
    tokio::spawn(async move {
        let t = Instant::now();
        let resp = request.send().await?;
        ensure!(resp.status().is_success(), "GET {url}: {}", resp.status());
        let body = resp.bytes().await?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        Ok((ms, serde_json::from_slice(&body)?))
    })
    .await?
}

/// Where a read endpoint's time goes, one sample per row: its steps run in this process, each
/// timed (milliseconds), and the size of the body it writes.
#[derive(Default)]
pub(crate) struct Steps {
    names: Vec<&'static str>,
    times: Vec<Vec<f64>>,
    bytes: usize,
}

impl Steps {
    /// Adds one sample: `(step, milliseconds)` in order, and the body's size.
    pub(crate) fn push(&mut self, (sample, bytes): (Vec<(&'static str, f64)>, usize)) {
        if self.names.is_empty() {
            self.names = sample.iter().map(|(n, _)| *n).collect();
            self.times = vec![Vec::new(); sample.len()];
        }
        for (i, (_, ms)) in sample.into_iter().enumerate() {
            self.times[i].push(ms);
        }
        self.bytes = bytes;
    }

    /// Prints each step's median, and what is left of `total` (the endpoint's median through
    /// HTTP): routing, the token check, the transfer and the client's receipt.
    pub(crate) fn print(self, label: &str, what: &str, total: f64) {
        let mut sum = 0.0;
        let parts: Vec<String> = self
            .names
            .iter()
            .zip(self.times)
            .map(|(n, t)| {
                let m = stats(t).0;
                sum += m;
                format!("{n} {m:.1}")
            })
            .collect();
        println!(
            "{label}: {what} medians in ms: {}; HTTP, token check and transfer {:.1} (of {total:.1}); body {:.2} MB",
            parts.join(", "),
            total - sum,
            self.bytes as f64 / 1e6
        );
    }
}

// ---- Processes and servers ----

/// A job of the `bench` case on `harness` with model `m`.
pub(crate) fn job(harness: &str) -> NewJob {
    NewJob {
        case: CasePin {
            slug: "bench".into(),
            version: "1.0.0".into(),
            variant: "default".into(),
            engine: "none".into(),
        },
        combination: Combination::Harness {
            harness: harness.into(),
            model: "m".into(),
            provider: None,
        },
        gg_config_name: None,
        capabilities: None,
        test_type: Some(TestType::Standard),
        user_id: None,
        origin: None,
        attempt: 1,
        retry_of: None,
    }
}

pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A Temporal dev server of its own under `dir` (its binary under `dir/tools`), and its address.
pub(crate) async fn temporal(dir: &Path) -> anyhow::Result<(crate::temporal::DevServer, String)> {
    let bin = crate::temporal::find_or_install(&dir.join("tools")).await?;
    let port = free_port()?;
    let server = crate::temporal::DevServer::start(&bin, dir, port, free_port()?).await?;
    Ok((server, format!("127.0.0.1:{port}")))
}

/// A fresh database on `backend`: a temp SQLite file, or a new database on the server.
pub(crate) async fn fresh_store(dir: &Path, postgres_url: Option<&str>, name: &str) -> anyhow::Result<Store> {
    let url = match postgres_url {
        None => format!("sqlite:{}", dir.join(format!("{name}.db")).display()),
        Some(admin) => {
            let db = format!("belay_bench_{name}_{}", std::process::id());
            let a = Store::connect_with(admin, 1).await?;
            a.execute_admin(&format!("drop database if exists {db}")).await?;
            a.execute_admin(&format!("create database {db}")).await?;
            a.close().await;
            let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(admin);
            format!("{base}/{db}")
        }
    };
    let store = Store::connect(&url).await?;
    store.migrate().await?;
    Ok(store)
}

/// What the bench's worker pools run on: `client`, `store`, and under `dir` the git root
/// `git/belay`, the objects `objects` and the work root `work`; no Sandbox.
pub(crate) fn worker_deps(client: &temporalio_client::Client, store: &Store, dir: &Path) -> anyhow::Result<WorkerDeps> {
    Ok(WorkerDeps {
        client: client.clone(),
        store: store.clone(),
        objects: dir_store(&dir.join("objects"))?,
        work_root: dir.join("work"),
        dispatcher: Default::default(),
        sandbox: None,
        sandbox_config: None,
        git_root: dir.join("git").join("belay"),
        top_up_lease: belay_worker::DEFAULT_TOP_UP_LEASE,
        http_roots: Vec::new(),
        settings: crate::settings::from_environment::<crate::settings::Outside>().pools(true, None)?,
    })
}

/// Runs `measure` against the worker pools `pools` over `store`, on a Temporal dev server of its
/// own under `dir` (the pools' git root `dir/git/belay`, objects `dir/objects`); the pools and the
/// server stop when it ends.
pub(crate) async fn with_pools<T>(
    dir: &Path,
    store: &Store,
    pools: &[Pool],
    measure: impl AsyncFnOnce(&temporalio_client::Client) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let (server, address) = temporal(dir).await?;
    let result = async {
        let client = belay_client::connect(&address, "default", "belay-bench").await?;
        let deps = worker_deps(&client, store, dir)?;
        let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
        let measured = async {
            let r = measure(&client).await;
            let _ = stop_tx.send(true);
            r
        };
        let (pools, figures) = tokio::join!(
            belay_worker::run_pools(pools, deps, async move {
                let _ = stop_rx.wait_for(|s| *s).await;
            }),
            measured
        );
        pools?;
        figures
    }
    .await;
    server.stop().await;
    result
}

/// Serves the API and the workflows and db pools in this process over `store`, runs `measure`
/// with the API's base URL, then stops them.
pub(crate) async fn run_stack<F, Fut>(
    store: &Store,
    client: &temporalio_client::Client,
    dir: &Path,
    measure: F,
) -> anyhow::Result<()>
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    run_stack_with(store, client, dir, &[Pool::Workflows, Pool::Db], false, |api, _| {
        measure(api)
    })
    .await
}

/// [`run_stack`] with the worker pools `pools`, and when `artifacts` is set an artifact origin
/// on a listener of its own (the API's URL its console origin): `measure` gets the API's base URL
/// and the artifact origin's.
pub(crate) async fn run_stack_with<F, Fut>(
    store: &Store,
    client: &temporalio_client::Client,
    dir: &Path,
    pools: &[Pool],
    artifacts: bool,
    measure: F,
) -> anyhow::Result<()>
where
    F: FnOnce(String, Option<String>) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let api = format!("http://{}", listener.local_addr()?);
    let origin = match artifacts {
        true => {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let ttl = crate::artifact_origin::ArtifactTtl {
                seconds: belay_domain::artifact_url::DEFAULT_TTL_SECS,
            };
            let origin = crate::artifact_origin::artifact_origin(
                listener.local_addr()?,
                None,
                &api,
                b"belay bench artifact origin secret, 32+ bytes".to_vec(),
                &ttl,
            )?;
            Some((listener, origin))
        }
        false => None,
    };
    let state = belay_api::AppState {
        store: store.clone(),
        temporal: client.clone(),
        git: None,
        objects: dir_store(&dir.join("objects"))?,
        auth: Default::default(),
        artifacts: origin.as_ref().map(|(_, o)| o.clone()),
        temporal_ui: None,
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut api_stop = stop_rx.clone();
    let api_task = tokio::spawn(belay_api::serve(listener, state.clone(), async move {
        let _ = api_stop.wait_for(|s| *s).await;
    }));
    let artifacts_url = origin.as_ref().map(|(_, o)| o.public_url.clone());
    let artifacts_task = origin.map(|(listener, _)| {
        let mut stop = stop_rx.clone();
        tokio::spawn(belay_api::artifact_origin::serve_artifacts(
            listener,
            state,
            async move {
                let _ = stop.wait_for(|s| *s).await;
            },
        ))
    });
    let deps = worker_deps(client, store, dir)?;
    let mut worker_stop = stop_rx.clone();
    let measure = async {
        let r = measure(api, artifacts_url).await;
        let _ = stop_tx.send(true);
        r
    };
    let (pools, figures) = tokio::join!(
        belay_worker::run_pools(pools, deps, async move {
            let _ = worker_stop.wait_for(|s| *s).await;
        }),
        measure
    );
    let _ = api_task.await;
    if let Some(task) = artifacts_task {
        let _ = task.await;
    }
    pools?;
    figures
}

/// One bare one-activity workflow, start to result, in milliseconds: the floor of the
/// orchestration benches.
pub(crate) async fn bare_workflow_ms(client: &temporalio_client::Client, id: String) -> anyhow::Result<f64> {
    let t = Instant::now();
    let h = client
        .start_workflow(
            belay_workflows::probe::ProbeWorkflow::run,
            id.clone(),
            temporalio_client::WorkflowStartOptions::new(belay_workflows::queues::WORKFLOWS, id.clone()).build(),
        )
        .await?;
    let out: String = h
        .get_result(temporalio_client::WorkflowGetResultOptions::default())
        .await?;
    ensure!(out == id, "the bare workflow answered {out}");
    Ok(t.elapsed().as_secs_f64() * 1000.0)
}

/// The sample app, read from the source tree this binary was built from (`--app` names another).
pub(crate) fn default_app_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sample-app")
}

/// The bun binary: `BELAY_BUN`, else `bun` on PATH.
pub(crate) fn default_bun() -> PathBuf {
    std::env::var("BELAY_BUN")
        .map(PathBuf::from)
        .unwrap_or_else(|_| "bun".into())
}

// ---- git ----

pub(crate) fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output()?;
    if !out.status.success() {
        bail!("git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// `git clone --bare` of `from` to `to`.
pub(crate) fn clone_bare(from: &Path, to: &Path) -> anyhow::Result<()> {
    let parent = to.parent().context("a clone target without a parent")?;
    git(
        parent,
        &[
            "clone",
            "--bare",
            "--quiet",
            from.to_str().context("path")?,
            to.to_str().context("path")?,
        ],
    )
    .map(drop)
}

/// Adds `files` small source files to canonical `main` in one commit (git fast-import).
pub(crate) fn grow(repo: &Path, files: usize) -> anyhow::Result<String> {
    commit_files(
        repo,
        "grow",
        (0..files).map(|i| {
            (
                format!("src/m{}/f{i}.rs", i / 500),
                format!("// file {i}\npub fn f{i}() -> usize {{ {i} }}\n"),
            )
        }),
    )
}

/// Commits `files` (path, contents) on top of `main` in one commit (git fast-import); the new
/// `main`.
pub(crate) fn commit_files(
    repo: &Path,
    message: &str,
    files: impl IntoIterator<Item = (String, String)>,
) -> anyhow::Result<String> {
    let mut script = Vec::new();
    writeln!(
        script,
        "commit refs/heads/main\ncommitter b <b@b> 1700000000 +0000\ndata {}\n{message}\nfrom refs/heads/main^0",
        message.len()
    )?;
    for (path, body) in files {
        write!(script, "M 100644 inline {path}\ndata {}\n{body}\n", body.len())?;
    }
    let mut child = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()?;
    child.stdin.take().context("stdin")?.write_all(&script)?;
    if !child.wait()?.success() {
        bail!("git fast-import failed");
    }
    Ok(git(repo, &["rev-parse", "refs/heads/main"])?.trim().to_owned())
}

const COMPOSE_PROJECT: &str = "proj_benchverify";

/// The Candidate composition step as the verification workflow's compose activity runs it
/// (`GitService::fork_stacked`: fork `cand-<id>` of canonical, copy the three ChangeSets' objects
/// in from their workspace forks, merge them in order) on a `files`-file repository, against
/// `git merge-tree --write-tree` of the same three tips with their objects already in one
/// repository. `belay bench source` and `belay bench verify` both report it.
pub(crate) async fn compose(files: usize, runs: usize) -> anyhow::Result<()> {
    let runs = runs.max(1);
    let dir = tempfile::tempdir()?;
    let svc = GitService::new(dir.path().join("git"));
    std::fs::create_dir_all(svc.root())?;
    svc.provision(COMPOSE_PROJECT).await?;
    let canonical = svc.repo_path(COMPOSE_PROJECT)?;
    let base = grow(&canonical, files)?;

    // Three ChangeSets, each in a workspace fork of its own, as agents publish them.
    let mut tips = Vec::new();
    for t in 0..3usize {
        let fork = format!("ws-bench{t}");
        svc.fork(COMPOSE_PROJECT, &fork).await?;
        let changed = vec![
            (
                format!("src/m{}/f{}.rs", t * 10, (t * 5000) % files.max(1)),
                Some(format!("// changed by t{t}\n").into_bytes()),
            ),
            (format!("src/new/t{t}.rs"), Some(b"pub fn new() {}\n".to_vec())),
        ];
        let commit = svc.commit_files(&fork, &base, changed, "change").await?;
        tips.push(Tip {
            label: format!("t{t}"),
            fork,
            commit,
        });
    }
    // git's side: one repository holding every tip's objects.
    let scratch = dir.path().join("scratch.git");
    clone_bare(&canonical, &scratch)?;
    for tip in &tips {
        let from = svc.repo_path(&tip.fork)?;
        git(
            &scratch,
            &["fetch", "--quiet", from.to_str().context("path")?, &tip.commit],
        )?;
    }

    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for r in 0..runs {
        let fork = format!("cand-bench{r}");
        let started = Instant::now();
        let tree = match svc.fork_stacked(COMPOSE_PROJECT, &fork, &tips).await? {
            StackedFork::Ready { tree, .. } => tree,
            StackedFork::Conflict { label, paths } => bail!("the bench's ChangeSets conflict: {label} {paths:?}"),
        };
        ours.push(started.elapsed());

        let started = Instant::now();
        let mut current = base.clone();
        for tip in &tips {
            let t = git(&scratch, &["merge-tree", "--write-tree", &current, &tip.commit])?
                .trim()
                .to_owned();
            current = git(
                &scratch,
                &["commit-tree", &t, "-p", &current, "-p", &tip.commit, "-m", "merge"],
            )?
            .trim()
            .to_owned();
        }
        theirs.push(started.elapsed());
        let theirs_tree = git(&scratch, &["rev-parse", &format!("{current}^{{tree}}")])?;
        if theirs_tree.trim() != tree {
            bail!("the compose step and git merge-tree disagree on the composed tree");
        }
    }
    let (ours, theirs) = (median(ours), median(theirs));
    println!(
        "compose 3 ChangeSets on {files} files (fork cand-<id>, copy objects, merge in order): {:.1} ms; \
         git merge-tree --write-tree x3: {:.1} ms; ratio {:.2}",
        ms(ours),
        ms(theirs),
        ratio(ours, theirs)
    );
    Ok(())
}

// ---- Seeded data ----

pub(crate) fn pin(i: usize) -> CasePin {
    CasePin {
        slug: format!("case{i:03}"),
        version: "1.0.0".into(),
        variant: "default".into(),
        engine: "none".into(),
    }
}

pub(crate) fn combo(h: usize, m: usize) -> Combination {
    Combination::Harness {
        harness: format!("h{h}"),
        model: format!("m{m}"),
        provider: None,
    }
}

/// The plan's cases, and the rungs' (the first `LADDER_RUNGS` of them).
pub(crate) const CASES: usize = 100;
pub(crate) const HARNESSES: usize = 10;
pub(crate) const MODELS: usize = 10;
/// Runs and jobs seeded in each cell of the plan.
pub(crate) const PLAN_RUNS_PER_CELL: usize = 10;
const PLAN_JOBS_PER_CELL: usize = 2;
/// The plan's runs per cell: ten completed and two running per cell, so each cell misses one run.
pub(crate) const PLAN_DESIRED: i64 = 13;
pub(crate) const LADDER_RUNGS: usize = 50;
pub(crate) const LADDER_RUNS_PER_CELL: usize = 5;

pub(crate) async fn catalogue(store: &Store) -> anyhow::Result<()> {
    for h in 0..HARNESSES {
        store
            .create_harness(&HarnessInput {
                provider: None,
                name: format!("h{h}"),
                provider_routed: false,
                max_parallelism: 1,
                adapter: AdapterSpec::Script {
                    script: "true".into(),
                    timeout_seconds: 60,
                    sandbox: false,
                },
            })
            .await?;
    }
    for m in 0..MODELS {
        store
            .create_model(&ModelInput {
                provider: None,
                max_parallelism: None,
                id: format!("m{m}"),
                context_window: Some(100_000),
                list_price: Some(ListPrice {
                    input_per_mtok_usd: 1.0,
                    output_per_mtok_usd: 1.0,
                }),
            })
            .await?;
    }
    for i in 0..CASES {
        ingest(store, &pin(i).slug).await?;
    }
    Ok(())
}

pub(crate) async fn ingest(store: &Store, slug: &str) -> anyhow::Result<()> {
    store
        .ingest_test_case_version(&TestCaseVersionInput {
            slug: slug.to_string(),
            version: "1.0.0".into(),
            test_type: TestType::Standard,
            variants: vec!["default".into()],
            engines: vec![],
            title: None,
            review_domains: None,
        })
        .await?;
    Ok(())
}

/// The catalogue, an account and the 10,000 cells' runs and jobs; the account and its token.
pub(crate) async fn seed_plan(label: &str, store: &Store) -> anyhow::Result<(belay_store::accounts::Account, String)> {
    catalogue(store).await?;
    let (account, token) = store.create_account("bench").await?;
    let cases: Vec<CasePin> = (0..CASES).map(pin).collect();
    let combos: Vec<Combination> = (0..HARNESSES)
        .flat_map(|h| (0..MODELS).map(move |m| combo(h, m)))
        .collect();
    let cells = cross(&cases, &combos, OuterAxis::Case);
    let t = Instant::now();
    store
        .bench_seed_cells(&cells, PLAN_RUNS_PER_CELL, PLAN_JOBS_PER_CELL, &account.id, 3)
        .await?;
    println!(
        "{label}: seeded {} cells, {} runs, {} jobs in {:.1} s",
        cells.len(),
        cells.len() * PLAN_RUNS_PER_CELL,
        cells.len() * PLAN_JOBS_PER_CELL,
        t.elapsed().as_secs_f64()
    );
    Ok((account, token))
}

/// The plan of every seeded cell (100 cases × 100 combinations), as `POST /v1/coverage-plans` takes it.
pub(crate) fn plan_body() -> Value {
    let cases: Vec<Value> = (0..CASES).map(|i| json!(pin(i))).collect();
    let combos: Vec<Value> = (0..HARNESSES)
        .flat_map(|h| (0..MODELS).map(move |m| json!(combo(h, m))))
        .collect();
    json!({"name": "bench", "cases": cases, "combinations": combos, "runsPerCell": PLAN_DESIRED,
           "bufferTarget": {"kind": "unbounded"}, "autoTopUp": false})
}

/// The rung climber `c` stands on: no runs yet, so it is the cell its top-up launches.
pub(crate) fn standing(c: usize) -> usize {
    c % LADDER_RUNGS
}

/// The catalogue, an account and the runs of every cell but each climber's own rung (half of
/// them reviewed); the account and its token.
pub(crate) async fn seed_ladder(
    label: &str,
    store: &Store,
) -> anyhow::Result<(belay_store::accounts::Account, String)> {
    catalogue(store).await?;
    let (account, token) = store.create_account("bench").await?;
    let rungs: Vec<CasePin> = (0..LADDER_RUNGS).map(pin).collect();
    let climbers: Vec<Combination> = (0..HARNESSES)
        .flat_map(|h| (0..MODELS).map(move |m| combo(h, m)))
        .collect();
    let mut cells = Vec::new();
    for (c, climber) in climbers.iter().enumerate() {
        for (r, rung) in rungs.iter().enumerate() {
            if r != standing(c) {
                cells.push(Cell::new(rung.clone(), climber.clone()));
            }
        }
    }
    let t = Instant::now();
    store
        .bench_seed_cells(&cells, LADDER_RUNS_PER_CELL, 0, &account.id, 2)
        .await?;
    println!(
        "{label}: seeded {} cells, {} runs (half reviewed) in {:.1} s",
        cells.len(),
        cells.len() * LADDER_RUNS_PER_CELL,
        t.elapsed().as_secs_f64()
    );
    Ok((account, token))
}

/// The ladder of the seeded rungs and climbers, as `POST /v1/ladders` takes it.
pub(crate) fn ladder_body() -> Value {
    let rungs: Vec<Value> = (0..LADDER_RUNGS).map(|i| json!(pin(i))).collect();
    let climbers: Vec<Value> = (0..HARNESSES)
        .flat_map(|h| (0..MODELS).map(move |m| json!(combo(h, m))))
        .collect();
    json!({"name": "bench", "rungs": rungs, "combinations": climbers, "runsPerCell": LADDER_RUNS_PER_CELL,
           "bufferTarget": {"kind": "unbounded"}, "autoTopUp": false})
}

/// A low-risk Change of `project` with no acceptance criteria.
pub(crate) async fn low_risk_change(store: &Store, account: &str, project: &str) -> anyhow::Result<Change> {
    Ok(store
        .create_change(
            &AccountId::from(account),
            &ProjectId::from(project),
            &ChangeInput {
                goal: "g".into(),
                acceptance_criteria: vec![],
                invariants: vec![],
                risk_tier: Some(RiskTier::Low),
            },
        )
        .await?)
}

/// Task `key` of `change` with one run that published one ChangeSet at `commit`.
pub(crate) async fn published_task(
    store: &Store,
    account: &str,
    change: &str,
    key: &str,
    commit: &str,
) -> anyhow::Result<(Task, ChangeSet)> {
    let t = store
        .add_task(
            &AccountId::from(account),
            &ChangeId::from(change),
            &TaskInput {
                key: key.into(),
                kind: TaskKind::Implement,
                title: key.into(),
                semantic_resources: vec![],
                dependencies: vec![],
            },
        )
        .await?;
    let run = store.start_task_run(&AccountId::from(account), &t.id).await?;
    let cs = store
        .record_change_set(
            &AccountId::from(account),
            &run.id,
            &ChangeSetInput {
                commit: commit.into(),
                contract_changes: vec![],
                data_changes: vec![],
            },
        )
        .await?;
    Ok((t, cs))
}
