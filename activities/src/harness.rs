//! HarnessActivities: the `belay.harness` pool. Runs one job's adapter as a local process
//! (see [`crate::adapter_run`]), heartbeating while it runs, and keeps its artifacts in the
//! object store.

use crate::{fatal, retryable};
use belay_domain::attempt::log_tail;
use belay_domain::run::Artifact;
use belay_harness::{AdapterRunError, run_adapter_in};
use belay_workflows::contracts::{AdapterResult, AdapterRun, AttemptReport};
use object_store::ObjectStore;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use tracing::instrument;

pub struct HarnessActivities {
    pub objects: Arc<dyn ObjectStore>,
    /// A directory this worker owns; each job gets a fresh directory under it.
    pub work_root: PathBuf,
    /// Where adapters marked `sandbox` run; `None` fails them.
    pub sandbox: Option<Arc<belay_sandbox::Sandboxes>>,
    /// The worker's variables an adapter started on its host inherits.
    pub env: belay_harness::InheritedEnv,
    /// How this worker names itself in the attempts it reports (host and process).
    pub worker: String,
}

/// How a harness worker names itself in the attempts it reports: its host and process id.
pub fn worker_name() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "unknown-host".into());
    format!("{host}/{}", std::process::id())
}

/// How often a running adapter's activity heartbeats.
const HEARTBEAT_EVERY: Duration = Duration::from_secs(2);

#[activities]
impl HarnessActivities {
    #[activity(definition = belay_workflows::contracts::definitions::RunAdapter)]
    #[instrument(skip_all, fields(job.id = %input.job.job_id, job.attempt = input.job.attempt), err(Debug))]
    pub async fn run_adapter(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: AdapterRun,
    ) -> Result<AdapterResult, ActivityError> {
        let AdapterRun { job, adapter: spec } = input;
        let started_at = belay_store::now_ms();
        let run = run_adapter_in(
            &spec,
            job,
            &self.work_root,
            self.objects.clone(),
            belay_harness::Host {
                sandbox: self.sandbox.as_deref(),
                env: &self.env,
            },
            || {},
            ctx.cancelled(),
        );
        let heartbeat = async {
            let mut every = tokio::time::interval(HEARTBEAT_EVERY);
            every.tick().await;
            loop {
                every.tick().await;
                // A failed heartbeat is reported again by the next one; the run goes on.
                let _ = ctx.record_heartbeat(()).await;
            }
        };
        let result = tokio::select! {
            r = run => r,
            _ = heartbeat => unreachable!("the heartbeat loop never ends"),
        };
        match result {
            Ok(run) => Ok(AdapterResult {
                report: Some(AttemptReport {
                    started_at,
                    ended_at: belay_store::now_ms(),
                    worker: self.worker.clone(),
                    exit_code: run.exit_code,
                    log_tail: log_tail(if run.stderr_tail.trim().is_empty() {
                        &run.stdout_tail
                    } else {
                        &run.stderr_tail
                    })
                    .to_string(),
                }),
                outcome: run.outcome,
                artifacts: run
                    .artifacts
                    .into_iter()
                    .map(|a| Artifact {
                        path: a.path,
                        key: a.key,
                        size: a.size,
                    })
                    .collect(),
            }),
            Err(AdapterRunError::Cancelled) => Err(ActivityError::cancelled()),
            Err(e) if e.is_retryable() => Err(retryable(e)),
            Err(e) => Err(fatal(e)),
        }
    }
}
