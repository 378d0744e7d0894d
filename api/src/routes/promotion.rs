//! Approvals and promotion: a person's decision on the exact composed tree, what waits on a person,
//! a Candidate's promotability (every precondition with its state), and the promotion itself,
//! which runs as PromotionWorkflow `promote-{cand}-g{expectedGeneration}` and is answered with its
//! outcome. No model decides any of it.

use crate::AppState;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ApiJson, ApiQuery, Caller, int_param};
use axum::Json;
use axum::extract::{Path, State};
use belay_domain::approval::{Approval, ApprovalDecision, ApprovalInput, ApprovalStatus, ApprovalView};
use belay_domain::candidate::Candidate;
use belay_domain::ids::{AccountId, CandidateId};
use belay_domain::promotion::{Promotability, PromotionOutcome, promotion_workflow_id};
use belay_domain::repo::candidate_fork;
use belay_workflows::promotion::{PromoteInput, PromotionRowsFacts, PromotionWorkflow};
use belay_workflows::{queues, search};
use serde::{Deserialize, Serialize};
use temporalio_client::errors::WorkflowStartError;
use temporalio_client::{WorkflowGetResultOptions, WorkflowIdConflictPolicy, WorkflowStartOptions};
use utoipa::{IntoParams, ToSchema};

/// The answer to a decision: the approval as recorded and, for a grant, the promotion it started.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecisionView {
    pub approval: Approval,
    /// A grant ships the Candidate: the outcome of its promotion (`null` for a rejection).
    pub promotion: Option<PromotionOutcome>,
}

async fn owned(s: &AppState, account: &AccountId, id: &CandidateId) -> ApiResult<Candidate> {
    s.store
        .get_candidate(account, id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("candidate {id} not found")))
}

/// Runs the Candidate's promotion and waits for its outcome. The workflow id is the idempotency
/// key: callers racing on one Candidate and generation share one run, and every caller but the
/// one whose request started it is answered `alreadyPromoted` once it promoted.
async fn promote(s: &AppState, k: &Candidate) -> ApiResult<PromotionOutcome> {
    let id = promotion_workflow_id(&k.id, k.base_generation);
    let attrs = temporalio_common::search_attributes::SearchAttributes::new(vec![
        search::CANDIDATE_ID.value_set(k.id.to_string()),
        search::CHANGE_ID.value_set(k.change_id.to_string()),
        search::PROJECT_ID.value_set(k.project_id.to_string()),
    ]);
    let described = belay_workflows::metadata::promotion(&k.id, k.base_generation);
    let opts = WorkflowStartOptions::new(queues::WORKFLOWS, id.clone())
        .id_conflict_policy(WorkflowIdConflictPolicy::Fail)
        .search_attributes(attrs)
        .static_summary(described.summary)
        .static_details(described.details)
        .build();
    let input = PromoteInput {
        candidate_id: k.id.clone(),
        expected_generation: k.base_generation,
    };
    let (out, started_here) = match s.temporal.start_workflow(PromotionWorkflow::run, input, opts).await {
        Ok(h) => (h.get_result(WorkflowGetResultOptions::default()).await, true),
        Err(WorkflowStartError::AlreadyStarted { .. }) => (
            s.temporal
                .get_workflow_handle::<PromotionWorkflow>(id)
                .get_result(WorkflowGetResultOptions::default())
                .await,
            false,
        ),
        Err(e) => return Err(ApiError::internal(&e)),
    };
    let out = out.map_err(|e| ApiError::internal(&e))?;
    Ok(match out {
        PromotionOutcome::Promoted { .. } if !started_here => PromotionOutcome::AlreadyPromoted,
        other => other,
    })
}

