//! The coverage repository functions, on SQLite and on PostgreSQL: groups, plans, settings, the
//! grouped counts the matrix reads, the top-up claim and its idempotent enqueue, the scoped
//! queue's runs and the origin-scoped cancel.

use belay_domain::buffer::BufferTarget;
use belay_domain::catalogue::{
    AdapterSpec, GgConfigInput, HarnessInput, ListPrice, ModelInput, TestCaseVersionInput, TestType,
};
use belay_domain::coverage::{Cell, CoverageGroupInput, CoveragePlanInput, GroupKind, GroupMember, OuterAxis, cross};
use belay_domain::ids::{AccountId, JobId, PlanId, RunId};
use belay_domain::job::{CasePin, Combination, JobStatus, Origin, RetryDecision};
use belay_domain::review::{Rating, ReviewInput};
use belay_domain::top_up::Skipped;
use belay_store::coverage::{self, Claim, Feed, TOP_UP_LEASE_MS};
use belay_store::jobs::{Completion, NewJob, Transition};
use belay_store::on_both;
use belay_store::{Backend, Store};
use std::collections::BTreeMap;

fn pin(slug: &str, version: &str, engine: &str) -> CasePin {
    CasePin {
        slug: slug.into(),
        version: version.into(),
        variant: "default".into(),
        engine: engine.into(),
    }
}

fn combo(h: &str) -> Combination {
    Combination::Harness {
        harness: h.into(),
        model: "m".into(),
        provider: None,
    }
}

async fn catalogue(s: &Store, harnesses: &[(&str, i64)]) {
    for (name, cap) in harnesses {
        s.create_harness(&HarnessInput {
            provider: None,
            name: (*name).into(),
            provider_routed: false,
            max_parallelism: *cap,
            adapter: AdapterSpec::Script {
                script: "true".into(),
                timeout_seconds: 10,
                sandbox: false,
            },
        })
        .await
        .unwrap();
    }
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
    for (slug, tt) in [
        ("a", TestType::Standard),
        ("b", TestType::Standard),
        ("perf", TestType::Performance),
    ] {
        s.ingest_test_case_version(&TestCaseVersionInput {
            slug: slug.into(),
            version: "1.0.0".into(),
            test_type: tt,
            variants: vec!["default".into()],
            engines: vec![],
            title: None,
            review_domains: None,
        })
        .await
        .unwrap();
    }
}

fn hand_job(case: CasePin, c: Combination, user: Option<&str>) -> NewJob {
    NewJob {
        case,
        combination: c,
        gg_config_name: None,
        capabilities: None,
        test_type: None,
        user_id: user.map(Into::into),
        origin: None,
        attempt: 1,
        retry_of: None,
    }
}

async fn complete(s: &Store, id: &str) -> String {
    // The job must be dispatched first: claim until it is.
    for i in 0..50 {
        if s.get_job(&JobId::from(id)).await.unwrap().unwrap().status == JobStatus::Dispatched {
            break;
        }
        s.claim(&format!("claim-{id}-{i}")).await.unwrap();
    }
    assert!(matches!(
        s.advance_job(&JobId::from(id), JobStatus::Starting).await.unwrap(),
        Transition::Moved(_)
    ));
    assert!(matches!(
        s.advance_job(&JobId::from(id), JobStatus::Running).await.unwrap(),
        Transition::Moved(_)
    ));
    match s.complete_job(&JobId::from(id), true, &[]).await.unwrap() {
        Completion::Recorded(r) => r.id.to_string(),
        other => panic!("{other:?}"),
    }
}

fn plan_input(
    cases: Vec<CasePin>,
    combos: Vec<Combination>,
    runs: i64,
    target: Option<BufferTarget>,
) -> CoveragePlanInput {
    CoveragePlanInput {
        name: "p".into(),
        case_groups: vec![],
        combo_groups: vec![],
        cases,
        combinations: combos,
        runs_per_cell: runs,
        outer_axis: OuterAxis::Case,
        buffer_target: target,
        auto_top_up: true,
        paused: false,
    }
    .validated()
    .unwrap()
}

async fn review(s: &Store, run: &str, account: &str) {
    s.submit_review(
        &RunId::from(run),
        &AccountId::from(account),
        &ReviewInput {
            ratings: Some(BTreeMap::from([("code".to_string(), Rating::Great)])),
            category: None,
            note: None,
        },
    )
    .await
    .unwrap();
}

