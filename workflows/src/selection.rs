//! The acceptance check and sibling selection, as steps of CandidateVerificationWorkflow.
//!
//! Acceptance: the git pool assembles what the model reads (the Candidate patch, then the
//! composed files in `composedFileOrder`, under the cap); the `llm` pool makes the Haiku call and,
//! on an invalid answer or `unclear` criteria, the one Sonnet call, each metered before it is made;
//! the Evidence and the per-criterion results are recorded on the db pool.
//!
//! Selection, once the Candidate is gated: the claim on the anchor (or the run ends), the
//! Integration Judge on a tie, and one transaction applying the outcome. A winner goes through
//! [`winner_selected`]'s store step, where the promotion path starts.

use crate::options;
use crate::verification::{CandidateVerificationWorkflow, RecordRequest};
use belay_domain::acceptance::{
    AcceptanceCriterion, AcceptanceInput, AcceptanceOutcome, AcceptanceRun, JudgedCriterion, acceptance_outcome,
};
use belay_domain::check::CheckId;
use belay_domain::ids::{CandidateId, ChangeId, ProjectId};
use belay_domain::selection::JudgeOutcome;
use belay_domain::selection_steps::{JudgeSnapshotEntry, SelectionDone, SelectionStep};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_common::ActivityError;
use temporalio_macros::activity_definitions;
use temporalio_sdk::{WorkflowContext, WorkflowResult};

/// The `patched` marker of the acceptance check run by the model (before it, `skipped`).
pub const ACCEPTANCE_CHECK: &str = "acceptance-check-v1";
/// The `patched` marker of sibling selection after the gate.
pub const SIBLING_SELECTION: &str = "sibling-selection-v1";

/// What the model reads is assembled from these.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcceptanceSourceRequest {
    pub project_id: ProjectId,
    pub candidate_id: CandidateId,
    pub base: String,
    /// The composed commit (after the build commit, when there is one).
    pub composed: String,
}

/// One acceptance check's model calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcceptanceRequest {
    pub change_id: ChangeId,
    pub candidate_id: CandidateId,
    pub criteria: Vec<AcceptanceCriterion>,
    pub input: AcceptanceInput,
}

/// How the model calls ended (what [`AcceptanceRun`] says, carried across the activity).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum AcceptanceAnswer {
    Judged {
        criteria: Vec<JudgedCriterion>,
        models: Vec<String>,
        cost_usd: f64,
    },
    ModelError {
        reason: String,
        models: Vec<String>,
        cost_usd: f64,
    },
    Refused {
        reason: String,
        models: Vec<String>,
        cost_usd: f64,
    },
}

impl AcceptanceAnswer {
    pub fn run(&self) -> AcceptanceRun {
        match self {
            AcceptanceAnswer::Judged { criteria, .. } => AcceptanceRun::Judged(criteria.clone()),
            AcceptanceAnswer::ModelError { reason, .. } => AcceptanceRun::ModelError(reason.clone()),
            AcceptanceAnswer::Refused { reason, .. } => AcceptanceRun::Refused(reason.clone()),
        }
    }

    pub fn cost_usd(&self) -> f64 {
        match self {
            AcceptanceAnswer::Judged { cost_usd, .. }
            | AcceptanceAnswer::ModelError { cost_usd, .. }
            | AcceptanceAnswer::Refused { cost_usd, .. } => *cost_usd,
        }
    }
}

