//! RunWorkflow (id `run-{job_id}`): executes one claimed job on its harness lane.
//!
//! starting → running (the adapter on the `harness` pool, heartbeating) → completed with a run
//! row, or failed. Since the [`LOCAL_DB_STEPS`] patch the store steps around the adapter (short
//! and idempotent) run as local activities of the workflow worker, so the adapter run is the only
//! task that goes through a task queue, and the run wakes the dispatcher through the client (a
//! local activity too) and ends in the same workflow task, instead of a signal command whose
//! delivery costs the run another workflow task. Histories recorded
//! before the patch still replay their `belay.db` activities and their awaited signal. A failure is recorded once; the store enqueues the retry the domain rule
//! decides on (attempt + 1, same launcher and origin, withheld while the origin is paused).
//! A pin the catalogue cannot run (a version not ingested, an undeclared engine) fails without a
//! retry: that is about the pin, not the infrastructure. The dispatcher is woken at the end so the
//! freed slot is used at once.

use crate::contracts::{
    AdapterResult, AdapterRun, AttemptInput, ClientApi, CompleteInput, Ended, FailInput, HarnessApi, StartedJob,
    StoreApi,
};
use crate::{options, queues};
use belay_domain::adapter::{AdapterOutcome, pin_problem};
use belay_domain::attempt::{AfterFailure, FailureClass, after_failure};
use belay_domain::catalogue::AdapterSpec;
use belay_domain::ids::JobId;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_common::ActivityDefinition;
use temporalio_common::data_converters::TemporalDeserializable;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{
    ActivityExecutionError, SignalWorkflowOptions, WorkflowContext, WorkflowContextView, WorkflowResult,
};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInput {
    pub job_id: JobId,
}

/// The patch that moved the run's store steps from `belay.db` activities to local activities and
/// its wake-up of the dispatcher from a signal command to the client.
pub const LOCAL_DB_STEPS: &str = "run-local-db-steps";

