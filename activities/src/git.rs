//! GitActivities: the git service, for every workflow: the bare repositories (canonical and
//! forks, through `belay-git`) and the source objects written beside them. All on `belay.git`.

use crate::selection::acceptance_source;
use crate::{fatal, git_error, source_error};
use belay_domain::acceptance::AcceptanceInput;
use belay_domain::ids::{EditSessionId, ProjectId};
use belay_domain::repo::{candidate_fork, canonical_repo, edit_fork, workspace_fork};
use belay_git::GitService;
use belay_git::source_objects::SourceObjects;
use belay_git::{GitError, StackedFork, Tip};
use belay_workflows::contracts::{ProjectSources, ProvisionedSource, Removed};
use belay_workflows::edit_session::ForkSession;
use belay_workflows::promotion::{CommitInFork, PushRequest, Pushed, ReleaseRequest, SourcesRequest};
use belay_workflows::selection::AcceptanceSourceRequest;
use belay_workflows::verification::{ComposeRequest, Composed, InspectRequest, Inspected, PathsRequest};
use belay_workflows::workspace::{ForkRequest, Forked};
use std::sync::Arc;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use tracing::instrument;

/// The git service's activities: the repositories and their source objects.
pub struct GitActivities {
    pub git: GitService,
    pub sources: SourceObjects,
}

#[activities]
impl GitActivities {
    // ProjectProvisionWorkflow and ProjectCleanupWorkflow: the canonical repository and its source objects.

    #[activity(definition = belay_workflows::contracts::project_definitions::ProvisionProject)]
    #[instrument(skip_all, fields(project.id = %project_id), err(Debug))]
    pub async fn provision_project(
        self: Arc<Self>,
        _ctx: ActivityContext,
        project_id: ProjectId,
    ) -> Result<ProvisionedSource, ActivityError> {
        let p = self.git.provision(&project_id).await.map_err(git_error)?;
        let files = self.git.file_index(&p.repo, &p.commit).await.map_err(git_error)?;
        self.sources
            .write_tree(&self.git, &p.repo, &project_id, &p.tree, &files, None)
            .await
            .map_err(source_error)?;
        Ok(ProvisionedSource {
            commit: p.commit,
            tree: p.tree,
            files: files.len(),
        })
    }

    #[activity(definition = belay_workflows::contracts::cleanup_definitions::RemoveProjectSources)]
    #[instrument(skip_all, fields(project.id = %input.project_id), err(Debug))]
    pub async fn remove_project_sources(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ProjectSources,
    ) -> Result<Removed, ActivityError> {
        let ProjectSources {
            project_id,
            repositories: names,
        } = input;
        let mut repositories = 0;
        for name in &names {
            if self.git.delete_repo(name).await.map_err(git_error)? {
                repositories += 1;
            }
        }
        let objects = self
            .sources
            .delete_project_sources(&project_id)
            .await
            .map_err(source_error)?;
        Ok(Removed { repositories, objects })
    }

    // WorkspaceWorkflow: the workspace fork and the ChangeSet patch.

    #[activity(definition = belay_workflows::workspace::workspace_definitions::Fork)]
    #[instrument(skip_all, fields(run.id = %input.run_id), err(Debug))]
    pub async fn workspace_fork(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ForkRequest,
    ) -> Result<Forked, ActivityError> {
        let canonical = canonical_repo(&input.project_id).map_err(fatal)?;
        let fork = workspace_fork(&input.run_id).map_err(fatal)?;
        let tips = &input.stacked;
        Ok(
            match self
                .git
                .fork_stacked(&canonical, &fork, tips)
                .await
                .map_err(git_error)?
            {
                StackedFork::Ready { base, start, .. } => Forked::Ready { fork, base, start },
                StackedFork::Conflict { label, paths } => Forked::Conflict { label, paths },
            },
        )
    }

    #[activity(definition = belay_workflows::workspace::workspace_definitions::Patch)]
    #[instrument(skip_all, fields(change_set.id = %input.change_set_id), err(Debug))]
    pub async fn workspace_patch(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: belay_workflows::workspace::PatchRequest,
    ) -> Result<String, ActivityError> {
        let diff = self
            .git
            .unified_diff(&input.fork, &input.start, &input.commit)
            .await
            .map_err(git_error)?;
        let stored = self
            .sources
            .put_change_set_patch(&input.project_id, &input.change_set_id, &diff)
            .await
            .map_err(source_error)?;
        Ok(stored.key)
    }

    // EditSessionWorkflow: the session fork.

    #[activity(definition = belay_workflows::edit_session::edit_definitions::Fork)]
    #[instrument(skip_all, fields(project.id = %input.project_id, session.id = %input.session_id), err(Debug))]
    pub async fn edit_fork(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ForkSession,
    ) -> Result<String, ActivityError> {
        let canonical = canonical_repo(&input.project_id).map_err(fatal)?;
        let fork = edit_fork(&input.session_id).map_err(fatal)?;
        match self.git.fork(&canonical, &fork).await {
            Ok(info) => Ok(info.main),
            // A retry after the fork was made: it stands.
            Err(GitError::AlreadyExists { main, .. }) => Ok(main),
            Err(e) => Err(git_error(e)),
        }
    }

