//! The browser meters on SQLite and on PostgreSQL: runs per Candidate and seconds per UTC day,
//! refused when spent, concurrently too, and settled once to the measured seconds.

use belay_domain::browser::BrowserMeter;
use belay_domain::ids::CandidateId;
use belay_store::Store;
use belay_store::browser_meter::{BROWSER_RUNS, BROWSER_SECONDS, BrowserReserve};
use belay_store::on_both;

/// 2026-12-01T12:00:00Z.
const NOON: i64 = 1_796_126_400;

fn id(r: BrowserReserve) -> String {
    match r {
        BrowserReserve::Reserved { id, day } => {
            assert_eq!(day, "2026-12-01");
            id
        }
        other => panic!("refused: {other:?}"),
    }
}

on_both!(
    two_runs_per_candidate_then_skipped_and_settles_charge_the_measured_seconds_once,
    threads = 4,
    async |store: Store| {
        let a = id(store
            .reserve_browser(&CandidateId::from("cand_a"), NOON, 3600)
            .await
            .unwrap());
        assert_eq!(
            store.usage_counter(BROWSER_SECONDS, "2026-12-01").await.unwrap(),
            (0, 60)
        );
        assert_eq!(store.settle_browser(&a, 7).await.unwrap(), 7);
        assert_eq!(
            store.settle_browser(&a, 99).await.unwrap(),
            7,
            "a second settle changes nothing"
        );
        assert_eq!(
            store.usage_counter(BROWSER_SECONDS, "2026-12-01").await.unwrap(),
            (7, 0)
        );
        let b = id(store
            .reserve_browser(&CandidateId::from("cand_a"), NOON, 3600)
            .await
            .unwrap());
        assert_eq!(
            store
                .reserve_browser(&CandidateId::from("cand_a"), NOON, 3600)
                .await
                .unwrap(),
            BrowserReserve::Refused(BrowserMeter::RunsPerCandidate)
        );
        assert_eq!(store.usage_counter(BROWSER_RUNS, "cand_a").await.unwrap(), (2, 0));
        // A session that never reported is settled at what it held.
        assert_eq!(
            store
                .settle_open_browser_reservations(&CandidateId::from("cand_a"))
                .await
                .unwrap(),
            1
        );
        assert_eq!(store.settle_browser(&b, 1).await.unwrap(), 60);
        assert_eq!(
            store.usage_counter(BROWSER_SECONDS, "2026-12-01").await.unwrap(),
            (67, 0)
        );
        // Another Candidate has its own runs; the next UTC day its own seconds.
        id(store
            .reserve_browser(&CandidateId::from("cand_b"), NOON, 3600)
            .await
            .unwrap());
        assert!(matches!(
            store.reserve_browser(&CandidateId::from("cand_c"), NOON + 43_200, 3600).await.unwrap(),
            BrowserReserve::Reserved { ref day, .. } if day == "2026-12-02"
        ));
    }
);

on_both!(
    the_daily_seconds_are_refused_when_spent_and_concurrent_reservations_never_pass_the_limit,
    threads = 4,
    async |store: Store| {
        // 200 s a day: three 60 s reservations fit, the fourth does not, however they race.
        let mut tasks = vec![];
        for n in 0..8 {
            let s = store.clone();
            tasks.push(tokio::spawn(async move {
                s.reserve_browser(&CandidateId(format!("cand_{n}")), NOON, 200)
                    .await
                    .unwrap()
            }));
        }
        let mut reserved = vec![];
        let mut refused = 0;
        for t in tasks {
            match t.await.unwrap() {
                BrowserReserve::Reserved { id, .. } => reserved.push(id),
                BrowserReserve::Refused(m) => {
                    assert_eq!(m, BrowserMeter::DailySeconds);
                    refused += 1;
                }
            }
        }
        assert_eq!((reserved.len(), refused), (3, 5));
        assert_eq!(
            store.usage_counter(BROWSER_SECONDS, "2026-12-01").await.unwrap(),
            (0, 180)
        );
        // Settled short, the seconds come back for one more session.
        for r in &reserved {
            store.settle_browser(r, 10).await.unwrap();
        }
        assert_eq!(
            store.usage_counter(BROWSER_SECONDS, "2026-12-01").await.unwrap(),
            (30, 0)
        );
        id(store
            .reserve_browser(&CandidateId::from("cand_late"), NOON, 200)
            .await
            .unwrap());
        id(store
            .reserve_browser(&CandidateId::from("cand_later"), NOON, 200)
            .await
            .unwrap());
        assert_eq!(
            store
                .reserve_browser(&CandidateId::from("cand_last"), NOON, 200)
                .await
                .unwrap(),
            BrowserReserve::Refused(BrowserMeter::DailySeconds)
        );

        // Concurrent runs of one Candidate: exactly two.
        let mut tasks = vec![];
        for _ in 0..6 {
            let s = store.clone();
            tasks.push(tokio::spawn(async move {
                s.reserve_browser(&CandidateId::from("cand_one"), NOON, 100_000)
                    .await
                    .unwrap()
            }));
        }
        let mut ok = 0;
        for t in tasks {
            match t.await.unwrap() {
                BrowserReserve::Reserved { .. } => ok += 1,
                BrowserReserve::Refused(m) => assert_eq!(m, BrowserMeter::RunsPerCandidate),
            }
        }
        assert_eq!(ok, 2);
        assert_eq!(store.usage_counter(BROWSER_RUNS, "cand_one").await.unwrap(), (2, 0));
    }
);