/// The patch after which every adapter run is kept as an attempt and its failure class decides
/// what follows: `infra` fails the job (the retry rule takes over, as before), `task` completes it
/// with a failed result, `provider_rate_limited` waits a backoff and runs the adapter again in the
/// same job, `provider_refused` fails it without a retry and pauses its origin. Histories recorded
/// before it fail every adapter failure as infrastructure, as they did.
pub const FAILURE_CLASSES: &str = "run-failure-classes";

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
        let v2 = ctx.patched(LOCAL_DB_STEPS);
        let classes = v2 && ctx.patched(FAILURE_CLASSES);
        let ended = Self::execute(ctx, &input, v2, classes).await;
        // Wake the dispatcher whatever happened: a slot was freed (or never taken).
        if v2 {
            // Through the client, in the same workflow task as the last store step: the run
            // ends without another round trip. (A signal command issued with the completion
            // is dropped by the server once the run has closed.)
            let _ = ctx
                .execute_local_activity(ClientApi::wake_dispatcher, (), options::wake_local())
                .await;
        } else {
            let _ = ctx
                .external_workflow(queues::DISPATCHER_ID, None)
                .signal(crate::wake::Wake, (), SignalWorkflowOptions::default())
                .await;
        }
        ended
    }

    /// One store step: a local activity since [`LOCAL_DB_STEPS`], a `belay.db` activity before.
    async fn db_step<AD>(
        ctx: &WorkflowContext<Self>,
        local: bool,
        activity: AD,
        input: AD::Input,
    ) -> Result<AD::Output, ActivityExecutionError>
    where
        AD: ActivityDefinition,
        AD::Output: TemporalDeserializable,
    {
        if local {
            ctx.execute_local_activity(activity, input, options::db_local()).await
        } else {
            ctx.execute_activity(activity, input, options::db()).await
        }
    }

    async fn execute(
        ctx: &mut WorkflowContext<Self>,
        input: &RunInput,
        local: bool,
        classes: bool,
    ) -> WorkflowResult<Ended> {
        ctx.state_mut(|s| s.phase = "starting".into());
        let started: StartedJob = Self::db_step(ctx, local, StoreApi::start_job, input.job_id.clone()).await?;
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
        let version = started
            .version
            .as_ref()
            .map(|v| (v.variants.as_slice(), v.engines.as_slice()));
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
                class: None,
            };
            return Ok(Self::db_step(ctx, local, StoreApi::fail_job, fail).await?);
        }
        let adapter = started.adapter.expect("checked above");

        let running: bool = Self::db_step(ctx, local, StoreApi::mark_running, input.job_id.clone()).await?;
        if !running {
            return Ok(Ended {
                status: "canceled".into(),
                run_id: None,
                retry_job_id: None,
            });
        }
        ctx.state_mut(|s| s.phase = "running".into());
        if classes {
            return Self::attempts(ctx, input, job_file, adapter).await;
        }
        let timeout = Duration::from_secs(adapter.timeout_seconds() + 120);
        let result: Result<AdapterResult, _> = ctx
            .execute_activity(
                HarnessApi::run_adapter,
                AdapterRun { job: job_file, adapter },
                options::harness(timeout, ADAPTER_HEARTBEAT, ADAPTER_ATTEMPTS),
            )
            .await;
        ctx.state_mut(|s| s.phase = "recording".into());
        let ended = match result {
            Ok(AdapterResult {
                outcome: AdapterOutcome::Completed { loaded, .. },
                artifacts,
                ..
            }) => {
                let done = CompleteInput {
                    job_id: input.job_id.clone(),
                    loaded,
                    artifacts,
                    task_failure: None,
                };
                Self::db_step(ctx, local, StoreApi::complete_job, done).await?
            }
            Ok(AdapterResult {
                outcome: AdapterOutcome::Failed { reason, .. },
                ..
            }) => {
                let fail = FailInput {
                    job_id: input.job_id.clone(),
                    reason,
                    infrastructure: true,
                    class: None,
                };
                Self::db_step(ctx, local, StoreApi::fail_job, fail).await?
            }
            Err(e) if ctx.cancellation_token().is_cancelled() => return Err(e.into()),
            Err(e) => {
                let fail = FailInput {
                    job_id: input.job_id.clone(),
                    reason: format!("the harness activity failed: {e}"),
                    infrastructure: true,
                    class: None,
                };
                Self::db_step(ctx, local, StoreApi::fail_job, fail).await?
            }
        };
        ctx.state_mut(|s| s.phase = ended.status.clone());
        Ok(ended)
    }

    /// Since [`FAILURE_CLASSES`]: runs the adapter, keeps each attempt, and lets the failure
    /// class decide (the rule is `belay_domain::attempt::after_failure`).
    async fn attempts(
        ctx: &mut WorkflowContext<Self>,
        input: &RunInput,
        job_file: belay_domain::adapter::JobFile,
        adapter: AdapterSpec,
    ) -> WorkflowResult<Ended> {
        let timeout = Duration::from_secs(adapter.timeout_seconds() + 120);
        let mut rate_limited = 0u32;
        let mut n = 0i64;
        loop {
            n += 1;
            let started = workflow_ms(ctx);
            let run = AdapterRun {
                job: job_file.clone(),
                adapter: adapter.clone(),
            };
            let result: Result<AdapterResult, _> = ctx
                .execute_activity(
                    HarnessApi::run_adapter,
                    run,
                    options::harness(timeout, ADAPTER_HEARTBEAT, ADAPTER_ATTEMPTS),
                )
                .await;
            ctx.state_mut(|s| s.phase = "recording".into());
            let result = match result {
                Err(e) if ctx.cancellation_token().is_cancelled() => return Err(e.into()),
                Err(e) => Err(format!("the harness activity failed: {e}")),
                Ok(r) => Ok(r),
            };
            let kept = attempt_of(input, n, started, workflow_ms(ctx), &result);
            ctx.execute_local_activity(StoreApi::record_attempt, kept, options::db_local())
                .await?;
            let (reason, class, retry_after) = match result {
                Ok(AdapterResult {
                    outcome: AdapterOutcome::Completed { loaded, .. },
                    artifacts,
                    ..
                }) => {
                    let done = CompleteInput {
                        job_id: input.job_id.clone(),
                        loaded,
                        artifacts,
                        task_failure: None,
                    };
                    return Self::ended(ctx, StoreApi::complete_job, done).await;
                }
                Ok(AdapterResult {
                    outcome:
                        AdapterOutcome::Failed {
                            reason,
                            class,
                            retry_after_seconds,
                        },
                    ..
                }) => (reason, class, retry_after_seconds),
                Err(reason) => (reason, FailureClass::Infra, None),
            };
            let fail = |infrastructure: bool, class: FailureClass| FailInput {
                job_id: input.job_id.clone(),
                reason: reason.clone(),
                infrastructure,
                class: Some(class),
            };
            match after_failure(class, rate_limited, retry_after) {
                AfterFailure::Backoff { seconds } => {
                    rate_limited += 1;
                    ctx.state_mut(|s| s.phase = "backing_off".into());
                    ctx.timer(Duration::from_secs(seconds)).await;
                    ctx.state_mut(|s| s.phase = "running".into());
                }
                AfterFailure::CompleteAsTaskFailure => {
                    let done = CompleteInput {
                        job_id: input.job_id.clone(),
                        loaded: false,
                        artifacts: vec![],
                        task_failure: Some(reason.clone()),
                    };
                    return Self::ended(ctx, StoreApi::complete_job, done).await;
                }
                AfterFailure::Fail { infrastructure } => {
                    return Self::ended(ctx, StoreApi::fail_job, fail(infrastructure, class)).await;
                }
                AfterFailure::Refused => {
                    return Self::ended(ctx, StoreApi::fail_job, fail(false, class)).await;
                }
            }
        }
    }

    /// The last store step of a run, and the phase it leaves the run in.
    async fn ended<AD>(ctx: &mut WorkflowContext<Self>, activity: AD, input: AD::Input) -> WorkflowResult<Ended>
    where
        AD: ActivityDefinition<Output = Ended>,
    {
        let ended = ctx.execute_local_activity(activity, input, options::db_local()).await?;
        ctx.state_mut(|s| s.phase = ended.status.clone());
        Ok(ended)
    }

    /// Where the run is: starting, running, recording, or how it ended.
    #[query]
    pub fn phase(&self, _ctx: &WorkflowContextView) -> String {
        self.phase.clone()
    }
}

