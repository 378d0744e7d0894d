//! Account boundaries, walked through a real `belay api`: every route tried by a second account
//! (an operator of its own) and by a member against an operator's resources, with the status
//! each must answer, and nothing changed afterwards. Owned things (projects and everything in
//! them, repository tokens, gg configurations, events of those) are not found for anyone else;
//! cabinet-wide actions (catalogue writes, bulk cancels) are an operator's; jobs, runs and the
//! catalogue stay readable by every account. See `belay_domain::access`.
//!
//! The walk covers every operation of `/v1/openapi.json`: an operation is either walked (a row of
//! the table) or named in [`GLOBAL`] with why it needs no walk, and the test fails on any other,
//! so a route added later cannot be missed.

use crate::common::{Belay, create_account, create_operator, ready_project};
use belay_domain::ids::{AccountId, ChangeId};
use serde_json::{Value, json};
use std::time::Duration;

/// A route walked: method, path, body, the second account's answer (`None`: not walked) and the
/// member's.
type Walk = (&'static str, String, Option<Value>, Option<u16>, u16);

/// Operations that need no walk, and why: they act on nothing another account owns.
const GLOBAL: &[(&str, &str, &str)] = &[
    ("GET", "/v1/healthz", "liveness: the same answer for everyone"),
    ("GET", "/v1/readyz", "readiness: the same answer for everyone"),
    (
        "GET",
        "/v1/openapi.json",
        "the API's own description: the same for everyone",
    ),
    ("GET", "/v1/account", "the caller's own account"),
    (
        "GET",
        "/v1/account/tokens",
        "the caller's own tokens (another account's are an operator's to list: accounts.rs)",
    ),
    ("POST", "/v1/account/tokens", "makes a token of the caller's own"),
    (
        "GET",
        "/v1/accounts",
        "every account to an operator, itself to a member: accounts.rs",
    ),
    (
        "GET",
        "/v1/events",
        "each event only to whom may see its entity: checked below",
    ),
    ("GET", "/v1/projects", "lists the caller's own: checked below"),
    ("POST", "/v1/projects", "makes a project of the caller's own"),
    ("GET", "/v1/gg-configs", "lists the caller's own: checked below"),
    ("POST", "/v1/gg-configs", "makes a configuration of the caller's own"),
    ("GET", "/v1/coverage-groups", "lists the caller's own: checked below"),
    ("POST", "/v1/coverage-groups", "makes a group of the caller's own"),
    ("GET", "/v1/coverage-plans", "lists the caller's own: checked below"),
    ("POST", "/v1/coverage-plans", "makes a plan of the caller's own"),
    ("GET", "/v1/ladders", "lists the caller's own: checked below"),
    ("POST", "/v1/ladders", "makes a ladder of the caller's own"),
    ("GET", "/v1/coverage-settings", "the caller's own buffer target"),
    ("PUT", "/v1/coverage-settings", "the caller's own buffer target"),
    (
        "GET",
        "/v1/approvals",
        "approvals of the caller's own projects: checked below",
    ),
    ("POST", "/v1/jobs", "every account launches jobs of its own"),
    (
        "GET",
        "/v1/runs/{id}",
        "runs are every account's to read (reviewers share runs)",
    ),
    (
        "GET",
        "/v1/runs/{id}/artifact",
        "a run's artifacts are as readable as the run",
    ),
    (
        "POST",
        "/v1/runs/{id}/artifact-url",
        "a run's artifacts are as readable as the run; the URL grants that run's only",
    ),
    (
        "GET",
        "/v1/runs/{id}/reviews",
        "runs and their reviews are every account's to read",
    ),
    (
        "POST",
        "/v1/runs/{id}/review",
        "every account reviews any run; the review is its own",
    ),
    (
        "GET",
        "/v1/runs/{id}/review-domains",
        "every account reviews any run; the domains offered are the version's or its own",
    ),
];

/// The operation template of `/v1/openapi.json` that a concrete `path` is, the most specific one
/// when several fit (`/v1/jobs/cancel` before `/v1/jobs/{id}`).
fn template_of<'a>(path: &str, templates: &'a [String]) -> Option<&'a String> {
    let path = path.split('?').next().unwrap_or(path);
    let segments: Vec<&str> = path.split('/').collect();
    templates
        .iter()
        .filter(|t| {
            let ts: Vec<&str> = t.split('/').collect();
            ts.len() == segments.len() && ts.iter().zip(&segments).all(|(t, s)| t.starts_with('{') || t == s)
        })
        .max_by_key(|t| t.split('/').filter(|s| !s.starts_with('{')).count())
}

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap_or_else(|| panic!("no id in {v}")).to_string()
}

