//! The browser check end to end: real `belay api` and `belay worker` processes (the `browser`
//! pool among them), a real Temporal server, the real Sandbox running the sample app with its dev
//! command, and real headless Chromium; the screenshots read back through the API as images.

use crate::common::sample::sample_project;
use crate::common::{Belay, replays, wait_until, wait_until_every};
use serde_json::{Value, json};
use sha2::Digest;
use std::process::Command;
use std::time::Duration;

/// What a browser check's preview could leave in the test's Sandbox containers: its pid file
/// (`/tmp/belay-browser-<candidate>.pid`) and any process the preview started (the dev command
/// runs with the preview's `PORT` in its environment; nothing else in a Sandbox has one).
fn preview_leftovers(b: &Belay) -> Vec<String> {
    const SCAN: &str = r#"ls /tmp/belay-browser-*.pid 2>/dev/null
for d in /proc/[0-9]*; do
  tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -q '^PORT=' || continue
  echo "process ${d#/proc/}: $(tr '\0' ' ' < "$d/cmdline" 2>/dev/null)"
done
true"#;
    let mut out = Vec::new();
    for id in b.sandbox.as_ref().unwrap().containers() {
        let o = Command::new("docker")
            .args(["exec", &id, "sh", "-c", SCAN])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        if err.contains("is not running") {
            continue;
        }
        assert!(o.status.success(), "{err}");
        out.extend(String::from_utf8_lossy(&o.stdout).lines().map(|l| format!("{id}: {l}")));
    }
    out
}

/// A Change of one Task whose workspace gets `edits`, verified; the Candidate when it ended.
async fn verify_ui_change(b: &Belay, project: &str, goal: &str, edits: &[Value]) -> Value {
    let id = start_ui_change(b, project, goal, edits).await;
    // A verified low-risk Candidate is promoted by itself, perhaps before it is read.
    wait_gated(b, &id).await
}

/// A Change of one Task whose workspace gets `edits`, its verification started; the Candidate id.
async fn start_ui_change(b: &Belay, project: &str, goal: &str, edits: &[Value]) -> String {
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
    k["id"].as_str().unwrap().to_owned()
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

/// The screenshots the browser Evidence `evidence` lists, each read back through the API: a PNG
/// of the recorded size whose SHA-256 is the recorded hash. Answers their names.
async fn served_screenshots(b: &Belay, cand: &str, evidence: &Value) -> Vec<String> {
    let shots = b
        .get(&format!(
            "/v1/candidates/{cand}/evidence/{}/screenshots",
            evidence["id"].as_str().unwrap()
        ))
        .await;
    let mut names = Vec::new();
    for s in shots.as_array().unwrap() {
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
        names.push(s["name"].as_str().unwrap().to_owned());
    }
    names
}

/// The Change's events of `kind`.
async fn events_of(b: &Belay, change: &str, kind: &str) -> Vec<Value> {
    let events = b.get(&format!("/v1/events?entity={change}")).await;
    events
        .as_array()
        .or_else(|| events["events"].as_array())
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind)
        .cloned()
        .collect()
}

/// Waits until the Candidate is gated (or further: a verified low-risk Candidate is promoted by
/// itself, perhaps before it is read).
async fn wait_gated(b: &Belay, id: &str) -> Value {
    crate::common::sample::wait_candidate(b, id, &["verified", "rejected", "stale", "promoted"]).await
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
    let project = sample_project(&b).await;

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
    assert_eq!(served_screenshots(&b, cand, &e).await, vec!["home", "final"]);
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
    assert_eq!(preview_leftovers(&b), Vec::<String>::new(), "the preview was stopped");

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
    // Its failure screenshot is kept and served as recorded (decision 0019).
    let broken = k["id"].as_str().unwrap().to_owned();
    assert_eq!(served_screenshots(&b, &broken, &e).await, vec!["home", "failure"]);

    // The lone Candidate failed a required check: the Change gets its one repair Task, depending
    // on the Task whose ChangeSet the Candidate holds, and goes back to the agents.
    let change = k["changeId"].as_str().unwrap().to_owned();
    assert_eq!(b.get(&format!("/v1/changes/{change}")).await["status"], "running");
    let tasks = b.get(&format!("/v1/changes/{change}/tasks")).await;
    let repair: Vec<&Value> = tasks
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["key"] == "repair")
        .collect();
    assert_eq!(repair.len(), 1, "{tasks:#}");
    assert_eq!(repair[0]["dependencies"], json!(["ui"]), "{tasks:#}");
    let receipts = b.get(&format!("/v1/changes/{change}/receipts")).await;
    let repairs: Vec<&Value> = receipts
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "ACCEPTANCE_REPAIR")
        .collect();
    assert_eq!(repairs.len(), 1, "{receipts:#}");
    let objective = repairs[0]["outcome"]["objective"].as_str().unwrap();
    assert!(
        objective.contains(&format!(
            "Candidate {broken} failed: Required checks not satisfied: browser (failed)"
        )),
        "{objective}"
    );
    assert!(
        objective.contains("- browser (failed): ") && objective.contains("TypeError"),
        "{objective}"
    );
    assert!(
        objective
            .contains("Reproduce the failure, then make the code and tests of the request pass with the current app."),
        "{objective}"
    );
    let asked = events_of(&b, &change, "task.repair_requested").await;
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["payload"]["objective"], objective);

    // The next Candidate of the Change fails again: a person, and no second repair Task.
    let (s, again) = b.post(&format!("/v1/changes/{change}/verification"), json!({})).await;
    assert_eq!(s, 201, "{again}");
    let again = wait_gated(&b, again["id"].as_str().unwrap()).await;
    assert_eq!(again["status"], "rejected", "{again:#}");
    assert_eq!(
        b.get(&format!("/v1/changes/{change}")).await["status"],
        "awaiting_approval"
    );
    let tasks = b.get(&format!("/v1/changes/{change}/tasks")).await;
    assert_eq!(
        tasks
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["key"] == "repair")
            .count(),
        1,
        "{tasks:#}"
    );
    let receipts = b.get(&format!("/v1/changes/{change}/receipts")).await;
    assert_eq!(
        receipts
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["kind"] == "ACCEPTANCE_REPAIR")
            .count(),
        1
    );
    let person = events_of(&b, &change, "approval.requested").await;
    assert_eq!(person.len(), 1);
    assert_eq!(person[0]["payload"]["candidateId"], again["id"]);
    assert!(
        person[0]["payload"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("The change already had its repair."),
        "{person:#?}"
    );

    // The day's browser seconds spent: the next check is skipped, not run.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let mut n = 0;
    while let belay_store::browser_meter::BrowserReserve::Reserved { .. } = store
        .reserve_browser(&belay_domain::ids::CandidateId(format!("cand_elsewhere{n}")), now, 3600)
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

/// The processes whose parent is `pid`, with their command lines.
fn children_of(pid: u32) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or_default().split_whitespace().collect();
        if fields.len() > 1 && fields[1] == pid.to_string() && fields[0] != "Z" {
            let cmd = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
            out.push((child, String::from_utf8_lossy(&cmd).replace('\0', " ")));
        }
    }
    out
}

