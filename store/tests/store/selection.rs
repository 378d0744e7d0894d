//! The model meters, conflicts and the fork rule's round, the selection claim and its apply, and
//! the repair Task, on both backends.

use belay_domain::candidate::CandidateStatus;
use belay_domain::change::{ChangeInput, ChangeSetInput, ChangeStatus, RiskTier, TaskInput, TaskKind};
use belay_domain::conflict::{ConflictInput, ConflictSide, ConflictStatus};
use belay_domain::ids::{AccountId, CandidateId, ChangeId, TaskId};
use belay_domain::project::ProjectInput;
use belay_domain::receipt::ReceiptKind;
use belay_domain::selection_steps::{SelectionDone, SelectionStep};
use belay_store::model_meter::ModelLimits;
use belay_store::on_both;
use belay_store::{Backend, Store, StoreError};
use std::collections::BTreeMap;

const C1: &str = "1111111111111111111111111111111111111111";
const C2: &str = "2222222222222222222222222222222222222222";
const C3: &str = "3333333333333333333333333333333333333333";

struct World {
    alice: AccountId,
    change: ChangeId,
    tasks: Vec<String>,
    sets: Vec<String>,
    paths: BTreeMap<String, Vec<String>>,
}

/// A Change with two independent Tasks, one ChangeSet each.
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
                acceptance_criteria: vec!["A helper counts the todos".into()],
                invariants: vec![],
                risk_tier: Some(RiskTier::Low),
            },
        )
        .await
        .unwrap();
    let mut tasks = Vec::new();
    let mut sets = Vec::new();
    let mut paths = BTreeMap::new();
    for (key, commit) in [("a", C2), ("b", C3)] {
        let t = s
            .add_task(
                &alice.id,
                &c.id,
                &TaskInput {
                    key: key.into(),
                    kind: TaskKind::Implement,
                    title: key.into(),
                    semantic_resources: vec![],
                    dependencies: vec![],
                },
            )
            .await
            .unwrap();
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
        paths.insert(cs.id.as_str().to_owned(), vec![format!("src/{key}.ts")]);
        tasks.push(t.id.as_str().to_owned());
        sets.push(cs.id.as_str().to_owned());
    }
    World {
        alice: alice.id,
        change: c.id,
        tasks,
        sets,
        paths,
    }
}

fn conflict(w: &World, status: ConflictStatus, b_path: &str) -> ConflictInput {
    let side = |i: usize, path: &str| ConflictSide {
        task_id: w.tasks[i].clone().into(),
        change_set_ids: vec![w.sets[i].clone().into()],
        paths: vec![path.into()],
        contract_lines: vec![],
    };
    ConflictInput {
        status,
        sides: vec![side(0, "src/a.ts"), side(1, b_path)],
        summary: None,
    }
}

const LIMITS: ModelLimits = ModelLimits {
    monthly_budget_usd: 1.0,
    daily_call_cap: 3,
    change_budget_usd: 0.5,
};

