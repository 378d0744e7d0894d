//! The repository functions without a module of their own here (the catalogue, jobs and their
//! runs, reviews, Sandbox uses, repository tokens), on SQLite and on PostgreSQL.

use belay_domain::catalogue::{
    AdapterSpec, GgConfigInput, GgConfigUpdate, HarnessInput, ListPrice, ModelInput, TestCaseVersionInput,
    TestCaseVersionUpdate, TestType,
};
use belay_domain::ids::{AccountId, ChangeId, EditSessionId, JobId, PlanId, ProjectId, TaskRunId, TokenId};
use belay_domain::job::{CasePin, Combination, JobStatus, Origin, RetryDecision};
use belay_domain::review::{DomainSource, JamCategory, Rating, ReviewInput};
use belay_store::jobs::{Completion, NewJob, Transition};
use belay_store::testing::fresh;
use belay_store::{Backend, Store, StoreError};
use std::collections::{BTreeMap, BTreeSet};

fn pin(slug: &str) -> CasePin {
    CasePin {
        slug: slug.into(),
        version: "1.0.0".into(),
        variant: "default".into(),
        engine: "none".into(),
    }
}

fn harness_combo(h: &str, model: &str) -> Combination {
    Combination::Harness {
        harness: h.into(),
        model: model.into(),
        provider: None,
    }
}

fn new_job(h: &str) -> NewJob {
    NewJob {
        case: pin("snake"),
        combination: harness_combo(h, "m1"),
        gg_config_name: None,
        capabilities: None,
        test_type: Some(TestType::Standard),
        user_id: None,
        origin: None,
        attempt: 1,
        retry_of: None,
    }
}

async fn add_harness(s: &Store, name: &str, cap: i64) {
    s.create_harness(&HarnessInput {
        provider: None,
        name: name.into(),
        provider_routed: false,
        max_parallelism: cap,
        adapter: AdapterSpec::Script {
            script: "true".into(),
            timeout_seconds: 10,
            sandbox: false,
        },
    })
    .await
    .unwrap();
}

async fn run_to_completion(s: &Store, id: &str) -> belay_domain::run::Run {
    assert!(matches!(
        s.advance_job(&JobId::from(id), JobStatus::Starting).await.unwrap(),
        Transition::Moved(_)
    ));
    assert!(matches!(
        s.advance_job(&JobId::from(id), JobStatus::Running).await.unwrap(),
        Transition::Moved(_)
    ));
    match s.complete_job(&JobId::from(id), true, &[]).await.unwrap() {
        Completion::Recorded(r) => r,
        other => panic!("not recorded: {other:?}"),
    }
}

on_both!(
    a_token_authenticates_its_account_and_a_wrong_one_does_not,
    |s: Store| async move {
        let (acct, token) = s.create_account("alice").await.unwrap();
        assert!(token.starts_with("bly_"));
        assert_eq!(s.authenticate(&token).await.unwrap().unwrap().id, acct.id);
        assert!(s.authenticate("bly_nope").await.unwrap().is_none());
        assert!(s.authenticate(&token.replace("bly_", "xx_")).await.unwrap().is_none());
        let second = s.create_token(&acct.id).await.unwrap();
        assert_eq!(s.authenticate(&second).await.unwrap().unwrap().id, acct.id);
        assert!(matches!(
            s.create_token(&AccountId::from("acct_missing")).await,
            Err(StoreError::NotFound { .. })
        ));
        assert!(
            s.events(0, Some(&acct.id), 10)
                .await
                .unwrap()
                .iter()
                .any(|e| e.kind == "account.created")
        );
    }
);

on_both!(migrating_twice_applies_nothing_the_second_time, |s: Store| async move {
    assert_eq!(s.migrate().await.unwrap(), 0);
});

on_both!(
    a_version_is_ingested_once_and_frozen_once_it_has_runs,
    |s: Store| async move {
        let mut input = TestCaseVersionInput {
            slug: "snake".into(),
            version: "1.0.0".into(),
            test_type: TestType::Standard,
            variants: vec!["default".into()],
            engines: vec!["godot".into()],
            title: Some("Snake".into()),
            review_domains: None,
        };
        let v = s.ingest_test_case_version(&input).await.unwrap();
        assert!(!v.frozen);
        assert!(matches!(
            s.ingest_test_case_version(&input).await,
            Err(StoreError::Conflict(_))
        ));
        input.version = "1.10.0".into();
        s.ingest_test_case_version(&input).await.unwrap();
        input.version = "1.9.0".into();
        s.ingest_test_case_version(&input).await.unwrap();
        let case = s.get_test_case("snake").await.unwrap().unwrap();
        assert_eq!(case.latest_version.as_deref(), Some("1.10.0"));
        assert_eq!(case.versions.len(), 3);
        assert_eq!(s.list_test_cases().await.unwrap().len(), 1);

        let update = TestCaseVersionUpdate {
            test_type: TestType::GameJam,
            variants: vec!["default".into(), "hard".into()],
            engines: vec![],
            title: None,
            review_domains: None,
        };
        let v = s.update_test_case_version("snake", "1.0.0", &update).await.unwrap();
        assert_eq!(v.test_type, TestType::GameJam);
        assert_eq!(v.variants.len(), 2);
        assert!(matches!(
            s.update_test_case_version("snake", "9.9.9", &update).await,
            Err(StoreError::NotFound { .. })
        ));

        add_harness(&s, "cc", 1).await;
        let job = s.enqueue(new_job("cc")).await.unwrap();
        assert_eq!(s.claim("k1").await.unwrap().len(), 1);
        run_to_completion(&s, &job.id).await;
        assert!(s.get_test_case_version("snake", "1.0.0").await.unwrap().unwrap().frozen);
        assert!(matches!(
            s.update_test_case_version("snake", "1.0.0", &update).await,
            Err(StoreError::Conflict(_))
        ));
    }
);

