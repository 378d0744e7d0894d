//! DispatcherWorkflow: the one dispatcher (id `dispatcher`). It claims jobs strictly in queue
//! order under each harness cap (the rule lives in `belay_domain::dispatch`, applied by the
//! `db.claim` activity) and starts a RunWorkflow per claimed job. It is woken by a signal on
//! every enqueue and every run end, with a timer as a backstop, and continues as new before its
//! history grows large.
//!
//! Since [`LOCAL_CLAIMS`] the claim is a local activity of the workflow worker (no task-queue
//! round trip between a wake-up and the runs it starts), and the runs are started by a second
//! local activity through the client instead of as child workflows: the dispatcher's history no
//! longer carries three child events per job, nor a workflow task for each run's completion. A claim that fails after its bounded
//! retries (the database is down for longer than they last) does not end the dispatcher: it waits
//! [`BACKSTOP`] and tries the same claim key again, so jobs a lost attempt may have claimed are
//! still the ones returned. Since [`STARTS_OUTLIVE_REFUSALS`] the same holds for the starts: a
//! batch Temporal keeps refusing is started again after the backstop until it goes through.
//!
//! No job is dispatched twice: each claim carries a key unique to this run and iteration, so a
//! retried claim activity returns the jobs the first attempt claimed instead of claiming more,
//! and each RunWorkflow's id is derived from its job id and never reused.

use crate::contracts::{ClaimedJob, ClientApi, StoreApi};
use crate::run::{RunInput, RunWorkflow};
use crate::{metadata, search};
use crate::{options, queues};
use belay_domain::ids::RunId;
use belay_domain::job::Origin;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_common::search_attributes::SearchAttributes;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{
    ChildWorkflowOptions, ContinueAsNewOptions, ParentClosePolicy, SyncWorkflowContext, WorkflowContext,
    WorkflowContextView, WorkflowIdReusePolicy, WorkflowResult,
};

/// How long the dispatcher sleeps without a wake-up signal before claiming again.
pub const BACKSTOP: Duration = Duration::from_secs(15);
/// The patch that made the claim and the run starts local activities.
pub const LOCAL_CLAIMS: &str = "dispatch-local-claims";
/// The patch after which a batch of run starts Temporal keeps refusing (a search attribute the
/// cluster lacks, a namespace away) no longer ends the dispatcher when the starts' retries run
/// out: it waits [`BACKSTOP`] and starts the same batch again, until the starts go through.
pub const STARTS_OUTLIVE_REFUSALS: &str = "dispatch-starts-outlive-refusals";
/// Claims per run before continuing as new.
pub const CLAIMS_PER_RUN: u64 = 400;
/// History length past which the dispatcher continues as new.
pub const MAX_HISTORY: u32 = 8_000;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DispatcherInput {
    /// Wake-ups that arrived before the previous run continued as new.
    pub carried_wakes: u64,
    /// Claims per run before continuing as new (default [`CLAIMS_PER_RUN`]); kept across runs.
    #[serde(default)]
    pub claims_per_run: Option<u64>,
}

#[workflow]
pub struct DispatcherWorkflow {
    wakes: u64,
    dispatched: u64,
    claims_per_run: Option<u64>,
}

