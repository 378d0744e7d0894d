//! Budgets (decision 0054), on SQLite and on PostgreSQL: the ledger a plan is saved with, the
//! top-up's reservation and its holds, settlement to the reported cost, the release of a failed or
//! cancelled job and the retry that carries its reservation, runs by hand, the estimates' means,
//! and the one conditional update under concurrent reservations.

use belay_domain::budget::{BudgetInput, Micros, Reported, Usage};
use belay_domain::catalogue::{AdapterSpec, HarnessInput, ListPrice, ModelInput, TestCaseVersionInput, TestType};
use belay_domain::coverage::{CoveragePlanInput, OuterAxis};
use belay_domain::ids::{AccountId, JobId, PlanId};
use belay_domain::job::{CasePin, Combination, JobStatus, Origin};
use belay_domain::top_up::{Reason, Skipped, TopUpAnswer};
use belay_store::jobs::{Completion, NewJob, Transition};
use belay_store::{Store, budget, coverage, on_both};

fn pin(slug: &str) -> CasePin {
    CasePin {
        slug: slug.into(),
        version: "1.0.0".into(),
        variant: "default".into(),
        engine: "none".into(),
    }
}

fn combo(h: &str) -> Combination {
    Combination::Harness {
        harness: h.into(),
        model: "m".into(),
        provider: None,
    }
}

fn usd(x: f64) -> Micros {
    Micros((x * 1e6).round() as i64)
}

/// Harness `x` (cap 100), model `m` at $1 / $2 per million tokens (a list-price estimate of
/// 200k × $1 + 20k × $2 = $0.24), cases a to d.
async fn catalogue(s: &Store) {
    s.create_harness(&HarnessInput {
        provider: None,
        name: "x".into(),
        provider_routed: false,
        max_parallelism: 100,
        adapter: AdapterSpec::Script {
            script: "true".into(),
            timeout_seconds: 10,
            sandbox: false,
        },
    })
    .await
    .unwrap();
    s.create_model(&ModelInput {
        provider: None,
        max_parallelism: None,
        id: "m".into(),
        context_window: Some(1000),
        list_price: Some(ListPrice {
            input_per_mtok_usd: 1.0,
            output_per_mtok_usd: 2.0,
        }),
    })
    .await
    .unwrap();
    for slug in ["a", "b", "c", "d"] {
        s.ingest_test_case_version(&TestCaseVersionInput {
            slug: slug.into(),
            version: "1.0.0".into(),
            test_type: TestType::Standard,
            variants: vec!["default".into()],
            engines: vec![],
            title: None,
            review_domains: None,
        })
        .await
        .unwrap();
    }
}

fn plan_input(cases: &[&str], budget: Option<f64>, estimated: Option<f64>) -> CoveragePlanInput {
    CoveragePlanInput {
        name: "p".into(),
        case_groups: vec![],
        combo_groups: vec![],
        cases: cases.iter().map(|c| pin(c)).collect(),
        combinations: vec![combo("x")],
        runs_per_cell: 1,
        outer_axis: OuterAxis::Case,
        buffer_target: Some(belay_domain::buffer::BufferTarget::Unbounded {}),
        auto_top_up: false,
        paused: false,
        budget: budget.map(|usd| BudgetInput { usd }),
        estimated_run_usd: estimated,
    }
    .validated()
    .unwrap()
}

