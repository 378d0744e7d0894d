//! The browser check end to end: real `belay api` and `belay worker` processes (the `browser`
//! pool among them), a real Temporal server, the real Sandbox running the sample app with its dev
//! command, and real headless Chromium; the screenshots read back through the API as images.

mod common;

use common::{Belay, replays};
use serde_json::{Value, json};
use sha2::Digest;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A ready project whose canonical `main` is the sample app.
async fn project_with_sample_app(b: &Belay) -> String {
    let (s, p) = b.post("/v1/projects", json!({"name": "ui"})).await;
    assert_eq!(s, 201, "{p}");
    let id = p["id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    while b.get(&format!("/v1/projects/{id}")).await["status"] != "ready" {
        assert!(Instant::now() < deadline, "project never ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let bare = b.dir.path().join("data/git/belay").join(format!("{id}.git"));
    let work = b.dir.path().join(format!("seed-{id}"));
    assert!(
        Command::new("git")
            .args(["clone", "-q"])
            .arg(&bare)
            .arg(&work)
            .status()
            .unwrap()
            .success()
    );
    let app = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sample-app");
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", app.display()))
            .arg(&work)
            .status()
            .unwrap()
            .success()
    );
    git(&work, &["add", "-A"]);
    git(
        &work,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "The sample app",
        ],
    );
    git(&work, &["push", "-q", "origin", "HEAD:main"]);
    let store = belay_store::Store::connect(&b.database_url).await.unwrap();
    store
        .seed_canonical(
            &id,
            &git(&work, &["rev-parse", "HEAD"]),
            &git(&work, &["rev-parse", "HEAD^{tree}"]),
        )
        .await
        .unwrap();
    id
}

