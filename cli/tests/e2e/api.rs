//! The API surface through a real `belay api` process: every route refuses a missing or wrong
//! token, bad input gets a 4xx naming the field and writes nothing, gg configurations are the
//! owner's alone, and launches that cannot run are refused with the reason.

use crate::common::{Belay, create_account};
use serde_json::{Value, json};

/// Every route with a body that would be valid, so only the token decides.
fn routes() -> Vec<(&'static str, &'static str, Option<Value>)> {
    vec![
        ("GET", "/v1/openapi.json", None),
        ("GET", "/v1/account", None),
        (
            "POST",
            "/v1/test-cases",
            Some(json!({"slug": "z", "version": "1.0.0", "testType": "standard", "variants": ["v"]})),
        ),
        ("GET", "/v1/test-cases", None),
        ("GET", "/v1/test-cases/c", None),
        ("GET", "/v1/test-cases/c/versions/1.0.0", None),
        (
            "PUT",
            "/v1/test-cases/c/versions/1.0.0",
            Some(json!({"testType": "standard", "variants": ["default"]})),
        ),
        (
            "POST",
            "/v1/harnesses",
            Some(json!({"name": "zz", "maxParallelism": 1, "adapter": {"kind": "script", "script": "true"}})),
        ),
        ("GET", "/v1/harnesses", None),
        ("GET", "/v1/harnesses/h", None),
        ("PATCH", "/v1/harnesses/h", Some(json!({"maxParallelism": 2}))),
        ("POST", "/v1/models", Some(json!({"id": "zz"}))),
        ("GET", "/v1/models", None),
        ("GET", "/v1/models/m", None),
        ("PUT", "/v1/models/m", Some(json!({"contextWindow": 5}))),
        (
            "POST",
            "/v1/gg-configs",
            Some(json!({"name": "g", "launchSlots": ["root"]})),
        ),
        ("GET", "/v1/gg-configs", None),
        ("GET", "/v1/gg-configs/gg_0", None),
        ("PATCH", "/v1/gg-configs/gg_0", Some(json!({"name": "x"}))),
        (
            "POST",
            "/v1/jobs",
            Some(
                json!({"case": {"slug": "c", "version": "1.0.0", "variant": "default"}, "combination": {"kind": "harness", "harness": "h", "model": "m"}}),
            ),
        ),
        ("GET", "/v1/jobs", None),
        ("POST", "/v1/jobs/cancel", Some(json!({"scope": "queued"}))),
        ("GET", "/v1/jobs/job_0", None),
        ("POST", "/v1/jobs/job_0/cancel", None),
        ("GET", "/v1/job-transitions", None),
        ("GET", "/v1/runs", None),
        ("GET", "/v1/runs/run_0", None),
        (
            "POST",
            "/v1/runs/run_0/review",
            Some(json!({"ratings": {"gameplay": "great"}})),
        ),
        ("GET", "/v1/runs/run_0/reviews", None),
        ("POST", "/v1/runs/run_0/artifact-url", None),
        ("GET", "/v1/runs/run_0/review-domains", None),
        ("GET", "/v1/events", None),
        ("POST", "/v1/projects", Some(json!({"name": "p"}))),
        ("GET", "/v1/projects", None),
        ("GET", "/v1/projects/proj_0", None),
        ("DELETE", "/v1/projects/proj_0", None),
        (
            "POST",
            "/v1/projects/proj_0/repo-tokens",
            Some(json!({"scope": "read"})),
        ),
        ("POST", "/v1/repo-tokens/rt_0/revoke", None),
        ("POST", "/v1/projects/proj_0/changes", Some(json!({"goal": "g"}))),
        ("GET", "/v1/projects/proj_0/changes", None),
        ("GET", "/v1/changes/chg_0", None),
        (
            "POST",
            "/v1/changes/chg_0/tasks",
            Some(json!({"key": "t", "kind": "implement", "title": "t"})),
        ),
        ("GET", "/v1/changes/chg_0/tasks", None),
        ("POST", "/v1/tasks/task_0/runs", None),
        (
            "POST",
            "/v1/task-runs/run_0/change-set",
            Some(json!({"commit": "0123456789abcdef0123456789abcdef01234567"})),
        ),
        ("GET", "/v1/change-sets/cs_0", None),
        ("GET", "/v1/task-runs/run_0/workspace", None),
        (
            "POST",
            "/v1/task-runs/run_0/workspace/tools",
            Some(json!({"tool": "read_file", "path": "a.txt"})),
        ),
        (
            "POST",
            "/v1/task-runs/run_0/workspace/publish",
            Some(json!({"message": "m"})),
        ),
        ("POST", "/v1/task-runs/run_0/workspace/close", None),
        ("POST", "/v1/projects/proj_0/edit-sessions", None),
        ("GET", "/v1/edit-sessions/edit_0", None),
        (
            "POST",
            "/v1/edit-sessions/edit_0/commands",
            Some(json!({"command": "ls"})),
        ),
        ("POST", "/v1/edit-sessions/edit_0/end", None),
        ("DELETE", "/v1/gg-configs/gg_0", None),
        (
            "POST",
            "/v1/coverage-groups",
            Some(json!({"name": "g", "kind": "case"})),
        ),
        ("GET", "/v1/coverage-groups", None),
        ("GET", "/v1/coverage-groups/grp_0", None),
        (
            "PUT",
            "/v1/coverage-groups/grp_0",
            Some(json!({"name": "g", "kind": "case"})),
        ),
        ("DELETE", "/v1/coverage-groups/grp_0", None),
        (
            "POST",
            "/v1/coverage-plans",
            Some(json!({"name": "p", "runsPerCell": 1})),
        ),
        ("GET", "/v1/coverage-plans", None),
        ("GET", "/v1/coverage-plans/plan_0", None),
        (
            "PUT",
            "/v1/coverage-plans/plan_0",
            Some(json!({"name": "p", "runsPerCell": 1})),
        ),
        ("DELETE", "/v1/coverage-plans/plan_0", None),
        ("GET", "/v1/coverage-plans/plan_0/coverage", None),
        ("POST", "/v1/coverage-plans/plan_0/open", None),
        ("POST", "/v1/coverage-plans/plan_0/topup", None),
        ("GET", "/v1/coverage-plans/plan_0/schedule", None),
        ("GET", "/v1/coverage-plans/plan_0/queue", None),
        ("POST", "/v1/coverage-plans/plan_0/pause", None),
        ("POST", "/v1/coverage-plans/plan_0/resume", None),
        ("POST", "/v1/coverage-plans/plan_0/halt", None),
        (
            "POST",
            "/v1/coverage-plans/plan_0/halt-all",
            Some(json!({"confirm": true})),
        ),
        ("GET", "/v1/coverage-settings", None),
        (
            "PUT",
            "/v1/coverage-settings",
            Some(json!({"bufferTarget": {"kind": "unbounded"}})),
        ),
    ]
}

