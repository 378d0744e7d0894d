//! No dead ends, end to end: a Change that waits on a person can be found and decided, and one
//! can always be cancelled. Real `belay` processes, a real Temporal server, real git and the real
//! Docker Sandbox with Bun verifying the sample app.

use crate::common::sample::{change, sample_project, start_verification, task, wait_candidate, write};
use crate::common::{Belay, wait_for};
use serde_json::{Value, json};
use std::process::Command;
use std::time::Duration;

/// A source file and a test of it that fails: `bun test` (the required `targeted` check) fails.
fn failing(name: &str, want: u32) -> Vec<Value> {
    vec![
        write(&format!("src/{name}.ts"), &format!("export const {name} = 1;\n")),
        write(
            &format!("test/{name}.test.ts"),
            &format!(
                "import {{ expect, test }} from \"bun:test\";\nimport {{ {name} }} from \"../src/{name}\";\n\ntest(\"{name} is {want}\", () => {{\n  expect({name}).toBe({want});\n}});\n"
            ),
        ),
    ]
}

/// A source file and a test of it that passes.
fn passing(name: &str) -> Vec<Value> {
    vec![
        write(
            &format!("src/{name}.ts"),
            &format!("export const {name} = \"{name}\";\n"),
        ),
        write(
            &format!("test/{name}.test.ts"),
            &format!(
                "import {{ expect, test }} from \"bun:test\";\nimport {{ {name} }} from \"../src/{name}\";\n\ntest(\"{name} is itself\", () => {{\n  expect({name}).toBe(\"{name}\");\n}});\n"
            ),
        ),
    ]
}

async fn events_of(b: &Belay, entity: &str, kind: &str) -> Vec<Value> {
    b.get(&format!("/v1/events?entity={entity}"))
        .await
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind)
        .cloned()
        .collect()
}

async fn wait_change(b: &Belay, change: &str, want: &str) {
    wait_for(&format!("change {want}"), Duration::from_secs(300), || async {
        b.get(&format!("/v1/changes/{change}")).await["status"] == want
    })
    .await;
}

/// Runs the Change's repair Task with `edits` and publishes it.
async fn run_repair(b: &Belay, change: &str, edits: &[Value]) {
    let tasks = b.get(&format!("/v1/changes/{change}/tasks")).await;
    let repair = tasks
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["key"] == "repair")
        .unwrap_or_else(|| panic!("no repair Task: {tasks:#}"))
        .clone();
    let (s, r) = b
        .post(&format!("/v1/tasks/{}/runs", repair["id"].as_str().unwrap()), json!({}))
        .await;
    assert_eq!(s, 201, "{r}");
    let run = r["id"].as_str().unwrap();
    for e in edits {
        let (s, v) = b.post(&format!("/v1/task-runs/{run}/workspace/tools"), e.clone()).await;
        assert_eq!(s, 200, "{e} answered {v}");
    }
    let (s, cs) = b
        .post(
            &format!("/v1/task-runs/{run}/workspace/publish"),
            json!({"message": "repair", "contractChanges": []}),
        )
        .await;
    assert_eq!(s, 201, "{cs}");
}