on_both!(
    groups_are_the_owners_and_plans_resolve_their_pointers_on_every_read,
    |s: Store| async move {
        let (alice, _) = s.create_account("alice").await.unwrap();
        let (bob, _) = s.create_account("bob").await.unwrap();
        let mut tx = s.begin().await.unwrap();
        let input = CoverageGroupInput {
            name: "models".into(),
            kind: GroupKind::Combo,
            members: vec![GroupMember::Combination(combo("x"))],
        };
        let g = coverage::create_group(&mut tx, &alice.id, &input).await.unwrap();
        assert!(g.id.as_str().starts_with("grp_"));
        assert!(coverage::get_group(&mut tx, &bob.id, &g.id).await.unwrap().is_none());
        assert!(
            coverage::update_group(&mut tx, &bob.id, &g.id, &input)
                .await
                .unwrap()
                .is_none()
        );
        assert!(!coverage::delete_group(&mut tx, &bob.id, &g.id).await.unwrap());
        let mut p = plan_input(vec![pin("a", "1.0.0", "none")], vec![], 2, None);
        p.combo_groups = vec![g.id.clone()];
        let plan = coverage::create_plan(&mut tx, &alice.id, &p).await.unwrap();
        assert!(plan.id.as_str().starts_with("plan_"));
        let r = coverage::resolve_plan(&mut tx, &alice.id, &plan.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r.cells.len(), 1);
        assert_eq!(r.target, BufferTarget::Bounded { runs: 10 });
        // Editing the group reshapes the plan.
        let two = CoverageGroupInput {
            members: vec![
                GroupMember::Combination(combo("x")),
                GroupMember::Combination(combo("y")),
            ],
            ..input.clone()
        };
        coverage::update_group(&mut tx, &alice.id, &g.id, &two)
            .await
            .unwrap()
            .unwrap();
        let r = coverage::resolve_plan(&mut tx, &alice.id, &plan.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r.cells.len(), 2);
        // The account's setting is inherited; the plan's own override wins.
        coverage::put_buffer_setting(&mut tx, &alice.id, BufferTarget::Unbounded {})
            .await
            .unwrap();
        let r = coverage::resolve_plan(&mut tx, &alice.id, &plan.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r.target, BufferTarget::Unbounded {});
        p.buffer_target = Some(BufferTarget::Bounded { runs: 0 });
        coverage::update_plan(&mut tx, &alice.id, &plan.id, &p)
            .await
            .unwrap()
            .unwrap();
        let r = coverage::resolve_plan(&mut tx, &alice.id, &plan.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r.target, BufferTarget::Bounded { runs: 0 });
        assert!(coverage::get_plan(&mut tx, &bob.id, &plan.id).await.unwrap().is_none());
        assert_eq!(coverage::list_plans(&mut tx, &bob.id).await.unwrap().len(), 0);
        // A deleted group resolves to nothing.
        assert!(coverage::delete_group(&mut tx, &alice.id, &g.id).await.unwrap());
        let r = coverage::resolve_plan(&mut tx, &alice.id, &plan.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r.cells.len(), 0);
        assert!(coverage::delete_plan(&mut tx, &alice.id, &plan.id).await.unwrap());
        assert!(
            coverage::get_plan(&mut tx, &alice.id, &plan.id)
                .await
                .unwrap()
                .is_none()
        );
        tx.commit().await.unwrap();
        // Every event of the groups, the plan and the setting is Alice's alone, the deletions'
        // too (their rows were gone when they were written).
        let kinds = |events: Vec<belay_store::events::Event>| -> Vec<String> {
            events
                .into_iter()
                .map(|e| e.kind)
                .filter(|k| k.starts_with("coverage_"))
                .collect()
        };
        let alices = kinds(s.events_for(&alice.id, 0, None, 1000).await.unwrap());
        for kind in [
            "coverage_group.created",
            "coverage_group.updated",
            "coverage_group.deleted",
            "coverage_plan.created",
            "coverage_plan.updated",
            "coverage_plan.deleted",
            "coverage_settings.updated",
        ] {
            assert!(alices.iter().any(|k| k == kind), "{kind} in {alices:?}");
        }
        assert_eq!(
            kinds(s.events_for(&bob.id, 0, None, 1000).await.unwrap()),
            Vec::<String>::new()
        );
    }
);

