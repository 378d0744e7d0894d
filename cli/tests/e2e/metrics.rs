//! Prometheus metrics through real `belay api` and `belay worker` processes: `GET /metrics` of
//! the API and of the worker answer the text exposition format, parsed here line by line, with
//! the job figures moving as a job runs; the Temporal SDK's own worker metrics on their address.

use crate::common::{Belay, free_port};
use std::collections::BTreeMap;
use std::time::Duration;

/// One parsed exposition: sample `name{labels}` → value, and each metric family's type.
#[derive(Debug, Default)]
struct Exposition {
    samples: BTreeMap<String, f64>,
    types: BTreeMap<String, String>,
}

/// Parses the text exposition format (version 0.0.4): `# HELP`, `# TYPE`, and sample lines
/// `name{label="value",…} number`. Anything else fails the test.
fn parse(text: &str) -> Exposition {
    let mut out = Exposition::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or_else(|| panic!("bad TYPE line {line:?}"));
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "{line}"
            );
            out.types.insert(name.to_owned(), kind.to_owned());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        assert!(!line.starts_with('#'), "unknown comment {line:?}");
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("bad sample {line:?}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value in {line:?}")),
        };
        let name = series.split('{').next().unwrap();
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad metric name in {line:?}"
        );
        let labels = &series[name.len()..];
        if !labels.is_empty() {
            assert!(labels.starts_with('{') && labels.ends_with('}'), "{line}");
            for pair in labels[1..labels.len() - 1].split("\",").filter(|p| !p.is_empty()) {
                let (k, v) = pair.split_once('=').unwrap_or_else(|| panic!("bad label in {line:?}"));
                assert!(!k.is_empty() && v.starts_with('"'), "bad label {pair:?} in {line:?}");
            }
        }
        out.samples.insert(series.to_owned(), value);
    }
    out
}

async fn scrape(http: &reqwest::Client, url: &str) -> Exposition {
    let r = http.get(url).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200, "{url}");
    let kind = r.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    parse(&r.text().await.unwrap())
}

