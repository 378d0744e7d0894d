//! The activities behind PromotionWorkflow and `winner_ready`: the precondition rows, the
//! compare-and-swap transaction, the sync records and the settle (`belay.db`); whether the fork
//! holds the composed commit, the fast-forward of canonical `main` and the file index and code
//! manifest of the new tree (`belay.git`).

use crate::{Plain, fatal, git_error, retryable, source_error, store_error};
use belay_domain::approval::Approval;
use belay_domain::check::CheckId;
use belay_domain::evidence::{Coverage, EvidenceStatus, latest_per_check};
use belay_domain::ids::{CandidateId, ProjectId};
use belay_domain::promotion::PromotionOutcome;
use belay_domain::repo::{candidate_fork, canonical_repo};
use belay_git::source_objects::SourceObjects;
use belay_git::{CasOutcome, GitService};
use belay_store::Store;
use belay_workflows::promotion::{
    ApprovalRequest, CandidateForkToSweep, CasRequest, CommitInFork, PromotionRowsFacts, PushRequest, Pushed,
    ReleaseRequest, ReleasedRequest, SettleOlderRequest, SettledOlder, SourcesRequest, WinnerFacts,
};
use std::sync::Arc;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use tracing::instrument;

/// A test-only failpoint: with `BELAY_FAILPOINT=promotion-after-cas` the worker process exits
/// right after the compare-and-swap commits, before the fast-forward, as a crash there would.
pub const AFTER_CAS: &str = "promotion-after-cas";

/// Promotion's rows, on the `belay.db` pool.
pub struct PromotionStoreActivities {
    pub store: Store,
}

#[activities]
impl PromotionStoreActivities {
    #[activity(definition = belay_workflows::promotion::promotion_definitions::Facts)]
    #[instrument(skip_all, fields(candidate.id = %candidate_id), err(Debug))]
    pub async fn facts(
        self: Arc<Self>,
        _ctx: ActivityContext,
        candidate_id: CandidateId,
    ) -> Result<Option<PromotionRowsFacts>, ActivityError> {
        let Some(r) = self.store.promotion_rows(&candidate_id).await.map_err(store_error)? else {
            return Ok(None);
        };
        Ok(Some(PromotionRowsFacts {
            candidate: r.candidate,
            risk_tier: r.risk_tier,
            evidence: r.evidence,
            approval: r.approval,
            active_policy: r.active_policy,
            canonical_generation: r.canonical_generation,
            sibling_pending: r.sibling_pending,
            promoted_generation: r.promotion.map(|p| p.generation),
        }))
    }

    #[activity(definition = belay_workflows::promotion::promotion_definitions::Cas)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id, generation = input.expected_generation), err(Debug))]
    pub async fn cas(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: CasRequest,
    ) -> Result<PromotionOutcome, ActivityError> {
        let out = self
            .store
            .promote_cas(&input.candidate_id, input.expected_generation, &input.plan_policy)
            .await
            .map_err(store_error)?;
        if matches!(out, PromotionOutcome::Promoted { .. }) && crate::failpoint(AFTER_CAS) {
            tracing::warn!("failpoint {AFTER_CAS}: exiting after the compare-and-swap");
            std::process::exit(86);
        }
        Ok(out)
    }