on_both!(
    counts_are_global_and_unreviewed_is_the_requesting_accounts,
    |s: Store| async move {
        catalogue(&s, &[("x", 10)]).await;
        let (alice, _) = s.create_account("alice").await.unwrap();
        let (bob, _) = s.create_account("bob").await.unwrap();
        let cells: Vec<Cell> = cross(
            &[pin("a", "1.0.0", "none"), pin("perf", "1.0.0", "none")],
            &[combo("x")],
            OuterAxis::Case,
        );
        // Bob launches by hand: a run of a's cell, one on another engine, one of perf, one queued.
        let j1 = s
            .enqueue(hand_job(pin("a", "1.0.0", "none"), combo("x"), Some(&bob.id)))
            .await
            .unwrap();
        let j2 = s
            .enqueue(hand_job(pin("a", "1.0.0", "godot"), combo("x"), Some(&bob.id)))
            .await
            .unwrap();
        let j3 = s
            .enqueue(hand_job(pin("perf", "1.0.0", "none"), combo("x"), Some(&bob.id)))
            .await
            .unwrap();
        let r1 = complete(&s, &j1.id).await;
        complete(&s, &j2.id).await;
        complete(&s, &j3.id).await;
        s.enqueue(hand_job(pin("a", "1.0.0", "none"), combo("x"), None))
            .await
            .unwrap();
        review(&s, &r1, &bob.id).await;

        let mut tx = s.begin_read().await.unwrap();
        let m = coverage::cells_matrix(&mut tx, &alice.id, &cells, 3).await.unwrap();
        let a = &m.cells[0];
        assert_eq!((a.completed, a.in_flight, a.unreviewed, a.remaining), (1, 1, 1, 1));
        let perf = &m.cells[1];
        assert_eq!(
            (perf.completed, perf.unreviewed),
            (1, 0),
            "nobody can review a performance run"
        );
        let m = coverage::cells_matrix(&mut tx, &bob.id, &cells, 3).await.unwrap();
        assert_eq!(m.cells[0].unreviewed, 0, "bob reviewed it");
        // A walk reads each lane's cap and global load; the matrix's reads leave the lanes out.
        let walk = coverage::coverage_facts(&mut tx, &alice.id, &cells).await.unwrap();
        assert_eq!((walk.lanes["x"].cap, walk.lanes["x"].load), (10, 1));
        let read = coverage::matrix_facts(&mut tx, &alice.id, &cells).await.unwrap();
        assert!(read.lanes.is_empty());
        assert_eq!(read.counts, walk.counts);
        let q = coverage::unreviewed_runs(&mut tx, &alice.id, &cells).await.unwrap();
        assert_eq!(q.len(), 1);
        assert_eq!(q[0].run_id.to_string(), r1);
        tx.commit().await.unwrap();
    }
);