/// The directories under `/workspace` in the test's Sandbox containers.
fn sandbox_dirs(b: &Belay) -> Vec<String> {
    let mut out = Vec::new();
    for id in b.sandbox.as_ref().unwrap().containers() {
        let o = Command::new("docker")
            .args(["exec", &id, "ls", "-1", "/workspace"])
            .output()
            .unwrap();
        out.extend(String::from_utf8_lossy(&o.stdout).lines().map(str::to_owned));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_change_stranded_after_its_repair_is_listed_for_a_person_and_cancelled_and_a_held_candidate_still_ships() {
    let b = Belay::start_with_sandbox().await;
    let project = sample_project(&b).await;

    // A high-risk Change whose Candidate fails a required check: its one repair Task.
    let c = change(
        &b,
        &project,
        json!({"goal": "Add broken", "acceptanceCriteria": [], "invariants": [], "riskTier": "high"}),
    )
    .await;
    task(&b, &c, "t1", &failing("broken", 2)).await;
    let k1 = start_verification(&b, &c).await;
    let first = wait_candidate(&b, &k1, &["verified", "rejected", "stale"]).await;
    assert_eq!(first["status"], "rejected", "{first:#}");
    assert!(
        first["statusReason"]
            .as_str()
            .unwrap()
            .starts_with("Required checks not satisfied"),
        "{first:#}"
    );
    wait_change(&b, &c, "running").await;

    // The repair's Candidate fails too: the Change waits on a person, and a person can see it.
    run_repair(&b, &c, &failing("broken", 3)).await;
    let k2 = start_verification(&b, &c).await;
    assert_ne!(k2, k1);
    let second = wait_candidate(&b, &k2, &["verified", "rejected", "stale"]).await;
    assert_eq!(second["status"], "rejected", "{second:#}");
    wait_change(&b, &c, "awaiting_approval").await;
    let waiting = b.get("/v1/approvals?status=requested").await;
    let mine: Vec<&Value> = waiting
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["changeId"] == c.as_str())
        .collect();
    assert_eq!(mine.len(), 1, "{waiting:#}");
    let request = mine[0];
    assert_eq!(request["status"], "requested");
    assert_eq!(request["candidateId"], Value::Null, "no Candidate can ship: {request}");
    assert_eq!(request["tree"], Value::Null);
    assert_eq!(request["trigger"], "repair");
    assert_eq!(request["actions"], json!(["cancel"]), "{request}");
    assert_eq!(request["projectId"], project.as_str());
    assert!(
        request["reason"].as_str().unwrap().contains("cancel the change"),
        "{request}"
    );
    let asked = events_of(&b, &c, "approval.requested").await;
    assert_eq!(asked.len(), 1, "{asked:#?}");
    assert_eq!(asked[0]["payload"]["approvalId"], request["id"]);
    // Approving the rejected Candidate is not the way out: nothing waits on it.
    let (s, v) = b
        .post(
            &format!("/v1/candidates/{k2}/approvals"),
            json!({"decision": "grant", "tree": second["composedTree"]}),
        )
        .await;
    assert_eq!(s, 409, "{v}");

    // An agent's workspace is still open on the Change (a Task run that never published).
    let (s, t) = b
        .post(
            &format!("/v1/changes/{c}/tasks"),
            json!({"key": "t2", "kind": "implement", "title": "task t2", "semanticResources": [], "dependencies": []}),
        )
        .await;
    assert_eq!(s, 201, "{t}");
    let (s, r) = b
        .post(&format!("/v1/tasks/{}/runs", t["id"].as_str().unwrap()), json!({}))
        .await;
    assert_eq!(s, 201, "{r}");
    let run = r["id"].as_str().unwrap().to_owned();
    let (s, v) = b
        .post(
            &format!("/v1/task-runs/{run}/workspace/tools"),
            json!({"tool": "write_file", "path": "src/half.ts", "content": "export const half = 1;\n"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let run_dir = run[run.len().saturating_sub(24)..].to_owned();
    assert!(sandbox_dirs(&b).contains(&run_dir), "{:?}", sandbox_dirs(&b));

    // Bad input names the field and changes nothing.
    for (body, field) in [
        (json!({}), "reason"),
        (json!({"reason": "  "}), "reason"),
        (json!({"reason": "x", "extra": 1}), "extra"),
    ] {
        let (s, v) = b.post(&format!("/v1/changes/{c}/cancel"), body.clone()).await;
        assert_eq!(s, 422, "{body} answered {v}");
        assert!(v["error"]["message"].as_str().unwrap().contains(field), "{body}: {v}");
    }
    assert_eq!(b.get(&format!("/v1/changes/{c}")).await["status"], "awaiting_approval");
    let (s, v) = b.post("/v1/changes/chg_nope/cancel", json!({"reason": "x"})).await;
    assert_eq!(s, 404, "{v}");

    // The cancel ends it: the request is cancelled, the workspace and its run stop, a receipt and
    // an event say who and why.
    let (s, v) = b
        .post(&format!("/v1/changes/{c}/cancel"), json!({"reason": "not worth it"}))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["change"]["status"], "cancelled", "{v}");
    assert_eq!(v["stoppedRuns"], json!([run]), "{v}");
    assert_eq!(b.get(&format!("/v1/changes/{c}")).await["status"], "cancelled");
    let still: Vec<Value> = b
        .get("/v1/approvals?status=requested")
        .await
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["changeId"] == c.as_str())
        .cloned()
        .collect();
    assert!(still.is_empty(), "{still:#?}");
    let cancelled = b.get("/v1/approvals?status=cancelled").await;
    let done = cancelled
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == request["id"])
        .unwrap_or_else(|| panic!("{cancelled:#}"));
    assert_eq!(done["decisionReason"], "not worth it");
    let receipts = b.get(&format!("/v1/changes/{c}/receipts")).await;
    let receipt = receipts
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "CHANGE_CANCELLED")
        .unwrap_or_else(|| panic!("{receipts:#}"));
    assert_eq!(receipt["inputs"]["reason"], "not worth it");
    assert_eq!(receipt["inputs"]["status"], "awaiting_approval");
    assert!(
        receipt["inputs"]["by"].as_str().unwrap().starts_with("acct_"),
        "{receipt}"
    );
    assert_eq!(receipt["outcome"]["failedTaskRuns"], json!([run]), "{receipt}");
    let ev = events_of(&b, &c, "change.cancelled").await;
    assert_eq!(ev.len(), 1, "{ev:#?}");
    assert_eq!(ev[0]["payload"]["reason"], "not worth it");
    assert_eq!(ev[0]["payload"]["by"], receipt["inputs"]["by"]);
    // The workspace is closed: its run failed, its directory gone, a call refused.
    let ws = b.get(&format!("/v1/task-runs/{run}/workspace")).await;
    assert_eq!(ws["status"], "failed", "{ws:#}");
    assert!(ws["error"].as_str().unwrap().contains("not worth it"), "{ws:#}");
    assert!(!sandbox_dirs(&b).contains(&run_dir), "{:?}", sandbox_dirs(&b));
    let (s, v) = b
        .post(
            &format!("/v1/task-runs/{run}/workspace/tools"),
            json!({"tool": "read_file", "path": "src/half.ts"}),
        )
        .await;
    assert_eq!(s, 409, "{v}");

    // A second cancel answers 409 with the status.
    let (s, v) = b
        .post(&format!("/v1/changes/{c}/cancel"), json!({"reason": "again"}))
        .await;
    assert_eq!(s, 409, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("cancelled"), "{v}");
    assert_eq!(events_of(&b, &c, "change.cancelled").await.len(), 1);

    // A promotable Candidate held for a person is approved and promoted as before; its request
    // says the person may approve it or cancel the Change.
    let h = change(
        &b,
        &project,
        json!({"goal": "Add held", "acceptanceCriteria": [], "invariants": [], "riskTier": "high"}),
    )
    .await;
    task(&b, &h, "t1", &passing("held")).await;
    let kh = start_verification(&b, &h).await;
    let k = wait_candidate(&b, &kh, &["verified", "rejected", "stale"]).await;
    assert_eq!(k["status"], "verified", "{k:#}");
    wait_for("the held Candidate's request", Duration::from_secs(60), || async {
        b.get("/v1/approvals?status=requested")
            .await
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["candidateId"] == kh.as_str())
    })
    .await;
    let waiting = b.get("/v1/approvals?status=requested").await;
    let entry = waiting
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["candidateId"] == kh.as_str())
        .unwrap();
    assert_eq!(entry["actions"], json!(["approve", "cancel"]), "{entry}");
    assert_eq!(entry["changeId"], h.as_str());
    let tree = k["composedTree"].as_str().unwrap();
    assert_eq!(entry["tree"], tree);
    let (s, v) = b
        .post(
            &format!("/v1/candidates/{kh}/approvals"),
            json!({"decision": "grant", "tree": tree}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["promotion"]["outcome"], "promoted", "{v}");
    assert_eq!(b.get(&format!("/v1/changes/{h}")).await["status"], "promoted");
    let (s, v) = b
        .post(&format!("/v1/changes/{h}/cancel"), json!({"reason": "too late"}))
        .await;
    assert_eq!(s, 409, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("promoted"), "{v}");
}

