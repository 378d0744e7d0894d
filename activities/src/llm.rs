//! The model calls (the `llm` pool), through the model client of `belay-llm`: the acceptance
//! check's Haiku call with its one Sonnet call (an invalid answer, or criteria left `unclear`),
//! and the Integration Judge's one Sonnet call. What the answers mean is decided by
//! `belay_domain` (`validate_acceptance_output`, `citationValid`, `judge_outcome`); this module
//! carries the text there and back.

use belay_domain::acceptance::{
    AcceptanceCriterion, AcceptanceInput, JudgedCriterion, RECORD_ACCEPTANCE, criteria_for_second_opinion,
    judge_with_citations, merge_second_opinion, record_acceptance_schema, validate_acceptance_output,
};
use belay_domain::ids::{CandidateId, ChangeId, EvidenceId};
use belay_domain::selection::{JudgeOutcome, RECORD_VERDICT, judge_outcome, record_verdict_schema};
use belay_llm::{ACCEPTANCE_SYSTEM, Answer, AnthropicClient, CallError, JUDGE_SYSTEM, Model, Tool, acceptance_prompt};
use belay_store::Store;
use belay_workflows::selection::{AcceptanceAnswer, AcceptanceRequest, JudgeRequest};
use std::collections::BTreeSet;
use std::sync::Arc;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use tracing::{instrument, warn};

/// The model calls, on the `belay.llm` pool.
pub struct LlmActivities {
    pub store: Store,
    pub client: Arc<AnthropicClient>,
}

/// The store's model meters, as the model client holds a call to them.
struct StoreMeter<'s>(&'s Store);

