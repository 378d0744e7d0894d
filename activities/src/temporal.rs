//! TemporalActivities: the run lane's calls to Temporal itself (starting runs, waking the
//! dispatcher), local activities of the workflow worker, which holds the client.

use belay_workflows::contracts::ClaimedJob;
use std::sync::Arc;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use tracing::instrument;

/// Temporal's activities: the client, and the store where a refused start is counted.
pub struct TemporalActivities {
    pub client: temporalio_client::Client,
    /// Where a refused start is counted.
    pub store: belay_store::Store,
}

#[activities]
impl TemporalActivities {
    #[activity(definition = belay_workflows::contracts::definitions::StartRuns)]
    #[instrument(skip_all, fields(runs = jobs.len()), err(Debug))]
    pub async fn start_runs(
        self: Arc<Self>,
        _ctx: ActivityContext,
        jobs: Vec<ClaimedJob>,
    ) -> Result<u64, ActivityError> {
        let starts = jobs.iter().map(|job| belay_client::start_run(&self.client, job));
        let (mut started, mut refused) = (0, Vec::new());
        for (job, result) in jobs.iter().zip(futures::future::join_all(starts).await) {
            match result {
                Ok(true) => started += 1,
                // Started before: a retried or replayed start.
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(job_id = %job.job_id, error = %e, "Temporal refused to start a run; the batch is retried");
                    refused.push(e);
                }
            }
        }
        let n = refused.len() as i64;
        match refused.into_iter().next() {
            None => Ok(started),
            Some(first) => {
                // Counted before the retry, so every refused attempt shows in /metrics; a count
                // lost to a database away is only a missing tick, never a missing run.
                if let Err(e) = self.store.count(belay_store::metrics::RUN_START_FAILURES, n).await {
                    tracing::warn!(error = %e, "the refused starts could not be counted");
                }
                // Every start of the batch runs again; those started meanwhile answer "already started".
                Err(crate::retryable(first))
            }
        }
    }

    #[activity(definition = belay_workflows::contracts::definitions::WakeDispatcher)]
    #[instrument(skip_all, err(Debug))]
    pub async fn wake_dispatcher(self: Arc<Self>, _ctx: ActivityContext, _input: ()) -> Result<(), ActivityError> {
        belay_client::wake_dispatcher(&self.client)
            .await
            .map_err(crate::retryable)
    }
}