/// Whether any live process is in process group `pgid`.
fn group_alive(pgid: u32) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            return false;
        };
        let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or_default().split_whitespace().collect();
        fields.len() > 2 && fields[2] == pgid.to_string() && fields[0] != "Z"
    })
}

/// A single-page application's UI Change: the client draws `/board` itself, the server knows
/// only `/`, and `wrangler.jsonc` declares the convention.
fn board_page() -> Vec<Value> {
    vec![
        write(
            "wrangler.jsonc",
            "{\n  // The app's conventions.\n  \"name\": \"todos\",\n  \"assets\": { \"directory\": \"./public\", \"not_found_handling\": \"single-page-application\" },\n}\n",
        ),
        edit(
            "public/index.html",
            "<h1>Todos</h1>",
            "<h1>Todos</h1>\n    <nav><a href=\"/board\">Board</a></nav><p id=\"view\"></p>\n    <script>\n      function render() { document.getElementById('view').textContent = location.pathname === '/board' ? 'The board: three columns.' : 'Welcome home.'; }\n      document.addEventListener('click', (e) => { const a = e.target.closest('a[href=\"/board\"]'); if (a) { e.preventDefault(); history.pushState({}, '', '/board'); render(); } });\n      render();\n    </script>",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_browser_worker_killed_mid_session_takes_its_chromium_and_a_single_page_app_passes_on_the_retry() {
    // The main worker runs every pool but the browser's; a worker of its own runs that.
    let mut b = Belay::start_with_sandbox_env(
        &[("BROWSER_DAILY_SECONDS", "3600")],
        Some("workflows,db,git,sandbox,llm,harness"),
    )
    .await;
    let first = b.start_extra_worker("browser", &[]);
    let worker = b.extra_worker_pid(first);
    let project = sample_project(&b).await;
    let cand = start_ui_change(&b, &project, "A board drawn by the client", &board_page()).await;

    // Its Chromium starts for the check; the worker is killed outright in the middle of it.
    let chromium = wait_until_every(
        "the browser worker to start Chromium",
        Duration::from_secs(400),
        Duration::from_millis(100),
        async || {
            if let Some((pid, _)) = children_of(worker)
                .into_iter()
                .find(|(_, cmd)| cmd.contains("chromium"))
            {
                return Ok(pid);
            }
            let k = b.get(&format!("/v1/candidates/{cand}")).await;
            assert!(
                !["verified", "rejected", "promoted"].contains(&k["status"].as_str().unwrap()),
                "no Chromium was started: {k:#}"
            );
            Err(format!("{k:#}"))
        },
    )
    .await;
    b.kill_extra_worker(first);
    wait_until(
        &format!("Chromium {chromium} to go with its worker"),
        Duration::from_secs(10),
        async || {
            if group_alive(chromium) {
                Err("it is alive")
            } else {
                Ok(())
            }
        },
    )
    .await;

    // Another browser worker takes the retry, and the app's own route passes its direct load:
    // the check served the app's public/index.html, as wrangler.jsonc declares.
    b.start_extra_worker("browser", &[]);
    let k = wait_gated(&b, &cand).await;
    let object: Value = serde_json::from_slice(
        &std::fs::read(
            b.dir
                .path()
                .join(format!("data/objects/evidence/{cand}/browser-1.json")),
        )
        .unwrap(),
    )
    .unwrap();
    let e = browser_evidence(&k);
    assert_eq!(
        (e["status"].as_str(), e["coverage"].as_str()),
        (Some("pass"), Some("checked_supported")),
        "{object:#}"
    );
    assert!(
        ["verified", "promoted"].contains(&k["status"].as_str().unwrap()),
        "{k:#}"
    );
    assert_eq!(object["preview"]["singlePageApplication"], true, "{object:#}");
    let board: Vec<&Value> = object["requests"]["served"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["path"] == "/board" && r["resourceType"] == "Document")
        .collect();
    assert_eq!(board.len(), 1, "{object:#}");
    assert_eq!(
        (board[0]["status"].as_u64(), board[0]["spaIndex"].as_bool()),
        (Some(200), Some(true))
    );
    // The lost session's reservation was settled, and the retry took the second run.
    let store = belay_store::Store::connect(&b.database_url).await.unwrap();
    assert_eq!(store.usage_counter("browser_runs", &cand).await.unwrap(), (2, 0));
}