on_both!(
    harnesses_and_models_round_trip_and_refuse_duplicates,
    |s: Store| async move {
        add_harness(&s, "cc", 2).await;
        let dup = s
            .create_harness(&HarnessInput {
                provider: None,
                name: "cc".into(),
                provider_routed: true,
                max_parallelism: 1,
                adapter: AdapterSpec::Command {
                    argv: vec!["x".into()],
                    timeout_seconds: 5,
                    sandbox: false,
                },
            })
            .await;
        assert!(matches!(dup, Err(StoreError::Conflict(_))));
        let h = s
            .update_harness(
                "cc",
                &belay_domain::catalogue::HarnessUpdate {
                    provider: None,
                    provider_routed: None,
                    max_parallelism: Some(7),
                    adapter: None,
                },
            )
            .await
            .unwrap();
        assert_eq!(h.max_parallelism, 7);
        assert_eq!(s.list_harnesses().await.unwrap().len(), 1);

        let m = s
            .create_model(&ModelInput {
                provider: None,
                max_parallelism: None,
                id: "claude-x".into(),
                context_window: Some(200_000),
                list_price: Some(ListPrice {
                    input_per_mtok_usd: 3.0,
                    output_per_mtok_usd: 15.0,
                }),
            })
            .await
            .unwrap();
        assert_eq!(m.list_price.unwrap().output_per_mtok_usd, 15.0);
        s.create_model(&ModelInput {
            provider: None,
            max_parallelism: None,
            id: "mystery".into(),
            context_window: None,
            list_price: None,
        })
        .await
        .unwrap();
        let facts = s.model_facts(&["claude-x", "mystery", "absent"]).await.unwrap();
        assert!(facts["claude-x"].list_price.is_some());
        assert!(facts["mystery"].list_price.is_none() && facts["mystery"].context_window.is_none());
        assert!(!facts.contains_key("absent"));
        let m = s
            .update_model(
                "claude-x",
                &belay_domain::catalogue::ModelUpdate {
                    provider: None,
                    max_parallelism: None,
                    context_window: Some(1000),
                    list_price: None,
                },
            )
            .await
            .unwrap();
        assert_eq!((m.context_window, m.list_price), (Some(1000), None));
    }
);

on_both!(
    only_the_owner_reads_or_changes_a_gg_configuration,
    |s: Store| async move {
        let (alice, _) = s.create_account("alice").await.unwrap();
        let (bob, _) = s.create_account("bob").await.unwrap();
        let input = GgConfigInput {
            name: "study".into(),
            launch_slots: vec!["root".into(), "reviewer".into()],
            capabilities: serde_json::json!({"tools": ["bash"]}),
        };
        let cfg = s.create_gg_config(&alice.id, &input).await.unwrap();
        let twin = s.create_gg_config(&alice.id, &input).await.unwrap();
        assert_ne!(cfg.id, twin.id, "two configurations may share a name");
        assert!(s.get_gg_config(&bob.id, &cfg.id).await.unwrap().is_none());
        let rename = GgConfigUpdate {
            name: Some("renamed".into()),
            launch_slots: None,
            capabilities: None,
        };
        assert!(matches!(
            s.update_gg_config(&bob.id, &cfg.id, &rename).await,
            Err(StoreError::NotFound { .. })
        ));
        let renamed = s.update_gg_config(&alice.id, &cfg.id, &rename).await.unwrap();
        assert_eq!(renamed.name, "renamed");
        assert_eq!(renamed.launch_slots, vec!["root", "reviewer"]);
        assert_eq!(s.list_gg_configs(&alice.id).await.unwrap().len(), 2);
        assert!(s.list_gg_configs(&bob.id).await.unwrap().is_empty());
    }
);

