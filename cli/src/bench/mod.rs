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

//!
//! Each bench is a file of this module; what they share (timing, statistics, the floors' tools,
//! belay's stack in this process, seeded data) is in `support`, and no bench uses another.

mod auth;
mod browser;
mod claim;
mod console;
mod coverage;
mod dev_start;
mod ladder;
mod lanes;
mod objects;
mod promote;
mod review;
mod sandbox;
mod sandbox_leases;
mod selection;
mod source;
mod support;
mod verify;

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
        /// Time this page only (default: every page).
        #[arg(long, value_enum)]
        only: Option<console::ConsolePage>,
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
            claim::claim_bench("sqlite", None, jobs, harnesses, cap).await?;
            match postgres_url {
                Some(url) => claim::claim_bench("postgres", Some(&url), jobs, harnesses, cap).await?,
                None => println!("postgres: skipped (no --postgres-url)"),
            }
            Ok(())
        }
        BenchCommand::Latency { jobs } => lanes::lane_bench(lanes::Measure::Latency { jobs }).await,
        BenchCommand::Dispatch { jobs, cap } => lanes::lane_bench(lanes::Measure::Dispatch { jobs, cap }).await,
        BenchCommand::DevStart { rest } => dev_start::dev_start_bench(rest).await,
        BenchCommand::Source { files, runs } => source::source(files, runs).await,
        BenchCommand::Sandbox { runs } => sandbox::sandbox(runs).await,
        BenchCommand::SandboxLeases { runs, postgres_url } => sandbox_leases::sandbox_leases(runs, postgres_url).await,
        BenchCommand::Auth {
            postgres_url,
            requests,
            tokens,
            rounds,
        } => auth::auth(postgres_url, requests, tokens, rounds).await,
        BenchCommand::Coverage { postgres_url, samples } => coverage::coverage(postgres_url, samples).await,
        BenchCommand::Verify {
            files,
            runs,
            end_to_end,
            app,
            probes,
        } => {
            verify::verify(files, runs).await?;
            if end_to_end {
                let app = app.unwrap_or_else(support::default_app_dir);
                verify::end_to_end(&app, probes).await?;
            }
            Ok(())
        }
        BenchCommand::Ladder { postgres_url, samples } => ladder::ladder(postgres_url, samples).await,
        BenchCommand::Console { samples, only } => console::console(samples, only).await,
        BenchCommand::Objects {
            samples,
            files,
            first_sync,
            moto_server,
        } => objects::objects(samples, files, first_sync, moto_server).await,
        BenchCommand::Selection { samples } => selection::selection(samples).await,
        BenchCommand::Promote { files, samples } => promote::promote(files, samples).await,
        BenchCommand::Browser { runs, app, bun } => {
            let app = app.unwrap_or_else(support::default_app_dir);
            let bun = bun.unwrap_or_else(support::default_bun);
            browser::browser(&app, &bun, runs).await
        }
    }
}
