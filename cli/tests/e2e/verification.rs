//! Candidate verification end to end: real `belay api` and `belay worker` processes, a real
//! Temporal server, real git (gix merges, smart HTTP into the Sandbox) and a real Docker Sandbox
//! with Bun, against the sample app of `tests/fixtures/sample-app` seeded into canonical.

use crate::common::{Belay, replays, wait_until_every};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A ready project whose canonical `main` holds the sample app (pushed by the test, the project
/// row brought in line), with `policy` written when given.
async fn sample_project(b: &Belay, policy: Option<Value>) -> String {
    let id = crate::common::sample::sample_project(b).await;
    if let Some(policy) = policy {
        let (s, v) = b
            .request(
                "PUT",
                &format!("/v1/projects/{id}/policy"),
                Some(&b.token),
                Some(&policy.to_string()),
            )
            .await;
        assert_eq!(s, 200, "{v}");
    }
    id
}

async fn change(b: &Belay, project: &str, body: Value) -> String {
    let (s, c) = b.post(&format!("/v1/projects/{project}/changes"), body).await;
    assert_eq!(s, 201, "{c}");
    c["id"].as_str().unwrap().to_string()
}

/// A Task whose run edits files in its workspace and publishes; returns the ChangeSet.
async fn task(b: &Belay, change: &str, key: &str, deps: &[&str], edits: &[Value], contract: &[&str]) -> Value {
    let (s, t) = b
        .post(
            &format!("/v1/changes/{change}/tasks"),
            json!({"key": key, "kind": "implement", "title": format!("task {key}"), "semanticResources": [], "dependencies": deps}),
        )
        .await;
    assert_eq!(s, 201, "{t}");
    let (s, r) = b
        .post(&format!("/v1/tasks/{}/runs", t["id"].as_str().unwrap()), json!({}))
        .await;
    assert_eq!(s, 201, "{r}");
    let run = r["id"].as_str().unwrap().to_string();
    for e in edits {
        let (s, v) = b.post(&format!("/v1/task-runs/{run}/workspace/tools"), e.clone()).await;
        assert_eq!(s, 200, "{e} answered {v}");
    }
    let (s, cs) = b
        .post(
            &format!("/v1/task-runs/{run}/workspace/publish"),
            json!({"message": format!("task {key}"), "contractChanges": contract}),
        )
        .await;
    assert_eq!(s, 201, "{cs}");
    cs
}

fn edit(path: &str, old: &str, new: &str) -> Value {
    json!({"tool": "edit_file", "path": path, "oldText": old, "newText": new})
}

fn write(path: &str, content: &str) -> Value {
    json!({"tool": "write_file", "path": path, "content": content})
}

/// Starts verification of a Change and waits for its Candidate to end.
async fn verify(b: &Belay, change: &str) -> Value {
    let (s, k) = b.post(&format!("/v1/changes/{change}/verification"), json!({})).await;
    assert_eq!(s, 201, "{k}");
    assert_eq!(k["status"], "composing", "{k}");
    wait_candidate(b, k["id"].as_str().unwrap()).await
}

/// Waits until the Candidate has finished (a verified low-risk winner may be promoted by the
/// time it is read).
async fn wait_candidate(b: &Belay, id: &str) -> Value {
    crate::common::sample::wait_candidate(b, id, &["verified", "rejected", "stale", "promoted"]).await
}

fn evidence<'a>(k: &'a Value, check: &str) -> Vec<&'a Value> {
    k["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["checkId"] == check)
        .collect()
}