on_both!(
    enqueue_takes_ascending_queue_seqs_in_batch_order,
    |s: Store| async move {
        let jobs = s
            .enqueue_batch(vec![new_job("a"), new_job("b"), new_job("c")])
            .await
            .unwrap();
        assert!(jobs.windows(2).all(|w| w[0].queue_seq < w[1].queue_seq));
        assert_eq!(jobs[1].combination.harness(), "b");
        assert!(
            jobs.iter()
                .all(|j| j.status == JobStatus::Queued && j.timestamps.queued_at.is_some())
        );
        let listed = s
            .list_jobs(&belay_store::jobs::JobFilter {
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(
            listed.iter().map(|j| &j.id).collect::<Vec<_>>(),
            jobs.iter().map(|j| &j.id).collect::<Vec<_>>()
        );
    }
);

on_both!(
    a_claim_dispatches_in_queue_order_under_each_cap_and_holds_the_rest,
    |s: Store| async move {
        add_harness(&s, "a", 1).await;
        add_harness(&s, "b", 2).await;
        let jobs = s
            .enqueue_batch(["a", "a", "b", "a", "b", "b"].iter().map(|h| new_job(h)).collect())
            .await
            .unwrap();
        let claimed = s.claim("c1").await.unwrap();
        let ids: Vec<&str> = claimed.iter().map(|j| j.id.as_str()).collect();
        assert_eq!(ids, vec![jobs[0].id.as_str(), jobs[2].id.as_str(), jobs[4].id.as_str()]);
        for (i, j) in jobs.iter().enumerate() {
            let now = s.get_job(&j.id).await.unwrap().unwrap();
            let want = if [0, 2, 4].contains(&i) {
                JobStatus::Dispatched
            } else {
                JobStatus::Pending
            };
            assert_eq!(now.status, want, "job {i}");
        }
        // The same key again is the same claim: nothing more is dispatched.
        let again = s.claim("c1").await.unwrap();
        assert_eq!(
            again.iter().map(|j| &j.id).collect::<Vec<_>>(),
            claimed.iter().map(|j| &j.id).collect::<Vec<_>>()
        );
        assert!(s.claim("c2").await.unwrap().is_empty());
        // Finishing a's job frees its slot for the next a job, which was pending.
        run_to_completion(&s, &jobs[0].id).await;
        let next = s.claim("c3").await.unwrap();
        assert_eq!(
            next.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
            vec![jobs[1].id.as_str()]
        );
    }
);

on_both!(
    a_game_jam_job_waits_while_its_model_has_a_jam_run_in_flight,
    |s: Store| async move {
        add_harness(&s, "a", 5).await;
        let mut jam = new_job("a");
        jam.test_type = Some(TestType::GameJam);
        let jobs = s
            .enqueue_batch(vec![jam.clone(), jam.clone(), new_job("a")])
            .await
            .unwrap();
        let claimed = s.claim("k").await.unwrap();
        assert_eq!(
            claimed.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
            vec![jobs[0].id.as_str(), jobs[2].id.as_str()]
        );
        assert_eq!(
            s.get_job(&jobs[1].id).await.unwrap().unwrap().status,
            JobStatus::Pending
        );
        run_to_completion(&s, &jobs[0].id).await;
        assert_eq!(s.claim("k2").await.unwrap()[0].id, jobs[1].id);
    }
);

on_both!(
    a_deep_queue_of_held_jam_jobs_does_not_hide_later_work,
    |s: Store| async move {
        add_harness(&s, "a", 40).await;
        let mut jam = new_job("a");
        jam.test_type = Some(TestType::GameJam);
        let mut batch = vec![jam.clone(); 60];
        batch.push(new_job("a"));
        let jobs = s.enqueue_batch(batch).await.unwrap();
        let claimed = s.claim("k").await.unwrap();
        let ids: BTreeSet<&str> = claimed.iter().map(|j| j.id.as_str()).collect();
        assert_eq!(ids, BTreeSet::from([jobs[0].id.as_str(), jobs[60].id.as_str()]));
    }
);

on_both!(
    a_retry_keeps_the_launcher_and_origin_and_is_enqueued_once,
    |s: Store| async move {
        add_harness(&s, "a", 1).await;
        let (alice, _) = s.create_account("alice").await.unwrap();
        let mut j = new_job("a");
        j.user_id = Some(alice.id.clone());
        j.origin = Some(Origin::Plan("p1".into()));
        let job = s.enqueue(j).await.unwrap();
        s.claim("k").await.unwrap();
        s.advance_job(&job.id, JobStatus::Starting).await.unwrap();
        let f = s.fail_job(&job.id, "node evicted", true).await.unwrap();
        assert_eq!(f.decision, Some(RetryDecision::Retry { attempt: 2 }));
        let retry = f.retry.unwrap();
        assert_eq!(retry.user_id.as_deref(), Some(alice.id.as_str()));
        assert_eq!(retry.origin, Some(Origin::Plan("p1".into())));
        assert_eq!(retry.attempt, 2);
        assert_eq!(retry.retry_of.as_deref(), Some(job.id.as_str()));
        assert_eq!(retry.cell_key, job.cell_key);
        // A retried activity records the failure again: same retry, no second job.
        let again = s.fail_job(&job.id, "node evicted", true).await.unwrap();
        assert_eq!(again.retry.unwrap().id, retry.id);
        assert_eq!(
            s.list_jobs(&belay_store::jobs::JobFilter {
                limit: 100,
                ..Default::default()
            })
            .await
            .unwrap()
            .len(),
            2
        );
    }
);

on_both!(a_retry_is_withheld_while_its_plan_is_paused, |s: Store| async move {
    add_harness(&s, "a", 1).await;
    let (alice, _) = s.create_account("alice").await.unwrap();
    s.set_plan_paused(&PlanId::from("p1"), &alice.id, true).await.unwrap();
    let mut j = new_job("a");
    j.origin = Some(Origin::Plan("p1".into()));
    let job = s.enqueue(j).await.unwrap();
    s.claim("k").await.unwrap();
    let f = s.fail_job(&job.id, "boom", true).await.unwrap();
    assert_eq!(f.decision, Some(RetryDecision::Withheld));
    assert!(f.retry.is_none());
    // A job launched by hand retries as always.
    let hand = s.enqueue(new_job("a")).await.unwrap();
    s.claim("k2").await.unwrap();
    assert!(s.fail_job(&hand.id, "boom", true).await.unwrap().retry.is_some());
});

on_both!(cancel_moves_any_unfinished_job_once, |s: Store| async move {
    add_harness(&s, "a", 1).await;
    let jobs = s
        .enqueue_batch(vec![new_job("a"), new_job("a"), new_job("a")])
        .await
        .unwrap();
    let c = s.cancel_job(&jobs[2].id).await.unwrap();
    assert!(c.cancelled);
    assert_eq!(c.previous, JobStatus::Queued);
    assert!(!s.cancel_job(&jobs[2].id).await.unwrap().cancelled);
    s.claim("k").await.unwrap();
    let bulk = s
        .cancel_jobs(&[JobStatus::Queued, JobStatus::Pending], None)
        .await
        .unwrap();
    assert_eq!(bulk.len(), 1);
    assert_eq!(bulk[0].0.id, jobs[1].id);
    let all = s.cancel_jobs(&JobStatus::IN_FLIGHT, None).await.unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].1, JobStatus::Dispatched);
    // A cancelled job can no longer start or complete.
    assert!(matches!(
        s.advance_job(&jobs[0].id, JobStatus::Starting).await.unwrap(),
        Transition::Refused(_)
    ));
    assert!(matches!(
        s.complete_job(&jobs[0].id, true, &[]).await.unwrap(),
        Completion::Refused(_)
    ));
});

on_both!(
    cancel_racing_claims_leaves_exactly_one_final_state,
    |s: Store| async move {
        add_harness(&s, "a", 50).await;
        let jobs = s.enqueue_batch((0..40).map(|_| new_job("a")).collect()).await.unwrap();
        let claimer = {
            let s = s.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                for i in 0..10 {
                    got.extend(s.claim(&format!("race-{i}")).await.unwrap().into_iter().map(|j| j.id));
                }
                got
            })
        };
        let canceller = {
            let s = s.clone();
            let ids: Vec<String> = jobs.iter().map(|j| j.id.to_string()).collect();
            tokio::spawn(async move {
                let mut n = 0;
                for id in ids.iter().rev() {
                    if s.cancel_job(&JobId::from(id.as_str())).await.unwrap().cancelled {
                        n += 1;
                    }
                }
                n
            })
        };
        let dispatched = claimer.await.unwrap();
        let cancelled = canceller.await.unwrap();
        assert_eq!(cancelled, 40, "every job was unfinished when its cancel ran");
        assert_eq!(
            dispatched.len(),
            dispatched.iter().collect::<BTreeSet<_>>().len(),
            "no job dispatched twice"
        );
        for j in &jobs {
            let ts = s.transitions(0, 10_000).await.unwrap();
            let finals: Vec<_> = ts.iter().filter(|t| t.job_id == j.id && t.to.is_final()).collect();
            assert_eq!(finals.len(), 1, "job {} has one final transition", j.id);
            assert_eq!(s.get_job(&j.id).await.unwrap().unwrap().status, JobStatus::Canceled);
        }
    }
);

