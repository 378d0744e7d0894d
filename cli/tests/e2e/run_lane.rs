//! The run lane end to end: real API and worker processes, a real Temporal server, a real
//! database. The dispatcher's order and caps are checked from the recorded transitions.

use crate::common::{Belay, replays, scheduled_activities, wait_for, wait_until_every};
use belay_domain::ids::PlanId;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const OK_SCRIPT: &str = r#"sleep 0.2; printf '{"status":"completed","loaded":true}' > "$BELAY_MANIFEST""#;

/// Replays the transition log and checks, at every dispatch, that no harness exceeds its cap
/// and that every job waiting ahead of the dispatched one was passed over only because its
/// harness was at its cap.
fn check_dispatch_log(transitions: &[Value], caps: &BTreeMap<&str, i64>) -> usize {
    let mut occupied: BTreeMap<String, i64> = BTreeMap::new();
    let mut waiting: BTreeMap<i64, String> = BTreeMap::new(); // queue_seq -> harness
    let mut dispatches = 0;
    for t in transitions {
        let harness = t["harness"].as_str().unwrap().to_string();
        let seq = t["queueSeq"].as_i64().unwrap();
        let to = t["to"].as_str().unwrap();
        let from = t["from"].as_str();
        match to {
            "queued" => {
                waiting.insert(seq, harness.clone());
            }
            "dispatched" => {
                dispatches += 1;
                for (ahead_seq, ahead_harness) in waiting.range(..seq) {
                    let occ = occupied.get(ahead_harness).copied().unwrap_or(0);
                    assert!(
                        occ >= caps[ahead_harness.as_str()],
                        "job {seq} ({harness}) was dispatched while job {ahead_seq} ({ahead_harness}) waited ahead of it with a free slot"
                    );
                }
                waiting.remove(&seq);
                let occ = occupied.entry(harness.clone()).or_default();
                *occ += 1;
                assert!(*occ <= caps[harness.as_str()], "{harness} exceeded its cap: {occ}");
            }
            "completed" | "failed" | "canceled" => {
                if matches!(from, Some("dispatched" | "starting" | "running")) {
                    *occupied.get_mut(&harness).unwrap() -= 1;
                } else {
                    waiting.remove(&seq);
                }
            }
            _ => {}
        }
    }
    dispatches
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_interleaved_jobs_on_caps_one_two_and_three_each_run_once_in_queue_order() {
    let b = Belay::start().await;
    b.catalogue().await;
    let caps = BTreeMap::from([("one", 1), ("two", 2), ("three", 3)]);
    for (name, cap) in &caps {
        b.harness(name, *cap, OK_SCRIPT).await;
    }
    let order = ["one", "two", "three", "two", "one", "three"];
    let mut ids = Vec::new();
    for i in 0..60 {
        ids.push(
            b.launch(order[i % order.len()]).await["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    for id in &ids {
        b.wait_status(id, &["completed"], Duration::from_secs(180)).await;
    }
    let transitions = b.transitions().await;
    assert_eq!(
        check_dispatch_log(&transitions, &caps),
        60,
        "every job was dispatched exactly once"
    );
    for id in &ids {
        let runs = b.get(&format!("/v1/runs?jobId={id}")).await;
        assert_eq!(runs.as_array().unwrap().len(), 1, "job {id} has one run");
        let dispatched = transitions
            .iter()
            .filter(|t| t["jobId"] == id.as_str() && t["to"] == "dispatched")
            .count();
        assert_eq!(dispatched, 1, "job {id} was dispatched once");
    }
    // Harness one (cap 1) was at its cap while later jobs of other harnesses ran: some of its jobs
    // were held back as pending, which is what makes the order check above meaningful.
    assert!(
        transitions.iter().any(|t| t["to"] == "pending"),
        "some job was held back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_run_lane_runs_on_postgresql_too() {
    let b = Belay::start_postgres().await;
    assert!(b.database_url.starts_with("postgres://"));
    b.catalogue().await;
    let caps = BTreeMap::from([("one", 1), ("two", 2)]);
    for (name, cap) in &caps {
        b.harness(name, *cap, OK_SCRIPT).await;
    }
    let mut ids = Vec::new();
    for i in 0..12 {
        ids.push(
            b.launch(if i % 3 == 0 { "two" } else { "one" }).await["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    for id in &ids {
        b.wait_status(id, &["completed"], Duration::from_secs(120)).await;
    }
    assert_eq!(check_dispatch_log(&b.transitions().await, &caps), 12);
    assert_eq!(b.get("/v1/runs?limit=100").await.as_array().unwrap().len(), 12);
}

#[test]
fn the_dispatch_log_check_catches_a_job_dispatched_past_a_free_slot() {
    let t = |seq: i64, h: &str, from: Option<&str>, to: &str| json!({"queueSeq": seq, "harness": h, "from": from, "to": to});
    let caps = BTreeMap::from([("a", 1), ("b", 1)]);
    let log = vec![
        t(1, "a", None, "queued"),
        t(2, "b", None, "queued"),
        t(2, "b", Some("queued"), "dispatched"),
    ];
    assert!(std::panic::catch_unwind(|| check_dispatch_log(&log, &caps)).is_err());
    let log = vec![
        t(1, "a", None, "queued"),
        t(2, "a", None, "queued"),
        t(1, "a", Some("queued"), "dispatched"),
        t(2, "a", Some("queued"), "dispatched"),
    ];
    assert!(
        std::panic::catch_unwind(|| check_dispatch_log(&log, &caps)).is_err(),
        "cap exceeded"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_killed_mid_run_completes_the_job_once_after_restart() {
    let mut b = Belay::start().await;
    b.catalogue().await;
    let marker = b.dir.path().join("started");
    let script = format!(
        r#"touch {m}; sleep 4; printf '{{"status":"completed","loaded":true}}' > "$BELAY_MANIFEST""#,
        m = marker.display()
    );
    b.harness("slow", 1, &script).await;
    let id = b.launch("slow").await["id"].as_str().unwrap().to_string();
    b.wait_status(&id, &["running"], Duration::from_secs(60)).await;
    let m = marker.clone();
    wait_for("the adapter to start", Duration::from_secs(30), || {
        let m = m.clone();
        async move { m.exists() }
    })
    .await;
    b.kill_worker();
    b.start_worker().await;
    let job = b
        .wait_status(&id, &["completed", "failed"], Duration::from_secs(120))
        .await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(job["attempt"], 1);
    let runs = b.get(&format!("/v1/runs?jobId={id}")).await;
    assert_eq!(runs.as_array().unwrap().len(), 1);
    let jobs = b.get("/v1/jobs").await;
    assert_eq!(jobs.as_array().unwrap().len(), 1, "no retry job was needed");
    let completions = b
        .transitions()
        .await
        .into_iter()
        .filter(|t| t["jobId"] == id.as_str() && t["to"] == "completed")
        .count();
    assert_eq!(completions, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_job_is_retried_as_a_new_attempt_that_keeps_launcher_and_origin() {
    let b = Belay::start().await;
    b.catalogue().await;
    // Fails on the first attempt, succeeds on the second.
    b.harness(
        "flaky",
        2,
        r#"[ "$BELAY_ATTEMPT" = 1 ] && exit 3; printf '{"status":"completed"}' > "$BELAY_MANIFEST""#,
    )
    .await;
    let store = b.store().await;
    let account = store.authenticate(&b.token).await.unwrap().unwrap();
    let new = |origin: &str| belay_store::jobs::NewJob {
        case: belay_domain::job::CasePin {
            slug: "c".into(),
            version: "1.0.0".into(),
            variant: "default".into(),
            engine: "none".into(),
        },
        combination: belay_domain::job::Combination::Harness {
            harness: "flaky".into(),
            model: "m".into(),
            provider: None,
        },
        gg_config_name: None,
        capabilities: None,
        test_type: None,
        user_id: Some(account.id.clone()),
        origin: Some(belay_domain::job::Origin::parse(origin).unwrap()),
        attempt: 1,
        retry_of: None,
    };
    // plan p-live is running; plan p-paused is paused: its retry is withheld.
    store
        .set_plan_paused(&PlanId::from("p-live"), &account.id, false)
        .await
        .unwrap();
    store
        .set_plan_paused(&PlanId::from("p-paused"), &account.id, true)
        .await
        .unwrap();
    let live = store.enqueue(new("plan:p-live")).await.unwrap();
    let paused = store.enqueue(new("plan:p-paused")).await.unwrap();
    belay_client::ensure_dispatcher(
        &belay_client::connect(&b.temporal.address, "default", "test")
            .await
            .unwrap(),
        Default::default(),
    )
    .await
    .unwrap();

    b.wait_status(&live.id, &["failed"], Duration::from_secs(60)).await;
    let jobs = b.get("/v1/jobs?origin=plan:p-live").await;
    let retry = jobs
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["retryOf"] == live.id.as_str())
        .cloned()
        .expect("the failure enqueued a retry");
    assert_eq!(retry["attempt"], 2);
    assert_eq!(retry["userId"], account.id.as_str());
    assert_eq!(retry["origin"], "plan:p-live");
    let done = b
        .wait_status(retry["id"].as_str().unwrap(), &["completed"], Duration::from_secs(60))
        .await;
    assert_eq!(done["cellKey"], live.cell_key.as_str());

    let failed = b.wait_status(&paused.id, &["failed"], Duration::from_secs(60)).await;
    assert!(
        failed["error"].as_str().unwrap().contains("exited with code 3"),
        "{failed}"
    );
    let jobs = b.get("/v1/jobs?origin=plan:p-paused").await;
    assert_eq!(
        jobs.as_array().unwrap().len(),
        1,
        "the paused plan's retry was withheld"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_racing_dispatch_leaves_exactly_one_final_state_per_job() {
    let b = Belay::start().await;
    b.catalogue().await;
    b.harness(
        "quick",
        3,
        r#"sleep 1; printf '{"status":"completed"}' > "$BELAY_MANIFEST""#,
    )
    .await;
    let mut ids = Vec::new();
    for _ in 0..12 {
        ids.push(b.launch("quick").await["id"].as_str().unwrap().to_string());
    }
    // Cancel every other job while the dispatcher is claiming them.
    let mut answers = Vec::new();
    for id in ids.iter().step_by(2) {
        answers.push(b.post(&format!("/v1/jobs/{id}/cancel"), json!({})).await);
    }
    for (s, v) in &answers {
        assert_eq!(*s, 200, "{v}");
    }
    for id in &ids {
        b.wait_status(id, &["completed", "canceled", "failed"], Duration::from_secs(120))
            .await;
    }
    let transitions = b.transitions().await;
    for id in &ids {
        let finals: Vec<_> = transitions
            .iter()
            .filter(|t| {
                t["jobId"] == id.as_str() && matches!(t["to"].as_str(), Some("completed" | "failed" | "canceled"))
            })
            .collect();
        assert_eq!(finals.len(), 1, "job {id}: {finals:?}");
        let job = b.job(id).await;
        let runs = b.get(&format!("/v1/runs?jobId={id}")).await.as_array().unwrap().len();
        match job["status"].as_str().unwrap() {
            "completed" => assert_eq!(runs, 1),
            "canceled" => assert_eq!(runs, 0, "a cancelled job records no run"),
            other => panic!("job {id} ended {other}"),
        }
    }
    for (i, id) in ids.iter().enumerate() {
        let status = b.job(id).await["status"].as_str().unwrap().to_string();
        if i % 2 == 0 {
            assert_eq!(status, "canceled");
        } else {
            assert_eq!(status, "completed");
        }
    }
    // A second cancel of a finished job cancels nothing, and says so.
    let (s, v) = b.post(&format!("/v1/jobs/{}/cancel", ids[0]), json!({})).await;
    assert_eq!((s, v["cancelled"].clone()), (200, json!(false)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bulk_cancel_sweeps_a_state_set_and_reports_how_many() {
    let b = Belay::start().await;
    b.catalogue().await;
    let gate = b.dir.path().join("release");
    b.harness(
        "held",
        1,
        &format!(
            r#"while [ ! -e {g} ]; do sleep 0.05; done; printf '{{"status":"completed"}}' > "$BELAY_MANIFEST""#,
            g = gate.display()
        ),
    )
    .await;
    let first = b.launch("held").await["id"].as_str().unwrap().to_string();
    b.wait_status(&first, &["running"], Duration::from_secs(60)).await;
    let mut rest = Vec::new();
    for _ in 0..3 {
        rest.push(b.launch("held").await["id"].as_str().unwrap().to_string());
    }
    let (s, v) = b.post("/v1/jobs/cancel", json!({"scope": "queued"})).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["cancelled"], 3);
    let swept: BTreeSet<String> = v["jobIds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect();
    assert_eq!(swept, rest.iter().cloned().collect());
    assert_eq!(
        b.job(&first).await["status"],
        "running",
        "the queued sweep leaves running jobs alone"
    );
    let (_, v) = b.post("/v1/jobs/cancel", json!({"scope": "queued"})).await;
    assert_eq!(v["cancelled"], 0, "nothing left to sweep");
    let (_, v) = b.post("/v1/jobs/cancel", json!({"scope": "in_flight"})).await;
    assert_eq!(v["cancelled"], 1);
    b.wait_status(&first, &["canceled"], Duration::from_secs(5)).await;
    // Its workflow was cancelled too: the adapter never gets to record a run.
    std::fs::write(&gate, b"").unwrap();
    let run_wf_done = b.get(&format!("/v1/runs?jobId={first}")).await;
    assert_eq!(run_wf_done.as_array().unwrap().len(), 0);
    let (s, v) = b.post("/v1/jobs/cancel", json!({"scope": "everything"})).await;
    assert_eq!(s, 422, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("scope"), "{v}");
}

/// Runs a job that completes and one that fails, then replays the histories of their runs and of
/// the dispatcher against the current code (recording them with `BELAY_RECORD_HISTORIES=DIR` when
/// new, see `crate::common::replays`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn records_replayable_histories() {
    let b = Belay::start().await;
    b.catalogue().await;
    b.harness("ok", 1, r#"printf '{"status":"completed"}' > "$BELAY_MANIFEST""#)
        .await;
    b.harness("bad", 1, "exit 2").await;
    let ok = b.launch("ok").await["id"].as_str().unwrap().to_string();
    b.wait_status(&ok, &["completed"], Duration::from_secs(60)).await;
    let bad = b.launch("bad").await["id"].as_str().unwrap().to_string();
    b.wait_status(&bad, &["failed"], Duration::from_secs(60)).await;
    // v2: the store steps are local activities (the `run-local-db-steps` patch); v3: each attempt
    // is kept and its failure class decides (`run-failure-classes`).
    for (name, job) in [("run-completed-v3", &ok), ("run-failed-v3", &bad)] {
        let json = replays(&b, name, &format!("run-{job}")).await;
        assert_eq!(
            scheduled_activities(&json),
            ["harness.run_adapter"],
            "{name}: only the adapter goes through a task queue"
        );
    }
    // The dispatcher never completes: replay what it has done so far.
    let client = belay_client::connect(&b.temporal.address, "default", "test")
        .await
        .unwrap();
    // Each run's end wakes the dispatcher (worker-sent signals: one at the worker's start, one
    // per run); the API's launches send theirs as `belay-api`.
    let json = wait_until_every(
        "the runs' ends to wake the dispatcher",
        Duration::from_secs(20),
        Duration::from_millis(100),
        async || {
            let json = belay_client::closed_history_json(&client, "dispatcher", Duration::ZERO)
                .await
                .unwrap();
            let woken_by_workers = signal_identities(&json)
                .iter()
                .filter(|i| i.starts_with("belay-worker"))
                .count();
            if woken_by_workers >= 3 {
                Ok(json)
            } else {
                Err(format!("signalled by {:?}", signal_identities(&json)))
            }
        },
    )
    .await;
    belay_client::replay::replay_json(&json)
        .await
        .unwrap_or_else(|e| panic!("dispatcher: {e}"));
    assert_eq!(
        scheduled_activities(&json),
        Vec::<String>::new(),
        "the dispatcher claims in local activities"
    );
    crate::common::record_history("dispatcher-v3", &json);
}

/// The identities that sent the signals a history received, in order.
fn signal_identities(history: &[u8]) -> Vec<String> {
    let history: serde_json::Value = serde_json::from_slice(history).unwrap();
    history["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["attributes"]["WorkflowExecutionSignaledEventAttributes"]["identity"].as_str())
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_dispatcher_continues_as_new_without_losing_or_repeating_a_job() {
    let mut b = Belay::start_with_env(&[("BELAY_DISPATCHER_CLAIMS_PER_RUN", "3")]).await;
    b.catalogue().await;
    b.harness("lane", 2, OK_SCRIPT).await;
    let mut ids = Vec::new();
    for _ in 0..12 {
        ids.push(b.launch("lane").await["id"].as_str().unwrap().to_string());
    }
    for id in &ids {
        b.wait_status(id, &["completed"], Duration::from_secs(120)).await;
    }
    let transitions = b.transitions().await;
    assert_eq!(check_dispatch_log(&transitions, &BTreeMap::from([("lane", 2)])), 12);
    let client = belay_client::connect(&b.temporal.address, "default", "test")
        .await
        .unwrap();
    let runs = client
        .count_workflows("WorkflowId = 'dispatcher'", Default::default())
        .await
        .unwrap();
    assert!(
        runs.count() > 2,
        "the dispatcher continued as new ({} runs)",
        runs.count()
    );
    b.kill_worker();
}
