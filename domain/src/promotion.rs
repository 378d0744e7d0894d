//! Promotion: the preconditions a Candidate must meet before canonical `main` moves to its
//! composed commit, the compare-and-swap on the canonical generation, and what a promotion does to
//! the project's other Candidates.
//!
//! Preconditions are checked from plain facts read from the authoritative rows and the git
//! service, and every failed one is reported at once, so an operator sees the whole list. The
//! compare-and-swap outcome is a value (`Promoted`, `AlreadyPromoted`, `Stale`, `Blocked`): the
//! store runs it as one conditional update and a retry reads the same answer.

use crate::acceptance::AcceptanceOutcome;
use crate::approval::{Approval, ApprovalState, HumanGate, approval_gates, approval_reason, approval_state};
use crate::candidate::{CandidateStatus, stale_reason};
use crate::change::{ChangeStatus, RiskTier};
use crate::evidence::{Evidence, Gap, gate_required_checks};
use crate::ids::{CandidateId, ChangeId, ChangeSetId};
use crate::plan::VerificationPlan;
use crate::policy::{PolicyStamp, ProjectPolicy};
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// The promotion workflow id and idempotency key: `promote-{cand}-g{expected_generation}`.
pub fn promotion_workflow_id(candidate: &CandidateId, expected_generation: i64) -> String {
    format!("promote-{candidate}-g{expected_generation}")
}

/// One thing that stops a promotion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum Block {
    /// A sibling still composes or verifies.
    SelectionPending,
    NotVerified {
        status: CandidateStatus,
    },
    /// The base is behind canonical: mark the Candidate stale, then recompose.
    Stale {
        reason: String,
    },
    NoPlan,
    RequiredChecks {
        gaps: Vec<Gap>,
    },
    ApprovalPending {
        reason: String,
    },
    ApprovalRejected,
    /// A grant exists, for another tree than the composed one.
    ApprovalForAnotherTree,
    PolicyChanged {
        plan: PolicyStamp,
        active: PolicyStamp,
    },
    ComposedCommitMissing,
}

/// The preconditions, in the order the flowchart checks them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Precondition {
    NoSiblingVerifying,
    CandidateVerified,
    BaseIsCanonical,
    RequiredChecksSatisfied,
    ApprovalGrantedOrNotRequired,
    PlanPolicyIsActive,
    ComposedCommitInFork,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PreconditionState {
    pub precondition: Precondition,
    pub satisfied: bool,
    /// What was found ("verified", "2 gaps", "granted for this tree", …).
    pub detail: String,
}

/// `GET /v1/candidates/{id}/promotability`: every precondition with its state, and the blocks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Promotability {
    pub preconditions: Vec<PreconditionState>,
    pub blocks: Vec<Block>,
    /// The gates a person must pass (empty: no approval needed).
    pub approval_gates: Vec<HumanGate>,
}

impl Promotability {
    pub fn promotable(&self) -> bool {
        self.blocks.is_empty()
    }

    /// The base fell behind: the caller marks the Candidate stale.
    pub fn stale(&self) -> bool {
        self.blocks.iter().any(|b| matches!(b, Block::Stale { .. }))
    }
}

/// The facts promotion reads, as of now.
#[derive(Debug, Clone, Copy)]
pub struct PromotionFacts<'a> {
    pub status: CandidateStatus,
    /// A sibling on the same base still composes or verifies.
    pub sibling_pending: bool,
    pub base_generation: i64,
    pub canonical_generation: i64,
    pub plan: Option<&'a VerificationPlan>,
    pub evidence: &'a [Evidence],
    /// The Change's risk tier.
    pub risk_tier: Option<RiskTier>,
    /// The Candidate's approval row, if one was requested.
    pub approval: Option<&'a Approval>,
    pub composed_tree: Option<&'a str>,
    /// The policy active for the project now.
    pub active_policy: &'a ProjectPolicy,
    /// The git service has the composed commit in the Candidate fork.
    pub composed_commit_in_fork: bool,
}

