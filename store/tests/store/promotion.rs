//! Approvals and promotion on both backends: one decision per approval on the exact tree, the
//! compare-and-swap advancing canonical once under a race, the sync records, and the settling of
//! older-base Candidates.

use belay_domain::approval::{ApprovalDecision, ApprovalInput, ApprovalStatus, GateTrigger, HumanGate};
use belay_domain::candidate::CandidateStatus;
use belay_domain::change::{ChangeInput, ChangeSetInput, ChangeStatus, RiskTier, TaskInput, TaskKind};
use belay_domain::ids::{AccountId, CandidateId, ChangeId, ProjectId};
use belay_domain::policy::{DEFAULT_POLICY, PolicyInput};
use belay_domain::project::ProjectInput;
use belay_domain::promotion::{Block, PromotionOutcome};
use belay_store::on_both;
use belay_store::{Store, StoreError};

const BASE: &str = "1111111111111111111111111111111111111111";
const COMMIT: &str = "2222222222222222222222222222222222222222";
const TREE: &str = "3333333333333333333333333333333333333333";
const OTHER_TREE: &str = "4444444444444444444444444444444444444444";

struct World {
    alice: AccountId,
    project: ProjectId,
}

async fn world(s: &Store) -> World {
    let (alice, _) = s.create_account("alice").await.unwrap();
    let p = s
        .create_project(
            &alice.id,
            &ProjectInput {
                name: "p".into(),
                workspace_policy: None,
            },
        )
        .await
        .unwrap();
    s.mark_project_provisioned(&p.id, BASE, BASE).await.unwrap();
    World {
        alice: alice.id,
        project: p.id,
    }
}

/// A Change with one ChangeSet and its Candidate, composed (`COMMIT`, `TREE`) and verified.
async fn verified(s: &Store, w: &World, tier: RiskTier) -> (String, String) {
    verified_with(s, w, tier, &[]).await
}

/// [`verified`], the Change with these acceptance criteria.
async fn verified_with(s: &Store, w: &World, tier: RiskTier, criteria: &[&str]) -> (String, String) {
    let c = published(s, w, tier, criteria).await;
    let k = s
        .start_verification(&w.alice, &ChangeId::from(c.as_str()))
        .await
        .unwrap();
    let plan = belay_domain::plan::VerificationPlan {
        policy: DEFAULT_POLICY.stamp(),
        risk_tier: Some(tier),
        checks: vec![],
        protected_invariants: vec![],
        human_gates: vec![],
    };
    assert!(s.record_composition(&k.id, COMMIT, TREE, &plan).await.unwrap());
    assert!(
        s.set_candidate_status(&k.id, &[CandidateStatus::Verifying], CandidateStatus::Verified, None)
            .await
            .unwrap()
    );
    (c, k.id.as_str().to_owned())
}

/// A Change with `criteria` and one published ChangeSet.
async fn published(s: &Store, w: &World, tier: RiskTier, criteria: &[&str]) -> String {
    let c = s
        .create_change(
            &w.alice,
            &w.project,
            &ChangeInput {
                goal: "g".into(),
                acceptance_criteria: criteria.iter().map(|c| c.to_string()).collect(),
                invariants: vec![],
                risk_tier: Some(tier),
            },
        )
        .await
        .unwrap();
    let t = s
        .add_task(
            &w.alice,
            &c.id,
            &TaskInput {
                key: "a".into(),
                kind: TaskKind::Implement,
                title: "a".into(),
                semantic_resources: vec![],
                dependencies: vec![],
            },
        )
        .await
        .unwrap();
    let run = s.start_task_run(&w.alice, &t.id).await.unwrap();
    s.record_change_set(
        &w.alice,
        &run.id,
        &ChangeSetInput {
            commit: COMMIT.into(),
            contract_changes: vec![],
            data_changes: vec![],
        },
    )
    .await
    .unwrap();
    c.id.as_str().to_owned()
}

fn gate() -> HumanGate {
    HumanGate {
        trigger: GateTrigger::Policy,
        reason: "Policy policy-1 requires a person to approve high-risk changes.".into(),
    }
}

const REASON: &str =
    "Policy policy-1 requires a person to approve high-risk changes. Approve to ship it or cancel the change.";

