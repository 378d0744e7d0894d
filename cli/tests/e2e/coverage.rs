//! Coverage plans end to end: real `belay` API and worker processes, a real Temporal server, a
//! real database. The matrix's counts, the buffer's instructions, the cap-aware walk, concurrent
//! top-ups, the claim's lease, halts, the scoped queue, bad input, and a recorded TopUpWorkflow
//! history that replays.

use crate::common::{Belay, create_account, replays, wait_for};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

const OK_SCRIPT: &str = r#"printf '{"status":"completed","loaded":true}' > "$BELAY_MANIFEST""#;
const SLOW_SCRIPT: &str = r#"sleep 600; printf '{"status":"completed","loaded":true}' > "$BELAY_MANIFEST""#;

fn case(slug: &str, version: &str) -> Value {
    json!({"slug": slug, "version": version, "variant": "default"})
}

fn harness(h: &str) -> Value {
    json!({"kind": "harness", "harness": h, "model": "m"})
}

async fn ingest(b: &Belay, slug: &str, version: &str, test_type: &str, engines: &[&str]) {
    let (s, v) = b
        .post(
            "/v1/test-cases",
            json!({"slug": slug, "version": version, "testType": test_type, "variants": ["default"], "engines": engines}),
        )
        .await;
    assert_eq!(s, 201, "{v}");
}

async fn call(b: &Belay, method: &str, path: &str, token: &str, body: Option<Value>) -> (u16, Value) {
    b.request(method, path, Some(token), body.map(|v| v.to_string()).as_deref())
        .await
}

async fn plan(b: &Belay, body: Value) -> String {
    let (s, v) = b.post("/v1/coverage-plans", body).await;
    assert_eq!(s, 201, "{v}");
    v["id"].as_str().unwrap().to_string()
}

async fn topup(b: &Belay, id: &str) -> Value {
    let (s, v) = b.post(&format!("/v1/coverage-plans/{id}/topup"), json!({})).await;
    assert_eq!(s, 200, "{v}");
    v
}

async fn jobs_of(b: &Belay, id: &str) -> Vec<Value> {
    b.get(&format!("/v1/jobs?origin=plan:{id}&limit=10000"))
        .await
        .as_array()
        .unwrap()
        .clone()
}

async fn launch_as(b: &Belay, token: &str, case: Value, combination: Value) -> Value {
    let (s, v) = call(
        b,
        "POST",
        "/v1/jobs",
        token,
        Some(json!({"case": case, "combination": combination})),
    )
    .await;
    assert_eq!(s, 201, "{v}");
    v
}

async fn run_of(b: &Belay, job: &str) -> String {
    b.wait_status(job, &["completed"], Duration::from_secs(60)).await;
    let runs = b.get(&format!("/v1/runs?jobId={job}")).await;
    runs[0]["id"].as_str().unwrap().to_string()
}

