//! Prometheus metrics in the text exposition format, on `GET /metrics` of the API and of every
//! worker process (`BELAY_METRICS_ADDR`). Each scrape builds a fresh registry from the
//! database's rows (`belay_store::metrics`), so every process answers the same figures and a
//! restart loses nothing: jobs by status and harness, status transitions, claim and dispatch
//! latency and run duration histograms, live Sandboxes, Sandbox meter usage per project, top-ups
//! of plans and ladders by how they ended with their durations, Candidates by status, verdicts
//! and check attempts with their durations, and the usage meters (browser, model).
//! The histograms are rebuilt from every job that has the timestamps, so their counts only
//! grow, as Prometheus expects.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use belay_store::Store;
use prometheus::{
    Encoder, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};
use std::future::Future;
use tokio::net::TcpListener;

/// Buckets for latencies and durations, in seconds.
const BUCKETS: [f64; 14] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0,
];

/// The exposition text of one scrape.
pub async fn render(store: &Store) -> Result<String, String> {
    let snap = store.metrics_snapshot().await.map_err(|e| e.to_string())?;
    let registry = Registry::new();
    let err = |e: prometheus::Error| e.to_string();
    let jobs = IntGaugeVec::new(
        Opts::new("belay_jobs", "Jobs by harness and status"),
        &["harness", "status"],
    )
    .map_err(err)?;
    for (harness, status, n) in &snap.jobs {
        jobs.with_label_values(&[harness.as_str(), status.as_str()]).set(*n);
    }
    let transitions = IntCounterVec::new(
        Opts::new(
            "belay_job_transitions_total",
            "Job status changes recorded, by the status entered",
        ),
        &["status"],
    )
    .map_err(err)?;
    for (status, n) in &snap.transitions {
        transitions.with_label_values(&[status.as_str()]).inc_by(*n as u64);
    }
    let latency =
        |name: &str, help: &str| Histogram::with_opts(HistogramOpts::new(name, help).buckets(BUCKETS.to_vec()));
    let claim = latency(
        "belay_job_claim_seconds",
        "Seconds from queued to claimed by the dispatcher",
    )
    .map_err(err)?;
    for s in &snap.claim_seconds {
        claim.observe(*s);
    }
    let dispatch = latency("belay_job_dispatch_seconds", "Seconds from claimed to running").map_err(err)?;
    for s in &snap.dispatch_seconds {
        dispatch.observe(*s);
    }
    let runs = HistogramVec::new(
        HistogramOpts::new(
            "belay_run_seconds",
            "Seconds from running to completed or failed, by harness",
        )
        .buckets(BUCKETS.to_vec()),
        &["harness"],
    )
    .map_err(err)?;
    for (harness, s) in &snap.run_seconds {
        runs.with_label_values(&[harness.as_str()]).observe(*s);
    }
    let sandboxes =
        IntGauge::new("belay_sandboxes_live", "Sandboxes holding a lease in the deployment").map_err(err)?;
    sandboxes.set(snap.live_sandboxes);
    let meter = GaugeVec::new(
        Opts::new(
            "belay_sandbox_meter_seconds",
            "Seconds charged on a project's monthly Sandbox meter",
        ),
        &["project", "month"],
    )
    .map_err(err)?;
    for (project, month, s) in &snap.meter_seconds {
        meter
            .with_label_values(&[project.as_str(), month.as_str()])
            .set(*s as f64);
    }
    let by = |name: &str, help: &str, label: &str| {
        HistogramVec::new(HistogramOpts::new(name, help).buckets(BUCKETS.to_vec()), &[label])
    };
    let top_ups = IntCounterVec::new(
        Opts::new(
            "belay_top_ups_total",
            "Top-ups of coverage plans and ladders, by kind and how they ended (launched, failed, busy, paused)",
        ),
        &["kind", "outcome"],
    )
    .map_err(err)?;
    for (kind, outcome, n) in &snap.top_ups {
        top_ups
            .with_label_values(&[kind.as_str(), outcome.as_str()])
            .inc_by(*n as u64);
    }
    let top_up_seconds = by(
        "belay_top_up_seconds",
        "Seconds from a top-up's claim to its end, for top-ups that ran, by kind",
        "kind",
    )
    .map_err(err)?;
    for (kind, s) in &snap.top_up_seconds {
        top_up_seconds.with_label_values(&[kind.as_str()]).observe(*s);
    }
    let candidates =
        IntGaugeVec::new(Opts::new("belay_candidates", "Candidates by status"), &["status"]).map_err(err)?;
    for (status, n) in &snap.candidates {
        candidates.with_label_values(&[status.as_str()]).set(*n);
    }
    let verifications = IntCounterVec::new(
        Opts::new(
            "belay_verifications_total",
            "Candidates that reached a verdict, by their first verdict (verified or rejected)",
        ),
        &["outcome"],
    )
    .map_err(err)?;
    let verification_seconds = by(
        "belay_verification_seconds",
        "Seconds from a Candidate's creation to its first verdict, by verdict",
        "outcome",
    )
    .map_err(err)?;
    for (outcome, s) in &snap.verification_seconds {
        verifications.with_label_values(&[outcome.as_str()]).inc();
        verification_seconds.with_label_values(&[outcome.as_str()]).observe(*s);
    }
    let checks = IntCounterVec::new(
        Opts::new(
            "belay_checks_total",
            "Check attempts recorded as Evidence, by check kind and status",
        ),
        &["kind", "status"],
    )
    .map_err(err)?;
    for (kind, status, n) in &snap.checks {
        checks
            .with_label_values(&[kind.as_str(), status.as_str()])
            .inc_by(*n as u64);
    }
    let check_seconds = by(
        "belay_check_seconds",
        "Seconds each check attempt took, by check kind",
        "kind",
    )
    .map_err(err)?;
    for (kind, s) in &snap.check_seconds {
        check_seconds.with_label_values(&[kind.as_str()]).observe(*s);
    }
    let usage = IntGaugeVec::new(
        Opts::new(
            "belay_usage",
            "Usage meters (browser seconds and runs, model calls and cost), used and reserved, summed over their scopes",
        ),
        &["meter", "part"],
    )
    .map_err(err)?;
    for (meter, used, reserved) in &snap.usage {
        usage.with_label_values(&[meter.as_str(), "used"]).set(*used);
        usage.with_label_values(&[meter.as_str(), "reserved"]).set(*reserved);
    }
    let run_start_failures = IntCounter::new(
        "belay_run_start_failures_total",
        "Starts of run workflows Temporal refused for a reason other than already started (each retried)",
    )
    .map_err(err)?;
    for (name, value) in &snap.counters {
        if name == belay_store::metrics::RUN_START_FAILURES {
            run_start_failures.inc_by(*value as u64);
        }
    }
    for c in [
        Box::new(jobs) as Box<dyn prometheus::core::Collector>,
        Box::new(run_start_failures),
        Box::new(transitions),
        Box::new(claim),
        Box::new(dispatch),
        Box::new(runs),
        Box::new(sandboxes),
        Box::new(meter),
        Box::new(top_ups),
        Box::new(top_up_seconds),
        Box::new(candidates),
        Box::new(verifications),
        Box::new(verification_seconds),
        Box::new(checks),
        Box::new(check_seconds),
        Box::new(usage),
    ] {
        registry.register(c).map_err(err)?;
    }
    let mut text = Vec::new();
    TextEncoder::new().encode(&registry.gather(), &mut text).map_err(err)?;
    String::from_utf8(text).map_err(|e| e.to_string())
}

