//! Project policies, Candidates and Evidence, on both backends.

use belay_domain::candidate::CandidateStatus;
use belay_domain::change::{ChangeInput, ChangeSetInput, ChangeStatus, RiskTier, TaskInput, TaskKind};
use belay_domain::check::CheckId;
use belay_domain::evidence::{CheckResult, Coverage, EvidenceStatus};
use belay_domain::ids::{AccountId, ChangeId, ProjectId};
use belay_domain::policy::{DEFAULT_POLICY, PolicyInput};
use belay_domain::project::ProjectInput;
use belay_store::candidates::NewEvidence;
use belay_store::on_both;
use belay_store::{Store, StoreError};

struct World {
    alice: AccountId,
    project: ProjectId,
    change: ChangeId,
    /// ChangeSets: task a's first and second, then task b's (which depends on a).
    sets: Vec<String>,
}

const C1: &str = "1111111111111111111111111111111111111111";
const C2: &str = "2222222222222222222222222222222222222222";
const C3: &str = "3333333333333333333333333333333333333333";

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
    s.mark_project_provisioned(&p.id, C1, C1).await.unwrap();
    let c = s
        .create_change(
            &alice.id,
            &p.id,
            &ChangeInput {
                goal: "g".into(),
                acceptance_criteria: vec![],
                invariants: vec![],
                risk_tier: Some(RiskTier::Low),
            },
        )
        .await
        .unwrap();
    let task = |key: &str, deps: Vec<String>| TaskInput {
        key: key.into(),
        kind: TaskKind::Implement,
        title: key.into(),
        semantic_resources: vec![],
        dependencies: deps,
    };
    let a = s.add_task(&alice.id, &c.id, &task("a", vec![])).await.unwrap();
    let b = s
        .add_task(&alice.id, &c.id, &task("b", vec!["a".into()]))
        .await
        .unwrap();
    let mut sets = Vec::new();
    for (t, commit) in [(&a, C2), (&a, C3), (&b, C2)] {
        let run = s.start_task_run(&alice.id, &t.id).await.unwrap();
        let cs = s
            .record_change_set(
                &alice.id,
                &run.id,
                &ChangeSetInput {
                    commit: commit.into(),
                    contract_changes: vec![],
                    data_changes: vec![],
                },
            )
            .await
            .unwrap();
        sets.push(cs.id.as_str().to_owned());
    }
    World {
        alice: alice.id,
        project: p.id,
        change: c.id,
        sets,
    }
}

