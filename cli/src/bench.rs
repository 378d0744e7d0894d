//! `belay bench`: the measured figures. Each bench measures belay against a floor taken in the
//! same run on the same machine, so the ratio means something on any machine.
//!
//! - `claim`: dispatcher claim throughput over 10,000 queued jobs on 10 harnesses, against
//!   10,000 single-row conditional updates on the same backend.
//! - `latency`: job enqueued → run recorded with a no-op adapter, against a bare one-activity
//!   workflow on the same Temporal server and worker.
//! - `dispatch`: 1,000 no-op jobs on one harness (cap 100) enqueued at once, first enqueue → last
//!   run recorded, against 1,000 bare one-activity workflows kept 100 in flight on the same server.
//! - `dev-start`: `belay dev` cold start to ready, and the resident memory of its process tree.

use anyhow::{Context, bail};
use belay_domain::catalogue::{AdapterSpec, HarnessInput, ListPrice, ModelInput, TestCaseVersionInput, TestType};
use belay_domain::job::{CasePin, Combination, JobStatus};
use belay_store::Store;
use belay_store::jobs::NewJob;
use belay_worker::Pool;
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// Claim throughput against raw conditional updates, on SQLite and (with --postgres-url) PostgreSQL.
    Claim {
        #[arg(long, default_value_t = 10_000)]
        jobs: usize,
        #[arg(long, default_value_t = 10)]
        harnesses: usize,
        /// Cap of each harness.
        #[arg(long, default_value_t = 10)]
        cap: i64,
        /// A PostgreSQL server where the bench may create databases.
        #[arg(long, env = "BELAY_BENCH_POSTGRES_URL")]
        postgres_url: Option<String>,
    },
    /// Enqueued → run recorded, against a bare one-activity workflow (starts its own Temporal dev server).
    Latency {
        #[arg(long, default_value_t = 100)]
        jobs: usize,
    },
    /// Dispatch throughput: no-op jobs on one harness enqueued at once, against bare one-activity
    /// workflows at the same concurrency (starts its own Temporal dev server).
    Dispatch {
        #[arg(long, default_value_t = 1_000)]
        jobs: usize,
        /// The harness's cap, and the bare workflows' concurrency.
        #[arg(long, default_value_t = 100)]
        cap: i64,
    },
    /// Fork and compose on a generated repository against `git clone --bare` and
    /// `git merge-tree`, and a smart-HTTP clone against a path clone.
    Source {
        #[arg(long, default_value_t = 50_000)]
        files: usize,
        #[arg(long, default_value_t = 3)]
        runs: usize,
    },
    /// A trivial command in a warm Sandbox against `docker run --rm`, and a cold Sandbox start.
    Sandbox {
        #[arg(long, default_value_t = 10)]
        runs: usize,
    },
    /// `belay dev` cold start to ready, and the resident memory of its process tree at rest.
    DevStart {
        /// Seconds to let it settle before reading memory.
        #[arg(long, default_value_t = 10)]
        rest: u64,
    },
    /// A warm Sandbox command with the lease book in the database (SQLite; PostgreSQL with
    /// --postgres-url) against the in-process book: what sharing a Sandbox's life costs.
    SandboxLeases {
        #[arg(long, default_value_t = 30)]
        runs: usize,
        /// A PostgreSQL server where the bench may create a database.
        #[arg(long)]
        postgres_url: Option<String>,
    },
    /// Authentication with tokens' last use tracked against without, on `GET /v1/account`
    /// (SQLite; PostgreSQL with --postgres-url; starts its own Temporal dev server).
    Auth {
        /// A PostgreSQL server where the bench may create a database.
        #[arg(long, env = "BELAY_BENCH_POSTGRES_URL")]
        postgres_url: Option<String>,
        /// Requests of each API per round.
        #[arg(long, default_value_t = 2000)]
        requests: usize,
        /// Tokens the requests are spread over (each written once when first used).
        #[arg(long, default_value_t = 50)]
        tokens: usize,
        #[arg(long, default_value_t = 6)]
        rounds: usize,
    },
    /// A 10,000-cell plan over 100,000 runs and 20,000 jobs: the matrix against the raw grouped
    /// counts, an unbounded top-up against a batch enqueue, and a bounded top-up through the API
    /// against a bare one-activity workflow (starts its own Temporal dev server).
    Coverage {
        /// A PostgreSQL server where the bench may create databases.
        #[arg(long, env = "BELAY_BENCH_POSTGRES_URL")]
        postgres_url: Option<String>,
        /// Timed samples of each measurement.
        #[arg(long, default_value_t = 20)]
        samples: usize,
    },
    /// Candidate composition of 3 ChangeSets inside the verification step against `git merge-tree`;
    /// with `--end-to-end`, also the sample app's whole verification (cold and warm Sandbox, per
    /// step) and the orchestration overhead of trivial checks, through a `belay dev` of its own.
    Verify {
        #[arg(long, default_value_t = 50_000)]
        files: usize,
        #[arg(long, default_value_t = 3)]
        runs: usize,
        #[arg(long)]
        end_to_end: bool,
        /// The app the end-to-end part verifies (the sample app of the source tree by default).
        #[arg(long)]
        app: Option<std::path::PathBuf>,
        /// Bare workflows measured for the overhead ratio.
        #[arg(long, default_value_t = 20)]
        probes: usize,
    },
    /// A ladder of 50 rungs × 100 climbers at 5 runs per cell: the board against the raw queries
    /// it is built from, and a ladder top-up against a plan top-up of as many launchable cells
    /// (starts its own Temporal dev server).
    Ladder {
        /// A PostgreSQL server where the bench may create databases.
        #[arg(long, env = "BELAY_BENCH_POSTGRES_URL")]
        postgres_url: Option<String>,
        /// Timed samples of each measurement.
        #[arg(long, default_value_t = 20)]
        samples: usize,
    },
    /// Selection among 3 gated siblings (claim, rank, apply) against a bare one-activity
    /// workflow, and the acceptance check's input assembly for a 24-file Candidate against
    /// reading those files from the fork directly.
    Selection {
        #[arg(long, default_value_t = 20)]
        samples: usize,
    },
    /// Promotion of a verified Candidate (PromotionWorkflow: preconditions, compare-and-swap,
    /// fast-forward, file index and code manifest) against `git push` of the same fast-forward to
    /// a bare repository plus a bare one-activity workflow (starts its own Temporal dev server).
    Promote {
        #[arg(long, default_value_t = 50_000)]
        files: usize,
        #[arg(long, default_value_t = 10)]
        samples: usize,
    },
    /// The whole browser check on the sample app grown to 8 pages (real Chromium, the app served
    /// by Bun): wall time and where it went, and the interceptor's added latency per request
    /// against a direct fetch of the same URL.
    Browser {
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// The app (the sample app of the source tree by default).
        #[arg(long)]
        app: Option<std::path::PathBuf>,
        /// The bun binary (`BELAY_BUN`, else `bun` on PATH).
        #[arg(long)]
        bun: Option<std::path::PathBuf>,
    },
    /// Artifacts of 1 KiB, 1 MiB and 50 MiB written and read on S3 (moto's server over HTTPS)
    /// and on the filesystem store, each against the store's own client (boto3, the filesystem);
    /// a promotion's source sync of a 50,000-file tree on S3 against the filesystem store.
    Objects {
        #[arg(long, default_value_t = 20)]
        samples: usize,
        #[arg(long, default_value_t = 50_000)]
        files: usize,
        /// Also time the first sync, which stores every blob (slow on moto: two requests a blob).
        #[arg(long)]
        first_sync: bool,
        /// moto's `moto_server` (the one scripts/setup.sh installs by default).
        #[arg(long, env = "BELAY_MOTO_SERVER")]
        moto_server: Option<std::path::PathBuf>,
    },
    /// The console's matrix page of a 10,000-cell plan and its ladder board of 50 × 100 in a
    /// headless Chromium: time to the page painted and its weight, against the API call behind
    /// each (starts its own Temporal dev server).
    Console {
        /// Timed page loads of each page.
        #[arg(long, default_value_t = 5)]
        samples: usize,
    },
}