/// What the owner sees of everything the walk could have changed.
async fn owner_view(b: &Belay, paths: &[String]) -> Vec<(String, u16, Value)> {
    let mut out = Vec::new();
    for path in paths {
        let (s, mut v) = b.request("GET", path, Some(&b.token), None).await;
        // A job moves on by itself (it runs); its cancellation is what the walk must not cause.
        if path.starts_with("/v1/jobs/") {
            v = json!({"canceled": v["status"] == "canceled"});
        }
        out.push((path.clone(), s, v));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_route_walked_by_another_account_and_by_a_member_changes_nothing_of_an_operators() {
    let b = Belay::start().await;
    // The owner (`tester`, an operator) and its resources.
    b.catalogue().await;
    b.harness("h", 1, "sleep 30").await;
    let (st, v) = b.post("/v1/providers", json!({"name": "p", "maxParallelism": 3})).await;
    assert_eq!(st, 201, "{v}");
    let job = id(&b.launch("h").await);
    let project = ready_project(&b, "mine").await;
    let (s, change) = b
        .post(
            &format!("/v1/projects/{project}/changes"),
            json!({"goal": "Say hello", "acceptanceCriteria": ["it says hello"], "invariants": []}),
        )
        .await;
    assert_eq!(s, 201, "{change}");
    let change = id(&change);
    let (s, task) = b
        .post(
            &format!("/v1/changes/{change}/tasks"),
            json!({"key": "a", "kind": "implement", "title": "task a", "semanticResources": [], "dependencies": []}),
        )
        .await;
    assert_eq!(s, 201, "{task}");
    let task = id(&task);
    let (s, run) = b.post(&format!("/v1/tasks/{task}/runs"), json!({})).await;
    assert_eq!(s, 201, "{run}");
    let run = id(&run);
    // A second task whose run has a ChangeSet.
    let (s, other_task) = b
        .post(
            &format!("/v1/changes/{change}/tasks"),
            json!({"key": "z", "kind": "implement", "title": "task z", "semanticResources": [], "dependencies": []}),
        )
        .await;
    assert_eq!(s, 201, "{other_task}");
    let (s, other_run) = b.post(&format!("/v1/tasks/{}/runs", id(&other_task)), json!({})).await;
    assert_eq!(s, 201, "{other_run}");
    let (s, change_set) = b
        .post(
            &format!("/v1/task-runs/{}/change-set", id(&other_run)),
            json!({"commit": "1".repeat(40)}),
        )
        .await;
    assert_eq!(s, 201, "{change_set}");
    let change_set = id(&change_set);
    let (s, session) = b
        .post(&format!("/v1/projects/{project}/edit-sessions"), json!({}))
        .await;
    assert_eq!(s, 201, "{session}");
    let session = id(&session);
    // The session's fork is made in the background: wait for it, so the snapshot below is still.
    crate::common::wait_for("the edit session's fork", Duration::from_secs(60), || async {
        b.get(&format!("/v1/edit-sessions/{session}")).await["startCommit"].is_string()
    })
    .await;
    let (s, token) = b
        .post(&format!("/v1/projects/{project}/repo-tokens"), json!({"scope": "read"}))
        .await;
    assert_eq!(s, 201, "{token}");
    let token_id = token["tokenId"].as_str().unwrap().to_string();
    let (s, gg) = b
        .post(
            "/v1/gg-configs",
            json!({"name": "study", "launchSlots": ["root"], "capabilities": {"tools": ["bash"]}}),
        )
        .await;
    assert_eq!(s, 201, "{gg}");
    let gg = id(&gg);
    // Coverage: a group, a plan and a ladder.
    let case = json!({"slug": "c", "version": "1.0.0", "variant": "default"});
    let combo = json!({"kind": "harness", "harness": "h", "model": "m"});
    let (s, group) = b
        .post(
            "/v1/coverage-groups",
            json!({"name": "cases", "kind": "case", "members": [case.clone()]}),
        )
        .await;
    assert_eq!(s, 201, "{group}");
    let group = id(&group);
    let plan_body = json!({"name": "p", "cases": [case.clone()], "combinations": [combo.clone()], "runsPerCell": 1,
                           "autoTopUp": false});
    let (s, plan) = b.post("/v1/coverage-plans", plan_body.clone()).await;
    assert_eq!(s, 201, "{plan}");
    let plan = id(&plan);
    let ladder_body = json!({"name": "l", "rungs": [case.clone()], "combinations": [combo.clone()]});
    let (s, ladder) = b.post("/v1/ladders", ladder_body.clone()).await;
    assert_eq!(s, 201, "{ladder}");
    let rung = ladder["rungs"][0]["id"].as_str().unwrap().to_owned();
    let ladder = id(&ladder);
    // A Candidate of the Change, made in the store (no workflow moves it while the walk runs).
    let (_, owner) = b.request("GET", "/v1/account", Some(&b.token), None).await;
    let candidate = b
        .store()
        .await
        .start_verification(
            &AccountId::from(owner["id"].as_str().unwrap()),
            &ChangeId::from(change.as_str()),
        )
        .await
        .unwrap()
        .id
        .to_string();

    let owner_id = owner["id"].as_str().unwrap().to_owned();
    let (_, tokens) = b.request("GET", "/v1/account/tokens", Some(&b.token), None).await;
    let owner_token = tokens[0]["id"].as_str().unwrap().to_owned();
    let second = create_operator(&b.database_url, "second");
    let member = create_account(&b.database_url, "member");
    let (_, me) = b.request("GET", "/v1/account", Some(&member), None).await;
    assert_eq!(me["role"], "member", "{me}");
    let (_, me) = b.request("GET", "/v1/account", Some(&b.token), None).await;
    assert_eq!(me["role"], "operator", "{me}");

    let watched: Vec<String> = vec![
        format!("/v1/projects/{project}"),
        format!("/v1/projects/{project}/changes"),
        format!("/v1/changes/{change}"),
        format!("/v1/changes/{change}/tasks"),
        format!("/v1/task-runs/{run}/workspace"),
        format!("/v1/edit-sessions/{session}"),
        format!("/v1/gg-configs/{gg}"),
        format!("/v1/change-sets/{change_set}"),
        format!("/v1/coverage-groups/{group}"),
        format!("/v1/coverage-plans/{plan}"),
        format!("/v1/coverage-plans/{plan}/queue"),
        format!("/v1/ladders/{ladder}"),
        format!("/v1/ladders/{ladder}/progress"),
        format!("/v1/candidates/{candidate}"),
        format!("/v1/changes/{change}/candidates"),
        format!("/v1/changes/{change}/receipts"),
        format!("/v1/projects/{project}/policy"),
        "/v1/approvals".into(),
        "/v1/test-cases".into(),
        "/v1/test-cases/c/versions/1.0.0".into(),
        "/v1/harnesses/h".into(),
        "/v1/models/m".into(),
        "/v1/providers/p".into(),
        format!("/v1/jobs/{job}"),
        format!("/v1/jobs/{job}/attempts"),
    ];
    let before = owner_view(&b, &watched).await;
    let (_, owner_events) = b.request("GET", "/v1/events?limit=1000", Some(&b.token), None).await;
    let owner_events = owner_events.as_array().unwrap().clone();

    let commit = "0".repeat(40);
    // (method, path, body, the second account's answer, the member's answer); `None`: the action
    // is the second account's to take (an operator's cabinet-wide action), so it is not walked.
    let table: Vec<Walk> = vec![
        ("GET", format!("/v1/projects/{project}"), None, Some(404), 404),
        ("DELETE", format!("/v1/projects/{project}"), None, Some(404), 404),
        ("GET", format!("/v1/projects/{project}/changes"), None, Some(404), 404),
        (
            "POST",
            format!("/v1/projects/{project}/changes"),
            Some(json!({"goal": "g", "acceptanceCriteria": ["a"], "invariants": []})),
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/projects/{project}/repo-tokens"),
            Some(json!({"scope": "read"})),
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/repo-tokens/{token_id}/revoke"),
            None,
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/projects/{project}/edit-sessions"),
            Some(json!({})),
            Some(404),
            404,
        ),
        ("GET", format!("/v1/changes/{change}"), None, Some(404), 404),
        ("GET", format!("/v1/changes/{change}/tasks"), None, Some(404), 404),
        (
            "POST",
            format!("/v1/changes/{change}/tasks"),
            Some(json!({"key": "b", "kind": "implement", "title": "t", "semanticResources": [], "dependencies": []})),
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/tasks/{task}/runs"),
            Some(json!({})),
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/task-runs/{run}/change-set"),
            Some(json!({"commit": commit})),
            Some(404),
            404,
        ),
        ("GET", format!("/v1/change-sets/{change_set}"), None, Some(404), 404),
        ("GET", format!("/v1/task-runs/{run}/workspace"), None, Some(404), 404),
        (
            "POST",
            format!("/v1/task-runs/{run}/workspace/tools"),
            Some(json!({"tool": "read_file", "path": ".gitignore"})),
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/task-runs/{run}/workspace/publish"),
            Some(json!({"message": "m"})),
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/task-runs/{run}/workspace/close"),
            Some(json!({})),
            Some(404),
            404,
        ),
        ("GET", format!("/v1/edit-sessions/{session}"), None, Some(404), 404),
        (
            "POST",
            format!("/v1/edit-sessions/{session}/commands"),
            Some(json!({"command": "true"})),
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/edit-sessions/{session}/end"),
            Some(json!({})),
            Some(404),
            404,
        ),
        ("GET", format!("/v1/gg-configs/{gg}"), None, Some(404), 404),
        (
            "PATCH",
            format!("/v1/gg-configs/{gg}"),
            Some(json!({"name": "stolen"})),
            Some(404),
            404,
        ),
        ("DELETE", format!("/v1/gg-configs/{gg}"), None, Some(404), 404),
        // Verification, selection and promotion: the Change's and the Candidate's.
        ("GET", format!("/v1/projects/{project}/policy"), None, Some(404), 404),
        (
            "PUT",
            format!("/v1/projects/{project}/policy"),
            Some(json!({"liveApp": false})),
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/changes/{change}/verification"),
            Some(json!({})),
            Some(404),
            404,
        ),
        ("GET", format!("/v1/changes/{change}/candidates"), None, Some(404), 404),
        (
            "POST",
            format!("/v1/changes/{change}/candidates"),
            Some(json!({"changeSetIds": [change_set]})),
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/changes/{change}/conflicts"),
            Some(json!({"status": "dismissed", "sides": [
                {"taskId": task, "changeSetIds": [change_set]}, {"taskId": id(&other_task), "changeSetIds": [change_set]}]})),
            Some(404),
            404,
        ),
        ("GET", format!("/v1/changes/{change}/receipts"), None, Some(404), 404),
        ("GET", format!("/v1/candidates/{candidate}"), None, Some(404), 404),
        (
            "POST",
            format!("/v1/candidates/{candidate}/approvals"),
            Some(json!({"decision": "grant", "tree": commit})),
            Some(404),
            404,
        ),
        // The Candidate answers before the Evidence is looked for: another account's Candidate is
        // not found, whatever its Evidence.
        (
            "GET",
            format!("/v1/candidates/{candidate}/evidence/ev_0000/output"),
            None,
            Some(404),
            404,
        ),
        (
            "GET",
            format!("/v1/candidates/{candidate}/evidence/ev_0000/screenshots"),
            None,
            Some(404),
            404,
        ),
        (
            "GET",
            format!("/v1/candidates/{candidate}/evidence/ev_0000/screenshots/0"),
            None,
            Some(404),
            404,
        ),
        (
            "GET",
            format!("/v1/candidates/{candidate}/promotability"),
            None,
            Some(404),
            404,
        ),
        // The patch is the Candidate's: another account reads no file of it.
        ("GET", format!("/v1/candidates/{candidate}/diff"), None, Some(404), 404),
        (
            "POST",
            format!("/v1/candidates/{candidate}/promote"),
            None,
            Some(404),
            404,
        ),
        // Coverage groups, plans and their halts.
        ("GET", format!("/v1/coverage-groups/{group}"), None, Some(404), 404),
        (
            "PUT",
            format!("/v1/coverage-groups/{group}"),
            Some(json!({"name": "stolen", "kind": "case", "members": [case.clone()]})),
            Some(404),
            404,
        ),
        ("DELETE", format!("/v1/coverage-groups/{group}"), None, Some(404), 404),
        ("GET", format!("/v1/coverage-plans/{plan}"), None, Some(404), 404),
        (
            "PUT",
            format!("/v1/coverage-plans/{plan}"),
            Some(plan_body.clone()),
            Some(404),
            404,
        ),
        ("DELETE", format!("/v1/coverage-plans/{plan}"), None, Some(404), 404),
        (
            "GET",
            format!("/v1/coverage-plans/{plan}/coverage"),
            None,
            Some(404),
            404,
        ),
        ("GET", format!("/v1/coverage-plans/{plan}/queue"), None, Some(404), 404),
        (
            "GET",
            format!("/v1/coverage-plans/{plan}/schedule"),
            None,
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/coverage-plans/{plan}/topup"),
            Some(json!({})),
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/coverage-plans/{plan}/pause"),
            Some(json!({})),
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/coverage-plans/{plan}/resume"),
            Some(json!({})),
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/coverage-plans/{plan}/open"),
            Some(json!({})),
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/coverage-plans/{plan}/halt"),
            Some(json!({})),
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/coverage-plans/{plan}/halt-all"),
            Some(json!({"confirm": true})),
            Some(404),
            404,
        ),
        // Ladders and their sub-routes.
        ("GET", format!("/v1/ladders/{ladder}"), None, Some(404), 404),
        (
            "PUT",
            format!("/v1/ladders/{ladder}"),
            Some(ladder_body.clone()),
            Some(404),
            404,
        ),
        ("DELETE", format!("/v1/ladders/{ladder}"), None, Some(404), 404),
        ("GET", format!("/v1/ladders/{ladder}/progress"), None, Some(404), 404),
        ("GET", format!("/v1/ladders/{ladder}/queue"), None, Some(404), 404),
        (
            "POST",
            format!("/v1/ladders/{ladder}/enable"),
            Some(json!({})),
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/ladders/{ladder}/disable"),
            Some(json!({})),
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/ladders/{ladder}/topup"),
            Some(json!({})),
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/ladders/{ladder}/halt"),
            Some(json!({})),
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/ladders/{ladder}/halt-all"),
            Some(json!({"confirm": true})),
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/ladders/{ladder}/climbers"),
            Some(json!({"combination": combo.clone(), "priority": 1})),
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/ladders/{ladder}/rungs/order"),
            Some(json!({"rungIds": [rung]})),
            Some(404),
            404,
        ),
        (
            "POST",
            format!("/v1/ladders/{ladder}/outcomes"),
            Some(json!({"combination": combo.clone(), "rungId": rung, "outcome": null})),
            Some(404),
            404,
        ),
        (
            "DELETE",
            format!("/v1/ladders/{ladder}/outcomes"),
            Some(json!({"combination": combo.clone(), "rungId": rung})),
            Some(404),
            404,
        ),
        // Cabinet-wide: an operator's.
        (
            "POST",
            "/v1/test-cases".into(),
            Some(json!({"slug": "c", "version": "2.0.0", "testType": "standard", "variants": ["default"]})),
            None,
            403,
        ),
        (
            "PUT",
            "/v1/test-cases/c/versions/1.0.0".into(),
            Some(json!({"variants": ["default", "other"]})),
            None,
            403,
        ),
        (
            "POST",
            "/v1/harnesses".into(),
            Some(
                json!({"name": "h2", "maxParallelism": 1, "adapter": {"kind": "script", "script": "exit 0", "timeoutSeconds": 10}}),
            ),
            None,
            403,
        ),
        (
            "PATCH",
            "/v1/harnesses/h".into(),
            Some(json!({"maxParallelism": 5})),
            None,
            403,
        ),
        ("POST", "/v1/models".into(), Some(json!({"id": "m2"})), None, 403),
        // Accounts are an operator's to make and change; a token only its owner's (or an
        // operator's) to revoke.
        (
            "POST",
            "/v1/accounts".into(),
            Some(json!({"name": "third", "role": "member"})),
            None,
            403,
        ),
        (
            "PATCH",
            format!("/v1/accounts/{owner_id}"),
            Some(json!({"role": "member"})),
            None,
            403,
        ),
        ("DELETE", format!("/v1/account/tokens/{owner_token}"), None, None, 404),
        (
            "POST",
            format!("/v1/changes/{change}/cancel"),
            Some(json!({"reason": "not mine"})),
            Some(404),
            404,
        ),
        (
            "PUT",
            "/v1/models/m".into(),
            Some(json!({"contextWindow": 1})),
            None,
            403,
        ),
        (
            "POST",
            "/v1/jobs/cancel".into(),
            Some(json!({"scope": "in_flight"})),
            None,
            403,
        ),
        ("POST", format!("/v1/jobs/{job}/cancel"), None, None, 403),
        ("POST", format!("/v1/jobs/{job}/retry"), None, None, 403),
        // Providers are the catalogue's: an operator's to make, change and delete.
        (
            "POST",
            "/v1/providers".into(),
            Some(json!({"name": "p2", "maxParallelism": 1})),
            None,
            403,
        ),
        (
            "PATCH",
            "/v1/providers/p".into(),
            Some(json!({"maxParallelism": 1})),
            None,
            403,
        ),
        ("DELETE", "/v1/providers/p".into(), None, None, 403),
        // Readable by every account.
        ("GET", format!("/v1/jobs/{job}"), None, Some(200), 200),
        ("GET", "/v1/jobs".into(), None, Some(200), 200),
        ("GET", "/v1/job-transitions".into(), None, Some(200), 200),
        ("GET", "/v1/test-cases".into(), None, Some(200), 200),
        ("GET", "/v1/test-cases/c".into(), None, Some(200), 200),
        ("GET", "/v1/test-cases/c/versions/1.0.0".into(), None, Some(200), 200),
        ("GET", "/v1/harnesses".into(), None, Some(200), 200),
        ("GET", "/v1/harnesses/h".into(), None, Some(200), 200),
        ("GET", "/v1/models".into(), None, Some(200), 200),
        ("GET", "/v1/models/m".into(), None, Some(200), 200),
        ("GET", "/v1/providers".into(), None, Some(200), 200),
        ("GET", "/v1/providers/p".into(), None, Some(200), 200),
        ("GET", format!("/v1/jobs/{job}/attempts"), None, Some(200), 200),
        ("GET", "/v1/runs".into(), None, Some(200), 200),
    ];
    // Every operation the API documents is walked or named in GLOBAL, and GLOBAL names only
    // operations there are.
    let (s, doc) = b.request("GET", "/v1/openapi.json", Some(&b.token), None).await;
    assert_eq!(s, 200, "{doc}");
    let mut operations: Vec<(String, String)> = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in ["get", "put", "post", "patch", "delete"] {
            if item.get(method).is_some() {
                operations.push((method.to_uppercase(), path.clone()));
            }
        }
    }
    let templates: Vec<String> = doc["paths"].as_object().unwrap().keys().cloned().collect();
    let walked: std::collections::BTreeSet<(String, String)> = table
        .iter()
        .map(|(method, path, ..)| {
            let t = template_of(path, &templates).unwrap_or_else(|| panic!("{method} {path} is no documented path"));
            assert!(
                operations.contains(&(method.to_string(), t.clone())),
                "{method} {path} ({t}) is no documented operation"
            );
            (method.to_string(), t.clone())
        })
        .collect();
    for (method, path, why) in GLOBAL {
        assert!(
            operations.contains(&(method.to_string(), path.to_string())),
            "GLOBAL names {method} {path} ({why}), which the API does not document"
        );
    }
    let missed: Vec<String> = operations
        .iter()
        .filter(|op| !walked.contains(*op) && !GLOBAL.iter().any(|(m, p, _)| op.0 == *m && op.1 == *p))
        .map(|(m, p)| format!("{m} {p}"))
        .collect();
    assert!(
        missed.is_empty(),
        "operations neither walked nor global by design: {missed:#?}"
    );

    for (method, path, body, second_wants, member_wants) in &table {
        let body = body.as_ref().map(Value::to_string);
        for (who, token, want) in [
            ("second", &second, *second_wants),
            ("member", &member, Some(*member_wants)),
        ] {
            let Some(want) = want else { continue };
            let (s, v) = b.request(method, path, Some(token), body.as_deref()).await;
            assert_eq!(s, want, "{who}: {method} {path} answered {v}");
            if want == 403 {
                assert!(
                    ["operator_required", "not_your_job"].contains(&v["error"]["code"].as_str().unwrap_or_default()),
                    "{who}: {method} {path}: {v}"
                );
            }
        }
    }
    // Lists hold only the caller's own.
    for token in [&second, &member] {
        for path in [
            "/v1/projects",
            "/v1/gg-configs",
            "/v1/coverage-groups",
            "/v1/coverage-plans",
            "/v1/ladders",
            "/v1/approvals",
        ] {
            let (s, v) = b.request("GET", path, Some(token), None).await;
            assert_eq!((s, v), (200, json!([])), "{path}");
        }
    }

    // Events: a member sees none of the owner's project, Change, edit-session or
    // gg-configuration events, and still sees the job's; an operator reads every account's
    // events (decision 0042), the owner's included.
    let (plan_origin, ladder_origin) = (format!("plan:{plan}"), format!("ladder:{ladder}"));
    let owned = [
        &project,
        &change,
        &session,
        &run,
        &gg,
        &change_set,
        &group,
        &plan,
        &ladder,
        &candidate,
        &plan_origin,
        &ladder_origin,
    ];
    let (s, seen) = b.request("GET", "/v1/events?limit=1000", Some(&second), None).await;
    assert_eq!(s, 200);
    assert!(
        seen.as_array()
            .unwrap()
            .iter()
            .any(|e| e["entity"] == project.as_str() && e["kind"] == "project.created"),
        "an operator reads the owner's events"
    );
    for token in [&member] {
        let (s, events) = b.request("GET", "/v1/events?limit=1000", Some(token), None).await;
        assert_eq!(s, 200);
        let events = events.as_array().unwrap();
        for e in events {
            let entity = e["entity"].as_str().unwrap();
            assert!(!owned.iter().any(|o| o.as_str() == entity), "another account saw {e}");
            let kind = e["kind"].as_str().unwrap();
            assert!(
                !["project.", "coverage", "ladder.", "candidate.", "verification."]
                    .iter()
                    .any(|p| kind.starts_with(p)),
                "{e}"
            );
            if e["kind"] == "account.created" {
                let (_, me) = b.request("GET", "/v1/account", Some(token), None).await;
                assert_eq!(e["entity"], me["id"], "another account's creation was seen: {e}");
            }
        }
        assert!(
            events.iter().any(|e| e["entity"] == job.as_str()),
            "the job's events are everyone's"
        );
        let (_, one) = b
            .request("GET", &format!("/v1/events?entity={project}"), Some(token), None)
            .await;
        assert_eq!(one, json!([]));
    }
    for kind in [
        "project.created",
        "change.created",
        "edit_session.opened",
        "gg_config.created",
        "coverage_group.created",
        "coverage_plan.created",
        "ladder.created",
        "candidate.created",
    ] {
        assert!(
            owner_events.iter().any(|e| e["kind"] == kind),
            "the owner sees its {kind}"
        );
    }

    // Nothing changed.
    assert_eq!(owner_view(&b, &watched).await, before);
    let (s, v) = b
        .request(
            "POST",
            &format!("/v1/repo-tokens/{token_id}/revoke"),
            Some(&b.token),
            None,
        )
        .await;
    assert_eq!(
        (s, v["revoked"].as_bool()),
        (200, Some(true)),
        "the token was still unrevoked: {v}"
    );
    let (_, now_events) = b.request("GET", "/v1/events?limit=1000", Some(&b.token), None).await;
    let added: Vec<&Value> = now_events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| !owner_events.contains(e) && e["entity"] != job.as_str())
        // The owner's own revoke just above is recorded with the owner as its actor.
        .filter(|e| e["actor"]["accountId"] != owner_id.as_str())
        .collect();
    assert!(added.is_empty(), "the walk recorded {added:?}");

    // The member cancels its own job; the owner cancels any.
    let (s, mine) = b
        .request(
            "POST",
            "/v1/jobs",
            Some(&member),
            Some(&json!({"case": {"slug": "c", "version": "1.0.0", "variant": "default"}, "combination": {"kind": "harness", "harness": "h", "model": "m"}}).to_string()),
        )
        .await;
    assert_eq!(s, 201, "{mine}");
    let (s, v) = b
        .request("POST", &format!("/v1/jobs/{}/cancel", id(&mine)), Some(&member), None)
        .await;
    assert_eq!((s, v["cancelled"].as_bool()), (200, Some(true)), "{v}");
    let (s, v) = b
        .request("POST", &format!("/v1/jobs/{job}/cancel"), Some(&second), None)
        .await;
    assert_eq!(s, 200, "an operator cancels any job: {v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_body_over_the_limit_answers_413_naming_the_limit_in_the_error_schema() {
    let b = Belay::start().await;
    let big = format!("{{\"name\": \"{}\"}}", "x".repeat(3 * 1024 * 1024));
    let (s, v) = b.request("POST", "/v1/projects", Some(&b.token), Some(&big)).await;
    assert_eq!((s, v["error"]["code"].as_str()), (413, Some("body_too_large")), "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&(2 * 1024 * 1024).to_string()),
        "{v}"
    );
    assert_eq!(b.get("/v1/projects").await, json!([]), "nothing was made");
}