/// A ready project as a new user has it: S0, only `.gitignore`, no `contract` script.
async fn new_project(b: &Belay) -> String {
    let (s, p) = b.post("/v1/projects", json!({"name": "fresh"})).await;
    assert_eq!(s, 201, "{p}");
    let id = p["id"].as_str().unwrap().to_string();
    wait_for("project ready", Duration::from_secs(60), || async {
        b.get(&format!("/v1/projects/{id}")).await["status"] == "ready"
    })
    .await;
    id
}

const PACKAGE_JSON: &str = r#"{
  "name": "fresh",
  "private": true,
  "scripts": {
    "typecheck": "bun build ./src/app.ts --target=bun --outdir=/tmp/fresh-typecheck",
    "contract": "bun ./src/contract.ts"
  }
}
"#;

const APP: &str = r#"export const routes = [
  { method: "GET", path: "/api/health", handler: () => Response.json({ ok: true }) },
];
"#;

const CONTRACT: &str = r#"import { routes } from "./app";
console.log(JSON.stringify(routes.map((r) => ({ method: r.method, path: r.path }))));
"#;

const TESTS: &str = r#"import { expect, test } from "bun:test";
import { routes } from "../src/app";

test("health answers ok", async () => {
  const r = await routes[0].handler();
  expect(await r.json()).toEqual({ ok: true });
});

