//! Budgets end to end (decision 0054): real `belay` API and worker processes, a real Temporal
//! server, real SQLite and PostgreSQL. A plan with a budget of three runs' estimate emits three
//! cells and then answers `skipped: "budget"`; raising the budget lets the next top-up go on;
//! completion settles a reservation to the adapter's reported cost (its estimate when it reports
//! nothing) and the estimate learns from it; a run launched by hand is never budgeted; 30
//! concurrent top-ups of two plans sharing cells never overspend; a ladder's budget holds its
//! climb the same way; bad budgets are refused naming the field, writing nothing.

use crate::common::{Belay, wait_for};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

/// Completes reporting nothing about its cost.
const SILENT_SCRIPT: &str = r#"printf '{"status":"completed","loaded":true}' > "$BELAY_MANIFEST""#;
/// Completes reporting what it cost.
const COSTED_SCRIPT: &str = r#"printf '{"status":"completed","loaded":true,"costUsd":0.25}' > "$BELAY_MANIFEST""#;
/// Completes reporting its token usage only: 100k in, 10k out at $3/$15 per million = $0.45.
const USAGE_SCRIPT: &str = r#"printf '{"status":"completed","loaded":true,"usage":{"inputTokens":100000,"outputTokens":10000}}' > "$BELAY_MANIFEST""#;
const SLOW_SCRIPT: &str = r#"sleep 600; printf '{"status":"completed","loaded":true}' > "$BELAY_MANIFEST""#;

/// The estimate of one run of model `m` from its list price ($3 / $15 per million tokens) × the
/// default 200k input and 20k output tokens.
const LIST_PRICE_ESTIMATE: f64 = 0.9;

fn case(slug: &str) -> Value {
    json!({"slug": slug, "version": "1.0.0", "variant": "default"})
}

fn harness(h: &str) -> Value {
    json!({"kind": "harness", "harness": h, "model": "m"})
}

async fn ingest(b: &Belay, slugs: &[&str]) {
    for slug in slugs {
        let (s, v) = b
            .post(
                "/v1/test-cases",
                json!({"slug": slug, "version": "1.0.0", "testType": "standard", "variants": ["default"]}),
            )
            .await;
        assert_eq!(s, 201, "{v}");
    }
}

async fn call(b: &Belay, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    b.request(method, path, Some(&b.token), body.map(|v| v.to_string()).as_deref())
        .await
}

async fn plan(b: &Belay, body: Value) -> String {
    let (s, v) = b.post("/v1/coverage-plans", body).await;
    assert_eq!(s, 201, "{v}");
    v["id"].as_str().unwrap().to_string()
}

async fn topup(b: &Belay, path: &str) -> Value {
    let (s, v) = b.post(&format!("{path}/topup"), json!({})).await;
    assert_eq!(s, 200, "{v}");
    v
}

