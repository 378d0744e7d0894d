//! TopUpWorkflow (`topup-plan-{id}`): one top-up of a coverage plan. It takes the plan's claim,
//! enqueues what the walk (`belay_domain::top_up::plan_top_up`, applied by the enqueue activity
//! over what the database holds) emits, releases the claim, and wakes the dispatcher.
//!
//! One top-up at a time: the workflow id is per plan, so a second start while one runs is refused
//! by Temporal (the API answers `skipped: "busy"` at once), and the claim on the plan row, a
//! conditional update with a two-minute lease, also keeps out a top-up started after one that died
//! without releasing. The walk and the enqueue are one activity because the walk's inputs and its
//! answer for a plan of thousands of cells do not fit a Temporal payload; the activity records the
//! answer under this run's id in the transaction that enqueues, so a retried activity returns the
//! first answer and inserts nothing twice (each repeat also carries a natural key).
//!
//! Behind the `patched` marker [`ONE_STEP_TOP_UP`] the claim, the enqueue and the release are one
//! activity, `db.topup_one_step` (three store transactions in one attempt, in that order); the
//! workflow calls `db.topup_release` only when that activity failed for good, so a claim it may
//! have left is still released. Histories recorded before the marker keep their three activities.
//!
//! A ladder's top-up (`topup-ladder-{id}`) is this workflow with `of: ladder`: the same claim
//! (on the ladder row), the same release and wake; its enqueue first persists the verdicts the
//! gate has decided and the early-stop cancellations, then walks only each climber's current
//! rung. The command sequence is the plan's, so `of` is data, not a branch in the history.

use crate::dispatcher::DispatcherWorkflow;
use crate::{options, queues};
use belay_domain::ids::AccountId;
use belay_domain::top_up::Skipped;
use serde::{Deserialize, Serialize};
use temporalio_common::ActivityError;
use temporalio_macros::{activity_definitions, workflow, workflow_methods};
use temporalio_sdk::{SignalWorkflowOptions, WorkflowContext, WorkflowResult};

/// The workflow id of a ladder's top-up.
pub fn ladder_workflow_id(ladder_id: &str) -> String {
    format!("topup-ladder-{ladder_id}")
}

/// What a top-up feeds (a coverage plan by default, all that histories recorded before ladders
/// carry).
pub use belay_domain::top_up::Feed;

/// The `patched` marker of the one-step top-up: claim, enqueue and release in one activity
/// (before it, three).
pub const ONE_STEP_TOP_UP: &str = "top-up-one-step";

/// The workflow id of a plan's top-up.
pub fn plan_workflow_id(plan_id: &str) -> String {
    format!("topup-plan-{plan_id}")
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopUpInput {
    /// The plan's id, or the ladder's with `of: ladder`.
    pub plan_id: String,
    /// The account whose buffer, reviews and gg configurations the top-up reads, and who
    /// launches what it enqueues.
    pub account_id: AccountId,
    #[serde(default)]
    pub of: Feed,
}

/// What a top-up did; the full answer is recorded under `topup_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopUpOutcome {
    /// Set when it did not run.
    pub skipped: Option<Skipped>,
    /// The id its answer is recorded under, when it ran.
    pub topup_id: Option<String>,
    pub enqueued: i64,
    /// The plan no longer exists.
    #[serde(default)]
    pub missing: bool,
}

/// What the claim found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimAnswer {
    Claimed,
    Busy,
    Paused,
    Missing,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimInput {
    pub plan_id: String,
    pub account_id: AccountId,
    /// Who holds the claim: this top-up's id.
    pub holder: String,
    #[serde(default)]
    pub of: Feed,
}

