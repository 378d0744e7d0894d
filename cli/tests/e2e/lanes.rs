//! Provider and model lanes beside harness caps, and attempts with their failure classes, end to
//! end: a real API and worker, a real Temporal server, a real database, adapters that are shell
//! scripts answering each class.

use crate::common::{Belay, replays, wait_until};
use serde_json::{Value, json};
use std::time::Duration;

const SLOW: &str = r#"sleep 30; printf '{"status":"completed"}' > "$BELAY_MANIFEST""#;

async fn created(b: &Belay, path: &str, body: Value) -> Value {
    let (s, v) = b.post(path, body).await;
    assert_eq!(s, 201, "POST {path}: {v}");
    v
}

async fn plan_of_one_cell(b: &Belay, harness: &str) -> String {
    let v = created(
        b,
        "/v1/coverage-plans",
        json!({"name": "p", "cases": [{"slug": "c", "version": "1.0.0", "variant": "default"}],
               "combinations": [{"kind": "harness", "harness": harness, "model": "m"}], "runsPerCell": 1,
               "bufferTarget": {"kind": "bounded", "runs": 10}}),
    )
    .await;
    v["id"].as_str().unwrap().to_string()
}

/// Tops the plan up and answers the one job it launched.
async fn topped_up_job(b: &Belay, plan: &str) -> String {
    let (s, t) = b.post(&format!("/v1/coverage-plans/{plan}/topup"), json!({})).await;
    assert_eq!(s, 200, "{t}");
    assert_eq!(t["enqueued"], 1, "{t}");
    t["launched"][0]["jobIds"][0].as_str().unwrap().to_string()
}

async fn attempts(b: &Belay, job: &str) -> Vec<Value> {
    b.get(&format!("/v1/jobs/{job}/attempts"))
        .await
        .as_array()
        .unwrap()
        .clone()
}

