//! From a page to its workflow: every kind of workflow a plan, a ladder, a job or a project
//! starts is found in Temporal by belay's search attributes (`BelayRunId`, `BelayCase`,
//! `BelayModel`, `BelayPlanId`, `BelayLadderId`, `BelayProjectId`), and each carries a summary
//! and details in its user metadata; every entity page of the console links to them in Temporal's
//! Web UI, by a query that finds them. Real `belay` processes, a real Temporal server, a real
//! Chromium; the logs they write to files carry no colour codes.

use crate::common::{Belay, wait_until_every};
use crate::console::Console;
use futures::StreamExt;
use serde_json::{Value, json};
use std::time::Duration;
use temporalio_client::{Client, UntypedWorkflow, WorkflowDescribeOptions, WorkflowListOptions};

/// The Web UI's address the API is configured with (never fetched: the console only links to it).
const UI: &str = "http://127.0.0.1:9";
const OK_SCRIPT: &str = r#"printf '{"status":"completed","loaded":true}' > "$BELAY_MANIFEST""#;

/// The ids of the workflows `query` finds (each once, however many runs it had), once at least
/// `n` are visible (visibility lags).
async fn found(client: &Client, query: &str, n: usize) -> Vec<String> {
    wait_until_every(query, Duration::from_secs(60), Duration::from_millis(250), async || {
        let mut ids = Vec::new();
        let mut stream = client.list_workflows(query, WorkflowListOptions::default());
        while let Some(w) = stream.next().await {
            ids.push(w.map_err(|e| e.to_string())?.id().to_owned());
        }
        ids.sort();
        ids.dedup();
        if ids.len() >= n {
            Ok(ids)
        } else {
            Err(format!("found {ids:?}"))
        }
    })
    .await
}

/// The workflow's summary and details (both must be there).
async fn described(client: &Client, id: &str) -> (String, String) {
    let d = client
        .get_workflow_handle::<UntypedWorkflow>(id)
        .describe(WorkflowDescribeOptions::default())
        .await
        .unwrap_or_else(|e| panic!("describing {id}: {e}"));
    let summary = d.static_summary().unwrap_or_default().to_owned();
    let details = d.static_details().unwrap_or_default().to_owned();
    assert!(!summary.is_empty() && !details.is_empty(), "{id} has no user metadata");
    (summary, details)
}

/// Finds exactly the workflows `query` names, each with a summary: answers their summaries.
async fn summaries(client: &Client, query: &str, expect: &[String]) -> Vec<String> {
    let ids = found(client, query, expect.len()).await;
    let mut want = expect.to_vec();
    want.sort();
    assert_eq!(ids, want, "{query}");
    let mut out = Vec::new();
    for id in &ids {
        out.push(described(client, id).await.0);
    }
    out
}

fn run_workflow(job: &str) -> String {
    format!("run-{job}")
}

async fn completed_run(b: &Belay, job: &str) -> String {
    b.wait_status(job, &["completed"], Duration::from_secs(90)).await;
    let runs = b.get(&format!("/v1/runs?jobId={job}")).await;
    runs[0]["id"].as_str().unwrap().to_owned()
}

async fn jobs_of(b: &Belay, origin: &str) -> Vec<String> {
    b.get(&format!("/v1/jobs?origin={origin}&limit=10000"))
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect()
}