async fn top_up(s: &Store, account: &AccountId, plan: &PlanId, topup_id: &str) -> TopUpAnswer {
    let mut tx = s.begin().await.unwrap();
    let r = coverage::resolve_plan(&mut tx, account, plan).await.unwrap().unwrap();
    let answer = coverage::enqueue_top_up(
        &mut tx,
        account,
        &Origin::Plan(plan.to_string()),
        &r.cells,
        r.plan.runs_per_cell,
        r.target,
        topup_id,
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    answer
}

/// Claims, starts and runs job `id`.
async fn run(s: &Store, id: &JobId) {
    for i in 0..50 {
        if s.get_job(id).await.unwrap().unwrap().status == JobStatus::Dispatched {
            break;
        }
        s.claim(&format!("claim-{id}-{i}")).await.unwrap();
    }
    for to in [JobStatus::Starting, JobStatus::Running] {
        assert!(matches!(s.advance_job(id, to).await.unwrap(), Transition::Moved(_)));
    }
}

async fn complete(s: &Store, id: &JobId, reported: Reported) {
    run(s, id).await;
    assert!(matches!(
        s.complete_job_reported(id, true, &[], None, reported).await.unwrap(),
        Completion::Recorded(_)
    ));
}

async fn spend(s: &Store, plan: &PlanId) -> (Micros, Micros) {
    let (l, _) = s.ledger(&Origin::Plan(plan.to_string())).await.unwrap();
    (l.spent, l.reserved)
}

on_both!(
    a_top_up_reserves_what_it_emits_holds_what_would_pass_and_completion_settles_to_the_reported_cost,
    |s: Store| async move {
        catalogue(&s).await;
        let (alice, _) = s.create_account("alice").await.unwrap();
        let mut tx = s.begin().await.unwrap();
        // Three list-price estimates ($0.72) and a little: a, b and c fit, d does not.
        let p = coverage::create_plan(&mut tx, &alice.id, &plan_input(&["a", "b", "c", "d"], Some(0.8), None))
            .await
            .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(p.budget, Some(BudgetInput { usd: 0.8 }));
        assert_eq!(p.spend.budget, Some(usd(0.8)));
        let first = top_up(&s, &alice.id, &p.id, "t1").await;
        assert_eq!(first.enqueued, 3);
        assert_eq!(first.skipped, None);
        assert_eq!(first.held.len(), 1);
        assert_eq!(first.held[0].case.slug, "d");
        assert_eq!(first.held[0].reason, Reason::Budget);
        assert_eq!(first.held[0].estimate_usd, Some(usd(0.24)));
        assert_eq!(spend(&s, &p.id).await, (Micros::ZERO, usd(0.72)));
        // A retried enqueue of the same top-up reserves nothing twice.
        assert_eq!(top_up(&s, &alice.id, &p.id, "t1").await, first);
        assert_eq!(spend(&s, &p.id).await, (Micros::ZERO, usd(0.72)));

        // a reports its cost; b its usage (100k × $1 + 10k × $2 = $0.12); c nothing (its estimate).
        let ids: Vec<JobId> = first.launched.iter().map(|l| l.job_ids[0].clone()).collect();
        complete(&s, &ids[0], Reported::from_manifest(Some(0.05), None)).await;
        let usage = Usage {
            input_tokens: 100_000,
            output_tokens: 10_000,
        };
        complete(&s, &ids[1], Reported::from_manifest(None, Some(usage))).await;
        complete(&s, &ids[2], Reported::default()).await;
        assert_eq!(spend(&s, &p.id).await, (usd(0.05 + 0.12 + 0.24), Micros::ZERO));
        // The plan reads the same ledger.
        let mut tx = s.begin_read().await.unwrap();
        let read = coverage::get_plan(&mut tx, &alice.id, &p.id).await.unwrap().unwrap();
        tx.commit().await.unwrap();
        assert_eq!((read.spend.spent, read.spend.reserved), (usd(0.41), Micros::ZERO));

        // d's estimate is now the combination's measured mean, (0.05 + 0.12) / 2 = $0.085, which
        // fits the $0.39 left.
        let second = top_up(&s, &alice.id, &p.id, "t2").await;
        assert_eq!(second.enqueued, 1, "{second:?}");
        assert_eq!(spend(&s, &p.id).await, (usd(0.41), usd(0.085)));
    }
);

on_both!(
    a_top_up_that_emits_nothing_for_the_budget_answers_skipped_budget_and_raising_it_continues,
    |s: Store| async move {
        catalogue(&s).await;
        let (alice, _) = s.create_account("alice").await.unwrap();
        let mut tx = s.begin().await.unwrap();
        let mut input = plan_input(&["a", "b"], Some(0.5), Some(1.0));
        let p = coverage::create_plan(&mut tx, &alice.id, &input).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(p.estimated_run_usd, Some(1.0));
        let held = top_up(&s, &alice.id, &p.id, "t1").await;
        assert_eq!((held.enqueued, held.skipped), (0, Some(Skipped::Budget)));
        assert_eq!(held.held.len(), 2);
        assert_eq!(spend(&s, &p.id).await, (Micros::ZERO, Micros::ZERO));
        input.budget = Some(BudgetInput { usd: 1.0 });
        let mut tx = s.begin().await.unwrap();
        coverage::update_plan(&mut tx, &alice.id, &p.id, &input)
            .await
            .unwrap()
            .unwrap();
        tx.commit().await.unwrap();
        let next = top_up(&s, &alice.id, &p.id, "t2").await;
        assert_eq!((next.enqueued, next.skipped, next.held.len()), (1, None, 1));
        // Lowering the budget below what is reserved holds everything and keeps the ledger.
        input.budget = Some(BudgetInput { usd: 0.0 });
        let mut tx = s.begin().await.unwrap();
        let lowered = coverage::update_plan(&mut tx, &alice.id, &p.id, &input)
            .await
            .unwrap()
            .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(lowered.spend.reserved, usd(1.0));
        let none = top_up(&s, &alice.id, &p.id, "t3").await;
        assert_eq!(none.skipped, Some(Skipped::Budget));
    }
);

on_both!(
    a_failed_or_cancelled_job_releases_its_reservation_and_a_retry_carries_it,
    |s: Store| async move {
        catalogue(&s).await;
        let (alice, _) = s.create_account("alice").await.unwrap();
        let mut tx = s.begin().await.unwrap();
        let p = coverage::create_plan(&mut tx, &alice.id, &plan_input(&["a", "b"], Some(10.0), Some(1.0)))
            .await
            .unwrap();
        tx.commit().await.unwrap();
        let answer = top_up(&s, &alice.id, &p.id, "t1").await;
        let ids: Vec<JobId> = answer.launched.iter().map(|l| l.job_ids[0].clone()).collect();
        assert_eq!(spend(&s, &p.id).await, (Micros::ZERO, usd(2.0)));
        // An infrastructure failure is retried: the retry holds the same reservation.
        run(&s, &ids[0]).await;
        let failed = s.fail_job(&ids[0], "the worker went away", true).await.unwrap();
        let retry = failed.retry.expect("a retry");
        assert_eq!(spend(&s, &p.id).await, (Micros::ZERO, usd(2.0)));
        // A retried call of the same failure changes nothing.
        s.fail_job(&ids[0], "the worker went away", true).await.unwrap();
        assert_eq!(spend(&s, &p.id).await, (Micros::ZERO, usd(2.0)));
        // Cancelling the retry and the other job releases both; a second cancel nothing more.
        assert!(s.cancel_job(&retry.id).await.unwrap().cancelled);
        assert!(s.cancel_job(&ids[1]).await.unwrap().cancelled);
        assert!(!s.cancel_job(&ids[1]).await.unwrap().cancelled);
        assert_eq!(spend(&s, &p.id).await, (Micros::ZERO, Micros::ZERO));
        // A task failure that is not retried releases too.
        let again = top_up(&s, &alice.id, &p.id, "t2").await;
        let id = again.launched[0].job_ids[0].clone();
        run(&s, &id).await;
        let f = s.fail_job(&id, "the agent gave up", false).await.unwrap();
        assert!(f.retry.is_none());
        assert_eq!(spend(&s, &p.id).await, (Micros::ZERO, usd(1.0)), "b is still reserved");
    }
);

on_both!(
    a_run_launched_by_hand_is_never_budgeted_but_its_reported_cost_feeds_the_estimate,
    |s: Store| async move {
        catalogue(&s).await;
        let (alice, _) = s.create_account("alice").await.unwrap();
        let mut tx = s.begin().await.unwrap();
        let p = coverage::create_plan(&mut tx, &alice.id, &plan_input(&["a", "b"], Some(1.0), Some(0.9)))
            .await
            .unwrap();
        tx.commit().await.unwrap();
        let hand = s
            .enqueue(NewJob {
                case: pin("a"),
                combination: combo("x"),
                gg_config_name: None,
                capabilities: None,
                test_type: None,
                user_id: Some(alice.id.clone()),
                origin: None,
                attempt: 1,
                retry_of: None,
            })
            .await
            .unwrap();
        complete(&s, &hand.id, Reported::from_manifest(Some(0.4), None)).await;
        assert_eq!(spend(&s, &p.id).await, (Micros::ZERO, Micros::ZERO));
        // a is done by hand; b's estimate is the combination's mean, $0.40, not the plan's $0.90.
        let answer = top_up(&s, &alice.id, &p.id, "t1").await;
        assert_eq!(answer.enqueued, 1);
        assert_eq!(answer.launched[0].case.slug, "b");
        assert_eq!(spend(&s, &p.id).await, (Micros::ZERO, usd(0.4)));
        // A run by hand that reports nothing has no cost and moves no mean.
        let quiet = s
            .enqueue(NewJob {
                case: pin("c"),
                combination: combo("x"),
                gg_config_name: None,
                capabilities: None,
                test_type: None,
                user_id: None,
                origin: None,
                attempt: 1,
                retry_of: None,
            })
            .await
            .unwrap();
        complete(&s, &quiet.id, Reported::default()).await;
        let mut tx = s.begin_read().await.unwrap();
        let r = coverage::resolve_plan(&mut tx, &alice.id, &p.id)
            .await
            .unwrap()
            .unwrap();
        let m = coverage::cells_matrix(&mut tx, &alice.id, &r.cells, 2).await.unwrap();
        let estimates = budget::cell_estimates(&mut tx, &m.cells, None, &Default::default())
            .await
            .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(estimates.values().copied().collect::<Vec<_>>(), [usd(0.4), usd(0.4)]);
    }
);

on_both!(
    concurrent_reservations_never_pass_the_budget,
    threads = 4,
    |s: Store| async move {
        let (alice, _) = s.create_account("alice").await.unwrap();
        let mut tx = s.begin().await.unwrap();
        let p = coverage::create_plan(&mut tx, &alice.id, &plan_input(&["a"], Some(5.0), None))
            .await
            .unwrap();
        tx.commit().await.unwrap();
        let origin = Origin::Plan(p.id.to_string());
        let mut tries = tokio::task::JoinSet::new();
        for _ in 0..40 {
            let (s, origin) = (s.clone(), origin.clone());
            tries.spawn(async move { s.reserve(&origin, usd(0.5)).await.unwrap() });
        }
        let granted = tries.join_all().await.into_iter().filter(|g| *g).count();
        assert_eq!(granted, 10);
        assert_eq!(spend(&s, &p.id).await, (Micros::ZERO, usd(5.0)));
        assert!(!s.reserve(&origin, Micros(1)).await.unwrap());
        assert!(s.reserve(&origin, Micros::ZERO).await.unwrap());
    }
);