fn decision(decision: ApprovalDecision, tree: &str, reason: Option<&str>) -> ApprovalInput {
    ApprovalInput {
        decision,
        tree: tree.into(),
        reason: reason.map(Into::into),
    }
}

on_both!(
    an_approval_is_requested_once_and_counts_only_for_its_tree,
    |s: Store| async move {
        let w = world(&s).await;
        let (change, k) = verified(&s, &w, RiskTier::High).await;
        // Nothing requested yet: a decision is refused.
        let err = s
            .decide_approval(
                &w.alice,
                &CandidateId::from(k.as_str()),
                &decision(ApprovalDecision::Grant, TREE, None),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Conflict(_)), "{err}");

        let a = s
            .request_approval(&CandidateId::from(k.as_str()), TREE, &[gate()], REASON)
            .await
            .unwrap();
        let again = s
            .request_approval(&CandidateId::from(k.as_str()), TREE, &[gate()], REASON)
            .await
            .unwrap();
        assert_eq!(a, again, "a retry requests nothing twice");
        assert_eq!(
            (a.status, a.tree.as_deref(), a.reason.as_str()),
            (ApprovalStatus::Requested, Some(TREE), REASON)
        );
        let cand = s
            .candidate_for_worker(&CandidateId::from(k.as_str()))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(cand.status_reason.as_deref(), Some(REASON));
        assert_eq!(cand.plan.unwrap().human_gates, vec![gate()], "the hold joins the plan");
        let ch = s
            .get_change(&w.alice, &ChangeId::from(change.as_str()))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(ch.status, ChangeStatus::AwaitingApproval);
        let waiting = s
            .list_approvals(&w.alice, ApprovalStatus::Requested, 100)
            .await
            .unwrap();
        assert_eq!(waiting.len(), 1);
        assert_eq!(waiting[0].composed_commit.as_deref(), Some(COMMIT));
        let (bob, _) = s.create_account("bob").await.unwrap();
        assert!(
            s.list_approvals(&bob.id, ApprovalStatus::Requested, 100)
                .await
                .unwrap()
                .is_empty()
        );
        assert!(matches!(
            s.decide_approval(
                &bob.id,
                &CandidateId::from(k.as_str()),
                &decision(ApprovalDecision::Grant, TREE, None)
            )
            .await,
            Err(StoreError::NotFound { .. })
        ));

        // A grant for another tree is refused and writes nothing.
        let err = s
            .decide_approval(
                &w.alice,
                &CandidateId::from(k.as_str()),
                &decision(ApprovalDecision::Grant, OTHER_TREE, None),
            )
            .await
            .unwrap_err();
        assert!(err.to_string().starts_with("tree:"), "{err}");
        assert_eq!(
            s.approval_for_worker(&CandidateId::from(k.as_str()))
                .await
                .unwrap()
                .unwrap()
                .status,
            ApprovalStatus::Requested
        );

        let d = s
            .decide_approval(
                &w.alice,
                &CandidateId::from(k.as_str()),
                &decision(ApprovalDecision::Grant, TREE, None),
            )
            .await
            .unwrap();
        assert!(d.recorded && d.repair.is_none());
        assert_eq!(
            d.approval.decided_by.as_ref().map(|a| a.as_str()),
            Some(w.alice.as_str())
        );
        let same = s
            .decide_approval(
                &w.alice,
                &CandidateId::from(k.as_str()),
                &decision(ApprovalDecision::Grant, TREE, None),
            )
            .await
            .unwrap();
        assert!(!same.recorded, "the same decision again changes nothing");
        let err = s
            .decide_approval(
                &w.alice,
                &CandidateId::from(k.as_str()),
                &decision(ApprovalDecision::Reject, TREE, Some("no")),
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("first decision is final"), "{err}");
        assert!(
            s.list_approvals(&w.alice, ApprovalStatus::Requested, 100)
                .await
                .unwrap()
                .is_empty()
        );
    }
);