const STATS_ROUTE: &str = r#"  },
  {
    method: "GET",
    path: "/api/stats",
    handler: (_r, _p, store) => json({ count: store.list().length }),
  },
];"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_stacked_api_tasks_compose_in_work_graph_order_and_every_planned_check_runs_for_real() {
    let b = Belay::start_with_sandbox().await;
    let project = sample_project(&b, None).await;
    // The default policy (policy-1) until one is written.
    let policy = b.get(&format!("/v1/projects/{project}/policy")).await;
    assert_eq!(
        (policy["id"].as_str(), policy["version"].as_i64()),
        (Some("policy-1"), Some(1)),
        "{policy}"
    );

    let c = change(
        &b,
        &project,
        json!({"goal": "Count the todos", "acceptanceCriteria": [], "invariants": [], "riskTier": "low"}),
    )
    .await;
    let t1 = task(
        &b,
        &c,
        "t1",
        &[],
        &[edit("src/routes.ts", "  },\n];", STATS_ROUTE)],
        &["GET /api/stats -> {count}"],
    )
    .await;
    let t2 = task(
        &b,
        &c,
        "t2",
        &["t1"],
        &[write(
            "test/stats.test.ts",
            "import { expect, test } from \"bun:test\";\nimport { makeHandler } from \"../src/app\";\n\ntest(\"stats counts the todos\", async () => {\n  const response = await makeHandler()(new Request(\"http://app/api/stats\"));\n  expect(await response.json()).toEqual({ count: 0 });\n});\n",
        )],
        &[],
    )
    .await;

    let k = verify(&b, &c).await;
    assert!(
        ["verified", "promoted"].contains(&k["status"].as_str().unwrap()),
        "{k:#}"
    );
    let ids: Vec<&str> = k["changeSetIds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        vec![t1["id"].as_str().unwrap(), t2["id"].as_str().unwrap()],
        "Work Graph order"
    );
    let planned: Vec<&str> = k["plan"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["checkId"].as_str().unwrap())
        .collect();
    assert_eq!(planned, vec!["build", "client-assets", "unit"], "{k:#}");
    assert_eq!(k["plan"]["policyId"], "policy-1");
    for check in ["build", "client-assets", "unit"] {
        let rows = evidence(&k, check);
        assert_eq!(rows.len(), 1, "{check}: {k:#}");
        assert_eq!(
            (rows[0]["status"].as_str(), rows[0]["coverage"].as_str()),
            (Some("pass"), Some("checked_supported")),
            "{check}: {k:#}"
        );
        assert!(
            rows[0]["summary"].as_str().unwrap().ends_with("(runner: sandbox)"),
            "{k:#}"
        );
    }
    assert!(k["gaps"].as_array().unwrap().is_empty(), "{k:#}");
    // The composition build committed its output on top of the merges.
    let fork = b.dir.path().join("data").join("git").join("belay").join(format!(
        "cand-{}.git",
        k["id"].as_str().unwrap().strip_prefix("cand_").unwrap()
    ));
    let log = git(&fork, &["log", "--format=%s", "main"]);
    let subjects: Vec<&str> = log.lines().collect();
    assert_eq!(subjects[0], format!("Build {}", k["id"].as_str().unwrap()), "{log}");
    assert!(subjects[1].contains("t2") && subjects[2].contains("t1"), "{log}");
    replays(
        &b,
        "verification-verified",
        &format!("verify-{}", k["id"].as_str().unwrap()),
    )
    .await;
    let listed = b.get(&format!("/v1/changes/{c}/candidates")).await;
    assert_eq!(listed.as_array().unwrap().len(), 1);

    // Another account sees none of it.
    let store = belay_store::Store::connect(&b.database_url).await.unwrap();
    let (_, bob) = store.create_account("bob").await.unwrap();
    for path in [
        format!("/v1/candidates/{}", k["id"].as_str().unwrap()),
        format!("/v1/changes/{c}/candidates"),
        format!("/v1/projects/{project}/policy"),
    ] {
        let (s, v) = b.request("GET", &path, Some(&bob), None).await;
        assert_eq!(s, 404, "{path}: {v}");
    }
    let (s, v) = b
        .request("POST", &format!("/v1/changes/{c}/verification"), Some(&bob), Some("{}"))
        .await;
    assert_eq!(s, 404, "{v}");

    // A broken test fails `unit`, and the gap rejects the Candidate.
    let c2 = change(
        &b,
        &project,
        json!({"goal": "Break a test", "acceptanceCriteria": [], "invariants": [], "riskTier": "low"}),
    )
    .await;
    task(
        &b,
        &c2,
        "t1",
        &[],
        &[edit(
            "test/api.test.ts",
            "toEqual({ ok: true })",
            "toEqual({ ok: false })",
        )],
        &[],
    )
    .await;
    let k2 = verify(&b, &c2).await;
    assert_eq!(k2["status"], "rejected", "{k2:#}");
    assert_eq!(evidence(&k2, "unit")[0]["status"], "fail", "{k2:#}");
    // The summary a person reads names the exit code as a person writes it.
    let summary = evidence(&k2, "unit")[0]["summary"].as_str().unwrap().to_owned();
    assert!(summary.contains("(exit 1)") && !summary.contains("Some("), "{summary}");
    assert!(k2["statusReason"].as_str().unwrap().contains("unit"), "{k2:#}");
    replays(
        &b,
        "verification-rejected",
        &format!("verify-{}", k2["id"].as_str().unwrap()),
    )
    .await;

    // A UI file plans browser as required at tier low; the browser check runs it and passes.
    let c3 = change(
        &b,
        &project,
        json!({"goal": "Restyle", "acceptanceCriteria": [], "invariants": [], "riskTier": "low"}),
    )
    .await;
    task(
        &b,
        &c3,
        "t1",
        &[],
        &[edit("public/style.css", "margin: 2rem;", "margin: 3rem;")],
        &[],
    )
    .await;
    let k3 = verify(&b, &c3).await;
    // Low risk and no criteria: verified, then promoted by itself (perhaps before it is read).
    assert!(
        ["verified", "promoted"].contains(&k3["status"].as_str().unwrap()),
        "{k3:#}"
    );
    let browser = k3["plan"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["checkId"] == "browser")
        .cloned();
    assert_eq!(browser.map(|c| c["required"].clone()), Some(json!(true)), "{k3:#}");
    assert_eq!(evidence(&k3, "browser")[0]["status"], "pass", "{k3:#}");
    assert_eq!(evidence(&k3, "browser")[0]["coverage"], "checked_supported");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conflicts_protected_resources_undeclared_routes_and_slow_endpoints_each_reject_with_their_reason() {
    let b = Belay::start_with_sandbox().await;
    let project = sample_project(&b, Some(json!({"protectedResources": ["billing"]}))).await;
    assert_eq!(b.get(&format!("/v1/projects/{project}/policy")).await["id"], "policy-2");

    // Two Tasks changing the same line conflict: composition Evidence names the file.
    let c = change(
        &b,
        &project,
        json!({"goal": "Rename", "acceptanceCriteria": [], "invariants": [], "riskTier": "low"}),
    )
    .await;
    task(
        &b,
        &c,
        "a",
        &[],
        &[edit("src/store.ts", "private next = 1;", "private next = 10;")],
        &[],
    )
    .await;
    task(
        &b,
        &c,
        "b",
        &[],
        &[edit("src/store.ts", "private next = 1;", "private next = 100;")],
        &[],
    )
    .await;
    let k = verify(&b, &c).await;
    assert_eq!(k["status"], "rejected", "{k:#}");
    let comp = evidence(&k, "composition");
    assert!(comp[0]["summary"].as_str().unwrap().contains("src/store.ts"), "{k:#}");

    // A contract change on a protected resource is an invariant_violation.
    let c = change(
        &b,
        &project,
        json!({"goal": "Bill", "acceptanceCriteria": [], "invariants": [], "riskTier": "low"}),
    )
    .await;
    task(
        &b,
        &c,
        "a",
        &[],
        &[write("src/billing.ts", "export const billing = 1;\n")],
        &["billing: changes the invoice shape"],
    )
    .await;
    let k = verify(&b, &c).await;
    assert_eq!(k["status"], "rejected", "{k:#}");
    assert!(k["statusReason"].as_str().unwrap().contains("billing"), "{k:#}");
    let comp = evidence(&k, "composition");
    assert_eq!((comp.len(), comp[0]["status"].as_str()), (1, Some("fail")), "{k:#}");
    assert!(k["plan"].is_null(), "rejected before composing: {k:#}");

    // An undeclared route fails `contract` (medium runs it).
    let c = change(
        &b,
        &project,
        json!({"goal": "Stats", "acceptanceCriteria": [], "invariants": [], "riskTier": "medium"}),
    )
    .await;
    task(&b, &c, "a", &[], &[edit("src/routes.ts", "  },\n];", STATS_ROUTE)], &[]).await;
    let k = verify(&b, &c).await;
    assert_eq!(k["status"], "rejected", "{k:#}");
    assert_eq!(evidence(&k, "contract")[0]["status"], "fail", "{k:#}");

    // "p95 below 300ms" with a slow endpoint: expectation_not_met, limit 300.
    let c = change(&b, &project, json!({"goal": "Keep health fast: p95 below 300ms.", "acceptanceCriteria": [], "invariants": [], "riskTier": "low"})).await;
    task(
        &b,
        &c,
        "a",
        &[],
        &[edit(
            "src/routes.ts",
            r#"handler: () => json({ ok: true })"#,
            r#"handler: async () => { await Bun.sleep(350); return json({ ok: true }); }"#,
        )],
        &[],
    )
    .await;
    let k = verify(&b, &c).await;
    assert_eq!(k["status"], "rejected", "{k:#}");
    let perf = evidence(&k, "performance");
    assert_eq!(perf[0]["metric"]["limit"], 300.0, "{k:#}");
    assert!(
        k["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["checkId"] == "performance" && g["reason"] == "expectation_not_met"),
        "{k:#}"
    );

    // Bad input names the field and writes nothing; another account's Change is not found.
    let (s, v) = b
        .post(&format!("/v1/changes/{c}/candidates"), json!({"changeSetIds": []}))
        .await;
    assert_eq!(s, 422, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().starts_with("changeSetIds"),
        "{v}"
    );
    let (s, v) = b
        .post(
            &format!("/v1/changes/{c}/candidates"),
            json!({"changeSetIds": ["cs_x"], "extra": 1}),
        )
        .await;
    assert_eq!(s, 422, "{v}");
    let (s, v) = b
        .request(
            "PUT",
            &format!("/v1/projects/{project}/policy"),
            Some(&b.token),
            Some(r#"{"commands":{"test":""}}"#),
        )
        .await;
    assert_eq!(s, 422, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().starts_with("commands.test"),
        "{v}"
    );
    assert_eq!(b.get(&format!("/v1/projects/{project}/policy")).await["id"], "policy-2");
    assert_eq!(
        b.get(&format!("/v1/changes/{c}/candidates"))
            .await
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let (s, _) = b.post("/v1/changes/chg_nope/verification", json!({})).await;
    assert_eq!(s, 404);
    let (s, _) = b.request("GET", "/v1/candidates/cand_nope", Some(&b.token), None).await;
    assert_eq!(s, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn budget_build_security_procedure_and_stale_gaps_and_a_killed_worker_leave_one_row_per_attempt() {
    let mut b = Belay::start_with_sandbox().await;
    let project = sample_project(
        &b,
        Some(json!({"requiredChecksByRisk": {"low": ["build", "targeted", "security"], "medium": ["build", "targeted", "contract", "security"]}})),
    )
    .await;
    let store = belay_store::Store::connect(&b.database_url).await.unwrap();

    // No authorization tests: the security gap (no_signal), never a pass.
    let c = change(
        &b,
        &project,
        json!({"goal": "Drop the denial tests", "acceptanceCriteria": [], "invariants": [], "riskTier": "low"}),
    )
    .await;
    task(
        &b,
        &c,
        "a",
        &[],
        &[write(
            "test/authorization.test.ts",
            "import { expect, test } from \"bun:test\";\ntest(\"deleting works\", () => { expect(1).toBe(1); });\n",
        )],
        &[],
    )
    .await;
    let k = verify(&b, &c).await;
    assert_eq!(k["status"], "rejected", "{k:#}");
    assert_eq!(evidence(&k, "security")[0]["coverage"], "checked_no_signal", "{k:#}");
    assert!(
        k["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["checkId"] == "security" && g["reason"] == "no_signal"),
        "{k:#}"
    );

    // An invariant no test can prove is a required procedure check that stays a gap.
    let c = change(
        &b,
        &project,
        json!({"goal": "Tidy", "acceptanceCriteria": [], "invariants": ["Email delivery must remain working"], "riskTier": "low"}),
    )
    .await;
    task(
        &b,
        &c,
        "a",
        &[],
        &[edit(
            "src/store.ts",
            "// An in-memory store",
            "// An in-memory todo store",
        )],
        &[],
    )
    .await;
    let k = verify(&b, &c).await;
    assert_eq!(k["status"], "rejected", "{k:#}");
    let procedure: Vec<&Value> = k["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "protected-invariant")
        .collect();
    assert_eq!(procedure.len(), 1, "{k:#}");
    assert!(
        procedure[0]["checkId"]
            .as_str()
            .unwrap()
            .starts_with("protected-invariant-1-"),
        "{k:#}"
    );
    assert_eq!(procedure[0]["status"], "skipped");

    // A failing composition build: build Evidence fail with the output tail, and build runs once.
    let c = change(
        &b,
        &project,
        json!({"goal": "Break the build", "acceptanceCriteria": [], "invariants": [], "riskTier": "low"}),
    )
    .await;
    task(
        &b,
        &c,
        "a",
        &[],
        &[edit("package.json", "src/client/main.ts", "src/client/missing.ts")],
        &[],
    )
    .await;
    let k = verify(&b, &c).await;
    assert_eq!(k["status"], "rejected", "{k:#}");
    let build = evidence(&k, "build");
    assert_eq!(build.len(), 1, "the build check does not run again: {k:#}");
    assert_eq!(
        (build[0]["status"].as_str(), build[0]["coverage"].as_str()),
        (Some("fail"), Some("checked_supported"))
    );
    assert!(
        build[0]["summary"].as_str().unwrap().contains("missing"),
        "the output tail: {k:#}"
    );

    // A worker killed with SIGKILL during a check: the workflow resumes on a new worker and the
    // check has exactly one Evidence row for its attempt.
    let c = change(
        &b,
        &project,
        json!({"goal": "Slow tests", "acceptanceCriteria": [], "invariants": [], "riskTier": "low"}),
    )
    .await;
    task(
        &b,
        &c,
        "a",
        &[],
        &[write(
            "test/slow.test.ts",
            "import { expect, test } from \"bun:test\";\ntest(\"slow\", async () => { await Bun.sleep(8000); expect(1).toBe(1); }, 30000);\n",
        )],
        &[],
    )
    .await;
    let (s, k) = b.post(&format!("/v1/changes/{c}/verification"), json!({})).await;
    assert_eq!(s, 201, "{k}");
    let id = k["id"].as_str().unwrap().to_owned();
    // The build check (typecheck) has its row: the next step, unit, is running.
    wait_until_every(
        "the build check's Evidence",
        Duration::from_secs(120),
        Duration::from_millis(100),
        async || {
            let k = b.get(&format!("/v1/candidates/{id}")).await;
            if evidence(&k, "build").is_empty() {
                Err(format!("{k:#}"))
            } else {
                Ok(())
            }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    b.kill_worker();
    b.start_worker().await;
    let k = wait_candidate(&b, &id).await;
    assert!(
        ["verified", "promoted"].contains(&k["status"].as_str().unwrap_or_default()),
        "{k:#}"
    );
    let unit = evidence(&k, "unit");
    assert_eq!(unit.len(), 1, "{k:#}");
    assert_eq!(unit[0]["attempt"], 1);
    // A verified low-risk winner goes on to promotion by itself (the policy lets it through):
    // let it settle before canonical is moved by hand below.
    let what = "the winner's promotion to settle";
    wait_until_every(what, Duration::from_secs(120), Duration::from_millis(200), async || {
        let k = b.get(&format!("/v1/candidates/{id}")).await;
        let change = b.get(&format!("/v1/changes/{c}")).await;
        if k["status"] == "promoted" || change["status"] == "awaiting_approval" {
            Ok(())
        } else {
            Err(format!("{k:#} {change:#}"))
        }
    })
    .await;
    let generation = b.get(&format!("/v1/projects/{project}")).await["generation"]
        .as_i64()
        .unwrap();

    // A Candidate whose base fell behind canonical is stale, and its ChangeSets are recomposed on
    // the new base as a new Candidate, recorded on the old one.
    let c = change(
        &b,
        &project,
        json!({"goal": "Later", "acceptanceCriteria": [], "invariants": [], "riskTier": "low"}),
    )
    .await;
    task(
        &b,
        &c,
        "a",
        &[],
        &[edit("src/store.ts", "// An in-memory store", "// A store in memory")],
        &[],
    )
    .await;
    store.bump_generation(&project).await.unwrap();
    // With no worker, the workflow starts but cannot load the Candidate until canonical has
    // moved on once more.
    b.kill_worker();
    let (s, k) = b.post(&format!("/v1/changes/{c}/verification"), json!({})).await;
    assert_eq!(s, 201, "{k}");
    assert_eq!(k["baseGeneration"], generation + 1, "{k}");
    store.bump_generation(&project).await.unwrap();
    b.start_worker().await;
    let old = wait_candidate(&b, k["id"].as_str().unwrap()).await;
    assert_eq!(old["status"], "stale", "{old:#}");
    let new = old["recomposedAs"].as_str().expect("recomposed").to_owned();
    let n = wait_candidate(&b, &new).await;
    assert_eq!(
        (n["baseGeneration"].as_i64(), n["changeSetIds"].clone()),
        (Some(generation + 2), old["changeSetIds"].clone()),
        "{n:#}"
    );
    // Verified, and (a low-risk winner) possibly promoted by the time it is read.
    assert!(
        ["verified", "promoted"].contains(&n["status"].as_str().unwrap_or_default()),
        "{n:#}"
    );

    // No Sandbox budget left: rejected before any check runs.
    let c = change(
        &b,
        &project,
        json!({"goal": "Budget", "acceptanceCriteria": [], "invariants": [], "riskTier": "low"}),
    )
    .await;
    task(
        &b,
        &c,
        "a",
        &[],
        // A new file: the Candidate above may have moved canonical's src/store.ts already.
        &[write("src/budget.ts", "export const budget = 0;\n")],
        &[],
    )
    .await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    store.exhaust_sandbox_meter(&project, now).await.unwrap();
    let k = verify(&b, &c).await;
    assert_eq!(k["status"], "rejected", "{k:#}");
    assert!(
        k["statusReason"].as_str().unwrap().contains("no Sandbox budget"),
        "{k:#}"
    );
    assert!(k["evidence"].as_array().unwrap().is_empty(), "{k:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_check_past_its_timeout_is_the_gap_timed_out() {
    let b = Belay::start_with_sandbox().await;
    // The build check has 120 s; this project's typecheck takes longer.
    let project = sample_project(&b, Some(json!({"commands": {"typecheck": "sleep 130"}}))).await;
    let c = change(
        &b,
        &project,
        json!({"goal": "Wait", "acceptanceCriteria": [], "invariants": [], "riskTier": "low"}),
    )
    .await;
    task(
        &b,
        &c,
        "a",
        &[],
        &[edit("src/store.ts", "// An in-memory store", "// The store")],
        &[],
    )
    .await;
    let k = verify(&b, &c).await;
    assert_eq!(k["status"], "rejected", "{k:#}");
    let build = evidence(&k, "build");
    assert_eq!(build.len(), 1, "{k:#}");
    assert!(build[0]["durationMs"].as_u64().unwrap() > 120_000, "{k:#}");
    assert!(
        k["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["checkId"] == "build" && g["reason"] == "timed_out"),
        "{k:#}"
    );
    assert!(evidence(&k, "unit").len() == 1, "the next checks still run: {k:#}");
}

/// What the `temporal` CLI prints for `args` against the test's Temporal server.
fn temporal(b: &Belay, args: &[&str]) -> String {
    let out = Command::new(crate::common::temporal_bin())
        .args(args)
        .args(["--address", &b.temporal.address, "--output", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "temporal {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The first value under `key` anywhere in `v`.
fn find_key(v: &Value, key: &str) -> Option<Value> {
    match v {
        Value::Object(m) => m
            .get(key)
            .cloned()
            .or_else(|| m.values().find_map(|x| find_key(x, key))),
        Value::Array(a) => a.iter().find_map(|x| find_key(x, key)),
        _ => None,
    }
}

/// A low-risk Change with no criteria of one Task making `edits` and declaring `contract`.
async fn low_risk_change(b: &Belay, project: &str, goal: &str, edits: &[Value], contract: &[&str]) -> String {
    let c = change(
        b,
        project,
        json!({"goal": goal, "acceptanceCriteria": [], "invariants": [], "riskTier": "low"}),
    )
    .await;
    task(b, &c, "t1", &[], edits, contract).await;
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_live_app_is_smoke_tested_in_the_sandbox_and_a_client_change_without_a_new_bundle_fails_client_assets() {
    let b = Belay::start_with_sandbox().await;
    let project = sample_project(&b, Some(json!({"liveApp": true}))).await;

    // A live app plans contract and preview-smoke; the composed app starts with the dev command
    // in the Sandbox and answers both probes.
    let c = low_risk_change(
        &b,
        &project,
        "Count the todos",
        &[edit("src/routes.ts", "  },\n];", STATS_ROUTE)],
        &["GET /api/stats -> {count}"],
    )
    .await;
    let k = verify(&b, &c).await;
    assert!(
        ["verified", "promoted"].contains(&k["status"].as_str().unwrap()),
        "{k:#}"
    );
    let planned: Vec<&str> = k["plan"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["checkId"].as_str().unwrap())
        .collect();
    assert!(
        planned.contains(&"contract") && planned.contains(&"preview-smoke"),
        "{k:#}"
    );
    let smoke = evidence(&k, "preview-smoke");
    assert_eq!(smoke.len(), 1, "{k:#}");
    assert_eq!(
        (smoke[0]["status"].as_str(), smoke[0]["coverage"].as_str()),
        (Some("pass"), Some("checked_supported")),
        "{k:#}"
    );
    assert!(
        smoke[0]["summary"]
            .as_str()
            .unwrap()
            .starts_with("GET / answered Some(200), GET /api/health answered Some(200)"),
        "{k:#}"
    );
    // Low risk, no criteria: it promotes by itself, and canonical then holds its built bundle.
    let id = k["id"].as_str().unwrap().to_owned();
    let what = "the Candidate to be promoted";
    wait_until_every(what, Duration::from_secs(120), Duration::from_millis(250), async || {
        let status = b.get(&format!("/v1/candidates/{id}")).await["status"].clone();
        if status == "promoted" { Ok(()) } else { Err(status) }
    })
    .await;

    // A dev server that listens on the wrong port passes every unit test but not the smoke
    // check: the only gap, so the reason is the preview's.
    let c = low_risk_change(
        &b,
        &project,
        "Move the port",
        &[edit(
            "src/server.ts",
            r#"Number(process.env.PORT ?? "3000")"#,
            r#"Number(process.env.PORT ?? "3000") + 1"#,
        )],
        &[],
    )
    .await;
    let k = verify(&b, &c).await;
    assert_eq!(k["status"], "rejected", "{k:#}");
    assert_eq!(evidence(&k, "unit")[0]["status"], "pass", "{k:#}");
    let smoke = evidence(&k, "preview-smoke");
    assert_eq!(smoke.len(), 1, "{k:#}");
    assert_eq!(
        (smoke[0]["status"].as_str(), smoke[0]["coverage"].as_str()),
        (Some("fail"), Some("checked_supported")),
        "{k:#}"
    );
    assert_eq!(
        k["statusReason"], "Preview check failed: preview-smoke (failed)",
        "{k:#}"
    );
    let id = k["id"].as_str().unwrap();
    // The Sandbox meter settles after the last check and before the preview (the spec's order),
    // behind its marker; the history before the marker (preview first) still replays.
    // The gaps so far come from the rows the steps answered: the store's Evidence is read once,
    // for the gate (behind its marker; the histories before it read it after every step).
    let history = replays(&b, "verification-step-rows-kept-v1", &format!("verify-{id}")).await;
    let patches = belay_client::replay::patches(&history).unwrap();
    for marker in [
        belay_workflows::verification::PREVIEW_AFTER_SETTLE,
        belay_workflows::verification::STEP_ROWS_KEPT,
    ] {
        assert!(patches.contains(&marker.to_owned()), "{marker}: {patches:?}");
    }
    let scheduled = crate::common::scheduled_activities(&history);
    let settle = scheduled.iter().position(|a| a == "db.verify_settle").unwrap();
    let last_check = scheduled.iter().rposition(|a| a == "sandbox.verify_check").unwrap();
    assert!(settle < last_check, "{scheduled:?}");
    assert_eq!(
        scheduled.iter().filter(|a| *a == "db.verify_evidence").count(),
        1,
        "{scheduled:?}"
    );
    // An operator asks the workflow where it stands, and finds it by the Candidate's id.
    let progress = temporal(
        &b,
        &[
            "workflow",
            "query",
            "--workflow-id",
            &format!("verify-{id}"),
            "--name",
            "progress",
        ],
    );
    let progress: Value = serde_json::from_str(&progress).unwrap();
    let gaps: Vec<(Value, Value)> = find_key(&progress, "gaps")
        .and_then(|g| g.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|g| (g["checkId"].clone(), g["reason"].clone()))
        .collect();
    assert_eq!(gaps, vec![(json!("preview-smoke"), json!("failed"))], "{progress:#}");
    let what = "a workflow listed by the Candidate's search attributes";
    wait_until_every(what, Duration::from_secs(30), Duration::from_millis(250), async || {
        let listed = temporal(
            &b,
            &[
                "workflow",
                "list",
                "--query",
                &format!("BelayCandidateId = '{id}' AND BelayChangeId = '{c}' AND BelayProjectId = '{project}'"),
            ],
        );
        if listed.contains(&format!("verify-{id}")) {
            Ok(())
        } else {
            Err(listed)
        }
    })
    .await;
    // Composition is an event of the Candidate, its owner's.
    let events = b.get(&format!("/v1/events?entity={id}")).await;
    assert!(
        events
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "candidate.composed" && e["payload"]["composedCommit"] == k["composedCommit"]),
        "{events:#}"
    );

    // A comment in the client source changes no byte of the bundle the page loads (canonical
    // holds the bundle the first Change built): the live app would serve the old one, so
    // client-assets fails (and needs no runner).
    let c = low_risk_change(
        &b,
        &project,
        "Explain the page script",
        &[edit(
            "src/client/main.ts",
            "void load();",
            "// Loaded once, when the page opens.\nvoid load();",
        )],
        &[],
    )
    .await;
    let k = verify(&b, &c).await;
    assert_eq!(k["status"], "rejected", "{k:#}");
    let assets = evidence(&k, "client-assets");
    assert_eq!(assets.len(), 1, "{k:#}");
    assert_eq!(
        (assets[0]["status"].as_str(), assets[0]["coverage"].as_str()),
        (Some("fail"), Some("checked_supported")),
        "{k:#}"
    );
    assert!(
        assets[0]["summary"].as_str().unwrap().ends_with("(runner: sandbox)"),
        "{k:#}"
    );
    assert!(
        k["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["checkId"] == "client-assets" && g["reason"] == "failed"),
        "{k:#}"
    );
    assert!(
        k["statusReason"]
            .as_str()
            .unwrap()
            .starts_with("Required checks not satisfied: client-assets (failed)"),
        "{k:#}"
    );
}