fn sample(e: &Exposition, series: &str) -> f64 {
    e.samples.get(series).copied().unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_answer_the_exposition_format_and_the_job_figures_move_as_a_job_runs() {
    let (worker_port, sdk_port) = (free_port(), free_port());
    let worker_metrics = format!("127.0.0.1:{worker_port}");
    let sdk_metrics = format!("127.0.0.1:{sdk_port}");
    let b = Belay::start_with_env(&[
        ("BELAY_METRICS_ADDR", &worker_metrics),
        ("BELAY_TEMPORAL_METRICS_ADDR", &sdk_metrics),
    ])
    .await;
    b.catalogue().await;
    b.harness(
        "h",
        1,
        r#"sleep 0.3; printf '{"status":"completed"}' > "$BELAY_MANIFEST""#,
    )
    .await;
    let api = format!("{}/metrics", b.url);
    let before = scrape(&b.http, &api).await;
    assert_eq!(before.types["belay_job_claim_seconds"], "histogram");
    assert_eq!(before.types["belay_job_dispatch_seconds"], "histogram");
    assert_eq!(before.types["belay_sandboxes_live"], "gauge");
    assert_eq!(sample(&before, "belay_job_claim_seconds_count"), 0.0);
    let completed = r#"belay_jobs{harness="h",status="completed"}"#;
    assert_eq!(sample(&before, completed), 0.0);

    let job = b.launch("h").await;
    let id = job["id"].as_str().unwrap();
    b.wait_status(id, &["completed"], Duration::from_secs(60)).await;
    let after = scrape(&b.http, &api).await;
    assert_eq!(after.types["belay_jobs"], "gauge");
    assert_eq!(after.types["belay_job_transitions_total"], "counter");
    assert_eq!(after.types["belay_run_seconds"], "histogram");
    assert_eq!(sample(&after, completed), 1.0, "{:?}", after.samples);
    assert!(
        sample(&after, r#"belay_job_transitions_total{status="completed"}"#)
            > sample(&before, r#"belay_job_transitions_total{status="completed"}"#)
    );
    assert_eq!(sample(&after, "belay_job_claim_seconds_count"), 1.0);
    assert_eq!(sample(&after, "belay_job_dispatch_seconds_count"), 1.0);
    assert_eq!(sample(&after, r#"belay_run_seconds_count{harness="h"}"#), 1.0);
    assert!(sample(&after, r#"belay_run_seconds_sum{harness="h"}"#) >= 0.3);
    assert_eq!(sample(&after, "belay_sandboxes_live"), 0.0);

    // The worker process answers the same figures on its own address.
    let worker = scrape(&b.http, &format!("http://{worker_metrics}/metrics")).await;
    assert_eq!(sample(&worker, completed), 1.0);
    // The Temporal SDK's own worker metrics.
    let sdk = scrape(&b.http, &format!("http://{sdk_metrics}/metrics")).await;
    assert!(
        sdk.samples.keys().any(|k| k.starts_with("temporal_")),
        "{:?}",
        sdk.samples.keys().take(10).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn top_ups_and_verifications_move_their_counters_and_durations() {
    use crate::common::sample::{change, sample_project, start_verification, task, wait_candidate, write};
    use serde_json::json;

    let b = Belay::start_with_sandbox().await;
    b.catalogue().await;
    b.harness("x", 100, "sleep 600").await;
    let (s, plan) = b
        .post(
            "/v1/coverage-plans",
            json!({"name": "p", "cases": [{"slug": "c", "version": "1.0.0", "variant": "default"}],
                   "combinations": [{"kind": "harness", "harness": "x", "model": "m"}], "runsPerCell": 2,
                   "bufferTarget": {"kind": "bounded", "runs": 5}, "autoTopUp": false}),
        )
        .await;
    assert_eq!(s, 201, "{plan}");
    let plan = plan["id"].as_str().unwrap().to_owned();
    let api = format!("{}/metrics", b.url);
    let series = |outcome: &str| format!(r#"belay_top_ups_total{{kind="plan",outcome="{outcome}"}}"#);
    let before = scrape(&b.http, &api).await;

    // Ten top-ups at once: those that ran and those answered busy are counted as such.
    let topup = format!("/v1/coverage-plans/{plan}/topup");
    let calls = (0..10).map(|_| b.post(&topup, json!({})));
    let answers = futures::future::join_all(calls).await;
    let (mut ran, mut busy) = (0.0, 0.0);
    for (s, v) in &answers {
        assert_eq!(*s, 200, "{v}");
        match v["skipped"].as_str() {
            None => ran += 1.0,
            Some("busy") => busy += 1.0,
            Some(other) => panic!("skipped {other}: {v}"),
        }
    }
    assert!(ran >= 1.0, "{answers:?}");
    let after = scrape(&b.http, &api).await;
    assert_eq!(after.types["belay_top_ups_total"], "counter");
    assert_eq!(after.types["belay_top_up_seconds"], "histogram");
    assert_eq!(
        sample(&after, &series("launched")) - sample(&before, &series("launched")),
        ran
    );
    assert_eq!(sample(&after, &series("busy")) - sample(&before, &series("busy")), busy);
    assert_eq!(
        sample(&after, r#"belay_top_up_seconds_count{kind="plan"}"#),
        sample(&after, &series("launched"))
    );
    // Paused: skipped, and counted as paused.
    let (s, _) = b.post(&format!("/v1/coverage-plans/{plan}/pause"), json!({})).await;
    assert_eq!(s, 200);
    let (s, v) = b.post(&format!("/v1/coverage-plans/{plan}/topup"), json!({})).await;
    assert_eq!((s, v["skipped"].as_str()), (200, Some("paused")), "{v}");
    let paused = scrape(&b.http, &api).await;
    assert_eq!(
        sample(&paused, &series("paused")) - sample(&after, &series("paused")),
        1.0
    );

    // A verification: the Candidate's verdict, its duration and its checks are counted.
    let project = sample_project(&b).await;
    let c = change(
        &b,
        &project,
        json!({"goal": "Add hello", "acceptanceCriteria": [], "invariants": [], "riskTier": "low"}),
    )
    .await;
    task(
        &b,
        &c,
        "t1",
        &[write("src/hello.ts", "export const hello = \"hello\";\n")],
    )
    .await;
    let k = start_verification(&b, &c).await;
    // A low-risk Candidate with no human gate is promoted as soon as it is verified, and a poll
    // can see it only once it is promoted: its verification's outcome was `verified` then.
    let cand = wait_candidate(&b, &k, &["verified", "rejected", "promoted"]).await;
    let verdict = match cand["status"].as_str().unwrap() {
        "promoted" => "verified",
        other => other,
    };
    let done = scrape(&b.http, &api).await;
    assert_eq!(done.types["belay_verifications_total"], "counter");
    assert_eq!(done.types["belay_verification_seconds"], "histogram");
    assert_eq!(done.types["belay_candidates"], "gauge");
    assert_eq!(
        sample(&done, &format!(r#"belay_verifications_total{{outcome="{verdict}"}}"#)),
        1.0,
        "{:?}",
        done.samples
    );
    assert_eq!(
        sample(
            &done,
            &format!(r#"belay_verification_seconds_count{{outcome="{verdict}"}}"#)
        ),
        1.0
    );
    assert!(
        sample(
            &done,
            &format!(r#"belay_verification_seconds_sum{{outcome="{verdict}"}}"#)
        ) > 0.0
    );
    // One Candidate, whatever it became since (a verified one may be promoting already).
    let candidates: f64 = done
        .samples
        .iter()
        .filter(|(k, _)| k.starts_with("belay_candidates{"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(candidates, 1.0, "{:?}", done.samples);
    let checks: f64 = done
        .samples
        .iter()
        .filter(|(k, _)| k.starts_with("belay_checks_total{"))
        .map(|(_, v)| v)
        .sum();
    let evidence = b.get(&format!("/v1/candidates/{k}")).await;
    assert!(checks >= 1.0, "{evidence}");
    let timed: f64 = done
        .samples
        .iter()
        .filter(|(k, _)| k.starts_with("belay_check_seconds_count{"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(timed, checks);
}

/// Temporal refuses to start a run (here: a search attribute the server does not know, as a
/// cluster whose operator has not registered belay's attributes would): the worker logs the
/// refusal with the job's id, `/metrics` counts it, and the start is retried until the server
/// accepts it; the job then runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_temporal_refuses_to_start_is_logged_counted_and_started_on_a_retry() {
    let dir = tempfile::tempdir().unwrap();
    let temporal = crate::common::temporal_without(dir.path(), &["BelayHarness"]);
    let b = Belay::start_on_temporal(dir, temporal, &[]).await;
    b.catalogue().await;
    b.harness("h", 1, r#"printf '{"status":"completed"}' > "$BELAY_MANIFEST""#)
        .await;
    let api = format!("{}/metrics", b.url);
    let before = scrape(&b.http, &api).await;
    assert_eq!(before.types["belay_run_start_failures_total"], "counter");
    assert_eq!(sample(&before, "belay_run_start_failures_total"), 0.0);

    let job = b.launch("h").await;
    let id = job["id"].as_str().unwrap().to_owned();
    // Refused, counted and logged with the job's id; refused more often than one start activity
    // tries, so the dispatcher outlived its activity's retries (it waits its backstop, then
    // starts the same batch again).
    let outlived = f64::from(belay_workflows::options::START_ATTEMPTS + 1);
    crate::common::wait_for("refused starts counted", Duration::from_secs(90), || {
        let (http, api) = (b.http.clone(), api.clone());
        async move { sample(&scrape(&http, &api).await, "belay_run_start_failures_total") >= outlived }
    })
    .await;
    let log = std::fs::read_to_string(b.dir.path().join("worker-0.log")).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("Temporal refused to start a run") && l.contains(&id)),
        "the worker's log names the job: {log}"
    );
    assert_ne!(b.job(&id).await["status"], "completed");

    // The operator registers the attribute; the next retry starts the run, which runs once.
    let out = std::process::Command::new(crate::common::temporal_bin())
        .args([
            "operator",
            "search-attribute",
            "create",
            "--name",
            "BelayHarness",
            "--type",
            "Keyword",
        ])
        .args(["--address", &b.temporal.address])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    b.wait_status(&id, &["completed"], Duration::from_secs(120)).await;
    let runs = b.get(&format!("/v1/runs?jobId={id}")).await;
    assert_eq!(runs.as_array().map(Vec::len), Some(1), "{runs}");

    // The dispatcher's history of waiting out the refusals replays (and is kept).
    let client = belay_client::connect(&b.temporal.address, "default", "test")
        .await
        .unwrap();
    let json = belay_client::closed_history_json(&client, "dispatcher", Duration::ZERO)
        .await
        .unwrap();
    assert!(
        patches(&json)
            .iter()
            .any(|p| p.contains(belay_workflows::dispatcher::STARTS_OUTLIVE_REFUSALS)),
        "the dispatcher ran the patched branch: {:?}",
        patches(&json)
    );
    belay_client::replay::replay_json(&json)
        .await
        .unwrap_or_else(|e| panic!("dispatcher: {e}"));
    crate::common::record_history("dispatcher-refusals-v1", &json);
}

/// The patch markers a history recorded, each as its decoded payload.
fn patches(history: &[u8]) -> Vec<String> {
    use base64::Engine;
    let history: serde_json::Value = serde_json::from_slice(history).unwrap();
    history["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["attributes"]["MarkerRecordedEventAttributes"])
        .filter(|m| m["marker_name"] == "core_patch")
        .filter_map(|m| m["details"]["patch-data"]["payloads"][0]["data"].as_str())
        .map(|d| {
            let bytes = base64::engine::general_purpose::STANDARD.decode(d).unwrap();
            String::from_utf8_lossy(&bytes).into_owned()
        })
        .collect()
}
