//! Human approval: when a Candidate needs a person, the words that tell them why, and what a
//! person's decision counts for.
//!
//! A person is needed when the plan carries a human gate (a change to authorization, a tier the
//! policy gates, the acceptance hold) or, for a plan without one, when the active policy holds the
//! tier (it gates it, does not promote it automatically, or the Change has no tier). A grant counts
//! only for the exact composed tree the person saw, and the first decision is final. No model
//! decides any of this: these rules are the whole of it.

use crate::change::RiskTier;
use crate::ids::{AccountId, ApprovalId, CandidateId};
use crate::policy::ProjectPolicy;
use crate::validation::{ValidationError, check_object_id, check_text};
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// The sentence every approval reason ends with.
pub const APPROVE_OR_CANCEL: &str = "Approve to ship it or cancel the change.";

/// What put the gate on a Candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum GateTrigger {
    /// The policy: a gated tier, a change to authorization, or a policy hold.
    Policy,
    /// The acceptance check did not pass on the selected Candidate.
    Acceptance,
    /// Sibling selection could not pick a winner: a person picks one or cancels the Change.
    Selection,
    /// The Change had its one repair and still has no Candidate that can ship: a person cancels
    /// the Change (or approves a promotable Candidate, when one turns up).
    Repair,
}

/// A reason a person must approve a Candidate. `reason` is the sentence that says why, without
/// the closing "Approve to ship it or cancel the change." ([`approval_reason`] adds it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct HumanGate {
    pub trigger: GateTrigger,
    pub reason: String,
}

fn tier_changes(tier: RiskTier) -> String {
    format!("{}-risk changes", tier.as_str())
}

/// The gate a plan carries from the policy it was made under: the tier is gated, or a Task
/// changes authorization, or both. "Policy policy-1 requires a person to approve high-risk
/// changes."
pub fn plan_gate(policy: &ProjectPolicy, tier: Option<RiskTier>, authorization: bool) -> Option<HumanGate> {
    let mut what = Vec::new();
    if let Some(t) = tier.filter(|t| policy.gates(*t)) {
        what.push(tier_changes(t));
    }
    if authorization {
        what.push("changes to authorization".to_owned());
    }
    if what.is_empty() {
        return None;
    }
    Some(HumanGate {
        trigger: GateTrigger::Policy,
        reason: format!(
            "Policy {} requires a person to approve {}.",
            policy.id,
            what.join(" and ")
        ),
    })
}

/// The policy hold for a plan without a gate: the active policy gates the tier, does not list it
/// as automatic, or the Change has no tier.
pub fn policy_hold(active: &ProjectPolicy, tier: Option<RiskTier>) -> Option<HumanGate> {
    let reason = match tier {
        None => format!(
            "Policy {} requires a person to approve changes without a risk tier.",
            active.id
        ),
        Some(t) if active.gates(t) => format!("Policy {} requires a person to approve {}.", active.id, tier_changes(t)),
        Some(t) if !active.auto_promotes(t) => format!(
            "Policy {} does not promote {} automatically.",
            active.id,
            tier_changes(t)
        ),
        Some(_) => return None,
    };
    Some(HumanGate {
        trigger: GateTrigger::Policy,
        reason,
    })
}

/// The gates a Candidate must pass before it promotes: the plan's own, or, when the plan has
/// none, the active policy's hold. Empty: no person is needed.
pub fn approval_gates(plan_gates: &[HumanGate], active: &ProjectPolicy, tier: Option<RiskTier>) -> Vec<HumanGate> {
    if plan_gates.is_empty() {
        policy_hold(active, tier).into_iter().collect()
    } else {
        plan_gates.to_vec()
    }
}

/// The status reason and the `approval.requested` text: each gate's sentence, then
/// "Approve to ship it or cancel the change." `None` when there is no gate.
pub fn approval_reason(gates: &[HumanGate]) -> Option<String> {
    if gates.is_empty() {
        return None;
    }
    let mut parts: Vec<&str> = gates.iter().map(|g| g.reason.as_str()).collect();
    parts.dedup();
    Some(format!("{} {APPROVE_OR_CANCEL}", parts.join(" ")))
}

/// The closing sentence of a request no promotable Candidate answers.
pub const CANCEL_ONLY: &str = "No candidate can ship: cancel the change.";

