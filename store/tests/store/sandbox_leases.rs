//! The Sandbox lease book on SQLite and on PostgreSQL: what every worker of a deployment reads
//! before it starts a Sandbox, starts a command in one, or removes one.

use belay_domain::ids::ProjectId;
use belay_store::Store;
use belay_store::on_both;
use belay_store::sandbox_leases::LeaseAcquired;

on_both!(
    a_sandbox_with_a_command_running_is_never_taken_by_another_workers_reaper,
    async |store: Store| {
        assert_eq!(
            store
                .acquire_sandbox_lease(&ProjectId::from("proj_a"), "w1", 4, 0)
                .await
                .unwrap(),
            LeaseAcquired::Taken
        );
        assert!(
            store
                .begin_sandbox_exec(&ProjectId::from("proj_a"), "x1", "w1", 1_000, 1_000 + 50_000 + 60_000)
                .await
                .unwrap()
        );
        // Worker 2 looks long after: the command is still marked running.
        assert!(
            store
                .take_idle_sandboxes("w2", 100_000, 2_000)
                .await
                .unwrap()
                .is_empty()
        );
        let leases = store.sandbox_leases(100_000).await.unwrap();
        assert_eq!(
            (leases.len(), leases[0].in_flight, leases[0].holder.as_str()),
            (1, 1, "w1")
        );
        store
            .end_sandbox_exec(&ProjectId::from("proj_a"), "x1", 51_000)
            .await
            .unwrap();
        assert!(store.take_idle_sandboxes("w2", 52_000, 2_000).await.unwrap().is_empty());
        assert_eq!(
            store.take_idle_sandboxes("w2", 53_000, 2_000).await.unwrap(),
            vec!["proj_a"]
        );
        // Being removed: no command starts and no ensure takes it.
        assert!(
            !store
                .begin_sandbox_exec(&ProjectId::from("proj_a"), "x2", "w1", 53_500, 200_000)
                .await
                .unwrap()
        );
        assert_eq!(
            store
                .acquire_sandbox_lease(&ProjectId::from("proj_a"), "w1", 4, 53_500)
                .await
                .unwrap(),
            LeaseAcquired::Reaping
        );
        store.release_sandbox_lease(&ProjectId::from("proj_a")).await.unwrap();
        assert!(store.sandbox_leases(54_000).await.unwrap().is_empty());
        assert!(
            !store
                .begin_sandbox_exec(&ProjectId::from("proj_a"), "x3", "w1", 55_000, 200_000)
                .await
                .unwrap(),
            "no lease, no command"
        );
        assert!(store.deployment_name().await.unwrap().starts_with('d'));
    }
);

on_both!(
    a_dead_workers_command_holds_the_sandbox_only_until_its_mark_expires,
    async |store: Store| {
        store
            .acquire_sandbox_lease(&ProjectId::from("proj_a"), "w1", 4, 0)
            .await
            .unwrap();
        assert!(
            store
                .begin_sandbox_exec(&ProjectId::from("proj_a"), "x1", "w1", 0, 10_000)
                .await
                .unwrap()
        );
        assert!(store.take_idle_sandboxes("w2", 9_999, 2_000).await.unwrap().is_empty());
        assert_eq!(
            store.take_idle_sandboxes("w2", 10_000, 2_000).await.unwrap(),
            vec!["proj_a"]
        );
        // A removal abandoned by its worker is taken over after a minute.
        assert!(store.take_idle_sandboxes("w3", 69_999, 2_000).await.unwrap().is_empty());
        assert_eq!(
            store.take_idle_sandboxes("w3", 70_000, 2_000).await.unwrap(),
            vec!["proj_a"]
        );
    }
);

on_both!(
    four_leases_in_the_deployment_refuse_a_fifth_also_when_taken_at_once,
    async |store: Store| {
        let mut tries = tokio::task::JoinSet::new();
        for n in 0..12 {
            let store = store.clone();
            tries.spawn(async move {
                store
                    .acquire_sandbox_lease(&ProjectId(format!("proj_{n}")), &format!("w{}", n % 2), 4, 0)
                    .await
                    .unwrap()
            });
        }
        let answers = tries.join_all().await;
        let taken = answers.iter().filter(|a| **a == LeaseAcquired::Taken).count();
        assert_eq!(taken, 4, "{answers:?}");
        assert!(
            answers
                .iter()
                .all(|a| matches!(a, LeaseAcquired::Taken | LeaseAcquired::Full { held: 4, max: 4 })),
            "{answers:?}"
        );
        assert_eq!(store.sandbox_leases(0).await.unwrap().len(), 4);
        // A held lease is still served, and a released slot can be taken.
        let held = store.sandbox_leases(0).await.unwrap()[0].project_id.clone();
        assert_eq!(
            store
                .acquire_sandbox_lease(&ProjectId::from(held.as_str()), "w9", 4, 5)
                .await
                .unwrap(),
            LeaseAcquired::Held
        );
        store
            .release_sandbox_lease(&ProjectId::from(held.as_str()))
            .await
            .unwrap();
        assert_eq!(
            store
                .acquire_sandbox_lease(&ProjectId::from("proj_new"), "w9", 4, 6)
                .await
                .unwrap(),
            LeaseAcquired::Taken
        );
    }
);

on_both!(
    a_command_start_is_recorded_once_per_activity_and_forgotten_after_a_week,
    async |store: Store| {
        let week = belay_store::sandbox_leases::COMMAND_STARTS_KEPT_MS;
        let a = "edit-edit_1/run-1/7";
        assert!(
            store
                .record_command_start(a, &ProjectId::from("proj_a"), 1_000)
                .await
                .unwrap()
        );
        // A retry of the same activity (any attempt) finds it; another activity does not.
        assert!(
            !store
                .record_command_start(a, &ProjectId::from("proj_a"), 2_000)
                .await
                .unwrap()
        );
        assert!(
            store
                .record_command_start("edit-edit_1/run-1/8", &ProjectId::from("proj_a"), 2_000)
                .await
                .unwrap()
        );
        // Twelve attempts at once: exactly one is first.
        let b = "ws-trun_1/run-1/3";
        let tries: Vec<_> = (0..12)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move {
                    store
                        .record_command_start(b, &ProjectId::from("proj_b"), 3_000)
                        .await
                        .unwrap()
                })
            })
            .collect();
        let mut firsts = 0;
        for t in tries {
            firsts += usize::from(t.await.unwrap());
        }
        assert_eq!(firsts, 1);
        // A week later the old records are gone (a new one prunes them).
        assert!(
            store
                .record_command_start("later", &ProjectId::from("proj_a"), 1_000 + week + 1)
                .await
                .unwrap()
        );
        assert!(
            store
                .record_command_start(a, &ProjectId::from("proj_a"), 1_000 + week + 2)
                .await
                .unwrap()
        );
    }
);