/// A person's decision on a gated Candidate. A grant counts only for the exact composed tree the
/// approval is for (another tree: 409); the first decision is final (a different second one: 409);
/// a grant then promotes the Candidate; a rejection rejects it and, with a reason, starts its
/// repair.
#[utoipa::path(post, path = "/v1/candidates/{id}/approvals", tag = "promotion", params(("id" = String, Path)),
    request_body = ApprovalInput,
    responses((status = 200, body = DecisionView), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn decide(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<CandidateId>,
    ApiJson(input): ApiJson<ApprovalInput>,
) -> ApiResult<Json<DecisionView>> {
    input.validate()?;
    let k = owned(&s, &a.id, &id).await?;
    let decided = s.store.decide_approval(&a.id, &id, &input).await?;
    // A rejection with a reason, recorded now: the Change's one repair Task (or, when it had its
    // repair already, a person), from the trigger the decision recorded.
    if decided.recorded && decided.repair.is_some() {
        s.store.repair_after_rejection(&id, input.reason.as_deref()).await?;
    }
    let promotion = match input.decision {
        ApprovalDecision::Grant => Some(promote(&s, &k).await?),
        ApprovalDecision::Reject => None,
    };
    Ok(Json(DecisionView {
        approval: decided.approval,
        promotion,
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalsQuery {
    /// `requested` (what waits on a person), `granted`, `rejected` or `cancelled`.
    pub status: Option<String>,
    pub limit: Option<String>,
}

/// Approvals of the caller's projects, oldest first: by default what waits on a person, with the
/// reason and the tree to look at.
#[utoipa::path(get, path = "/v1/approvals", tag = "promotion", params(ApprovalsQuery),
    responses((status = 200, body = [ApprovalView]), (status = 422, body = ErrorBody)))]
pub async fn list(
    Caller(a): Caller,
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<ApprovalsQuery>,
) -> ApiResult<Json<Vec<ApprovalView>>> {
    let status = match q.status.as_deref() {
        None | Some("requested") => ApprovalStatus::Requested,
        Some("granted") => ApprovalStatus::Granted,
        Some("rejected") => ApprovalStatus::Rejected,
        Some("cancelled") => ApprovalStatus::Cancelled,
        Some(_) => {
            return Err(ApiError::invalid(
                "status",
                "must be requested, granted, rejected or cancelled",
            ));
        }
    };
    let limit = int_param("limit", q.limit.as_deref(), 100, 1, 1000)?;
    Ok(Json(s.store.list_approvals(&a.id, status, limit).await?))
}

/// Promotes a verified Candidate: the preconditions (every failed one reported at once as
/// `blocked`), the compare-and-swap on the canonical generation, the fast-forward of canonical
/// `main`, the source sync and the settling of older-base Candidates. A retry after success
/// answers `alreadyPromoted` and repairs what a crash left behind.
#[utoipa::path(post, path = "/v1/candidates/{id}/promote", tag = "promotion", params(("id" = String, Path)),
    responses((status = 200, body = PromotionOutcome), (status = 404, body = ErrorBody)))]
pub async fn promote_candidate(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<CandidateId>,
) -> ApiResult<Json<PromotionOutcome>> {
    let k = owned(&s, &a.id, &id).await?;
    Ok(Json(promote(&s, &k).await?))
}

/// Every promotion precondition of the Candidate with its state, read now from the rows and the
/// git service, so an operator can read why it has not promoted.
#[utoipa::path(get, path = "/v1/candidates/{id}/promotability", tag = "promotion", params(("id" = String, Path)),
    responses((status = 200, body = Promotability), (status = 404, body = ErrorBody)))]
pub async fn promotability(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<CandidateId>,
) -> ApiResult<Json<Promotability>> {
    owned(&s, &a.id, &id).await?;
    let r = s
        .store
        .promotion_rows(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("candidate {id} not found")))?;
    let in_fork = match (&s.git, &r.candidate.composed_commit, candidate_fork(&id)) {
        (Some(g), Some(commit), Ok(fork)) => belay_git::GitService::new(g.root.clone())
            .main_contains(&fork, commit)
            .await
            .unwrap_or(false),
        _ => false,
    };
    let facts = PromotionRowsFacts {
        candidate: r.candidate,
        risk_tier: r.risk_tier,
        evidence: r.evidence,
        approval: r.approval,
        active_policy: r.active_policy,
        canonical_generation: r.canonical_generation,
        sibling_pending: r.sibling_pending,
        promoted_generation: r.promotion.map(|p| p.generation),
    };
    Ok(Json(facts.promotability(in_fork)))
}