on_both!(concurrent_decisions_record_exactly_one, |s: Store| async move {
    let w = world(&s).await;
    let (_, k) = verified(&s, &w, RiskTier::High).await;
    s.request_approval(&CandidateId::from(k.as_str()), TREE, &[gate()], REASON)
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..10 {
        let (s, alice, k) = (s.clone(), w.alice.clone(), k.clone());
        tasks.push(tokio::spawn(async move {
            let d = if i % 2 == 0 {
                ApprovalDecision::Grant
            } else {
                ApprovalDecision::Reject
            };
            s.decide_approval(
                &AccountId::from(alice.as_str()),
                &CandidateId::from(k.as_str()),
                &decision(d, TREE, Some("because")),
            )
            .await
        }));
    }
    let mut recorded = 0;
    for t in tasks {
        if let Ok(d) = t.await.unwrap()
            && d.recorded
        {
            recorded += 1;
        }
    }
    assert_eq!(recorded, 1);
});

on_both!(
    a_rejection_with_a_reason_rejects_the_candidate_and_requests_the_repair,
    |s: Store| async move {
        let w = world(&s).await;
        let (change, k) = verified(&s, &w, RiskTier::High).await;
        s.request_approval(&CandidateId::from(k.as_str()), TREE, &[gate()], REASON)
            .await
            .unwrap();
        let d = s
            .decide_approval(
                &w.alice,
                &CandidateId::from(k.as_str()),
                &decision(ApprovalDecision::Reject, TREE, Some("the list must be sorted")),
            )
            .await
            .unwrap();
        assert_eq!(d.approval.status, ApprovalStatus::Rejected);
        assert_eq!(d.approval.decision_reason.as_deref(), Some("the list must be sorted"));
        let cand = s
            .candidate_for_worker(&CandidateId::from(k.as_str()))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(cand.status, CandidateStatus::Rejected);
        assert_eq!(
            cand.status_reason.as_deref(),
            Some("Rejected by a person: the list must be sorted")
        );
        let events = s.events(0, Some(&change), 100).await.unwrap();
        let repair = events
            .iter()
            .find(|e| e.kind == "repair.requested")
            .expect("repair requested");
        assert_eq!(repair.payload["reason"], "the list must be sorted");
        assert_eq!(repair.payload["candidate_id"], k.as_str());
    }
);

