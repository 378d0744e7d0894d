//! PromotionWorkflow (id `promote-{cand}-g{expectedGeneration}`, the idempotency key): the spec's
//! promotion flowchart for one Candidate, and [`winner_ready`], the one place a verified winner's
//! next step is decided and taken.
//!
//! Preconditions are read from the authoritative rows and the git service and every failed one is
//! answered at once (`blocked`); a base behind canonical marks the Candidate `stale` and recomposes
//! it. Then the compare-and-swap runs as one database transaction; only then does canonical `main`
//! move, by a ref compare-and-swap that is a fast-forward or nothing. The file index and code
//! manifest of the new tree follow, `release.started` is recorded once, and the project's
//! older-base Candidates are settled. A retry after success answers `alreadyPromoted` and does the
//! same sync again, so a crash between the swap and the push leaves nothing behind for good.

use crate::metadata::{self, Described};
use crate::verification::{
    CandidateVerificationWorkflow, StaleRequest, VerifyInput, VerifyStoreApi, verify_workflow_id,
};
use crate::{options, queues, search};
use belay_domain::approval::{Approval, HumanGate};
use belay_domain::candidate::{Candidate, CandidateStatus};
use belay_domain::change::RiskTier;
use belay_domain::evidence::Evidence;
use belay_domain::ids::{CandidateId, ProjectId};
use belay_domain::policy::{PolicyStamp, ProjectPolicy};
use belay_domain::promotion::{
    Promotability, PromotionFacts, PromotionOutcome, WinnerStep, promotability, promotion_workflow_id, winner_step,
};
use belay_domain::repo::candidate_fork;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_common::ActivityError;
use temporalio_common::search_attributes::SearchAttributes;
use temporalio_macros::{activity_definitions, workflow, workflow_methods};
use temporalio_sdk::{
    ChildWorkflowOptions, ParentClosePolicy, WorkflowContext, WorkflowContextView, WorkflowIdReusePolicy,
    WorkflowResult,
};

/// The `patched` marker of the forks sweep's Candidate forks (before it, the sweep considered
/// workspace and edit-session forks only).
pub const SWEEPS_CANDIDATE_FORKS: &str = "sweep-candidate-forks";

/// The `patched` marker of the verification workflow's hand-over of a gated Candidate without
/// siblings to [`winner_ready`].
pub const WINNER_READY_PATCH: &str = "verification-winner-ready";
/// The `patched` marker of sibling selection handing its winner to [`winner_ready`] as
/// [`Winner::Selected`].
pub const SELECTED_WINNER_READY_PATCH: &str = "selected-winner-ready";
/// The `patched` marker of the one-step release: the fast-forward and the source sync as one git
/// activity (`git.promotion_release`), their records and the older-base settle as one database
/// step (`db.promotion_released`), and the database steps (facts, compare-and-swap, released) as
/// local activities of the workflow worker. Before it, the same work took eight task-queue
/// activities.
pub const ONE_STEP_RELEASE: &str = "promotion-one-step-release";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromoteInput {
    pub candidate_id: CandidateId,
    /// The canonical generation the Candidate was composed on.
    pub expected_generation: i64,
}

/// What the preconditions read from the database (the git fact comes from its own activity).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromotionRowsFacts {
    pub candidate: Candidate,
    pub risk_tier: Option<RiskTier>,
    pub evidence: Vec<Evidence>,
    pub approval: Option<Approval>,
    pub active_policy: ProjectPolicy,
    pub canonical_generation: i64,
    pub sibling_pending: bool,
    /// The generation this Candidate's promotion advanced canonical to, once it did.
    pub promoted_generation: Option<i64>,
}