fn no_colour(b: &Belay) {
    for name in ["api.log", "worker-0.log"] {
        let log = std::fs::read_to_string(b.dir.path().join(name)).unwrap();
        assert!(log.contains("INFO"), "{name} has log lines");
        assert!(!log.contains('\u{1b}'), "{name} carries colour codes");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_workflow_kind_is_found_by_its_search_attributes_and_carries_a_summary() {
    let b = Belay::start_with_env(&[("BELAY_TEMPORAL_UI_URL", UI)]).await;
    b.catalogue().await;
    b.harness("x", 100, OK_SCRIPT).await;
    let client = belay_client::connect(&b.temporal.address, "default", "test")
        .await
        .unwrap();

    // An ad hoc job: its run workflow is found by run id (known from the start), case and model.
    let job = b.launch("x").await["id"].as_str().unwrap().to_owned();
    let run = completed_run(&b, &job).await;
    assert_eq!(
        run,
        belay_domain::ids::RunId::for_job(&belay_domain::ids::JobId::from(job.as_str())).as_str(),
        "a job's run shares its body"
    );
    let s = summaries(&client, &format!("BelayRunId = '{run}'"), &[run_workflow(&job)]).await;
    assert_eq!(s, ["Run x with m on c@1.0.0/default/none, for a person (ad hoc)"]);
    let by_case = found(&client, "BelayCase = 'c@1.0.0/default/none' AND BelayModel = 'm'", 1).await;
    assert!(by_case.contains(&run_workflow(&job)), "{by_case:?}");

    // A plan: its top-up and the runs it launched (the ad hoc run counts toward its one cell),
    // by BelayPlanId.
    let (s, p) = b
        .post(
            "/v1/coverage-plans",
            json!({"name": "p", "cases": [{"slug": "c", "version": "1.0.0", "variant": "default"}],
                   "combinations": [{"kind": "harness", "harness": "x", "model": "m"}], "runsPerCell": 2,
                   "bufferTarget": {"kind": "unbounded"}}),
        )
        .await;
    assert_eq!(s, 201, "{p}");
    let plan = p["id"].as_str().unwrap().to_owned();
    let (s, t) = b.post(&format!("/v1/coverage-plans/{plan}/topup"), json!({})).await;
    assert!(s == 200 && t["enqueued"].as_i64() >= Some(1), "{t}");
    let plan_runs: Vec<String> = jobs_of(&b, &format!("plan:{plan}"))
        .await
        .iter()
        .map(|j| run_workflow(j))
        .collect();
    let s = summaries(
        &client,
        &format!("BelayPlanId = '{plan}' AND WorkflowType = 'RunWorkflow'"),
        &plan_runs,
    )
    .await;
    assert!(s.iter().all(|s| s.ends_with(&format!("for plan {plan}"))), "{s:?}");
    let s = summaries(
        &client,
        &format!("BelayPlanId = '{plan}' AND WorkflowType = 'TopUpWorkflow'"),
        &[format!("topup-plan-{plan}")],
    )
    .await;
    assert!(s[0].starts_with(&format!("Top-up of plan {plan}")), "{s:?}");

    let ladder = ladder_workflows(&b, &client).await;

    // A project's provisioning, by BelayProjectId; the one dispatcher describes itself.
    let (s, p) = b.post("/v1/projects", json!({"name": "todos"})).await;
    assert_eq!(s, 201, "{p}");
    let project = p["id"].as_str().unwrap().to_owned();
    let s = summaries(
        &client,
        &format!("BelayProjectId = '{project}'"),
        &[format!("provision-{project}")],
    )
    .await;
    assert_eq!(s, [format!("Provision project {project}")]);
    let (summary, _) = described(&client, "dispatcher").await;
    assert!(summary.starts_with("Dispatcher"), "{summary}");

    let c = Console::open(&b.url).await;
    c.sign_in(&b.token).await;
    for (page, want) in [
        (format!("/plans/{plan}"), format!("topup-plan-{plan}")),
        (format!("/ladders/{ladder}"), format!("ladder-{ladder}")),
        (format!("/runs/{run}"), run_workflow(&job)),
        (format!("/projects/{project}"), format!("provision-{project}")),
    ] {
        let ids = linked(&c, &client, &page).await;
        assert!(ids.contains(&want), "{page} links to {ids:?}, not {want}");
    }
    c.screenshot("workflow-links-project").await;
    c.assert_clean("pages linking to their workflows");
    c.close().await;

    no_colour(&b);
}

/// The workflows the page's Web UI link finds: the link opens the Web UI's list of belay's
/// namespace filtered by a visibility query, which is run here against Temporal.
async fn linked(c: &Console, client: &Client, page: &str) -> Vec<String> {
    c.visit(page).await;
    let href: String = c
        .eval("(document.querySelector('#workflows a.temporal-link') || {}).href || ''")
        .await;
    let prefix = format!("{UI}/namespaces/default/workflows?query=");
    let query = href
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{page}: the link {href:?} is not the Web UI's list"));
    let query = reqwest::Url::parse(&format!("http://x/?q={query}")).unwrap();
    let query = query.query_pairs().next().unwrap().1.into_owned();
    found(client, &query, 1).await
}

/// A ladder's climb, its top-up and its runs, by BelayLadderId; answers the ladder's id. Its
/// rung is a case of its own (runs of a cell count wherever they were launched).
async fn ladder_workflows(b: &Belay, client: &Client) -> String {
    let (s, v) = b
        .post(
            "/v1/test-cases",
            json!({"slug": "d", "version": "1.0.0", "testType": "standard", "variants": ["default"]}),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let (s, l) = b
        .post(
            "/v1/ladders",
            json!({"name": "l", "rungs": [{"slug": "d", "version": "1.0.0", "variant": "default"}],
                   "combinations": [{"kind": "harness", "harness": "x", "model": "m"}], "runsPerCell": 1,
                   "bufferTarget": {"kind": "unbounded"}}),
        )
        .await;
    assert_eq!(s, 201, "{l}");
    let ladder = l["id"].as_str().unwrap().to_owned();
    let (s, v): (u16, Value) = b.post(&format!("/v1/ladders/{ladder}/enable"), json!({})).await;
    assert_eq!(s, 200, "{v}");
    let runs: Vec<String> = jobs_of(b, &format!("ladder:{ladder}"))
        .await
        .iter()
        .map(|j| run_workflow(j))
        .collect();
    assert_eq!(runs.len(), 1, "{v}");
    let s = summaries(
        client,
        &format!("BelayLadderId = '{ladder}' AND WorkflowType = 'RunWorkflow'"),
        &runs,
    )
    .await;
    assert!(s[0].ends_with(&format!("for ladder {ladder}")), "{s:?}");
    for (kind, id) in [
        ("TopUpWorkflow", format!("topup-ladder-{ladder}")),
        ("LadderClimbWorkflow", format!("ladder-{ladder}")),
    ] {
        let query = format!("BelayLadderId = '{ladder}' AND WorkflowType = '{kind}'");
        let s = summaries(client, &query, std::slice::from_ref(&id)).await;
        assert!(s[0].contains(&ladder), "{s:?}");
    }
    ladder
}