on_both!(
    a_top_up_claim_is_exclusive_until_released_or_its_lease_ends,
    |s: Store| async move {
        let (alice, _) = s.create_account("alice").await.unwrap();
        let mut tx = s.begin().await.unwrap();
        let plan = coverage::create_plan(&mut tx, &alice.id, &plan_input(vec![], vec![], 1, None))
            .await
            .unwrap();
        let id = plan.id.as_str();
        let t = 1_000_000;
        assert_eq!(
            coverage::claim_top_up(&mut tx, &alice.id, &PlanId::from(id), "one", t, TOP_UP_LEASE_MS)
                .await
                .unwrap(),
            Claim::Claimed
        );
        assert_eq!(
            coverage::claim_holder(&mut tx, Feed::Plan, id).await.unwrap(),
            Some(("one".to_string(), t))
        );
        assert_eq!(
            coverage::claim_top_up(&mut tx, &alice.id, &PlanId::from(id), "one", t + 5, TOP_UP_LEASE_MS)
                .await
                .unwrap(),
            Claim::Claimed,
            "a retried claim"
        );
        assert_eq!(
            coverage::claim_top_up(&mut tx, &alice.id, &PlanId::from(id), "two", t + 10, TOP_UP_LEASE_MS)
                .await
                .unwrap(),
            Claim::Busy
        );
        assert_eq!(
            coverage::claim_top_up(
                &mut tx,
                &alice.id,
                &PlanId::from(id),
                "two",
                t + 5 + TOP_UP_LEASE_MS - 1,
                TOP_UP_LEASE_MS
            )
            .await
            .unwrap(),
            Claim::Busy
        );
        // "one" died without releasing: its lease ends.
        assert_eq!(
            coverage::claim_top_up(
                &mut tx,
                &alice.id,
                &PlanId::from(id),
                "two",
                t + 5 + TOP_UP_LEASE_MS,
                TOP_UP_LEASE_MS
            )
            .await
            .unwrap(),
            Claim::Claimed
        );
        assert!(
            !coverage::release_top_up(&mut tx, &PlanId::from(id), "one")
                .await
                .unwrap(),
            "not one's to release"
        );
        assert!(
            coverage::release_top_up(&mut tx, &PlanId::from(id), "two")
                .await
                .unwrap()
        );
        assert_eq!(coverage::claim_holder(&mut tx, Feed::Plan, id).await.unwrap(), None);
        assert_eq!(
            coverage::claim_top_up(&mut tx, &alice.id, &PlanId::from(id), "three", t, TOP_UP_LEASE_MS)
                .await
                .unwrap(),
            Claim::Claimed
        );
        // A shorter lease, as a worker configured with one reads it: "three" died too.
        assert_eq!(
            coverage::claim_top_up(&mut tx, &alice.id, &PlanId::from(id), "five", t + 999, 1_000)
                .await
                .unwrap(),
            Claim::Busy
        );
        assert_eq!(
            coverage::claim_top_up(&mut tx, &alice.id, &PlanId::from(id), "five", t + 1_000, 1_000)
                .await
                .unwrap(),
            Claim::Claimed
        );
        coverage::release_top_up(&mut tx, &PlanId::from(id), "five")
            .await
            .unwrap();
        coverage::set_paused(&mut tx, &alice.id, &PlanId::from(id), true, "pause")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            coverage::claim_top_up(&mut tx, &alice.id, &PlanId::from(id), "four", t, TOP_UP_LEASE_MS)
                .await
                .unwrap(),
            Claim::Paused
        );
        assert_eq!(
            coverage::claim_top_up(
                &mut tx,
                &alice.id,
                &PlanId::from("plan_nope"),
                "four",
                t,
                TOP_UP_LEASE_MS
            )
            .await
            .unwrap(),
            Claim::Missing
        );
        tx.commit().await.unwrap();
    }
);