    #[activity(definition = belay_workflows::promotion::promotion_definitions::Pushed)]
    #[instrument(skip_all, fields(candidate.id = %candidate_id), err(Debug))]
    pub async fn pushed(
        self: Arc<Self>,
        _ctx: ActivityContext,
        candidate_id: CandidateId,
    ) -> Result<(), ActivityError> {
        self.store
            .mark_promotion_pushed(&candidate_id)
            .await
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::promotion::promotion_definitions::Synced)]
    #[instrument(skip_all, fields(candidate.id = %candidate_id), err(Debug))]
    pub async fn synced(
        self: Arc<Self>,
        _ctx: ActivityContext,
        candidate_id: CandidateId,
    ) -> Result<(), ActivityError> {
        self.store
            .mark_promotion_synced(&candidate_id)
            .await
            .map(drop)
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::promotion::promotion_definitions::Settle)]
    #[instrument(skip_all, fields(project.id = %input.project_id, generation = input.generation), err(Debug))]
    pub async fn settle(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: SettleOlderRequest,
    ) -> Result<SettledOlder, ActivityError> {
        self.settle_older(input.project_id.as_str(), input.generation).await
    }

    #[activity(definition = belay_workflows::promotion::promotion_definitions::Released)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id, generation = input.generation), err(Debug))]
    pub async fn released(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ReleasedRequest,
    ) -> Result<SettledOlder, ActivityError> {
        let id = input.candidate_id.as_str();
        self.store
            .mark_promotion_pushed(&CandidateId::from(id))
            .await
            .map_err(store_error)?;
        self.store
            .mark_promotion_synced(&CandidateId::from(id))
            .await
            .map_err(store_error)?;
        self.settle_older(input.project_id.as_str(), input.generation).await
    }

    #[activity(definition = belay_workflows::promotion::promotion_definitions::WinnerFacts)]
    #[instrument(skip_all, fields(candidate.id = %candidate_id), err(Debug))]
    pub async fn winner_facts(
        self: Arc<Self>,
        _ctx: ActivityContext,
        candidate_id: CandidateId,
    ) -> Result<Option<WinnerFacts>, ActivityError> {
        let Some(r) = self.store.promotion_rows(&candidate_id).await.map_err(store_error)? else {
            return Ok(None);
        };
        let has_siblings = self.store.has_siblings(&candidate_id).await.map_err(store_error)?;
        let acceptance_passed = r
            .candidate
            .plan
            .as_ref()
            .and_then(|p| latest_per_check(p, &r.evidence).get(&CheckId::Acceptance).copied())
            .is_some_and(|e| e.status == EvidenceStatus::Pass && e.coverage == Coverage::CheckedSupported);
        Ok(Some(WinnerFacts {
            candidate: r.candidate,
            has_siblings,
            risk_tier: r.risk_tier,
            active_policy: r.active_policy,
            acceptance_passed,
        }))
    }

    #[activity(definition = belay_workflows::promotion::promotion_definitions::RequestApproval)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id), err(Debug))]
    pub async fn request_approval(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ApprovalRequest,
    ) -> Result<Approval, ActivityError> {
        self.store
            .request_approval(&input.candidate_id, &input.tree, &input.gates, &input.reason)
            .await
            .map_err(store_error)
    }
}

/// The forks sweep's Candidate forks, on the `belay.db` pool.
pub struct SweepCandidateStoreActivities {
    pub store: Store,
}

#[activities]
impl SweepCandidateStoreActivities {
    #[activity(definition = belay_workflows::promotion::promotion_definitions::CandidateForks)]
    #[instrument(skip_all, err(Debug))]
    pub async fn candidate_forks(
        self: Arc<Self>,
        _ctx: ActivityContext,
        _input: (),
    ) -> Result<Vec<CandidateForkToSweep>, ActivityError> {
        Ok(self
            .store
            .sweep_candidate_forks()
            .await
            .map_err(store_error)?
            .into_iter()
            .map(|r| CandidateForkToSweep {
                fork: r.fork,
                canonical: r.canonical,
                composed_commit: r.composed_commit,
            })
            .collect())
    }
}

impl PromotionStoreActivities {
    /// The project's older-base Candidates settled after a promotion to `generation`.
    async fn settle_older(&self, project_id: &str, generation: i64) -> Result<SettledOlder, ActivityError> {
        let s = self
            .store
            .settle_older_base(&ProjectId::from(project_id), generation)
            .await
            .map_err(store_error)?;
        Ok(SettledOlder {
            stale: s.stale,
            recomposed: s.recomposed.into_iter().map(Into::into).collect(),
        })
    }
}

/// Promotion's git work, on the `belay.git` pool.
pub struct PromotionGitActivities {
    pub git: GitService,
    pub sources: SourceObjects,
}

#[activities]
impl PromotionGitActivities {
    #[activity(definition = belay_workflows::promotion::promotion_definitions::CommitInFork)]
    #[instrument(skip_all, fields(fork = %input.fork, commit = %input.commit), err(Debug))]
    pub async fn commit_in_fork(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: CommitInFork,
    ) -> Result<bool, ActivityError> {
        match self.git.main_contains(&input.fork, &input.commit).await {
            Ok(held) => Ok(held),
            Err(belay_git::GitError::NotFound(_)) => Ok(false),
            Err(e) => Err(git_error(e)),
        }
    }

    #[activity(definition = belay_workflows::promotion::promotion_definitions::Push)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id, commit = %input.commit), err(Debug))]
    pub async fn push(self: Arc<Self>, _ctx: ActivityContext, input: PushRequest) -> Result<Pushed, ActivityError> {
        self.fast_forward(&input).await
    }