on_both!(twenty_racing_swaps_advance_canonical_once, |s: Store| async move {
    let w = world(&s).await;
    let (change, k) = verified(&s, &w, RiskTier::Low).await;
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let (s, k) = (s.clone(), k.clone());
        tasks.push(tokio::spawn(async move {
            s.promote_cas(&CandidateId::from(k.as_str()), 0, &DEFAULT_POLICY.stamp())
                .await
        }));
    }
    let mut promoted = 0;
    for t in tasks {
        match t.await.unwrap().unwrap() {
            PromotionOutcome::Promoted { generation } => {
                assert_eq!(generation, 1);
                promoted += 1;
            }
            PromotionOutcome::AlreadyPromoted => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(promoted, 1);
    let p = s.get_project(&w.alice, &w.project).await.unwrap().unwrap();
    assert_eq!(
        (p.generation, p.canonical_commit.as_deref(), p.canonical_tree.as_deref()),
        (1, Some(COMMIT), Some(TREE))
    );
    let cand = s
        .candidate_for_worker(&CandidateId::from(k.as_str()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cand.status, CandidateStatus::Promoted);
    let ch = s
        .get_change(&w.alice, &ChangeId::from(change.as_str()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ch.status, ChangeStatus::Promoted);
    let advanced: Vec<_> = s
        .events(0, Some(&w.project), 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "canonical.advanced")
        .collect();
    assert_eq!(advanced.len(), 1);
    assert_eq!(advanced[0].payload["generation"], 1);

    // The sync records: pushed, then synced once with `release.started` once.
    let rec = s
        .promotion_for_worker(&CandidateId::from(k.as_str()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((rec.pushed_at, rec.synced_at), (None, None));
    s.mark_promotion_pushed(&CandidateId::from(k.as_str())).await.unwrap();
    let a = s.mark_promotion_synced(&CandidateId::from(k.as_str())).await.unwrap();
    let b = s.mark_promotion_synced(&CandidateId::from(k.as_str())).await.unwrap();
    assert!(a.pushed_at.is_some() && a.synced_at.is_some());
    assert_eq!(a, b);
    let released = s
        .events(0, Some(&w.project), 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "release.started")
        .count();
    assert_eq!(released, 1);
});

/// The kept criteria the verification workflow's first step reads for a Candidate.
async fn kept(s: &Store, candidate: &str) -> Vec<String> {
    s.verification_rows(&CandidateId::from(candidate))
        .await
        .unwrap()
        .unwrap()
        .kept_criteria
}

on_both!(
    the_criteria_of_changes_promoted_while_a_change_ran_are_its_kept_criteria,
    |s: Store| async move {
        let w = world(&s).await;
        // Promoted before the Change was created: not kept.
        let (_, before) = verified(&s, &w, RiskTier::Low).await;
        assert!(matches!(
            s.promote_cas(&CandidateId::from(before.as_str()), 0, &DEFAULT_POLICY.stamp())
                .await
                .unwrap(),
            PromotionOutcome::Promoted { generation: 1 }
        ));
        let promoted_at = belay_store::now_ms();
        while belay_store::now_ms() <= promoted_at {
            tokio::task::yield_now().await;
        }
        let change = published(&s, &w, RiskTier::Low, &["The list shows tags"]).await;
        let first = s
            .start_verification(&w.alice, &ChangeId::from(change.as_str()))
            .await
            .unwrap();
        assert_eq!(kept(&s, &first.id).await, Vec::<String>::new());
        // Another Change goes live while it runs: its criteria are kept, in promotion order.
        let (_, k) = verified_with(&s, &w, RiskTier::Low, &["A calendar view", "Due dates are shown"]).await;
        assert!(matches!(
            s.promote_cas(&CandidateId::from(k.as_str()), 1, &DEFAULT_POLICY.stamp())
                .await
                .unwrap(),
            PromotionOutcome::Promoted { generation: 2 }
        ));
        // The first Candidate's base (generation 1) does not hold it; a Candidate on the new base does.
        assert_eq!(kept(&s, first.id.as_str()).await, Vec::<String>::new());
        let second = s
            .compose_candidate(
                &w.alice,
                &ChangeId::from(change.as_str()),
                &first.change_set_ids.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
            )
            .await
            .unwrap();
        assert_eq!(second.base_generation, 2);
        assert_eq!(
            kept(&s, second.id.as_str()).await,
            vec!["A calendar view".to_string(), "Due dates are shown".to_string()]
        );
    }
);

on_both!(
    a_moved_canonical_is_stale_and_a_changed_policy_blocks,
    |s: Store| async move {
        let w = world(&s).await;
        let (_, first) = verified(&s, &w, RiskTier::Low).await;
        let (_, second) = verified(&s, &w, RiskTier::Low).await;
        let (_, third) = verified(&s, &w, RiskTier::Low).await;
        assert_eq!(
            s.promote_cas(&CandidateId::from(first.as_str()), 0, &DEFAULT_POLICY.stamp())
                .await
                .unwrap(),
            PromotionOutcome::Promoted { generation: 1 }
        );
        assert!(matches!(
            s.promote_cas(&CandidateId::from(second.as_str()), 0, &DEFAULT_POLICY.stamp())
                .await
                .unwrap(),
            PromotionOutcome::Stale { .. }
        ));
        // Settle: the older-base Candidates go stale; their Changes (verifying) get new ones.
        let settled = s.settle_older_base(&w.project, 1).await.unwrap();
        assert_eq!(settled.stale, vec![second.clone(), third.clone()]);
        assert_eq!(settled.recomposed.len(), 2);
        let again = s.settle_older_base(&w.project, 1).await.unwrap();
        assert!(again.stale.is_empty());
        assert_eq!(
            again.recomposed, settled.recomposed,
            "a retry answers the same new Candidates"
        );
        let old = s
            .candidate_for_worker(&CandidateId::from(second.as_str()))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(old.status, CandidateStatus::Stale);
        assert_eq!(
            old.status_reason.as_deref(),
            Some("Base generation 0 is behind canonical generation 1.")
        );
        let new = s
            .candidate_for_worker(&CandidateId::from(settled.recomposed[0].as_str()))
            .await
            .unwrap()
            .unwrap();
        assert_eq!((new.base_generation, new.base_commit.as_str()), (1, COMMIT));
        assert_eq!(new.change_set_ids, old.change_set_ids);

        // A verified Candidate on the new base whose plan's policy is no longer active: blocked.
        let (_, fourth) = verified(&s, &w, RiskTier::Low).await;
        s.put_policy(&w.alice, &w.project, &PolicyInput::default())
            .await
            .unwrap();
        assert!(matches!(
            s.promote_cas(&CandidateId::from(fourth.as_str()), 1, &DEFAULT_POLICY.stamp()).await.unwrap(),
            PromotionOutcome::Blocked { blocks } if matches!(blocks[..], [Block::PolicyChanged { .. }])
        ));
        assert_eq!(
            s.get_project(&w.alice, &w.project).await.unwrap().unwrap().generation,
            1
        );
    }
);

on_both!(
    cancelling_a_change_rejects_its_candidates_cancels_what_waits_and_answers_a_conflict_after,
    |s: Store| async move {
        let w = world(&s).await;
        let (change, k) = verified(&s, &w, RiskTier::High).await;
        s.request_approval(&CandidateId::from(k.as_str()), TREE, &[gate()], REASON)
            .await
            .unwrap();
        let waiting = s
            .list_approvals(&w.alice, ApprovalStatus::Requested, 100)
            .await
            .unwrap();
        assert_eq!(waiting.len(), 1);
        assert_eq!(
            waiting[0].actions,
            [
                belay_domain::approval::ApprovalAction::Approve,
                belay_domain::approval::ApprovalAction::Cancel
            ]
        );
        // A Task still running on the Change.
        let t = s
            .add_task(
                &w.alice,
                &ChangeId::from(change.as_str()),
                &TaskInput {
                    key: "b".into(),
                    kind: TaskKind::Implement,
                    title: "b".into(),
                    semantic_resources: vec![],
                    dependencies: vec![],
                },
            )
            .await
            .unwrap();
        let run = s.start_task_run(&w.alice, &t.id).await.unwrap();

        let done = s
            .cancel_change(&w.alice, &ChangeId::from(change.as_str()), "  no longer wanted ")
            .await
            .unwrap();
        assert_eq!(done.change.status, ChangeStatus::Cancelled);
        assert_eq!(done.rejected_candidates, vec![k.clone()]);
        let cand = s
            .candidate_for_worker(&CandidateId::from(k.as_str()))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(cand.status, CandidateStatus::Rejected);
        assert_eq!(
            cand.status_reason.as_deref(),
            Some("The change was cancelled: no longer wanted")
        );
        assert!(
            s.list_approvals(&w.alice, ApprovalStatus::Requested, 100)
                .await
                .unwrap()
                .is_empty()
        );
        let cancelled = s
            .list_approvals(&w.alice, ApprovalStatus::Cancelled, 100)
            .await
            .unwrap();
        assert_eq!(cancelled.len(), 1);
        assert_eq!(
            cancelled[0].approval.decision_reason.as_deref(),
            Some("no longer wanted")
        );
        assert_eq!(
            cancelled[0].approval.decided_by.as_ref().map(|a| a.to_string()),
            Some(w.alice.to_string())
        );
        let plan = s.workspace_plan(&run.id).await.unwrap().unwrap();
        assert_eq!(plan.run_status, "failed");
        let receipts = s
            .list_receipts(&w.alice, &ChangeId::from(change.as_str()))
            .await
            .unwrap();
        let r = receipts
            .iter()
            .find(|r| r.kind == belay_domain::receipt::ReceiptKind::ChangeCancelled)
            .expect("a CHANGE_CANCELLED receipt");
        assert_eq!(r.inputs["reason"], "no longer wanted");
        assert_eq!(r.inputs["by"], w.alice.as_str());
        // A granted decision on the cancelled request is refused.
        let err = s
            .decide_approval(
                &w.alice,
                &CandidateId::from(k.as_str()),
                &decision(ApprovalDecision::Grant, TREE, None),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Conflict(_)), "{err}");

        // The Change has ended: a second cancel is a conflict naming its status, and writes nothing.
        let err = s
            .cancel_change(&w.alice, &ChangeId::from(change.as_str()), "again")
            .await
            .unwrap_err();
        match err {
            StoreError::Conflict(m) => assert!(m.contains("(cancelled)"), "{m}"),
            other => panic!("{other}"),
        }
        assert_eq!(
            s.list_receipts(&w.alice, &ChangeId::from(change.as_str()))
                .await
                .unwrap()
                .len(),
            receipts.len()
        );
        let missing = s
            .cancel_change(&w.alice, &ChangeId::from("chg_nope"), "x")
            .await
            .unwrap_err();
        assert!(matches!(missing, StoreError::NotFound { .. }), "{missing}");
    }
);
