//! `belay bench ladder`: a ladder of 50 rungs × 100 climbers at 5 runs per cell, each climber
//! standing on its own rung (every cell below it holds 5 runs with reviews on half of them, every
//! cell above it 5 runs too), on SQLite and (with `--postgres-url`) PostgreSQL, through a real
//! API, Temporal dev server and worker pools in this process:
//!
//! - `GET …/progress` median and p95, against the raw queries it is built from on the same data;
//! - a ladder top-up (one current rung per climber: 100 launchable cells of 5) median and p95,
//!   against a plan top-up of 100 launchable cells of 5.

use super::support::{
    HARNESSES, LADDER_RUNGS as RUNGS, LADDER_RUNS_PER_CELL as RUNS_PER_CELL, MODELS, Steps, combo, fresh_store,
    ladder_body, pin, run_stack, seed_ladder, standing, stats, temporal, timed, timed_get,
};
use anyhow::{Context, ensure};
use belay_domain::buffer::outstanding;
use belay_domain::ids::{AccountId, LadderId};
use belay_domain::job::{JobStatus, Origin};
use belay_domain::progress::progress;
use belay_store::Store;
use belay_store::ladders;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Instant;

pub(super) async fn ladder(postgres_url: Option<String>, samples: usize) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (server, address) = temporal(dir.path()).await?;
    let mut result = backend("sqlite", None, dir.path(), &address, samples).await;
    if result.is_ok() {
        result = match &postgres_url {
            Some(url) => backend("postgres", Some(url), dir.path(), &address, samples).await,
            None => {
                println!("postgres: skipped (no --postgres-url)");
                Ok(())
            }
        };
    }
    server.stop().await;
    result
}

async fn backend(label: &str, postgres: Option<&str>, dir: &Path, address: &str, samples: usize) -> anyhow::Result<()> {
    let dir = dir.join(label);
    std::fs::create_dir_all(&dir)?;
    let store = fresh_store(&dir, postgres, "ladder").await?;
    let client = belay_client::connect(address, "default", "belay-bench").await?;
    let (account, token) = seed_ladder(label, &store).await?;
    let measure = |api: String| {
        let store = store.clone();
        async move { measure(label, &store, &api, &token, &account.id, samples).await }
    };
    let figures = run_stack(&store, &client, &dir, measure).await;
    store.close().await;
    figures
}