async fn review_as(b: &Belay, token: &str, run: &str) {
    let (s, v) = call(
        b,
        "POST",
        &format!("/v1/runs/{run}/review"),
        token,
        Some(json!({"ratings": {"code": "great"}})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_matrix_counts_every_run_of_the_exact_cell_and_unreviewed_is_the_callers() {
    let b = Belay::start().await;
    b.catalogue().await;
    ingest(&b, "d", "1.0.0", "standard", &["godot"]).await;
    b.harness("x", 4, OK_SCRIPT).await;
    b.harness("gg", 4, OK_SCRIPT).await;
    let (s, cfg) = b
        .post("/v1/gg-configs", json!({"name": "g", "launchSlots": ["root"]}))
        .await;
    assert_eq!(s, 201, "{cfg}");
    let gg = json!({"kind": "gg", "ggConfigId": cfg["id"], "bindings": {"root": "m"}});
    let id = plan(
        &b,
        json!({"name": "p", "cases": [case("c", "1.0.0"), case("d", "1.0.0")], "combinations": [harness("x"), gg],
               "runsPerCell": 3, "bufferTarget": {"kind": "bounded", "runs": 0}}),
    )
    .await;
    let m = b.get(&format!("/v1/coverage-plans/{id}/coverage")).await;
    let cells = m["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    for c in cells {
        assert_eq!(c["desired"], 3);
        assert_eq!(c["remaining"], 3);
        assert_eq!(c["stale"], false);
        assert_eq!(c["unlaunchable"], Value::Null);
        for f in [
            "completed",
            "inFlight",
            "pending",
            "unreviewed",
            "latestVersion",
            "cellKey",
            "case",
            "combination",
        ] {
            assert!(c.get(f).is_some(), "{f} missing from {c}");
        }
    }
    assert_eq!(m["totals"]["desired"], 12);

    // Another account launches c × x by hand; its run counts here, its review is its own.
    let bob = create_account(&b.database_url, "bob");
    let job = launch_as(&b, &bob, case("c", "1.0.0"), harness("x")).await;
    let run = run_of(&b, job["id"].as_str().unwrap()).await;
    review_as(&b, &bob, &run).await;
    // A run on another engine of d, and one of c by the owner on the same cell but reviewed.
    let godot = launch_as(
        &b,
        &b.token,
        json!({"slug": "d", "version": "1.0.0", "variant": "default", "engine": "godot"}),
        harness("x"),
    )
    .await;
    run_of(&b, godot["id"].as_str().unwrap()).await;
    let m = b.get(&format!("/v1/coverage-plans/{id}/coverage")).await;
    let c_x = &m["cells"][0];
    assert_eq!(c_x["cellKey"], "c@1.0.0/default/none × x/m");
    assert_eq!(
        (c_x["completed"].as_i64(), c_x["unreviewed"].as_i64()),
        (Some(1), Some(1))
    );
    assert_eq!(c_x["remaining"], 2);
    let d_x = &m["cells"][2];
    assert_eq!(d_x["completed"], 0, "a run on another engine does not count: {d_x}");
    // Bob sees the same counts and nothing left to review.
    let (_, mb) = call(&b, "GET", &format!("/v1/coverage-plans/{id}/coverage"), &bob, None).await;
    assert_eq!(mb["error"]["code"], "not_found", "another account's plan is not found");

    // A newer version of c: stale, the target unmoved; a run of it does not count either.
    ingest(&b, "c", "1.1.0", "standard", &[]).await;
    let newer = launch_as(&b, &b.token, case("c", "1.1.0"), harness("x")).await;
    run_of(&b, newer["id"].as_str().unwrap()).await;
    let m = b.get(&format!("/v1/coverage-plans/{id}/coverage")).await;
    let c_x = &m["cells"][0];
    assert_eq!(c_x["stale"], true);
    assert_eq!(c_x["latestVersion"], "1.1.0");
    assert_eq!(c_x["desired"], 3);
    assert_eq!(c_x["completed"], 1);

    // Deleting the configuration keeps its cells countable and says why they cannot launch.
    let (s, _) = b
        .request(
            "DELETE",
            &format!("/v1/gg-configs/{}", cfg["id"].as_str().unwrap()),
            Some(&bob),
            None,
        )
        .await;
    assert_eq!(s, 404, "only the owner deletes a configuration");
    let (s, _) = b
        .request(
            "DELETE",
            &format!("/v1/gg-configs/{}", cfg["id"].as_str().unwrap()),
            Some(&b.token),
            None,
        )
        .await;
    assert_eq!(s, 204);
    let m = b.get(&format!("/v1/coverage-plans/{id}/coverage")).await;
    assert_eq!(m["cells"][1]["unlaunchable"]["code"], "gg_config_deleted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_buffer_stops_at_the_cell_boundary_and_null_zero_unbounded_and_600_are_distinct() {
    let b = Belay::start().await;
    b.catalogue().await;
    ingest(&b, "d", "1.0.0", "standard", &[]).await;
    ingest(&b, "e", "1.0.0", "standard", &[]).await;
    b.harness("x", 100, SLOW_SCRIPT).await;
    let cases = json!([case("c", "1.0.0"), case("d", "1.0.0"), case("e", "1.0.0")]);
    let id = plan(
        &b,
        json!({"name": "p", "cases": cases, "combinations": [harness("x")], "runsPerCell": 3,
               "bufferTarget": {"kind": "bounded", "runs": 4}}),
    )
    .await;
    let first = topup(&b, &id).await;
    assert_eq!(first["skipped"], Value::Null);
    assert_eq!(first["occupancy"], 0);
    assert_eq!(first["bufferTarget"], json!({"kind": "bounded", "runs": 4}));
    assert_eq!(first["enqueued"], 6, "{first}");
    let launched = first["launched"].as_array().unwrap();
    assert_eq!(launched.len(), 2);
    assert!(launched.iter().all(|l| l["jobIds"].as_array().unwrap().len() == 3));
    let second = topup(&b, &id).await;
    assert_eq!(
        (second["enqueued"].as_i64(), second["occupancy"].as_i64()),
        (Some(0), Some(6))
    );
    assert_eq!(second["skipped"], Value::Null);
    assert_eq!(jobs_of(&b, &id).await.len(), 6);
    // Claim, enqueue and release ran as one activity, behind the patch marker.
    let h = replays(&b, "topup-plan-v2", &format!("topup-plan-{id}")).await;
    let patches = belay_client::replay::patches(&h).unwrap();
    assert!(
        patches.iter().any(|p| p == belay_workflows::top_up::ONE_STEP_TOP_UP),
        "{patches:?}"
    );
    assert_eq!(crate::common::scheduled_activities(&h), ["db.topup_one_step"]);
    assert!(
        b.get("/v1/events?limit=1000")
            .await
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "coverage_plan.topped_up"),
        "the top-up is in the events"
    );

    // Null inherits the account's target; 600 is clamped to 500.
    let (s, _) = b
        .post(
            "/v1/models",
            json!({"id": "m2", "contextWindow": 1000, "listPrice": {"inputPerMtokUsd": 1.0, "outputPerMtokUsd": 1.0}}),
        )
        .await;
    assert_eq!(s, 201);
    let m2 = json!({"kind": "harness", "harness": "x", "model": "m2"});
    let (s, v) = call(
        &b,
        "PUT",
        "/v1/coverage-settings",
        &b.token,
        Some(json!({"bufferTarget": {"kind": "bounded", "runs": 600}})),
    )
    .await;
    assert_eq!((s, &v["bufferTarget"]["runs"]), (200, &json!(500)));
    assert_eq!(b.get("/v1/coverage-settings").await["bufferTarget"]["runs"], 500);
    let (s, v) = call(
        &b,
        "PUT",
        "/v1/coverage-settings",
        &b.token,
        Some(json!({"bufferTarget": {"kind": "bounded", "runs": -1}})),
    )
    .await;
    assert_eq!(s, 422, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("bufferTarget.runs"),
        "{v}"
    );
    let (s, _) = call(
        &b,
        "PUT",
        "/v1/coverage-settings",
        &b.token,
        Some(json!({"bufferTarget": {"kind": "bounded", "runs": 3}})),
    )
    .await;
    assert_eq!(s, 200);
    let inherit = plan(
        &b,
        json!({"name": "inherit", "cases": [case("e", "1.0.0")], "combinations": [json!({"kind": "harness", "harness": "x", "model": "m", "provider": null}), m2], "runsPerCell": 3, "bufferTarget": null}),
    )
    .await;
    let t = topup(&b, &inherit).await;
    assert_eq!(t["bufferTarget"], json!({"kind": "bounded", "runs": 3}));
    assert_eq!(
        t["enqueued"], 3,
        "one cell fills the inherited bound of 3 (the default 10 would take both): {t}"
    );
    // A plan of 600 shows 500.
    let big = plan(
        &b,
        json!({"name": "big", "cases": [case("e", "1.0.0")], "combinations": [harness("x")], "runsPerCell": 1, "bufferTarget": {"kind": "bounded", "runs": 600}}),
    )
    .await;
    assert_eq!(
        b.get(&format!("/v1/coverage-plans/{big}")).await["bufferTarget"]["runs"],
        500
    );

    // Zero: opening starts nothing; a requested top-up runs and enqueues 0.
    let zero = plan(
        &b,
        json!({"name": "zero", "cases": [case("e", "1.0.0")], "combinations": [harness("x")], "runsPerCell": 5, "bufferTarget": {"kind": "bounded", "runs": 0}}),
    )
    .await;
    let (s, m) = b.post(&format!("/v1/coverage-plans/{zero}/open"), json!({})).await;
    assert_eq!(s, 200, "{m}");
    assert_eq!(
        jobs_of(&b, &zero).await.len(),
        0,
        "opening under a bound of 0 starts nothing"
    );
    let t = topup(&b, &zero).await;
    assert_eq!((t["skipped"].clone(), t["enqueued"].clone()), (Value::Null, json!(0)));
    assert_eq!(jobs_of(&b, &zero).await.len(), 0);

    // Unbounded tops up everything; opening with autoTopUp on starts it.
    let all = plan(
        &b,
        json!({"name": "all", "cases": cases, "combinations": [m2, harness("x")], "runsPerCell": 4, "bufferTarget": {"kind": "unbounded"}}),
    )
    .await;
    let (s, m) = b.post(&format!("/v1/coverage-plans/{all}/open"), json!({})).await;
    assert_eq!(s, 200, "{m}");
    let jobs = jobs_of(&b, &all).await;
    // Six cells of 4, less what other plans hold in flight there: c × x 3, d × x 3, e × x 3.
    assert_eq!(jobs.len(), 6 * 4 - 9, "{m}");
    assert_eq!(m["totals"]["remaining"], 0);

    // Paused: skipped, nothing enqueued; resumed, it runs.
    let (s, _) = b.post(&format!("/v1/coverage-plans/{id}/pause"), json!({})).await;
    assert_eq!(s, 200);
    let t = topup(&b, &id).await;
    assert_eq!(t["skipped"], "paused");
    assert_eq!(t["enqueued"], 0);
    let (s, p) = b.post(&format!("/v1/coverage-plans/{id}/resume"), json!({})).await;
    assert_eq!((s, &p["paused"]), (200, &json!(false)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_walk_serves_idle_harnesses_first_and_takes_capped_ones_in_a_second_pass() {
    let b = Belay::start().await;
    b.catalogue().await;
    ingest(&b, "d", "1.0.0", "standard", &[]).await;
    ingest(&b, "e", "1.0.0", "standard", &[]).await;
    b.harness("x", 1, SLOW_SCRIPT).await;
    b.harness("y", 10, SLOW_SCRIPT).await;
    // Harness x is at its cap with a job someone launched by hand (of a cell outside the plan).
    let hand = b.launch("x").await;
    b.wait_status(hand["id"].as_str().unwrap(), &["running"], Duration::from_secs(60))
        .await;
    let id = plan(
        &b,
        json!({"name": "p", "cases": [case("d", "1.0.0"), case("e", "1.0.0")], "combinations": [harness("x"), harness("y")],
               "runsPerCell": 1, "bufferTarget": {"kind": "unbounded"}}),
    )
    .await;
    let sched = b.get(&format!("/v1/coverage-plans/{id}/schedule")).await;
    let lines: Vec<(String, String, Option<i64>)> = sched["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["cellKey"].as_str().unwrap().to_string(),
                l["action"].as_str().unwrap().to_string(),
                l["pass"].as_i64(),
            )
        })
        .collect();
    let t = topup(&b, &id).await;
    let order: Vec<(&str, i64)> = t["launched"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["cellKey"].as_str().unwrap(), l["pass"].as_i64().unwrap()))
        .collect();
    assert_eq!(
        order,
        [
            ("d@1.0.0/default/none × y/m", 1),
            ("e@1.0.0/default/none × y/m", 1),
            ("d@1.0.0/default/none × x/m", 2),
            ("e@1.0.0/default/none × x/m", 2),
        ]
    );
    // The schedule promised exactly that, and wrote nothing.
    let promised: Vec<(&str, i64)> = lines
        .iter()
        .filter(|(_, a, _)| a == "launch")
        .map(|(k, _, p)| (k.as_str(), p.unwrap()))
        .collect();
    assert_eq!(promised, order);
    // Emission order is queue order.
    let seqs: Vec<i64> = jobs_of(&b, &id)
        .await
        .iter()
        .map(|j| j["queueSeq"].as_i64().unwrap())
        .collect();
    let mut sorted = seqs.clone();
    sorted.sort();
    assert_eq!(seqs, sorted);
    let harnesses: Vec<String> = jobs_of(&b, &id)
        .await
        .iter()
        .map(|j| j["combination"]["harness"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(harnesses, ["y", "y", "x", "x"]);
}

/// A plan of four cells (cases c, d, e, f on harness `x`, cap 100, whose runs never end) of two
/// runs each under a bound of 5: one top-up launches three whole cells (2, 4, then 6 ≥ 5).
async fn four_cells_of_two(b: &Belay) -> String {
    b.catalogue().await;
    for s in ["d", "e", "f"] {
        ingest(b, s, "1.0.0", "standard", &[]).await;
    }
    b.harness("x", 100, SLOW_SCRIPT).await;
    plan(
        b,
        json!({"name": "p", "cases": [case("c", "1.0.0"), case("d", "1.0.0"), case("e", "1.0.0"), case("f", "1.0.0")],
               "combinations": [harness("x")], "runsPerCell": 2, "bufferTarget": {"kind": "bounded", "runs": 5}}),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_top_ups_enqueue_what_one_allows_and_no_cell_twice() {
    let b = Belay::start().await;
    let id = four_cells_of_two(&b).await;
    let calls = (0..50).map(|_| {
        let b = &b;
        let id = id.clone();
        async move { b.post(&format!("/v1/coverage-plans/{id}/topup"), json!({})).await }
    });
    let answers = futures::future::join_all(calls).await;
    let mut busy = 0;
    let mut enqueued = 0;
    let mut ids = BTreeSet::new();
    for (s, v) in &answers {
        assert_eq!(*s, 200, "{v}");
        match v["skipped"].as_str() {
            Some("busy") => busy += 1,
            None => {
                enqueued += v["enqueued"].as_i64().unwrap();
                for l in v["launched"].as_array().unwrap() {
                    for j in l["jobIds"].as_array().unwrap() {
                        assert!(ids.insert(j.as_str().unwrap().to_string()), "job {j} answered twice");
                    }
                }
            }
            other => panic!("unexpected skip {other:?}"),
        }
    }
    assert!(busy >= 1, "some call found a top-up running");
    assert_eq!(enqueued, 6, "three whole cells of two: 2, 4, then 6 ≥ 5");
    let jobs = jobs_of(&b, &id).await;
    assert_eq!(jobs.len(), 6);
    let cells: BTreeSet<&str> = jobs.iter().map(|j| j["cellKey"].as_str().unwrap()).collect();
    assert_eq!(cells.len(), 3, "no cell enqueued twice");
}

/// A real kill: the db pool runs in a worker process of its own whose claim activity commits the
/// claim and then stalls (`BELAY_FAILPOINT=topup-after-claim`); the test SIGKILLs that process
/// with the claim held. While the killed top-up's workflow runs, another top-up is busy. Once
/// that workflow is gone without releasing (an operator terminates it), the claim alone keeps
/// the plan busy until its lease ends (20 s here, by `BELAY_TOP_UP_LEASE_SECONDS`); then a top-up
/// on a live worker enqueues what one top-up allows, no cell twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_top_up_killed_between_claim_and_release_frees_the_plan_after_its_lease() {
    use belay_store::coverage::{Feed, claim_holder};
    use temporalio_client::{UntypedWorkflow, WorkflowDescribeOptions, WorkflowTerminateOptions};
    let lease_ms: i64 = 20_000;
    let mut b = Belay::start_with_env(&[("BELAY_TOP_UP_LEASE_SECONDS", "20")]).await;
    b.kill_worker();
    b.worker_pools = Some("workflows,git,llm,harness".into());
    b.start_worker().await;
    let stalling = b.start_extra_worker("db", &[("BELAY_FAILPOINT", "topup-after-claim")]);
    let id = four_cells_of_two(&b).await;

    // The first top-up takes the claim; its worker is killed before it answers.
    let first = {
        let (http, url, token, id) = (b.http.clone(), b.url.clone(), b.token.clone(), id.clone());
        tokio::spawn(async move {
            let r = http
                .post(format!("{url}/v1/coverage-plans/{id}/topup"))
                .bearer_auth(token)
                .json(&json!({}))
                .send()
                .await
                .unwrap();
            r.status().as_u16()
        })
    };
    let store = b.store().await;
    let claim = || async {
        let mut tx = store.begin_read().await.unwrap();
        let held = claim_holder(&mut tx, Feed::Plan, &id).await.unwrap();
        tx.commit().await.unwrap();
        held
    };
    wait_for("the claim to commit", Duration::from_secs(60), || async {
        claim().await.is_some()
    })
    .await;
    let (holder, at) = claim().await.unwrap();
    b.kill_extra_worker(stalling);

    let t = topup(&b, &id).await;
    assert_eq!(t["skipped"], "busy", "the killed top-up's workflow still runs: {t}");
    assert!(jobs_of(&b, &id).await.is_empty());

    // The killed top-up is given up: its workflow ends, its claim stays.
    let client = belay_client::connect(&b.temporal.address, "default", "test")
        .await
        .unwrap();
    let wedged = client.get_workflow_handle::<UntypedWorkflow>(format!("topup-plan-{id}"));
    let running = wedged.describe(WorkflowDescribeOptions::default()).await.unwrap();
    assert_eq!(running.run_id(), holder, "the claim is the running top-up's");
    wedged
        .terminate(
            WorkflowTerminateOptions::builder()
                .reason("its worker was killed")
                .build(),
        )
        .await
        .unwrap();
    assert!(
        first.await.unwrap() >= 500,
        "the caller of the given-up top-up is told it failed"
    );
    assert_eq!(claim().await, Some((holder.clone(), at)), "nothing released the claim");

    // A live db worker: the claim alone answers busy while its lease holds.
    b.start_extra_worker("db", &[]);
    let sent = belay_store::now_ms();
    let t = topup(&b, &id).await;
    assert!(
        sent < at + lease_ms,
        "the check came {} ms after the claim, past its lease",
        sent - at
    );
    assert_eq!(t["skipped"], "busy", "{t}");
    assert!(jobs_of(&b, &id).await.is_empty());
    assert_eq!(claim().await, Some((holder, at)));

    // After the lease: one top-up runs and enqueues what one top-up allows.
    wait_for(
        "the lease to end",
        Duration::from_millis(lease_ms as u64 + 5_000),
        || async { belay_store::now_ms() > at + lease_ms },
    )
    .await;
    let t = topup(&b, &id).await;
    assert_eq!(
        (t["skipped"].clone(), t["enqueued"].clone()),
        (Value::Null, json!(6)),
        "three whole cells of two: 2, 4, then 6 ≥ 5: {t}"
    );
    let jobs = jobs_of(&b, &id).await;
    assert_eq!(jobs.len(), 6);
    let cells: BTreeSet<&str> = jobs.iter().map(|j| j["cellKey"].as_str().unwrap()).collect();
    assert_eq!(cells.len(), 3, "no cell enqueued twice");
    assert_eq!(claim().await, None, "the top-up released its claim");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn halt_cancels_what_waits_halt_all_what_runs_and_neither_touches_a_hand_launched_job() {
    let b = Belay::start().await;
    b.catalogue().await;
    b.harness("x", 1, SLOW_SCRIPT).await;
    let id = plan(
        &b,
        json!({"name": "p", "cases": [case("c", "1.0.0")], "combinations": [harness("x")], "runsPerCell": 3,
               "bufferTarget": {"kind": "unbounded"}}),
    )
    .await;
    let t = topup(&b, &id).await;
    assert_eq!(t["enqueued"], 3);
    let first = t["launched"][0]["jobIds"][0].as_str().unwrap().to_string();
    b.wait_status(&first, &["running"], Duration::from_secs(60)).await;
    let hand = b.launch("x").await;
    let hand_id = hand["id"].as_str().unwrap().to_string();
    let (s, v) = b.post(&format!("/v1/coverage-plans/{id}/halt-all"), json!({})).await;
    assert_eq!((s, v["error"]["code"].as_str()), (409, Some("confirmation_required")));
    let (s, v) = b
        .post(&format!("/v1/coverage-plans/{id}/halt-all"), json!({"confirm": false}))
        .await;
    assert_eq!(s, 409, "{v}");
    assert_eq!(
        jobs_of(&b, &id)
            .await
            .iter()
            .filter(|j| j["status"] == "canceled")
            .count(),
        0
    );
    let (s, h) = b.post(&format!("/v1/coverage-plans/{id}/halt"), json!({})).await;
    assert_eq!(s, 200, "{h}");
    assert_eq!(h["cancelled"], 2);
    let jobs = jobs_of(&b, &id).await;
    assert_eq!(jobs.iter().filter(|j| j["status"] == "canceled").count(), 2);
    assert_eq!(
        b.get(&format!("/v1/coverage-plans/{id}")).await["paused"],
        true,
        "a halt pauses"
    );
    let (s, h) = b
        .post(&format!("/v1/coverage-plans/{id}/halt-all"), json!({"confirm": true}))
        .await;
    assert_eq!(s, 200, "{h}");
    assert_eq!(h["cancelled"], 1);
    assert_eq!(h["jobIds"][0], first.as_str());
    b.wait_status(&first, &["canceled"], Duration::from_secs(10)).await;
    let hand = b.job(&hand_id).await;
    assert!(!["canceled"].contains(&hand["status"].as_str().unwrap()), "{hand}");
    let (s, h) = b.post(&format!("/v1/coverage-plans/{id}/halt"), json!({})).await;
    assert_eq!((s, h["cancelled"].as_i64()), (200, Some(0)), "nothing left to cancel");
    let events = b.get("/v1/events?limit=1000").await;
    for kind in [
        "coverage_plan.halted",
        "coverage_plan.halted_all",
        "coverage_plan.paused",
    ] {
        assert!(
            events.as_array().unwrap().iter().any(|e| e["kind"] == kind),
            "{kind} recorded"
        );
    }
    // Deleting the plan leaves its jobs alone.
    let (s, _) = b
        .request("DELETE", &format!("/v1/coverage-plans/{id}"), Some(&b.token), None)
        .await;
    assert_eq!(s, 204);
    assert_eq!(jobs_of(&b, &id).await.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_queue_follows_emission_order_leaves_performance_runs_out_and_a_review_tops_up() {
    let b = Belay::start().await;
    b.catalogue().await;
    ingest(&b, "perf", "1.0.0", "performance", &[]).await;
    ingest(&b, "d", "1.0.0", "standard", &[]).await;
    b.harness("x", 10, OK_SCRIPT).await;
    b.harness("y", 10, OK_SCRIPT).await;
    let id = plan(
        &b,
        json!({"name": "p", "cases": [case("c", "1.0.0"), case("perf", "1.0.0"), case("d", "1.0.0")],
               "combinations": [harness("y"), harness("x")], "runsPerCell": 2, "outerAxis": "combination",
               "bufferTarget": {"kind": "bounded", "runs": 8}}),
    )
    .await;
    let t = topup(&b, &id).await;
    // Combination outer: y × c, y × perf, y × d, x × c; then outstanding 8 (perf counts in flight).
    let keys: Vec<&str> = t["launched"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["cellKey"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "c@1.0.0/default/none × y/m",
            "perf@1.0.0/default/none × y/m",
            "d@1.0.0/default/none × y/m",
            "c@1.0.0/default/none × x/m"
        ]
    );
    let mut expected = Vec::new();
    for l in t["launched"].as_array().unwrap() {
        for j in l["jobIds"].as_array().unwrap() {
            let run = run_of(&b, j.as_str().unwrap()).await;
            if !l["cellKey"].as_str().unwrap().starts_with("perf") {
                expected.push(run);
            }
        }
    }
    let q = b.get(&format!("/v1/coverage-plans/{id}/queue")).await;
    let got: Vec<String> = q["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    assert_eq!(got, expected, "emission order, performance runs left out");
    assert_eq!(q["truncated"], false);
    let q = b.get(&format!("/v1/coverage-plans/{id}/queue?limit=3")).await;
    assert_eq!(q["runs"].as_array().unwrap().len(), 3);
    assert_eq!(q["truncated"], true);
    let (s, v) = b
        .request(
            "GET",
            &format!("/v1/coverage-plans/{id}/queue?limit=201"),
            Some(&b.token),
            None,
        )
        .await;
    assert_eq!(s, 422, "{v}");
    // The matrix: performance runs never wait on the reviewer.
    let m = b.get(&format!("/v1/coverage-plans/{id}/coverage")).await;
    assert_eq!(m["totals"]["unreviewed"], 6);
    // A review of one of the plan's runs starts a top-up, without the review waiting for it.
    review_as(&b, &b.token, &expected[0]).await;
    wait_for("the review's top-up", Duration::from_secs(30), || async {
        jobs_of(&b, &id).await.len() > 8
    })
    .await;
    // Outstanding is 5 unreviewed (performance runs hold nothing): perf × x (7), then d × x (9).
    let jobs = jobs_of(&b, &id).await;
    let rest: Vec<&str> = jobs[8..].iter().map(|j| j["cellKey"].as_str().unwrap()).collect();
    assert_eq!(
        rest,
        [
            "perf@1.0.0/default/none × x/m",
            "perf@1.0.0/default/none × x/m",
            "d@1.0.0/default/none × x/m",
            "d@1.0.0/default/none × x/m"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_coverage_endpoint_refuses_bad_tokens_other_accounts_and_bad_input_writing_nothing() {
    let b = Belay::start().await;
    b.catalogue().await;
    let (s, g) = b
        .post(
            "/v1/coverage-groups",
            json!({"name": "cases", "kind": "case", "members": [case("c", "1.0.0")]}),
        )
        .await;
    assert_eq!(s, 201, "{g}");
    let gid = g["id"].as_str().unwrap().to_string();
    assert!(gid.starts_with("grp_"));
    let (s, combos) = b
        .post(
            "/v1/coverage-groups",
            json!({"name": "models", "kind": "combo", "members": [harness("nowhere")]}),
        )
        .await;
    assert_eq!(s, 201, "an unknown harness is accepted: {combos}");
    let id = plan(
        &b,
        json!({"name": "p", "caseGroups": [gid], "comboGroups": [combos["id"]], "runsPerCell": 1}),
    )
    .await;
    let m = b.get(&format!("/v1/coverage-plans/{id}/coverage")).await;
    assert_eq!(m["cells"][0]["unlaunchable"]["code"], "unknown_harness");
    let t = topup(&b, &id).await;
    assert_eq!(t["unlaunchable"][0]["unlaunchable"]["code"], "unknown_harness");
    assert_eq!(t["enqueued"], 0);
    // Editing the group reshapes the plan.
    let (s, v) = call(
        &b,
        "PUT",
        &format!("/v1/coverage-groups/{}", combos["id"].as_str().unwrap()),
        &b.token,
        Some(json!({"name": "models", "kind": "combo", "members": [harness("nowhere"), harness("elsewhere")]})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        b.get(&format!("/v1/coverage-plans/{id}/coverage")).await["cells"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    let other = create_account(&b.database_url, "other");
    let (s, cfg) = call(
        &b,
        "POST",
        "/v1/gg-configs",
        &other,
        Some(json!({"name": "g", "launchSlots": ["root"]})),
    )
    .await;
    assert_eq!(s, 201);
    let foreign = json!({"kind": "gg", "ggConfigId": cfg["id"], "bindings": {"root": "m"}});
    let (s, v) = b
        .post(
            "/v1/coverage-groups",
            json!({"name": "x", "kind": "combo", "members": [foreign]}),
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (403, Some("gg_config_not_owned")),
        "{v}"
    );

    let before = json!({
        "groups": b.get("/v1/coverage-groups").await,
        "plans": b.get("/v1/coverage-plans").await,
        "settings": b.get("/v1/coverage-settings").await,
        "jobs": b.get("/v1/jobs").await,
    });
    let p = format!("/v1/coverage-plans/{id}");
    let g = format!("/v1/coverage-groups/{gid}");
    let routes: Vec<(&str, String, Option<Value>)> = vec![
        (
            "POST",
            "/v1/coverage-groups".into(),
            Some(json!({"name": "g", "kind": "case"})),
        ),
        ("GET", "/v1/coverage-groups".into(), None),
        ("GET", g.clone(), None),
        ("PUT", g.clone(), Some(json!({"name": "g", "kind": "case"}))),
        ("DELETE", g.clone(), None),
        (
            "POST",
            "/v1/coverage-plans".into(),
            Some(json!({"name": "p", "runsPerCell": 1})),
        ),
        ("GET", "/v1/coverage-plans".into(), None),
        ("GET", p.clone(), None),
        ("PUT", p.clone(), Some(json!({"name": "p", "runsPerCell": 1}))),
        ("DELETE", p.clone(), None),
        ("GET", format!("{p}/coverage"), None),
        ("POST", format!("{p}/open"), None),
        ("POST", format!("{p}/topup"), None),
        ("GET", format!("{p}/schedule"), None),
        ("GET", format!("{p}/queue"), None),
        ("POST", format!("{p}/pause"), None),
        ("POST", format!("{p}/resume"), None),
        ("POST", format!("{p}/halt"), None),
        ("POST", format!("{p}/halt-all"), Some(json!({"confirm": true}))),
        ("GET", "/v1/coverage-settings".into(), None),
        (
            "PUT",
            "/v1/coverage-settings".into(),
            Some(json!({"bufferTarget": {"kind": "unbounded"}})),
        ),
    ];
    for (method, path, body) in &routes {
        let body = body.as_ref().map(|v| v.to_string());
        for token in [None, Some("bly_wrong")] {
            let (s, v) = b.request(method, path, token, body.as_deref()).await;
            assert_eq!(s, 401, "{method} {path}: {v}");
        }
        let mine = path.contains(&id) || path.contains(&gid);
        if mine {
            let (s, v) = b.request(method, path, Some(&other), body.as_deref()).await;
            assert_eq!(s, 404, "another account: {method} {path}: {v}");
        }
    }
    let bad: Vec<(&str, String, &str, &str)> = vec![
        ("POST", "/v1/coverage-plans".into(), "{\"name\": ", "body"),
        ("POST", "/v1/coverage-plans".into(), r#"{"name": "p"}"#, "runsPerCell"),
        (
            "POST",
            "/v1/coverage-plans".into(),
            r#"{"name": "p", "runsPerCell": 101}"#,
            "runsPerCell",
        ),
        (
            "POST",
            "/v1/coverage-plans".into(),
            r#"{"name": "p", "runsPerCell": 0}"#,
            "runsPerCell",
        ),
        (
            "POST",
            "/v1/coverage-plans".into(),
            r#"{"name": "p", "runsPerCell": 1, "outerAxis": "rung"}"#,
            "outerAxis",
        ),
        (
            "POST",
            "/v1/coverage-plans".into(),
            r#"{"name": "p", "runsPerCell": 1, "colour": 1}"#,
            "colour",
        ),
        (
            "POST",
            "/v1/coverage-plans".into(),
            r#"{"name": "p", "runsPerCell": 1, "bufferTarget": {"kind": "some"}}"#,
            "bufferTarget",
        ),
        (
            "POST",
            "/v1/coverage-plans".into(),
            r#"{"name": "p", "runsPerCell": 1, "caseGroups": ["grp_nope"]}"#,
            "caseGroups[0]",
        ),
        ("PUT", p.clone(), r#"{"name": "p", "runsPerCell": 1000}"#, "runsPerCell"),
        (
            "POST",
            "/v1/coverage-groups".into(),
            r#"{"name": "g", "kind": "cases"}"#,
            "kind",
        ),
        (
            "POST",
            "/v1/coverage-groups".into(),
            r#"{"name": "g", "kind": "combo", "members": [{"slug": "c", "version": "1.0.0", "variant": "default"}]}"#,
            "members[0]",
        ),
        ("POST", "/v1/coverage-groups".into(), r#"{"kind": "case"}"#, "name"),
        (
            "PUT",
            g.clone(),
            r#"{"name": "g", "kind": "case", "extra": true}"#,
            "extra",
        ),
        (
            "PUT",
            "/v1/coverage-settings".into(),
            r#"{"bufferTarget": {"kind": "bounded", "runs": -5}}"#,
            "bufferTarget.runs",
        ),
        (
            "PUT",
            "/v1/coverage-settings".into(),
            r#"{"bufferTarget": {"kind": "bounded"}}"#,
            "bufferTarget",
        ),
        (
            "POST",
            format!("{p}/halt-all"),
            r#"{"confirm": true, "really": 1}"#,
            "really",
        ),
    ];
    for (method, path, body, field) in bad {
        let (s, v) = b.request(method, &path, Some(&b.token), Some(body)).await;
        assert!((400..500).contains(&s), "{method} {path} {body}: {s} {v}");
        let msg = v["error"]["message"].as_str().unwrap_or_default();
        assert!(
            msg.contains(field),
            "{method} {path} {body}: the answer names {field}: {v}"
        );
    }
    let after = json!({
        "groups": b.get("/v1/coverage-groups").await,
        "plans": b.get("/v1/coverage-plans").await,
        "settings": b.get("/v1/coverage-settings").await,
        "jobs": b.get("/v1/jobs").await,
    });
    assert_eq!(before, after, "refused requests wrote nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_plan_tops_up_and_counts_on_postgresql_too() {
    let b = Belay::start_postgres().await;
    b.catalogue().await;
    ingest(&b, "d", "1.0.0", "standard", &[]).await;
    b.harness("x", 10, OK_SCRIPT).await;
    let id = plan(
        &b,
        json!({"name": "p", "cases": [case("c", "1.0.0"), case("d", "1.0.0")], "combinations": [harness("x")],
               "runsPerCell": 2, "bufferTarget": {"kind": "bounded", "runs": 1}}),
    )
    .await;
    let t = topup(&b, &id).await;
    assert_eq!(t["enqueued"], 2, "{t}");
    for j in t["launched"][0]["jobIds"].as_array().unwrap() {
        run_of(&b, j.as_str().unwrap()).await;
    }
    let m = b.get(&format!("/v1/coverage-plans/{id}/coverage")).await;
    assert_eq!(
        (
            m["cells"][0]["completed"].as_i64(),
            m["cells"][0]["unreviewed"].as_i64()
        ),
        (Some(2), Some(2))
    );
    assert_eq!(m["cells"][1]["remaining"], 2);
    assert_eq!(
        topup(&b, &id).await["enqueued"],
        0,
        "two unreviewed runs fill a bound of 1"
    );
    let q = b.get(&format!("/v1/coverage-plans/{id}/queue")).await;
    assert_eq!(q["runs"].as_array().unwrap().len(), 2);
    for r in q["runs"].as_array().unwrap() {
        review_as(&b, &b.token, r.as_str().unwrap()).await;
    }
    wait_for("the reviews' top-up", Duration::from_secs(30), || async {
        jobs_of(&b, &id).await.len() == 4
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paused_plans_failed_job_shows_its_retry_withheld_and_the_next_top_up_after_resume_fills_it() {
    let b = Belay::start().await;
    b.catalogue().await;
    let flag = b.dir.path().join("fail-now");
    let script = format!("while [ ! -f '{}' ]; do sleep 0.1; done; exit 1", flag.display());
    b.harness("f", 2, &script).await;
    let id = plan(
        &b,
        json!({"name": "p", "cases": [case("c", "1.0.0")], "combinations": [harness("f")], "runsPerCell": 1}),
    )
    .await;
    let t = topup(&b, &id).await;
    let job = t["launched"][0]["jobIds"][0].as_str().unwrap().to_string();
    b.wait_status(&job, &["running"], Duration::from_secs(60)).await;
    let (s, _) = b.post(&format!("/v1/coverage-plans/{id}/pause"), json!({})).await;
    assert_eq!(s, 200);
    std::fs::write(&flag, "").unwrap();
    let failed = b.wait_status(&job, &["failed"], Duration::from_secs(60)).await;
    assert_eq!(failed["retryWithheld"], true, "{failed}");
    assert_eq!(jobs_of(&b, &id).await.len(), 1, "no retry while paused");
    let (s, _) = b.post(&format!("/v1/coverage-plans/{id}/resume"), json!({})).await;
    assert_eq!(s, 200);
    let t = topup(&b, &id).await;
    assert_eq!(t["enqueued"], 1, "the missing run is counted and filled: {t}");
    assert_eq!(t["launched"][0]["cellKey"], "c@1.0.0/default/none × f/m");
}