fn usd(v: &Value, field: &str) -> f64 {
    v[field].as_f64().unwrap_or_else(|| panic!("{field} in {v}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

async fn jobs_of(b: &Belay, origin: &str) -> Vec<Value> {
    b.get(&format!("/v1/jobs?origin={origin}&limit=10000"))
        .await
        .as_array()
        .unwrap()
        .clone()
}

/// Waits until every job of `origin` has completed and the ledger shows nothing reserved.
async fn settled(b: &Belay, path: &str, origin: &str) -> Value {
    wait_for(&format!("{origin} to settle"), Duration::from_secs(90), async || {
        let jobs = jobs_of(b, origin).await;
        let p = b.get(path).await;
        jobs.iter().all(|j| j["status"] == "completed") && close(usd(&p, "reservedUsd"), 0.0)
    })
    .await;
    b.get(path).await
}

fn launched_slugs(answer: &Value) -> Vec<String> {
    answer["launched"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["case"]["slug"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_budget_of_three_runs_emits_three_cells_then_answers_skipped_budget_and_raising_it_continues() {
    let b = Belay::start().await;
    b.catalogue().await;
    ingest(&b, &["d", "e", "f", "g"]).await;
    b.harness("x", 100, SILENT_SCRIPT).await;
    let body = |budget: f64| {
        json!({"name": "p", "cases": [case("c"), case("d"), case("e"), case("f"), case("g")],
               "combinations": [harness("x")], "runsPerCell": 1, "bufferTarget": {"kind": "unbounded"},
               "budget": {"usd": budget}})
    };
    let three = 3.0 * LIST_PRICE_ESTIMATE;
    let id = plan(&b, body(three)).await;
    let path = format!("/v1/coverage-plans/{id}");
    let p = b.get(&path).await;
    assert_eq!(p["budget"], json!({"usd": three}));
    assert!(close(usd(&p, "budgetUsd"), three), "{p}");
    assert_eq!((usd(&p, "spentUsd"), usd(&p, "reservedUsd")), (0.0, 0.0));
    assert_eq!(p["estimatedRunUsd"], Value::Null);

    let first = topup(&b, &path).await;
    assert_eq!(first["skipped"], Value::Null, "{first}");
    assert_eq!(launched_slugs(&first), ["c", "d", "e"]);
    assert_eq!(first["enqueued"], 3);
    let held: Vec<&str> = first["held"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["case"]["slug"].as_str().unwrap())
        .collect();
    assert_eq!(held, ["f", "g"]);
    assert_eq!(first["held"][0]["reason"], "budget");
    assert!(close(usd(&first["held"][0], "estimateUsd"), LIST_PRICE_ESTIMATE));

    // Each run reports nothing: it costs its estimate, and the reservations move to spent.
    let p = settled(&b, &path, &format!("plan:{id}")).await;
    assert!(close(usd(&p, "spentUsd"), three), "{p}");
    let m = b.get(&format!("{path}/coverage")).await;
    assert!(
        close(usd(&m, "spentUsd"), three) && close(usd(&m, "budgetUsd"), three),
        "{m}"
    );
    assert_eq!(usd(&m, "reservedUsd"), 0.0);

    let second = topup(&b, &path).await;
    assert_eq!(second["skipped"], "budget", "{second}");
    assert_eq!(second["enqueued"], 0);
    assert_eq!(second["held"].as_array().unwrap().len(), 2);
    let schedule = b.get(&format!("{path}/schedule")).await;
    let reasons: Vec<&Value> = schedule["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| &l["reason"])
        .collect();
    assert_eq!(reasons[3..], [&json!("budget"), &json!("budget")], "{schedule}");
    assert_eq!(jobs_of(&b, &format!("plan:{id}")).await.len(), 3);

    // Raising the budget by one run lets the next top-up emit one more cell, then hold again.
    let (s, v) = call(&b, "PUT", &path, Some(body(three + LIST_PRICE_ESTIMATE))).await;
    assert_eq!(s, 200, "{v}");
    assert!(
        close(usd(&v, "spentUsd"), three),
        "a budget change keeps what was spent: {v}"
    );
    let third = topup(&b, &path).await;
    assert_eq!(third["skipped"], Value::Null, "{third}");
    assert_eq!(launched_slugs(&third), ["f"]);
    assert_eq!(third["held"][0]["case"]["slug"], "g");
    let p = b.get(&path).await;
    assert!(
        usd(&p, "spentUsd") + usd(&p, "reservedUsd") <= usd(&p, "budgetUsd") + 1e-9,
        "{p}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn completion_settles_to_the_reported_cost_the_estimate_learns_it_and_a_run_by_hand_is_never_budgeted() {
    let b = Belay::start().await;
    b.catalogue().await;
    ingest(&b, &["d", "e"]).await;
    b.harness("cost", 100, COSTED_SCRIPT).await;
    b.harness("usage", 100, USAGE_SCRIPT).await;
    let id = plan(
        &b,
        json!({"name": "p", "cases": [case("c")], "combinations": [harness("cost"), harness("usage")],
               "runsPerCell": 2, "bufferTarget": {"kind": "unbounded"}, "budget": {"usd": 100.0},
               "estimatedRunUsd": 2.0}),
    )
    .await;
    let path = format!("/v1/coverage-plans/{id}");
    assert_eq!(b.get(&path).await["estimatedRunUsd"], 2.0);
    let first = topup(&b, &path).await;
    assert_eq!(first["enqueued"], 4, "{first}");
    let p = b.get(&path).await;
    // Reserved at the plan's estimatedRunUsd (no completed run says better yet), or already settled.
    assert!(usd(&p, "spentUsd") + usd(&p, "reservedUsd") <= 8.0 + 1e-9, "{p}");
    let p = settled(&b, &path, &format!("plan:{id}")).await;
    // Two runs at their costUsd, two at their usage priced by m's list price.
    assert!(close(usd(&p, "spentUsd"), 2.0 * 0.25 + 2.0 * 0.45), "{p}");

    // A run launched by hand of a plan's cell is never budgeted, whatever it costs.
    let job = b.launch("cost").await;
    b.wait_status(job["id"].as_str().unwrap(), &["completed"], Duration::from_secs(60))
        .await;
    let after = b.get(&path).await;
    assert!(close(usd(&after, "spentUsd"), usd(&p, "spentUsd")), "{after}");

    // A second plan of new cases on the same combinations reserves what their runs cost: the
    // combination's mean ($0.25 for `cost`), so a budget of $0.50 takes exactly its two runs.
    let other = plan(
        &b,
        json!({"name": "q", "cases": [case("d"), case("e")], "combinations": [harness("cost")],
               "runsPerCell": 1, "bufferTarget": {"kind": "unbounded"}, "budget": {"usd": 0.5},
               "estimatedRunUsd": 5.0}),
    )
    .await;
    let answer = topup(&b, &format!("/v1/coverage-plans/{other}")).await;
    assert_eq!(launched_slugs(&answer), ["d", "e"], "{answer}");
    let q = b.get(&format!("/v1/coverage-plans/{other}")).await;
    assert!(close(usd(&q, "spentUsd") + usd(&q, "reservedUsd"), 0.5), "{q}");
}

/// Two plans over overlapping cells, each with a budget of three runs at $1; 30 top-ups at once,
/// alternating between them. Whatever interleaving the server picks, neither plan's spent plus
/// reserved ever passes its budget, each reservation matches its jobs, and no cell is enqueued
/// twice.
async fn thirty_concurrent_top_ups_never_overspend(b: Belay) {
    b.catalogue().await;
    let slugs = ["d", "e", "f", "g", "h", "i", "j", "k"];
    ingest(&b, &slugs).await;
    b.harness("x", 100, SLOW_SCRIPT).await;
    b.harness("y", 100, SLOW_SCRIPT).await;
    let all: Vec<Value> = std::iter::once("c").chain(slugs).map(case).collect();
    let body = |name: &str, cases: &[Value]| {
        json!({"name": name, "cases": cases, "combinations": [harness("x"), harness("y")], "runsPerCell": 1,
               "bufferTarget": {"kind": "unbounded"}, "budget": {"usd": 3.0}, "estimatedRunUsd": 1.0})
    };
    // Both start with c, d and e (six cells): whichever plan walks first takes some of them, and
    // the other, counting them in flight, passes over them.
    let a = plan(&b, body("a", &all[..6])).await;
    let z_cases: Vec<Value> = all[..3].iter().chain(&all[6..]).cloned().collect();
    let z = plan(&b, body("z", &z_cases)).await;
    let calls = (0..30).map(|i| {
        let b = &b;
        let id = if i % 2 == 0 { a.clone() } else { z.clone() };
        async move { b.post(&format!("/v1/coverage-plans/{id}/topup"), json!({})).await }
    });
    let answers = futures::future::join_all(calls).await;
    for (s, v) in &answers {
        assert_eq!(*s, 200, "{v}");
        let skipped = v["skipped"].as_str();
        assert!(matches!(skipped, None | Some("busy") | Some("budget")), "{v}");
    }
    let mut cells = BTreeSet::new();
    for id in [&a, &z] {
        let p = b.get(&format!("/v1/coverage-plans/{id}")).await;
        let (spent, reserved, budget) = (usd(&p, "spentUsd"), usd(&p, "reservedUsd"), usd(&p, "budgetUsd"));
        assert!(spent + reserved <= budget + 1e-9, "plan {id} overspent: {p}");
        let jobs = jobs_of(&b, &format!("plan:{id}")).await;
        assert_eq!(jobs.len(), 3, "three runs' worth of its budget: {p}");
        assert!(close(reserved, jobs.len() as f64 * 1.0), "one estimate per job: {p}");
        for j in &jobs {
            assert!(
                cells.insert(j["cellKey"].as_str().unwrap().to_string()),
                "cell {} twice",
                j["cellKey"]
            );
        }
        // Once a plan's budget is reserved, its next top-up holds back what is left.
        let next = topup(&b, &format!("/v1/coverage-plans/{id}")).await;
        assert_eq!(next["skipped"], "budget", "{next}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_concurrent_top_ups_on_two_plans_sharing_cells_never_overspend_on_sqlite() {
    thirty_concurrent_top_ups_never_overspend(Belay::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_concurrent_top_ups_on_two_plans_sharing_cells_never_overspend_on_postgres() {
    thirty_concurrent_top_ups_never_overspend(Belay::start_postgres().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_ladders_budget_holds_its_climb_and_its_board_shows_the_ledger() {
    let b = Belay::start().await;
    b.catalogue().await;
    b.harness("x", 100, SLOW_SCRIPT).await;
    b.harness("y", 100, SLOW_SCRIPT).await;
    let (s, l) = b
        .post(
            "/v1/ladders",
            json!({"name": "climb", "rungs": [case("c")], "combinations": [harness("x"), harness("y")],
                   "runsPerCell": 2, "bufferTarget": {"kind": "unbounded"}, "budget": {"usd": 2.5},
                   "estimatedRunUsd": 1.0}),
        )
        .await;
    assert_eq!(s, 201, "{l}");
    assert_eq!(l["budget"], json!({"usd": 2.5}));
    assert_eq!(l["estimatedRunUsd"], 1.0);
    let id = l["id"].as_str().unwrap();
    let (s, v) = b.post(&format!("/v1/ladders/{id}/enable"), json!({})).await;
    assert_eq!(s, 200, "{v}");
    // Each climber's rung is a cell of two runs at $1: the first fits $2.50, the second does not.
    let answer = &v["topUp"];
    assert_eq!(answer["enqueued"], 2, "{answer}");
    assert_eq!(answer["held"][0]["combination"]["harness"], "y");
    let again = topup(&b, &format!("/v1/ladders/{id}")).await;
    assert_eq!(again["skipped"], "budget", "{again}");
    let board = b.get(&format!("/v1/ladders/{id}/progress")).await;
    assert_eq!(
        (
            usd(&board, "budgetUsd"),
            usd(&board, "reservedUsd"),
            usd(&board, "spentUsd")
        ),
        (2.5, 2.0, 0.0),
        "{board}"
    );
    // Halting cancels its queued runs, which releases their reservations.
    let (s, v) = b
        .post(&format!("/v1/ladders/{id}/halt-all"), json!({"confirm": true}))
        .await;
    assert_eq!(s, 200, "{v}");
    let l = b.get(&format!("/v1/ladders/{id}")).await;
    assert_eq!((usd(&l, "reservedUsd"), usd(&l, "spentUsd")), (0.0, 0.0), "{l}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_negative_or_non_numeric_budget_is_refused_naming_the_field_and_writes_nothing() {
    let b = Belay::start().await;
    b.catalogue().await;
    b.harness("x", 4, SLOW_SCRIPT).await;
    let body = |extra: Value| {
        let mut v = json!({"name": "p", "cases": [case("c")], "combinations": [harness("x")], "runsPerCell": 1});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    };
    let refusals = [
        (json!({"budget": {"usd": -1}}), "budget.usd"),
        (json!({"budget": {"usd": "ten"}}), "budget.usd"),
        (json!({"budget": "ten"}), "budget"),
        (json!({"budget": {"usd": 1, "eur": 2}}), "budget"),
        (json!({"estimatedRunUsd": -0.5}), "estimatedRunUsd"),
        (json!({"estimatedRunUsd": 0}), "estimatedRunUsd"),
        (json!({"estimatedRunUsd": "cheap"}), "estimatedRunUsd"),
    ];
    for (extra, field) in &refusals {
        let (s, v) = b.post("/v1/coverage-plans", body(extra.clone())).await;
        assert_eq!(s, 422, "{extra}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(field), "{extra}: {message}");
    }
    assert_eq!(b.get("/v1/coverage-plans").await, json!([]), "no plan was written");

    // On a saved plan: refused, and the plan keeps its budget.
    let id = plan(&b, body(json!({"budget": {"usd": 2.0}}))).await;
    let path = format!("/v1/coverage-plans/{id}");
    let before = b.get(&path).await;
    for (extra, field) in &refusals {
        let (s, v) = call(&b, "PUT", &path, Some(body(extra.clone()))).await;
        assert_eq!(s, 422, "{extra}: {v}");
        assert!(v["error"]["message"].as_str().unwrap().starts_with(field), "{v}");
    }
    assert_eq!(b.get(&path).await, before);

    // A ladder's budget is checked alike.
    let (s, v) = b
        .post(
            "/v1/ladders",
            json!({"name": "l", "rungs": [case("c")], "combinations": [harness("x")], "budget": {"usd": -3}}),
        )
        .await;
    assert_eq!(s, 422, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().starts_with("budget.usd"), "{v}");
    assert_eq!(b.get("/v1/ladders").await, json!([]));
}