pub async fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Claim {
            jobs,
            harnesses,
            cap,
            postgres_url,
        } => {
            claim_bench("sqlite", None, jobs, harnesses, cap).await?;
            match postgres_url {
                Some(url) => claim_bench("postgres", Some(&url), jobs, harnesses, cap).await?,
                None => println!("postgres: skipped (no --postgres-url)"),
            }
            Ok(())
        }
        BenchCommand::Latency { jobs } => lane_bench(Measure::Latency { jobs }).await,
        BenchCommand::Dispatch { jobs, cap } => lane_bench(Measure::Dispatch { jobs, cap }).await,
        BenchCommand::DevStart { rest } => dev_start_bench(rest).await,
        BenchCommand::Source { files, runs } => crate::bench_source::source(files, runs).await,
        BenchCommand::Sandbox { runs } => crate::bench_source::sandbox(runs).await,
        BenchCommand::SandboxLeases { runs, postgres_url } => {
            crate::bench_hardening::sandbox_leases(runs, postgres_url).await
        }
        BenchCommand::Auth {
            postgres_url,
            requests,
            tokens,
            rounds,
        } => crate::bench_auth::auth(postgres_url, requests, tokens, rounds).await,
        BenchCommand::Coverage { postgres_url, samples } => {
            crate::bench_coverage::coverage(postgres_url, samples).await
        }
        BenchCommand::Verify {
            files,
            runs,
            end_to_end,
            app,
            probes,
        } => {
            crate::bench_verify::verify(files, runs).await?;
            if end_to_end {
                let app = app.unwrap_or_else(crate::bench_verify::default_app_dir);
                crate::bench_verify::end_to_end(&app, probes).await?;
            }
            Ok(())
        }
        BenchCommand::Ladder { postgres_url, samples } => crate::bench_ladder::ladder(postgres_url, samples).await,
        BenchCommand::Console { samples } => crate::bench_console::console(samples).await,
        BenchCommand::Objects {
            samples,
            files,
            first_sync,
            moto_server,
        } => crate::bench_objects::objects(samples, files, first_sync, moto_server).await,
        BenchCommand::Selection { samples } => crate::bench_selection::selection(samples).await,
        BenchCommand::Promote { files, samples } => crate::bench_promote::promote(files, samples).await,
        BenchCommand::Browser { runs, app, bun } => {
            let app = app.unwrap_or_else(crate::bench_verify::default_app_dir);
            let bun = bun.unwrap_or_else(crate::bench_browser::default_bun);
            crate::bench_browser::browser(&app, &bun, runs).await
        }
    }
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

