//! The acceptance check's source (`belay.git`) and the selection and acceptance records
//! (`belay.db`). The rules are `belay_domain`'s and the transactions the store's.

use crate::{Plain, fatal, git_error, source_error, store_error};
use belay_domain::acceptance::{
    AcceptanceInput, ChangedFile, PatchSource, SourceFile, assemble_acceptance_input, composed_file_order,
};
use belay_domain::candidate::CandidateMetrics;
use belay_domain::client_assets::{INDEX_HTML, index_references};
use belay_domain::repo::candidate_fork;
use belay_domain::selection_steps::{SelectionDone, SelectionStep};
use belay_git::GitService;
use belay_git::source_objects::{PatchKind, SourceObjects};
use belay_store::Store;
use belay_workflows::selection::{AcceptanceRecord, AcceptanceSourceRequest, ApplyRequest, ClaimRequest};
use std::collections::BTreeSet;
use std::sync::Arc;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use tracing::instrument;

/// Reads what the acceptance model is given: the Candidate patch, then the composed files in
/// `composedFileOrder` from the Candidate fork; the patch alone when the fork cannot be read.
pub async fn acceptance_source(
    git: &GitService,
    sources: &SourceObjects,
    input: &AcceptanceSourceRequest,
) -> Result<AcceptanceInput, ActivityError> {
    let patch = sources
        .read_patch(
            input.project_id.as_str(),
            PatchKind::Candidate,
            input.candidate_id.as_str(),
        )
        .await
        .map_err(source_error)?;
    let key = SourceObjects::patch_key(
        input.project_id.as_str(),
        PatchKind::Candidate,
        input.candidate_id.as_str(),
    )
    .map_err(source_error)?;
    let fork = candidate_fork(input.candidate_id.as_str()).map_err(fatal)?;
    let files = read_composed(git, &fork, &input.base, &input.composed).await.ok();
    let patch_source = patch.as_ref().map(|(text, _)| PatchSource {
        key: &key,
        text,
        commit: &input.composed,
    });
    Ok(assemble_acceptance_input(
        patch_source,
        &input.composed,
        files.as_deref(),
    ))
}

/// The composed files in `composedFileOrder`, read from the fork at `composed`.
pub async fn read_composed(
    git: &GitService,
    fork: &str,
    base: &str,
    composed: &str,
) -> Result<Vec<SourceFile>, ActivityError> {
    let index = git.file_index(fork, composed).await.map_err(git_error)?;
    let present: BTreeSet<String> = index.iter().map(|f| f.path.clone()).collect();
    let changed: Vec<ChangedFile> = git
        .changed_paths(fork, base, composed)
        .await
        .map_err(git_error)?
        .into_iter()
        .map(|p| ChangedFile {
            deleted: !present.contains(&p),
            path: p,
        })
        .collect();
    let page = match index.iter().find(|f| f.path == INDEX_HTML) {
        Some(f) => git
            .read_blobs(fork, vec![f.blob.clone()])
            .await
            .map_err(git_error)?
            .into_iter()
            .next()
            .map(|b| String::from_utf8_lossy(&b).into_owned()),
        None => None,
    };
    let refs = page.as_deref().map(index_references).unwrap_or_default();
    let order = composed_file_order(&changed, &refs, &present);
    let blobs: Vec<String> = order
        .iter()
        .filter_map(|p| index.iter().find(|f| &f.path == p).map(|f| f.blob.clone()))
        .collect();
    let bytes = git.read_blobs(fork, blobs).await.map_err(git_error)?;
    Ok(order
        .into_iter()
        .zip(bytes)
        .map(|(path, bytes)| SourceFile { path, bytes })
        .collect())
}

/// The acceptance check's reads, on the `belay.git` pool.
pub struct SelectionGitActivities {
    pub git: GitService,
    pub sources: SourceObjects,
}

#[activities]
impl SelectionGitActivities {
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

/// Selection and acceptance records, on the `belay.db` pool.
pub struct SelectionStoreActivities {
    pub store: Store,
}

#[activities]
impl SelectionStoreActivities {
    #[activity(definition = belay_workflows::selection::selection_definitions::AcceptanceStore)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id), err(Debug))]
    pub async fn acceptance_store(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: AcceptanceRecord,
    ) -> Result<(), ActivityError> {
        let k = self
            .store
            .candidate_for_worker(&input.candidate_id)
            .await
            .map_err(store_error)?
            .ok_or_else(|| fatal(Plain(format!("candidate {} not found", input.candidate_id))))?;
        let judged = input.criteria.is_some();
        let metrics = CandidateMetrics {
            criteria_met: judged.then_some(input.outcome.criteria_met),
            criteria_total: judged.then_some(input.outcome.criteria_total),
            cost_usd: Some(input.cost_usd),
            ..k.metrics
        };
        self.store
            .set_acceptance(input.candidate_id.as_str(), input.criteria.as_deref(), &metrics)
            .await
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::selection::selection_definitions::Claim)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id), err(Debug))]
    pub async fn claim(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ClaimRequest,
    ) -> Result<SelectionStep, ActivityError> {
        self.store
            .claim_selection(&input.candidate_id, &input.claimant)
            .await
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::selection::selection_definitions::Apply)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id), err(Debug))]
    pub async fn apply(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ApplyRequest,
    ) -> Result<SelectionDone, ActivityError> {
        self.store
            .apply_selection(&input.candidate_id, &input.claimant, input.judge.as_ref())
            .await
            .map_err(store_error)
    }
}