/// Checks every precondition and reports each failed one.
pub fn promotability(f: &PromotionFacts<'_>) -> Promotability {
    let mut states = Vec::new();
    let mut blocks = Vec::new();
    let mut state = |p: Precondition, ok: bool, detail: String, block: Option<Block>| {
        states.push(PreconditionState {
            precondition: p,
            satisfied: ok,
            detail,
        });
        if let (false, Some(b)) = (ok, block) {
            blocks.push(b);
        }
    };

    state(
        Precondition::NoSiblingVerifying,
        !f.sibling_pending,
        if f.sibling_pending {
            "a sibling still composes or verifies"
        } else {
            "no sibling pending"
        }
        .into(),
        Some(Block::SelectionPending),
    );
    state(
        Precondition::CandidateVerified,
        f.status == CandidateStatus::Verified,
        f.status.as_str().into(),
        Some(Block::NotVerified { status: f.status }),
    );
    // A base ahead of canonical cannot be promoted either; stale is the safe end for it too.
    state(
        Precondition::BaseIsCanonical,
        f.base_generation == f.canonical_generation,
        format!(
            "base generation {}, canonical generation {}",
            f.base_generation, f.canonical_generation
        ),
        Some(Block::Stale {
            reason: stale_reason(f.base_generation, f.canonical_generation),
        }),
    );
    match f.plan {
        None => state(
            Precondition::RequiredChecksSatisfied,
            false,
            "no plan".into(),
            Some(Block::NoPlan),
        ),
        Some(plan) => {
            let gate = gate_required_checks(plan, f.evidence);
            let ok = gate.promotable();
            state(
                Precondition::RequiredChecksSatisfied,
                ok,
                gate.rejection_reason()
                    .unwrap_or_else(|| format!("{} required checks satisfied", gate.satisfied.len())),
                Some(Block::RequiredChecks { gaps: gate.gaps }),
            );
        }
    }
    let gates = approval_gates(
        f.plan.map_or(&[][..], |p| p.human_gates.as_slice()),
        f.active_policy,
        f.risk_tier,
    );
    let approval = approval_state(!gates.is_empty(), f.approval, f.composed_tree.unwrap_or_default());
    let pending_reason = approval_reason(&gates).unwrap_or_default();
    state(
        Precondition::ApprovalGrantedOrNotRequired,
        approval.allows(),
        match approval {
            ApprovalState::NotRequired => "not required".into(),
            ApprovalState::Granted => "granted for this composed tree".into(),
            ApprovalState::Pending => format!("waiting for a person: {pending_reason}"),
            ApprovalState::Rejected => "rejected".into(),
            ApprovalState::GrantedForAnotherTree => "granted for another tree".into(),
        },
        Some(match approval {
            ApprovalState::Rejected => Block::ApprovalRejected,
            ApprovalState::GrantedForAnotherTree => Block::ApprovalForAnotherTree,
            _ => Block::ApprovalPending {
                reason: pending_reason.clone(),
            },
        }),
    );
    let active = f.active_policy.stamp();
    match f.plan {
        Some(plan) => state(
            Precondition::PlanPolicyIsActive,
            plan.policy == active,
            format!(
                "plan {} version {}, active {} version {}",
                plan.policy.policy_id, plan.policy.policy_version, active.policy_id, active.policy_version
            ),
            Some(Block::PolicyChanged {
                plan: plan.policy.clone(),
                active: active.clone(),
            }),
        ),
        None => state(Precondition::PlanPolicyIsActive, false, "no plan".into(), None),
    }
    state(
        Precondition::ComposedCommitInFork,
        f.composed_commit_in_fork,
        if f.composed_commit_in_fork {
            "present"
        } else {
            "missing from the candidate fork"
        }
        .into(),
        Some(Block::ComposedCommitMissing),
    );
    Promotability {
        preconditions: states,
        blocks,
        approval_gates: gates,
    }
}

