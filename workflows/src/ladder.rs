//! LadderClimbWorkflow (`ladder-{id}`): runs while a ladder is enabled. It is signalled when a run
//! of the ladder ends (and when the ladder is changed, disabled or deleted); each time it reads
//! the board once (`db.ladder_climb`), which applies the early-stop cancellations of every rung
//! the gate has just decided through the atomic cancel transition, and keeps where each climber
//! stands for its `board` query, so an operator sees in the Web UI why a climber is not
//! climbing. It records no verdict (that is a top-up's, so the board's `recorded: false` means
//! what it says) and launches nothing (a ladder is fed by enabling it, a requested top-up and a
//! review). It continues as new before its history grows large and ends when the ladder is
//! disabled or deleted.

use crate::options;
use belay_domain::ids::{AccountId, LadderId};
use belay_domain::progress::ClimberStatus;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_common::ActivityError;
use temporalio_macros::{activity_definitions, workflow, workflow_methods};
use temporalio_sdk::{ContinueAsNewOptions, SyncWorkflowContext, WorkflowContext, WorkflowContextView, WorkflowResult};

/// How long the climb waits without a signal before reading the board again.
pub const BACKSTOP: Duration = Duration::from_secs(300);
/// Board reads per run before continuing as new.
pub const STEPS_PER_RUN: u64 = 200;
/// History length past which the climb continues as new.
pub const MAX_HISTORY: u32 = 4_000;

/// The workflow id of a ladder's climb.
pub fn climb_workflow_id(ladder_id: &str) -> String {
    format!("ladder-{ladder_id}")
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClimbInput {
    pub ladder_id: LadderId,
    /// The ladder's owner: whose reviews the gate reads.
    pub account_id: AccountId,
    /// Board reads per run before continuing as new (default [`STEPS_PER_RUN`]); kept across runs.
    #[serde(default)]
    pub steps_per_run: Option<u64>,
}

/// One climber as the climb last saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClimberLine {
    pub climber_key: String,
    pub status: ClimberStatus,
    pub current_rung: Option<String>,
    /// Why the current rung cannot be launched, if it cannot.
    pub unlaunchable: Option<String>,
}

/// What one read of the board found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClimbStep {
    /// The ladder exists and is enabled: the climb goes on.
    pub active: bool,
    pub climbers: Vec<ClimberLine>,
    /// Jobs this read cancelled by early stop.
    pub cancelled: u64,
}

/// What the `board` query answers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClimbBoard {
    pub climbers: Vec<ClimberLine>,
    /// Jobs this run of the climb has cancelled by early stop.
    pub cancelled: u64,
    /// Signals received by this run.
    pub signals: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClimbStepInput {
    pub ladder_id: LadderId,
    pub account_id: AccountId,
}

/// The climb's database activity, on the `belay.db` queue.
pub struct ClimbStoreApi;

#[activity_definitions]
impl ClimbStoreApi {
    /// Reads the board, cancels the still-queued jobs of every rung an early stop decided, and
    /// answers where each climber stands and whether the ladder is still enabled.
    #[activity(name = "db.ladder_climb")]
    pub fn step(input: ClimbStepInput) -> Result<ClimbStep, ActivityError> {
        unimplemented!()
    }
}

/// The marker types, re-exported for `#[activity(definition = …)]`.
pub mod climb_definitions {
    pub use super::climb_store_api::Step;
}

#[workflow]
pub struct LadderClimbWorkflow {
    input: ClimbInput,
    board: ClimbBoard,
}

#[workflow_methods]
impl LadderClimbWorkflow {
    #[init]
    pub fn new(_ctx: &WorkflowContextView, input: ClimbInput) -> Self {
        Self {
            input,
            board: ClimbBoard::default(),
        }
    }

    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<ClimbBoard> {
        let input = ctx.state(|s| s.input.clone());
        let limit = input.steps_per_run.unwrap_or(STEPS_PER_RUN).max(1);
        let mut seen = 0u64;
        let mut steps = 0u64;
        loop {
            let step = ctx
                .execute_activity(
                    ClimbStoreApi::step,
                    ClimbStepInput {
                        ladder_id: input.ladder_id.clone(),
                        account_id: input.account_id.clone(),
                    },
                    options::db(),
                )
                .await?;
            steps += 1;
            let active = step.active;
            ctx.state_mut(|s| {
                s.board.climbers = step.climbers;
                s.board.cancelled += step.cancelled;
            });
            if !active {
                return Ok(ctx.state(|s| s.board.clone()));
            }
            if steps >= limit || ctx.history_length() > MAX_HISTORY || ctx.continue_as_new_suggested() {
                ctx.continue_as_new(input.clone(), ContinueAsNewOptions::default())?;
            }
            let signals = ctx.state(|s| s.board.signals);
            if signals > seen {
                seen = signals;
                continue;
            }
            let mut timer = ctx.timer(BACKSTOP);
            let mut woken = ctx.wait_condition(move |s| s.board.signals > seen);
            temporalio_sdk::workflows::select! {
                _ = timer => {},
                _ = woken => {},
            };
            seen = ctx.state(|s| s.board.signals);
        }
    }

    /// A run of the ladder ended, or the ladder was changed, disabled or deleted: read the board.
    #[signal]
    pub fn poke(&mut self, _ctx: &mut SyncWorkflowContext<Self>) {
        self.board.signals += 1;
    }

    /// Where each climber stands, as of the last read.
    #[query]
    pub fn board(&self, _ctx: &WorkflowContextView) -> ClimbBoard {
        self.board.clone()
    }
}