    #[activity(definition = belay_workflows::promotion::promotion_definitions::CanonicalHolds)]
    #[instrument(skip_all, fields(candidates = input.len()), err(Debug))]
    pub async fn canonical_holds(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: Vec<(String, String)>,
    ) -> Result<Vec<bool>, ActivityError> {
        let mut out = Vec::with_capacity(input.len());
        for (canonical, commit) in &input {
            out.push(match self.git.main_contains(canonical, commit).await {
                Ok(held) => held,
                Err(belay_git::GitError::NotFound(_)) => false,
                Err(e) => return Err(git_error(e)),
            });
        }
        Ok(out)
    }

    #[activity(definition = belay_workflows::promotion::promotion_definitions::Sources)]
    #[instrument(skip_all, fields(project.id = %input.project_id, tree = %input.tree), err(Debug))]
    pub async fn sources(self: Arc<Self>, _ctx: ActivityContext, input: SourcesRequest) -> Result<(), ActivityError> {
        self.sync_sources(&input).await
    }

    #[activity(definition = belay_workflows::promotion::promotion_definitions::Release)]
    #[instrument(skip_all, fields(candidate.id = %input.push.candidate_id, commit = %input.push.commit), err(Debug))]
    pub async fn release(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ReleaseRequest,
    ) -> Result<Pushed, ActivityError> {
        let pushed = self.fast_forward(&input.push).await?;
        self.sync_sources(&input.sources).await?;
        Ok(pushed)
    }
}

impl PromotionGitActivities {
    /// Copies the composed commit's objects into canonical and moves its `main` from the base to
    /// the commit by a ref compare-and-swap (nothing when it is there already).
    async fn fast_forward(&self, input: &PushRequest) -> Result<Pushed, ActivityError> {
        let canonical = canonical_repo(input.project_id.as_str()).map_err(fatal)?;
        if self
            .git
            .main_contains(&canonical, &input.commit)
            .await
            .map_err(git_error)?
        {
            return Ok(Pushed::AlreadyThere);
        }
        self.git.keep_reflog(&canonical).await.map_err(git_error)?;
        let fork = candidate_fork(input.candidate_id.as_str()).map_err(fatal)?;
        self.git
            .copy_objects(&fork, &canonical, &input.commit, Some(&input.base_commit))
            .await
            .map_err(git_error)?;
        match self
            .git
            .cas_main(&canonical, &input.base_commit, &input.commit)
            .await
            .map_err(git_error)?
        {
            CasOutcome::Moved => Ok(Pushed::Moved),
            CasOutcome::AlreadyAt => Ok(Pushed::AlreadyThere),
            CasOutcome::Mismatch { actual } => {
                // Canonical moved on since; fine only when it holds the composed commit.
                if self
                    .git
                    .main_contains(&canonical, &input.commit)
                    .await
                    .map_err(git_error)?
                {
                    Ok(Pushed::AlreadyThere)
                } else {
                    Err(retryable(Plain(format!(
                        "canonical main is at {actual}, neither the base {} nor past {}",
                        input.base_commit, input.commit
                    ))))
                }
            }
        }
    }

    /// Writes the file index and code manifest of the new tree.
    async fn sync_sources(&self, input: &SourcesRequest) -> Result<(), ActivityError> {
        let canonical = canonical_repo(input.project_id.as_str()).map_err(fatal)?;
        let project = input.project_id.as_str();
        let started = std::time::Instant::now();
        // The base tree's stored index (when it was written): its blobs are stored already and
        // their sizes known, so only the blobs the promotion brought are looked up and checked.
        let known = match input.base_tree.as_deref().filter(|b| *b != input.tree) {
            Some(base) => self.sources.read_index(project, base).await.map_err(source_error)?,
            None => None,
        };
        let known = known.map(std::sync::Arc::new);
        let files = self
            .git
            .file_index_knowing(&canonical, &input.commit, known.clone())
            .await
            .map_err(git_error)?;
        let indexed = started.elapsed();
        let written = self
            .sources
            .write_tree_over(&self.git, &canonical, project, &input.tree, &files, known.as_deref())
            .await
            .map_err(source_error)?;
        tracing::info!(
            sources.files = files.len(),
            sources.blobs_checked = written.blobs_checked,
            sources.blobs_stored = written.blobs_stored,
            sources.index_ms = indexed.as_millis() as u64,
            sources.write_ms = (started.elapsed() - indexed).as_millis() as u64,
            "source sync written"
        );
        Ok(())
    }
}