on_both!(
    a_model_call_that_would_pass_a_meter_is_refused_before_it_is_made_and_counts_nothing,
    threads = 4,
    |s: Store| async move {
        let w = world(&s).await;
        let now = belay_store::now_ms();
        // The Change budget: 0.3 reserved, then settled at 0.1; a 0.45 estimate fits, 0.5 not.
        let r = s
            .reserve_model_call(&w.change, 0.3, LIMITS, now)
            .await
            .unwrap()
            .unwrap();
        s.settle_model_call(&r, 0.1).await.unwrap();
        assert!((s.change_model_cost(&w.change).await.unwrap() - 0.1).abs() < 1e-9);
        let refused = s.reserve_model_call(&w.change, 0.45, LIMITS, now).await.unwrap();
        assert!(refused.unwrap_err().contains("Change budget"));
        let r2 = s
            .reserve_model_call(&w.change, 0.35, LIMITS, now)
            .await
            .unwrap()
            .unwrap();
        s.settle_model_call(&r2, 0.35).await.unwrap();
        // The daily cap: two calls made (the refused one is not counted), one more fits.
        assert_eq!(s.model_calls_on(now).await.unwrap(), 2);
        let r3 = s
            .reserve_model_call(&ChangeId::from("chg_other"), 0.1, LIMITS, now)
            .await
            .unwrap()
            .unwrap();
        s.settle_model_call(&r3, 0.1).await.unwrap();
        let capped = s
            .reserve_model_call(&ChangeId::from("chg_other"), 0.1, LIMITS, now)
            .await
            .unwrap();
        assert!(capped.unwrap_err().contains("daily model call cap"));
        assert_eq!(s.model_calls_on(now).await.unwrap(), 3);
        // The next UTC day has its own cap; the month's budget is shared: 0.55 spent of 1.0.
        let tomorrow = now + 86_400_000;
        let month = s.model_cost_in_month(now).await.unwrap();
        assert!((month - 0.55).abs() < 1e-9, "{month}");
        let over = s
            .reserve_model_call(&ChangeId::from("chg_third"), 0.46, LIMITS, tomorrow)
            .await
            .unwrap();
        if belay_store::model_meter::utc_date(tomorrow).1 == belay_store::model_meter::utc_date(now).1 {
            assert!(over.unwrap_err().contains("monthly Anthropic budget"));
        }
    }
);

on_both!(
    concurrent_model_calls_never_pass_the_daily_cap_or_the_change_budget,
    threads = 4,
    |s: Store| async move {
        let now = belay_store::now_ms();
        let limits = ModelLimits {
            monthly_budget_usd: 100.0,
            daily_call_cap: 5,
            change_budget_usd: 1.0,
        };
        // Eight calls of 0.3 on one Change at once: the budget holds three of them.
        let mut handles = Vec::new();
        for _ in 0..8 {
            let s = s.clone();
            handles.push(tokio::spawn(async move {
                s.reserve_model_call(&ChangeId::from("chg_busy"), 0.3, limits, now)
                    .await
                    .unwrap()
            }));
        }
        let mut granted = Vec::new();
        for h in handles {
            if let Ok(r) = h.await.unwrap() {
                granted.push(r);
            }
        }
        assert_eq!(granted.len(), 3);
        assert_eq!(
            s.usage_counter(belay_store::model_meter::MODEL_COST_CHANGE, "chg_busy")
                .await
                .unwrap(),
            (0, 900_000),
            "reserved, not yet spent"
        );
        for r in &granted {
            s.settle_model_call(r, 0.25).await.unwrap();
        }
        assert!((s.change_model_cost(&ChangeId::from("chg_busy")).await.unwrap() - 0.75).abs() < 1e-9);
        // Eight more calls of other Changes at once: the day's cap of five holds two of them.
        let mut handles = Vec::new();
        for i in 0..8 {
            let s = s.clone();
            handles.push(tokio::spawn(async move {
                s.reserve_model_call(&ChangeId(format!("chg_{i}")), 0.01, limits, now)
                    .await
                    .unwrap()
            }));
        }
        let mut ok = 0;
        for h in handles {
            ok += usize::from(h.await.unwrap().is_ok());
        }
        assert_eq!(ok, 2);
        assert_eq!(s.model_calls_on(now).await.unwrap(), 5);
    }
);