fn job(harness: &str) -> NewJob {
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

async fn seed_harnesses(store: &Store, n: usize, cap: i64) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    for i in 0..n {
        let name = format!("h{i}");
        store
            .create_harness(&HarnessInput {
                name: name.clone(),
                provider_routed: false,
                max_parallelism: cap,
                adapter: AdapterSpec::Script {
                    script: "true".into(),
                    timeout_seconds: 60,
                    sandbox: false,
                },
            })
            .await?;
        names.push(name);
    }
    Ok(names)
}

async fn claim_bench(
    label: &str,
    postgres_url: Option<&str>,
    jobs: usize,
    harnesses: usize,
    cap: i64,
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    // Claims: 10 harnesses, jobs interleaved across them; each claimed batch is finished (not
    // timed) so the next claim finds free slots, as runs ending would.
    let store = fresh_store(dir.path(), postgres_url, "claim").await?;
    let names = seed_harnesses(&store, harnesses, cap).await?;
    let batch: Vec<NewJob> = (0..jobs).map(|i| job(&names[i % names.len()])).collect();
    for chunk in batch.chunks(1000) {
        store.enqueue_batch(chunk.to_vec()).await?;
    }
    let mut claimed = 0usize;
    let mut claim_time = Duration::ZERO;
    let mut round = 0;
    while claimed < jobs {
        let t = Instant::now();
        let got = store.claim(&format!("bench-{round}")).await?;
        claim_time += t.elapsed();
        round += 1;
        if got.is_empty() {
            bail!("a claim found nothing with {} of {jobs} jobs claimed", claimed);
        }
        claimed += got.len();
        store.cancel_jobs(&[JobStatus::Dispatched], None).await?;
    }
    let claim_rate = claimed as f64 / claim_time.as_secs_f64();

    // Raw: the same number of single-row conditional updates, one statement and commit each.
    let raw_store = fresh_store(dir.path(), postgres_url, "raw").await?;
    seed_harnesses(&raw_store, harnesses, cap).await?;
    let mut ids = Vec::with_capacity(jobs);
    for chunk in batch.chunks(1000) {
        ids.extend(raw_store.enqueue_batch(chunk.to_vec()).await?.into_iter().map(|j| j.id));
    }
    let t = Instant::now();
    let n = raw_store.bench_single_row_updates(&ids).await?;
    let raw_time = t.elapsed();
    let raw_rate = n as f64 / raw_time.as_secs_f64();
    println!(
        "{label}: claimed {claimed} jobs over {harnesses} harnesses (cap {cap}) in {round} claims, {:.3} s of claiming = {claim_rate:.0} jobs/s; \
         raw single-row conditional updates: {n} in {:.3} s = {raw_rate:.0}/s; ratio {:.2}",
        claim_time.as_secs_f64(),
        raw_time.as_secs_f64(),
        claim_rate / raw_rate
    );
    store.close().await;
    raw_store.close().await;
    Ok(())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// What a bench of the run lane measures, on a Temporal dev server and worker pools of its own.
#[derive(Debug, Clone, Copy)]
enum Measure {
    /// One job at a time, `jobs` times.
    Latency { jobs: usize },
    /// `jobs` at once on a harness with cap `cap`.
    Dispatch { jobs: usize, cap: i64 },
}

async fn lane_bench(measure: Measure) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let bin = crate::temporal::find_or_install(&dir.path().join("tools")).await?;
    let port = free_port()?;
    let server = crate::temporal::DevServer::start(&bin, dir.path(), port, free_port()?).await?;
    let result = lane_with_server(dir.path(), port, measure).await;
    server.stop().await;
    result
}