/// Whether a selected winner promotes without a person: its tier is one the active policy
/// promotes automatically (and does not gate), its plan carries no human gate, and its acceptance
/// passed or was not planned.
pub fn auto_promote_eligible(
    plan: &VerificationPlan,
    active_policy: &ProjectPolicy,
    risk_tier: Option<RiskTier>,
    acceptance: Option<&AcceptanceOutcome>,
) -> bool {
    auto_promotes(
        plan,
        active_policy,
        risk_tier,
        acceptance.is_some_and(AcceptanceOutcome::passed),
    )
}

/// [`auto_promote_eligible`] from whether the acceptance Evidence passed (`pass` with
/// `checked_supported`), as the promotion path reads it from the rows.
pub fn auto_promotes(
    plan: &VerificationPlan,
    active_policy: &ProjectPolicy,
    risk_tier: Option<RiskTier>,
    acceptance_passed: bool,
) -> bool {
    let tier_ok = risk_tier.is_some_and(|t| active_policy.auto_promotes(t));
    let acceptance_ok = !plan.has_acceptance() || acceptance_passed;
    tier_ok && plan.human_gates.is_empty() && acceptance_ok
}

/// The gate reason when acceptance holds a winner and no acceptance outcome is at hand (the
/// selection's acceptance hold words it from the per-criterion results when there is one).
pub const ACCEPTANCE_NOT_PASSED: &str = "The acceptance check has not passed.";

/// What happens to a verified winner next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(tag = "step", rename_all = "camelCase")]
pub enum WinnerStep {
    /// The policy lets it through: promote now.
    AutoPromote,
    /// A person must approve: the Change goes to `awaiting_approval`, the gates join the plan,
    /// and `reason` is the status reason and the text of `approval.requested`.
    AwaitApproval { gates: Vec<HumanGate>, reason: String },
}

/// The winner's next step: auto-promote when its tier is automatic under the active policy, its
/// plan carries no human gate and acceptance passed or was not planned; otherwise the plan's gate,
/// the policy hold, or the acceptance hold, with the spec's texts.
pub fn winner_step(
    plan: &VerificationPlan,
    active_policy: &ProjectPolicy,
    risk_tier: Option<RiskTier>,
    acceptance_passed: bool,
) -> WinnerStep {
    if auto_promotes(plan, active_policy, risk_tier, acceptance_passed) {
        return WinnerStep::AutoPromote;
    }
    let mut gates = approval_gates(&plan.human_gates, active_policy, risk_tier);
    if gates.is_empty() {
        // An automatic tier with no gate: only acceptance holds it.
        gates.push(HumanGate {
            trigger: crate::approval::GateTrigger::Acceptance,
            reason: ACCEPTANCE_NOT_PASSED.into(),
        });
    }
    let reason = approval_reason(&gates).unwrap_or_default();
    WinnerStep::AwaitApproval { gates, reason }
}

/// What the compare-and-swap compares, read in the promotion's transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CasFacts {
    pub expected_generation: i64,
    pub expected_tree: String,
    pub plan_policy: PolicyStamp,
    pub current_generation: i64,
    pub current_tree: String,
    pub active_policy: PolicyStamp,
    /// The Candidate is already `promoted` (a retry after success).
    pub already_promoted: bool,
}

/// The outcome of a promotion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub enum PromotionOutcome {
    /// Canonical advanced to `generation`.
    Promoted {
        generation: i64,
    },
    /// A retry after success: repair the mirror and the source sync, change nothing else.
    AlreadyPromoted,
    /// Canonical moved on: the Candidate becomes `stale`.
    Stale {
        reason: String,
    },
    Blocked {
        blocks: Vec<Block>,
    },
}

/// The compare-and-swap: already promoted → `AlreadyPromoted`; generation or tree moved →
/// `Stale`; policy changed → `Blocked`; otherwise generation + 1.
pub fn compare_and_swap(f: &CasFacts) -> PromotionOutcome {
    if f.already_promoted {
        return PromotionOutcome::AlreadyPromoted;
    }
    if f.current_generation != f.expected_generation || f.current_tree != f.expected_tree {
        return PromotionOutcome::Stale {
            reason: if f.current_generation != f.expected_generation {
                format!(
                    "Canonical moved to generation {} while generation {} was expected.",
                    f.current_generation, f.expected_generation
                )
            } else {
                "The canonical tree is not the one this candidate was composed on.".into()
            },
        };
    }
    if f.plan_policy != f.active_policy {
        return PromotionOutcome::Blocked {
            blocks: vec![Block::PolicyChanged {
                plan: f.plan_policy.clone(),
                active: f.active_policy.clone(),
            }],
        };
    }
    PromotionOutcome::Promoted {
        generation: f.expected_generation + 1,
    }
}

