//! The ladder repository functions, on SQLite and on PostgreSQL: ladders and their rungs,
//! steering, verdict rows and overrides, the board's reads, the claim, the idempotent top-up that
//! records verdicts before it walks, and the climb's early-stop cancellations.

use belay_domain::catalogue::{AdapterSpec, HarnessInput, ListPrice, ModelInput, TestCaseVersionInput, TestType};
use belay_domain::gate::{Gate, Outcome, Threshold, Verdict};
use belay_domain::ids::{AccountId, JobId, LadderId, RunId};
use belay_domain::job::{Combination, JobStatus};
use belay_domain::ladder::{ClimberKey, LadderAxis, LadderInput, RungInput, Steering};
use belay_domain::progress::{ClimberStatus, RecordedVerdict};
use belay_domain::review::{Rating, ReviewInput};
use belay_store::Store;
use belay_store::coverage::{self, Claim, Feed, TOP_UP_LEASE_MS};
use belay_store::jobs::{Completion, Transition};
use belay_store::ladders::{self, mint_rung_id};
use belay_store::on_both;
use std::collections::BTreeMap;

fn combo(h: &str) -> Combination {
    Combination::Harness {
        harness: h.into(),
        model: "m".into(),
        provider: None,
    }
}

fn rung(slug: &str) -> RungInput {
    RungInput {
        id: None,
        slug: slug.into(),
        version: "1.0.0".into(),
        variant: "default".into(),
        engine: "none".into(),
        runs: None,
    }
}

