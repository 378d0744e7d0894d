//! Project policies, verification starts and Candidates. Starting verification (or composing an
//! explicit set) makes a Candidate and starts its CandidateVerificationWorkflow (`verify-{cand}`);
//! reading a Candidate answers its status, reason, plan, Evidence, the gate's gaps and the gestures
//! its state allows; its diff answers the patch from its base to its composed commit, file by file.

use crate::AppState;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ApiJson, Caller};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use belay_domain::ValidationError;
use belay_domain::candidate::Candidate;
use belay_domain::diff::{CandidateDiff, DiffLimits, attach_citations};
use belay_domain::evidence::{Evidence, Gap, gate_required_checks};
use belay_domain::gesture::{Gesture, candidate_gestures};
use belay_domain::ids::{CandidateId, ChangeId, ProjectId};
use belay_domain::policy::{PolicyInput, ProjectPolicy};
use belay_workflows::queues;
use belay_workflows::search;
use belay_workflows::verification::{CandidateVerificationWorkflow, VerifyInput, verify_workflow_id};
use serde::{Deserialize, Serialize};
use temporalio_client::{WorkflowIdConflictPolicy, WorkflowStartOptions};
use utoipa::ToSchema;

/// Most ChangeSets one explicit Candidate may hold.
pub const MAX_CHANGE_SETS: usize = 100;

/// An explicit set of a Change's ChangeSets to compose as a Candidate.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ComposeInput {
    pub change_set_ids: Vec<String>,
}

impl ComposeInput {
    fn validate(&self) -> Result<(), ValidationError> {
        let field = "changeSetIds";
        if self.change_set_ids.is_empty() {
            return Err(ValidationError::new(field, "must name at least one ChangeSet"));
        }
        if self.change_set_ids.len() > MAX_CHANGE_SETS {
            return Err(ValidationError::new(
                field,
                format!("at most {MAX_CHANGE_SETS} ChangeSets"),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for id in &self.change_set_ids {
            if id.is_empty() || id.chars().count() > 100 {
                return Err(ValidationError::new(field, "each id has 1 to 100 characters"));
            }
            if !seen.insert(id) {
                return Err(ValidationError::new(field, format!("{id} is named twice")));
            }
        }
        Ok(())
    }
}

/// A Candidate with its Evidence and the gaps the gate finds in it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CandidateView {
    #[serde(flatten)]
    pub candidate: Candidate,
    pub evidence: Vec<Evidence>,
    /// Every required check of the plan not yet satisfied (empty without a plan).
    pub gaps: Vec<Gap>,
    /// What a person may do on the Candidate now: `approve` and `reject` while an approval waits
    /// on the composed tree, `promote` on a verified Candidate no person holds; nothing on a
    /// rejected, stale or promoted one.
    pub gestures: Vec<Gesture>,
}

async fn view(s: &AppState, candidate: Candidate) -> ApiResult<CandidateView> {
    let evidence: Vec<Evidence> = s
        .store
        .list_evidence(&candidate.id)
        .await?
        .into_iter()
        .map(|r| r.evidence)
        .collect();
    let gaps = candidate
        .plan
        .as_ref()
        .map(|p| gate_required_checks(p, &evidence).gaps)
        .unwrap_or_default();
    let approval = s.store.approval_for_worker(&candidate.id).await?;
    let gestures = candidate_gestures(candidate.status, candidate.composed_tree.as_deref(), approval.as_ref());
    Ok(CandidateView {
        candidate,
        evidence,
        gaps,
        gestures,
    })
}

async fn start_workflow(s: &AppState, candidate: &Candidate) -> ApiResult<()> {
    let attrs = temporalio_common::search_attributes::SearchAttributes::new(vec![
        search::CANDIDATE_ID.value_set(candidate.id.to_string()),
        search::CHANGE_ID.value_set(candidate.change_id.to_string()),
        search::PROJECT_ID.value_set(candidate.project_id.to_string()),
    ]);
    let described = belay_workflows::metadata::verification(&candidate.id, &candidate.change_id);
    let opts = WorkflowStartOptions::new(queues::WORKFLOWS, verify_workflow_id(candidate.id.as_str()))
        .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
        .search_attributes(attrs)
        .static_summary(described.summary)
        .static_details(described.details)
        .build();
    s.temporal
        .start_workflow(
            CandidateVerificationWorkflow::run,
            VerifyInput {
                candidate_id: candidate.id.clone(),
            },
            opts,
        )
        .await
        .map_err(|e| ApiError::internal(&e))?;
    Ok(())
}

/// The project's active policy: its latest version, or `policy-1` (the default).
#[utoipa::path(get, path = "/v1/projects/{id}/policy", tag = "verification", params(("id" = String, Path)),
    responses((status = 200, body = ProjectPolicy), (status = 404, body = ErrorBody)))]
pub async fn get_policy(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<ProjectId>,
) -> ApiResult<Json<ProjectPolicy>> {
    Ok(Json(s.store.active_policy(&a.id, &id).await?))
}

/// Writes the next version of the project's policy; a field left out takes the default.
#[utoipa::path(put, path = "/v1/projects/{id}/policy", tag = "verification", params(("id" = String, Path)),
    request_body = PolicyInput,
    responses((status = 200, body = ProjectPolicy), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn put_policy(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<ProjectId>,
    ApiJson(input): ApiJson<PolicyInput>,
) -> ApiResult<Json<ProjectPolicy>> {
    input.validate()?;
    Ok(Json(s.store.put_policy(&a.id, &id, &input).await?))
}

/// A verification round: its first Candidate (the anchor), and every Candidate of the round.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerificationRound {
    #[serde(flatten)]
    pub first: CandidateView,
    /// Every Candidate the fork rule made this round, oldest first; more than one are siblings.
    pub candidates: Vec<belay_domain::ids::CandidateId>,
}

