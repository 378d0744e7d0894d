//! Ladders end to end: real `belay` API and worker processes, a real Temporal server, a real
//! database. A new ladder enqueues nothing until enabled; the spec's gate rows driven with
//! reviews; early stop; unloaded and failed runs; the five statuses and `recorded`; overrides;
//! reorders and version bumps; steering and late climbers; the buffer over every reached rung;
//! halt and delete; bad input; and recorded ladder TopUpWorkflow and LadderClimbWorkflow
//! histories that replay.

use crate::common::{Belay, create_account, replays, wait_for, wait_until_every};
use serde_json::{Value, json};
use std::time::Duration;

const OK_SCRIPT: &str = r#"printf '{"status":"completed","loaded":true}' > "$BELAY_MANIFEST""#;
const UNLOADED_SCRIPT: &str = r#"printf '{"status":"completed","loaded":false}' > "$BELAY_MANIFEST""#;
const SLOW_SCRIPT: &str = r#"sleep 600; printf '{"status":"completed","loaded":true}' > "$BELAY_MANIFEST""#;
/// Fails on infrastructure on the first attempt, completes on the second.
const FLAKY_SCRIPT: &str =
    r#"[ "$BELAY_ATTEMPT" = 1 ] && exit 3; printf '{"status":"completed","loaded":true}' > "$BELAY_MANIFEST""#;

fn case(slug: &str) -> Value {
    json!({"slug": slug, "version": "1.0.0", "variant": "default"})
}

fn harness(h: &str) -> Value {
    json!({"kind": "harness", "harness": h, "model": "m"})
}

async fn ingest(b: &Belay, slug: &str, version: &str, test_type: &str) {
    let (s, v) = b
        .post(
            "/v1/test-cases",
            json!({"slug": slug, "version": version, "testType": test_type, "variants": ["default"]}),
        )
        .await;
    assert_eq!(s, 201, "{v}");
}

async fn call(b: &Belay, method: &str, path: &str, token: &str, body: Option<Value>) -> (u16, Value) {
    b.request(method, path, Some(token), body.map(|v| v.to_string()).as_deref())
        .await
}

async fn ladder(b: &Belay, body: Value) -> Value {
    let (s, v) = b.post("/v1/ladders", body).await;
    assert_eq!(s, 201, "{v}");
    v
}

async fn put(b: &Belay, id: &str, body: Value) -> Value {
    let (s, v) = call(b, "PUT", &format!("/v1/ladders/{id}"), &b.token, Some(body)).await;
    assert_eq!(s, 200, "{v}");
    v
}

async fn enable(b: &Belay, id: &str) -> Value {
    let (s, v) = b.post(&format!("/v1/ladders/{id}/enable"), json!({})).await;
    assert_eq!(s, 200, "{v}");
    v["topUp"].clone()
}

async fn topup(b: &Belay, id: &str) -> Value {
    let (s, v) = b.post(&format!("/v1/ladders/{id}/topup"), json!({})).await;
    assert_eq!(s, 200, "{v}");
    v
}

async fn board(b: &Belay, id: &str) -> Value {
    b.get(&format!("/v1/ladders/{id}/progress")).await
}

async fn jobs_of(b: &Belay, id: &str) -> Vec<Value> {
    b.get(&format!("/v1/jobs?origin=ladder:{id}&limit=10000"))
        .await
        .as_array()
        .unwrap()
        .clone()
}

/// The completed runs of a ladder's jobs, in queue order (waiting for `n` of them).
async fn runs_of(b: &Belay, id: &str, n: usize) -> Vec<String> {
    let what = format!("{n} runs of {id}");
    wait_until_every(&what, Duration::from_secs(90), Duration::from_millis(200), async || {
        let mut runs = Vec::new();
        for j in jobs_of(b, id).await {
            if j["status"] == "completed" {
                let r = b.get(&format!("/v1/runs?jobId={}", j["id"].as_str().unwrap())).await;
                if let Some(run) = r[0]["id"].as_str() {
                    runs.push(run.to_string());
                }
            }
        }
        if runs.len() >= n {
            Ok(runs)
        } else {
            Err(format!("only {}", runs.len()))
        }
    })
    .await
}

async fn review(b: &Belay, run: &str, rating: &str) {
    let (s, v) = b
        .post(&format!("/v1/runs/{run}/review"), json!({"ratings": {"code": rating}}))
        .await;
    assert_eq!(s, 200, "{v}");
}

fn climber<'a>(board: &'a Value, harness: &str) -> &'a Value {
    board["climbers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["combination"]["harness"] == harness)
        .unwrap_or_else(|| panic!("no climber on {harness} in {board}"))
}

fn standing<'a>(climber: &'a Value, rung_id: &str) -> &'a Value {
    climber["rungs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["rungId"] == rung_id && s["stale"] == false)
        .unwrap_or_else(|| panic!("no live standing on {rung_id} in {climber}"))
}