async fn catalogue(s: &Store) {
    for h in ["x", "y"] {
        s.create_harness(&HarnessInput {
            provider: None,
            name: h.into(),
            provider_routed: false,
            max_parallelism: 1,
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
    for slug in ["a", "b"] {
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

fn input(runs: i64, early_stop: bool, enabled: bool) -> LadderInput {
    LadderInput {
        name: "climb".into(),
        rungs: vec![rung("a"), rung("b")],
        combo_groups: vec![],
        combinations: vec![combo("x"), combo("y")],
        runs_per_cell: runs,
        gate: Gate {
            floor: Rating::Scuffed,
            threshold: Threshold::Count { runs: 1 },
        },
        unloaded_counts_as_broken: true,
        early_stop,
        outer_axis: LadderAxis::Rung,
        buffer_target: Some(belay_domain::buffer::BufferTarget::Unbounded {}),
        auto_top_up: true,
        enabled,
    }
}

async fn complete(s: &Store, id: &str) -> String {
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

async fn review(s: &Store, run: &str, account: &str, rating: Rating) {
    s.submit_review(
        &RunId::from(run),
        &AccountId::from(account),
        &ReviewInput {
            ratings: Some(BTreeMap::from([("code".to_string(), rating)])),
            category: None,
            note: None,
        },
    )
    .await
    .unwrap();
}

on_both!(
    ladders_are_the_owners_with_stable_rung_ids_steering_and_a_delete_that_takes_their_rows,
    |s: Store| async move {
        catalogue(&s).await;
        let (alice, _) = s.create_account("alice").await.unwrap();
        let (bob, _) = s.create_account("bob").await.unwrap();
        let mut tx = s.begin().await.unwrap();
        let i = input(5, false, false);
        let rungs = i.rungs_with_ids(&[], mint_rung_id).unwrap();
        let l = ladders::create_ladder(&mut tx, &alice.id, &i, &rungs).await.unwrap();
        assert!(l.id.as_str().starts_with("lad_"));
        assert!(!l.enabled);
        assert_eq!(l.rungs, rungs);
        assert!(ladders::get_ladder(&mut tx, &bob.id, &l.id).await.unwrap().is_none());
        assert!(
            ladders::update_ladder(&mut tx, &bob.id, &l.id, &i, &rungs)
                .await
                .unwrap()
                .is_none()
        );
        assert!(!ladders::delete_ladder(&mut tx, &bob.id, &l.id).await.unwrap());
        assert_eq!(ladders::list_ladders(&mut tx, &bob.id).await.unwrap(), vec![]);

        // A reorder moves the rungs, ids and all.
        let order = vec![rungs[1].id.clone(), rungs[0].id.clone()];
        let r = ladders::reorder_rungs(&mut tx, &alice.id, &l.id, &order)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r.rungs, vec![rungs[1].clone(), rungs[0].clone()]);

        // Steering: absent, the default; saved, kept per climber.
        let key = ClimberKey::of(&combo("y"));
        assert!(ladders::steering(&mut tx, &l.id).await.unwrap().is_empty());
        let st = Steering {
            priority: 3,
            focused: true,
            held: false,
        };
        ladders::put_steering(&mut tx, &l.id, &key, st).await.unwrap();
        ladders::put_steering(&mut tx, &l.id, &key, Steering { held: true, ..st })
            .await
            .unwrap();
        let saved = ladders::steering(&mut tx, &l.id).await.unwrap();
        assert_eq!(saved.len(), 1);
        assert_eq!(saved[&key], Steering { held: true, ..st });
        let resolved = ladders::resolve_ladder(&mut tx, &alice.id, &l.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(resolved.climbers[0].steering, Steering::default());
        assert!(resolved.climbers[1].steering.held);
        assert_eq!(resolved.cells.len(), 4);

        // Enabled and back.
        let e = ladders::set_enabled(&mut tx, &alice.id, &l.id, true, "enable")
            .await
            .unwrap()
            .unwrap();
        assert!(e.enabled);
        assert!(
            ladders::set_enabled(&mut tx, &bob.id, &l.id, true, "enable")
                .await
                .unwrap()
                .is_none()
        );

        // Deleting takes the steering and the verdicts with it.
        ladders::put_override(
            &mut tx,
            &l.id,
            &RecordedVerdict {
                climber: key.clone(),
                rung_id: rungs[0].id.clone(),
                version: "1.0.0".into(),
                verdict: Some(Outcome::Wall),
                override_outcome: Some(Outcome::Advance),
            },
        )
        .await
        .unwrap();
        assert_eq!(ladders::verdicts(&mut tx, &l.id).await.unwrap().len(), 1);
        assert!(ladders::delete_ladder(&mut tx, &alice.id, &l.id).await.unwrap());
        assert!(ladders::steering(&mut tx, &l.id).await.unwrap().is_empty());
        assert!(ladders::verdicts(&mut tx, &l.id).await.unwrap().is_empty());
        assert!(ladders::get_ladder(&mut tx, &alice.id, &l.id).await.unwrap().is_none());
        tx.commit().await.unwrap();
        // The ladder's events, its deletion's too, are Alice's alone.
        let of_ladder = |events: Vec<belay_store::events::Event>| -> Vec<String> {
            events
                .into_iter()
                .filter(|e| e.entity == l.id.as_str())
                .map(|e| e.kind)
                .collect()
        };
        let alices = of_ladder(s.events_for(&alice.id, 0, None, 1000).await.unwrap());
        assert!(
            ["ladder.created", "ladder.deleted"]
                .iter()
                .all(|k| alices.iter().any(|a| a == k)),
            "{alices:?}"
        );
        assert_eq!(
            of_ladder(s.events_for(&bob.id, 0, None, 1000).await.unwrap()),
            Vec::<String>::new()
        );
    }
);

on_both!(
    a_ladder_top_up_claims_walks_only_current_rungs_records_verdicts_and_answers_twice_alike,
    |s: Store| async move {
        catalogue(&s).await;
        let (alice, _) = s.create_account("alice").await.unwrap();
        let mut tx = s.begin().await.unwrap();
        let i = input(1, false, false);
        let rungs = i.rungs_with_ids(&[], mint_rung_id).unwrap();
        let l = ladders::create_ladder(&mut tx, &alice.id, &i, &rungs).await.unwrap();
        let id = l.id.as_str().to_string();
        // Disabled: not claimed.
        let now = belay_store::now_ms();
        assert_eq!(
            ladders::claim_top_up(
                &mut tx,
                &alice.id,
                &LadderId::from(id.as_str()),
                "t1",
                now,
                TOP_UP_LEASE_MS
            )
            .await
            .unwrap(),
            Claim::Paused
        );
        assert_eq!(
            ladders::claim_top_up(
                &mut tx,
                &alice.id,
                &LadderId::from("lad_none"),
                "t1",
                now,
                TOP_UP_LEASE_MS
            )
            .await
            .unwrap(),
            Claim::Missing
        );
        ladders::set_enabled(&mut tx, &alice.id, &LadderId::from(id.as_str()), true, "enable")
            .await
            .unwrap();
        assert_eq!(
            ladders::claim_top_up(
                &mut tx,
                &alice.id,
                &LadderId::from(id.as_str()),
                "t1",
                now,
                TOP_UP_LEASE_MS
            )
            .await
            .unwrap(),
            Claim::Claimed
        );
        assert_eq!(
            ladders::claim_top_up(
                &mut tx,
                &alice.id,
                &LadderId::from(id.as_str()),
                "t1",
                now,
                TOP_UP_LEASE_MS
            )
            .await
            .unwrap(),
            Claim::Claimed,
            "a retried claim by the same holder"
        );
        assert_eq!(
            ladders::claim_top_up(
                &mut tx,
                &alice.id,
                &LadderId::from(id.as_str()),
                "t2",
                now,
                TOP_UP_LEASE_MS
            )
            .await
            .unwrap(),
            Claim::Busy
        );
        assert_eq!(
            ladders::claim_top_up(
                &mut tx,
                &alice.id,
                &LadderId::from(id.as_str()),
                "t2",
                now + TOP_UP_LEASE_MS + 1,
                TOP_UP_LEASE_MS
            )
            .await
            .unwrap(),
            Claim::Claimed,
            "the lease ended"
        );
        assert_eq!(
            coverage::claim_holder(&mut tx, Feed::Ladder, &id).await.unwrap(),
            Some(("t2".to_string(), now + TOP_UP_LEASE_MS + 1))
        );
        assert!(
            ladders::release_top_up(&mut tx, &LadderId::from(id.as_str()), "t2")
                .await
                .unwrap()
        );
        assert!(
            !ladders::release_top_up(&mut tx, &LadderId::from(id.as_str()), "t2")
                .await
                .unwrap()
        );

        let first = ladders::enqueue_top_up(&mut tx, &alice.id, &LadderId::from(id.as_str()), "topup-1")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(first.top_up.enqueued, 2);
        assert!(first.top_up.launched.iter().all(|c| c.case.slug == "a"), "only rung 1");
        let again = ladders::enqueue_top_up(&mut tx, &alice.id, &LadderId::from(id.as_str()), "topup-1")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(again, first, "a retried enqueue answers what it answered");
        tx.commit().await.unwrap();

        // x's run completes and is reviewed playable: the gate advances it, live, unrecorded.
        let x_job = first.top_up.launched[0].job_ids[0].clone();
        let run = complete(&s, &x_job).await;
        review(&s, &run, &alice.id, Rating::Scuffed).await;
        let mut tx = s.begin().await.unwrap();
        let r = ladders::resolve_ladder(&mut tx, &alice.id, &LadderId::from(id.as_str()))
            .await
            .unwrap()
            .unwrap();
        let (p, _) = ladders::read_progress(&mut tx, &alice.id, &r).await.unwrap();
        let x = &p.board.climbers[0];
        assert_eq!(x.current_rung.as_ref(), Some(&rungs[1].id));
        assert_eq!(x.rungs[0].verdict, Verdict::Advance);
        assert!(!x.rungs[0].recorded);
        assert_eq!(p.record.len(), 1);
        assert!(
            ladders::verdicts(&mut tx, &LadderId::from(id.as_str()))
                .await
                .unwrap()
                .is_empty(),
            "a read writes nothing"
        );
        let t = ladders::enqueue_top_up(&mut tx, &alice.id, &LadderId::from(id.as_str()), "topup-2")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(t.recorded, 1);
        assert_eq!(t.top_up.enqueued, 1);
        assert_eq!(t.top_up.launched[0].case.slug, "b");
        assert_eq!(t.top_up.launched[0].combination, combo("x"));
        let rows = ladders::verdicts(&mut tx, &LadderId::from(id.as_str())).await.unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (rows[0].verdict, rows[0].version.as_str()),
            (Some(Outcome::Advance), "1.0.0")
        );
        let (p, _) = ladders::read_progress(&mut tx, &alice.id, &r).await.unwrap();
        assert!(p.board.climbers[0].rungs[0].recorded);
        assert!(p.record.is_empty());

        // An override is stored beside the verdict; a top-up leaves it alone.
        let key = ClimberKey::of(&combo("x"));
        let mut row = p
            .board
            .override_target(&combo("x"), &rungs[0].id, Some(Outcome::Wall))
            .unwrap();
        ladders::put_override(&mut tx, &LadderId::from(id.as_str()), &row)
            .await
            .unwrap();
        ladders::enqueue_top_up(&mut tx, &alice.id, &LadderId::from(id.as_str()), "topup-3")
            .await
            .unwrap()
            .unwrap();
        let (p, _) = ladders::read_progress(&mut tx, &alice.id, &r).await.unwrap();
        assert_eq!(p.board.climbers[0].status, ClimberStatus::Walled);
        let rows = ladders::verdicts(&mut tx, &LadderId::from(id.as_str())).await.unwrap();
        assert_eq!(rows[0].climber, key);
        assert_eq!(
            (rows[0].verdict, rows[0].override_outcome),
            (Some(Outcome::Advance), Some(Outcome::Wall))
        );
        row.override_outcome = None;
        ladders::put_override(&mut tx, &LadderId::from(id.as_str()), &row)
            .await
            .unwrap();
        let (p, _) = ladders::read_progress(&mut tx, &alice.id, &r).await.unwrap();
        assert_eq!(p.board.climbers[0].current_rung.as_ref(), Some(&rungs[1].id));
        tx.commit().await.unwrap();
    }
);

on_both!(
    the_climb_cancels_an_early_stopped_rungs_queued_jobs_and_records_no_verdict,
    |s: Store| async move {
        catalogue(&s).await;
        let (alice, _) = s.create_account("alice").await.unwrap();
        let mut tx = s.begin().await.unwrap();
        let mut i = input(3, true, true);
        i.combinations = vec![combo("x")];
        let rungs = i.rungs_with_ids(&[], mint_rung_id).unwrap();
        let l = ladders::create_ladder(&mut tx, &alice.id, &i, &rungs).await.unwrap();
        let id = l.id.as_str().to_string();
        let t = ladders::enqueue_top_up(&mut tx, &alice.id, &LadderId::from(id.as_str()), "topup-1")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(t.top_up.enqueued, 3);
        tx.commit().await.unwrap();
        let jobs = t.top_up.launched[0].job_ids.clone();
        let run = complete(&s, &jobs[0]).await;
        let mut tx = s.begin().await.unwrap();
        let (cancelled, _) = ladders::climb_step(&mut tx, &alice.id, &LadderId::from(id.as_str()))
            .await
            .unwrap()
            .unwrap();
        assert!(cancelled.is_empty(), "undecided: nothing to stop");
        tx.commit().await.unwrap();
        review(&s, &run, &alice.id, Rating::Great).await;
        let mut tx = s.begin().await.unwrap();
        let (cancelled, p) = ladders::climb_step(&mut tx, &alice.id, &LadderId::from(id.as_str()))
            .await
            .unwrap()
            .unwrap();
        let ids: Vec<&str> = cancelled.iter().map(|(j, _)| j.as_str()).collect();
        assert_eq!(ids, [jobs[1].as_str(), jobs[2].as_str()]);
        assert!(cancelled.iter().all(|(_, prev)| JobStatus::WAITING.contains(prev)));
        assert_eq!(p.board.climbers[0].current_rung.as_ref(), Some(&rungs[1].id));
        assert!(
            ladders::verdicts(&mut tx, &LadderId::from(id.as_str()))
                .await
                .unwrap()
                .is_empty(),
            "recording is a top-up's"
        );
        let (again, _) = ladders::climb_step(&mut tx, &alice.id, &LadderId::from(id.as_str()))
            .await
            .unwrap()
            .unwrap();
        assert!(again.is_empty());
        ladders::set_enabled(&mut tx, &alice.id, &LadderId::from(id.as_str()), false, "disable")
            .await
            .unwrap();
        assert!(
            ladders::climb_step(&mut tx, &alice.id, &LadderId::from(id.as_str()))
                .await
                .unwrap()
                .is_none(),
            "disabled: the climb ends"
        );
        tx.commit().await.unwrap();
        for j in &jobs[1..] {
            assert_eq!(s.get_job(j).await.unwrap().unwrap().status, JobStatus::Canceled);
        }
    }
);