/// Starts verification: `verification.started`, the Change `verifying`, and the Candidates the
/// fork rule (`planCandidateSets`) gives from the proposed ChangeSets and the open conflicts: one
/// holding every proposed ChangeSet, or siblings (one per side, plus the combined one for
/// `fork_required`). Each one's workflow starts at once.
#[utoipa::path(post, path = "/v1/changes/{id}/verification", tag = "verification", params(("id" = String, Path)),
    responses((status = 201, body = VerificationRound), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn start(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<ChangeId>,
) -> ApiResult<(StatusCode, Json<VerificationRound>)> {
    let round = s.store.start_verification_round(&a.id, &id).await?;
    for candidate in &round {
        start_workflow(&s, candidate).await?;
    }
    let ids = round.iter().map(|c| c.id.clone()).collect();
    let first = round.into_iter().next().expect("a round has a Candidate");
    Ok((
        StatusCode::CREATED,
        Json(VerificationRound {
            first: view(&s, first).await?,
            candidates: ids,
        }),
    ))
}

/// Composes an explicit set of the Change's ChangeSets as a new Candidate and verifies it.
#[utoipa::path(post, path = "/v1/changes/{id}/candidates", tag = "verification", params(("id" = String, Path)),
    request_body = ComposeInput,
    responses((status = 201, body = CandidateView), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn compose(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<ChangeId>,
    ApiJson(input): ApiJson<ComposeInput>,
) -> ApiResult<(StatusCode, Json<CandidateView>)> {
    input.validate()?;
    let candidate = s.store.compose_candidate(&a.id, &id, &input.change_set_ids).await?;
    start_workflow(&s, &candidate).await?;
    Ok((StatusCode::CREATED, Json(view(&s, candidate).await?)))
}

/// A Change's Candidates, oldest first.
#[utoipa::path(get, path = "/v1/changes/{id}/candidates", tag = "verification", params(("id" = String, Path)),
    responses((status = 200, body = [Candidate]), (status = 404, body = ErrorBody)))]
pub async fn list(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<ChangeId>,
) -> ApiResult<Json<Vec<Candidate>>> {
    Ok(Json(s.store.list_candidates(&a.id, &id).await?))
}

/// One Candidate: status, reason, plan, Evidence and the gate's gaps.
#[utoipa::path(get, path = "/v1/candidates/{id}", tag = "verification", params(("id" = String, Path)),
    responses((status = 200, body = CandidateView), (status = 404, body = ErrorBody)))]
pub async fn get(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<CandidateId>,
) -> ApiResult<Json<CandidateView>> {
    let candidate = s
        .store
        .get_candidate(&a.id, &id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("candidate {id} not found")))?;
    Ok(Json(view(&s, candidate).await?))
}

/// The patch a person approves: from the Candidate's base commit to its composed commit, file by
/// file (added, modified, deleted, renamed), each hunk with both sides' line numbers, and the
/// acceptance check's citations marked on the lines that hold their quotes. Past the bound
/// (`limits`: files, lines, bytes of one file) the remaining files are listed with `truncated`
/// and no lines. 409 while nothing is composed; 410 once the Candidate's fork was removed and
/// canonical does not hold its commit.
#[utoipa::path(get, path = "/v1/candidates/{id}/diff", tag = "verification", params(("id" = String, Path)),
    responses((status = 200, body = CandidateDiff), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The Candidate has no composed commit (still composing, or its ChangeSets did not merge)"),
        (status = 410, body = ErrorBody, description = "The Candidate's fork was removed and its commit never reached canonical"),
        (status = 503, body = ErrorBody)))]
pub async fn diff(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<CandidateId>,
) -> ApiResult<Json<CandidateDiff>> {
    let candidate = s
        .store
        .get_candidate(&a.id, &id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("candidate {id} not found")))?;
    let Some(composed) = candidate.composed_commit.clone() else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_composed",
            format!(
                "candidate {id} has no composed commit ({}): there is no patch to read yet",
                candidate.status.as_str()
            ),
        ));
    };
    let Some(g) = &s.git else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "git_unavailable",
            "this API serves no git repositories, so it cannot read the patch",
        ));
    };
    let git = belay_git::GitService::new(g.root.clone());
    let fork = belay_domain::repo::candidate_fork(id.as_str()).map_err(|e| ApiError::internal(&e))?;
    let canonical =
        belay_domain::repo::canonical_repo(candidate.project_id.as_str()).map_err(|e| ApiError::internal(&e))?;
    // The fork holds the composed commit until it is swept; a promoted one is in canonical too.
    let mut repo = None;
    for name in [fork, canonical] {
        if git
            .has_commit(&name, &composed)
            .await
            .map_err(|e| ApiError::internal(&e))?
        {
            repo = Some(name);
            break;
        }
    }
    let Some(repo) = repo else {
        return Err(ApiError::new(
            StatusCode::GONE,
            "diff_unavailable",
            format!("candidate {id}'s fork was removed and canonical does not hold its composed commit"),
        ));
    };
    let limits = DiffLimits::DEFAULT;
    let (mut files, truncated) = git
        .file_diffs(&repo, &candidate.base_commit, &composed, limits)
        .await
        .map_err(|e| ApiError::internal(&e))?;
    attach_citations(&mut files, candidate.acceptance.as_deref().unwrap_or_default());
    Ok(Json(CandidateDiff {
        candidate_id: candidate.id,
        base_commit: candidate.base_commit,
        composed_commit: composed,
        files,
        truncated,
        limits,
    }))
}