impl belay_llm::ModelMeter for StoreMeter<'_> {
    fn reserve<'a>(
        &'a self,
        change_id: &'a str,
        estimate_usd: f64,
        limits: belay_llm::ModelLimits,
        now_ms: i64,
    ) -> belay_llm::MeterFuture<'a, Result<belay_llm::ModelReservation, String>> {
        Box::pin(async move {
            self.0
                .reserve_model_call(&ChangeId::from(change_id), estimate_usd, limits, now_ms)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn release<'a>(&'a self, reservation: &'a belay_llm::ModelReservation) -> belay_llm::MeterFuture<'a, ()> {
        Box::pin(async move { self.0.release_model_call(reservation).await.map_err(|e| e.to_string()) })
    }

    fn settle<'a>(
        &'a self,
        reservation: &'a belay_llm::ModelReservation,
        cost_usd: f64,
    ) -> belay_llm::MeterFuture<'a, ()> {
        Box::pin(async move {
            self.0
                .settle_model_call(reservation, cost_usd)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

impl LlmActivities {
    async fn record_acceptance(
        &self,
        change_id: &str,
        model: Model,
        criteria: &[AcceptanceCriterion],
        input: &AcceptanceInput,
    ) -> Result<Answer, CallError> {
        self.client
            .call(
                &StoreMeter(&self.store),
                change_id,
                model,
                ACCEPTANCE_SYSTEM,
                &acceptance_prompt(criteria, input),
                &Tool {
                    name: RECORD_ACCEPTANCE,
                    description: "Record one result per acceptance criterion.",
                    schema: record_acceptance_schema(),
                },
            )
            .await
    }

    /// The acceptance check's calls, as [`AcceptanceAnswer`].
    pub async fn judge_acceptance(&self, req: &AcceptanceRequest) -> AcceptanceAnswer {
        let change = req.change_id.as_str();
        let mut models = vec![self.client.config.haiku.clone()];
        let mut cost = 0.0;
        let gap = |e: CallError, models: Vec<String>, cost: f64| match e {
            CallError::Refused(reason) => AcceptanceAnswer::Refused {
                reason,
                models,
                cost_usd: cost,
            },
            other => AcceptanceAnswer::ModelError {
                reason: other.to_string(),
                models,
                cost_usd: cost,
            },
        };
        let first = match self
            .record_acceptance(change, Model::Haiku, &req.criteria, &req.input)
            .await
        {
            Ok(a) => a,
            Err(e) => return gap(e, models, cost),
        };
        cost += first.cost_usd;
        let judged: Vec<JudgedCriterion> = match validate_acceptance_output(&first.calls, &req.criteria) {
            Ok(j) => {
                let judged = judge_with_citations(&req.criteria, &j, &req.input);
                let again = criteria_for_second_opinion(&judged);
                if again.is_empty() {
                    judged
                } else {
                    models.push(self.client.config.sonnet.clone());
                    match self.record_acceptance(change, Model::Sonnet, &again, &req.input).await {
                        Ok(second) => {
                            cost += second.cost_usd;
                            match validate_acceptance_output(&second.calls, &again) {
                                Ok(j2) => merge_second_opinion(&judged, &judge_with_citations(&again, &j2, &req.input)),
                                Err(e) => {
                                    warn!(error = %e, "the second opinion is not valid; the unclear results stand");
                                    judged
                                }
                            }
                        }
                        Err(e) => {
                            warn!(error = %e, "the second opinion failed; the unclear results stand");
                            judged
                        }
                    }
                }
            }
            Err(invalid) => {
                models.push(self.client.config.sonnet.clone());
                let second = match self
                    .record_acceptance(change, Model::Sonnet, &req.criteria, &req.input)
                    .await
                {
                    Ok(a) => a,
                    Err(e) => return gap(e, models, cost),
                };
                cost += second.cost_usd;
                match validate_acceptance_output(&second.calls, &req.criteria) {
                    Ok(j) => judge_with_citations(&req.criteria, &j, &req.input),
                    Err(e2) => {
                        return AcceptanceAnswer::ModelError {
                            reason: format!("no valid answer: Haiku: {invalid}; Sonnet: {e2}"),
                            models,
                            cost_usd: cost,
                        };
                    }
                }
            }
        };
        AcceptanceAnswer::Judged {
            criteria: judged,
            models,
            cost_usd: cost,
        }
    }

    /// The Judge's call and its validated outcome.
    pub async fn integration_judge(&self, req: &JudgeRequest) -> JudgeOutcome {
        let tied: Vec<CandidateId> = req.snapshot.iter().map(|e| e.candidate_id.clone()).collect();
        let shown: BTreeSet<EvidenceId> = req
            .snapshot
            .iter()
            .flat_map(|e| e.evidence.iter().map(|v| v.id.clone()))
            .collect();
        let user = format!(
            "Tied candidates and their Evidence snapshot:\n{}",
            serde_json::to_string_pretty(&req.snapshot).unwrap_or_default()
        );
        let answer = self
            .client
            .call(
                &StoreMeter(&self.store),
                req.change_id.as_str(),
                Model::Sonnet,
                JUDGE_SYSTEM,
                &user,
                &Tool {
                    name: RECORD_VERDICT,
                    description: "Record the verdict on the tied candidates.",
                    schema: record_verdict_schema(),
                },
            )
            .await;
        match answer {
            Ok(a) => judge_outcome(&a.calls, &tied, &shown),
            Err(e) => JudgeOutcome::ToPerson {
                reason: format!(
                    "Candidates {} rank equal and the Integration Judge gave no answer ({e}). Pick one to ship or cancel the change.",
                    tied.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", ")
                ),
            },
        }
    }
}

#[activities]
impl LlmActivities {
    #[activity(definition = belay_workflows::selection::selection_definitions::Acceptance)]
    #[instrument(skip_all, fields(change.id = %input.change_id, candidate.id = %input.candidate_id), err(Debug))]
    pub async fn acceptance(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: AcceptanceRequest,
    ) -> Result<AcceptanceAnswer, ActivityError> {
        Ok(self.judge_acceptance(&input).await)
    }

    #[activity(definition = belay_workflows::selection::selection_definitions::Judge)]
    #[instrument(skip_all, fields(change.id = %input.change_id), err(Debug))]
    pub async fn judge(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: JudgeRequest,
    ) -> Result<JudgeOutcome, ActivityError> {
        Ok(self.integration_judge(&input).await)
    }
}