on_both!(
    concurrent_claims_never_dispatch_a_job_twice_or_exceed_a_cap,
    |s: Store| async move {
        add_harness(&s, "a", 3).await;
        add_harness(&s, "b", 5).await;
        s.enqueue_batch((0..30).map(|i| new_job(if i % 3 == 0 { "a" } else { "b" })).collect())
            .await
            .unwrap();
        let tasks: Vec<_> = (0..4)
            .map(|t| {
                let s = s.clone();
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    for i in 0..5 {
                        got.extend(
                            s.claim(&format!("t{t}-{i}"))
                                .await
                                .unwrap()
                                .into_iter()
                                .map(|j| (j.id, j.combination.harness().to_string())),
                        );
                    }
                    got
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        let unique: BTreeSet<_> = all.iter().map(|(id, _)| id).collect();
        assert_eq!(unique.len(), all.len());
        assert_eq!(all.iter().filter(|(_, h)| h == "a").count(), 3);
        assert_eq!(all.iter().filter(|(_, h)| h == "b").count(), 5);
    }
);

on_both!(
    a_review_per_account_is_replaceable_and_the_displayed_rating_is_the_worst,
    |s: Store| async move {
        add_harness(&s, "a", 1).await;
        let (alice, _) = s.create_account("alice").await.unwrap();
        let (bob, _) = s.create_account("bob").await.unwrap();
        let job = s.enqueue(new_job("a")).await.unwrap();
        s.claim("k").await.unwrap();
        let run = run_to_completion(&s, &job.id).await;
        assert!(
            matches!(s.complete_job(&job.id, true, &[]).await.unwrap(), Completion::AlreadyRecorded(r) if r.id == run.id)
        );
        let rate = |pairs: &[(&str, Rating)]| ReviewInput {
            ratings: Some(
                pairs
                    .iter()
                    .map(|(d, r)| (d.to_string(), *r))
                    .collect::<BTreeMap<_, _>>(),
            ),
            category: None,
            note: None,
        };
        s.submit_review(
            &run.id,
            &alice.id,
            &rate(&[("gameplay", Rating::Great), ("visuals", Rating::Passable)]),
        )
        .await
        .unwrap();
        assert_eq!(
            s.get_run(&run.id).await.unwrap().unwrap().rating,
            Some(Rating::Passable)
        );
        s.submit_review(&run.id, &bob.id, &rate(&[("gameplay", Rating::Broken)]))
            .await
            .unwrap();
        assert_eq!(s.get_run(&run.id).await.unwrap().unwrap().rating, Some(Rating::Broken));
        s.submit_review(&run.id, &bob.id, &rate(&[("gameplay", Rating::Flawless)]))
            .await
            .unwrap();
        let r = s.get_run(&run.id).await.unwrap().unwrap();
        assert_eq!((r.rating, r.review_count), (Some(Rating::Passable), 2));
        let jam = ReviewInput {
            ratings: None,
            category: Some(JamCategory::Gold),
            note: None,
        };
        assert!(matches!(
            s.submit_review(&run.id, &alice.id, &jam).await,
            Err(StoreError::Invalid(_))
        ));
        assert_eq!(s.reviews_of(&run.id).await.unwrap().len(), 2);
        assert_eq!(r.category, None, "a standard run shows no category");
    }
);

on_both!(
    a_review_is_offered_the_versions_declared_domains_else_the_reviewers_remembered_ones,
    |s: Store| async move {
        add_harness(&s, "a", 2).await;
        let (alice, _) = s.create_account("alice").await.unwrap();
        let (bob, _) = s.create_account("bob").await.unwrap();
        let rate = |pairs: &[(&str, Rating)]| ReviewInput {
            ratings: Some(
                pairs
                    .iter()
                    .map(|(d, r)| (d.to_string(), *r))
                    .collect::<BTreeMap<_, _>>(),
            ),
            category: None,
            note: None,
        };
        // "snake" declares none; "maze" declares its own.
        let version = |slug: &str, domains: Option<Vec<String>>| TestCaseVersionInput {
            slug: slug.into(),
            version: "1.0.0".into(),
            test_type: TestType::Standard,
            variants: vec!["default".into()],
            engines: vec![],
            title: None,
            review_domains: domains,
        };
        s.ingest_test_case_version(&version("snake", None)).await.unwrap();
        let maze = s
            .ingest_test_case_version(&version("maze", Some(vec!["gameplay".into(), "visuals".into()])))
            .await
            .unwrap();
        assert_eq!(
            maze.review_domains,
            Some(vec!["gameplay".to_string(), "visuals".to_string()])
        );
        let snake_job = s.enqueue(new_job("a")).await.unwrap();
        let mut maze_job = new_job("a");
        maze_job.case = pin("maze");
        let maze_job = s.enqueue(maze_job).await.unwrap();
        s.claim("k").await.unwrap();
        let snake = run_to_completion(&s, &snake_job.id).await;
        let maze = run_to_completion(&s, &maze_job.id).await;

        let offered = s.offered_review_domains(&snake.id, &alice.id).await.unwrap().unwrap();
        assert_eq!(
            (offered.domains, offered.source),
            (vec!["overall".to_string()], DomainSource::Default)
        );
        // Alice rates her own domains on an undeclared version: they are remembered for her only.
        s.submit_review(
            &snake.id,
            &alice.id,
            &rate(&[("feel", Rating::Great), ("sound", Rating::Scuffed)]),
        )
        .await
        .unwrap();
        let offered = s.offered_review_domains(&snake.id, &alice.id).await.unwrap().unwrap();
        assert_eq!(
            (offered.domains, offered.source),
            (vec!["feel".to_string(), "sound".to_string()], DomainSource::Remembered)
        );
        let offered = s.offered_review_domains(&snake.id, &bob.id).await.unwrap().unwrap();
        assert_eq!(offered.source, DomainSource::Default, "remembered per account");
        // A declared version offers its own domains; rating them does not change what she remembers.
        let offered = s.offered_review_domains(&maze.id, &alice.id).await.unwrap().unwrap();
        assert_eq!(
            (offered.domains, offered.source),
            (
                vec!["gameplay".to_string(), "visuals".to_string()],
                DomainSource::CaseVersion
            )
        );
        s.submit_review(
            &maze.id,
            &alice.id,
            &rate(&[("gameplay", Rating::Great), ("extra", Rating::Passable)]),
        )
        .await
        .unwrap();
        let offered = s.offered_review_domains(&snake.id, &alice.id).await.unwrap().unwrap();
        assert_eq!(offered.domains, vec!["feel".to_string(), "sound".to_string()]);
        assert!(
            s.offered_review_domains(&"run_nope".to_string().into(), &alice.id)
                .await
                .unwrap()
                .is_none()
        );
    }
);

on_both!(
    a_game_jam_run_shows_the_worst_category_across_every_reviewer_and_no_rating,
    |s: Store| async move {
        add_harness(&s, "a", 1).await;
        let (alice, _) = s.create_account("alice").await.unwrap();
        let (bob, _) = s.create_account("bob").await.unwrap();
        let job = s
            .enqueue(NewJob {
                test_type: Some(TestType::GameJam),
                ..new_job("a")
            })
            .await
            .unwrap();
        s.claim("k").await.unwrap();
        let run = run_to_completion(&s, &job.id).await;
        assert_eq!((run.rating, run.category), (None, None), "no review yet");
        let jam = |c: JamCategory| ReviewInput {
            ratings: None,
            category: Some(c),
            note: None,
        };
        s.submit_review(&run.id, &alice.id, &jam(JamCategory::Gold))
            .await
            .unwrap();
        s.submit_review(&run.id, &bob.id, &jam(JamCategory::Brick))
            .await
            .unwrap();
        let shown = s.get_run(&run.id).await.unwrap().unwrap();
        assert_eq!(
            (shown.rating, shown.category, shown.review_count),
            (None, Some(JamCategory::Brick), 2)
        );
        s.submit_review(&run.id, &bob.id, &jam(JamCategory::Diamond))
            .await
            .unwrap();
        let listed = s
            .list_runs(&belay_store::runs::RunFilter {
                job_id: Some(job.id.to_string()),
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(
            listed[0].category,
            Some(JamCategory::Gold),
            "a replaced review counts as replaced"
        );
    }
);

on_both!(
    a_project_being_deleted_and_everything_in_it_are_not_found,
    |s: Store| async move {
        use belay_domain::change::{ChangeInput, ChangeSetInput, TaskInput, TaskKind};
        use belay_domain::project::ProjectInput;
        use belay_store::edit_sessions::OpenSession;
        let (alice, _) = s.create_account("alice").await.unwrap();
        let project = |name: &str| ProjectInput {
            name: name.into(),
            workspace_policy: None,
        };
        let p = s.create_project(&alice.id, &project("doomed")).await.unwrap();
        let kept = s.create_project(&alice.id, &project("kept")).await.unwrap();
        let c = s
            .create_change(
                &alice.id,
                &p.id,
                &ChangeInput {
                    goal: "g".into(),
                    acceptance_criteria: vec![],
                    invariants: vec![],
                    risk_tier: None,
                },
            )
            .await
            .unwrap();
        let t = s
            .add_task(
                &alice.id,
                &c.id,
                &TaskInput {
                    key: "t".into(),
                    kind: TaskKind::Implement,
                    title: "t".into(),
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
                    commit: "0123456789abcdef0123456789abcdef01234567".into(),
                    contract_changes: vec![],
                    data_changes: vec![],
                },
            )
            .await
            .unwrap();
        s.mark_project_provisioned(&p.id, "c0", "t0").await.unwrap();
        let OpenSession::Opened(session) = s
            .open_edit_session(&alice.id, &p.id, &EditSessionId::from("edit_1"))
            .await
            .unwrap()
        else {
            panic!("the session opens");
        };

        assert!(s.mark_project_deleting(&alice.id, &p.id).await.unwrap());
        assert!(s.get_project(&alice.id, &p.id).await.unwrap().is_none());
        let listed: Vec<_> = s
            .list_projects(&alice.id)
            .await
            .unwrap()
            .into_iter()
            .map(|p| p.id)
            .collect();
        assert_eq!(listed, vec![kept.id.clone()]);
        assert!(s.get_change(&alice.id, &c.id).await.unwrap().is_none());
        assert!(s.list_changes(&alice.id, &p.id).await.unwrap().is_empty());
        assert!(matches!(
            s.list_tasks(&alice.id, &c.id).await,
            Err(StoreError::NotFound { .. })
        ));
        assert!(matches!(
            s.start_task_run(&alice.id, &t.id).await,
            Err(StoreError::NotFound { .. })
        ));
        assert!(s.get_change_set(&alice.id, &cs.id).await.unwrap().is_none());
        assert!(
            s.get_edit_session(&alice.id, &EditSessionId::from(session.id.as_str()))
                .await
                .unwrap()
                .is_none()
        );
        assert!(matches!(
            s.open_edit_session(&alice.id, &p.id, &EditSessionId::from("edit_2"))
                .await,
            Err(StoreError::NotFound { .. })
        ));
        // The deletion itself still finds what it removes.
        assert!(s.project_repository_names(&p.id).await.unwrap().len() >= 2);
        assert!(s.get_project(&alice.id, &kept.id).await.unwrap().is_some());
    }
);

on_both!(
    a_project_is_provisioned_once_and_only_its_owner_sees_it,
    |s: Store| async move {
        use belay_domain::project::{ProjectInput, ProjectStatus};
        let (alice, _) = s.create_account("alice").await.unwrap();
        let (bob, _) = s.create_account("bob").await.unwrap();
        let p = s
            .create_project(
                &alice.id,
                &ProjectInput {
                    name: "todos".into(),
                    workspace_policy: None,
                },
            )
            .await
            .unwrap();
        assert!(p.id.starts_with("proj_"));
        assert_eq!((p.status, p.generation), (ProjectStatus::Provisioning, 0));
        assert!(s.get_project(&bob.id, &p.id).await.unwrap().is_none());
        assert!(s.list_projects(&bob.id).await.unwrap().is_empty());
        s.mark_project_provisioned(&p.id, "c1", "t1").await.unwrap();
        s.mark_project_provisioned(&p.id, "c2", "t2").await.unwrap();
        let p = s.get_project(&alice.id, &p.id).await.unwrap().unwrap();
        assert_eq!(
            (p.status, p.canonical_commit.as_deref(), p.generation),
            (ProjectStatus::Ready, Some("c1"), 0)
        );
        assert!(matches!(
            s.create_project(
                &alice.id,
                &ProjectInput {
                    name: " ".into(),
                    workspace_policy: None
                }
            )
            .await,
            Err(StoreError::Invalid(_))
        ));
        assert_eq!(s.list_projects(&alice.id).await.unwrap().len(), 1);
    }
);

on_both!(
    a_change_holds_tasks_runs_and_one_change_set_per_run_for_its_owner_only,
    |s: Store| async move {
        use belay_domain::change::{ChangeInput, ChangeSetInput, RiskTier, TaskInput, TaskKind};
        use belay_domain::project::ProjectInput;
        let (alice, _) = s.create_account("alice").await.unwrap();
        let (bob, _) = s.create_account("bob").await.unwrap();
        let p = s
            .create_project(
                &alice.id,
                &ProjectInput {
                    name: "todos".into(),
                    workspace_policy: None,
                },
            )
            .await
            .unwrap();
        let input = ChangeInput {
            goal: "Add a calendar view".into(),
            acceptance_criteria: vec!["A calendar page lists todos by date".into()],
            invariants: vec!["GET /api/todos must remain unchanged".into()],
            risk_tier: Some(RiskTier::Medium),
        };
        assert!(matches!(
            s.create_change(&bob.id, &p.id, &input).await,
            Err(StoreError::NotFound { .. })
        ));
        let c = s.create_change(&alice.id, &p.id, &input).await.unwrap();
        assert_eq!((c.risk_tier, c.acceptance_criteria.len()), (Some(RiskTier::Medium), 1));
        let t = |key: &str, deps: &[&str]| TaskInput {
            key: key.into(),
            kind: TaskKind::Implement,
            title: format!("task {key}"),
            semantic_resources: vec![format!("todos:{key}")],
            dependencies: deps.iter().map(|d| d.to_string()).collect(),
        };
        let t1 = s.add_task(&alice.id, &c.id, &t("api", &[])).await.unwrap();
        let t2 = s.add_task(&alice.id, &c.id, &t("ui", &["api"])).await.unwrap();
        assert_eq!(t2.dependencies, vec!["api"]);
        assert!(matches!(
            s.add_task(&alice.id, &c.id, &t("ui", &[])).await,
            Err(StoreError::Conflict(m)) if m.starts_with("key:")
        ));
        assert!(matches!(
            s.add_task(&alice.id, &c.id, &t("x", &["nope"])).await,
            Err(StoreError::Conflict(m)) if m.starts_with("dependencies[0]:")
        ));
        assert!(matches!(
            s.add_task(&alice.id, &c.id, &t("BAD", &[])).await,
            Err(StoreError::Invalid(e)) if e.field == "key"
        ));
        assert!(matches!(
            s.add_task(&bob.id, &c.id, &t("x", &[])).await,
            Err(StoreError::NotFound { .. })
        ));
        assert_eq!(s.list_tasks(&alice.id, &c.id).await.unwrap().len(), 2);
        let run = s.start_task_run(&alice.id, &t1.id).await.unwrap();
        assert!(run.id.starts_with("trun_"), "{}", run.id);
        let cs_in = ChangeSetInput {
            commit: "0123456789abcdef0123456789abcdef01234567".into(),
            contract_changes: vec!["GET /api/calendar -> [{date, todos}]".into()],
            data_changes: vec![],
        };
        assert!(matches!(
            s.record_change_set(&bob.id, &run.id, &cs_in).await,
            Err(StoreError::NotFound { .. })
        ));
        let cs = s.record_change_set(&alice.id, &run.id, &cs_in).await.unwrap();
        assert_eq!(
            (cs.task_id.as_str(), cs.commit.as_str()),
            (t1.id.as_str(), cs_in.commit.as_str())
        );
        assert!(matches!(
            s.record_change_set(&alice.id, &run.id, &cs_in).await,
            Err(StoreError::Conflict(_))
        ));
        assert!(s.get_change_set(&bob.id, &cs.id).await.unwrap().is_none());
        assert_eq!(s.list_changes(&alice.id, &p.id).await.unwrap().len(), 1);
    }
);

on_both!(
    concurrent_sandbox_reservations_never_pass_the_monthly_cap,
    |s: Store| async move {
        use belay_domain::meter::{Reservation, SANDBOX_MONTHLY_SECONDS};
        use belay_store::meter::Reserve;
        let now = 1_796_009_402; // 2026-11
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let s = s.clone();
                tokio::spawn(async move {
                    let mut granted = 0u64;
                    for _ in 0..25 {
                        if let Reserve::Reserved { seconds, .. } = s
                            .reserve_sandbox(&ProjectId::from("proj_meter"), Reservation::EditSessionCommand, now)
                            .await
                            .unwrap()
                        {
                            granted += seconds;
                        }
                    }
                    granted
                })
            })
            .collect();
        let mut total = 0;
        for t in tasks {
            total += t.await.unwrap();
        }
        // 200 attempts of 480 s against 72,000 s: exactly 150 fit.
        assert_eq!(total, SANDBOX_MONTHLY_SECONDS);
        match s
            .reserve_sandbox(&ProjectId::from("proj_meter"), Reservation::OpenWorkspace, now)
            .await
            .unwrap()
        {
            Reserve::Refused(cap) => assert!(cap.to_string().starts_with("sandbox_cap")),
            other => panic!("reserved past the cap: {other:?}"),
        }
        // Another project has its own meter, and next month starts afresh.
        assert!(matches!(
            s.reserve_sandbox(&ProjectId::from("proj_other"), Reservation::OpenWorkspace, now)
                .await
                .unwrap(),
            Reserve::Reserved { .. }
        ));
        assert!(matches!(
            s.reserve_sandbox(
                &ProjectId::from("proj_meter"),
                Reservation::OpenWorkspace,
                now + 31 * 86_400
            )
            .await
            .unwrap(),
            Reserve::Reserved { .. }
        ));
    }
);

on_both!(overlapping_sandbox_uses_are_charged_once, |s: Store| async move {
    use belay_domain::meter::Reservation;
    use belay_store::meter::Reserve;
    let now = 1_796_009_402;
    let reserve = || async {
        match s
            .reserve_sandbox(&ProjectId::from("proj_x"), Reservation::OpenWorkspace, now)
            .await
            .unwrap()
        {
            Reserve::Reserved { id, .. } => id,
            other => panic!("{other:?}"),
        }
    };
    let (a, b, c) = (reserve().await, reserve().await, reserve().await);
    // A: 0-60 (awake to 180). B: 100-150 overlaps A's tail (awake to 270): adds 90.
    assert_eq!(s.settle_sandbox(&a, now, now + 60).await.unwrap(), 180);
    assert_eq!(s.settle_sandbox(&b, now + 100, now + 150).await.unwrap(), 90);
    // A retried settle charges nothing more; C inside what is already charged adds nothing.
    assert_eq!(s.settle_sandbox(&a, now, now + 60).await.unwrap(), 180);
    assert_eq!(s.settle_sandbox(&c, now + 10, now + 20).await.unwrap(), 0);
    assert_eq!(s.sandbox_charged(&ProjectId::from("proj_x"), now).await.unwrap(), 270);
});

on_both!(
    concurrent_admissions_never_open_a_fifth_workspace_in_a_change,
    |s: Store| async move {
        use belay_domain::change::{ChangeInput, TaskInput, TaskKind};
        use belay_domain::project::ProjectInput;
        use belay_store::workspaces::Admission;
        let (alice, _) = s.create_account("alice").await.unwrap();
        let p = s
            .create_project(
                &alice.id,
                &ProjectInput {
                    name: "todos".into(),
                    workspace_policy: None,
                },
            )
            .await
            .unwrap();
        let c = s
            .create_change(
                &alice.id,
                &p.id,
                &ChangeInput {
                    goal: "g".into(),
                    acceptance_criteria: vec![],
                    invariants: vec![],
                    risk_tier: None,
                },
            )
            .await
            .unwrap();
        let mut runs = Vec::new();
        for i in 0..8 {
            let t = s
                .add_task(
                    &alice.id,
                    &c.id,
                    &TaskInput {
                        key: format!("t{i}"),
                        kind: TaskKind::Implement,
                        title: "t".into(),
                        semantic_resources: vec![],
                        dependencies: vec![],
                    },
                )
                .await
                .unwrap();
            runs.push(s.start_task_run(&alice.id, &t.id).await.unwrap().id);
        }
        // Eight runs ask at once, twice each (a retried activity): four places, each once.
        let tasks: Vec<_> = runs
            .iter()
            .chain(runs.iter())
            .map(|run| {
                let (s, run, change, project) = (s.clone(), run.clone(), c.id.clone(), p.id.clone());
                tokio::spawn(async move {
                    (
                        run.clone(),
                        s.admit_workspace(&run, &change, &project, NOW_SECS).await.unwrap(),
                    )
                })
            })
            .collect();
        let mut admitted = BTreeSet::new();
        for t in tasks {
            let (run, a) = t.await.unwrap();
            if let Admission::Admitted(row) = a {
                assert_eq!(row.run_id, run);
                admitted.insert(run);
            }
        }
        assert_eq!(admitted.len(), 4, "{admitted:?}");
        // An admitted run is admitted again, whatever the count; a failed one frees its place.
        let first = admitted.iter().next().unwrap().clone();
        assert!(matches!(
            s.admit_workspace(&first, &c.id, &p.id, NOW_SECS).await.unwrap(),
            Admission::Admitted(_)
        ));
        let waiting = runs.iter().find(|r| !admitted.contains(*r)).unwrap().clone();
        assert!(matches!(
            s.admit_workspace(&waiting, &c.id, &p.id, NOW_SECS).await.unwrap(),
            Admission::Refused { open: 4 }
        ));
        s.fail_workspace(&first, "closed").await.unwrap();
        assert!(matches!(
            s.admit_workspace(&waiting, &c.id, &p.id, NOW_SECS).await.unwrap(),
            Admission::Admitted(_)
        ));
        assert_eq!(s.get_workspace(&first).await.unwrap().unwrap().status, "failed");
    }
);

use belay_store::on_both;
use belay_store::workspaces::Admission;

/// Unix seconds the workspace tests reserve at (any fixed month does).
const NOW_SECS: i64 = 1_796_000_000;

/// A project with a Change and one task run, owned by a fresh account.
async fn one_task_run(s: &Store) -> (String, String, String) {
    use belay_domain::change::{ChangeInput, TaskInput, TaskKind};
    use belay_domain::project::ProjectInput;
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
    let c = s
        .create_change(
            &alice.id,
            &p.id,
            &ChangeInput {
                goal: "g".into(),
                acceptance_criteria: vec![],
                invariants: vec![],
                risk_tier: None,
            },
        )
        .await
        .unwrap();
    let t = s
        .add_task(
            &alice.id,
            &c.id,
            &TaskInput {
                key: "t".into(),
                kind: TaskKind::Implement,
                title: "t".into(),
                semantic_resources: vec![],
                dependencies: vec![],
            },
        )
        .await
        .unwrap();
    let run = s.start_task_run(&alice.id, &t.id).await.unwrap().id;
    (p.id.into(), c.id.into(), run.into())
}

on_both!(
    an_admission_holds_its_reservation_and_a_cap_refusal_keeps_neither,
    |s: Store| async move {
        let (project, change, run) = one_task_run(&s).await;
        let Admission::Admitted(row) = s
            .admit_workspace(
                &TaskRunId::from(run.as_str()),
                &ChangeId::from(change.as_str()),
                &ProjectId::from(project.as_str()),
                NOW_SECS,
            )
            .await
            .unwrap()
        else {
            panic!("not admitted")
        };
        let reservation = row.reservation_id.expect("admitted with its reservation");
        // A retried admission keeps the one reservation.
        let Admission::Admitted(again) = s
            .admit_workspace(
                &TaskRunId::from(run.as_str()),
                &ChangeId::from(change.as_str()),
                &ProjectId::from(project.as_str()),
                NOW_SECS,
            )
            .await
            .unwrap()
        else {
            panic!("not admitted again")
        };
        assert_eq!(again.reservation_id.as_deref(), Some(reservation.as_str()));

        // Fill the meter: the next admission's reservation is refused, and nothing of it stays.
        let (project2, change2, run2) = one_task_run(&s).await;
        while let belay_store::meter::Reserve::Reserved { .. } = s
            .reserve_sandbox(
                &ProjectId::from(project2.as_str()),
                belay_domain::meter::Reservation::CandidateChecks,
                NOW_SECS,
            )
            .await
            .unwrap()
        {}
        assert!(matches!(
            s.admit_workspace(
                &TaskRunId::from(run2.as_str()),
                &ChangeId::from(change2.as_str()),
                &ProjectId::from(project2.as_str()),
                NOW_SECS
            )
            .await
            .unwrap(),
            Admission::CapRefused(_)
        ));
        assert_eq!(
            s.get_workspace(&TaskRunId::from(run2.as_str())).await.unwrap(),
            None,
            "a refused admission is not kept"
        );
    }
);

on_both!(
    a_transaction_dropped_between_admission_and_commit_keeps_neither_admission_nor_reservation,
    |s: Store| async move {
        let (project, change, run) = one_task_run(&s).await;
        let open_before = s.open_reservations(&ProjectId::from(project.as_str())).await.unwrap();
        {
            let mut tx = s.begin().await.unwrap();
            let admission = belay_store::workspaces::admit(
                &mut tx,
                &TaskRunId::from(run.as_str()),
                &ChangeId::from(change.as_str()),
                &ProjectId::from(project.as_str()),
                NOW_SECS,
            )
            .await
            .unwrap();
            assert!(matches!(admission, Admission::Admitted(_)));
            // The process dies here: the transaction is dropped without a commit.
        }
        assert_eq!(s.get_workspace(&TaskRunId::from(run.as_str())).await.unwrap(), None);
        assert_eq!(
            s.open_reservations(&ProjectId::from(project.as_str())).await.unwrap(),
            open_before
        );
        // And the next attempt admits and reserves as if nothing had happened.
        assert!(matches!(
            s.admit_workspace(
                &TaskRunId::from(run.as_str()),
                &ChangeId::from(change.as_str()),
                &ProjectId::from(project.as_str()),
                NOW_SECS
            )
            .await
            .unwrap(),
            Admission::Admitted(_)
        ));
        assert_eq!(
            s.open_reservations(&ProjectId::from(project.as_str())).await.unwrap(),
            open_before + 1
        );
    }
);

on_both!(a_revoked_repository_token_is_seen_revoked_once, |s: Store| async move {
    assert!(!s.repo_token_revoked(&TokenId::from("rt_0a")).await.unwrap());
    assert!(s.revoke_repo_token(&TokenId::from("rt_0a"), 600).await.unwrap());
    assert!(
        !s.revoke_repo_token(&TokenId::from("rt_0a"), 600).await.unwrap(),
        "a second revoke is not fresh"
    );
    assert!(s.repo_token_revoked(&TokenId::from("rt_0a")).await.unwrap());
    assert!(!s.repo_token_revoked(&TokenId::from("rt_0b")).await.unwrap());
});

/// On PostgreSQL a sequence hands out numbers before commit. A completion running while a claim
/// holds the dispatcher lock must wait for it, so that its transition is numbered after the
/// claim's: replaying the log in `seq` order then never shows a free slot the claim did not see.
/// (SQLite runs one writer at a time, so the order there is the commit order anyway.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_a_completion_is_numbered_after_the_claim_it_waited_for() {
    let db = fresh(Backend::Postgres).await;
    let s = db.store.clone();
    add_harness(&s, "a", 1).await;
    let job = s.enqueue(new_job("a")).await.unwrap();
    assert_eq!(s.claim("k").await.unwrap().len(), 1);
    s.advance_job(&job.id, JobStatus::Starting).await.unwrap();
    s.advance_job(&job.id, JobStatus::Running).await.unwrap();
    let held = s.enqueue(new_job("a")).await.unwrap();

    // A claim in progress on another connection: it holds the dispatcher lock.
    let pool = sqlx::postgres::PgPool::connect(&db.url).await.unwrap();
    let mut claim = pool.begin().await.unwrap();
    sqlx::query("update dispatcher_lock set claims = claims + 1 where id = 1")
        .execute(&mut *claim)
        .await
        .unwrap();
    let completing = tokio::spawn({
        let (s, id) = (s.clone(), job.id.clone());
        async move { s.complete_job(&id, true, &[]).await.unwrap() }
    });
    // Until the completion has either finished or is waiting for a lock in this database.
    let what = "the completion to finish or wait for a lock";
    belay_testkit::wait_until(what, std::time::Duration::from_secs(30), async || {
        if completing.is_finished() {
            return Ok(());
        }
        let waiting: bool = sqlx::query_scalar(
            "select exists(select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock')",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        if waiting { Ok(()) } else { Err("neither") }
    })
    .await;
    // The claim holds the second job back and commits.
    sqlx::query("insert into job_transitions (job_id, from_status, to_status, at) values ($1, 'queued', 'pending', 0)")
        .bind(held.id.as_str())
        .execute(&mut *claim)
        .await
        .unwrap();
    claim.commit().await.unwrap();
    assert!(matches!(completing.await.unwrap(), Completion::Recorded(_)));

    let log = s.transitions(0, 100).await.unwrap();
    let seq_of = |id: &str, to: JobStatus| log.iter().find(|t| t.job_id == id && t.to == to).unwrap().seq;
    assert!(
        seq_of(&job.id, JobStatus::Completed) > seq_of(&held.id, JobStatus::Pending),
        "the completion was numbered before the claim it committed after: {log:?}"
    );
}
