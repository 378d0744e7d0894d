//! `belay bench coverage`: a plan of 100 cases × 100 combinations (10,000 cells) over a database
//! holding 100,000 runs and 20,000 jobs of those cells, on SQLite and (with `--postgres-url`)
//! PostgreSQL, through a real API, Temporal dev server and worker pools in this process:
//!
//! - `GET …/coverage` median and p95, against the raw grouped-count queries on the same data;
//! - one unbounded top-up of that plan (every missing cell enqueued), against the landed batch
//!   enqueue of the same number of jobs;
//! - one bounded top-up (buffer 10) of a small plan end to end through the API, against a bare
//!   one-activity workflow on the same server;
//! - budgets on against off (decision 0054), every seeded run priced so each estimate is a mean:
//!   the bounded top-up of the small plan with a budget against its twin without one, and the
//!   unbounded top-up of the 10,000 cells with a budget they all fit under against none.

use super::support::{
    CASES, HARNESSES, MODELS, Steps, combo, fresh_store, ingest, pin, plan_body, run_stack, seed_plan, stats, temporal,
    timed, timed_get,
};
use anyhow::{Context, ensure};
use belay_domain::budget::Micros;
use belay_domain::catalogue::TestType;
use belay_domain::ids::{AccountId, PlanId};
use belay_domain::job::{JobStatus, Origin};
use belay_store::jobs::NewJob;
use belay_store::{Store, coverage};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Instant;