/// The model meters as the table before `usage_counters` held them carry over into it.
async fn model_meters_carry_over(backend: Backend) {
    const MIGRATION: i64 = 20261204500000;
    let db = belay_store::testing::fresh_before(backend, MIGRATION).await;
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&db.url).await.unwrap();
    let now = belay_store::now_ms();
    let (y, m, d) = belay_store::model_meter::utc_date(now);
    let (day, month) = (format!("{y:04}-{m:02}-{d:02}"), format!("{y:04}-{m:02}"));
    for (meter, scope, period, amount) in [
        ("model_calls", "deployment", day.as_str(), 2i64),
        ("model_cost_month", "deployment", month.as_str(), 550_000),
        ("model_cost_change", "chg_old", "all", 450_000),
    ] {
        sqlx::query(
            "insert into model_usage_counters (meter, scope, period, amount, updated_at) values ($1, $2, $3, $4, $5)",
        )
        .bind(meter)
        .bind(scope)
        .bind(period)
        .bind(amount)
        .bind(now)
        .execute(&pool)
        .await
        .unwrap();
    }
    pool.close().await;
    assert!(db.store.migrate().await.unwrap() >= 1);
    let s = &db.store;
    assert_eq!(s.model_calls_on(now).await.unwrap(), 2);
    assert!((s.model_cost_in_month(now).await.unwrap() - 0.55).abs() < 1e-9);
    assert!((s.change_model_cost(&ChangeId::from("chg_old")).await.unwrap() - 0.45).abs() < 1e-9);
    // The limits still count what was carried over: 0.45 of the Change's 0.5 is spent.
    let refused = s
        .reserve_model_call(&ChangeId::from("chg_old"), 0.1, LIMITS, now)
        .await
        .unwrap();
    assert!(refused.unwrap_err().contains("Change budget"));
    // The old table is gone.
    let pool = sqlx::AnyPool::connect(&db.url).await.unwrap();
    assert!(
        sqlx::query("select count(*) from model_usage_counters")
            .fetch_one(&pool)
            .await
            .is_err()
    );
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn model_meters_carry_over_into_usage_counters_on_sqlite() {
    model_meters_carry_over(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn model_meters_carry_over_into_usage_counters_on_postgres() {
    model_meters_carry_over(Backend::Postgres).await;
}

on_both!(
    a_conflict_with_a_bad_citation_writes_nothing_and_a_fork_required_one_gives_three_siblings,
    threads = 4,
    |s: Store| async move {
        let w = world(&s).await;
        let bad = conflict(&w, ConflictStatus::ForkRequired, "src/a.ts");
        match s.record_conflict(&w.alice, &w.change, &bad, &w.paths).await {
            Err(StoreError::Invalid(v)) => assert_eq!(
                (v.field.as_str(), v.refused),
                ("sides[1].paths[0]", belay_domain::validation::Refused::Invalid)
            ),
            other => panic!("{other:?}"),
        }
        let good = conflict(&w, ConflictStatus::ForkRequired, "src/b.ts");
        let (bob, _) = s.create_account("bob").await.unwrap();
        assert!(matches!(
            s.record_conflict(&bob.id, &w.change, &good, &w.paths).await,
            Err(StoreError::NotFound { .. })
        ));
        s.record_conflict(&w.alice, &w.change, &good, &w.paths).await.unwrap();
        let round = s.start_verification_round(&w.alice, &w.change).await.unwrap();
        let sets: Vec<Vec<String>> = round
            .iter()
            .map(|k| k.change_set_ids.iter().map(|c| c.to_string()).collect())
            .collect();
        assert_eq!(
            sets,
            vec![
                vec![w.sets[0].clone()],
                vec![w.sets[1].clone()],
                vec![w.sets[0].clone(), w.sets[1].clone()]
            ]
        );
        let group = s
            .sibling_group(&CandidateId::from(round[0].id.as_str()))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(group.len(), 3);

        // Every sibling pending but one: that one's run ends.
        s.set_candidate_status(
            &CandidateId::from(round[0].id.as_str()),
            &[CandidateStatus::Composing],
            CandidateStatus::Verified,
            None,
        )
        .await
        .unwrap();
        assert_eq!(
            s.claim_selection(&CandidateId::from(round[0].id.as_str()), "verify-a")
                .await
                .unwrap(),
            SelectionStep::Pending
        );
        for k in &round[1..] {
            s.set_candidate_status(&k.id, &[CandidateStatus::Composing], CandidateStatus::Verified, None)
                .await
                .unwrap();
        }
        // Eight runs claim at once: exactly one holds the claim.
        let mut handles = Vec::new();
        for i in 0..8 {
            let s = s.clone();
            let id = round[i % 3].id.to_string();
            handles.push(tokio::spawn(async move {
                (
                    i,
                    s.claim_selection(&CandidateId::from(id.as_str()), &format!("verify-{i}"))
                        .await
                        .unwrap(),
                )
            }));
        }
        let mut claimed = Vec::new();
        for h in handles {
            let (i, step) = h.await.unwrap();
            match step {
                SelectionStep::Claimed { .. } => claimed.push(i),
                SelectionStep::Stopped => {}
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(claimed.len(), 1, "{claimed:?}");
        let claimant = format!("verify-{}", claimed[0]);
        // A retry by the claimant continues; another run stops.
        assert!(matches!(
            s.claim_selection(&CandidateId::from(round[2].id.as_str()), &claimant)
                .await
                .unwrap(),
            SelectionStep::Claimed { .. }
        ));
        assert_eq!(
            s.claim_selection(&CandidateId::from(round[2].id.as_str()), "verify-late")
                .await
                .unwrap(),
            SelectionStep::Stopped
        );
        assert_eq!(
            s.apply_selection(&CandidateId::from(round[0].id.as_str()), "verify-late", None)
                .await
                .unwrap(),
            SelectionDone::AlreadyApplied
        );
        // No plan, so nothing can ship: the Change fails, with one receipt.
        assert_eq!(
            s.apply_selection(&CandidateId::from(round[0].id.as_str()), &claimant, None)
                .await
                .unwrap(),
            SelectionDone::Failed
        );
        assert_eq!(
            s.apply_selection(&CandidateId::from(round[0].id.as_str()), &claimant, None)
                .await
                .unwrap(),
            SelectionDone::AlreadyApplied
        );
        let receipts = s.list_receipts(&w.alice, &w.change).await.unwrap();
        assert_eq!(receipts.len(), 1);
        assert_eq!(receipts[0].kind, ReceiptKind::CandidateSelection);
        assert_eq!(
            s.get_change(&w.alice, &w.change).await.unwrap().unwrap().status,
            ChangeStatus::Failed
        );
        for k in s.list_candidates(&w.alice, &w.change).await.unwrap() {
            assert!(
                matches!(k.selection, Some(belay_domain::selection::SelectionJson::Decided(_))),
                "{k:?}"
            );
        }
    }
);

/// The Change is back with its agents and has its one repair receipt: its objective.
async fn the_one_repair(s: &Store, w: &World) -> String {
    assert_eq!(
        s.get_change(&w.alice, &w.change).await.unwrap().unwrap().status,
        ChangeStatus::Running
    );
    let receipts = s.list_receipts(&w.alice, &w.change).await.unwrap();
    assert_eq!(receipts.len(), 1);
    assert_eq!(receipts[0].kind, ReceiptKind::AcceptanceRepair);
    receipts[0].outcome["objective"].as_str().unwrap().to_owned()
}

on_both!(
    a_rejection_with_a_reason_gets_one_repair_task_and_the_next_shortfall_goes_to_a_person,
    threads = 4,
    |s: Store| async move {
        let w = world(&s).await;
        let k = s.start_verification_round(&w.alice, &w.change).await.unwrap().remove(0);
        assert_eq!(s.repair_after_rejection(&k.id, Some("  ")).await.unwrap(), None);
        let task = s
            .repair_after_rejection(&k.id, Some("the list is unsorted"))
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let tasks = s.list_tasks(&w.alice, &w.change).await.unwrap();
        let repair = tasks.iter().find(|t| t.id == task.as_str()).unwrap();
        assert_eq!(repair.key, "repair");
        assert_eq!(repair.dependencies, vec!["a".to_string(), "b".to_string()]);
        let objective = the_one_repair(&s, &w).await;
        assert!(objective.contains("the list is unsorted"));
        let events = s.events(0, Some(&w.change), 100).await.unwrap();
        assert!(events.iter().any(|e| e.kind == "task.repair_requested"));

        let second = s
            .repair_after_rejection(&k.id, Some("still unsorted"))
            .await
            .unwrap()
            .unwrap();
        assert!(second.unwrap_err().contains("already had its repair"));
        assert_eq!(
            s.get_change(&w.alice, &w.change).await.unwrap().unwrap().status,
            ChangeStatus::AwaitingApproval
        );
        assert_eq!(s.list_receipts(&w.alice, &w.change).await.unwrap().len(), 1);
    }
);

/// A Candidate composed with `plan` and rejected by the gate for `reason`.
async fn gate_rejects(s: &Store, id: &str, plan: &belay_domain::plan::VerificationPlan, reason: &str) -> bool {
    assert!(
        s.record_composition(&CandidateId::from(id), C2, C3, plan)
            .await
            .unwrap()
    );
    s.set_candidate_status(
        &CandidateId::from(id),
        &[CandidateStatus::Verifying],
        CandidateStatus::Rejected,
        Some(reason),
    )
    .await
    .unwrap()
}

on_both!(
    a_lone_candidate_the_gate_rejects_gets_one_repair_task_and_the_next_goes_to_a_person,
    threads = 4,
    |s: Store| async move {
        use belay_domain::check::CheckId;
        use belay_domain::plan::{PlannedCheck, VerificationPlan};
        let w = world(&s).await;
        let plan = VerificationPlan {
            policy: belay_domain::policy::DEFAULT_POLICY.stamp(),
            risk_tier: Some(RiskTier::Low),
            checks: vec![PlannedCheck {
                kind: CheckId::Browser.kind(),
                timeout_ms: CheckId::Browser.timeout_ms(),
                check_id: CheckId::Browser,
                required: true,
                limit: None,
                procedure: None,
                reasons: vec![],
            }],
            protected_invariants: vec![],
            human_gates: vec![],
        };
        let reason = "Required checks not satisfied: browser (missing)";
        // While a second Candidate of the Change can still ship, the first's rejection waits.
        let k = s.start_verification(&w.alice, &w.change).await.unwrap();
        let other = s.compose_candidate(&w.alice, &w.change, &w.sets[..1]).await.unwrap();
        assert!(gate_rejects(&s, &k.id, &plan, reason).await);
        assert!(s.list_receipts(&w.alice, &w.change).await.unwrap().is_empty());
        // The last one standing: the one repair, in the rejection's transaction.
        assert!(gate_rejects(&s, &other.id, &plan, reason).await);
        let tasks = s.list_tasks(&w.alice, &w.change).await.unwrap();
        let repair = tasks.iter().find(|t| t.key == "repair").expect("a repair Task");
        assert_eq!(
            repair.dependencies,
            vec!["a".to_string()],
            "the Tasks its ChangeSets are of"
        );
        let objective = the_one_repair(&s, &w).await;
        assert!(
            objective.contains("failed: Required checks not satisfied: browser (missing)"),
            "{objective}"
        );
        assert!(
            objective.contains("- browser (missing): no Evidence was recorded"),
            "{objective}"
        );
        assert!(objective.contains("Reproduce the failure"), "{objective}");
        let events = s.events(0, Some(&w.change), 100).await.unwrap();
        assert_eq!(events.iter().filter(|e| e.kind == "task.repair_requested").count(), 1);
        // A retried rejection changes nothing.
        assert!(
            !s.set_candidate_status(
                &other.id,
                &[CandidateStatus::Verifying],
                CandidateStatus::Rejected,
                Some(reason)
            )
            .await
            .unwrap()
        );
        assert_eq!(s.list_receipts(&w.alice, &w.change).await.unwrap().len(), 1);

        // The repair's Candidate fails too: a person, and no second repair Task.
        let again = s.start_verification(&w.alice, &w.change).await.unwrap();
        assert!(gate_rejects(&s, &again.id, &plan, reason).await);
        assert_eq!(
            s.get_change(&w.alice, &w.change).await.unwrap().unwrap().status,
            ChangeStatus::AwaitingApproval
        );
        let tasks = s.list_tasks(&w.alice, &w.change).await.unwrap();
        assert_eq!(tasks.iter().filter(|t| t.key == "repair").count(), 1);
        assert_eq!(s.list_receipts(&w.alice, &w.change).await.unwrap().len(), 1);
        let events = s.events(0, Some(&w.change), 100).await.unwrap();
        let asked: Vec<_> = events.iter().filter(|e| e.kind == "approval.requested").collect();
        assert_eq!(asked.len(), 1);
        assert!(
            asked[0].payload["reason"]
                .as_str()
                .unwrap()
                .starts_with("The change already had its repair."),
            "{:?}",
            asked[0].payload
        );
        // A rejection for another reason (composition) is nobody's repair.
        let w2 = world(&s).await;
        let k2 = s
            .start_verification(&AccountId::from(w2.alice.as_str()), &ChangeId::from(w2.change.as_str()))
            .await
            .unwrap();
        assert!(
            s.set_candidate_status(
                &CandidateId::from(k2.id.as_str()),
                &[CandidateStatus::Composing],
                CandidateStatus::Rejected,
                Some("merge conflict: the ChangeSet of task b conflicts in src/a.ts")
            )
            .await
            .unwrap()
        );
        assert!(
            s.list_receipts(&AccountId::from(w2.alice.as_str()), &ChangeId::from(w2.change.as_str()))
                .await
                .unwrap()
                .is_empty()
        );
    }
);

on_both!(
    a_sibling_the_gate_rejects_is_left_to_the_selection,
    threads = 4,
    |s: Store| async move {
        let w = world(&s).await;
        s.record_conflict(
            &w.alice,
            &w.change,
            &conflict(&w, ConflictStatus::Confirmed, "src/b.ts"),
            &w.paths,
        )
        .await
        .unwrap();
        let round = s.start_verification_round(&w.alice, &w.change).await.unwrap();
        assert_eq!(round.len(), 2);
        let plan = belay_domain::plan::VerificationPlan {
            policy: belay_domain::policy::DEFAULT_POLICY.stamp(),
            risk_tier: Some(RiskTier::Low),
            checks: vec![],
            protected_invariants: vec![],
            human_gates: vec![],
        };
        for k in &round {
            assert!(gate_rejects(&s, k.id.as_str(), &plan, "Required checks not satisfied: unit (failed)").await);
        }
        assert!(s.list_receipts(&w.alice, &w.change).await.unwrap().is_empty());
        assert_eq!(
            s.get_change(&w.alice, &w.change).await.unwrap().unwrap().status,
            ChangeStatus::Verifying
        );
    }
);

on_both!(
    a_conflict_between_a_ui_and_an_api_task_is_integrated_once_then_the_pair_forks,
    threads = 4,
    |s: Store| async move {
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
        let change = c.id.as_str().to_owned();
        let mut ids = Vec::new();
        for (key, resource) in [("api", "todos:api"), ("ui", "todos:ui")] {
            let t = s
                .add_task(
                    &alice.id,
                    &ChangeId::from(change.as_str()),
                    &TaskInput {
                        key: key.into(),
                        kind: TaskKind::Implement,
                        title: key.into(),
                        semantic_resources: vec![resource.into()],
                        dependencies: vec![],
                    },
                )
                .await
                .unwrap();
            ids.push(t.id.as_str().to_owned());
        }
        let publish = |task: String, commit: &'static str| {
            let s = s.clone();
            let alice = alice.id.clone();
            async move {
                let run = s.start_task_run(&alice, &TaskId::from(task.as_str())).await.unwrap();
                s.record_change_set(
                    &alice,
                    &run.id,
                    &ChangeSetInput {
                        commit: commit.into(),
                        contract_changes: vec![],
                        data_changes: vec![],
                    },
                )
                .await
                .unwrap()
                .id
                .to_string()
            }
        };
        let api_cs = publish(ids[0].clone(), C2).await;
        let ui_cs = publish(ids[1].clone(), C3).await;
        let mut paths = BTreeMap::new();
        paths.insert(api_cs.clone(), vec!["src/api.ts".to_string()]);
        paths.insert(ui_cs.clone(), vec!["public/app.js".to_string()]);
        s.start_verification_round(&alice.id, &ChangeId::from(change.as_str()))
            .await
            .unwrap();
        let finding = |ui: &str| ConflictInput {
            status: ConflictStatus::Confirmed,
            sides: vec![
                ConflictSide {
                    task_id: ids[1].clone().into(),
                    change_set_ids: vec![ui.to_owned().into()],
                    paths: vec!["public/app.js".into()],
                    contract_lines: vec![],
                },
                ConflictSide {
                    task_id: ids[0].clone().into(),
                    change_set_ids: vec![api_cs.clone().into()],
                    paths: vec!["src/api.ts".into()],
                    contract_lines: vec![],
                },
            ],
            summary: None,
        };
        let got = s
            .record_conflict(&alice.id, &ChangeId::from(change.as_str()), &finding(&ui_cs), &paths)
            .await
            .unwrap();
        let integ = got.integrate.expect("complementary Tasks are integrated");
        assert_eq!((integ.dependent.as_str(), integ.depends_on.as_str()), ("ui", "api"));
        let tasks = s.list_tasks(&alice.id, &ChangeId::from(change.as_str())).await.unwrap();
        assert_eq!(
            tasks.iter().find(|t| t.key == "ui").unwrap().dependencies,
            vec!["api".to_string()]
        );
        assert_eq!(
            s.get_change(&alice.id, &ChangeId::from(change.as_str()))
                .await
                .unwrap()
                .unwrap()
                .status,
            ChangeStatus::Running
        );
        let receipts = s
            .list_receipts(&alice.id, &ChangeId::from(change.as_str()))
            .await
            .unwrap();
        assert_eq!(receipts.len(), 1);
        assert_eq!(receipts[0].kind, ReceiptKind::ConflictIntegration);
        assert_eq!(receipts[0].outcome["rejectedChangeSets"], serde_json::json!([ui_cs]));
        let events = s.events(0, Some(&change), 100).await.unwrap();
        assert!(events.iter().any(|e| e.kind == "conflict.integrated"));
        assert!(
            events
                .iter()
                .any(|e| e.kind == "task.reset" && e.payload["key"] == "ui")
        );
        // The UI ChangeSet is set aside: the next round holds the API's alone.
        let round = s
            .start_verification_round(&alice.id, &ChangeId::from(change.as_str()))
            .await
            .unwrap();
        assert_eq!(round.len(), 1);
        assert_eq!(
            round[0]
                .change_set_ids
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>(),
            vec![api_cs.clone()]
        );

        // The UI Task runs again; the same pair conflicting again follows the fork rule.
        let ui_again = publish(ids[1].clone(), C1).await;
        paths.insert(ui_again.clone(), vec!["public/app.js".to_string()]);
        let again = s
            .record_conflict(&alice.id, &ChangeId::from(change.as_str()), &finding(&ui_again), &paths)
            .await
            .unwrap();
        assert!(again.integrate.is_none());
        let round = s
            .start_verification_round(&alice.id, &ChangeId::from(change.as_str()))
            .await
            .unwrap();
        assert_eq!(round.len(), 2, "one Candidate per side");
        assert_eq!(
            s.list_receipts(&alice.id, &ChangeId::from(change.as_str()))
                .await
                .unwrap()
                .len(),
            1
        );
    }
);