on_both!(
    a_bounded_top_up_enqueues_whole_cells_once_however_often_it_is_retried,
    |s: Store| async move {
        catalogue(&s, &[("x", 10)]).await;
        let (alice, _) = s.create_account("alice").await.unwrap();
        let mut tx = s.begin().await.unwrap();
        let input = plan_input(
            vec![
                pin("a", "1.0.0", "none"),
                pin("b", "1.0.0", "none"),
                pin("perf", "1.0.0", "none"),
            ],
            vec![combo("x")],
            3,
            Some(BufferTarget::Bounded { runs: 4 }),
        );
        let plan = coverage::create_plan(&mut tx, &alice.id, &input).await.unwrap();
        let r = coverage::resolve_plan(&mut tx, &alice.id, &plan.id)
            .await
            .unwrap()
            .unwrap();
        let origin = Origin::Plan(plan.id.to_string());
        let first = coverage::enqueue_top_up(&mut tx, &alice.id, &origin, &r.cells, 3, r.target, "t1")
            .await
            .unwrap();
        assert_eq!(first.skipped, None::<Skipped>);
        assert_eq!(first.occupancy, Some(0));
        assert_eq!(
            first.enqueued, 6,
            "two whole cells: 3 < 4 after the first, 6 ≥ 4 after the second"
        );
        assert_eq!(first.launched.len(), 2);
        assert!(first.launched.iter().all(|l| l.job_ids.len() == 3));
        // The same top-up retried: the recorded answer, nothing inserted.
        let again = coverage::enqueue_top_up(&mut tx, &alice.id, &origin, &r.cells, 3, r.target, "t1")
            .await
            .unwrap();
        assert_eq!(again, first);
        // The next top-up finds the buffer full.
        let next = coverage::enqueue_top_up(&mut tx, &alice.id, &origin, &r.cells, 3, r.target, "t2")
            .await
            .unwrap();
        assert_eq!((next.enqueued, next.occupancy), (0, Some(6)));
        tx.commit().await.unwrap();
        let jobs = s
            .list_jobs(&belay_store::jobs::JobFilter {
                origin: Some(origin.to_string()),
                limit: 100,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(jobs.len(), 6);
        assert!(jobs.iter().all(|j| j.user_id.as_deref() == Some(alice.id.as_str())));
        // Emission order is queue order: a's three repeats, then b's.
        let order: Vec<&str> = jobs.iter().map(|j| j.case.slug.as_str()).collect();
        assert_eq!(order, ["a", "a", "a", "b", "b", "b"]);
        assert_eq!(jobs[0].test_type, Some(TestType::Standard));
        assert!(
            s.events(0, Some(&origin.to_string()), 10)
                .await
                .unwrap()
                .iter()
                .any(|e| e.kind == "coverage_plan.topped_up")
        );
    }
);

on_both!(
    halting_an_origin_cancels_its_jobs_and_never_a_hand_launched_one,
    |s: Store| async move {
        catalogue(&s, &[("x", 1)]).await;
        let (alice, _) = s.create_account("alice").await.unwrap();
        let mut tx = s.begin().await.unwrap();
        let input = plan_input(
            vec![pin("a", "1.0.0", "none")],
            vec![combo("x")],
            3,
            Some(BufferTarget::Unbounded {}),
        );
        let plan = coverage::create_plan(&mut tx, &alice.id, &input).await.unwrap();
        let r = coverage::resolve_plan(&mut tx, &alice.id, &plan.id)
            .await
            .unwrap()
            .unwrap();
        let origin = Origin::Plan(plan.id.to_string());
        let a = coverage::enqueue_top_up(&mut tx, &alice.id, &origin, &r.cells, 3, r.target, "t")
            .await
            .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(a.enqueued, 3);
        let hand = s
            .enqueue(hand_job(pin("a", "1.0.0", "none"), combo("x"), Some(&alice.id)))
            .await
            .unwrap();
        s.claim("c1").await.unwrap(); // the plan's first job dispatches; the rest wait
        let mut tx = s.begin().await.unwrap();
        let waiting = coverage::cancel_origin(&mut tx, &origin, &JobStatus::WAITING)
            .await
            .unwrap();
        assert_eq!(waiting.len(), 2);
        let rest = coverage::cancel_origin(&mut tx, &origin, &JobStatus::IN_FLIGHT)
            .await
            .unwrap();
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].1, JobStatus::Dispatched);
        tx.commit().await.unwrap();
        let hand = s.get_job(&hand.id).await.unwrap().unwrap();
        assert!(!hand.status.is_final(), "a hand-launched job is never touched");
    }
);

on_both!(a_withheld_retry_shows_on_the_failed_job, |s: Store| async move {
    catalogue(&s, &[("x", 1)]).await;
    let (alice, _) = s.create_account("alice").await.unwrap();
    let mut tx = s.begin().await.unwrap();
    let input = plan_input(vec![pin("a", "1.0.0", "none")], vec![combo("x")], 1, None);
    let plan = coverage::create_plan(&mut tx, &alice.id, &input).await.unwrap();
    let r = coverage::resolve_plan(&mut tx, &alice.id, &plan.id)
        .await
        .unwrap()
        .unwrap();
    let origin = Origin::Plan(plan.id.to_string());
    let a = coverage::enqueue_top_up(&mut tx, &alice.id, &origin, &r.cells, 1, r.target, "t")
        .await
        .unwrap();
    coverage::set_paused(&mut tx, &alice.id, &plan.id, true, "pause")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let id = &a.launched[0].job_ids[0];
    s.claim("c").await.unwrap();
    let f = s.fail_job(id, "infrastructure", true).await.unwrap();
    assert_eq!(f.decision, Some(RetryDecision::Withheld));
    assert!(f.job.retry_withheld);
    // Resumed, the next top-up counts the cell's missing run and fills it.
    let mut tx = s.begin().await.unwrap();
    coverage::set_paused(&mut tx, &alice.id, &plan.id, false, "resume")
        .await
        .unwrap();
    let b = coverage::enqueue_top_up(&mut tx, &alice.id, &origin, &r.cells, 1, r.target, "t2")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(b.enqueued, 1);
});

