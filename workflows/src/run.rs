//! RunWorkflow (id `run-{job_id}`): executes one claimed job on its harness lane.
//!
//! starting → running (the adapter on the `harness` pool, heartbeating) → completed with a run
//! row, or failed. A failure is recorded once; the store enqueues the retry the domain rule
//! decides on (attempt + 1, same launcher and origin, withheld while the origin is paused).
//! A pin the catalogue cannot run (a version not ingested, an undeclared engine) fails without a
//! retry: that is about the pin, not the infrastructure. The dispatcher is woken at the end so the
//! freed slot is used at once.

use crate::contracts::{AdapterResult, CompleteInput, Ended, FailInput, HarnessApi, StartedJob, StoreApi};
use crate::{options, queues};
use belay_domain::adapter::{AdapterOutcome, pin_problem};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{SignalWorkflowOptions, WorkflowContext, WorkflowContextView, WorkflowResult};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInput {
    pub job_id: String,
}

/// Attempts of the adapter activity on infrastructure errors (a worker lost mid-run) before
/// the job itself fails and the retry rule takes over.
pub const ADAPTER_ATTEMPTS: u32 = 3;
/// How long the harness pool may go without a heartbeat before the adapter run is retried.
pub const ADAPTER_HEARTBEAT: Duration = Duration::from_secs(10);

#[workflow]
#[derive(Default)]
pub struct RunWorkflow {
    phase: String,
}

#[workflow_methods]
impl RunWorkflow {
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>, input: RunInput) -> WorkflowResult<Ended> {
        let ended = Self::execute(ctx, &input).await;
        // Wake the dispatcher whatever happened: a slot was freed (or never taken).
        let _ = ctx
            .external_workflow(queues::DISPATCHER_ID, None)
            .signal(crate::wake::Wake, (), SignalWorkflowOptions::default())
            .await;
        ended
    }

    async fn execute(ctx: &mut WorkflowContext<Self>, input: &RunInput) -> WorkflowResult<Ended> {
        ctx.state_mut(|s| s.phase = "starting".into());
        let started: StartedJob = ctx
            .execute_activity(StoreApi::start_job, input.job_id.clone(), options::db())
            .await?;
        let (Some(job_file), Some(case)) = (started.job_file.clone(), started.case.clone()) else {
            return Ok(Ended {
                status: "canceled".into(),
                run_id: None,
                retry_job_id: None,
            });
        };
        if !started.proceed {
            return Ok(Ended {
                status: "canceled".into(),
                run_id: None,
                retry_job_id: None,
            });
        }
        let version = started.version.as_ref().map(|(v, e)| (v.as_slice(), e.as_slice()));
        let problem = pin_problem(&case, version).or_else(|| {
            started
                .adapter
                .is_none()
                .then(|| format!("harness {} is not in the catalogue", job_file.combination.harness()))
        });
        if let Some(reason) = problem {
            let fail = FailInput {
                job_id: input.job_id.clone(),
                reason,
                infrastructure: false,
            };
            return Ok(ctx.execute_activity(StoreApi::fail_job, fail, options::db()).await?);
        }
        let adapter = started.adapter.expect("checked above");

        let running: bool = ctx
            .execute_activity(StoreApi::mark_running, input.job_id.clone(), options::db())
            .await?;
        if !running {
            return Ok(Ended {
                status: "canceled".into(),
                run_id: None,
                retry_job_id: None,
            });
        }
        ctx.state_mut(|s| s.phase = "running".into());
        let timeout = Duration::from_secs(adapter.timeout_seconds() + 120);
        let result: Result<AdapterResult, _> = ctx
            .execute_activity(
                HarnessApi::run_adapter,
                (job_file, adapter),
                options::harness(timeout, ADAPTER_HEARTBEAT, ADAPTER_ATTEMPTS),
            )
            .await;
        ctx.state_mut(|s| s.phase = "recording".into());
        let ended = match result {
            Ok(AdapterResult {
                outcome: AdapterOutcome::Completed { loaded, .. },
                artifacts,
            }) => {
                let done = CompleteInput {
                    job_id: input.job_id.clone(),
                    loaded,
                    artifacts,
                };
                ctx.execute_activity(StoreApi::complete_job, done, options::db())
                    .await?
            }
            Ok(AdapterResult {
                outcome: AdapterOutcome::Failed { reason },
                ..
            }) => {
                let fail = FailInput {
                    job_id: input.job_id.clone(),
                    reason,
                    infrastructure: true,
                };
                ctx.execute_activity(StoreApi::fail_job, fail, options::db()).await?
            }
            Err(e) if ctx.cancellation_token().is_cancelled() => return Err(e.into()),
            Err(e) => {
                let fail = FailInput {
                    job_id: input.job_id.clone(),
                    reason: format!("the harness activity failed: {e}"),
                    infrastructure: true,
                };
                ctx.execute_activity(StoreApi::fail_job, fail, options::db()).await?
            }
        };
        ctx.state_mut(|s| s.phase = ended.status.clone());
        Ok(ended)
    }

    /// Where the run is: starting, running, recording, or how it ended.
    #[query]
    pub fn phase(&self, _ctx: &WorkflowContextView) -> String {
        self.phase.clone()
    }
}
