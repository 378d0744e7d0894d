//! `belay bench claim`: dispatcher claim throughput over queued jobs on several harnesses, against
//! as many single-row conditional updates on the same backend (SQLite, and PostgreSQL with
//! `--postgres-url`); and the same claims with provider and model lanes on (two providers and four
//! models, each with a cap that binds) beside them off, in the same run.

use super::support::{fresh_store, job};
use anyhow::bail;
use belay_domain::catalogue::{AdapterSpec, HarnessInput, ModelInput, ProviderInput};
use belay_domain::job::{Combination, JobStatus};
use belay_store::Store;
use belay_store::jobs::NewJob;
use std::time::{Duration, Instant};

/// How many providers and models the lanes-on catalogue has.
const PROVIDERS: usize = 2;
const MODELS: usize = 4;

/// With `lanes`: two providers, each capped at 40 % of the harnesses' slots, the harnesses on
/// them alternately, and four models each capped at 25 %, so both kinds of lane bind.
async fn seed_lanes(store: &Store, harnesses: usize, cap: i64) -> anyhow::Result<()> {
    let slots = harnesses as i64 * cap;
    for p in 0..PROVIDERS {
        store
            .create_provider(&ProviderInput {
                name: format!("p{p}"),
                max_parallelism: Some((slots * 2 / 5).max(1)),
            })
            .await?;
    }
    for m in 0..MODELS {
        store
            .create_model(&ModelInput {
                id: format!("m{m}"),
                context_window: None,
                list_price: None,
                provider: None,
                max_parallelism: Some((slots / 4).max(1)),
            })
            .await?;
    }
    Ok(())
}

async fn seed_harnesses(store: &Store, n: usize, cap: i64, lanes: bool) -> anyhow::Result<Vec<String>> {
    if lanes {
        seed_lanes(store, n, cap).await?;
    }
    let mut names = Vec::new();
    for i in 0..n {
        let name = format!("h{i}");
        store
            .create_harness(&HarnessInput {
                provider: lanes.then(|| format!("p{}", i % PROVIDERS)),
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

/// The jobs a claim bench enqueues: interleaved across the harnesses, and across the models.
fn bench_jobs(names: &[String], jobs: usize) -> Vec<NewJob> {
    (0..jobs)
        .map(|i| {
            let mut j = job(&names[i % names.len()]);
            j.combination = Combination::Harness {
                harness: names[i % names.len()].clone(),
                model: format!("m{}", (i / names.len()) % MODELS),
                provider: None,
            };
            j
        })
        .collect()
}

/// Claims every job of a fresh store (each claimed batch finished, not timed, so the next claim
/// finds free slots, as runs ending would): how many, in how many claims, and the time claiming.
async fn claim_all(
    dir: &std::path::Path,
    postgres_url: Option<&str>,
    name: &str,
    jobs: usize,
    harnesses: usize,
    cap: i64,
    lanes: bool,
) -> anyhow::Result<(usize, usize, Duration)> {
    let store = fresh_store(dir, postgres_url, name).await?;
    let names = seed_harnesses(&store, harnesses, cap, lanes).await?;
    for chunk in bench_jobs(&names, jobs).chunks(1000) {
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
    store.close().await;
    Ok((claimed, round, claim_time))
}

pub(super) async fn claim_bench(
    label: &str,
    postgres_url: Option<&str>,
    jobs: usize,
    harnesses: usize,
    cap: i64,
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (claimed, round, claim_time) =
        claim_all(dir.path(), postgres_url, "claim", jobs, harnesses, cap, false).await?;
    let claim_rate = claimed as f64 / claim_time.as_secs_f64();

    // Raw: the same number of single-row conditional updates, one statement and commit each.
    let raw_store = fresh_store(dir.path(), postgres_url, "raw").await?;
    let names = seed_harnesses(&raw_store, harnesses, cap, false).await?;
    let mut ids = Vec::with_capacity(jobs);
    for chunk in bench_jobs(&names, jobs).chunks(1000) {
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
    raw_store.close().await;

    // Lanes on: the same jobs under provider and model lanes that bind, in the same run.
    let (on_claimed, on_round, on_time) =
        claim_all(dir.path(), postgres_url, "lanes", jobs, harnesses, cap, true).await?;
    let on_rate = on_claimed as f64 / on_time.as_secs_f64();
    println!(
        "{label}: lanes on ({PROVIDERS} providers, {MODELS} models, each capped): claimed {on_claimed} jobs in {on_round} claims, \
         {:.3} s = {on_rate:.0} jobs/s; time per job lanes on / off = {:.2}x (target <= 1.2x)",
        on_time.as_secs_f64(),
        claim_rate / on_rate
    );
    Ok(())
}
