//! GitActivities (the `belay.git` pool) and the project record activities (the `belay.db`
//! pool) behind ProjectProvisionWorkflow.

use crate::{git_error, source_error, store_error};
use belay_domain::ids::ProjectId;
use belay_git::GitService;
use belay_git::source_objects::SourceObjects;
use belay_store::Store;
use belay_workflows::contracts::{ProjectFailure, ProjectProvisioned, ProjectSources, ProvisionedSource, Removed};
use std::sync::Arc;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use tracing::instrument;

pub struct GitActivities {
    pub git: GitService,
    pub sources: SourceObjects,
}

#[activities]
impl GitActivities {
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
}

pub struct ProjectStoreActivities {
    pub store: Store,
}

#[activities]
impl ProjectStoreActivities {
    #[activity(definition = belay_workflows::contracts::project_definitions::MarkProvisioned)]
    #[instrument(skip_all, fields(project.id = %input.project_id), err(Debug))]
    pub async fn mark_provisioned(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ProjectProvisioned,
    ) -> Result<(), ActivityError> {
        self.store
            .mark_project_provisioned(&input.project_id, &input.source.commit, &input.source.tree)
            .await
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::contracts::cleanup_definitions::RepositoryNames)]
    #[instrument(skip_all, fields(project.id = %project_id), err(Debug))]
    pub async fn repository_names(
        self: Arc<Self>,
        _ctx: ActivityContext,
        project_id: ProjectId,
    ) -> Result<Vec<String>, ActivityError> {
        self.store
            .project_repository_names(&project_id)
            .await
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::contracts::cleanup_definitions::DeleteRows)]
    #[instrument(skip_all, fields(project.id = %project_id), err(Debug))]
    pub async fn delete_rows(
        self: Arc<Self>,
        _ctx: ActivityContext,
        project_id: ProjectId,
    ) -> Result<(), ActivityError> {
        self.store.delete_project_rows(&project_id).await.map_err(store_error)
    }

    #[activity(definition = belay_workflows::contracts::project_definitions::MarkFailed)]
    #[instrument(skip_all, fields(project.id = %input.project_id), err(Debug))]
    pub async fn mark_failed(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ProjectFailure,
    ) -> Result<(), ActivityError> {
        self.store
            .mark_project_failed(&input.project_id, &input.error)
            .await
            .map_err(store_error)
    }
}
