//! `belay bench claim`: dispatcher claim throughput over queued jobs on several harnesses, against
//! as many single-row conditional updates on the same backend (SQLite, and PostgreSQL with
//! `--postgres-url`).

use super::support::{fresh_store, job};
use anyhow::bail;
use belay_domain::catalogue::{AdapterSpec, HarnessInput};
use belay_domain::job::JobStatus;
use belay_store::Store;
use belay_store::jobs::NewJob;
use std::time::{Duration, Instant};

async fn seed_harnesses(store: &Store, n: usize, cap: i64) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    for i in 0..n {
        let name = format!("h{i}");
        store
            .create_harness(&HarnessInput {
                provider: None,
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

pub(super) async fn claim_bench(
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