on_both!(
    a_project_without_a_policy_row_uses_the_default_and_each_write_is_the_next_version,
    |s: Store| async move {
        let w = world(&s).await;
        assert_eq!(s.active_policy(&w.alice, &w.project).await.unwrap(), *DEFAULT_POLICY);
        let input = PolicyInput {
            live_app: Some(true),
            protected_resources: Some(vec!["billing".into()]),
            ..Default::default()
        };
        let p2 = s.put_policy(&w.alice, &w.project, &input).await.unwrap();
        assert_eq!((p2.id.as_str(), p2.version, p2.live_app), ("policy-2", 2, true));
        let p3 = s
            .put_policy(&w.alice, &w.project, &PolicyInput::default())
            .await
            .unwrap();
        assert_eq!((p3.id.as_str(), p3.version, p3.live_app), ("policy-3", 3, false));
        assert_eq!(s.active_policy(&w.alice, &w.project).await.unwrap(), p3);
        assert_eq!(s.active_policy_for_worker(&w.project).await.unwrap(), p3);
        let (bob, _) = s.create_account("bob").await.unwrap();
        assert!(matches!(
            s.active_policy(&bob.id, &w.project).await,
            Err(StoreError::NotFound { .. })
        ));
        assert!(matches!(
            s.put_policy(&bob.id, &w.project, &input).await,
            Err(StoreError::NotFound { .. })
        ));
        let bad = PolicyInput {
            commands: Some(belay_domain::policy::PolicyCommandsInput {
                test: Some(String::new()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(matches!(
            s.put_policy(&w.alice, &w.project, &bad).await,
            Err(StoreError::Invalid(_))
        ));
        assert_eq!(s.active_policy(&w.alice, &w.project).await.unwrap().version, 3);
    }
);

on_both!(concurrent_policy_writes_make_distinct_versions, |s: Store| async move {
    let w = world(&s).await;
    let mut handles = Vec::new();
    for _ in 0..4 {
        let (s, a, p) = (s.clone(), w.alice.clone(), w.project.clone());
        handles.push(tokio::spawn(async move {
            s.put_policy(
                &AccountId::from(a.as_str()),
                &ProjectId::from(p.as_str()),
                &PolicyInput::default(),
            )
            .await
        }));
    }
    let mut versions: Vec<u32> = Vec::new();
    for h in handles {
        if let Ok(p) = h.await.unwrap() {
            versions.push(p.version);
        }
    }
    let n = versions.len();
    versions.sort();
    versions.dedup();
    assert_eq!(versions.len(), n, "no version written twice");
    assert_eq!(
        s.active_policy(&w.alice, &w.project).await.unwrap().version,
        1 + n as u32
    );
});

on_both!(
    starting_verification_makes_one_candidate_of_each_tasks_latest_change_set_in_work_graph_order,
    |s: Store| async move {
        let w = world(&s).await;
        let k = s.start_verification(&w.alice, &w.change).await.unwrap();
        let ids: Vec<&str> = k.change_set_ids.iter().map(|c| c.as_str()).collect();
        assert_eq!(ids, vec![w.sets[1].as_str(), w.sets[2].as_str()]);
        assert_eq!(k.status, CandidateStatus::Composing);
        assert_eq!((k.base_generation, k.base_commit.as_str()), (0, C1));
        assert!(k.id.as_str().starts_with("cand_"));
        let change = s.get_change(&w.alice, &w.change).await.unwrap().unwrap();
        assert_eq!(change.status, ChangeStatus::Verifying);
        let events = s.events(0, Some(&w.change), 100).await.unwrap();
        assert!(events.iter().any(|e| e.kind == "verification.started"));

        // An explicit set keeps Work Graph order whatever order it is given in.
        let e = s
            .compose_candidate(&w.alice, &w.change, &[w.sets[2].clone(), w.sets[0].clone()])
            .await
            .unwrap();
        let ids: Vec<&str> = e.change_set_ids.iter().map(|c| c.as_str()).collect();
        assert_eq!(ids, vec![w.sets[0].as_str(), w.sets[2].as_str()]);
        assert_eq!(s.list_candidates(&w.alice, &w.change).await.unwrap().len(), 2);

        // A ChangeSet that is not this Change's is refused as a conflict with the Change's state,
        // naming the field; nothing is written.
        let refused = s.compose_candidate(&w.alice, &w.change, &["cs_nope".into()]).await;
        assert!(
            matches!(refused, Err(StoreError::Conflict(ref m)) if m.starts_with("changeSetIds: cs_nope")),
            "{refused:?}"
        );
        assert_eq!(s.list_candidates(&w.alice, &w.change).await.unwrap().len(), 2);

        // Another account sees none of it.
        let (bob, _) = s.create_account("bob").await.unwrap();
        assert!(s.get_candidate(&bob.id, &k.id).await.unwrap().is_none());
        assert!(matches!(
            s.start_verification(&bob.id, &w.change).await,
            Err(StoreError::NotFound { .. })
        ));
        assert!(matches!(
            s.list_candidates(&bob.id, &w.change).await,
            Err(StoreError::NotFound { .. })
        ));
    }
);

on_both!(
    candidate_statuses_move_only_from_the_statuses_named,
    |s: Store| async move {
        let w = world(&s).await;
        let k = s.start_verification(&w.alice, &w.change).await.unwrap();
        let id = &k.id;
        assert!(
            !s.set_candidate_status(id, &[CandidateStatus::Verifying], CandidateStatus::Verified, None)
                .await
                .unwrap()
        );
        let plan = belay_domain::plan::VerificationPlan {
            policy: DEFAULT_POLICY.stamp(),
            risk_tier: Some(RiskTier::Low),
            checks: vec![],
            protected_invariants: vec![],
            human_gates: vec![],
        };
        assert!(s.record_composition(id, C2, C3, &plan).await.unwrap());
        assert!(
            !s.record_composition(id, C2, C3, &plan).await.unwrap(),
            "a retry composes nothing twice"
        );
        let k = s.candidate_for_worker(id).await.unwrap().unwrap();
        assert_eq!(
            (k.status, k.composed_commit.as_deref(), k.plan.as_ref()),
            (CandidateStatus::Verifying, Some(C2), Some(&plan))
        );
        assert!(
            s.set_candidate_status(
                id,
                &[CandidateStatus::Verifying],
                CandidateStatus::Rejected,
                Some("gap: unit failed")
            )
            .await
            .unwrap()
        );
        let k = s.get_candidate(&w.alice, id).await.unwrap().unwrap();
        assert_eq!(
            (k.status, k.status_reason.as_deref()),
            (CandidateStatus::Rejected, Some("gap: unit failed"))
        );
    }
);

on_both!(
    a_stale_candidate_is_recomposed_once_on_the_new_base,
    |s: Store| async move {
        let w = world(&s).await;
        let k = s.start_verification(&w.alice, &w.change).await.unwrap();
        let a = s.recompose_stale(&k.id, "behind").await.unwrap().unwrap();
        let b = s.recompose_stale(&k.id, "behind").await.unwrap().unwrap();
        assert_eq!(a.id, b.id);
        assert_eq!(a.change_set_ids, k.change_set_ids);
        let old = s.candidate_for_worker(&k.id).await.unwrap().unwrap();
        assert_eq!(
            (old.status, old.recomposed_as.as_ref()),
            (CandidateStatus::Stale, Some(&a.id))
        );
        assert_eq!(s.list_candidates(&w.alice, &w.change).await.unwrap().len(), 2);
    }
);

on_both!(
    a_retried_check_step_writes_one_evidence_row_per_attempt,
    |s: Store| async move {
        let w = world(&s).await;
        let k = s.start_verification(&w.alice, &w.change).await.unwrap();
        let new = |attempt: u32, status: EvidenceStatus| NewEvidence {
            candidate_id: k.id.to_string(),
            check_id: CheckId::Unit,
            attempt,
            result: CheckResult::new(status, Coverage::CheckedSupported, "bun test"),
            object_key: Some("evidence/x.json".into()),
            started_at: 1_000,
            completed_at: 1_500,
        };
        let first = s.record_evidence(&new(1, EvidenceStatus::Fail)).await.unwrap();
        let again = s.record_evidence(&new(1, EvidenceStatus::Pass)).await.unwrap();
        assert_eq!(first, again, "the first record of an attempt stands");
        assert_eq!(first.evidence.status, EvidenceStatus::Fail);
        assert_eq!(first.evidence.duration_ms, 500);
        assert!(first.evidence.summary.ends_with("(runner: sandbox)"));
        s.record_evidence(&new(2, EvidenceStatus::Pass)).await.unwrap();
        let all = s.list_evidence(&k.id).await.unwrap();
        assert_eq!(all.len(), 2);
        assert!(all[0].evidence.id.as_str().starts_with("ev_"));
    }
);
