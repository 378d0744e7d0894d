//! Accounts and tokens a team can run, through real `belay api` processes on SQLite and
//! PostgreSQL: an operator invites a member, who makes a second token, lists both, revokes the
//! first (refused at once by a second API process over the same database) and lets the second
//! expire; a disabled account's tokens are refused; the last operator cannot be demoted; events
//! name their actor; bad input is refused naming the field and writes nothing. And the bound on
//! failed authentication: 50 bad tokens from one address get 429 with `Retry-After`, while a
//! valid token from the same address still works.

use crate::common::{BELAY, Belay, wait_for};
use serde_json::{Value, json};
use std::process::Command;
use std::time::Duration;

async fn call(b: &Belay, method: &str, path: &str, token: &str, body: Option<Value>) -> (u16, Value) {
    let body = body.map(|v| v.to_string());
    b.request(method, path, Some(token), body.as_deref()).await
}

async fn get_at(b: &Belay, url: &str, path: &str, token: &str) -> (u16, Value) {
    let r = b
        .http
        .get(format!("{url}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}

/// The field a 422 names (`field: rule`).
fn field(status: u16, v: &Value) -> String {
    assert_eq!((status, code(v)), (422, "invalid_field"), "{v}");
    v["error"]["message"]
        .as_str()
        .unwrap()
        .split_once(": ")
        .unwrap()
        .0
        .to_owned()
}

async fn account_count(b: &Belay) -> usize {
    call(b, "GET", "/v1/accounts", &b.token, None)
        .await
        .1
        .as_array()
        .unwrap()
        .len()
}

async fn token_count(b: &Belay, token: &str) -> usize {
    call(b, "GET", "/v1/account/tokens", token, None)
        .await
        .1
        .as_array()
        .unwrap()
        .len()
}

async fn team_scenario(b: &Belay) {
    let operator = b.token.clone();
    let (_, me) = call(b, "GET", "/v1/account", &operator, None).await;
    let operator_id = me["id"].as_str().unwrap().to_owned();
    assert_eq!(me["role"], "operator");

    // Bad input is refused naming the field, and writes nothing.
    let before = account_count(b).await;
    for (body, named) in [
        (json!({"name": ""}), "name"),
        (json!({"name": "x".repeat(201)}), "name"),
        (json!({"name": "ok", "role": "admin"}), "role"),
    ] {
        let (status, v) = call(b, "POST", "/v1/accounts", &operator, Some(body)).await;
        assert_eq!(field(status, &v), named);
    }
    assert_eq!(account_count(b).await, before);

    // The operator invites a member; the first token's secret comes back once.
    let (status, created) = call(b, "POST", "/v1/accounts", &operator, Some(json!({"name": "reviewer"}))).await;
    assert_eq!(status, 201, "{created}");
    let member_id = created["account"]["id"].as_str().unwrap().to_owned();
    assert_eq!(created["account"]["role"], "member");
    let first = created["token"].as_str().unwrap().to_owned();
    assert!(first.starts_with("bly_"));

    // A member sees only itself, and may not invite or change accounts.
    let (_, seen) = call(b, "GET", "/v1/accounts", &first, None).await;
    assert_eq!(seen.as_array().unwrap().len(), 1, "{seen}");
    assert_eq!(seen[0]["id"], member_id.as_str());
    assert!(account_count(b).await >= 2);
    let (status, v) = call(b, "POST", "/v1/accounts", &first, Some(json!({"name": "friend"}))).await;
    assert_eq!((status, code(&v)), (403, "operator_required"));
    let (status, _) = call(
        b,
        "PATCH",
        &format!("/v1/accounts/{operator_id}"),
        &first,
        Some(json!({"disabled": true})),
    )
    .await;
    assert_eq!(status, 403);

    // A second API process over the same database, started before the short-lived token.
    let other = b.start_second_api().await;

    // The member makes a second token that expires soon; bad tokens are refused and not made.
    for (body, named) in [
        (json!({"name": ""}), "name"),
        (json!({"name": "y".repeat(201)}), "name"),
        (json!({"name": "past", "expiresInSeconds": -60}), "expiresInSeconds"),
        (json!({"name": "now", "expiresInSeconds": 0}), "expiresInSeconds"),
        (
            json!({"name": "far", "expiresInSeconds": 365 * 86_400 + 1}),
            "expiresInSeconds",
        ),
    ] {
        let (status, v) = call(b, "POST", "/v1/account/tokens", &first, Some(body)).await;
        assert_eq!(field(status, &v), named);
    }
    assert_eq!(token_count(b, &first).await, 1);
    let (status, second) = call(
        b,
        "POST",
        "/v1/account/tokens",
        &first,
        Some(json!({"name": "ci", "expiresInSeconds": 8})),
    )
    .await;
    assert_eq!(status, 201, "{second}");
    let second_secret = second["secret"].as_str().unwrap().to_owned();
    let second_id = second["token"]["id"].as_str().unwrap().to_owned();
    assert!(second["token"]["expiresAt"].as_i64().unwrap() > second["token"]["createdAt"].as_i64().unwrap());

    // It lists both: names, prefixes, times, never a secret.
    let (_, tokens) = call(b, "GET", "/v1/account/tokens", &second_secret, None).await;
    let tokens = tokens.as_array().unwrap().clone();
    assert_eq!(tokens.len(), 2, "{tokens:?}");
    assert_eq!(tokens[0]["name"], "first");
    assert_eq!(tokens[1]["name"], "ci");
    assert_eq!(tokens[1]["id"], second_id.as_str());
    let first_id = tokens[0]["id"].as_str().unwrap().to_owned();
    assert!(first.starts_with(tokens[0]["prefix"].as_str().unwrap()));
    assert!(second_secret.starts_with(tokens[1]["prefix"].as_str().unwrap()));
    assert!(tokens[0]["lastUsedAt"].is_i64(), "the first token was used: {tokens:?}");
    let listed = serde_json::to_string(&tokens).unwrap();
    assert!(!listed.contains(&first) && !listed.contains(&second_secret));

    // A second API process over the same database has accepted the first token…
    let (status, _) = get_at(b, &other.url, "/v1/account", &first).await;
    assert_eq!(status, 200);

    // …a member may not revoke another's token (404, nothing changes)…
    let (_, ops_tokens) = call(b, "GET", "/v1/account/tokens", &operator, None).await;
    let ops_token_id = ops_tokens[0]["id"].as_str().unwrap().to_owned();
    let (status, v) = call(b, "DELETE", &format!("/v1/account/tokens/{ops_token_id}"), &first, None).await;
    assert_eq!((status, code(&v)), (404, "not_found"), "{v}");
    assert_eq!(call(b, "GET", "/v1/account", &operator, None).await.0, 200);
    let (status, _) = call(
        b,
        "GET",
        &format!("/v1/account/tokens?account={operator_id}"),
        &first,
        None,
    )
    .await;
    assert_eq!(status, 404);

    // …and once the member revokes the first token with the second, both processes refuse it.
    let (status, revoked) = call(
        b,
        "DELETE",
        &format!("/v1/account/tokens/{first_id}"),
        &second_secret,
        None,
    )
    .await;
    assert_eq!(status, 200, "{revoked}");
    assert!(revoked["revokedAt"].is_i64());
    let (status, v) = get_at(b, &other.url, "/v1/account", &first).await;
    assert_eq!((status, code(&v)), (401, "token_revoked"), "{v}");
    let (status, v) = call(b, "GET", "/v1/account", &first, None).await;
    assert_eq!((status, code(&v)), (401, "token_revoked"), "{v}");

    // An operator lists and may revoke any account's tokens.
    let (status, theirs) = call(
        b,
        "GET",
        &format!("/v1/account/tokens?account={member_id}"),
        &operator,
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(theirs.as_array().unwrap().len(), 2);
    assert!(theirs[0]["revokedAt"].is_i64() && theirs[1]["revokedAt"].is_null());

    // A third token, that never expires, outlives the second.
    let (_, third) = call(
        b,
        "POST",
        "/v1/account/tokens",
        &second_secret,
        Some(json!({"name": "laptop"})),
    )
    .await;
    let third_secret = third["secret"].as_str().unwrap().to_owned();
    assert!(third["token"]["expiresAt"].is_null());

    // The second expires and is refused as such.
    let expired = std::sync::Arc::new(std::sync::Mutex::new(Value::Null));
    wait_for("the second token to expire", Duration::from_secs(30), || {
        let expired = expired.clone();
        let secret = second_secret.clone();
        async move {
            let (status, v) = call(b, "GET", "/v1/account", &secret, None).await;
            *expired.lock().unwrap() = v;
            status == 401
        }
    })
    .await;
    assert_eq!(code(&expired.lock().unwrap()), "token_expired");

    // A disabled account's tokens are refused at once, and enabled again they work.
    let (status, v) = call(
        b,
        "PATCH",
        &format!("/v1/accounts/{member_id}"),
        &operator,
        Some(json!({"disabled": true})),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["disabled"], true);
    let (status, v) = get_at(b, &other.url, "/v1/account", &third_secret).await;
    assert_eq!((status, code(&v)), (401, "account_disabled"), "{v}");
    let (status, _) = call(
        b,
        "PATCH",
        &format!("/v1/accounts/{member_id}"),
        &operator,
        Some(json!({"disabled": false})),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(call(b, "GET", "/v1/account", &third_secret, None).await.0, 200);

    // The last enabled operator can be neither demoted nor disabled; an unknown role is refused.
    for body in [json!({"role": "member"}), json!({"disabled": true})] {
        let (status, v) = call(
            b,
            "PATCH",
            &format!("/v1/accounts/{operator_id}"),
            &operator,
            Some(body),
        )
        .await;
        assert_eq!((status, code(&v)), (409, "conflict"), "{v}");
    }
    let (status, v) = call(
        b,
        "PATCH",
        &format!("/v1/accounts/{member_id}"),
        &operator,
        Some(json!({"role": "root"})),
    )
    .await;
    assert_eq!(field(status, &v), "role");
    assert_eq!(
        call(b, "GET", "/v1/account", &operator, None).await.1["role"],
        "operator"
    );
    // With a second operator, the first may step down; then the second is the last.
    let (status, _) = call(
        b,
        "PATCH",
        &format!("/v1/accounts/{member_id}"),
        &operator,
        Some(json!({"role": "operator"})),
    )
    .await;
    assert_eq!(status, 200);
    let (status, v) = call(
        b,
        "PATCH",
        &format!("/v1/accounts/{operator_id}"),
        &third_secret,
        Some(json!({"role": "member"})),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let (status, _) = call(
        b,
        "PATCH",
        &format!("/v1/accounts/{member_id}"),
        &third_secret,
        Some(json!({"role": "member"})),
    )
    .await;
    assert_eq!(status, 409);
    let (status, _) = call(
        b,
        "PATCH",
        &format!("/v1/accounts/{operator_id}"),
        &third_secret,
        Some(json!({"role": "operator"})),
    )
    .await;
    assert_eq!(status, 200);

    // Events name their actor: the account and the name of the token it used.
    let (_, events) = call(
        b,
        "GET",
        &format!("/v1/events?actor={member_id}&limit=1000"),
        &operator,
        None,
    )
    .await;
    let events = events.as_array().unwrap();
    assert!(!events.is_empty());
    assert!(
        events.iter().all(|e| e["actor"]["accountId"] == member_id.as_str()),
        "{events:?}"
    );
    let made = events
        .iter()
        .find(|e| e["kind"] == "account.token_created" && e["payload"]["name"] == "ci")
        .unwrap();
    assert_eq!(made["actor"]["tokenName"], "first");
    assert_eq!(made["actor"]["accountName"], "reviewer");
    let gone = events.iter().find(|e| e["kind"] == "account.token_revoked").unwrap();
    assert_eq!(gone["actor"]["tokenName"], "ci");
    assert_eq!(gone["payload"]["tokenId"], first_id.as_str());
    let (_, by_operator) = call(
        b,
        "GET",
        &format!("/v1/events?actor={operator_id}&limit=1000"),
        &operator,
        None,
    )
    .await;
    let by_operator = by_operator.as_array().unwrap().clone();
    assert!(
        by_operator
            .iter()
            .any(|e| e["kind"] == "account.created" && e["entity"] == member_id.as_str()),
        "{by_operator:?}"
    );
    // An operator reads every account's events; a member only what it may see.
    let (_, outsider) = call(b, "POST", "/v1/accounts", &operator, Some(json!({"name": "outsider"}))).await;
    let outsider_id = outsider["account"]["id"].as_str().unwrap().to_owned();
    let seen = |v: &Value| {
        v.as_array()
            .unwrap()
            .iter()
            .any(|e| e["entity"] == outsider_id.as_str())
    };
    let (_, all) = call(
        b,
        "GET",
        &format!("/v1/events?actor={operator_id}&limit=1000"),
        &operator,
        None,
    )
    .await;
    assert!(seen(&all));
    // Demoted again, the member reads only its own and shared events once more.
    let (status, _) = call(
        b,
        "PATCH",
        &format!("/v1/accounts/{member_id}"),
        &operator,
        Some(json!({"role": "member"})),
    )
    .await;
    assert_eq!(status, 200);
    let (_, mine) = call(
        b,
        "GET",
        &format!("/v1/events?actor={operator_id}&limit=1000"),
        &third_secret,
        None,
    )
    .await;
    assert!(!seen(&mine), "{mine}");
    assert!(
        mine.as_array()
            .unwrap()
            .iter()
            .all(|e| e["actor"]["accountId"] == operator_id.as_str())
    );
    // The member's own account's events are its own, whoever wrote them.
    assert!(
        mine.as_array()
            .unwrap()
            .iter()
            .any(|e| e["entity"] == member_id.as_str()),
        "{mine}"
    );

    // A write that appends no event of its own (a bulk cancel with nothing to cancel) is
    // recorded as an `api.write` naming its actor.
    let (status, v) = call(
        b,
        "POST",
        "/v1/jobs/cancel",
        &operator,
        Some(json!({"scope": "queued"})),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let (_, writes) = call(
        b,
        "GET",
        &format!("/v1/events?actor={operator_id}&limit=1000"),
        &operator,
        None,
    )
    .await;
    let write = writes
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "api.write" && e["payload"]["path"] == "/v1/jobs/cancel")
        .unwrap_or_else(|| panic!("{writes}"));
    assert_eq!(write["actor"]["tokenName"], "first");
    assert_eq!(write["payload"]["method"], "POST");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_team_runs_its_accounts_and_tokens_on_sqlite() {
    let b = Belay::start().await;
    team_scenario(&b).await;
    token_commands(&b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_team_runs_its_accounts_and_tokens_on_postgres() {
    let b = Belay::start_postgres().await;
    team_scenario(&b).await;
}

/// `belay account token create|list|revoke` through the API.
fn token_commands(b: &Belay) {
    let belay = |args: &[&str]| {
        let out = Command::new(BELAY)
            .args(["account", "token"])
            .args(args)
            .env("BELAY_URL", &b.url)
            .env("BELAY_TOKEN", &b.token)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (ok, secret, err) = belay(&["create", "--name", "deploy", "--expires-in", "30d"]);
    assert!(ok, "{err}");
    let secret = secret.trim().to_owned();
    assert!(secret.starts_with("bly_"), "{secret}");
    let (ok, list, err) = belay(&["list"]);
    assert!(ok, "{err}");
    let line = list
        .lines()
        .find(|l| l.contains(" deploy "))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(line.ends_with("active"), "{line}");
    assert!(line.contains(&secret[..12]), "{line}");
    let id = line.split_whitespace().next().unwrap().to_owned();
    let (ok, out, err) = belay(&["revoke", &id]);
    assert!(ok, "{err}");
    assert!(out.contains("revoked token deploy"), "{out}");
    let (_, list, _) = belay(&["list"]);
    assert!(
        list.lines().any(|l| l.starts_with(&id) && l.ends_with("revoked")),
        "{list}"
    );
    // Past a year is refused naming the field; nothing is made.
    let (ok, _, err) = belay(&["create", "--name", "forever", "--expires-in", "400d"]);
    assert!(!ok && err.contains("422") && err.contains("expiresInSeconds"), "{err}");
    let (_, list, _) = belay(&["list"]);
    assert!(!list.contains("forever"), "{list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failed_authentication_from_one_address_is_slowed_then_refused_but_a_valid_token_still_works() {
    // The production bound: an empty value is the default.
    let b = Belay::start_with_env(&[("BELAY_AUTH_FAILURES_FREE", "")]).await;
    let mut statuses = Vec::new();
    let mut retry_after = None;
    for i in 0..50 {
        let r = b
            .http
            .get(format!("{}/v1/account", b.url))
            .bearer_auth(format!("bly_not-a-token-{i}"))
            .send()
            .await
            .unwrap();
        statuses.push(r.status().as_u16());
        if r.status().as_u16() == 429 {
            retry_after = r.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
            let body: Value = r.json().await.unwrap();
            assert_eq!(code(&body), "too_many_failures");
        }
    }
    assert!(statuses[..20].iter().all(|s| *s == 401), "{statuses:?}");
    assert!(statuses[20..].iter().all(|s| *s == 429), "{statuses:?}");
    let seconds: u64 = retry_after.expect("Retry-After").parse().unwrap();
    assert!((1..=60).contains(&seconds), "{seconds}");

    // A valid token from the same address is answered, at once and in full.
    let started = std::time::Instant::now();
    let (status, me) = call(&b, "GET", "/v1/account", &b.token, None).await;
    assert_eq!(status, 200, "{me}");
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    // Failures stay refused meanwhile.
    let (status, _) = b.request("GET", "/v1/account", Some("bly_still-wrong"), None).await;
    assert_eq!(status, 429);

    // Counted in /metrics.
    let text = b
        .http
        .get(format!("{}/metrics", b.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let sample = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
            .unwrap_or_else(|| panic!("{name} missing from {text}"))
            .parse()
            .unwrap()
    };
    assert!(sample("belay_auth_failures_total{reason=\"unknown\"}") >= 51.0);
    assert_eq!(sample("belay_auth_failures_slowed_total"), 10.0);
    assert!(sample("belay_auth_failures_refused_total") >= 31.0);
}