/// The text of a Change's own request: why it waits, then what the person may do. A reason that
/// already offers a pick or the cancel (a selection no one won) is kept as it is.
pub fn change_request_reason(why: &str) -> String {
    let why = why.trim();
    if why.to_lowercase().contains("cancel the change") {
        why.to_owned()
    } else {
        format!("{why}\n{CANCEL_ONLY}")
    }
}

/// What a person decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    Grant,
    Reject,
}

/// `POST /v1/candidates/{id}/approvals`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalInput {
    pub decision: ApprovalDecision,
    /// The composed tree the person looked at.
    pub tree: String,
    /// Why; a rejection with a reason starts the repair Task.
    #[serde(default)]
    pub reason: Option<String>,
}

impl ApprovalInput {
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_object_id("tree", &self.tree, "tree")?;
        if let Some(r) = &self.reason {
            check_text("reason", r, 2000)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    Requested,
    Granted,
    Rejected,
    /// The Change was cancelled while the request waited: nothing waits on a person any more.
    Cancelled,
}

impl ApprovalStatus {
    pub const ALL: [ApprovalStatus; 4] = [
        ApprovalStatus::Requested,
        ApprovalStatus::Granted,
        ApprovalStatus::Rejected,
        ApprovalStatus::Cancelled,
    ];
}

/// What a person may do about a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ApprovalAction {
    /// Approve the promotable Candidate on its exact composed tree
    /// (`POST /v1/candidates/{candidateId}/approvals`).
    Approve,
    /// Cancel the Change (`POST /v1/changes/{changeId}/cancel`).
    Cancel,
}

/// An approval as stored: requested for one composed tree, then decided once. A request for a
/// Change that waits on a person with no promotable Candidate (a selection no one won, a repair
/// that fell short again) has no Candidate and no tree: the person may cancel the Change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    pub id: ApprovalId,
    pub candidate_id: Option<CandidateId>,
    pub status: ApprovalStatus,
    /// The composed tree the request is for.
    pub tree: Option<String>,
    pub trigger: GateTrigger,
    /// The text of `approval.requested`.
    pub reason: String,
    pub requested_at: i64,
    pub decided_at: Option<i64>,
    pub decided_by: Option<AccountId>,
    pub decision_reason: Option<String>,
}

/// One approval with what a person looks at: `GET /v1/approvals?status=requested`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ApprovalView {
    #[serde(flatten)]
    pub approval: Approval,
    pub change_id: String,
    pub project_id: String,
    /// The composed commit whose tree (`tree`) the request is for.
    pub composed_commit: Option<String>,
    /// What the person may do: approve the Candidate on its tree (a request for a promotable
    /// Candidate), and cancel the Change.
    pub actions: Vec<ApprovalAction>,
}

/// What a person may do about a request that waits: approve only a promotable (verified)
/// Candidate; cancel always.
pub fn approval_actions(candidate_verified: bool) -> Vec<ApprovalAction> {
    if candidate_verified {
        vec![ApprovalAction::Approve, ApprovalAction::Cancel]
    } else {
        vec![ApprovalAction::Cancel]
    }
}

/// Why a decision is not recorded (the API answers 409, naming it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum ApprovalRefusal {
    /// Nothing waits on a person for this Candidate.
    NotRequested,
    /// The Candidate was already decided the other way (or for another tree).
    AlreadyDecided { status: ApprovalStatus },
    /// The decision names a tree other than the composed tree the approval is for.
    OtherTree { tree: String },
}

/// What to do with a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalVerdict {
    /// Record it: the approval becomes `status`; a rejection also rejects the Candidate.
    Record {
        status: ApprovalStatus,
    },
    /// The same decision on the same tree again (a retry): answer the stored one, change nothing.
    Unchanged,
    Refused(ApprovalRefusal),
}

/// Applies the rules to a decision on the Candidate's approval row (`None`: none was requested).
pub fn decide(existing: Option<&Approval>, input: &ApprovalInput) -> ApprovalVerdict {
    let Some(a) = existing else {
        return ApprovalVerdict::Refused(ApprovalRefusal::NotRequested);
    };
    let wanted = match input.decision {
        ApprovalDecision::Grant => ApprovalStatus::Granted,
        ApprovalDecision::Reject => ApprovalStatus::Rejected,
    };
    let tree = a.tree.as_deref().unwrap_or_default();
    match a.status {
        ApprovalStatus::Cancelled => ApprovalVerdict::Refused(ApprovalRefusal::AlreadyDecided { status: a.status }),
        ApprovalStatus::Requested if input.tree != tree => {
            ApprovalVerdict::Refused(ApprovalRefusal::OtherTree { tree: tree.to_owned() })
        }
        ApprovalStatus::Requested => ApprovalVerdict::Record { status: wanted },
        done if done == wanted && input.tree == tree => ApprovalVerdict::Unchanged,
        done => ApprovalVerdict::Refused(ApprovalRefusal::AlreadyDecided { status: done }),
    }
}