#[workflow_methods]
impl DispatcherWorkflow {
    #[init]
    pub fn new(_ctx: &WorkflowContextView, input: DispatcherInput) -> Self {
        Self {
            wakes: input.carried_wakes,
            dispatched: 0,
            claims_per_run: input.claims_per_run,
        }
    }

    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<()> {
        let run_id = ctx.run_id().to_string();
        let mut seen_wakes = 0u64;
        let mut claims = 0u64;
        let claims_per_run = ctx.state(|s| s.claims_per_run);
        let limit = claims_per_run.unwrap_or(CLAIMS_PER_RUN).max(1);
        let local = ctx.patched(LOCAL_CLAIMS);
        let outlive_refusals = local && ctx.patched(STARTS_OUTLIVE_REFUSALS);
        loop {
            let key = format!("{run_id}:{claims}");
            let claim = if local {
                ctx.execute_local_activity(StoreApi::claim, key, options::db_local())
                    .await
            } else {
                ctx.execute_activity(StoreApi::claim, key, options::db()).await
            };
            let claimed: Vec<ClaimedJob> = match claim {
                Ok(claimed) => claimed,
                Err(e) if ctx.cancellation_token().is_cancelled() => return Err(e.into()),
                Err(_) => {
                    // Out of retries: the database has been away for minutes. Wait, then try
                    // the same key again (never a new one: its jobs may already be claimed).
                    ctx.timer(BACKSTOP).await;
                    continue;
                }
            };
            claims += 1;
            if local {
                if !claimed.is_empty() && outlive_refusals {
                    // Starting a run that exists already is a success, so a retry (or a replay
                    // of this claim after a crash) starts nothing twice. Refused starts are
                    // counted and logged by the activity; the batch is started again after the
                    // backstop for as long as Temporal refuses, and never dropped.
                    loop {
                        match ctx
                            .execute_local_activity(ClientApi::start_runs, claimed.clone(), options::starts_local())
                            .await
                        {
                            Ok(_) => break,
                            Err(e) if ctx.cancellation_token().is_cancelled() => return Err(e.into()),
                            Err(_) => {
                                ctx.timer(BACKSTOP).await;
                            }
                        }
                    }
                } else if !claimed.is_empty() {
                    ctx.execute_local_activity(ClientApi::start_runs, claimed.clone(), options::db_local())
                        .await?;
                }
            } else {
                let starts: Vec<_> = claimed
                    .iter()
                    .map(|job| {
                        ctx.start_child_workflow(
                            RunWorkflow::run,
                            RunInput {
                                job_id: job.job_id.clone(),
                            },
                            child_options(job),
                        )
                    })
                    .collect();
                for started in temporalio_sdk::workflows::join_all(starts).await {
                    // A start refused because the run already exists means it was started before
                    // (the claim was replayed after a crash): nothing to do.
                    let _ = started;
                }
            }
            ctx.state_mut(|s| s.dispatched += claimed.len() as u64);

            if claims >= limit || ctx.history_length() > MAX_HISTORY || ctx.continue_as_new_suggested() {
                let carried = ctx.state(|s| s.wakes).saturating_sub(seen_wakes);
                ctx.continue_as_new(
                    DispatcherInput {
                        carried_wakes: carried.min(1),
                        claims_per_run,
                    },
                    ContinueAsNewOptions::default(),
                )?;
            }
            if !claimed.is_empty() {
                continue; // more may be claimable at once
            }
            let wakes = ctx.state(|s| s.wakes);
            if wakes > seen_wakes {
                seen_wakes = wakes;
                continue;
            }
            let mut timer = ctx.timer(BACKSTOP);
            let mut woken = ctx.wait_condition(move |s| s.wakes > seen_wakes);
            temporalio_sdk::workflows::select! {
                _ = timer => {},
                _ = woken => {},
            };
            seen_wakes = ctx.state(|s| s.wakes);
        }
    }

    /// Something changed: a job was enqueued, a run ended, a job was cancelled.
    #[signal]
    pub fn wake(&mut self, _ctx: &mut SyncWorkflowContext<Self>) {
        self.wakes += 1;
    }

    /// How many jobs this run of the dispatcher has started.
    #[query]
    pub fn dispatched(&self, _ctx: &WorkflowContextView) -> u64 {
        self.dispatched
    }
}

/// The search attributes of a job's run: its job id, run id, harness, case, model and origin,
/// and the plan's or ladder's id when one launched it.
pub fn run_search_attributes(job: &ClaimedJob) -> SearchAttributes {
    let mut attrs = vec![
        search::JOB_ID.value_set(job.job_id.to_string()),
        search::RUN_ID.value_set(RunId::for_job(&job.job_id).to_string()),
        search::HARNESS.value_set(job.harness.clone()),
    ];
    if let Some(case) = &job.case {
        attrs.push(search::CASE.value_set(case.clone()));
    }
    if !job.models.is_empty() {
        attrs.push(search::MODEL.value_set(job.models.clone()));
    }
    if let Some(o) = &job.origin {
        attrs.push(search::ORIGIN.value_set(o.clone()));
        match Origin::parse(o) {
            Ok(Origin::Plan(id)) => attrs.push(search::PLAN_ID.value_set(id)),
            Ok(Origin::Ladder(id)) => attrs.push(search::LADDER_ID.value_set(id)),
            Err(_) => {}
        }
    }
    SearchAttributes::new(attrs)
}

fn child_options(job: &ClaimedJob) -> ChildWorkflowOptions {
    let described = metadata::run(job);
    ChildWorkflowOptions::builder()
        .workflow_id(queues::run_workflow_id(&job.job_id))
        .task_queue(queues::WORKFLOWS.to_string())
        .parent_close_policy(ParentClosePolicy::Abandon)
        .id_reuse_policy(WorkflowIdReusePolicy::RejectDuplicate)
        .static_summary(described.summary)
        .static_details(described.details)
        .search_attributes(run_search_attributes(job))
        .build()
}
