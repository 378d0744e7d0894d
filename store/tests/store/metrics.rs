//! What the metrics read, on SQLite and on PostgreSQL: how top-ups ended (one row per top-up,
//! however often it is recorded) with the durations of those that ran, and the events of an
//! account's plans, groups and ladders kept to that account.

use belay_domain::coverage::CoveragePlanInput;
use belay_domain::ids::{AccountId, PlanId};
use belay_domain::job::Origin;
use belay_store::Store;
use belay_store::coverage::{self, Claim};
use belay_store::metrics::{Feed, TopUpEnd, record_top_up_end, record_top_up_skipped};
use belay_store::on_both;

fn plan_input() -> CoveragePlanInput {
    serde_json::from_value(serde_json::json!({
        "name": "p",
        "cases": [{"slug": "c", "version": "1.0.0", "variant": "default"}],
        "combinations": [{"kind": "harness", "harness": "h", "model": "m"}],
        "runsPerCell": 1,
        "autoTopUp": false
    }))
    .unwrap()
}

/// Top-up `holder` of `plan` runs its enqueue: an answer recorded (the catalogue is empty, so
/// the walk finds the plan's one cell unlaunchable and enqueues nothing).
async fn answer(tx: &mut belay_store::Tx, owner: &str, plan: &str, holder: &str) {
    let resolved = coverage::resolve_plan(tx, &AccountId::from(owner), &PlanId::from(plan))
        .await
        .unwrap()
        .unwrap();
    coverage::enqueue_top_up(
        tx,
        &AccountId::from(owner),
        &Origin::Plan(plan.to_owned()),
        &resolved.cells,
        1,
        resolved.target,
        holder,
    )
    .await
    .unwrap();
}

on_both!(
    each_top_up_is_counted_once_by_how_it_ended_with_the_duration_of_those_that_ran,
    async |store: Store| {
        let (owner, _) = store.create_account("owner").await.unwrap();
        let mut tx = store.begin().await.unwrap();
        let plan = coverage::create_plan(&mut tx, &owner.id, &plan_input()).await.unwrap();
        let plan = plan.id.to_string();
        // One that ran: claimed, answered (it enqueued nothing), ended; recorded twice (a retried
        // release) and counted once.
        let t0 = belay_store::now_ms() - 1_500;
        assert_eq!(
            coverage::claim_top_up(
                &mut tx,
                &owner.id,
                &PlanId::from(plan.as_str()),
                "run-1",
                t0,
                coverage::TOP_UP_LEASE_MS
            )
            .await
            .unwrap(),
            Claim::Claimed
        );
        answer(&mut tx, &owner.id, &plan, "run-1").await;
        for _ in 0..2 {
            record_top_up_end(&mut tx, Feed::Plan, &plan, "run-1").await.unwrap();
        }
        coverage::release_top_up(&mut tx, &PlanId::from(plan.as_str()), "run-1")
            .await
            .unwrap();
        // One that held the claim and recorded no answer.
        coverage::claim_top_up(
            &mut tx,
            &owner.id,
            &PlanId::from(plan.as_str()),
            "run-2",
            t0,
            coverage::TOP_UP_LEASE_MS,
        )
        .await
        .unwrap();
        record_top_up_end(&mut tx, Feed::Plan, &plan, "run-2").await.unwrap();
        // Skipped at the claim, twice each attempt, and a busy answer of the API.
        for _ in 0..2 {
            record_top_up_skipped(&mut tx, Feed::Plan, &plan, "run-3", TopUpEnd::Busy)
                .await
                .unwrap();
            record_top_up_skipped(&mut tx, Feed::Ladder, "lad_x", "run-4", TopUpEnd::Paused)
                .await
                .unwrap();
        }
        tx.commit().await.unwrap();
        store.record_top_up_busy(Feed::Plan, &plan).await.unwrap();

        let snap = store.metrics_snapshot().await.unwrap();
        let counted = |kind: &str, outcome: &str| {
            snap.top_ups
                .iter()
                .find(|(k, o, _)| k == kind && o == outcome)
                .map_or(0, |(_, _, n)| *n)
        };
        assert_eq!(counted("plan", "launched"), 1, "{:?}", snap.top_ups);
        assert_eq!(counted("plan", "failed"), 1);
        assert_eq!(counted("plan", "busy"), 2);
        assert_eq!(counted("ladder", "paused"), 1);
        assert_eq!(snap.top_up_seconds.len(), 1, "{:?}", snap.top_up_seconds);
        let (kind, seconds) = &snap.top_up_seconds[0];
        assert_eq!(kind, "plan");
        assert!((1.4..120.0).contains(seconds), "{seconds}");
    }
);

on_both!(
    the_events_of_an_accounts_plans_groups_and_ladders_are_its_own,
    async |store: Store| {
        let (owner, _) = store.create_account("owner").await.unwrap();
        let (other, _) = store.create_account("other").await.unwrap();
        let mut tx = store.begin().await.unwrap();
        let plan = coverage::create_plan(&mut tx, &owner.id, &plan_input()).await.unwrap();
        let plan = plan.id.to_string();
        answer(&mut tx, &owner.id, &plan, "run-1").await;
        assert!(
            coverage::delete_plan(&mut tx, &owner.id, &PlanId::from(plan.as_str()))
                .await
                .unwrap()
        );
        tx.commit().await.unwrap();
        let kinds = |events: Vec<belay_store::events::Event>| -> Vec<String> {
            events
                .into_iter()
                .filter(|e| e.kind.starts_with("coverage"))
                .map(|e| e.kind)
                .collect()
        };
        let mine = kinds(store.events_for(&owner.id, 0, None, 1000).await.unwrap());
        assert_eq!(
            mine,
            [
                "coverage_plan.created",
                "coverage_plan.topped_up",
                "coverage_plan.deleted"
            ],
            "the owner sees its plan's events, the one written after the delete included"
        );
        let theirs = kinds(store.events_for(&other.id, 0, None, 1000).await.unwrap());
        assert!(theirs.is_empty(), "{theirs:?}");
    }
);

on_both!(counters_only_grow_by_what_is_counted, async |store: Store| {
    use belay_store::metrics::RUN_START_FAILURES;
    assert!(store.metrics_snapshot().await.unwrap().counters.is_empty());
    store.count(RUN_START_FAILURES, 2).await.unwrap();
    store.count(RUN_START_FAILURES, 1).await.unwrap();
    store.count("other", 5).await.unwrap();
    let snap = store.metrics_snapshot().await.unwrap();
    assert_eq!(
        snap.counters,
        vec![("other".to_owned(), 5), (RUN_START_FAILURES.to_owned(), 3)]
    );
});