on_both!(
    a_deleted_gg_configuration_keeps_its_id_and_its_cells_say_why,
    |s: Store| async move {
        catalogue(&s, &[("gg", 2)]).await;
        let (alice, _) = s.create_account("alice").await.unwrap();
        let (bob, _) = s.create_account("bob").await.unwrap();
        let cfg = s
            .create_gg_config(
                &alice.id,
                &GgConfigInput {
                    name: "g".into(),
                    launch_slots: vec!["root".into()],
                    capabilities: serde_json::json!({}),
                },
            )
            .await
            .unwrap();
        let gg = Combination::Gg {
            gg_config_id: cfg.id.to_string(),
            bindings: BTreeMap::from([("root".to_string(), "m".to_string())]),
        };
        let cells = cross(&[pin("a", "1.0.0", "none")], std::slice::from_ref(&gg), OuterAxis::Case);
        let mut tx = s.begin().await.unwrap();
        assert!(
            coverage::foreign_gg_configs(&mut tx, &alice.id, [&gg])
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            coverage::foreign_gg_configs(&mut tx, &bob.id, [&gg]).await.unwrap(),
            vec![cfg.id.clone()]
        );
        let m = coverage::cells_matrix(&mut tx, &alice.id, &cells, 1).await.unwrap();
        assert_eq!(m.cells[0].unlaunchable, None);
        tx.commit().await.unwrap();
        assert!(!s.delete_gg_config(&bob.id, &cfg.id).await.unwrap());
        assert!(s.delete_gg_config(&alice.id, &cfg.id).await.unwrap());
        let mut tx = s.begin_read().await.unwrap();
        let m = coverage::cells_matrix(&mut tx, &alice.id, &cells, 1).await.unwrap();
        assert_eq!(m.cells[0].unlaunchable.as_ref().unwrap().code, "gg_config_deleted");
        assert!(
            coverage::foreign_gg_configs(&mut tx, &alice.id, [&gg])
                .await
                .unwrap()
                .is_empty()
        );
        tx.commit().await.unwrap();
    }
);

on_both!(
    counts_read_packed_keep_every_key_and_number_with_a_key_list_and_without,
    |s: Store| async move {
        catalogue(&s, &[("x", 10)]).await;
        let (alice, _) = s.create_account("alice").await.unwrap();
        // A slug with every character JSON escapes: a quote, a backslash, a newline, a tab,
        // a control character and text outside ASCII.
        let odd = pin("q\"b\\c\n\td\u{1}é×", "1.0.0", "none");
        let j1 = s.enqueue(hand_job(odd.clone(), combo("x"), None)).await.unwrap();
        let j2 = s.enqueue(hand_job(odd.clone(), combo("x"), None)).await.unwrap();
        let r1 = complete(&s, &j1.id).await;
        complete(&s, &j2.id).await;
        review(&s, &r1, &alice.id).await;
        s.enqueue(hand_job(odd.clone(), combo("x"), None)).await.unwrap();
        // A few cells read with an `in (…)` list of keys, and more cells than such a list takes
        // (one grouped scan): the same counts for the odd cell either way.
        let few: Vec<Cell> = cross(
            &[odd.clone(), pin("a", "1.0.0", "none")],
            &[combo("x")],
            OuterAxis::Case,
        );
        let mut pins = vec![odd.clone()];
        pins.extend((0..600).map(|i| pin(&format!("c{i}"), "1.0.0", "none")));
        let many: Vec<Cell> = cross(&pins, &[combo("x")], OuterAxis::Case);
        let mut tx = s.begin_read().await.unwrap();
        for cells in [&few, &many] {
            let f = coverage::coverage_facts(&mut tx, &alice.id, cells).await.unwrap();
            let c = &f.counts[&few[0].cell_key];
            assert_eq!((c.completed, c.unreviewed), (2, 1), "{} cells", cells.len());
            assert_eq!(c.jobs.get(&JobStatus::Queued), Some(&1), "{} cells", cells.len());
            assert_eq!(f.counts.len(), 1, "only the odd cell has runs or jobs");
            let m = coverage::cells_matrix(&mut tx, &alice.id, cells, 3).await.unwrap();
            let odd_cell = m.cells.iter().find(|c| c.cell_key == few[0].cell_key).unwrap();
            assert_eq!((odd_cell.completed, odd_cell.in_flight, odd_cell.remaining), (2, 1, 0));
        }
        tx.commit().await.unwrap();
    }
);

