//! What a person may do on a Candidate's page, given its state: the one rule the API answers in
//! the Candidate read (`gestures`) so that no client decides it again.
//!
//! A gesture is offered only when it can have an effect. A decision needs an approval that waits
//! on a person for the tree composed now (`approval::decide` refuses any other); promotion needs a
//! verified Candidate that no person has to look at first, or one a person granted. A rejected,
//! stale or promoted Candidate is final: nothing is offered on it. A Candidate still composing or
//! verifying has nothing to decide yet.

use crate::approval::{Approval, ApprovalStatus};
use crate::candidate::CandidateStatus;
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Gesture {
    /// Grant the approval on the composed tree (`POST /v1/candidates/{id}/approvals`, `grant`).
    Approve,
    /// Reject it (`decision: reject`), which also rejects the Candidate.
    Reject,
    /// Promote it (`POST /v1/candidates/{id}/promote`).
    Promote,
}

/// The gestures that apply to a Candidate in `status`, composed as `composed_tree`, with its
/// approval row (`None`: none was requested), in the order a page shows them.
pub fn candidate_gestures(
    status: CandidateStatus,
    composed_tree: Option<&str>,
    approval: Option<&Approval>,
) -> Vec<Gesture> {
    if status != CandidateStatus::Verified {
        return Vec::new();
    }
    let Some(tree) = composed_tree else {
        return Vec::new();
    };
    match approval {
        // Nothing waits on a person: promotion decides the rest (and asks a person when the
        // policy holds the Candidate).
        None => vec![Gesture::Promote],
        Some(a) => {
            let this_tree = a.tree.as_deref() == Some(tree);
            match a.status {
                ApprovalStatus::Requested if this_tree => vec![Gesture::Approve, Gesture::Reject],
                // A grant promotes at once; promoting again is the retry after a promotion that
                // did not finish (a crash, a lost race that left it verified).
                ApprovalStatus::Granted if this_tree => vec![Gesture::Promote],
                // A request or a grant for another tree, a rejection, a cancelled Change: a person
                // has nothing to decide here and promotion would be refused.
                _ => Vec::new(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::GateTrigger;
    use crate::ids::ApprovalId;
    use Gesture::*;

    const TREE: &str = "0123456789abcdef0123456789abcdef01234567";
    const OTHER: &str = "fedcba9876543210fedcba9876543210fedcba98";

    fn approval(status: ApprovalStatus, tree: &str) -> Approval {
        Approval {
            id: ApprovalId::from_body("a1"),
            candidate_id: None,
            status,
            tree: Some(tree.into()),
            trigger: GateTrigger::Policy,
            reason: "Policy policy-1 requires a person to approve high-risk changes.".into(),
            requested_at: 0,
            decided_at: None,
            decided_by: None,
            decision_reason: None,
        }
    }

    #[test]
    fn a_rejected_stale_or_promoted_candidate_offers_nothing_whatever_its_approval() {
        for status in [
            CandidateStatus::Rejected,
            CandidateStatus::Stale,
            CandidateStatus::Promoted,
        ] {
            for a in [
                None,
                Some(approval(ApprovalStatus::Requested, TREE)),
                Some(approval(ApprovalStatus::Granted, TREE)),
            ] {
                assert_eq!(
                    candidate_gestures(status, Some(TREE), a.as_ref()),
                    vec![],
                    "{status:?} {a:?}"
                );
            }
        }
    }

    #[test]
    fn a_candidate_still_composing_or_verifying_offers_nothing() {
        for status in [CandidateStatus::Composing, CandidateStatus::Verifying] {
            assert_eq!(candidate_gestures(status, Some(TREE), None), vec![]);
            assert_eq!(candidate_gestures(status, None, None), vec![]);
        }
    }

    #[test]
    fn a_verified_candidate_waiting_on_a_person_offers_approve_and_reject_but_not_promote() {
        let a = approval(ApprovalStatus::Requested, TREE);
        assert_eq!(
            candidate_gestures(CandidateStatus::Verified, Some(TREE), Some(&a)),
            vec![Approve, Reject]
        );
    }

    #[test]
    fn a_verified_candidate_no_person_holds_offers_promote_only() {
        assert_eq!(
            candidate_gestures(CandidateStatus::Verified, Some(TREE), None),
            vec![Promote]
        );
        let granted = approval(ApprovalStatus::Granted, TREE);
        assert_eq!(
            candidate_gestures(CandidateStatus::Verified, Some(TREE), Some(&granted)),
            vec![Promote]
        );
    }

    #[test]
    fn an_approval_for_another_tree_a_rejection_or_a_cancelled_change_offers_nothing() {
        for a in [
            approval(ApprovalStatus::Requested, OTHER),
            approval(ApprovalStatus::Granted, OTHER),
            approval(ApprovalStatus::Rejected, TREE),
            approval(ApprovalStatus::Cancelled, TREE),
        ] {
            assert_eq!(
                candidate_gestures(CandidateStatus::Verified, Some(TREE), Some(&a)),
                vec![],
                "{a:?}"
            );
        }
    }

    #[test]
    fn a_verified_candidate_without_a_composed_tree_offers_nothing() {
        assert_eq!(candidate_gestures(CandidateStatus::Verified, None, None), vec![]);
    }

    /// Every gesture offered is one the decision rule or promotion would act on.
    #[test]
    fn every_offered_decision_is_one_the_approval_rule_records() {
        use crate::approval::{ApprovalDecision, ApprovalInput, ApprovalVerdict, decide};
        for status in ApprovalStatus::ALL {
            for tree in [TREE, OTHER] {
                let a = approval(status, tree);
                let offered = candidate_gestures(CandidateStatus::Verified, Some(TREE), Some(&a));
                for (g, decision) in [(Approve, ApprovalDecision::Grant), (Reject, ApprovalDecision::Reject)] {
                    let input = ApprovalInput {
                        decision,
                        tree: TREE.into(),
                        reason: None,
                    };
                    let recorded = matches!(decide(Some(&a), &input), ApprovalVerdict::Record { .. });
                    assert_eq!(offered.contains(&g), recorded, "{status:?} {tree} {g:?}");
                }
            }
        }
    }
}