/// Where a Candidate's approval stands, for the promotion preconditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    NotRequired,
    Granted,
    Pending,
    Rejected,
    /// A grant exists, but for a tree other than the one composed now.
    GrantedForAnotherTree,
}

impl ApprovalState {
    /// Whether promotion may go ahead as far as approval goes.
    pub fn allows(self) -> bool {
        matches!(self, ApprovalState::NotRequired | ApprovalState::Granted)
    }
}

/// Reads the approval against the composed tree. A rejection always blocks; a grant counts only
/// for `composed_tree`.
pub fn approval_state(required: bool, approval: Option<&Approval>, composed_tree: &str) -> ApprovalState {
    match approval.map(|a| (a.status, a.tree.as_deref() == Some(composed_tree))) {
        Some((ApprovalStatus::Rejected | ApprovalStatus::Cancelled, _)) => ApprovalState::Rejected,
        _ if !required => ApprovalState::NotRequired,
        Some((ApprovalStatus::Granted, true)) => ApprovalState::Granted,
        Some((ApprovalStatus::Granted, false)) => ApprovalState::GrantedForAnotherTree,
        Some((ApprovalStatus::Requested, _)) | None => ApprovalState::Pending,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::DEFAULT_POLICY;

    const TREE: &str = "0123456789abcdef0123456789abcdef01234567";
    const OTHER: &str = "fedcba9876543210fedcba9876543210fedcba98";

    #[test]
    fn a_high_risk_change_under_the_default_policy_reads_the_specs_text() {
        let gate = plan_gate(&DEFAULT_POLICY, Some(RiskTier::High), false).unwrap();
        assert_eq!(gate.trigger, GateTrigger::Policy);
        assert_eq!(
            approval_reason(&[gate]).unwrap(),
            "Policy policy-1 requires a person to approve high-risk changes. Approve to ship it or cancel the change."
        );
    }

    #[test]
    fn an_authorization_change_reads_changes_to_authorization() {
        let gate = plan_gate(&DEFAULT_POLICY, Some(RiskTier::Low), true).unwrap();
        assert_eq!(
            gate.reason,
            "Policy policy-1 requires a person to approve changes to authorization."
        );
        let both = plan_gate(&DEFAULT_POLICY, Some(RiskTier::Critical), true).unwrap();
        assert_eq!(
            both.reason,
            "Policy policy-1 requires a person to approve critical-risk changes and changes to authorization."
        );
        assert_eq!(plan_gate(&DEFAULT_POLICY, Some(RiskTier::Medium), false), None);
    }

    #[test]
    fn the_policy_hold_names_the_active_policy() {
        let mut p = DEFAULT_POLICY.next_version(&Default::default()).unwrap();
        assert_eq!(policy_hold(&p, Some(RiskTier::Low)), None);
        assert_eq!(
            policy_hold(&p, Some(RiskTier::High)).unwrap().reason,
            "Policy policy-2 requires a person to approve high-risk changes."
        );
        assert_eq!(
            policy_hold(&p, None).unwrap().reason,
            "Policy policy-2 requires a person to approve changes without a risk tier."
        );
        p.auto_promote_risk_tiers = vec![RiskTier::Low];
        assert_eq!(
            policy_hold(&p, Some(RiskTier::Medium)).unwrap().reason,
            "Policy policy-2 does not promote medium-risk changes automatically."
        );
    }

    #[test]
    fn the_plans_gates_come_before_the_policy_hold() {
        let acceptance = HumanGate {
            trigger: GateTrigger::Acceptance,
            reason: "Best candidate meets 2 of 3 criteria; not met: calendar view.".into(),
        };
        let gates = approval_gates(std::slice::from_ref(&acceptance), &DEFAULT_POLICY, Some(RiskTier::Low));
        assert_eq!(gates, [acceptance]);
        assert!(approval_gates(&[], &DEFAULT_POLICY, Some(RiskTier::Medium)).is_empty());
        assert_eq!(approval_gates(&[], &DEFAULT_POLICY, None).len(), 1);
        assert_eq!(
            approval_reason(&gates).unwrap(),
            "Best candidate meets 2 of 3 criteria; not met: calendar view. Approve to ship it or cancel the change."
        );
        assert_eq!(approval_reason(&[]), None);
    }

    #[test]
    fn a_changes_own_request_says_the_person_may_cancel_it() {
        assert_eq!(
            change_request_reason("The change already had its repair."),
            "The change already had its repair.\nNo candidate can ship: cancel the change."
        );
        let pick = "Candidates a, b rank equal. Pick one to ship or cancel the change.";
        assert_eq!(change_request_reason(pick), pick);
    }

    fn requested() -> Approval {
        Approval {
            id: ApprovalId::from_body("a1"),
            candidate_id: Some(CandidateId::from_body("c1")),
            status: ApprovalStatus::Requested,
            tree: Some(TREE.into()),
            trigger: GateTrigger::Policy,
            reason: "…".into(),
            requested_at: 10,
            decided_at: None,
            decided_by: None,
            decision_reason: None,
        }
    }

    fn input(decision: ApprovalDecision, tree: &str) -> ApprovalInput {
        ApprovalInput {
            decision,
            tree: tree.into(),
            reason: None,
        }
    }

    #[test]
    fn a_grant_counts_only_for_the_exact_composed_tree() {
        let a = requested();
        assert_eq!(
            decide(Some(&a), &input(ApprovalDecision::Grant, OTHER)),
            ApprovalVerdict::Refused(ApprovalRefusal::OtherTree { tree: TREE.into() })
        );
        assert_eq!(
            decide(Some(&a), &input(ApprovalDecision::Grant, TREE)),
            ApprovalVerdict::Record {
                status: ApprovalStatus::Granted
            }
        );
        let granted = Approval {
            status: ApprovalStatus::Granted,
            ..a
        };
        assert_eq!(approval_state(true, Some(&granted), TREE), ApprovalState::Granted);
        assert_eq!(
            approval_state(true, Some(&granted), OTHER),
            ApprovalState::GrantedForAnotherTree
        );
    }

    #[test]
    fn the_first_decision_is_final() {
        let rejected = Approval {
            status: ApprovalStatus::Rejected,
            ..requested()
        };
        assert_eq!(
            decide(Some(&rejected), &input(ApprovalDecision::Grant, TREE)),
            ApprovalVerdict::Refused(ApprovalRefusal::AlreadyDecided {
                status: ApprovalStatus::Rejected
            })
        );
        assert_eq!(
            decide(Some(&rejected), &input(ApprovalDecision::Reject, TREE)),
            ApprovalVerdict::Unchanged
        );
        assert_eq!(
            decide(None, &input(ApprovalDecision::Grant, TREE)),
            ApprovalVerdict::Refused(ApprovalRefusal::NotRequested)
        );
    }

    #[test]
    fn a_rejection_blocks_even_where_no_approval_is_required() {
        let rejected = Approval {
            status: ApprovalStatus::Rejected,
            ..requested()
        };
        assert_eq!(approval_state(false, Some(&rejected), TREE), ApprovalState::Rejected);
        assert_eq!(approval_state(false, None, TREE), ApprovalState::NotRequired);
        assert_eq!(approval_state(true, None, TREE), ApprovalState::Pending);
        assert_eq!(approval_state(true, Some(&requested()), TREE), ApprovalState::Pending);
        assert!(!ApprovalState::Pending.allows() && ApprovalState::NotRequired.allows());
    }

    #[test]
    fn a_decision_names_a_tree_and_a_short_reason() {
        assert_eq!(
            input(ApprovalDecision::Grant, "abc").validate().unwrap_err().field,
            "tree"
        );
        let long = ApprovalInput {
            reason: Some("x".repeat(2001)),
            ..input(ApprovalDecision::Reject, TREE)
        };
        assert_eq!(long.validate().unwrap_err().field, "reason");
        let parsed: ApprovalInput = serde_json::from_str(&format!(
            r#"{{"decision":"reject","tree":"{TREE}","reason":"wrong colour"}}"#
        ))
        .unwrap();
        assert!(parsed.validate().is_ok());
        assert!(serde_json::from_str::<ApprovalInput>(&format!(r#"{{"decision":"maybe","tree":"{TREE}"}}"#)).is_err());
    }
}