/// A Change of one Task whose workspace gets `edits`, verified; the Candidate when it ended.
async fn verify_ui_change(b: &Belay, project: &str, goal: &str, edits: &[Value]) -> Value {
    let (s, c) = b
        .post(
            &format!("/v1/projects/{project}/changes"),
            json!({"goal": goal, "acceptanceCriteria": [], "invariants": [], "riskTier": "low"}),
        )
        .await;
    assert_eq!(s, 201, "{c}");
    let change = c["id"].as_str().unwrap();
    let (s, t) = b
        .post(
            &format!("/v1/changes/{change}/tasks"),
            json!({"key": "ui", "kind": "implement", "title": goal, "semanticResources": [], "dependencies": []}),
        )
        .await;
    assert_eq!(s, 201, "{t}");
    let (s, r) = b
        .post(&format!("/v1/tasks/{}/runs", t["id"].as_str().unwrap()), json!({}))
        .await;
    assert_eq!(s, 201, "{r}");
    let run = r["id"].as_str().unwrap();
    for e in edits {
        let (s, v) = b.post(&format!("/v1/task-runs/{run}/workspace/tools"), e.clone()).await;
        assert_eq!(s, 200, "{e} answered {v}");
    }
    let (s, cs) = b
        .post(
            &format!("/v1/task-runs/{run}/workspace/publish"),
            json!({"message": goal, "contractChanges": []}),
        )
        .await;
    assert_eq!(s, 201, "{cs}");
    let (s, k) = b.post(&format!("/v1/changes/{change}/verification"), json!({})).await;
    assert_eq!(s, 201, "{k}");
    let id = k["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(400);
    loop {
        let k = b.get(&format!("/v1/candidates/{id}")).await;
        // A verified low-risk Candidate is promoted by itself, perhaps before it is read.
        if ["verified", "rejected", "stale", "promoted"].contains(&k["status"].as_str().unwrap_or_default()) {
            return k;
        }
        assert!(Instant::now() < deadline, "candidate never finished: {k}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn write(path: &str, content: &str) -> Value {
    json!({"tool": "write_file", "path": path, "content": content})
}

fn edit(path: &str, old: &str, new: &str) -> Value {
    json!({"tool": "edit_file", "path": path, "oldText": old, "newText": new})
}

fn browser_evidence(k: &Value) -> Value {
    let rows: Vec<&Value> = k["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["checkId"] == "browser")
        .collect();
    assert_eq!(rows.len(), 1, "one browser row: {k:#}");
    rows[0].clone()
}

/// A UI Change: an About page linked from the home page, with a form.
fn about_page(body: &str) -> Vec<Value> {
    vec![
        edit(
            "public/index.html",
            "<h1>Todos</h1>",
            "<h1>Todos</h1>\n    <nav><a href=\"/about.html\">About</a></nav>",
        ),
        write(
            "public/about.html",
            &format!(
                "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>About</title><link rel=\"stylesheet\" href=\"/style.css\"></head><body>{body}</body></html>\n"
            ),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_ui_change_passes_the_browser_check_with_screenshots_and_a_page_that_throws_fails_it() {
    let b = Belay::start_with_sandbox_env(&[("BROWSER_DAILY_SECONDS", "3600")], None).await;
    let project = project_with_sample_app(&b).await;

    let k = verify_ui_change(
        &b,
        &project,
        "An About page",
        &about_page("<h1>About</h1><p>Todos, kept simply.</p><form method=\"get\" action=\"/\"><input type=\"text\" name=\"q\"><button>Find</button></form><a href=\"/\">Home</a>"),
    )
    .await;
    assert!(
        ["verified", "promoted"].contains(&k["status"].as_str().unwrap()),
        "{k:#}"
    );
    let e = browser_evidence(&k);
    assert_eq!(
        (e["status"].as_str(), e["coverage"].as_str()),
        (Some("pass"), Some("checked_supported")),
        "{k:#}"
    );
    let cand = k["id"].as_str().unwrap();
    let shots = b
        .get(&format!(
            "/v1/candidates/{cand}/evidence/{}/screenshots",
            e["id"].as_str().unwrap()
        ))
        .await;
    let shots = shots.as_array().unwrap().clone();
    assert_eq!(
        shots.iter().map(|s| s["name"].as_str().unwrap()).collect::<Vec<_>>(),
        vec!["home", "final"],
        "{shots:#?}"
    );
    for s in &shots {
        let resp = b
            .http
            .get(format!("{}{}", b.url, s["url"].as_str().unwrap()))
            .bearer_auth(&b.token)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "image/png");
        let png = resp.bytes().await.unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(png.len() as u64, s["bytes"].as_u64().unwrap());
        assert_eq!(
            hex::encode(sha2::Sha256::digest(&png)),
            s["sha256"].as_str().unwrap(),
            "the recorded hash"
        );
    }
    // The meters: one run for the Candidate, its seconds settled on the day.
    let store = belay_store::Store::connect(&b.database_url).await.unwrap();
    assert_eq!(store.usage_counter("browser_runs", cand).await.unwrap(), (1, 0));
    let day = belay_domain::browser::day_of(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64,
    );
    let (used, reserved) = store.usage_counter("browser_seconds", &day).await.unwrap();
    assert!((1..60).contains(&used) && reserved == 0, "{used} {reserved}");
    replays(&b, "verification-browser-v1", &format!("verify-{cand}")).await;

    // Bad input and other accounts.
    let (s, v) = b
        .request(
            "GET",
            &format!(
                "/v1/candidates/{cand}/evidence/{}/screenshots/9",
                e["id"].as_str().unwrap()
            ),
            Some(&b.token),
            None,
        )
        .await;
    assert_eq!(s, 422, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().starts_with("index"), "{v}");
    let (_, bob) = store.create_account("bob").await.unwrap();
    let (s, _) = b
        .request(
            "GET",
            &format!(
                "/v1/candidates/{cand}/evidence/{}/screenshots/0",
                e["id"].as_str().unwrap()
            ),
            Some(&bob),
            None,
        )
        .await;
    assert_eq!(s, 404);

    // A page that throws fails the check, and the gap rejects the Candidate.
    let k = verify_ui_change(
        &b,
        &project,
        "A broken About page",
        &about_page("<h1>About</h1><script>document.getElementById('none').explode();</script>"),
    )
    .await;
    assert_eq!(k["status"], "rejected", "{k:#}");
    let e = browser_evidence(&k);
    assert_eq!(
        (e["status"].as_str(), e["coverage"].as_str()),
        (Some("fail"), Some("checked_supported")),
        "{k:#}"
    );
    assert!(e["summary"].as_str().unwrap().contains("TypeError"), "{e:#}");
    assert!(
        k["gaps"].as_array().unwrap().iter().any(|g| g["checkId"] == "browser"),
        "{k:#}"
    );

    // The day's browser seconds spent: the next check is skipped, not run.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let mut n = 0;
    while let belay_store::browser_meter::BrowserReserve::Reserved { .. } = store
        .reserve_browser(&format!("cand_elsewhere{n}"), now, 3600)
        .await
        .unwrap()
    {
        n += 1;
    }
    let k = verify_ui_change(
        &b,
        &project,
        "Another About page",
        &about_page("<h1>About</h1><p>Again.</p>"),
    )
    .await;
    assert_eq!(k["status"], "rejected", "{k:#}");
    let e = browser_evidence(&k);
    assert_eq!(
        (e["status"].as_str(), e["coverage"].as_str()),
        (Some("skipped"), Some("not_checked")),
        "{k:#}"
    );
    assert!(
        e["summary"]
            .as_str()
            .unwrap()
            .contains("browser time for today is spent"),
        "{e:#}"
    );
    assert_eq!(
        store
            .usage_counter("browser_runs", k["id"].as_str().unwrap())
            .await
            .unwrap(),
        (0, 0)
    );
}
