//! The acceptance check's source, read from the Candidate fork and its patch (served by
//! [`GitActivities`]). The rules are `belay_domain`'s and the records the store's.

use crate::{fatal, git_error, source_error};
use belay_domain::acceptance::{
    AcceptanceInput, ChangedFile, PatchSource, SourceFile, assemble_acceptance_input, composed_file_order,
};
use belay_domain::client_assets::{INDEX_HTML, index_references};
use belay_domain::repo::candidate_fork;
use belay_git::GitService;
use belay_git::source_objects::{PatchKind, SourceObjects};
use belay_workflows::selection::AcceptanceSourceRequest;
use std::collections::BTreeSet;
use temporalio_sdk::activities::ActivityError;

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