/// Times the matrix's steps once: resolving the plan (its row, groups and cells), the grouped
/// counts and catalogue reads, computing the cells, and writing the JSON body.
async fn matrix_steps(store: &Store, account_id: &str, id: &str) -> anyhow::Result<(Vec<(&'static str, f64)>, usize)> {
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1000.0;
    let t = Instant::now();
    let mut tx = store.begin_read().await?;
    let r = coverage::resolve_plan(&mut tx, &AccountId::from(account_id), &PlanId::from(id))
        .await?
        .context("the plan")?;
    let resolve = ms(t);
    let t = Instant::now();
    let f = coverage::matrix_facts(&mut tx, &AccountId::from(account_id), &r.cells).await?;
    tx.commit().await?;
    let reads = ms(t);
    let t = Instant::now();
    let m = belay_domain::matrix::matrix(&r.cells, r.plan.runs_per_cell, &f.counts, &f.cases, &f.launch);
    let build = ms(t);
    let t = Instant::now();
    let body = serde_json::to_vec(&m)?;
    let json = ms(t);
    Ok((
        vec![
            ("resolve", resolve),
            ("grouped reads", reads),
            ("cells", build),
            ("JSON", json),
        ],
        body.len(),
    ))
}

pub(super) async fn coverage(postgres_url: Option<String>, samples: usize) -> anyhow::Result<()> {
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
    let store = fresh_store(&dir, postgres, "coverage").await?;
    let client = belay_client::connect(address, "default", "belay-bench").await?;
    let (account, token) = seed_plan(label, &store).await?;

    let measure = |api: String| {
        let (store, client) = (store.clone(), client.clone());
        async move { measure(label, &store, &client, &api, &token, &account.id, samples).await }
    };
    let figures = run_stack(&store, &client, &dir, measure).await;
    store.close().await;
    figures
}

async fn measure(
    label: &str,
    store: &Store,
    client: &temporalio_client::Client,
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
    let plan = call(reqwest::Method::POST, "/v1/coverage-plans".into(), Some(plan_body())).await?;
    let id = plan["id"].as_str().context("plan id")?.to_string();

    // 1. The matrix through the API against the raw grouped counts, each timed on a task of its
    //    own, and where the API's time goes: the same steps in this process, each timed.
    let mut matrix = Vec::new();
    let mut raw = Vec::new();
    let mut steps = Steps::default();
    // The same counts as the matrix reads them: packed into one row each on SQLite (decision 0033).
    let mut packed = Vec::new();
    for i in 0..samples + 2 {
        let (a, m) = timed_get(&http, format!("{api}/v1/coverage-plans/{id}/coverage"), token).await?;
        ensure!(
            m["cells"].as_array().map(Vec::len) == Some(CASES * HARNESSES * MODELS),
            "a cell is missing"
        );
        let (b, rows) = {
            let (store, account_id) = (store.clone(), account_id.to_string());
            timed(async move {
                Ok(store
                    .bench_raw_grouped_counts(&AccountId::from(account_id.as_str()))
                    .await?)
            })
            .await?
        };
        ensure!(rows >= CASES * HARNESSES * MODELS, "the raw counts read {rows} rows");
        let (_, step) = {
            let (store, account_id, id) = (store.clone(), account_id.to_string(), id.clone());
            timed(async move { matrix_steps(&store, &account_id, &id).await }).await?
        };
        let (c, packed_rows) = {
            let (store, account_id) = (store.clone(), account_id.to_string());
            timed(async move {
                Ok(store
                    .bench_raw_grouped_counts_packed(&AccountId::from(account_id.as_str()))
                    .await?)
            })
            .await?
        };
        ensure!(packed_rows == rows, "packed {packed_rows} rows, row by row {rows}");
        if i >= 2 {
            matrix.push(a);
            raw.push(b);
            steps.push(step);
            packed.push(c);
        }
    }
    let (m50, m95) = stats(matrix);
    let (r50, r95) = stats(raw);
    println!(
        "{label}: GET coverage of 10,000 cells median {m50:.1} ms, p95 {m95:.1} ms; raw grouped counts median {r50:.1} ms, p95 {r95:.1} ms; ratio {:.2}",
        m50 / r50
    );
    steps.print(label, "GET coverage", m50);
    let (c50, c95) = stats(packed);
    println!(
        "{label}: the same grouped counts as the matrix reads them (packed into one row each on SQLite) median {c50:.1} ms, p95 {c95:.1} ms"
    );

    // 2. One unbounded top-up against the landed batch enqueue of as many jobs.
    let t = Instant::now();
    let up = call(reqwest::Method::POST, format!("/v1/coverage-plans/{id}/topup"), None).await?;
    let top_secs = t.elapsed().as_secs_f64();
    let n = up["enqueued"].as_i64().context("enqueued")? as usize;
    ensure!(n == CASES * HARNESSES * MODELS, "the top-up enqueued {n}");
    let batch: Vec<NewJob> = (0..n)
        .map(|i| NewJob {
            case: pin(i % CASES),
            combination: combo(i % HARNESSES, (i / HARNESSES) % MODELS),
            gg_config_name: None,
            capabilities: None,
            test_type: Some(TestType::Standard),
            user_id: Some(account_id.into()),
            origin: None,
            attempt: 1,
            retry_of: None,
        })
        .collect();
    let t = Instant::now();
    store.enqueue_batch(batch).await?;
    let batch_secs = t.elapsed().as_secs_f64();
    println!(
        "{label}: unbounded top-up enqueued {n} jobs in {top_secs:.2} s ({:.0} jobs/s); batch enqueue of {n} in {batch_secs:.2} s ({:.0} jobs/s); ratio {:.2}",
        n as f64 / top_secs,
        n as f64 / batch_secs,
        top_secs / batch_secs
    );

    // 3. A bounded top-up (buffer 10) of a small plan through the API, against a bare
    //    one-activity workflow on the same server.
    let mut small_cases = Vec::new();
    for i in 0..10 {
        let slug = format!("small{i}");
        ingest(store, &slug).await?;
        small_cases.push(json!({"slug": slug, "version": "1.0.0", "variant": "default"}));
    }
    let small = call(
        reqwest::Method::POST,
        "/v1/coverage-plans".into(),
        Some(small_body(&small_cases)),
    )
    .await?;
    let small_id = small["id"].as_str().context("plan id")?.to_string();
    let origin = Origin::Plan(small_id.clone()).to_string();
    // Its twin with a budget every top-up fits under: the same walk over cells of its own (cells
    // are counted globally), reserving against a budget.
    let mut twin_cases = Vec::new();
    for i in 0..10 {
        let slug = format!("twin{i}");
        ingest(store, &slug).await?;
        twin_cases.push(json!({"slug": slug, "version": "1.0.0", "variant": "default"}));
    }
    let mut twin_body = small_body(&twin_cases);
    twin_body["budget"] = json!({"usd": 1_000_000.0});
    let twin = call(reqwest::Method::POST, "/v1/coverage-plans".into(), Some(twin_body)).await?;
    let twin_id = twin["id"].as_str().context("plan id")?.to_string();
    let twin_origin = Origin::Plan(twin_id.clone()).to_string();
    ensure!(store.bench_price_runs(Micros(100_000)).await? > 0, "no run was priced");
    let mut topups = Vec::new();
    let mut floor = Vec::new();
    let mut budgeted = Vec::new();
    for i in 0..samples + 3 {
        // Room again: the previous top-ups' jobs are cancelled (not timed).
        store.cancel_jobs(&JobStatus::IN_FLIGHT, Some(&origin)).await?;
        store.cancel_jobs(&JobStatus::IN_FLIGHT, Some(&twin_origin)).await?;
        let t = Instant::now();
        let up = call(
            reqwest::Method::POST,
            format!("/v1/coverage-plans/{small_id}/topup"),
            None,
        )
        .await?;
        let a = t.elapsed().as_secs_f64() * 1000.0;
        ensure!(up["enqueued"].as_i64() == Some(10), "the small top-up answered {up}");
        let t = Instant::now();
        let h = client
            .start_workflow(
                belay_workflows::probe::ProbeWorkflow::run,
                format!("p{i}"),
                temporalio_client::WorkflowStartOptions::new(
                    belay_workflows::queues::WORKFLOWS,
                    format!("probe-cov-{}-{label}-{i}", std::process::id()),
                )
                .build(),
            )
            .await?;
        let _: String = h
            .get_result(temporalio_client::WorkflowGetResultOptions::default())
            .await?;
        let b = t.elapsed().as_secs_f64() * 1000.0;
        let t = Instant::now();
        let up = call(
            reqwest::Method::POST,
            format!("/v1/coverage-plans/{twin_id}/topup"),
            None,
        )
        .await?;
        let c = t.elapsed().as_secs_f64() * 1000.0;
        ensure!(
            up["enqueued"].as_i64() == Some(10) && up["skipped"].is_null(),
            "the budgeted top-up answered {up}"
        );
        if i >= 3 {
            topups.push(a);
            floor.push(b);
            budgeted.push(c);
        }
    }
    let (t50, t95) = stats(topups);
    let (f50, f95) = stats(floor);
    println!(
        "{label}: bounded top-up (buffer 10) through the API median {t50:.1} ms, p95 {t95:.1} ms; bare one-activity workflow median {f50:.1} ms, p95 {f95:.1} ms; ratio {:.2}",
        t50 / f50
    );
    let (b50, b95) = stats(budgeted);
    println!(
        "{label}: budgets: bounded top-up (buffer 10) with a budget median {b50:.1} ms, p95 {b95:.1} ms; without one median {t50:.1} ms; ratio {:.2}",
        b50 / t50
    );
    unbounded_budgets(label, store, &call, (&id, account_id), n).await
}

/// A plan of ten small cases on two combinations, its top-ups bounded at 10.
fn small_body(cases: &[Value]) -> Value {
    json!({"name": "small", "cases": cases, "combinations": [json!(combo(0, 0)), json!(combo(1, 1))],
           "runsPerCell": 1, "bufferTarget": {"kind": "bounded", "runs": 10}, "autoTopUp": false})
}

/// The unbounded top-up of the 10,000-cell plan `id` (`n` jobs) without a budget and with one
/// they all fit under, alternately, twice each; the queued jobs of the earlier top-ups (and of the
/// batch enqueue) cancelled between, untimed, so each top-up finds every cell missing one run.
async fn unbounded_budgets<C, F>(
    label: &str,
    store: &Store,
    call: &C,
    (id, account_id): (&str, &str),
    n: usize,
) -> anyhow::Result<()>
where
    C: Fn(reqwest::Method, String, Option<Value>) -> F,
    F: std::future::Future<Output = anyhow::Result<Value>>,
{
    let (mut off, mut on) = (Vec::new(), Vec::new());
    // Each round alternates which goes first, so neither always follows the bigger cancel.
    for round in 0..2 {
        let order = if round % 2 == 0 { [false, true] } else { [true, false] };
        for with_budget in order {
            store
                .cancel_jobs(&[JobStatus::Queued, JobStatus::Pending], None)
                .await?;
            let mut body = plan_body();
            if with_budget {
                body["budget"] = json!({"usd": 1_000_000.0});
            }
            call(reqwest::Method::PUT, format!("/v1/coverage-plans/{id}"), Some(body)).await?;
            let t = Instant::now();
            let up = call(reqwest::Method::POST, format!("/v1/coverage-plans/{id}/topup"), None).await?;
            let secs = t.elapsed().as_secs_f64();
            ensure!(
                up["enqueued"].as_i64() == Some(n as i64),
                "the top-up (budget {with_budget}) enqueued {}",
                up["enqueued"]
            );
            if with_budget { on.push(secs) } else { off.push(secs) }
        }
    }
    // What every top-up (budget or none) adds to its reads: the measured means its missing
    // cells need, here all 10,000 cells' and their 100 combinations' (the whole table).
    let mut cells = {
        let mut tx = store.begin_read().await?;
        let account = AccountId::from(account_id);
        let r = coverage::resolve_plan(&mut tx, &account, &PlanId::from(id))
            .await?
            .context("the plan")?;
        let f = coverage::matrix_facts(&mut tx, &account, &r.cells).await?;
        tx.commit().await?;
        belay_domain::matrix::matrix(&r.cells, r.plan.runs_per_cell, &f.counts, &f.cases, &f.launch).cells
    };
    // As a top-up finds them: every cell missing a run.
    for c in &mut cells {
        c.remaining = 1;
    }
    let mut means = Vec::new();
    for _ in 0..12 {
        let t = Instant::now();
        let found = store.bench_measured_means(&cells).await?;
        ensure!(found >= n, "the means priced {found} cells");
        means.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let (e50, e95) = stats(means.split_off(2));
    println!(
        "{label}: budgets: the estimates' read (the means of {} missing cells and their combinations) median {e50:.1} ms, p95 {e95:.1} ms",
        cells.len()
    );
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (a, b) = (mean(&on), mean(&off));
    println!(
        "{label}: budgets: unbounded top-up of {n} jobs with a budget {a:.2} s (mean of {}); without one {b:.2} s; ratio {:.2}",
        on.len(),
        a / b
    );
    Ok(())
}