/// What the one-step top-up did: its claim and, when it claimed, how many jobs it enqueued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OneStepAnswer {
    pub claim: ClaimAnswer,
    pub enqueued: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnqueueInput {
    pub plan_id: String,
    pub account_id: AccountId,
    pub topup_id: String,
    #[serde(default)]
    pub of: Feed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enqueued {
    pub enqueued: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseInput {
    pub plan_id: String,
    pub holder: String,
    #[serde(default)]
    pub of: Feed,
}

/// The top-up's database activities, on the `belay.db` queue.
pub struct TopUpStoreApi;

#[activity_definitions]
impl TopUpStoreApi {
    /// Takes the plan's top-up claim (a paused plan is not claimed; the skip is recorded).
    #[activity(name = "db.topup_claim")]
    pub fn claim(input: ClaimInput) -> Result<ClaimAnswer, ActivityError> {
        unimplemented!()
    }

    /// Reads the cells and occupancy, walks, enqueues the emitted cells in one batch and records
    /// the answer under `topup_id` (once, however often it is called).
    #[activity(name = "db.topup_enqueue")]
    pub fn enqueue(input: EnqueueInput) -> Result<Enqueued, ActivityError> {
        unimplemented!()
    }

    /// The claim, the enqueue (when claimed) and the release, each its own transaction, in one
    /// activity; the input's `holder` is also the top-up id the answer is recorded under.
    #[activity(name = "db.topup_one_step")]
    pub fn one_step(input: ClaimInput) -> Result<OneStepAnswer, ActivityError> {
        unimplemented!()
    }

    /// Releases the claim if this top-up still holds it.
    #[activity(name = "db.topup_release")]
    pub fn release(input: ReleaseInput) -> Result<bool, ActivityError> {
        unimplemented!()
    }
}

/// The marker types, re-exported for `#[activity(definition = …)]`.
pub mod top_up_definitions {
    pub use super::top_up_store_api::{Claim, Enqueue, OneStep, Release};
}

#[workflow]
pub struct TopUpWorkflow {
    input: TopUpInput,
}

#[workflow_methods]
impl TopUpWorkflow {
    #[init]
    pub fn new(_ctx: &temporalio_sdk::WorkflowContextView, input: TopUpInput) -> Self {
        Self { input }
    }

    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<TopUpOutcome> {
        let input = ctx.state(|s| s.input.clone());
        let holder = ctx.run_id().to_string();
        let skipped = |why: Option<Skipped>, missing: bool| TopUpOutcome {
            skipped: why,
            topup_id: None,
            enqueued: 0,
            missing,
        };
        let release = ReleaseInput {
            plan_id: input.plan_id.clone(),
            holder: holder.clone(),
            of: input.of,
        };
        if ctx.patched(ONE_STEP_TOP_UP) {
            let claim_input = ClaimInput {
                plan_id: input.plan_id.clone(),
                account_id: input.account_id.clone(),
                holder: holder.clone(),
                of: input.of,
            };
            let answer = match ctx
                .execute_activity(TopUpStoreApi::one_step, claim_input, options::db())
                .await
            {
                Ok(a) => a,
                Err(e) => {
                    // Out of retries: the claim may still be this top-up's until released.
                    ctx.execute_activity(TopUpStoreApi::release, release, options::db())
                        .await?;
                    return Err(e.into());
                }
            };
            match answer.claim {
                ClaimAnswer::Claimed => {}
                ClaimAnswer::Busy => return Ok(skipped(Some(Skipped::Busy), false)),
                ClaimAnswer::Paused => return Ok(skipped(Some(Skipped::Paused), false)),
                ClaimAnswer::Missing => return Ok(skipped(None, true)),
            }
            if answer.enqueued > 0 {
                wake_dispatcher(ctx).await;
            }
            return Ok(TopUpOutcome {
                skipped: None,
                topup_id: Some(holder),
                enqueued: answer.enqueued,
                missing: false,
            });
        }
        let claim = ctx
            .execute_activity(
                TopUpStoreApi::claim,
                ClaimInput {
                    plan_id: input.plan_id.clone(),
                    account_id: input.account_id.clone(),
                    holder: holder.clone(),
                    of: input.of,
                },
                options::db(),
            )
            .await?;
        match claim {
            ClaimAnswer::Claimed => {}
            ClaimAnswer::Busy => return Ok(skipped(Some(Skipped::Busy), false)),
            ClaimAnswer::Paused => return Ok(skipped(Some(Skipped::Paused), false)),
            ClaimAnswer::Missing => return Ok(skipped(None, true)),
        }
        let enqueued = ctx
            .execute_activity(
                TopUpStoreApi::enqueue,
                EnqueueInput {
                    plan_id: input.plan_id.clone(),
                    account_id: input.account_id.clone(),
                    topup_id: holder.clone(),
                    of: input.of,
                },
                options::db(),
            )
            .await;
        // The claim is released whether or not the enqueue succeeded.
        ctx.execute_activity(TopUpStoreApi::release, release, options::db())
            .await?;
        let enqueued = enqueued?;
        if enqueued.enqueued > 0 {
            wake_dispatcher(ctx).await;
        }
        Ok(TopUpOutcome {
            skipped: None,
            topup_id: Some(holder),
            enqueued: enqueued.enqueued,
            missing: false,
        })
    }
}

/// Wakes the dispatcher for what a top-up enqueued. It may be between runs: a lost wake-up is
/// covered by its backstop timer.
async fn wake_dispatcher(ctx: &mut WorkflowContext<TopUpWorkflow>) {
    let _ = ctx
        .external_workflow(queues::DISPATCHER_ID.to_string(), None)
        .signal(DispatcherWorkflow::wake, (), SignalWorkflowOptions::default())
        .await;
}
