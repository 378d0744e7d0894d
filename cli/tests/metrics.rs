//! Prometheus metrics through real `belay api` and `belay worker` processes: `GET /metrics` of
//! the API and of the worker answer the text exposition format, parsed here line by line, with
//! the job figures moving as a job runs; the Temporal SDK's own worker metrics on their address.

mod common;

use common::{Belay, free_port};
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