/// No job retries `job` (a retry names it in `retryOf`).
async fn assert_not_retried(b: &Belay, job: &str) {
    let all = b.get("/v1/jobs?limit=10000").await;
    let retries: Vec<&Value> = all
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["retryOf"] == json!(job))
        .collect();
    assert!(retries.is_empty(), "job {job} was retried: {retries:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_provider_lane_of_one_across_two_harnesses_holds_the_second_job_pending_naming_the_lane() {
    let b = Belay::start().await;
    b.catalogue().await;
    created(&b, "/v1/providers", json!({"name": "acme", "maxParallelism": 1})).await;
    for h in ["h1", "h2"] {
        created(
            &b,
            "/v1/harnesses",
            json!({"name": h, "maxParallelism": 5, "provider": "acme", "adapter": {"kind": "script", "script": SLOW, "timeoutSeconds": 120}}),
        )
        .await;
    }
    let first = b.launch("h1").await["id"].as_str().unwrap().to_string();
    b.wait_status(&first, &["running"], Duration::from_secs(60)).await;
    let second = b.launch("h2").await["id"].as_str().unwrap().to_string();
    let held = b.wait_status(&second, &["pending"], Duration::from_secs(30)).await;
    assert_eq!(held["heldBy"], "provider:acme", "{held}");
    // Raising the lane takes effect at the next claim: the second job starts at once.
    let (s, v) = b
        .request(
            "PATCH",
            "/v1/providers/acme",
            Some(&b.token),
            Some(r#"{"maxParallelism": 2}"#),
        )
        .await;
    assert_eq!((s, &v["maxParallelism"]), (200, &json!(2)), "{v}");
    let running = b.wait_status(&second, &["running"], Duration::from_secs(30)).await;
    assert_eq!(running["heldBy"], Value::Null);
    for id in [&first, &second] {
        let (s, _) = b.post(&format!("/v1/jobs/{id}/cancel"), json!({})).await;
        assert_eq!(s, 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lanes_refuse_bad_input_and_a_provider_in_use_is_not_deleted() {
    let b = Belay::start().await;
    for (body, field) in [
        (json!({"name": "p", "maxParallelism": 0}), "maxParallelism"),
        (json!({"name": "p", "maxParallelism": 10001}), "maxParallelism"),
        (json!({"name": "p", "maxParallelism": "many"}), "maxParallelism"),
    ] {
        let (s, v) = b.post("/v1/providers", body.clone()).await;
        assert_eq!(s, 422, "{body}: {v}");
        assert!(v["error"]["message"].as_str().unwrap().contains(field), "{v}");
    }
    let (s, v) = b.post("/v1/models", json!({"id": "m", "provider": "nowhere"})).await;
    assert_eq!(s, 422, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("provider"), "{v}");
    let (s, v) = b.post("/v1/models", json!({"id": "m", "maxParallelism": 0})).await;
    assert_eq!(s, 422, "{v}");
    let (s, v) = b
        .post("/v1/harnesses", json!({"name": "h", "maxParallelism": 1, "provider": "nowhere", "adapter": {"kind": "script", "script": "true"}}))
        .await;
    assert_eq!(s, 422, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("provider"), "{v}");
    assert_eq!(b.get("/v1/providers").await, json!([]), "nothing was written");
    assert_eq!(b.get("/v1/models").await, json!([]), "nothing was written");

    created(&b, "/v1/providers", json!({"name": "acme", "maxParallelism": 3})).await;
    created(
        &b,
        "/v1/models",
        json!({"id": "m", "provider": "acme", "maxParallelism": 2}),
    )
    .await;
    created(
        &b,
        "/v1/harnesses",
        json!({"name": "h", "maxParallelism": 1, "provider": "acme", "adapter": {"kind": "script", "script": "true"}}),
    )
    .await;
    let (s, v) = b.request("DELETE", "/v1/providers/acme", Some(&b.token), None).await;
    assert_eq!(s, 409, "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("[h]") && msg.contains("[m]"), "{msg}");
    assert_eq!(
        b.get("/v1/providers/acme").await["maxParallelism"],
        3,
        "nothing was deleted"
    );
    let (s, v) = b
        .request(
            "PATCH",
            "/v1/harnesses/h",
            Some(&b.token),
            Some(r#"{"provider": null}"#),
        )
        .await;
    assert_eq!((s, &v["provider"]), (200, &Value::Null), "{v}");
    let (s, v) = b.request("PUT", "/v1/models/m", Some(&b.token), Some(r#"{}"#)).await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = b.request("DELETE", "/v1/providers/acme", Some(&b.token), None).await;
    assert_eq!(s, 204, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_provider_refusal_pauses_the_plan_is_not_retried_and_a_retry_by_hand_waits_for_the_resume() {
    let b = Belay::start().await;
    b.catalogue().await;
    created(&b, "/v1/providers", json!({"name": "acme"})).await;
    created(
        &b,
        "/v1/harnesses",
        json!({"name": "refused", "maxParallelism": 2, "provider": "acme", "adapter": {"kind": "script",
               "script": r#"echo 'spend cap reached' >&2; printf '{"status":"failed","failureClass":"provider_refused","message":"spend cap reached"}' > "$BELAY_MANIFEST""#,
               "timeoutSeconds": 60}}),
    )
    .await;
    let plan = plan_of_one_cell(&b, "refused").await;
    let job = topped_up_job(&b, &plan).await;
    let failed = b.wait_status(&job, &["failed"], Duration::from_secs(60)).await;
    assert_eq!(failed["failureClass"], "provider_refused", "{failed}");
    assert_eq!(b.get(&format!("/v1/coverage-plans/{plan}")).await["paused"], true);
    let events = b.get(&format!("/v1/events?entity={job}")).await;
    let refused: Vec<&Value> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "provider.refused")
        .collect();
    assert_eq!(refused.len(), 1, "{events}");
    assert_eq!(refused[0]["payload"]["provider"], "acme");
    assert_eq!(refused[0]["payload"]["cause"], "spend cap reached");
    let tried = attempts(&b, &job).await;
    assert_eq!(tried.len(), 1, "{tried:?}");
    assert_eq!(tried[0]["failureClass"], "provider_refused");
    assert_eq!(tried[0]["exit"], 0);
    assert!(tried[0]["logTail"].as_str().unwrap().contains("spend cap reached"));
    assert!(tried[0]["worker"].as_str().is_some_and(|w| !w.is_empty()));
    assert_not_retried(&b, &job).await;

    // By hand: refused while the plan is paused, accepted once it is resumed.
    let (s, v) = b.post(&format!("/v1/jobs/{job}/retry"), json!({})).await;
    assert_eq!(s, 409, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("paused"), "{v}");
    let (s, v) = b.post(&format!("/v1/coverage-plans/{plan}/resume"), json!({})).await;
    assert_eq!(s, 200, "{v}");
    let (s, retry) = b.post(&format!("/v1/jobs/{job}/retry"), json!({})).await;
    assert_eq!(s, 201, "{retry}");
    assert_eq!((&retry["retryOf"], &retry["attempt"]), (&json!(job), &json!(2)));
    assert_eq!(retry["origin"], json!(format!("plan:{plan}")));
    let (s, v) = b.post(&format!("/v1/jobs/{job}/retry"), json!({})).await;
    assert_eq!(s, 409, "a job is retried once: {v}");
    let retry_id = retry["id"].as_str().unwrap();
    b.wait_status(retry_id, &["failed"], Duration::from_secs(60)).await;
    assert_eq!(attempts(&b, &job).await.len(), 2, "the chain's attempts are the job's");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_task_failure_completes_as_evidence_and_is_not_retried() {
    let b = Belay::start().await;
    b.catalogue().await;
    b.harness(
        "task",
        2,
        r#"printf '{"status":"failed","failureClass":"task","message":"the tests did not pass"}' > "$BELAY_MANIFEST"; exit 1"#,
    )
    .await;
    let plan = plan_of_one_cell(&b, "task").await;
    let job = topped_up_job(&b, &plan).await;
    let done = b
        .wait_status(&job, &["completed", "failed"], Duration::from_secs(60))
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["failureClass"], "task");
    let runs = b.get(&format!("/v1/runs?jobId={job}")).await;
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(runs[0]["taskFailure"], "the tests did not pass");
    let tried = attempts(&b, &job).await;
    assert_eq!(tried.len(), 1, "{tried:?}");
    assert_eq!(
        (&tried[0]["failureClass"], &tried[0]["exit"]),
        (&json!("task"), &json!(1))
    );
    assert_not_retried(&b, &job).await;
    // The run counts: the cell is complete, and the plan is not paused.
    let cov = b.get(&format!("/v1/coverage-plans/{plan}/coverage")).await;
    assert_eq!(cov["cells"][0]["completed"], 1, "{cov}");
    assert_eq!(b.get(&format!("/v1/coverage-plans/{plan}")).await["paused"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rate_limited_attempt_is_retried_in_the_same_job_after_its_backoff() {
    let b = Belay::start().await;
    b.catalogue().await;
    // The first attempt is rate limited (asking for 3 s); the second completes.
    b.harness(
        "limited",
        1,
        r#"marker="${TMPDIR:-/tmp}/belay-rl-$BELAY_JOB_ID"
if [ ! -e "$marker" ]; then touch "$marker"; printf '{"status":"failed","failureClass":"provider_rate_limited","retryAfterSeconds":3,"message":"429"}' > "$BELAY_MANIFEST"; exit 75; fi
rm -f "$marker"; printf '{"status":"completed","loaded":true}' > "$BELAY_MANIFEST""#,
    )
    .await;
    let job = b.launch("limited").await["id"].as_str().unwrap().to_string();
    let done = b
        .wait_status(&job, &["completed", "failed"], Duration::from_secs(90))
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["attempt"], 1, "the rate limit used up no attempt");
    let tried = attempts(&b, &job).await;
    assert_eq!(tried.len(), 2, "{tried:?}");
    assert_eq!(
        (&tried[0]["failureClass"], &tried[0]["exit"]),
        (&json!("provider_rate_limited"), &json!(75))
    );
    assert_eq!(tried[1]["failureClass"], Value::Null);
    assert_eq!(tried[1]["n"], 2);
    let waited = tried[1]["startedAt"].as_i64().unwrap() - tried[0]["endedAt"].as_i64().unwrap();
    assert!(waited >= 3000, "the retry started {waited} ms after the rate limit");
    assert_not_retried(&b, &job).await;
    replays(&b, "run-rate-limited-v1", &format!("run-{job}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unclassed_failure_is_infrastructure_and_retried_as_a_new_attempt() {
    let b = Belay::start().await;
    b.catalogue().await;
    b.harness("broken", 1, "echo boom >&2; exit 3").await;
    let job = b.launch("broken").await["id"].as_str().unwrap().to_string();
    let failed = b.wait_status(&job, &["failed"], Duration::from_secs(60)).await;
    assert_eq!(failed["failureClass"], "infra");
    let all = wait_until("the retries to run out", Duration::from_secs(120), async || {
        let tried = attempts(&b, &job).await;
        if tried.len() == 3 {
            Ok(tried)
        } else {
            Err(format!("{} attempts", tried.len()))
        }
    })
    .await;
    let jobs: Vec<i64> = all.iter().map(|a| a["jobAttempt"].as_i64().unwrap()).collect();
    assert_eq!(jobs, [1, 2, 3], "each retry is a job of the chain: {all:?}");
    assert!(
        all.iter()
            .all(|a| a["failureClass"] == "infra" && a["logTail"].as_str().unwrap().contains("boom"))
    );
    let (s, v) = b.post("/v1/jobs/job_missing/retry", json!({})).await;
    assert_eq!(s, 404, "{v}");
    let (s, v) = b
        .request("GET", "/v1/jobs/job_missing/attempts", Some(&b.token), None)
        .await;
    assert_eq!(s, 404, "{v}");
}