/// What the database holds, to show a refused request wrote nothing.
async fn snapshot(b: &Belay) -> Value {
    json!({
        "cases": b.get("/v1/test-cases").await,
        "harnesses": b.get("/v1/harnesses").await,
        "models": b.get("/v1/models").await,
        "gg": b.get("/v1/gg-configs").await,
        "jobs": b.get("/v1/jobs").await,
        "runs": b.get("/v1/runs").await,
        "events": b.get("/v1/events?limit=1000").await,
    })
}

async fn seed(b: &Belay) {
    b.catalogue().await;
    b.harness("h", 1, "exit 1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_route_but_health_refuses_a_missing_or_wrong_token_and_writes_nothing() {
    let b = Belay::start().await;
    seed(&b).await;
    let before = snapshot(&b).await;
    for (method, path, body) in routes() {
        let body = body.map(|v| v.to_string());
        for token in [None, Some("bly_not-a-real-token"), Some("garbage")] {
            let (status, v) = b.request(method, path, token, body.as_deref()).await;
            assert_eq!(status, 401, "{method} {path} with {token:?}: {v}");
            assert_eq!(v["error"]["code"], "unauthorized", "{method} {path}");
        }
    }
    assert_eq!(snapshot(&b).await, before);
    for path in ["/v1/healthz", "/v1/readyz"] {
        let (status, v) = b.request("GET", path, None, None).await;
        assert_eq!(status, 200, "{path}: {v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_openapi_document_lists_every_route() {
    let b = Belay::start().await;
    let doc = b.get("/v1/openapi.json").await;
    let paths = doc["paths"].as_object().unwrap();
    for (method, path, _) in routes() {
        let templated = path
            .replace("/c/versions/1.0.0", "/{slug}/versions/{version}")
            .replace("/test-cases/c", "/test-cases/{slug}")
            .replace("/harnesses/h", "/harnesses/{name}")
            .replace("/models/m", "/models/{id}")
            .replace("gg_0", "{id}")
            .replace("job_0", "{id}")
            .replace("run_0", "{id}")
            .replace("proj_0", "{id}")
            .replace("rt_0", "{token_id}")
            .replace("chg_0", "{id}")
            .replace("task_0", "{id}")
            .replace("cs_0", "{id}")
            .replace("edit_0", "{id}")
            .replace("grp_0", "{id}")
            .replace("plan_0", "{id}");
        let op = &paths
            .get(&templated)
            .unwrap_or_else(|| panic!("{templated} missing from the document"))[method.to_lowercase()];
        assert!(op.is_object(), "{method} {templated} missing");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_input_is_refused_naming_the_field_and_writes_nothing() {
    let b = Belay::start().await;
    seed(&b).await;
    let before = snapshot(&b).await;
    let cases: Vec<(&str, &str, &str, u16, &str)> = vec![
        // malformed JSON
        ("POST", "/v1/jobs", "{\"case\":", 400, "body"),
        ("POST", "/v1/test-cases", "not json", 400, "body"),
        ("POST", "/v1/harnesses", "", 400, "body"),
        // missing fields
        (
            "POST",
            "/v1/jobs",
            r#"{"case":{"slug":"c","variant":"default"},"combination":{"kind":"harness","harness":"h","model":"m"}}"#,
            422,
            "version",
        ),
        (
            "POST",
            "/v1/jobs",
            r#"{"case":{"slug":"c","version":"1.0.0","variant":"default"}}"#,
            422,
            "combination",
        ),
        (
            "POST",
            "/v1/harnesses",
            r#"{"name":"x","adapter":{"kind":"script","script":"true"}}"#,
            422,
            "maxParallelism",
        ),
        ("POST", "/v1/gg-configs", r#"{"launchSlots":["root"]}"#, 422, "name"),
        // unknown enum values
        (
            "POST",
            "/v1/test-cases",
            r#"{"slug":"x","version":"1.0.0","testType":"speedrun","variants":["v"]}"#,
            422,
            "testType",
        ),
        (
            "POST",
            "/v1/jobs",
            r#"{"case":{"slug":"c","version":"1.0.0","variant":"default"},"combination":{"kind":"robot","harness":"h","model":"m"}}"#,
            422,
            "combination",
        ),
        (
            "POST",
            "/v1/harnesses",
            r#"{"name":"x","maxParallelism":1,"adapter":{"kind":"docker"}}"#,
            422,
            "adapter",
        ),
        ("POST", "/v1/jobs/cancel", r#"{"scope":"everything"}"#, 422, "scope"),
        // wrong types and broken rules
        (
            "POST",
            "/v1/harnesses",
            r#"{"name":"x","maxParallelism":"two","adapter":{"kind":"script","script":"true"}}"#,
            422,
            "maxParallelism",
        ),
        (
            "POST",
            "/v1/harnesses",
            r#"{"name":"x","maxParallelism":0,"adapter":{"kind":"script","script":"true"}}"#,
            422,
            "maxParallelism",
        ),
        (
            "POST",
            "/v1/harnesses",
            r#"{"name":"Bad Name","maxParallelism":1,"adapter":{"kind":"script","script":"true"}}"#,
            422,
            "name",
        ),
        (
            "POST",
            "/v1/test-cases",
            r#"{"slug":"x","version":"1.0","testType":"standard","variants":["v"]}"#,
            422,
            "version",
        ),
        (
            "POST",
            "/v1/test-cases",
            r#"{"slug":"x","version":"1.0.0","testType":"standard","variants":[]}"#,
            422,
            "variants",
        ),
        (
            "POST",
            "/v1/models",
            r#"{"id":"x","contextWindow":-5}"#,
            422,
            "contextWindow",
        ),
        (
            "POST",
            "/v1/models",
            r#"{"id":"x","listPrice":{"inputPerMtokUsd":1}}"#,
            422,
            "outputPerMtokUsd",
        ),
        (
            "POST",
            "/v1/jobs",
            r#"{"case":{"slug":"c","version":"1.0.0","variant":"default"},"combination":{"kind":"harness","harness":"h","model":"m"},"extra":1}"#,
            422,
            "extra",
        ),
        (
            "PATCH",
            "/v1/harnesses/h",
            r#"{"maxParallelism":-1}"#,
            422,
            "maxParallelism",
        ),
        ("GET", "/v1/jobs?status=sleeping", "", 422, "status"),
        ("GET", "/v1/jobs?limit=lots", "", 422, "limit"),
        // launches the catalogue cannot run: well formed, in conflict with what it holds
        (
            "POST",
            "/v1/jobs",
            r#"{"case":{"slug":"c","version":"1.0.0","variant":"default"},"combination":{"kind":"harness","harness":"h","model":"unpriced"}}"#,
            409,
            "combination.model",
        ),
        (
            "POST",
            "/v1/jobs",
            r#"{"case":{"slug":"c","version":"1.0.0","variant":"default"},"combination":{"kind":"harness","harness":"nope","model":"m"}}"#,
            409,
            "combination.harness",
        ),
        (
            "POST",
            "/v1/jobs",
            r#"{"case":{"slug":"c","version":"1.0.0","variant":"default"},"combination":{"kind":"harness","harness":"h","model":"m","provider":"bedrock"}}"#,
            409,
            "combination.provider",
        ),
    ];
    for (method, path, body, want, field) in cases {
        let (status, v) = b
            .request(method, path, Some(&b.token), (!body.is_empty()).then_some(body))
            .await;
        assert_eq!(status, want, "{method} {path} {body}: {v}");
        let msg = v["error"]["message"].as_str().unwrap_or_default();
        assert!(
            msg.contains(field),
            "{method} {path} {body}: message {msg:?} does not name {field}"
        );
        assert!(!v["error"]["code"].as_str().unwrap_or_default().is_empty());
    }
    assert_eq!(snapshot(&b).await, before, "refused requests wrote nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_number_where_a_word_belongs_or_a_stray_field_is_an_invalid_field_naming_it_and_writes_nothing() {
    let b = Belay::start().await;
    seed(&b).await;
    let (s, project) = b.post("/v1/projects", json!({"name": "p"})).await;
    assert_eq!(s, 201, "{project}");
    let project = project["id"].as_str().unwrap().to_string();
    let (s, change) = b
        .post(&format!("/v1/projects/{project}/changes"), json!({"goal": "g"}))
        .await;
    assert_eq!(s, 201, "{change}");
    let change = change["id"].as_str().unwrap().to_string();
    let (s, task) = b
        .post(
            &format!("/v1/changes/{change}/tasks"),
            json!({"key": "t", "kind": "implement", "title": "t"}),
        )
        .await;
    assert_eq!(s, 201, "{task}");
    let (s, run) = b
        .post(&format!("/v1/tasks/{}/runs", task["id"].as_str().unwrap()), json!({}))
        .await;
    assert_eq!(s, 201, "{run}");
    let run = run["id"].as_str().unwrap().to_string();
    let written = || async {
        json!({
            "db": snapshot(&b).await,
            "tasks": b.get(&format!("/v1/changes/{change}/tasks")).await,
            "workspace": b.get(&format!("/v1/task-runs/{run}/workspace")).await,
        })
    };
    let before = written().await;
    let tokens = format!("/v1/projects/{project}/repo-tokens");
    let tasks = format!("/v1/changes/{change}/tasks");
    let tools = format!("/v1/task-runs/{run}/workspace/tools");
    let review = "/v1/runs/run_0/review".to_string();
    let cases: Vec<(&str, String, &str, &str)> = vec![
        ("POST", "/v1/jobs/cancel".into(), r#"{"scope":7}"#, "scope"),
        ("POST", tokens.clone(), r#"{"scope":7}"#, "scope"),
        (
            "POST",
            "/v1/test-cases".into(),
            r#"{"slug":"x","version":"1.0.0","testType":7,"variants":["v"]}"#,
            "testType",
        ),
        ("POST", tasks.clone(), r#"{"key":"u","kind":7,"title":"u"}"#, "kind"),
        (
            "POST",
            review.clone(),
            r#"{"ratings":{"gameplay":3}}"#,
            "ratings.gameplay",
        ),
        ("POST", review.clone(), r#"{"category":4}"#, "category"),
        (
            "POST",
            "/v1/jobs".into(),
            r#"{"case":{"slug":"c","version":"1.0.0","variant":"default"},"combination":{"kind":7,"harness":"h","model":"m"}}"#,
            "combination.kind",
        ),
        (
            "POST",
            "/v1/harnesses".into(),
            r#"{"name":"x","maxParallelism":1,"adapter":{"kind":0,"argv":["true"]}}"#,
            "adapter.kind",
        ),
        ("POST", tools.clone(), r#"{"tool":"read_file"}"#, "path"),
        (
            "POST",
            tools.clone(),
            r#"{"tool":"read_file","path":"a.txt","mode":"r"}"#,
            "mode",
        ),
        ("POST", tools.clone(), r#"{"tool":7,"path":"a.txt"}"#, "tool"),
        ("POST", "/v1/models".into(), r#"[null, null]"#, "body"),
        (
            "PATCH",
            "/v1/harnesses/h".into(),
            r#"{"maxParallelism":2,"colour":"red"}"#,
            "colour",
        ),
    ];
    for (method, path, body, field) in cases {
        let (status, v) = b.request(method, &path, Some(&b.token), Some(body)).await;
        assert_eq!(
            (status, v["error"]["code"].as_str()),
            (422, Some("invalid_field")),
            "{method} {path} {body}: {v}"
        );
        let message = v["error"]["message"].as_str().unwrap();
        assert_eq!(
            message.split_once(": ").map(|(f, _)| f),
            Some(field),
            "{method} {path} {body}: {message}"
        );
    }
    assert_eq!(written().await, before, "refused requests wrote nothing");
    assert_eq!(
        b.get(&format!("/v1/changes/{change}/tasks"))
            .await
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_game_jam_run_shows_its_worst_category_and_no_rating() {
    let b = Belay::start().await;
    let (s, v) = b
        .post(
            "/v1/test-cases",
            json!({"slug": "jam", "version": "1.0.0", "testType": "game_jam", "variants": ["default"]}),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    b.catalogue().await;
    b.harness(
        "ok",
        2,
        r#"printf '{"status":"completed","loaded":true}' > "$BELAY_MANIFEST""#,
    )
    .await;
    let (s, job) = b
        .post(
            "/v1/jobs",
            json!({"case": {"slug": "jam", "version": "1.0.0", "variant": "default"}, "combination": {"kind": "harness", "harness": "ok", "model": "m"}}),
        )
        .await;
    assert_eq!(s, 201, "{job}");
    let id = job["id"].as_str().unwrap();
    b.wait_status(id, &["completed"], std::time::Duration::from_secs(60))
        .await;
    let run = b.get(&format!("/v1/runs?jobId={id}")).await[0].clone();
    let run_id = run["id"].as_str().unwrap();
    assert_eq!(
        (run["rating"].clone(), run["category"].clone()),
        (Value::Null, Value::Null)
    );
    let path = format!("/v1/runs/{run_id}/review");
    let (s, v) = b.post(&path, json!({"category": "gold"})).await;
    assert_eq!(s, 200, "{v}");
    let other = create_account(&b.database_url, "second");
    let (s, v) = b
        .request("POST", &path, Some(&other), Some(r#"{"category":"brick"}"#))
        .await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = b.post(&path, json!({"ratings": {"gameplay": "great"}})).await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (409, Some("review_kind_mismatch")),
        "a game-jam run takes no ratings: {v}"
    );
    for shown in [
        b.get(&format!("/v1/runs/{run_id}")).await,
        b.get(&format!("/v1/runs?jobId={id}")).await[0].clone(),
    ] {
        assert_eq!(
            (
                shown["category"].clone(),
                shown["rating"].clone(),
                shown["reviewCount"].clone()
            ),
            (json!("brick"), Value::Null, json!(2)),
            "{shown}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gg_configuration_is_its_owners_alone_and_a_launch_naming_anothers_is_refused() {
    let b = Belay::start().await;
    seed(&b).await;
    b.harness("gg", 2, "exit 1").await;
    let (s, mine) = b
        .post(
            "/v1/gg-configs",
            json!({"name": "study", "launchSlots": ["root", "reviewer"], "capabilities": {"tools": ["bash"]}}),
        )
        .await;
    assert_eq!(s, 201, "{mine}");
    let id = mine["id"].as_str().unwrap();
    let other = create_account(&b.database_url, "mallory");
    for (method, path, body) in [
        ("GET", format!("/v1/gg-configs/{id}"), None),
        ("PATCH", format!("/v1/gg-configs/{id}"), Some(r#"{"name":"stolen"}"#)),
    ] {
        let (s, v) = b.request(method, &path, Some(&other), body).await;
        assert_eq!(s, 404, "{method} {path}: {v}");
    }
    let (_, list) = b.request("GET", "/v1/gg-configs", Some(&other), None).await;
    assert_eq!(list, json!([]));
    let launch = json!({"case": {"slug": "c", "version": "1.0.0", "variant": "default"},
        "combination": {"kind": "gg", "ggConfigId": id, "bindings": {"root": "m", "reviewer": "m"}}})
    .to_string();
    let (s, v) = b.request("POST", "/v1/jobs", Some(&other), Some(&launch)).await;
    assert_eq!(s, 403, "{v}");
    assert_eq!(v["error"]["code"], "gg_config_not_owned");
    assert_eq!(b.get("/v1/jobs").await, json!([]), "nothing was enqueued");
    assert_eq!(
        b.get(&format!("/v1/gg-configs/{id}")).await["name"],
        "study",
        "the rename did not happen"
    );

    // The owner's launch: an unbound slot and a model without a context window are refused.
    let unbound = json!({"case": {"slug": "c", "version": "1.0.0", "variant": "default"},
        "combination": {"kind": "gg", "ggConfigId": id, "bindings": {"root": "m"}}});
    let (s, v) = b.post("/v1/jobs", unbound).await;
    assert_eq!((s, v["error"]["code"].clone()), (409, json!("slot_unbound")), "{v}");
    let (s, _) = b
        .post(
            "/v1/models",
            json!({"id": "windowless", "listPrice": {"inputPerMtokUsd": 1.0, "outputPerMtokUsd": 1.0}}),
        )
        .await;
    assert_eq!(s, 201);
    let windowless = json!({"case": {"slug": "c", "version": "1.0.0", "variant": "default"},
        "combination": {"kind": "gg", "ggConfigId": id, "bindings": {"root": "m", "reviewer": "windowless"}}});
    let (s, v) = b.post("/v1/jobs", windowless).await;
    assert_eq!(
        (s, v["error"]["code"].clone()),
        (409, json!("model_without_context_window")),
        "{v}"
    );
    let ok = json!({"case": {"slug": "c", "version": "1.0.0", "variant": "default", "engine": "godot"},
        "combination": {"kind": "gg", "ggConfigId": id, "bindings": {"root": "m", "reviewer": "m"}}});
    let (s, job) = b.post("/v1/jobs", ok).await;
    assert_eq!(s, 201, "{job}");
    assert_eq!(job["ggConfigName"], "study");
    assert_eq!(
        job["cellKey"],
        format!("c@1.0.0/default/godot × gg:{id}[reviewer=m,root=m]")
    );
    // The pin's engine is not declared by the case version: accepted here, reported by the run.
    let failed = b
        .wait_status(
            job["id"].as_str().unwrap(),
            &["failed"],
            std::time::Duration::from_secs(60),
        )
        .await;
    assert!(failed["error"].as_str().unwrap().contains("engine godot"), "{failed}");
    assert_eq!(
        b.get("/v1/jobs").await.as_array().unwrap().len(),
        1,
        "a pin problem is not retried"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reviews_are_one_per_account_and_the_displayed_rating_is_the_worst_domain() {
    let b = Belay::start().await;
    b.catalogue().await;
    b.harness(
        "ok",
        2,
        r#"printf '{"status":"completed","loaded":true}' > "$BELAY_MANIFEST""#,
    )
    .await;
    let id = b.launch("ok").await["id"].as_str().unwrap().to_string();
    b.wait_status(&id, &["completed"], std::time::Duration::from_secs(60))
        .await;
    let run = b.get(&format!("/v1/runs?jobId={id}")).await[0].clone();
    let run_id = run["id"].as_str().unwrap();
    assert_eq!(run["loaded"], true);
    let path = format!("/v1/runs/{run_id}/review");
    let (s, v) = b
        .post(&path, json!({"ratings": {"gameplay": "great", "visuals": "passable"}}))
        .await;
    assert_eq!(s, 200, "{v}");
    let other = create_account(&b.database_url, "second");
    let (s, _) = b
        .request(
            "POST",
            &path,
            Some(&other),
            Some(r#"{"ratings":{"gameplay":"scuffed"}}"#),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(b.get(&format!("/v1/runs/{run_id}")).await["rating"], "scuffed");
    let (s, _) = b
        .request(
            "POST",
            &path,
            Some(&other),
            Some(r#"{"ratings":{"gameplay":"flawless"}}"#),
        )
        .await;
    assert_eq!(s, 200);
    let shown = b.get(&format!("/v1/runs/{run_id}")).await;
    assert_eq!(
        (shown["rating"].clone(), shown["reviewCount"].clone()),
        (json!("passable"), json!(2))
    );
    let (s, v) = b.post(&path, json!({"category": "gold"})).await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (409, Some("review_kind_mismatch")),
        "a standard run takes no category: {v}"
    );
    let (s, v) = b.post(&path, json!({"ratings": {"gameplay": "amazing"}})).await;
    assert_eq!(s, 422, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("ratings.gameplay"),
        "{v}"
    );
    assert_eq!(
        b.get(&format!("/v1/runs/{run_id}/reviews"))
            .await
            .as_array()
            .unwrap()
            .len(),
        2
    );
}
