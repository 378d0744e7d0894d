//! StoreActivities: the `belay.db` pool. Each activity is one store call; the store makes each
//! idempotent, so a retry after a crash changes nothing twice.

use crate::store_error;
use belay_domain::adapter::{JobFile, MANIFEST_FILE};
use belay_domain::ids::JobId;
use belay_domain::job::JobStatus;
use belay_store::Store;
use belay_store::jobs::{Completion, Transition};
use belay_workflows::contracts::{ClaimedJob, CompleteInput, Ended, FailInput, StartedJob, VersionFacts};
use std::sync::Arc;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use tracing::{info, instrument};

pub struct StoreActivities {
    pub store: Store,
    /// When set, a completed run of a ladder signals that ladder's climb (`ladder-{id}`).
    pub client: Option<temporalio_client::Client>,
}

impl StoreActivities {
    /// Tells the climb of the ladder that launched `job_id` (if one did) that a run ended. A climb
    /// that is not running (the ladder is disabled) is not an error: the next one reads the board.
    async fn poke_climb(&self, job_id: &str) {
        let Some(client) = &self.client else { return };
        let origin = match self.store.get_job(&JobId::from(job_id)).await {
            Ok(Some(job)) => job.origin,
            _ => None,
        };
        if let Some(belay_domain::job::Origin::Ladder(id)) = origin
            && let Err(e) = belay_client::poke_climb(client, &id).await
        {
            info!(ladder.id = %id, error = %e, "ladder climb not signalled");
        }
    }
}

#[activities]
impl StoreActivities {
    #[activity(definition = belay_workflows::contracts::definitions::Claim)]
    #[instrument(skip_all, fields(claim.key = %claim_key), err(Debug))]
    pub async fn claim(
        self: Arc<Self>,
        _ctx: ActivityContext,
        claim_key: String,
    ) -> Result<Vec<ClaimedJob>, ActivityError> {
        let jobs = self.store.claim(&claim_key).await.map_err(store_error)?;
        if !jobs.is_empty() {
            info!(claim.jobs = jobs.len(), "claimed jobs");
        }
        Ok(jobs
            .into_iter()
            .map(|j| ClaimedJob {
                harness: j.combination.harness().to_string(),
                origin: j.origin.map(|o| o.to_string()),
                job_id: j.id,
            })
            .collect())
    }

    #[activity(definition = belay_workflows::contracts::definitions::StartJob)]
    #[instrument(skip_all, fields(job.id = %job_id), err(Debug))]
    pub async fn start_job(self: Arc<Self>, _ctx: ActivityContext, job_id: JobId) -> Result<StartedJob, ActivityError> {
        let proceed = match self
            .store
            .advance_job(&job_id, JobStatus::Starting)
            .await
            .map_err(store_error)?
        {
            Transition::Moved(_) => true,
            // A retried start (or a replayed run) finds the job already further along.
            Transition::Already(_) => true,
            Transition::Refused(j) => j.status == JobStatus::Running,
        };
        let context = self.store.job_context(&job_id).await.map_err(store_error)?;
        let job = context.job;
        let job_file = JobFile {
            job_id: job.id.clone(),
            attempt: job.attempt,
            case: job.case.clone(),
            combination: job.combination.clone(),
            gg_config_name: job.gg_config_name.clone(),
            capabilities: context.capabilities,
            // The harness pool decides where a job's files live.
            output_dir: String::new(),
            manifest: MANIFEST_FILE.to_string(),
        };
        Ok(StartedJob {
            proceed,
            case: Some(job.case),
            job_file: Some(job_file),
            adapter: context.adapter,
            version: context.version.map(|v| VersionFacts {
                variants: v.variants,
                engines: v.engines,
            }),
        })
    }

    #[activity(definition = belay_workflows::contracts::definitions::MarkRunning)]
    #[instrument(skip_all, fields(job.id = %job_id), err(Debug))]
    pub async fn mark_running(self: Arc<Self>, _ctx: ActivityContext, job_id: JobId) -> Result<bool, ActivityError> {
        Ok(
            match self
                .store
                .advance_job(&job_id, JobStatus::Running)
                .await
                .map_err(store_error)?
            {
                Transition::Moved(_) | Transition::Already(_) => true,
                Transition::Refused(_) => false,
            },
        )
    }

    #[activity(definition = belay_workflows::contracts::definitions::CompleteJob)]
    #[instrument(skip_all, fields(job.id = %input.job_id), err(Debug))]
    pub async fn complete_job(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: CompleteInput,
    ) -> Result<Ended, ActivityError> {
        let completion = self
            .store
            .complete_job(&input.job_id, input.loaded, &input.artifacts)
            .await
            .map_err(store_error)?;
        if matches!(completion, Completion::Recorded(_) | Completion::AlreadyRecorded(_)) {
            self.poke_climb(&input.job_id).await;
        }
        Ok(match completion {
            Completion::Recorded(run) | Completion::AlreadyRecorded(run) => Ended {
                status: "completed".into(),
                run_id: Some(run.id),
                retry_job_id: None,
            },
            Completion::Refused(job) => Ended {
                status: job.status.to_string(),
                run_id: None,
                retry_job_id: None,
            },
        })
    }

    #[activity(definition = belay_workflows::contracts::definitions::FailJob)]
    #[instrument(skip_all, fields(job.id = %input.job_id), err(Debug))]
    pub async fn fail_job(self: Arc<Self>, _ctx: ActivityContext, input: FailInput) -> Result<Ended, ActivityError> {
        let f = self
            .store
            .fail_job(&input.job_id, &input.reason, input.infrastructure)
            .await
            .map_err(store_error)?;
        info!(job.status = %f.job.status, job.retry = ?f.retry.as_ref().map(|r| &r.id), "recorded failure");
        Ok(Ended {
            status: f.job.status.to_string(),
            run_id: None,
            retry_job_id: f.retry.map(|r| r.id),
        })
    }
}

/// The run lane's calls to Temporal (starting runs, waking the dispatcher): local activities of
/// the workflows pool, which holds the client.
pub struct ClientActivities {
    pub client: temporalio_client::Client,
    /// Where a refused start is counted.
    pub store: belay_store::Store,
}

#[activities]
impl ClientActivities {
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

/// The probe's no-op activity, served by the `db` pool.
pub struct ProbeActivities;

#[activities]
impl ProbeActivities {
    #[activity(definition = belay_workflows::contracts::probe_definitions::Echo)]
    #[instrument(skip_all, err(Debug))]
    pub async fn echo(_ctx: ActivityContext, input: String) -> Result<String, ActivityError> {
        Ok(input)
    }
}