/// One Candidate of the project, as the settle after a promotion reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectCandidate {
    pub id: CandidateId,
    pub change_id: ChangeId,
    pub change_status: ChangeStatus,
    pub base_generation: i64,
    pub status: CandidateStatus,
    pub change_set_ids: Vec<ChangeSetId>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OlderBaseSettlement {
    /// Candidates on an older generation that become `stale`, with the reason.
    pub stale: Vec<(CandidateId, String)>,
    /// New Candidates to compose on the new base: the Change and the same ChangeSets, for a
    /// Change still verifying or awaiting approval. Each is recorded on the stale one it replaces.
    pub recompose: Vec<(CandidateId, ChangeId, Vec<ChangeSetId>)>,
}

/// After a promotion to `new_generation`: every open Candidate on an older generation becomes
/// `stale` and stays so; a Change still verifying or awaiting approval gets a new Candidate of
/// the same ChangeSets on the new base (one per distinct set).
pub fn settle_older_base(candidates: &[ProjectCandidate], new_generation: i64) -> OlderBaseSettlement {
    let mut out = OlderBaseSettlement::default();
    for c in candidates {
        if c.base_generation >= new_generation || c.status.is_final() {
            continue;
        }
        out.stale
            .push((c.id.clone(), stale_reason(c.base_generation, new_generation)));
        let live = matches!(
            c.change_status,
            ChangeStatus::Verifying | ChangeStatus::AwaitingApproval
        );
        let dup = out
            .recompose
            .iter()
            .any(|(_, ch, sets)| ch == &c.change_id && sets == &c.change_set_ids);
        if live && !dup {
            out.recompose
                .push((c.id.clone(), c.change_id.clone(), c.change_set_ids.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acceptance::{AcceptanceRun, acceptance_outcome};
    use crate::approval::{ApprovalStatus, GateTrigger};
    use crate::check::CheckId;
    use crate::evidence::{Coverage, EvidenceStatus};
    use crate::ids::{ApprovalId, EvidenceId};
    use crate::plan::PlannedCheck;
    use crate::policy::DEFAULT_POLICY;

    const TREE: &str = "0123456789abcdef0123456789abcdef01234567";

    fn plan(gates: Vec<HumanGate>) -> VerificationPlan {
        VerificationPlan {
            policy: DEFAULT_POLICY.stamp(),
            risk_tier: Some(RiskTier::Low),
            checks: vec![PlannedCheck {
                check_id: CheckId::Build,
                kind: CheckId::Build.kind(),
                required: true,
                timeout_ms: 120_000,
                limit: None,
                procedure: None,
                reasons: vec![],
            }],
            protected_invariants: vec![],
            human_gates: gates,
        }
    }

    fn build_pass() -> Evidence {
        Evidence {
            id: EvidenceId::from_body("1"),
            candidate_id: CandidateId::from_body("c"),
            check_id: CheckId::Build,
            kind: CheckId::Build.kind(),
            attempt: 1,
            status: EvidenceStatus::Pass,
            coverage: Coverage::CheckedSupported,
            summary: "ok (runner: sandbox)".into(),
            metric: None,
            duration_ms: 10,
            started_at: 1,
            completed_at: 2,
        }
    }

    fn facts<'a>(plan: &'a VerificationPlan, evidence: &'a [Evidence]) -> PromotionFacts<'a> {
        PromotionFacts {
            status: CandidateStatus::Verified,
            sibling_pending: false,
            base_generation: 3,
            canonical_generation: 3,
            plan: Some(plan),
            evidence,
            risk_tier: Some(RiskTier::Low),
            approval: None,
            composed_tree: Some(TREE),
            active_policy: &DEFAULT_POLICY,
            composed_commit_in_fork: true,
        }
    }

    #[test]
    fn a_verified_low_risk_candidate_with_every_check_passed_is_promotable() {
        let (p, e) = (plan(vec![]), [build_pass()]);
        let out = promotability(&facts(&p, &e));
        assert!(out.promotable(), "{out:?}");
        assert_eq!(out.preconditions.len(), 7);
        assert!(out.preconditions.iter().all(|s| s.satisfied));
        assert!(out.approval_gates.is_empty());
    }

    #[test]
    fn every_failed_precondition_is_reported_at_once() {
        let p = plan(vec![]);
        let mut other = DEFAULT_POLICY.next_version(&Default::default()).unwrap();
        other.auto_promote_risk_tiers = vec![RiskTier::Low, RiskTier::Medium];
        let f = PromotionFacts {
            sibling_pending: true,
            status: CandidateStatus::Verifying,
            active_policy: &other,
            composed_commit_in_fork: false,
            ..facts(&p, &[])
        };
        let blocks = promotability(&f).blocks;
        let codes: Vec<String> = blocks
            .iter()
            .map(|b| serde_json::to_value(b).unwrap()["code"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            codes,
            [
                "selection_pending",
                "not_verified",
                "required_checks",
                "policy_changed",
                "composed_commit_missing"
            ]
        );
    }

    #[test]
    fn a_base_behind_canonical_is_stale() {
        let (p, e) = (plan(vec![]), [build_pass()]);
        let out = promotability(&PromotionFacts {
            base_generation: 2,
            ..facts(&p, &e)
        });
        assert!(out.stale());
        assert_eq!(
            out.blocks,
            [Block::Stale {
                reason: "Base generation 2 is behind canonical generation 3.".into()
            }]
        );
    }

    #[test]
    fn a_missing_plan_blocks() {
        let out = promotability(&PromotionFacts {
            plan: None,
            ..facts(&plan(vec![]), &[])
        });
        assert!(out.blocks.contains(&Block::NoPlan));
    }

    fn approval(status: ApprovalStatus, tree: &str) -> Approval {
        Approval {
            id: ApprovalId::from_body("1"),
            candidate_id: Some(CandidateId::from_body("c")),
            status,
            tree: Some(tree.into()),
            trigger: GateTrigger::Policy,
            reason: "r".into(),
            requested_at: 1,
            decided_at: Some(2),
            decided_by: None,
            decision_reason: None,
        }
    }

    #[test]
    fn a_high_risk_candidate_waits_for_a_grant_on_this_exact_tree() {
        let gate = crate::approval::plan_gate(&DEFAULT_POLICY, Some(RiskTier::High), false).unwrap();
        let (p, e) = (plan(vec![gate]), [build_pass()]);
        let base = PromotionFacts {
            risk_tier: Some(RiskTier::High),
            ..facts(&p, &e)
        };
        assert_eq!(
            promotability(&base).blocks,
            [Block::ApprovalPending {
                reason: "Policy policy-1 requires a person to approve high-risk changes. Approve to ship it or cancel the change."
                    .into()
            }]
        );
        let granted = approval(ApprovalStatus::Granted, TREE);
        assert!(
            promotability(&PromotionFacts {
                approval: Some(&granted),
                ..base
            })
            .promotable()
        );
        let elsewhere = approval(ApprovalStatus::Granted, &"f".repeat(40));
        assert_eq!(
            promotability(&PromotionFacts {
                approval: Some(&elsewhere),
                ..base
            })
            .blocks,
            [Block::ApprovalForAnotherTree]
        );
        let rejected = approval(ApprovalStatus::Rejected, TREE);
        assert_eq!(
            promotability(&PromotionFacts {
                approval: Some(&rejected),
                ..base
            })
            .blocks,
            [Block::ApprovalRejected]
        );
    }

    #[test]
    fn a_plan_without_a_gate_is_held_when_the_active_policy_gates_the_tier_or_the_change_has_none() {
        let (p, e) = (plan(vec![]), [build_pass()]);
        for tier in [Some(RiskTier::Critical), None] {
            let out = promotability(&PromotionFacts {
                risk_tier: tier,
                ..facts(&p, &e)
            });
            assert!(matches!(out.blocks[..], [Block::ApprovalPending { .. }]), "{tier:?}");
            assert_eq!(out.approval_gates.len(), 1);
        }
    }

    #[test]
    fn a_winner_auto_promotes_only_on_an_automatic_tier_without_a_gate_and_with_acceptance_passing() {
        let p = plan(vec![]);
        assert!(auto_promote_eligible(&p, &DEFAULT_POLICY, Some(RiskTier::Medium), None));
        assert!(!auto_promote_eligible(&p, &DEFAULT_POLICY, Some(RiskTier::High), None));
        assert!(!auto_promote_eligible(&p, &DEFAULT_POLICY, None, None));
        let gated = plan(vec![HumanGate {
            trigger: GateTrigger::Acceptance,
            reason: "x".into(),
        }]);
        assert!(!auto_promote_eligible(
            &gated,
            &DEFAULT_POLICY,
            Some(RiskTier::Low),
            None
        ));
        let mut with_acceptance = plan(vec![]);
        with_acceptance.checks.push(PlannedCheck {
            check_id: CheckId::Acceptance,
            kind: CheckId::Acceptance.kind(),
            required: false,
            timeout_ms: 180_000,
            limit: None,
            procedure: None,
            reasons: vec![],
        });
        let failed = acceptance_outcome(&AcceptanceRun::ModelError("x".into()));
        assert!(!auto_promote_eligible(
            &with_acceptance,
            &DEFAULT_POLICY,
            Some(RiskTier::Low),
            Some(&failed)
        ));
        assert!(!auto_promote_eligible(
            &with_acceptance,
            &DEFAULT_POLICY,
            Some(RiskTier::Low),
            None
        ));
        let passed = acceptance_outcome(&AcceptanceRun::Judged(vec![]));
        assert!(auto_promote_eligible(
            &with_acceptance,
            &DEFAULT_POLICY,
            Some(RiskTier::Low),
            Some(&passed)
        ));
    }

    #[test]
    fn a_winner_auto_promotes_or_waits_for_a_person_with_the_specs_reason() {
        let p = plan(vec![]);
        assert_eq!(
            winner_step(&p, &DEFAULT_POLICY, Some(RiskTier::Low), false),
            WinnerStep::AutoPromote
        );
        let gate = crate::approval::plan_gate(&DEFAULT_POLICY, Some(RiskTier::High), false).unwrap();
        let high = plan(vec![gate.clone()]);
        assert_eq!(
            winner_step(&high, &DEFAULT_POLICY, Some(RiskTier::High), false),
            WinnerStep::AwaitApproval {
                gates: vec![gate],
                reason: "Policy policy-1 requires a person to approve high-risk changes. Approve to ship it or cancel the change."
                    .into()
            }
        );
        let WinnerStep::AwaitApproval { reason, gates } = winner_step(&p, &DEFAULT_POLICY, None, false) else {
            panic!("a Change without a tier is held");
        };
        assert_eq!(gates.len(), 1);
        assert_eq!(
            reason,
            "Policy policy-1 requires a person to approve changes without a risk tier. Approve to ship it or cancel the change."
        );
        let mut with_acceptance = plan(vec![]);
        with_acceptance.checks.push(PlannedCheck {
            check_id: CheckId::Acceptance,
            kind: CheckId::Acceptance.kind(),
            required: false,
            timeout_ms: 180_000,
            limit: None,
            procedure: None,
            reasons: vec![],
        });
        let WinnerStep::AwaitApproval { gates, .. } =
            winner_step(&with_acceptance, &DEFAULT_POLICY, Some(RiskTier::Low), false)
        else {
            panic!("acceptance not passed holds the winner");
        };
        assert_eq!(gates[0].trigger, GateTrigger::Acceptance);
        assert_eq!(
            winner_step(&with_acceptance, &DEFAULT_POLICY, Some(RiskTier::Low), true),
            WinnerStep::AutoPromote
        );
    }

    fn cas() -> CasFacts {
        CasFacts {
            expected_generation: 4,
            expected_tree: "t4".into(),
            plan_policy: DEFAULT_POLICY.stamp(),
            current_generation: 4,
            current_tree: "t4".into(),
            active_policy: DEFAULT_POLICY.stamp(),
            already_promoted: false,
        }
    }

    #[test]
    fn the_compare_and_swap_advances_one_generation_or_says_why_not() {
        assert_eq!(compare_and_swap(&cas()), PromotionOutcome::Promoted { generation: 5 });
        assert_eq!(
            compare_and_swap(&CasFacts {
                already_promoted: true,
                current_generation: 5,
                ..cas()
            }),
            PromotionOutcome::AlreadyPromoted
        );
        assert!(matches!(
            compare_and_swap(&CasFacts {
                current_generation: 5,
                ..cas()
            }),
            PromotionOutcome::Stale { .. }
        ));
        assert!(matches!(
            compare_and_swap(&CasFacts {
                current_tree: "other".into(),
                ..cas()
            }),
            PromotionOutcome::Stale { .. }
        ));
        let p2 = DEFAULT_POLICY.next_version(&Default::default()).unwrap().stamp();
        assert!(matches!(
            compare_and_swap(&CasFacts {
                active_policy: p2,
                ..cas()
            }),
            PromotionOutcome::Blocked { .. }
        ));
        assert_eq!(
            serde_json::to_value(PromotionOutcome::AlreadyPromoted).unwrap()["outcome"],
            "alreadyPromoted"
        );
    }

    #[test]
    fn the_idempotency_key_is_the_candidate_and_the_expected_generation() {
        assert_eq!(
            promotion_workflow_id(&CandidateId::from_body("ab"), 7),
            "promote-cand_ab-g7"
        );
    }

    fn pc(
        id: &str,
        change: &str,
        change_status: ChangeStatus,
        base: i64,
        status: CandidateStatus,
        sets: &[&str],
    ) -> ProjectCandidate {
        ProjectCandidate {
            id: CandidateId::from_body(id),
            change_id: ChangeId::from_body(change),
            change_status,
            base_generation: base,
            status,
            change_set_ids: sets.iter().map(|s| ChangeSetId(s.to_string())).collect(),
        }
    }

    #[test]
    fn older_base_candidates_go_stale_and_live_changes_are_recomposed_on_the_new_base() {
        let all = [
            pc(
                "a",
                "1",
                ChangeStatus::Verifying,
                4,
                CandidateStatus::Verifying,
                &["cs_1"],
            ),
            pc(
                "b",
                "1",
                ChangeStatus::Verifying,
                4,
                CandidateStatus::Verified,
                &["cs_1", "cs_2"],
            ),
            pc("c", "2", ChangeStatus::Failed, 4, CandidateStatus::Verified, &["cs_3"]),
            pc(
                "d",
                "3",
                ChangeStatus::AwaitingApproval,
                4,
                CandidateStatus::Rejected,
                &["cs_4"],
            ),
            pc(
                "e",
                "4",
                ChangeStatus::Verifying,
                5,
                CandidateStatus::Verifying,
                &["cs_5"],
            ),
            pc(
                "f",
                "1",
                ChangeStatus::Verifying,
                3,
                CandidateStatus::Verifying,
                &["cs_1"],
            ),
        ];
        let s = settle_older_base(&all, 5);
        let stale: Vec<&str> = s.stale.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(stale, ["cand_a", "cand_b", "cand_c", "cand_f"]);
        assert_eq!(s.stale[0].1, "Base generation 4 is behind canonical generation 5.");
        let again: Vec<&str> = s.recompose.iter().map(|(c, _, _)| c.as_str()).collect();
        assert_eq!(
            again,
            ["cand_a", "cand_b"],
            "one new Candidate per distinct set of a live Change"
        );
    }
}