fn rung_ids(l: &Value) -> Vec<String> {
    l["rungs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_ladder_enqueues_nothing_until_enabled_and_enabling_launches_rung_one_for_every_climber() {
    let b = Belay::start().await;
    b.catalogue().await;
    ingest(&b, "d", "1.0.0", "standard").await;
    b.harness("x", 100, SLOW_SCRIPT).await;
    b.harness("y", 100, SLOW_SCRIPT).await;
    let l = ladder(
        &b,
        json!({"name": "climb", "rungs": [case("c"), case("d")], "combinations": [harness("x"), harness("y")],
               "bufferTarget": {"kind": "unbounded"}}),
    )
    .await;
    let id = l["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("lad_"), "{l}");
    assert_eq!(l["enabled"], false);
    assert_eq!(l["runsPerCell"], 5);
    assert_eq!(
        l["gate"],
        json!({"floor": "scuffed", "threshold": {"kind": "count", "runs": 1}})
    );
    assert_eq!(
        (l["unloadedCountsAsBroken"].clone(), l["earlyStop"].clone()),
        (json!(true), json!(false))
    );
    assert_eq!(
        (l["outerAxis"].clone(), l["autoTopUp"].clone()),
        (json!("rung"), json!(true))
    );
    let ids = rung_ids(&l);
    assert!(ids.iter().all(|r| r.starts_with("rung_")) && ids[0] != ids[1], "{l}");

    // Opening it, and its board, are reads; its top-up is skipped.
    assert_eq!(b.get(&format!("/v1/ladders/{id}")).await["id"], id.as_str());
    let p = board(&b, &id).await;
    assert_eq!(p["enabled"], false);
    assert_eq!(climber(&p, "x")["currentRung"], ids[0].as_str());
    let t = topup(&b, &id).await;
    assert_eq!(
        (t["skipped"].clone(), t["enqueued"].clone()),
        (json!("paused"), json!(0))
    );
    assert_eq!(jobs_of(&b, &id).await.len(), 0, "nothing enqueued before enabling");

    // Enabling launches rung 1 for every climber, and only rung 1.
    let t = enable(&b, &id).await;
    assert_eq!(t["skipped"], Value::Null, "{t}");
    assert_eq!(t["enqueued"], 10, "{t}");
    let jobs = jobs_of(&b, &id).await;
    assert_eq!(jobs.len(), 10);
    assert!(
        jobs.iter().all(|j| j["case"]["slug"] == "c"),
        "only the current rung launches"
    );
    let p = board(&b, &id).await;
    for h in ["x", "y"] {
        let c = climber(&p, h);
        assert_eq!(c["status"], "climbing", "{c}");
        assert_eq!(standing(c, &ids[0])["tally"]["pending"], 5, "{c}");
    }
    // Claim, enqueue and release ran as one activity, behind the patch marker.
    let h = replays(&b, "topup-ladder-v2", &format!("topup-ladder-{id}")).await;
    let patches = belay_client::replay::patches(&h).unwrap();
    assert!(
        patches.iter().any(|p| p == belay_workflows::top_up::ONE_STEP_TOP_UP),
        "{patches:?}"
    );
    assert_eq!(crate::common::scheduled_activities(&h), ["db.topup_one_step"]);
    // A second top-up finds every current rung at target.
    let t = topup(&b, &id).await;
    assert_eq!((t["enqueued"].clone(), t["occupancy"].clone()), (json!(0), json!(10)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_specs_three_gate_rows_at_five_runs_decide_as_written_with_recorded_false_until_a_top_up() {
    let b = Belay::start().await;
    b.catalogue().await;
    ingest(&b, "d", "1.0.0", "standard").await;
    for h in ["h1", "h2", "h3"] {
        b.harness(h, 5, OK_SCRIPT).await;
    }
    let rows = [
        (
            "h1",
            json!({"floor": "scuffed", "threshold": {"kind": "fraction", "of": 0.5}}),
        ),
        (
            "h2",
            json!({"floor": "scuffed", "threshold": {"kind": "count", "runs": 1}}),
        ),
        (
            "h3",
            json!({"floor": "passable", "threshold": {"kind": "count", "runs": 1}}),
        ),
    ];
    let mut ladders = Vec::new();
    for (h, gate) in &rows {
        let l = ladder(
            &b,
            json!({"name": h, "rungs": [case("c"), case("d")], "combinations": [harness(h)], "gate": gate,
                   "autoTopUp": false, "bufferTarget": {"kind": "unbounded"}}),
        )
        .await;
        let id = l["id"].as_str().unwrap().to_string();
        assert_eq!(enable(&b, &id).await["enqueued"], 5);
        ladders.push((id, rung_ids(&l)));
    }
    // All five in and nothing reviewed: each waits on the reviewer.
    let mut runs = Vec::new();
    for (id, ids) in &ladders {
        runs.push(runs_of(&b, id, 5).await);
        let p = board(&b, id).await;
        let c = &p["climbers"][0];
        assert_eq!(c["status"], "awaitingReview", "{c}");
        assert_eq!(
            standing(c, &ids[0])["tally"],
            json!({"completed": 5, "judged": 0, "unjudged": 5, "passing": 0, "pending": 0,
                   "required": if id == &ladders[0].0 { 3 } else { 1 }})
        );
    }

    // Row 1: over half broken walls, at the third broken review and not before.
    let (id, ids) = &ladders[0];
    review(&b, &runs[0][0], "broken").await;
    review(&b, &runs[0][1], "broken").await;
    assert_eq!(board(&b, id).await["climbers"][0]["status"], "awaitingReview");
    review(&b, &runs[0][2], "broken").await;
    let p = board(&b, id).await;
    let c = &p["climbers"][0];
    assert_eq!(c["status"], "walled", "{c}");
    assert_eq!(c["currentRung"], ids[0].as_str());
    let s = standing(c, &ids[0]);
    assert_eq!(
        (s["verdict"].clone(), s["recorded"].clone()),
        (json!("wall"), json!(false))
    );
    assert_eq!(s["version"], "1.0.0");

    // Row 2: one playable run advances at once, the rest unjudged.
    let (id, ids) = &ladders[1];
    review(&b, &runs[1][3], "scuffed").await;
    let first = board(&b, id).await;
    let c = &first["climbers"][0];
    assert_eq!(
        c["currentRung"],
        ids[1].as_str(),
        "on the next rung by the live verdict: {c}"
    );
    assert_eq!(c["status"], "climbing");
    let s = standing(c, &ids[0]);
    assert_eq!(
        (s["verdict"].clone(), s["recorded"].clone()),
        (json!("advance"), json!(false))
    );
    assert_eq!(s["tally"]["unjudged"], 4);
    // The GET wrote nothing and launched nothing: twice is the same board.
    assert_eq!(board(&b, id).await, first);
    assert_eq!(jobs_of(&b, id).await.len(), 5);
    let t = topup(&b, id).await;
    assert_eq!(
        (t["recorded"].clone(), t["enqueued"].clone()),
        (json!(1), json!(5)),
        "{t}"
    );
    assert!(
        t["launched"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["case"]["slug"] == "d")
    );
    let p = board(&b, id).await;
    assert_eq!(standing(&p["climbers"][0], &ids[0])["recorded"], true);
    // The reached rung d climbs to its end: one passable review tops the climber out.
    let all = runs_of(&b, id, 10).await;
    let d_run = all.iter().find(|r| !runs[1].contains(r)).unwrap();
    review(&b, d_run, "great").await;
    assert_eq!(board(&b, id).await["climbers"][0]["status"], "toppedOut");

    // Row 3: one passable run carries the rung however bad the rest; four broken are not enough to
    // decide while one is unjudged.
    let (id, ids) = &ladders[2];
    for r in &runs[2][..4] {
        review(&b, r, "broken").await;
    }
    let p = board(&b, id).await;
    assert_eq!(p["climbers"][0]["status"], "awaitingReview", "{p}");
    review(&b, &runs[2][4], "passable").await;
    let p = board(&b, id).await;
    assert_eq!(standing(&p["climbers"][0], &ids[0])["verdict"], "advance");
    assert_eq!(p["climbers"][0]["currentRung"], ids[1].as_str());

    // Held: stops where it stands; cleared, resumes from exactly there.
    let (s, v) = b
        .post(
            &format!("/v1/ladders/{id}/climbers"),
            json!({"combination": harness("h3"), "held": true}),
        )
        .await;
    assert_eq!((s, &v["steering"]["held"]), (200, &json!(true)), "{v}");
    let p = board(&b, id).await;
    assert_eq!(p["climbers"][0]["status"], "held");
    let t = topup(&b, id).await;
    assert_eq!(t["enqueued"], 0, "a held climber is not launched: {t}");
    let (s, _) = b
        .post(
            &format!("/v1/ladders/{id}/climbers"),
            json!({"combination": harness("h3"), "held": false}),
        )
        .await;
    assert_eq!(s, 200);
    let p = board(&b, id).await;
    assert_eq!(p["climbers"][0]["status"], "climbing");
    assert_eq!(p["climbers"][0]["currentRung"], ids[1].as_str());
    assert_eq!(topup(&b, id).await["enqueued"], 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn early_stop_decides_at_first_certainty_and_cancels_the_rungs_queued_runs_and_off_it_waits_for_all_five() {
    let b = Belay::start().await;
    b.catalogue().await;
    ingest(&b, "d", "1.0.0", "standard").await;
    // The first run of each harness completes; the rest run for ten minutes, one at a time.
    for h in ["on", "off"] {
        let flag = b.dir.path().join(format!("first-{h}"));
        let script = format!(
            r#"[ -e {f} ] && sleep 600; touch {f}; printf '{{"status":"completed","loaded":true}}' > "$BELAY_MANIFEST""#,
            f = flag.display()
        );
        b.harness(h, 1, &script).await;
    }
    let mut ids = Vec::new();
    for (h, early) in [("on", true), ("off", false)] {
        let l = ladder(
            &b,
            json!({"name": h, "rungs": [case("c"), case("d")], "combinations": [harness(h)], "earlyStop": early,
                   "bufferTarget": {"kind": "bounded", "runs": 5}}),
        )
        .await;
        let id = l["id"].as_str().unwrap().to_string();
        assert_eq!(enable(&b, &id).await["enqueued"], 5);
        ids.push((id, rung_ids(&l)));
    }
    for (id, rungs) in &ids {
        let run = runs_of(&b, id, 1).await;
        wait_for("the second run to start", Duration::from_secs(60), || async {
            jobs_of(&b, id).await.iter().any(|j| j["status"] == "running")
        })
        .await;
        let p = board(&b, id).await;
        assert_eq!(standing(&p["climbers"][0], &rungs[0])["verdict"], "undecided");
        review(&b, &run[0], "scuffed").await;
    }
    // On: decided by one playable run; its three queued runs cancelled, the running one left.
    let (on, rungs) = &ids[0];
    wait_for("the early stop", Duration::from_secs(60), || async {
        jobs_of(&b, on)
            .await
            .iter()
            .filter(|j| j["status"] == "canceled")
            .count()
            == 3
    })
    .await;
    let p = board(&b, on).await;
    let c = &p["climbers"][0];
    assert_eq!(standing(c, &rungs[0])["verdict"], "advance", "{c}");
    assert_eq!(c["currentRung"], rungs[1].as_str());
    let jobs = jobs_of(&b, on).await;
    assert_eq!(
        jobs.iter()
            .filter(|j| j["case"]["slug"] == "c" && j["status"] == "running")
            .count(),
        1,
        "the running run is not an early stop's to cancel"
    );
    let events = b.get(&format!("/v1/events?entity={on}&limit=1000")).await;
    assert!(
        events
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "ladder.early_stopped" && e["payload"]["cancelled"] == 3),
        "{events}"
    );
    // Off: the same evidence is undecided until all five are in; nothing cancelled.
    let (off, rungs) = &ids[1];
    tokio::time::sleep(Duration::from_secs(2)).await;
    let p = board(&b, off).await;
    let c = &p["climbers"][0];
    assert_eq!(c["status"], "climbing", "{c}");
    let s = standing(c, &rungs[0]);
    assert_eq!(s["verdict"], "undecided");
    assert_eq!(
        (s["tally"]["passing"].clone(), s["tally"]["pending"].clone()),
        (json!(1), json!(4))
    );
    assert!(jobs_of(&b, off).await.iter().all(|j| j["status"] != "canceled"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unloaded_run_is_broken_over_a_flawless_review_and_a_failed_job_is_retried_and_never_walls() {
    let b = Belay::start().await;
    b.catalogue().await;
    b.harness("u", 5, UNLOADED_SCRIPT).await;
    b.harness("f", 5, FLAKY_SCRIPT).await;
    let make = |h: &str| {
        json!({"name": h, "rungs": [case("c")], "combinations": [harness(h)], "runsPerCell": 1, "autoTopUp": false,
               "bufferTarget": {"kind": "unbounded"}})
    };
    let unloaded = ladder(&b, make("u")).await["id"].as_str().unwrap().to_string();
    let flaky = ladder(&b, make("f")).await["id"].as_str().unwrap().to_string();
    enable(&b, &unloaded).await;
    enable(&b, &flaky).await;

    let run = runs_of(&b, &unloaded, 1).await;
    let p = board(&b, &unloaded).await;
    assert_eq!(
        p["climbers"][0]["status"], "walled",
        "judged broken without a review: {p}"
    );
    let q = b.get(&format!("/v1/ladders/{unloaded}/queue")).await;
    assert_eq!(q["runs"], json!([]), "nothing for a reviewer to play");
    review(&b, &run[0], "flawless").await;
    let p = board(&b, &unloaded).await;
    let c = &p["climbers"][0];
    assert_eq!(c["status"], "walled", "the unloaded verdict overrides the review: {c}");
    assert_eq!(c["rungs"][0]["tally"]["passing"], 0);
    // Turned off, the review is what counts.
    let mut body = make("u");
    body["unloadedCountsAsBroken"] = json!(false);
    body["rungs"][0]["id"] = p["rungs"][0]["rungId"].clone();
    body["enabled"] = json!(true);
    put(&b, &unloaded, body).await;
    assert_eq!(board(&b, &unloaded).await["climbers"][0]["status"], "toppedOut");

    // The failed attempt is retried under the ladder's origin and never reaches the gate.
    wait_for("the retry to complete", Duration::from_secs(90), || async {
        jobs_of(&b, &flaky).await.iter().any(|j| j["status"] == "completed")
    })
    .await;
    let jobs = jobs_of(&b, &flaky).await;
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    assert_eq!(jobs[0]["status"], "failed");
    assert_eq!(jobs[1]["attempt"], 2);
    let p = board(&b, &flaky).await;
    let c = &p["climbers"][0];
    assert_eq!(c["status"], "awaitingReview", "{c}");
    assert_eq!(c["rungs"][0]["tally"]["completed"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_override_promotes_past_a_wall_clearing_it_restores_the_wall_and_an_undecided_rung_refuses_one() {
    let b = Belay::start().await;
    b.catalogue().await;
    ingest(&b, "d", "1.0.0", "standard").await;
    b.harness("x", 5, OK_SCRIPT).await;
    let l = ladder(
        &b,
        json!({"name": "o", "rungs": [case("c"), case("d")], "combinations": [harness("x")], "runsPerCell": 1,
               "autoTopUp": false, "bufferTarget": {"kind": "unbounded"}}),
    )
    .await;
    let id = l["id"].as_str().unwrap().to_string();
    let rungs = rung_ids(&l);
    enable(&b, &id).await;
    let run = runs_of(&b, &id, 1).await;
    // Undecided (nothing reviewed yet): an override is refused, and nothing is stored.
    let (s, v) = b
        .post(
            &format!("/v1/ladders/{id}/outcomes"),
            json!({"combination": harness("x"), "rungId": rungs[0], "outcome": "advance"}),
        )
        .await;
    assert_eq!((s, v["error"]["code"].as_str()), (409, Some("rung_undecided")), "{v}");
    review(&b, &run[0], "broken").await;
    let p = board(&b, &id).await;
    assert_eq!(p["climbers"][0]["status"], "walled");

    let (s, p) = b
        .post(
            &format!("/v1/ladders/{id}/outcomes"),
            json!({"combination": harness("x"), "rungId": rungs[0], "outcome": "advance"}),
        )
        .await;
    assert_eq!(s, 200, "{p}");
    let c = &p["climbers"][0];
    let st = standing(c, &rungs[0]);
    assert_eq!(
        (st["verdict"].clone(), st["override"].clone(), st["outcome"].clone()),
        (json!("wall"), json!("advance"), json!("advance")),
        "stored beside the gate's verdict: {c}"
    );
    assert_eq!(c["currentRung"], rungs[1].as_str());
    assert_eq!(c["status"], "climbing");
    // A top-up launches the next rung and never undoes the override.
    let t = topup(&b, &id).await;
    assert_eq!(t["enqueued"], 1, "{t}");
    assert_eq!(
        standing(&board(&b, &id).await["climbers"][0], &rungs[0])["override"],
        "advance"
    );
    // The rung it now stands on is undecided: 409.
    let (s, _) = b
        .post(
            &format!("/v1/ladders/{id}/outcomes"),
            json!({"combination": harness("x"), "rungId": rungs[1], "outcome": "wall"}),
        )
        .await;
    assert_eq!(s, 409);
    // Cleared (DELETE), the gate's wall is back.
    let (s, p) = call(
        &b,
        "DELETE",
        &format!("/v1/ladders/{id}/outcomes"),
        &b.token,
        Some(json!({"combination": harness("x"), "rungId": rungs[0]})),
    )
    .await;
    assert_eq!(s, 200, "{p}");
    let c = &p["climbers"][0];
    assert_eq!(c["status"], "walled", "{c}");
    assert_eq!(standing(c, &rungs[0])["override"], Value::Null);
    // `outcome: null` clears too; a well-formed id of no rung of this ladder is 409 naming it.
    let (s, _) = b
        .post(
            &format!("/v1/ladders/{id}/outcomes"),
            json!({"combination": harness("x"), "rungId": rungs[0], "outcome": null}),
        )
        .await;
    assert_eq!(s, 200);
    let (s, v) = b
        .post(
            &format!("/v1/ladders/{id}/outcomes"),
            json!({"combination": harness("x"), "rungId": "rung_nope", "outcome": "advance"}),
        )
        .await;
    assert_eq!((s, v["error"]["code"].as_str()), (409, Some("conflict")), "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("rungId"), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reorder_keeps_every_rung_id_and_verdict_and_a_bumped_rung_turns_its_verdict_stale_until_pinned_back() {
    let b = Belay::start().await;
    b.catalogue().await;
    ingest(&b, "d", "1.0.0", "standard").await;
    ingest(&b, "e", "1.0.0", "standard").await;
    b.harness("x", 5, OK_SCRIPT).await;
    let l = ladder(
        &b,
        json!({"name": "r", "rungs": [case("c"), case("d"), case("e")], "combinations": [harness("x")],
               "runsPerCell": 1, "autoTopUp": false, "bufferTarget": {"kind": "unbounded"}}),
    )
    .await;
    let id = l["id"].as_str().unwrap().to_string();
    let rungs = rung_ids(&l);
    enable(&b, &id).await;
    let run = runs_of(&b, &id, 1).await;
    review(&b, &run[0], "great").await;
    assert_eq!(topup(&b, &id).await["recorded"], 1);
    assert_eq!(board(&b, &id).await["climbers"][0]["currentRung"], rungs[1].as_str());

    // Not a permutation (one rung left out, one listed twice, one of no rung of this ladder):
    // 422 naming what is wrong, nothing changed.
    for (bad, what, status) in [
        (json!([rungs[1], rungs[0]]), "missing", 422),
        (json!([rungs[1], rungs[1], rungs[0], rungs[2]]), "twice", 422),
        (json!([rungs[1], rungs[0], "rung_other"]), "not a rung", 422),
    ] {
        let (s, v) = b
            .post(&format!("/v1/ladders/{id}/rungs/order"), json!({"rungIds": bad}))
            .await;
        assert_eq!(s, status, "{v}");
        let m = v["error"]["message"].as_str().unwrap();
        assert!(m.contains("rungIds") && m.contains(what), "{m}");
        assert_eq!(rung_ids(&b.get(&format!("/v1/ladders/{id}")).await), rungs);
    }
    let (s, v) = b
        .post(
            &format!("/v1/ladders/{id}/rungs/order"),
            json!({"rungIds": [rungs[2], rungs[0], rungs[1]], "extra": 1}),
        )
        .await;
    assert_eq!(s, 422, "{v}");
    // A permutation: the ids and the verdict stay; the climber stands on e (not advanced past).
    let (s, v) = b
        .post(
            &format!("/v1/ladders/{id}/rungs/order"),
            json!({"rungIds": [rungs[2], rungs[0], rungs[1]]}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(rung_ids(&v), [rungs[2].clone(), rungs[0].clone(), rungs[1].clone()]);
    let p = board(&b, &id).await;
    let c = &p["climbers"][0];
    assert_eq!(c["currentRung"], rungs[2].as_str(), "{c}");
    let s = standing(c, &rungs[0]);
    assert_eq!(
        (s["verdict"].clone(), s["recorded"].clone()),
        (json!("advance"), json!(true))
    );
    // Back in the first order.
    let (s, _) = b
        .post(&format!("/v1/ladders/{id}/rungs/order"), json!({"rungIds": rungs}))
        .await;
    assert_eq!(s, 200);

    // A newer c: the board says the pin is behind. Bumping it turns the verdict stale and puts the
    // climber back on c; pinning back restores it.
    ingest(&b, "c", "1.1.0", "standard").await;
    let p = board(&b, &id).await;
    assert_eq!(
        (p["rungs"][0]["latestVersion"].clone(), p["rungs"][0]["behind"].clone()),
        (json!("1.1.0"), json!(true))
    );
    let body = |version: &str| {
        json!({"name": "r", "rungs": [
                {"id": rungs[0], "slug": "c", "version": version, "variant": "default"},
                {"id": rungs[1], "slug": "d", "version": "1.0.0", "variant": "default"},
                {"id": rungs[2], "slug": "e", "version": "1.0.0", "variant": "default"}],
               "combinations": [harness("x")], "runsPerCell": 1, "autoTopUp": false,
               "bufferTarget": {"kind": "unbounded"}, "enabled": true})
    };
    let v = put(&b, &id, body("1.1.0")).await;
    assert_eq!(rung_ids(&v), rungs, "a bump keeps the rung's id");
    let p = board(&b, &id).await;
    let c = &p["climbers"][0];
    assert_eq!(c["currentRung"], rungs[0].as_str(), "the rung is re-opened: {c}");
    let stale: Vec<&Value> = c["rungs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["stale"] == true)
        .collect();
    assert_eq!(stale.len(), 1, "{c}");
    assert_eq!(
        (
            stale[0]["version"].clone(),
            stale[0]["verdict"].clone(),
            stale[0]["rungId"].clone()
        ),
        (json!("1.0.0"), json!("advance"), json!(rungs[0]))
    );
    assert_eq!(standing(c, &rungs[0])["version"], "1.1.0");
    put(&b, &id, body("1.0.0")).await;
    let p = board(&b, &id).await;
    let c = &p["climbers"][0];
    assert_eq!(
        c["currentRung"],
        rungs[1].as_str(),
        "pinned back, the verdict governs again: {c}"
    );
    assert!(
        c["rungs"].as_array().unwrap().iter().all(|s| s["stale"] == false),
        "{c}"
    );
    assert_eq!(standing(c, &rungs[0])["verdict"], "advance");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_late_climber_starts_at_rung_one_and_priority_then_focused_order_the_feed() {
    let b = Belay::start().await;
    b.catalogue().await;
    ingest(&b, "d", "1.0.0", "standard").await;
    for h in ["x", "y", "z"] {
        b.harness(h, 5, OK_SCRIPT).await;
    }
    let (s, g) = b
        .post(
            "/v1/coverage-groups",
            json!({"name": "models", "kind": "combo", "members": [harness("x")]}),
        )
        .await;
    assert_eq!(s, 201, "{g}");
    let l = ladder(
        &b,
        json!({"name": "late", "rungs": [case("c"), case("d")], "comboGroups": [g["id"]], "runsPerCell": 1,
               "autoTopUp": false, "bufferTarget": {"kind": "unbounded"}}),
    )
    .await;
    let id = l["id"].as_str().unwrap().to_string();
    let rungs = rung_ids(&l);
    enable(&b, &id).await;
    let run = runs_of(&b, &id, 1).await;
    review(&b, &run[0], "great").await;
    assert_eq!(topup(&b, &id).await["enqueued"], 1);
    // y and z join the group: they start at rung 1 while x carries on at rung 2.
    let (s, _) = call(
        &b,
        "PUT",
        &format!("/v1/coverage-groups/{}", g["id"].as_str().unwrap()),
        &b.token,
        Some(json!({"name": "models", "kind": "combo", "members": [harness("x"), harness("y"), harness("z")]})),
    )
    .await;
    assert_eq!(s, 200);
    let p = board(&b, &id).await;
    assert_eq!(climber(&p, "x")["currentRung"], rungs[1].as_str());
    assert_eq!(climber(&p, "y")["currentRung"], rungs[0].as_str());
    assert_eq!(climber(&p, "z")["currentRung"], rungs[0].as_str());
    assert_eq!(
        climber(&p, "z")["steering"],
        json!({"priority": 0, "focused": false, "held": false})
    );
    // z has priority, y is focused: z, then y, then the resolved order.
    let (s, _) = b
        .post(
            &format!("/v1/ladders/{id}/climbers"),
            json!({"combination": harness("z"), "priority": 5}),
        )
        .await;
    assert_eq!(s, 200);
    let (s, _) = b
        .post(
            &format!("/v1/ladders/{id}/climbers"),
            json!({"combination": harness("y"), "focused": true}),
        )
        .await;
    assert_eq!(s, 200);
    let t = topup(&b, &id).await;
    let order: Vec<&str> = t["launched"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["combination"]["harness"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["z", "y"], "x's rung 2 is at target already: {t}");
    let seqs: Vec<(String, i64)> = jobs_of(&b, &id)
        .await
        .iter()
        .map(|j| {
            (
                j["combination"]["harness"].as_str().unwrap().to_string(),
                j["queueSeq"].as_i64().unwrap(),
            )
        })
        .collect();
    let z = seqs.iter().find(|(h, _)| h == "z").unwrap().1;
    let y = seqs.iter().find(|(h, _)| h == "y").unwrap().1;
    assert!(z < y, "emission order is queue order: {seqs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_buffer_counts_unreviewed_runs_of_every_reached_rung_so_a_reviewer_behind_stops_the_launches() {
    let b = Belay::start().await;
    b.catalogue().await;
    ingest(&b, "d", "1.0.0", "standard").await;
    b.harness("x", 5, OK_SCRIPT).await;
    b.harness("y", 5, OK_SCRIPT).await;
    let l = ladder(
        &b,
        json!({"name": "buf", "rungs": [case("c"), case("d")], "combinations": [harness("x"), harness("y")],
               "runsPerCell": 2, "autoTopUp": false, "bufferTarget": {"kind": "bounded", "runs": 3}}),
    )
    .await;
    let id = l["id"].as_str().unwrap().to_string();
    assert_eq!(enable(&b, &id).await["enqueued"], 4, "two whole cells: 2, then 4 ≥ 3");
    let runs = runs_of(&b, &id, 4).await;
    let jobs = jobs_of(&b, &id).await;
    let x_runs: Vec<&String> = runs
        .iter()
        .zip(jobs.iter())
        .filter(|(_, j)| j["combination"]["harness"] == "x")
        .map(|(r, _)| r)
        .collect();
    // x advances on one review; its other run of rung 1 still waits on the reviewer.
    review(&b, x_runs[0], "great").await;
    let p = board(&b, &id).await;
    assert_eq!(
        (p["buffered"].clone(), p["toReview"].clone()),
        (json!(3), json!(3)),
        "{p}"
    );
    let q = b.get(&format!("/v1/ladders/{id}/queue")).await;
    assert_eq!(
        q["runs"].as_array().unwrap().len(),
        3,
        "the advanced-past rung's run is on the queue: {q}"
    );
    let t = topup(&b, &id).await;
    assert_eq!(
        (t["enqueued"].clone(), t["occupancy"].clone()),
        (json!(0), json!(3)),
        "{t}"
    );
    // Caught up on it: x's rung 2 launches.
    review(&b, x_runs[1], "great").await;
    let t = topup(&b, &id).await;
    assert_eq!(t["enqueued"], 2, "{t}");
    assert_eq!(t["launched"][0]["case"]["slug"], "d");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn halt_cancels_only_this_ladders_jobs_and_deleting_a_ladder_leaves_its_jobs() {
    let b = Belay::start().await;
    b.catalogue().await;
    b.harness("x", 1, SLOW_SCRIPT).await;
    let make = |name: &str, runs: i64, enabled: bool| {
        json!({"name": name, "rungs": [case("c")], "combinations": [harness("x")], "runsPerCell": runs,
               "bufferTarget": {"kind": "unbounded"}, "enabled": enabled})
    };
    let a = ladder(&b, make("a", 2, true)).await["id"].as_str().unwrap().to_string();
    let a_jobs = jobs_of(&b, &a).await;
    assert_eq!(a_jobs.len(), 2, "created enabled, it is topped up");
    b.wait_status(a_jobs[0]["id"].as_str().unwrap(), &["running"], Duration::from_secs(60))
        .await;
    let hand = b.launch("x").await["id"].as_str().unwrap().to_string();
    let other = ladder(&b, make("b", 4, false)).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(jobs_of(&b, &other).await.len(), 0, "created disabled, nothing");
    let (s, v) = b.post(&format!("/v1/ladders/{a}/halt-all"), json!({})).await;
    assert_eq!((s, v["error"]["code"].as_str()), (409, Some("confirmation_required")));
    let (s, h) = b.post(&format!("/v1/ladders/{a}/halt"), json!({})).await;
    assert_eq!(s, 200, "{h}");
    assert_eq!(h["cancelled"], 1, "a's queued run; its running one carries on: {h}");
    assert_eq!(
        b.get(&format!("/v1/ladders/{a}")).await["enabled"],
        false,
        "a halt disables"
    );
    assert_ne!(b.job(&hand).await["status"], "canceled");
    // b launches what the cell lacks beside a's running run and the hand-launched one; deleting
    // it leaves its jobs.
    let t = enable(&b, &other).await;
    assert_eq!(t["enqueued"], 2, "{t}");
    let before = jobs_of(&b, &other).await;
    let (s, _) = call(&b, "DELETE", &format!("/v1/ladders/{other}"), &b.token, None).await;
    assert_eq!(s, 204);
    let (s, _) = call(&b, "GET", &format!("/v1/ladders/{other}"), &b.token, None).await;
    assert_eq!(s, 404);
    let after = jobs_of(&b, &other).await;
    assert_eq!(after.len(), before.len());
    assert!(after.iter().all(|j| j["status"] != "canceled"), "{after:?}");
    let (s, h) = b
        .post(&format!("/v1/ladders/{a}/halt-all"), json!({"confirm": true}))
        .await;
    assert_eq!(s, 200, "{h}");
    assert_ne!(
        b.job(&hand).await["status"],
        "canceled",
        "a hand-launched job is never touched"
    );
    assert!(jobs_of(&b, &a).await.iter().all(|j| j["status"] == "canceled"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_input_on_every_endpoint_is_a_4xx_naming_the_field_and_another_accounts_ladder_is_not_found() {
    let b = Belay::start().await;
    b.catalogue().await;
    ingest(&b, "perf", "1.0.0", "performance").await;
    ingest(&b, "jam", "1.0.0", "game_jam").await;
    let good = || json!({"name": "g", "rungs": [case("c")], "combinations": [harness("x")]});
    let with = |k: &str, v: Value| {
        let mut g = good();
        g[k] = v;
        g
    };
    let fifty_one: Vec<Value> = (0..51).map(|i| case(&format!("s{i}"))).collect();
    let cases = [
        (with("name", json!("")), 422, "name"),
        (with("rungs", json!([])), 422, "rungs"),
        (with("rungs", json!(fifty_one)), 422, "rungs"),
        (with("rungs", json!([case("c"), case("c")])), 422, "rungs[1]"),
        (with("rungs", json!([case("perf")])), 422, "performance"),
        (with("rungs", json!([case("jam")])), 422, "game jam"),
        (with("runsPerCell", json!(0)), 422, "runsPerCell"),
        (
            with(
                "gate",
                json!({"floor": "scuffed", "threshold": {"kind": "count", "runs": 0}}),
            ),
            422,
            "gate.threshold.runs",
        ),
        (
            with(
                "gate",
                json!({"floor": "scuffed", "threshold": {"kind": "count", "runs": 6}}),
            ),
            422,
            "gate.threshold.runs",
        ),
        (
            with(
                "gate",
                json!({"floor": "scuffed", "threshold": {"kind": "fraction", "of": 1.5}}),
            ),
            422,
            "gate.threshold.of",
        ),
        (with("outerAxis", json!("diagonal")), 422, "outerAxis"),
        (
            with("bufferTarget", json!({"kind": "bounded", "runs": -1})),
            422,
            "bufferTarget.runs",
        ),
        (with("comboGroups", json!(["grp_nope"])), 409, "comboGroups[0]"),
        (with("colour", json!("red")), 422, "colour"),
    ];
    for (body, status, field) in cases {
        let (s, v) = b.post("/v1/ladders", body.clone()).await;
        assert_eq!(s, status, "{body} → {v}");
        let m = v["error"]["message"].as_str().unwrap_or_default();
        assert!(m.contains(field), "{body}: {m} should name {field}");
    }
    let (_, v) = b.post("/v1/ladders", with("rungs", json!([case("perf")]))).await;
    assert!(v["error"]["message"].as_str().unwrap().contains("coverage plan"), "{v}");
    assert_eq!(b.get("/v1/ladders").await, json!([]), "nothing written");
    let (s, _) = b
        .post("/v1/ladders", with("rungs", json!([case("not-ingested")])))
        .await;
    assert_eq!(s, 201, "a version not ingested is allowed");

    let l = ladder(&b, good()).await;
    let id = l["id"].as_str().unwrap().to_string();
    let rungs = rung_ids(&l);
    // PUT: bad input changes nothing; a removed or invented rung id is refused (422 naming it,
    // as a reorder naming no rung of the ladder is).
    for (body, status, field) in [
        (with("runsPerCell", json!(101)), 422, "runsPerCell"),
        (
            with(
                "rungs",
                json!([{"id": "rung_invented", "slug": "c", "version": "1.0.0", "variant": "default"}]),
            ),
            422,
            "rungs[0].id",
        ),
    ] {
        let (s, v) = call(&b, "PUT", &format!("/v1/ladders/{id}"), &b.token, Some(body)).await;
        assert_eq!(s, status, "{v}");
        assert!(v["error"]["message"].as_str().unwrap().contains(field), "{v}");
    }
    assert_eq!(b.get(&format!("/v1/ladders/{id}")).await, l, "nothing changed");
    // Steering.
    for (body, status, field) in [
        (json!({"combination": harness("x"), "priority": 5000}), 422, "priority"),
        (
            json!({"combination": harness("nobody"), "held": true}),
            409,
            "combination",
        ),
        (json!({"combination": harness("x"), "held": "yes"}), 422, "held"),
        (json!({"combination": harness("x"), "held": null}), 422, "body"),
    ] {
        let (s, v) = b.post(&format!("/v1/ladders/{id}/climbers"), body.clone()).await;
        assert_eq!(s, status, "{body} → {v}");
        assert!(v["error"]["message"].as_str().unwrap().contains(field), "{v}");
    }
    assert_eq!(board(&b, &id).await["climbers"][0]["steering"]["priority"], 0);
    // Outcomes, queue, order.
    let (s, v) = b
        .post(
            &format!("/v1/ladders/{id}/outcomes"),
            json!({"combination": harness("x"), "rungId": rungs[0]}),
        )
        .await;
    assert_eq!(s, 422, "outcome is required: {v}");
    let (s, v) = b
        .post(
            &format!("/v1/ladders/{id}/outcomes"),
            json!({"combination": harness("x"), "rungId": rungs[0], "outcome": "maybe"}),
        )
        .await;
    assert_eq!(s, 422, "{v}");
    let (s, v) = call(&b, "GET", &format!("/v1/ladders/{id}/queue?limit=0"), &b.token, None).await;
    assert_eq!(s, 422, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("limit"));
    let (s, _) = b
        .post(&format!("/v1/ladders/{id}/rungs/order"), json!({"rungIds": "x"}))
        .await;
    assert_eq!(s, 422);

    // Another account sees none of it.
    let bob = create_account(&b.database_url, "bob");
    for (method, path, body) in [
        ("GET", format!("/v1/ladders/{id}"), None),
        ("PUT", format!("/v1/ladders/{id}"), Some(good())),
        ("GET", format!("/v1/ladders/{id}/progress"), None),
        ("GET", format!("/v1/ladders/{id}/queue"), None),
        ("POST", format!("/v1/ladders/{id}/topup"), Some(json!({}))),
        ("POST", format!("/v1/ladders/{id}/enable"), Some(json!({}))),
        ("POST", format!("/v1/ladders/{id}/disable"), Some(json!({}))),
        ("POST", format!("/v1/ladders/{id}/halt"), Some(json!({}))),
        (
            "POST",
            format!("/v1/ladders/{id}/halt-all"),
            Some(json!({"confirm": true})),
        ),
        (
            "POST",
            format!("/v1/ladders/{id}/rungs/order"),
            Some(json!({"rungIds": rungs})),
        ),
        (
            "POST",
            format!("/v1/ladders/{id}/climbers"),
            Some(json!({"combination": harness("x"), "held": true})),
        ),
        (
            "POST",
            format!("/v1/ladders/{id}/outcomes"),
            Some(json!({"combination": harness("x"), "rungId": rungs[0], "outcome": null})),
        ),
        ("DELETE", format!("/v1/ladders/{id}"), None),
    ] {
        let (s, v) = call(&b, method, &path, &bob, body).await;
        assert_eq!(s, 404, "{method} {path}: {v}");
    }
    let (_, mine) = call(&b, "GET", "/v1/ladders", &bob, None).await;
    assert_eq!(mine, json!([]));
    assert_eq!(b.get(&format!("/v1/ladders/{id}")).await["enabled"], false);
}

/// A ladder of one rung and one climber (harness `x`), enabled, with its one run completed, and a
/// Temporal client to reach its climb: the climb tests' start.
async fn climbing_ladder(b: &Belay, name: &str, early_stop: bool) -> (String, temporalio_client::Client) {
    b.catalogue().await;
    b.harness("x", 5, OK_SCRIPT).await;
    let l = ladder(
        b,
        json!({"name": name, "rungs": [case("c")], "combinations": [harness("x")], "runsPerCell": 1,
               "autoTopUp": false, "earlyStop": early_stop, "bufferTarget": {"kind": "unbounded"}}),
    )
    .await;
    let id = l["id"].as_str().unwrap().to_string();
    enable(b, &id).await;
    runs_of(b, &id, 1).await;
    let client = belay_client::connect(&b.temporal.address, "default", "test")
        .await
        .unwrap();
    (id, client)
}

/// Waits until the climb's board query shows its one climber waiting on the reviewer, after at
/// least `signals` signals in the running run.
async fn wait_awaiting_review(client: &temporalio_client::Client, id: &str, what: &str, signals: u64) {
    wait_for(what, Duration::from_secs(60), || async {
        match belay_client::climb_board(client, id).await {
            Ok(board) => {
                board.signals >= signals
                    && board.climbers.len() == 1
                    && board.climbers[0].status == belay_domain::progress::ClimberStatus::AwaitingReview
            }
            Err(_) => false,
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_climb_runs_while_enabled_answers_its_board_query_and_ends_when_disabled() {
    let b = Belay::start().await;
    let (id, client) = climbing_ladder(&b, "climb", true).await;
    // The run's end signals the climb, which then sees the rung waiting on the reviewer.
    wait_awaiting_review(&client, &id, "the climb's board", 1).await;
    let (s, _) = b.post(&format!("/v1/ladders/{id}/disable"), json!({})).await;
    assert_eq!(s, 200);
    replays(&b, "ladder-climb-v1", &format!("ladder-{id}")).await;
}

/// The climb continues as new every `steps_per_run` board reads (200 in production; 2 here, by
/// starting the climb with that input in place of the one enabling started), keeps its input
/// across runs, answers its board query in the new run and still ends when the ladder is
/// disabled. The run that continued as new replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_climb_continues_as_new_keeping_its_input_and_still_answers_its_board() {
    use belay_workflows::ladder::{ClimbInput, LadderClimbWorkflow};
    use temporalio_client::{
        UntypedWorkflow, WorkflowDescribeOptions, WorkflowFetchHistoryOptions, WorkflowStartOptions,
        WorkflowTerminateOptions,
    };
    let b = Belay::start().await;
    let (id, client) = climbing_ladder(&b, "long climb", false).await;
    let workflow_id = format!("ladder-{id}");
    let current_run = || async {
        client
            .get_workflow_handle::<UntypedWorkflow>(workflow_id.clone())
            .describe(WorkflowDescribeOptions::default())
            .await
            .unwrap()
            .run_id()
            .to_string()
    };

    // Replace the climb enabling started with one that continues as new every two reads.
    client
        .get_workflow_handle::<UntypedWorkflow>(workflow_id.clone())
        .terminate(WorkflowTerminateOptions::builder().reason("shorter runs").build())
        .await
        .unwrap();
    // The same input as the API's, read from the start of the run it replaces.
    let started = belay_client::closed_history_json(&client, &workflow_id, Duration::from_secs(30))
        .await
        .unwrap();
    let started: Value = serde_json::from_slice(&started).unwrap();
    let payload = started["events"][0]["attributes"]["WorkflowExecutionStartedEventAttributes"]["input"]["payloads"][0]
        ["data"]
        .as_str()
        .expect("the climb's input");
    use base64::Engine as _;
    let mut input: ClimbInput =
        serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(payload).unwrap()).unwrap();
    assert_eq!((input.ladder_id.as_str(), input.steps_per_run), (id.as_str(), None));
    input.steps_per_run = Some(2);
    let handle = client
        .start_workflow(
            LadderClimbWorkflow::run,
            input,
            WorkflowStartOptions::new(belay_workflows::queues::WORKFLOWS, workflow_id.clone()).build(),
        )
        .await
        .unwrap();
    let first = handle.run_id().unwrap_or_default().to_string();
    assert!(!first.is_empty());

    // Its first read, then one poke: two reads, so it continues as new; two more pokes and the
    // second run (which kept `steps_per_run: 2`) does too.
    let mut seen = vec![first.clone()];
    // Each look pokes the climb when it has not yet continued as new twice, and looks again
    // 200 ms later.
    wait_until_every(
        "the climb to continue as new twice",
        Duration::from_secs(90),
        Duration::from_millis(200),
        async || {
            let now = current_run().await;
            if !seen.contains(&now) {
                seen.push(now);
            }
            if seen.len() >= 3 {
                return Ok(());
            }
            let _ = belay_client::poke_climb(&client, &id).await;
            Err(format!("it continued as new {} times", seen.len() - 1))
        },
    )
    .await;

    // The run that continued as new ended so, and its history replays.
    let first_history = handle
        .fetch_history(WorkflowFetchHistoryOptions::default())
        .to_json()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&first_history);
    assert!(
        text.contains("WorkflowExecutionContinuedAsNewEventAttributes"),
        "the first run did not continue as new"
    );
    crate::common::replays_json("ladder-climb-continued-v1", first_history.clone()).await;

    // The newest run answers where the climber stands.
    wait_awaiting_review(&client, &id, "the new run's board", 0).await;

    // Disabling ends the newest run.
    let (s, _) = b.post(&format!("/v1/ladders/{id}/disable"), json!({})).await;
    assert_eq!(s, 200);
    replays(&b, "ladder-climb-v1", &workflow_id).await;
}