    #[activity(definition = belay_workflows::edit_session::edit_definitions::Delete)]
    #[instrument(skip_all, fields(session.id = %session_id), err(Debug))]
    pub async fn edit_delete(
        self: Arc<Self>,
        _ctx: ActivityContext,
        session_id: EditSessionId,
    ) -> Result<(), ActivityError> {
        let fork = edit_fork(&session_id).map_err(fatal)?;
        self.git.delete_repo(&fork).await.map_err(git_error).map(|_| ())
    }

    // ForksSweepWorkflow: deleting the swept forks.

    #[activity(definition = belay_workflows::sweep::sweep_definitions::Delete)]
    #[instrument(skip_all, fields(repos = repos.len()), err(Debug))]
    pub async fn sweep_delete(self: Arc<Self>, _ctx: ActivityContext, repos: Vec<String>) -> Result<(), ActivityError> {
        for repo in &repos {
            self.git.delete_repo(repo).await.map_err(git_error)?;
        }
        Ok(())
    }

    // CandidateVerificationWorkflow: the Candidate fork, merges, patch and tree reads.

    #[activity(definition = belay_workflows::verification::verify_definitions::Paths)]
    #[instrument(skip_all, fields(tips = input.tips.len()), err(Debug))]
    pub async fn paths(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: PathsRequest,
    ) -> Result<Vec<Vec<String>>, ActivityError> {
        let mut out = Vec::with_capacity(input.tips.len());
        for tip in &input.tips {
            let from = tip.workspace_base.clone().unwrap_or_else(|| input.base_commit.clone());
            out.push(
                self.git
                    .changed_paths(&tip.tip.fork, &from, &tip.tip.commit)
                    .await
                    .map_err(git_error)?,
            );
        }
        Ok(out)
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::Compose)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id), err(Debug))]
    pub async fn compose(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ComposeRequest,
    ) -> Result<Composed, ActivityError> {
        let canonical = canonical_repo(input.project_id.as_str()).map_err(fatal)?;
        let fork = candidate_fork(input.candidate_id.as_str()).map_err(fatal)?;
        let tips: Vec<Tip> = input.tips.iter().map(|t| t.tip.clone()).collect();
        Ok(
            match self
                .git
                .fork_stacked(&canonical, &fork, &tips)
                .await
                .map_err(git_error)?
            {
                StackedFork::Ready { base, start, .. } => Composed::Merged { base, commit: start },
                StackedFork::Conflict { label, paths } => Composed::Conflict { label, paths },
            },
        )
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::Inspect)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id, commit = %input.commit), err(Debug))]
    pub async fn inspect(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: InspectRequest,
    ) -> Result<Inspected, ActivityError> {
        let fork = candidate_fork(input.candidate_id.as_str()).map_err(fatal)?;
        let tree = self.git.tree_of(&fork, &input.commit).await.map_err(git_error)?;
        let changed_paths = self
            .git
            .changed_paths(&fork, &input.base, &input.commit)
            .await
            .map_err(git_error)?;
        let index = self.git.file_index(&fork, &input.commit).await.map_err(git_error)?;
        let read = async |path: &str| -> Result<Option<String>, ActivityError> {
            let Some(f) = index.iter().find(|f| f.path == path) else {
                return Ok(None);
            };
            let blobs = self
                .git
                .read_blobs(&fork, vec![f.blob.clone()])
                .await
                .map_err(git_error)?;
            Ok(blobs
                .into_iter()
                .next()
                .map(|b| String::from_utf8_lossy(&b).into_owned()))
        };
        let build_script = read("package.json").await?.and_then(|text| {
            let v: serde_json::Value = serde_json::from_str(&text).ok()?;
            v.get("scripts")?.get("build")?.as_str().map(str::to_owned)
        });
        let index_html = read(belay_domain::client_assets::INDEX_HTML).await?;
        Ok(Inspected {
            tree,
            changed_paths,
            build_script,
            index_html,
        })
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::Patch)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id, commit = %input.commit), err(Debug))]
    pub async fn verify_patch(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: belay_workflows::verification::PatchRequest,
    ) -> Result<String, ActivityError> {
        let fork = candidate_fork(input.candidate_id.as_str()).map_err(fatal)?;
        let diff = self
            .git
            .unified_diff(&fork, &input.base, &input.commit)
            .await
            .map_err(git_error)?;
        Ok(self
            .sources
            .put_candidate_patch(input.project_id.as_str(), input.candidate_id.as_str(), &diff)
            .await
            .map_err(source_error)?
            .key)
    }

    // PromotionWorkflow: whether the fork holds the composed commit, the fast-forward of canonical `main`, the new tree's source objects.

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

    // The acceptance check's source.

    #[activity(definition = belay_workflows::selection::selection_definitions::AcceptanceSource)]
    #[instrument(skip_all, fields(project.id = %input.project_id, candidate.id = %input.candidate_id), err(Debug))]
    pub async fn acceptance_source(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: AcceptanceSourceRequest,
    ) -> Result<AcceptanceInput, ActivityError> {
        acceptance_source(&self.git, &self.sources, &input).await
    }
}