/// Figures a process adds of its own to the database's (the API's failed authentications).
pub type ProcessFigures = std::sync::Arc<dyn Fn() -> String + Send + Sync>;

async fn scrape(State((store, extra)): State<(Store, Option<ProcessFigures>)>) -> Response {
    match render(&store).await {
        Ok(mut text) => {
            if let Some(extra) = extra {
                text.push_str(&extra());
            }
            ([(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)], text).into_response()
        }
        Err(e) => {
            tracing::error!(error = %e, "rendering metrics failed");
            (StatusCode::SERVICE_UNAVAILABLE, format!("metrics unavailable: {e}\n")).into_response()
        }
    }
}

/// `GET /metrics` over `store`.
pub fn metrics_router(store: Store) -> Router {
    Router::new().route("/metrics", get(scrape)).with_state((store, None))
}

/// `GET /metrics` over `store`, followed by the process's own `extra` figures.
pub fn metrics_router_with(store: Store, extra: ProcessFigures) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state((store, Some(extra)))
}

/// Serves `GET /metrics` on `listener` (a worker's `BELAY_METRICS_ADDR`) until `shutdown`.
pub async fn serve_metrics(
    listener: TcpListener,
    store: Store,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(crate::without_delay(listener), metrics_router(store))
        .with_graceful_shutdown(shutdown)
        .await
}