/// Reviews written before a review carried its run's cell key get it from their run, so the
/// matrix counts them as before; a review submitted after is counted by the cell too, and one
/// replaced is still one review.
async fn reviews_get_their_runs_cells(backend: Backend) {
    const MIGRATION: i64 = 20261205100000;
    let db = belay_store::testing::fresh_without(backend, MIGRATION).await;
    let s = db.store.clone();
    catalogue(&s, &[("x", 10)]).await;
    let (alice, _) = s.create_account("alice").await.unwrap();
    let (bob, _) = s.create_account("bob").await.unwrap();
    let cells: Vec<Cell> = cross(
        &[pin("a", "1.0.0", "none"), pin("b", "1.0.0", "none")],
        &[combo("x")],
        OuterAxis::Case,
    );
    let mut runs = Vec::new();
    for c in [&cells[0], &cells[0], &cells[0], &cells[1]] {
        let j = s.enqueue(hand_job(c.case.clone(), combo("x"), None)).await.unwrap();
        runs.push(complete(&s, &j.id).await);
    }
    // Alice reviewed two of a's runs and b's run, Bob one of a's, in the old shape of the table.
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&db.url).await.unwrap();
    for (run, account) in [
        (&runs[0], &alice.id),
        (&runs[1], &alice.id),
        (&runs[3], &alice.id),
        (&runs[2], &bob.id),
    ] {
        sqlx::query(
            r#"insert into reviews (run_id, account_id, ratings, worst, created_at, updated_at)
               values ($1, $2, '{"code":"great"}', '"great"', 1, 1)"#,
        )
        .bind(run.as_str())
        .bind(account.as_str())
        .execute(&pool)
        .await
        .unwrap();
    }
    pool.close().await;
    assert!(s.migrate().await.unwrap() >= 1);
    // Both paths of the read: an `in (…)` list of the two cells, and one grouped scan of every
    // cell (more cells than such a list takes).
    let mut pins = vec![pin("a", "1.0.0", "none"), pin("b", "1.0.0", "none")];
    pins.extend((0..600).map(|i| pin(&format!("c{i}"), "1.0.0", "none")));
    let many: Vec<Cell> = cross(&pins, &[combo("x")], OuterAxis::Case);
    let unreviewed = |who: String| {
        let (s, cells, many) = (s.clone(), cells.clone(), many.clone());
        async move {
            let mut tx = s.begin_read().await.unwrap();
            let mut seen = Vec::new();
            for set in [&cells, &many] {
                let f = coverage::coverage_facts(&mut tx, &AccountId::from(who.as_str()), set)
                    .await
                    .unwrap();
                let n = |c: &Cell| f.counts.get(&c.cell_key).map(|k| (k.completed, k.unreviewed));
                seen.push((n(&cells[0]), n(&cells[1])));
            }
            tx.commit().await.unwrap();
            assert_eq!(seen[0], seen[1], "with a key list and without");
            seen[0]
        }
    };
    assert_eq!(unreviewed(alice.id.to_string()).await, (Some((3, 1)), Some((1, 0))));
    assert_eq!(unreviewed(bob.id.to_string()).await, (Some((3, 2)), Some((1, 1))));
    // Bob reviews b's run and replaces his review of a's: one review each.
    review(&s, &runs[3], &bob.id).await;
    review(&s, &runs[2], &bob.id).await;
    assert_eq!(unreviewed(bob.id.to_string()).await, (Some((3, 2)), Some((1, 0))));
    assert_eq!(unreviewed(alice.id.to_string()).await, (Some((3, 1)), Some((1, 0))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviews_written_before_they_carried_a_cell_count_on_sqlite() {
    reviews_get_their_runs_cells(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviews_written_before_they_carried_a_cell_count_on_postgres() {
    reviews_get_their_runs_cells(Backend::Postgres).await;
}