/// The results to store: `acceptance_json`, and `criteriaMet`, `criteriaTotal`, `costUsd`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcceptanceRecord {
    pub candidate_id: CandidateId,
    pub criteria: Option<Vec<JudgedCriterion>>,
    pub outcome: AcceptanceOutcome,
    pub cost_usd: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimRequest {
    pub candidate_id: CandidateId,
    /// The run that claims: `verify-<cand>`, the same on every retry.
    pub claimant: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeRequest {
    pub change_id: ChangeId,
    pub snapshot: Vec<JudgeSnapshotEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyRequest {
    pub candidate_id: CandidateId,
    pub claimant: String,
    pub judge: Option<JudgeOutcome>,
}

/// Selection and acceptance records, on the `belay.db` queue.
pub struct SelectionStoreApi;

#[activity_definitions]
impl SelectionStoreApi {
    /// Stores the acceptance results and metrics of a Candidate.
    #[activity(name = "db.acceptance_store")]
    pub fn acceptance_store(input: AcceptanceRecord) -> Result<(), ActivityError> {
        unimplemented!()
    }

    #[activity(name = "db.selection_claim")]
    pub fn claim(input: ClaimRequest) -> Result<SelectionStep, ActivityError> {
        unimplemented!()
    }

    #[activity(name = "db.selection_apply")]
    pub fn apply(input: ApplyRequest) -> Result<SelectionDone, ActivityError> {
        unimplemented!()
    }
}

/// What the acceptance check reads, on the `belay.git` queue.
pub struct SelectionGitApi;

#[activity_definitions]
impl SelectionGitApi {
    #[activity(name = "git.acceptance_source")]
    pub fn acceptance_source(input: AcceptanceSourceRequest) -> Result<AcceptanceInput, ActivityError> {
        unimplemented!()
    }
}

/// Model calls, on the `belay.llm` queue.
pub struct LlmApi;

#[activity_definitions]
impl LlmApi {
    /// The Haiku call, and the Sonnet call when its answer is invalid or leaves criteria unclear.
    #[activity(name = "llm.acceptance")]
    pub fn acceptance(input: AcceptanceRequest) -> Result<AcceptanceAnswer, ActivityError> {
        unimplemented!()
    }

    /// The Integration Judge: one Sonnet call over the snapshot; the outcome validated.
    #[activity(name = "llm.judge")]
    pub fn judge(input: JudgeRequest) -> Result<JudgeOutcome, ActivityError> {
        unimplemented!()
    }
}

/// The markers, re-exported for the implementations.
pub mod selection_definitions {
    pub use super::llm_api::{Acceptance, Judge};
    pub use super::selection_git_api::AcceptanceSource;
    pub use super::selection_store_api::{AcceptanceStore, Apply, Claim};
}

/// Two model calls at most, each bounded by the client's own timeout.
const LLM_TIMEOUT: Duration = Duration::from_secs(600);

impl CandidateVerificationWorkflow {
    /// The acceptance check: `skipped` with no model call when an earlier check has no passing
    /// result; otherwise assemble, judge, record. Answers the Evidence row.
    pub(crate) async fn acceptance_step(
        ctx: &mut WorkflowContext<Self>,
        record: RecordRequest,
        earlier_gap: bool,
        source: AcceptanceSourceRequest,
        change_id: ChangeId,
        criteria: Vec<AcceptanceCriterion>,
    ) -> WorkflowResult<belay_domain::evidence::Evidence> {
        let id = source.candidate_id.clone();
        let answer = if earlier_gap {
            None
        } else {
            let input = ctx
                .execute_activity(
                    SelectionGitApi::acceptance_source,
                    source,
                    options::git(Duration::from_secs(300)),
                )
                .await;
            match input {
                Ok(input) if input.is_empty() => Some(Err(AcceptanceRun::NoReadableSource)),
                Err(_) => Some(Err(AcceptanceRun::NoReadableSource)),
                Ok(input) => {
                    let req = AcceptanceRequest {
                        change_id,
                        candidate_id: id.clone(),
                        criteria,
                        input,
                    };
                    Some(
                        match ctx
                            .execute_activity(LlmApi::acceptance, req, options::llm(LLM_TIMEOUT))
                            .await
                        {
                            Ok(a) => Ok(a),
                            Err(e) => Err(AcceptanceRun::ModelError(e.to_string())),
                        },
                    )
                }
            }
        };
        let (run, cost, models, judged) = match &answer {
            None => (AcceptanceRun::EarlierCheckFailed, 0.0, vec![], None),
            Some(Err(run)) => (run.clone(), 0.0, vec![], None),
            Some(Ok(a)) => {
                let models = match a {
                    AcceptanceAnswer::Judged { models, .. }
                    | AcceptanceAnswer::ModelError { models, .. }
                    | AcceptanceAnswer::Refused { models, .. } => models.clone(),
                };
                let judged = match a {
                    AcceptanceAnswer::Judged { criteria, .. } => Some(criteria.clone()),
                    _ => None,
                };
                (a.run(), a.cost_usd(), models, judged)
            }
        };
        let outcome = acceptance_outcome(&run);
        ctx.execute_activity(
            SelectionStoreApi::acceptance_store,
            AcceptanceRecord {
                candidate_id: id.clone(),
                criteria: judged.clone(),
                outcome: outcome.clone(),
                cost_usd: cost,
            },
            options::db(),
        )
        .await?;
        let mut req = record;
        req.check_id = CheckId::Acceptance;
        req.result = outcome.result.clone();
        req.detail = serde_json::json!({
            "criteria": judged,
            "criteriaMet": outcome.criteria_met,
            "criteriaTotal": outcome.criteria_total,
            "costUsd": cost,
            "models": models,
        });
        Self::record(ctx, req).await
    }

    /// Sibling selection once this Candidate is gated. Claim on the anchor, the Judge on a tie,
    /// apply in one transaction. `None` when this run does not select.
    pub(crate) async fn select_siblings(
        ctx: &mut WorkflowContext<Self>,
        id: &CandidateId,
        change_id: &ChangeId,
    ) -> WorkflowResult<Option<SelectionDone>> {
        ctx.state_mut(|s| s.step = "selection".into());
        let claimant = crate::verification::verify_workflow_id(id.as_str());
        let step = ctx
            .execute_activity(
                SelectionStoreApi::claim,
                ClaimRequest {
                    candidate_id: id.clone(),
                    claimant: claimant.clone(),
                },
                options::db(),
            )
            .await?;
        let tie = match step {
            SelectionStep::NoSiblings | SelectionStep::Pending | SelectionStep::Stopped => return Ok(None),
            SelectionStep::Claimed { tie, .. } => tie,
        };
        let judge = match tie {
            None => None,
            Some(snapshot) => {
                ctx.state_mut(|s| s.step = "integration-judge".into());
                let tied: Vec<CandidateId> = snapshot.iter().map(|e| e.candidate_id.clone()).collect();
                match ctx
                    .execute_activity(
                        LlmApi::judge,
                        JudgeRequest {
                            change_id: change_id.clone(),
                            snapshot,
                        },
                        options::llm(LLM_TIMEOUT),
                    )
                    .await
                {
                    Ok(o) => Some(o),
                    Err(e) => Some(JudgeOutcome::ToPerson {
                        reason: format!(
                            "Candidates {} rank equal and the Integration Judge failed ({e}). Pick one to ship or cancel the change.",
                            tied.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", ")
                        ),
                    }),
                }
            }
        };
        let done = ctx
            .execute_activity(
                SelectionStoreApi::apply,
                ApplyRequest {
                    candidate_id: id.clone(),
                    claimant,
                    judge,
                },
                options::db(),
            )
            .await?;
        Ok(Some(done))
    }
}