/// The workflow's clock in ms since the epoch (deterministic: it comes from the history).
fn workflow_ms(ctx: &WorkflowContext<RunWorkflow>) -> i64 {
    ctx.workflow_time()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as i64)
}

/// The attempt to keep for one adapter run: the harness worker's report when it made one, else
/// the workflow's view (an activity that failed past its retries).
fn attempt_of(
    input: &RunInput,
    n: i64,
    started: i64,
    ended: i64,
    result: &Result<AdapterResult, String>,
) -> AttemptInput {
    let (report, class, message) = match result {
        Ok(r) => {
            let (class, message) = match &r.outcome {
                AdapterOutcome::Completed { .. } => (None, None),
                AdapterOutcome::Failed { reason, class, .. } => (Some(*class), Some(reason.clone())),
            };
            (r.report.clone(), class, message)
        }
        Err(reason) => (None, Some(FailureClass::Infra), Some(reason.clone())),
    };
    AttemptInput {
        job_id: input.job_id.clone(),
        n,
        started_at: report.as_ref().map_or(started, |r| r.started_at),
        ended_at: report.as_ref().map_or(ended, |r| r.ended_at),
        worker: report.as_ref().map(|r| r.worker.clone()),
        exit: report.as_ref().and_then(|r| r.exit_code).map(i64::from),
        class,
        message,
        log_tail: report.map(|r| r.log_tail),
    }
}
