//! `belay bench latency` and `belay bench dispatch`: the run lane on a Temporal dev server and
//! worker pools of its own. Latency: job enqueued → run recorded with a no-op adapter, against a
//! bare one-activity workflow on the same server and worker. Dispatch: no-op jobs on one harness
//! enqueued at once, first enqueue → last run recorded, against bare one-activity workflows kept
//! at the harness's cap in flight on the same server.

use super::support::{job, percentile, temporal, worker_deps};
use anyhow::bail;
use belay_domain::catalogue::{AdapterSpec, HarnessInput, ListPrice, ModelInput, TestCaseVersionInput, TestType};
use belay_domain::job::JobStatus;
use belay_store::Store;
use belay_store::jobs::NewJob;
use belay_worker::Pool;
use std::path::Path;
use std::time::{Duration, Instant};

/// What a bench of the run lane measures, on a Temporal dev server and worker pools of its own.
#[derive(Debug, Clone, Copy)]
pub(super) enum Measure {
    /// One job at a time, `jobs` times.
    Latency { jobs: usize },
    /// `jobs` at once on a harness with cap `cap`.
    Dispatch { jobs: usize, cap: i64 },
}

pub(super) async fn lane_bench(measure: Measure) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (server, address) = temporal(dir.path()).await?;
    let result = lane_with_server(dir.path(), &address, measure).await;
    server.stop().await;
    result
}

async fn lane_with_server(dir: &Path, address: &str, measure: Measure) -> anyhow::Result<()> {
    let client = belay_client::connect(address, "default", "belay-bench").await?;
    let store = Store::connect(&format!("sqlite:{}", dir.join("belay.db").display())).await?;
    store.migrate().await?;
    let noop = r#"printf '{"status":"completed","loaded":true}' > "$BELAY_MANIFEST""#;
    store
        .create_harness(&HarnessInput {
            provider: None,
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
            review_domains: None,
        })
        .await?;
    store
        .create_model(&ModelInput {
            provider: None,
            max_parallelism: None,
            id: "m".into(),
            context_window: Some(1000),
            list_price: Some(ListPrice {
                input_per_mtok_usd: 1.0,
                output_per_mtok_usd: 1.0,
            }),
        })
        .await?;
    let deps = worker_deps(&client, &store, dir)?;
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