impl PromotionRowsFacts {
    /// The domain's view of these facts, with whether the fork holds the composed commit.
    pub fn promotability(&self, composed_commit_in_fork: bool) -> Promotability {
        promotability(&PromotionFacts {
            status: self.candidate.status,
            sibling_pending: self.sibling_pending,
            base_generation: self.candidate.base_generation,
            canonical_generation: self.canonical_generation,
            plan: self.candidate.plan.as_ref(),
            evidence: &self.evidence,
            risk_tier: self.risk_tier,
            approval: self.approval.as_ref(),
            composed_tree: self.candidate.composed_tree.as_deref(),
            active_policy: &self.active_policy,
            composed_commit_in_fork,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CasRequest {
    pub candidate_id: CandidateId,
    pub expected_generation: i64,
    pub plan_policy: PolicyStamp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitInFork {
    pub fork: String,
    pub commit: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushRequest {
    pub project_id: ProjectId,
    pub candidate_id: CandidateId,
    pub base_commit: String,
    pub commit: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Pushed {
    /// `main` moved from the base to the composed commit, fast-forward.
    Moved,
    /// `main` already holds the composed commit (a retry, or canonical moved on since).
    AlreadyThere,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourcesRequest {
    pub project_id: ProjectId,
    pub commit: String,
    pub tree: String,
    /// The tree canonical held before: the blobs its stored index lists are already stored, so
    /// the sync checks only the others. Absent in histories recorded before it was sent.
    #[serde(default)]
    pub base_tree: Option<String>,
}

/// The fast-forward, then the source sync of the tree it landed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseRequest {
    pub push: PushRequest,
    pub sources: SourcesRequest,
}

/// What the database records once canonical `main` moved and the tree is synced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleasedRequest {
    pub candidate_id: CandidateId,
    pub project_id: ProjectId,
    pub generation: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettleOlderRequest {
    pub project_id: ProjectId,
    pub generation: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettledOlder {
    pub stale: Vec<String>,
    pub recomposed: Vec<CandidateId>,
}

/// What [`winner_ready`] reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WinnerFacts {
    pub candidate: Candidate,
    /// Other Candidates of the Change on the same base.
    pub has_siblings: bool,
    pub risk_tier: Option<RiskTier>,
    pub active_policy: ProjectPolicy,
    /// The latest acceptance Evidence is `pass` with `checked_supported`.
    pub acceptance_passed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    pub candidate_id: CandidateId,
    pub tree: String,
    pub gates: Vec<HumanGate>,
    pub reason: String,
}

/// Promotion activities on the `belay.db` queue.
pub struct PromotionStoreApi;

#[activity_definitions]
impl PromotionStoreApi {
    #[activity(name = "db.promotion_facts")]
    pub fn facts(candidate_id: CandidateId) -> Result<Option<PromotionRowsFacts>, ActivityError> {
        unimplemented!()
    }

    /// The compare-and-swap transaction.
    #[activity(name = "db.promotion_cas")]
    pub fn cas(input: CasRequest) -> Result<PromotionOutcome, ActivityError> {
        unimplemented!()
    }

    #[activity(name = "db.promotion_pushed")]
    pub fn pushed(candidate_id: CandidateId) -> Result<(), ActivityError> {
        unimplemented!()
    }

    /// The source sync is done: `release.started` once, the project's mirror repaired.
    #[activity(name = "db.promotion_synced")]
    pub fn synced(candidate_id: CandidateId) -> Result<(), ActivityError> {
        unimplemented!()
    }

    #[activity(name = "db.promotion_settle")]
    pub fn settle(input: SettleOlderRequest) -> Result<SettledOlder, ActivityError> {
        unimplemented!()
    }

    /// [`PromotionStoreApi::pushed`], [`PromotionStoreApi::synced`] and
    /// [`PromotionStoreApi::settle`] in one activity (since [`ONE_STEP_RELEASE`]).
    #[activity(name = "db.promotion_released")]
    pub fn released(input: ReleasedRequest) -> Result<SettledOlder, ActivityError> {
        unimplemented!()
    }

    #[activity(name = "db.winner_facts")]
    pub fn winner_facts(candidate_id: CandidateId) -> Result<Option<WinnerFacts>, ActivityError> {
        unimplemented!()
    }

    #[activity(name = "db.request_approval")]
    pub fn request_approval(input: ApprovalRequest) -> Result<Approval, ActivityError> {
        unimplemented!()
    }
}

/// A Candidate fork the sweep considers, with what it needs to ask git about a promoted one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateForkToSweep {
    pub fork: belay_domain::repo::SweepFork,
    /// Canonical's repository and the composed commit (promoted Candidates only).
    pub canonical: String,
    pub composed_commit: Option<String>,
}

/// The forks sweep's Candidate forks, on the `belay.db` queue.
pub struct SweepCandidateStoreApi;

#[activity_definitions]
impl SweepCandidateStoreApi {
    /// Every Candidate fork not yet swept, with its facts.
    #[activity(name = "db.sweep_candidate_forks")]
    pub fn candidate_forks(input: ()) -> Result<Vec<CandidateForkToSweep>, ActivityError> {
        unimplemented!()
    }
}

/// Promotion activities on the `belay.git` queue.
pub struct PromotionGitApi;

#[activity_definitions]
impl PromotionGitApi {
    /// Whether the Candidate fork's `main` holds the composed commit.
    #[activity(name = "git.promotion_commit_in_fork")]
    pub fn commit_in_fork(input: CommitInFork) -> Result<bool, ActivityError> {
        unimplemented!()
    }

    /// Copies the composed commit's objects into canonical and moves canonical `main` from the
    /// base to it: a ref compare-and-swap, fast-forward only, never a force.
    #[activity(name = "git.promotion_push")]
    pub fn push(input: PushRequest) -> Result<Pushed, ActivityError> {
        unimplemented!()
    }

    /// For each `(canonical, commit)`: whether canonical `main` holds the commit.
    #[activity(name = "git.sweep_canonical_holds")]
    pub fn canonical_holds(input: Vec<(String, String)>) -> Result<Vec<bool>, ActivityError> {
        unimplemented!()
    }

    /// Writes the file index and code manifest of the new tree (`source/<project>/<tree>/…`).
    #[activity(name = "git.promotion_sources")]
    pub fn sources(input: SourcesRequest) -> Result<(), ActivityError> {
        unimplemented!()
    }

    /// [`PromotionGitApi::push`], then [`PromotionGitApi::sources`], in one activity (since
    /// [`ONE_STEP_RELEASE`]). Both halves are idempotent, so a retry repeats them safely.
    #[activity(name = "git.promotion_release")]
    pub fn release(input: ReleaseRequest) -> Result<Pushed, ActivityError> {
        unimplemented!()
    }
}

/// The markers, re-exported for the implementations.
pub mod promotion_definitions {
    pub use super::promotion_git_api::{CanonicalHolds, CommitInFork, Push, Release, Sources};
    pub use super::promotion_store_api::{Cas, Facts, Pushed, Released, RequestApproval, Settle, Synced, WinnerFacts};
    pub use super::sweep_candidate_store_api::CandidateForks;
}

/// The compare-and-swap is one short transaction: a worker lost in it is noticed quickly.
fn cas_options() -> temporalio_sdk::ActivityOptions {
    options::db_within(Duration::from_secs(15))
}

#[workflow]
#[derive(Default)]
pub struct PromotionWorkflow {
    step: String,
    promotability: Option<Promotability>,
}

/// What the query answers: the step running now and the preconditions as last read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromotionProgress {
    pub step: String,
    pub promotability: Option<Promotability>,
}

fn child_options(workflow_id: String, task_attrs: SearchAttributes, described: Described) -> ChildWorkflowOptions {
    ChildWorkflowOptions::builder()
        .workflow_id(workflow_id)
        .task_queue(queues::WORKFLOWS.to_string())
        .parent_close_policy(ParentClosePolicy::Abandon)
        .id_reuse_policy(WorkflowIdReusePolicy::RejectDuplicate)
        .search_attributes(task_attrs)
        .static_summary(described.summary)
        .static_details(described.details)
        .build()
}

fn attributes(candidate: &CandidateId, k: &Candidate) -> SearchAttributes {
    SearchAttributes::new(vec![
        search::CANDIDATE_ID.value_set(candidate.to_string()),
        search::CHANGE_ID.value_set(k.change_id.to_string()),
        search::PROJECT_ID.value_set(k.project_id.to_string()),
    ])
}

/// Starts the verification of each new Candidate (a start refused because its workflow exists
/// was made by an earlier attempt).
async fn verify_each<W>(ctx: &WorkflowContext<W>, k: &Candidate, new: &[CandidateId]) {
    for id in new {
        let _ = ctx
            .start_child_workflow(
                CandidateVerificationWorkflow::run,
                VerifyInput {
                    candidate_id: id.clone(),
                },
                child_options(
                    verify_workflow_id(id.as_str()),
                    attributes(id, k),
                    metadata::verification(id, &k.change_id),
                ),
            )
            .await;
    }
}

/// Who calls [`winner_ready`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Winner {
    /// The verification of a Candidate: it is the winner only when it has no siblings (with
    /// siblings, sibling selection picks the winner and hands it over as [`Winner::Selected`]).
    IfAlone,
    /// Sibling selection's winner.
    Selected,
}

/// A verified winner's next step, the one place it is decided: auto-promote when the active
/// policy lets it through (PromotionWorkflow `promote-{cand}-g{base}` starts and runs on its own),
/// otherwise ask a person, with the spec's reason, on the exact composed tree. A Candidate that is
/// not (or no longer) `verified` has no next step here.
pub async fn winner_ready<W>(
    ctx: &WorkflowContext<W>,
    candidate_id: &CandidateId,
    winner: Winner,
) -> WorkflowResult<Option<WinnerStep>> {
    let Some(f) = ctx
        .execute_activity(PromotionStoreApi::winner_facts, candidate_id.clone(), options::db())
        .await?
    else {
        return Ok(None);
    };
    if winner == Winner::IfAlone && f.has_siblings {
        return Ok(None);
    }
    let k = &f.candidate;
    let (CandidateStatus::Verified, Some(plan), Some(tree)) = (k.status, k.plan.as_ref(), k.composed_tree.clone())
    else {
        return Ok(None);
    };
    let step = winner_step(plan, &f.active_policy, f.risk_tier, f.acceptance_passed);
    match &step {
        WinnerStep::AutoPromote => {
            let _ = ctx
                .start_child_workflow(
                    PromotionWorkflow::run,
                    PromoteInput {
                        candidate_id: candidate_id.clone(),
                        expected_generation: k.base_generation,
                    },
                    child_options(
                        promotion_workflow_id(candidate_id, k.base_generation),
                        attributes(candidate_id, k),
                        metadata::promotion(candidate_id, k.base_generation),
                    ),
                )
                .await;
        }
        WinnerStep::AwaitApproval { gates, reason } => {
            ctx.execute_activity(
                PromotionStoreApi::request_approval,
                ApprovalRequest {
                    candidate_id: candidate_id.clone(),
                    tree,
                    gates: gates.clone(),
                    reason: reason.clone(),
                },
                options::db(),
            )
            .await?;
        }
    }
    Ok(Some(step))
}

/// The Candidate forks the daily sweep considers: each with how its Candidate ended, and for a
/// promoted one whether canonical `main` holds its composed commit (only then may it go).
pub async fn candidate_forks_to_sweep<W>(
    ctx: &WorkflowContext<W>,
) -> WorkflowResult<Vec<belay_domain::repo::SweepFork>> {
    let forks = ctx
        .execute_activity(SweepCandidateStoreApi::candidate_forks, (), options::db())
        .await?;
    let asks: Vec<(usize, (String, String))> = forks
        .iter()
        .enumerate()
        .filter(|(_, f)| f.fork.facts.candidate_end == Some(belay_domain::repo::CandidateEnd::Promoted))
        .filter_map(|(i, f)| f.composed_commit.clone().map(|c| (i, (f.canonical.clone(), c))))
        .collect();
    let held = if asks.is_empty() {
        Vec::new()
    } else {
        ctx.execute_activity(
            PromotionGitApi::canonical_holds,
            asks.iter().map(|(_, a)| a.clone()).collect::<Vec<_>>(),
            options::git(Duration::from_secs(300)),
        )
        .await?
    };
    let mut out: Vec<belay_domain::repo::SweepFork> = forks.into_iter().map(|f| f.fork).collect();
    for ((i, _), h) in asks.iter().zip(held) {
        out[*i].facts.canonical_main_holds_composed = h;
    }
    Ok(out)
}

#[workflow_methods]
impl PromotionWorkflow {
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>, input: PromoteInput) -> WorkflowResult<PromotionOutcome> {
        let id = input.candidate_id;
        let v2 = ctx.patched(ONE_STEP_RELEASE);
        ctx.state_mut(|s| s.step = "preconditions".into());
        let Some(facts) = Self::db_step(ctx, v2, PromotionStoreApi::facts, id.clone(), options::db()).await? else {
            return Ok(PromotionOutcome::Blocked {
                blocks: vec![belay_domain::promotion::Block::NoPlan],
            });
        };
        let k = facts.candidate.clone();
        let Some(plan) = k.plan.clone() else {
            let p = facts.promotability(false);
            ctx.state_mut(|s| s.promotability = Some(p.clone()));
            return Ok(PromotionOutcome::Blocked { blocks: p.blocks });
        };
        if k.status != CandidateStatus::Promoted {
            let in_fork = match &k.composed_commit {
                Some(commit) => {
                    ctx.execute_activity(
                        PromotionGitApi::commit_in_fork,
                        CommitInFork {
                            fork: candidate_fork(k.id.as_str()).unwrap_or_default(),
                            commit: commit.clone(),
                        },
                        options::git(Duration::from_secs(60)),
                    )
                    .await?
                }
                None => false,
            };
            let p = facts.promotability(in_fork);
            ctx.state_mut(|s| s.promotability = Some(p.clone()));
            // A base behind canonical marks an open Candidate stale (and recomposes it); one
            // that already ended answers every failed precondition.
            if p.stale() && !k.status.is_final() {
                let reason = p
                    .blocks
                    .iter()
                    .find_map(|b| match b {
                        belay_domain::promotion::Block::Stale { reason } => Some(reason.clone()),
                        _ => None,
                    })
                    .unwrap_or_default();
                return Self::stale(ctx, &id, &k, reason).await;
            }
            if !p.promotable() {
                return Ok(PromotionOutcome::Blocked { blocks: p.blocks });
            }
        }

        ctx.state_mut(|s| s.step = "compareAndSwap".into());
        let cas = CasRequest {
            candidate_id: id.clone(),
            expected_generation: input.expected_generation,
            plan_policy: plan.policy.clone(),
        };
        let outcome = Self::db_step(ctx, v2, PromotionStoreApi::cas, cas, cas_options()).await?;
        let generation = match &outcome {
            PromotionOutcome::Promoted { generation } => *generation,
            PromotionOutcome::AlreadyPromoted => match facts.promoted_generation {
                Some(g) => g,
                // Promoted between the read and the swap (another run): read its generation.
                None => Self::db_step(ctx, v2, PromotionStoreApi::facts, id.clone(), options::db())
                    .await?
                    .and_then(|f| f.promoted_generation)
                    .unwrap_or(input.expected_generation + 1),
            },
            PromotionOutcome::Stale { reason } => return Self::stale(ctx, &id, &k, reason.clone()).await,
            PromotionOutcome::Blocked { .. } => return Ok(outcome),
        };
        let (Some(commit), Some(tree)) = (k.composed_commit.clone(), k.composed_tree.clone()) else {
            return Ok(outcome);
        };

        ctx.state_mut(|s| s.step = "fastForward".into());
        let push = PushRequest {
            project_id: k.project_id.clone(),
            candidate_id: id.clone(),
            base_commit: k.base_commit.clone(),
            commit: commit.clone(),
        };
        let sources = SourcesRequest {
            project_id: k.project_id.clone(),
            commit,
            tree,
            base_tree: Some(k.base_tree.clone()),
        };
        let settled = if v2 {
            ctx.execute_activity(
                PromotionGitApi::release,
                ReleaseRequest { push, sources },
                options::git(Duration::from_secs(900)),
            )
            .await?;
            ctx.state_mut(|s| s.step = "settleOlderBase".into());
            let released = ReleasedRequest {
                candidate_id: id.clone(),
                project_id: k.project_id.clone(),
                generation,
            };
            Self::db_step(ctx, true, PromotionStoreApi::released, released, options::db()).await?
        } else {
            ctx.execute_activity(PromotionGitApi::push, push, options::git(Duration::from_secs(300)))
                .await?;
            ctx.execute_activity(PromotionStoreApi::pushed, id.clone(), options::db())
                .await?;

            ctx.state_mut(|s| s.step = "sourceSync".into());
            ctx.execute_activity(
                PromotionGitApi::sources,
                sources,
                options::git(Duration::from_secs(600)),
            )
            .await?;
            ctx.execute_activity(PromotionStoreApi::synced, id.clone(), options::db())
                .await?;

            ctx.state_mut(|s| s.step = "settleOlderBase".into());
            ctx.execute_activity(
                PromotionStoreApi::settle,
                SettleOlderRequest {
                    project_id: k.project_id.clone(),
                    generation,
                },
                options::db(),
            )
            .await?
        };
        verify_each(ctx, &k, &settled.recomposed).await;
        ctx.state_mut(|s| s.step = "done".into());
        Ok(outcome)
    }

    /// One store step: a local activity of the workflow worker since [`ONE_STEP_RELEASE`] (no
    /// task-queue round trip; the steps are idempotent, so a retry after a lost worker is safe),
    /// a `belay.db` activity with `remote` options before.
    async fn db_step<AD>(
        ctx: &WorkflowContext<Self>,
        local: bool,
        activity: AD,
        input: AD::Input,
        remote: temporalio_sdk::ActivityOptions,
    ) -> Result<AD::Output, temporalio_sdk::ActivityExecutionError>
    where
        AD: temporalio_common::ActivityDefinition,
        AD::Output: temporalio_common::data_converters::TemporalDeserializable,
    {
        if local {
            ctx.execute_local_activity(activity, input, options::db_local()).await
        } else {
            ctx.execute_activity(activity, input, remote).await
        }
    }

    /// Canonical moved past the Candidate's base: it becomes `stale` and its ChangeSets are
    /// composed again on the new base.
    async fn stale(
        ctx: &mut WorkflowContext<Self>,
        id: &CandidateId,
        k: &Candidate,
        reason: String,
    ) -> WorkflowResult<PromotionOutcome> {
        ctx.state_mut(|s| s.step = "stale".into());
        let new = ctx
            .execute_activity(
                VerifyStoreApi::stale,
                StaleRequest {
                    candidate_id: id.clone(),
                    reason: reason.clone(),
                },
                options::db(),
            )
            .await?;
        if let Some(new) = new {
            verify_each(ctx, k, &[new]).await;
        }
        Ok(PromotionOutcome::Stale { reason })
    }

    /// The step running now and every precondition with its state, as last read.
    #[query]
    pub fn progress(&self, _ctx: &WorkflowContextView) -> PromotionProgress {
        PromotionProgress {
            step: self.step.clone(),
            promotability: self.promotability.clone(),
        }
    }
}
