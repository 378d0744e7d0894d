//! Promotion's steps beyond one call: the settle of older-base Candidates after a
//! compare-and-swap ([`StoreActivities`]), the fast-forward of canonical `main` and the file index
//! and code manifest of the new tree ([`GitActivities`]). The activities themselves are the
//! database's and git's (`store`, `git`).

use crate::git::GitActivities;
use crate::store::StoreActivities;
use crate::{Plain, fatal, git_error, retryable, source_error, store_error};
use belay_domain::ids::ProjectId;
use belay_domain::repo::{candidate_fork, canonical_repo};
use belay_git::CasOutcome;
use belay_workflows::promotion::{PushRequest, Pushed, SettledOlder, SourcesRequest};
use temporalio_sdk::activities::ActivityError;

/// A test-only failpoint: with `BELAY_FAILPOINT=promotion-after-cas` the worker process exits
/// right after the compare-and-swap commits, before the fast-forward, as a crash there would.
pub const AFTER_CAS: &str = "promotion-after-cas";

impl StoreActivities {
    /// The project's older-base Candidates settled after a promotion to `generation`.
    pub(crate) async fn settle_older(&self, project_id: &str, generation: i64) -> Result<SettledOlder, ActivityError> {
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

impl GitActivities {
    /// Copies the composed commit's objects into canonical and moves its `main` from the base to
    /// the commit by a ref compare-and-swap (nothing when it is there already).
    pub(crate) async fn fast_forward(&self, input: &PushRequest) -> Result<Pushed, ActivityError> {
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
    pub(crate) async fn sync_sources(&self, input: &SourcesRequest) -> Result<(), ActivityError> {
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
