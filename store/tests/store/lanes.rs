//! Providers, provider and model lanes in the claim, attempts and failure classes, and a retry by
//! hand, on SQLite and on PostgreSQL.

use belay_domain::attempt::FailureClass;
use belay_domain::catalogue::{AdapterSpec, HarnessInput, HarnessUpdate, ModelInput, ProviderInput, ProviderUpdate};
use belay_domain::ids::{JobId, PlanId};
use belay_domain::job::{CasePin, Combination, JobStatus, Origin};
use belay_store::attempts::NewAttempt;
use belay_store::jobs::{Completion, NewJob, Transition};
use belay_store::{Store, StoreError, on_both};

fn job(h: &str, model: &str, origin: Option<Origin>) -> NewJob {
    NewJob {
        case: CasePin {
            slug: "snake".into(),
            version: "1.0.0".into(),
            variant: "default".into(),
            engine: "none".into(),
        },
        combination: Combination::Harness {
            harness: h.into(),
            model: model.into(),
            provider: None,
        },
        gg_config_name: None,
        capabilities: None,
        test_type: None,
        user_id: None,
        origin,
        attempt: 1,
        retry_of: None,
    }
}

async fn harness(s: &Store, name: &str, cap: i64, provider: Option<&str>) {
    s.create_harness(&HarnessInput {
        provider: provider.map(Into::into),
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

fn model(id: &str, provider: Option<&str>, cap: Option<i64>) -> ModelInput {
    ModelInput {
        provider: provider.map(Into::into),
        max_parallelism: cap,
        id: id.into(),
        context_window: None,
        list_price: None,
    }
}

async fn running(s: &Store, id: &JobId) {
    for to in [JobStatus::Starting, JobStatus::Running] {
        assert!(matches!(s.advance_job(id, to).await.unwrap(), Transition::Moved(_)));
    }
}

on_both!(
    a_provider_lane_across_two_harnesses_holds_the_second_job_naming_it,
    |s: Store| async move {
        s.create_provider(&ProviderInput {
            name: "acme".into(),
            max_parallelism: Some(1),
        })
        .await
        .unwrap();
        harness(&s, "h1", 5, Some("acme")).await;
        harness(&s, "h2", 5, Some("acme")).await;
        let a = s.enqueue(job("h1", "m", None)).await.unwrap();
        let b = s.enqueue(job("h2", "m", None)).await.unwrap();
        let got = s.claim("k1").await.unwrap();
        assert_eq!(got.iter().map(|j| &j.id).collect::<Vec<_>>(), [&a.id]);
        let held = s.get_job(&b.id).await.unwrap().unwrap();
        assert_eq!(
            (held.status, held.held_by.as_deref()),
            (JobStatus::Pending, Some("provider:acme"))
        );
        // The lane changes while a job runs: the next claim takes the second job.
        s.update_provider(
            "acme",
            &ProviderUpdate {
                max_parallelism: Some(Some(2)),
            },
        )
        .await
        .unwrap();
        let got = s.claim("k2").await.unwrap();
        assert_eq!(got.iter().map(|j| &j.id).collect::<Vec<_>>(), [&b.id]);
        assert_eq!(s.get_job(&b.id).await.unwrap().unwrap().held_by, None);
    }
);

on_both!(
    a_model_lane_passes_over_its_jobs_and_claims_the_rest_in_queue_order,
    |s: Store| async move {
        s.create_model(&model("big", None, Some(1))).await.unwrap();
        harness(&s, "h", 10, None).await;
        let ids: Vec<JobId> = {
            let mut v = vec![];
            for m in ["big", "big", "small", "big", "small"] {
                v.push(s.enqueue(job("h", m, None)).await.unwrap().id);
            }
            v
        };
        let got: Vec<JobId> = s.claim("k").await.unwrap().into_iter().map(|j| j.id).collect();
        assert_eq!(got, [ids[0].clone(), ids[2].clone(), ids[4].clone()]);
        for i in [1, 3] {
            let j = s.get_job(&ids[i]).await.unwrap().unwrap();
            assert_eq!(
                (j.status, j.held_by.as_deref()),
                (JobStatus::Pending, Some("model:big"))
            );
        }
    }
);

on_both!(
    a_provider_that_does_not_exist_or_is_in_use_is_refused_and_nothing_is_written,
    |s: Store| async move {
        assert!(matches!(
            s.create_model(&model("m", Some("nowhere"), None)).await,
            Err(StoreError::Invalid(e)) if e.field == "provider"
        ));
        assert!(s.list_models().await.unwrap().is_empty());
        assert!(matches!(
            s.create_provider(&ProviderInput {
                name: "p".into(),
                max_parallelism: Some(10_001)
            })
            .await,
            Err(StoreError::Invalid(e)) if e.field == "maxParallelism"
        ));
        s.create_provider(&ProviderInput {
            name: "p".into(),
            max_parallelism: None,
        })
        .await
        .unwrap();
        assert!(matches!(
            s.create_provider(&ProviderInput {
                name: "p".into(),
                max_parallelism: None
            })
            .await,
            Err(StoreError::Conflict(_))
        ));
        s.create_model(&model("m", Some("p"), Some(3))).await.unwrap();
        harness(&s, "h", 1, Some("p")).await;
        match s.delete_provider("p").await {
            Err(StoreError::Conflict(m)) => assert!(m.contains("[h]") && m.contains("[m]"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(s.get_provider("p").await.unwrap().is_some());
        s.update_harness(
            "h",
            &HarnessUpdate {
                provider: Some(None),
                provider_routed: None,
                max_parallelism: None,
                adapter: None,
            },
        )
        .await
        .unwrap();
        assert_eq!(s.provider_users("p").await.unwrap(), (vec![], vec!["m".to_string()]));
    }
);

on_both!(
    attempts_are_kept_once_and_read_across_the_retry_chain,
    |s: Store| async move {
        harness(&s, "h", 5, None).await;
        let first = s.enqueue(job("h", "m", None)).await.unwrap();
        s.claim("k1").await.unwrap();
        running(&s, &first.id).await;
        let attempt = |id: &JobId, n: i64, class: Option<FailureClass>| NewAttempt {
            job_id: id.clone(),
            n,
            started_at: 10 * n,
            ended_at: 10 * n + 5,
            worker: Some("host/1".into()),
            exit: Some(3),
            failure_class: class,
            message: Some("boom".into()),
            log_tail: Some("x".repeat(10_000)),
        };
        s.record_attempt(&attempt(&first.id, 1, Some(FailureClass::Infra)))
            .await
            .unwrap();
        s.record_attempt(&attempt(&first.id, 1, Some(FailureClass::Infra)))
            .await
            .unwrap();
        let f = s
            .fail_job_as(&first.id, "boom", true, Some(FailureClass::Infra))
            .await
            .unwrap();
        let retry = f.retry.expect("an infrastructure failure is retried");
        s.claim("k2").await.unwrap();
        running(&s, &retry.id).await;
        s.record_attempt(&attempt(&retry.id, 1, None)).await.unwrap();
        let all = s.list_attempts(&retry.id).await.unwrap().unwrap();
        assert_eq!(all, s.list_attempts(&first.id).await.unwrap().unwrap());
        assert_eq!(all.len(), 2);
        assert_eq!((all[0].job_attempt, all[1].job_attempt), (1, 2));
        assert_eq!(all[0].failure_class, Some(FailureClass::Infra));
        assert_eq!(all[0].log_tail.as_ref().map(String::len), Some(4096));
        assert!(s.list_attempts(&JobId::from("job_missing")).await.unwrap().is_none());
    }
);

on_both!(
    a_task_failure_completes_with_a_failed_run_and_a_refusal_pauses_the_plan,
    |s: Store| async move {
        harness(&s, "h", 5, None).await;
        let (acct, _) = s.create_account("alice").await.unwrap();
        let plan = PlanId::from("plan_1");
        s.set_plan_paused(&plan, &acct.id, false).await.unwrap();
        let origin = Some(Origin::Plan("plan_1".into()));
        let task = s.enqueue(job("h", "m", origin.clone())).await.unwrap();
        let refused = s.enqueue(job("h", "m", origin.clone())).await.unwrap();
        s.claim("k").await.unwrap();
        running(&s, &task.id).await;
        running(&s, &refused.id).await;
        let run = match s
            .complete_job_as(&task.id, false, &[], Some("tests failed"))
            .await
            .unwrap()
        {
            Completion::Recorded(r) => r,
            other => panic!("{other:?}"),
        };
        assert_eq!(run.task_failure.as_deref(), Some("tests failed"));
        let j = s.get_job(&task.id).await.unwrap().unwrap();
        assert_eq!(
            (j.status, j.failure_class),
            (JobStatus::Completed, Some(FailureClass::Task))
        );

        let f = s
            .fail_job_as(&refused.id, "spend cap", true, Some(FailureClass::ProviderRefused))
            .await
            .unwrap();
        assert!(f.retry.is_none(), "a refusal is not retried");
        let events = s.events(0, None, 100).await.unwrap();
        assert!(
            events
                .iter()
                .any(|e| e.kind == "provider.refused" && e.entity == refused.id.as_str())
        );

        // The refusal paused the plan: a retry by hand is refused until it is resumed; then the
        // job is retried once, and never again.
        assert!(matches!(s.retry_now(&refused.id).await, Err(StoreError::Conflict(m)) if m.contains("paused")));
        s.set_plan_paused(&plan, &acct.id, false).await.unwrap();
        let again = s.retry_now(&refused.id).await.unwrap();
        assert_eq!((again.attempt, again.retry_of.as_ref()), (2, Some(&refused.id)));
        assert_eq!(again.origin, origin);
        assert!(matches!(s.retry_now(&refused.id).await, Err(StoreError::Conflict(_))));
        assert!(matches!(s.retry_now(&task.id).await, Err(StoreError::Conflict(_))));
    }
);