test("authorization: health needs no token", () => {
  expect(routes[0].path).toBe("/api/health");
});
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_projects_first_high_risk_change_with_a_declared_route_verifies_through_the_contract_check() {
    let b = Belay::start_with_sandbox().await;
    let project = new_project(&b).await;
    let c = change(
        &b,
        &project,
        json!({"goal": "A health route", "acceptanceCriteria": [], "invariants": [], "riskTier": "high"}),
    )
    .await;
    let (s, t) = b
        .post(
            &format!("/v1/changes/{c}/tasks"),
            json!({"key": "t1", "kind": "implement", "title": "health", "semanticResources": ["health:api"], "dependencies": []}),
        )
        .await;
    assert_eq!(s, 201, "{t}");
    let (s, r) = b
        .post(&format!("/v1/tasks/{}/runs", t["id"].as_str().unwrap()), json!({}))
        .await;
    assert_eq!(s, 201, "{r}");
    let run = r["id"].as_str().unwrap().to_owned();
    for (path, content) in [
        ("package.json", PACKAGE_JSON),
        ("src/app.ts", APP),
        ("src/contract.ts", CONTRACT),
        ("test/health.test.ts", TESTS),
    ] {
        let (s, v) = b
            .post(
                &format!("/v1/task-runs/{run}/workspace/tools"),
                json!({"tool": "write_file", "path": path, "content": content}),
            )
            .await;
        assert_eq!(s, 200, "{path}: {v}");
    }
    let (s, cs) = b
        .post(
            &format!("/v1/task-runs/{run}/workspace/publish"),
            json!({"message": "health", "contractChanges": ["Adds GET /api/health -> {ok:true}"]}),
        )
        .await;
    assert_eq!(s, 201, "{cs}");
    let k = start_verification(&b, &c).await;
    let done = wait_candidate(&b, &k, &["verified", "rejected", "stale"]).await;
    let contract: Vec<&Value> = done["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["checkId"] == "contract")
        .collect();
    assert_eq!(done["status"], "verified", "{done:#}");
    assert_eq!(contract.len(), 1, "{done:#}");
    assert_eq!(contract[0]["status"], "pass", "{:#}", contract[0]);
    assert_eq!(
        contract[0]["summary"],
        "route table matches the declared contract changes (1 route changed) (runner: sandbox)"
    );
    // High risk under policy-1: a person approves it, and it ships.
    wait_change(&b, &c, "awaiting_approval").await;
    let tree = done["composedTree"].as_str().unwrap();
    wait_for("the request", Duration::from_secs(60), || async {
        b.get("/v1/approvals?status=requested")
            .await
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["candidateId"] == k.as_str())
    })
    .await;
    let (s, v) = b
        .post(
            &format!("/v1/candidates/{k}/approvals"),
            json!({"decision": "grant", "tree": tree}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["promotion"]["outcome"], "promoted", "{v}");

    // Policy commands split by the shell's word rules: one a shell would refuse is refused when
    // the policy is saved, naming the field, and changes nothing; a quoted `sh -c` is taken.
    let path = format!("/v1/projects/{project}/policy");
    let before = b.get(&path).await;
    let put = |cmd: &str| json!({"commands": {"test": cmd}}).to_string();
    let (s, v) = b
        .request("PUT", &path, Some(&b.token), Some(&put("sh -c 'test -f x || echo []")))
        .await;
    assert_eq!(s, 422, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("commands.test"), "{v}");
    assert!(message.contains("quot"), "{v}");
    assert_eq!(b.get(&path).await, before, "a refused policy changes nothing");
    let (s, v) = b
        .request("PUT", &path, Some(&b.token), Some(&put("sh -c 'test -f x || echo []'")))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["commands"]["test"], "sh -c 'test -f x || echo []'", "{v}");
    assert_ne!(v["id"], before["id"], "{v}");
}