async fn lane_with_server(dir: &Path, port: u16, measure: Measure) -> anyhow::Result<()> {
    let address = format!("127.0.0.1:{port}");
    let client = belay_client::connect(&address, "default", "belay-bench").await?;
    let store = Store::connect(&format!("sqlite:{}", dir.join("belay.db").display())).await?;
    store.migrate().await?;
    let noop = r#"printf '{"status":"completed","loaded":true}' > "$BELAY_MANIFEST""#;
    store
        .create_harness(&HarnessInput {
            name: "noop".into(),
            provider_routed: false,
            max_parallelism: match measure {
                Measure::Latency { .. } => 4,
                Measure::Dispatch { cap, .. } => cap,
            },
            adapter: AdapterSpec::Command {
                argv: vec!["/bin/sh".into(), "-c".into(), noop.into()],
                timeout_seconds: 60,
                sandbox: false,
            },
        })
        .await?;
    store
        .ingest_test_case_version(&TestCaseVersionInput {
            slug: "bench".into(),
            version: "1.0.0".into(),
            test_type: TestType::Standard,
            variants: vec!["default".into()],
            engines: vec![],
            title: None,
        })
        .await?;
    store
        .create_model(&ModelInput {
            id: "m".into(),
            context_window: Some(1000),
            list_price: Some(ListPrice {
                input_per_mtok_usd: 1.0,
                output_per_mtok_usd: 1.0,
            }),
        })
        .await?;
    let deps = crate::bench_selection::worker_deps(&client, &store, dir)?;
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let measure = async {
        let r = match measure {
            Measure::Latency { jobs } => measure_latency(&client, &store, jobs).await,
            Measure::Dispatch { jobs, cap } => measure_dispatch(&client, &store, jobs, cap as usize).await,
        };
        let _ = stop_tx.send(true);
        r
    };
    let (pools, figures) = tokio::join!(
        belay_worker::run_pools(&Pool::ALL, deps, async move {
            let _ = stop_rx.wait_for(|s| *s).await;
        }),
        measure
    );
    pools?;
    figures
}