/// Times the board's steps once: resolving the ladder (its row, climbers, steering and cells),
/// the reads (grouped runs and jobs, waiting jobs, verdicts, catalogue), computing the board and
/// its buffer figures, and writing the board's JSON.
async fn board_steps(store: &Store, account_id: &str, id: &str) -> anyhow::Result<(Vec<(&'static str, f64)>, usize)> {
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1000.0;
    let t = Instant::now();
    let mut tx = store.begin_read().await?;
    let r = ladders::resolve_ladder(&mut tx, &AccountId::from(account_id), &LadderId::from(id))
        .await?
        .context("the ladder")?;
    let resolve = ms(t);
    let t = Instant::now();
    let (evidence, facts) = ladders::read_evidence(&mut tx, &AccountId::from(account_id), &r, false).await?;
    tx.commit().await?;
    let reads = ms(t);
    let t = Instant::now();
    let p = progress(&r.ladder, &r.climbers, &evidence, &facts.cases, &facts.launch);
    let reached = p.board.reached_cells();
    let buffered = outstanding(reached.iter().copied());
    let build = ms(t);
    let t = Instant::now();
    let body = serde_json::to_vec(&(&p.board, buffered))?;
    let json = ms(t);
    Ok((
        vec![("resolve", resolve), ("reads", reads), ("board", build), ("JSON", json)],
        body.len(),
    ))
}

async fn measure(
    label: &str,
    store: &Store,
    api: &str,
    token: &str,
    account_id: &str,
    samples: usize,
) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let call = |method: reqwest::Method, path: String, body: Option<Value>| {
        let mut r = http.request(method, format!("{api}{path}")).bearer_auth(token);
        if let Some(b) = body {
            r = r.json(&b);
        }
        async move {
            let resp = r.send().await?;
            let status = resp.status();
            let v: Value = resp.json().await?;
            ensure!(status.is_success(), "{status}: {v}");
            anyhow::Ok(v)
        }
    };
    let ladder = call(reqwest::Method::POST, "/v1/ladders".into(), Some(ladder_body())).await?;
    let id = ladder["id"].as_str().context("ladder id")?.to_string();

    // 1. The board through the API against the raw queries it is built from, and where the API's
    //    time goes: the same steps in this process, each timed.
    let mut board = Vec::new();
    let mut raw = Vec::new();
    let mut steps = Steps::default();
    for i in 0..samples + 2 {
        let (a, p) = timed_get(&http, format!("{api}/v1/ladders/{id}/progress"), token).await?;
        let on: Vec<&Value> = p["climbers"].as_array().context("climbers")?.iter().collect();
        ensure!(on.len() == HARNESSES * MODELS, "a climber is missing");
        ensure!(
            on.iter()
                .enumerate()
                .all(|(c, v)| v["currentRung"] == p["rungs"][standing(c)]["rungId"]),
            "a climber stands elsewhere than seeded"
        );
        let (b, rows) = {
            let (store, account_id, id) = (store.clone(), account_id.to_string(), id.clone());
            timed(async move {
                Ok(store
                    .bench_raw_ladder_reads(&AccountId::from(account_id.as_str()), &LadderId::from(id.as_str()))
                    .await?)
            })
            .await?
        };
        ensure!(rows >= 20_000, "the raw reads counted {rows} runs and rows");
        let (_, step) = {
            let (store, account_id, id) = (store.clone(), account_id.to_string(), id.clone());
            timed(async move { board_steps(&store, &account_id, &id).await }).await?
        };
        if i >= 2 {
            board.push(a);
            raw.push(b);
            steps.push(step);
        }
    }
    let (b50, b95) = stats(board);
    let (r50, r95) = stats(raw);
    println!(
        "{label}: GET progress of 50 rungs × 100 climbers median {b50:.1} ms, p95 {b95:.1} ms; raw queries median {r50:.1} ms, p95 {r95:.1} ms; ratio {:.2}",
        b50 / r50
    );
    steps.print(label, "GET progress", b50);

    // 2. A ladder top-up (100 current rungs of 5) against a plan top-up of 100 cells of 5.
    let cases: Vec<Value> = (RUNGS..RUNGS + 10).map(|i| json!(pin(i))).collect();
    let combos: Vec<Value> = (0..HARNESSES).map(|h| json!(combo(h, 0))).collect();
    let plan = call(
        reqwest::Method::POST,
        "/v1/coverage-plans".into(),
        Some(
            json!({"name": "bench", "cases": cases, "combinations": combos, "runsPerCell": RUNS_PER_CELL,
                    "bufferTarget": {"kind": "unbounded"}, "autoTopUp": false}),
        ),
    )
    .await?;
    let plan_id = plan["id"].as_str().context("plan id")?.to_string();
    let enabled = call(reqwest::Method::POST, format!("/v1/ladders/{id}/enable"), None).await?;
    let first = enabled["topUp"]["enqueued"].as_i64();
    ensure!(first == Some(500), "enabling enqueued {first:?}");
    let lad_origin = Origin::Ladder(id.clone()).to_string();
    let plan_origin = Origin::Plan(plan_id.clone()).to_string();
    let mut ladder_times = Vec::new();
    let mut plan_times = Vec::new();
    for i in 0..samples + 2 {
        // Room again: the previous top-ups' jobs are cancelled (not timed).
        store.cancel_jobs(&JobStatus::IN_FLIGHT, Some(&lad_origin)).await?;
        store.cancel_jobs(&JobStatus::IN_FLIGHT, Some(&plan_origin)).await?;
        let t = Instant::now();
        let up = call(reqwest::Method::POST, format!("/v1/ladders/{id}/topup"), None).await?;
        let a = t.elapsed().as_secs_f64() * 1000.0;
        ensure!(
            up["enqueued"].as_i64() == Some(500),
            "the ladder top-up answered {}",
            up["enqueued"]
        );
        let t = Instant::now();
        let up = call(
            reqwest::Method::POST,
            format!("/v1/coverage-plans/{plan_id}/topup"),
            None,
        )
        .await?;
        let b = t.elapsed().as_secs_f64() * 1000.0;
        ensure!(
            up["enqueued"].as_i64() == Some(500),
            "the plan top-up answered {}",
            up["enqueued"]
        );
        if i >= 2 {
            ladder_times.push(a);
            plan_times.push(b);
        }
    }
    let (l50, l95) = stats(ladder_times);
    let (p50, p95) = stats(plan_times);
    println!(
        "{label}: ladder top-up (100 cells of 5) median {l50:.1} ms, p95 {l95:.1} ms; plan top-up (100 cells of 5) median {p50:.1} ms, p95 {p95:.1} ms; ratio {:.2}",
        l50 / p50
    );
    Ok(())
}