async fn measure_latency(client: &temporalio_client::Client, store: &Store, n: usize) -> anyhow::Result<()> {
    // Warm both paths (first workflow tasks after a server start are not representative).
    let mut lane = Vec::with_capacity(n);
    let mut floor = Vec::with_capacity(n);
    for i in 0..(n + 5) {
        let f = probe(client, format!("probe-{}-{i}", std::process::id())).await?;

        let t = Instant::now();
        let job = store.enqueue(job("noop")).await?;
        belay_client::wake_dispatcher(client).await?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if store.run_of_job(&job.id).await?.is_some() {
                break;
            }
            if let Some(j) = store.get_job(&job.id).await?
                && j.status.is_final()
                && j.status != JobStatus::Completed
            {
                bail!("job {} ended {} ({:?})", j.id, j.status, j.error);
            }
            if Instant::now() > deadline {
                bail!("job {} recorded no run within 60 s", job.id);
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let l = t.elapsed().as_secs_f64() * 1000.0;
        if i >= 5 {
            floor.push(f);
            lane.push(l);
        }
    }
    floor.sort_by(f64::total_cmp);
    lane.sort_by(f64::total_cmp);
    let (fm, fp) = (percentile(&floor, 0.5), percentile(&floor, 0.95));
    let (lm, lp) = (percentile(&lane, 0.5), percentile(&lane, 0.95));
    println!("bare one-activity workflow: median {fm:.1} ms, p95 {fp:.1} ms over {n}");
    println!("job enqueued -> run recorded (no-op adapter): median {lm:.1} ms, p95 {lp:.1} ms over {n}");
    println!("ratio: median {:.2}x, p95 {:.2}x", lm / fm, lp / fp);
    Ok(())
}

/// One bare one-activity workflow, start to result: the floor of both lane benches.
async fn probe(client: &temporalio_client::Client, id: String) -> anyhow::Result<f64> {
    use belay_workflows::probe::ProbeWorkflow;
    use temporalio_client::{WorkflowGetResultOptions, WorkflowStartOptions};
    let t = Instant::now();
    let h = client
        .start_workflow(
            ProbeWorkflow::run,
            id.clone(),
            WorkflowStartOptions::new(belay_workflows::queues::WORKFLOWS, id.clone()).build(),
        )
        .await?;
    let out: String = h.get_result(WorkflowGetResultOptions::default()).await?;
    anyhow::ensure!(out == id, "probe answered {out}");
    Ok(t.elapsed().as_secs_f64() * 1000.0)
}

async fn measure_dispatch(
    client: &temporalio_client::Client,
    store: &Store,
    n: usize,
    cap: usize,
) -> anyhow::Result<()> {
    use futures::StreamExt;
    // Warm the server and the pools on both paths first.
    for i in 0..5 {
        probe(client, format!("warm-{}-{i}", std::process::id())).await?;
    }
    let warm: Vec<NewJob> = (0..5).map(|_| job("noop")).collect();
    store.enqueue_batch(warm).await?;
    belay_client::wake_dispatcher(client).await?;
    wait_completed(store, 5, Duration::from_secs(60)).await?;

    // The floor: `n` bare workflows, `cap` in flight at a time.
    let t = Instant::now();
    let pid = std::process::id();
    let results: Vec<anyhow::Result<f64>> = futures::stream::iter(0..n)
        .map(|i| probe(client, format!("probe-{pid}-{i}")))
        .buffer_unordered(cap)
        .collect()
        .await;
    for r in results {
        r?;
    }
    let floor = t.elapsed().as_secs_f64();

    // The lane: `n` jobs enqueued at once, first enqueue → last run recorded.
    let before = store.transitions(0, i64::MAX).await?.last().map_or(0, |t| t.seq);
    let batch: Vec<NewJob> = (0..n).map(|_| job("noop")).collect();
    let t = Instant::now();
    for chunk in batch.chunks(1000) {
        store.enqueue_batch(chunk.to_vec()).await?;
    }
    belay_client::wake_dispatcher(client).await?;
    wait_completed(store, 5 + n as i64, Duration::from_secs(600)).await?;
    let lane = t.elapsed().as_secs_f64();

    // dispatched → running, per job, from the recorded transitions.
    let mut dispatched = std::collections::HashMap::new();
    let mut waits = Vec::with_capacity(n);
    for tr in store.transitions(before, i64::MAX).await? {
        match tr.to {
            JobStatus::Dispatched => {
                dispatched.insert(tr.job_id.clone(), tr.at);
            }
            JobStatus::Running => {
                if let Some(at) = dispatched.get(&tr.job_id) {
                    waits.push((tr.at - at) as f64);
                }
            }
            _ => {}
        }
    }
    waits.sort_by(f64::total_cmp);
    anyhow::ensure!(
        waits.len() == n,
        "{} of {n} jobs recorded dispatched and running",
        waits.len()
    );
    let (fr, lr) = (n as f64 / floor, n as f64 / lane);
    println!("bare one-activity workflows: {n} at {cap} in flight in {floor:.2} s = {fr:.1} workflows/s");
    println!("no-op jobs on one harness (cap {cap}), enqueued at once: {n} in {lane:.2} s = {lr:.1} jobs/s");
    println!(
        "dispatched -> running: median {:.0} ms, p95 {:.0} ms",
        percentile(&waits, 0.5),
        percentile(&waits, 0.95)
    );
    println!("ratio: {:.2} (jobs/s over workflows/s)", lr / fr);
    Ok(())
}

/// Waits until `n` jobs are completed; any job that ends otherwise fails the bench.
async fn wait_completed(store: &Store, n: i64, within: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    loop {
        let counts = store.job_status_counts().await?;
        for (status, count) in &counts {
            if status.is_final() && *status != JobStatus::Completed && *count > 0 {
                bail!("{count} jobs ended {status}");
            }
        }
        if counts.get(&JobStatus::Completed).copied().unwrap_or(0) >= n {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{n} jobs did not complete within {} s: {counts:?}", within.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Resident memory (kB) of `pid` and every descendant.
fn tree_rss_kb(pid: u32) -> u64 {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat"))
                && let Some(after) = stat.rsplit_once(')').map(|(_, a)| a)
                && let Some(ppid) = after.split_whitespace().nth(1).and_then(|s| s.parse().ok())
            {
                parents.push((p, ppid));
            }
        }
    }
    let mut tree = vec![pid];
    let mut i = 0;
    while i < tree.len() {
        let cur = tree[i];
        tree.extend(parents.iter().filter(|(_, pp)| *pp == cur).map(|(p, _)| *p));
        i += 1;
    }
    tree.iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/status")).ok())
        .filter_map(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .sum()
}

async fn dev_start_bench(rest: u64) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let dir = tempfile::tempdir()?;
    for attempt in ["cold (fresh data dir)", "resume (same data dir)"] {
        let (api, tport, uport) = (free_port()?, free_port()?, free_port()?);
        let t = Instant::now();
        let mut child = tokio::process::Command::new(&exe)
            .args([
                "dev",
                "--port",
                &api.to_string(),
                "--temporal-port",
                &tport.to_string(),
                "--ui-port",
                &uport.to_string(),
            ])
            .arg("--data-dir")
            .arg(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting belay dev")?;
        let pid = child.id().context("belay dev pid")?;
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(r) = http.get(format!("http://127.0.0.1:{api}/v1/readyz")).send().await
                && r.status().is_success()
            {
                break;
            }
            if Instant::now() > deadline {
                bail!("belay dev was not ready within 120 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let ready = t.elapsed().as_secs_f64();
        tokio::time::sleep(Duration::from_secs(rest)).await;
        let rss = tree_rss_kb(pid);
        let t = Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        )?;
        let stopped = tokio::time::timeout(Duration::from_secs(30), child.wait())
            .await
            .is_ok();
        println!(
            "belay dev {attempt}: ready in {ready:.2} s; process tree RSS at rest {:.1} MiB; SIGTERM to exit {}",
            rss as f64 / 1024.0,
            if stopped {
                format!("{:.2} s", t.elapsed().as_secs_f64())
            } else {
                "did not exit within 30 s".into()
            }
        );
    }
    Ok(())
}
