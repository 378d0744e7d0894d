//! `belay dev` as a newcomer meets it: it starts everything, prints where things are, runs a demo
//! job to completion, stops every child on SIGTERM, and resumes with all state on a second start.

use crate::common::{BELAY, free_port, temporal_bin, wait_for, wait_until};
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

struct Dev {
    child: std::process::Child,
    api: String,
    token: String,
    sandboxes: String,
    /// What it printed as the console's and the metrics' addresses.
    console: String,
    metrics: String,
}

/// The Docker network and label of one test's Sandboxes; both go when the test ends.
fn sandbox_tag(test: &str) -> String {
    format!("belay-test-dev-{}-{test}", std::process::id())
}

fn start(data_dir: &std::path::Path, ports: (u16, u16, u16), test: &str) -> Dev {
    start_with(data_dir, ports, test, std::path::Path::new(&temporal_bin()))
}

/// `start` with `temporal` as the Temporal binary.
fn start_with(data_dir: &std::path::Path, ports: (u16, u16, u16), test: &str, temporal: &std::path::Path) -> Dev {
    let mut child = Command::new(BELAY)
        .args([
            "dev",
            "--demo",
            "--port",
            &ports.0.to_string(),
            "--temporal-port",
            &ports.1.to_string(),
            "--ui-port",
            &ports.2.to_string(),
        ])
        .arg("--data-dir")
        .arg(data_dir)
        .env("BELAY_TEMPORAL_BIN", temporal)
        .env("BELAY_SANDBOX_NETWORK", sandbox_tag(test))
        .env(
            "BELAY_SANDBOX_LABELS",
            format!("belay.test=1,belay.test.run={}", sandbox_tag(test)),
        )
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(data_dir.with_extension("stderr.log")).unwrap())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut api, mut token, mut ui, mut sandboxes) = (None, None, None, None);
    let (mut console, mut metrics) = (None, None);
    while api.is_none() || token.is_none() || ui.is_none() || sandboxes.is_none() {
        let line = lines
            .next()
            .expect("belay dev exited before printing its URLs")
            .unwrap();
        let field = |label: &str| line.trim().strip_prefix(label).map(|v| v.trim().to_string());
        api = api.or(field("API:"));
        token = token.or(field("Token:"));
        ui = ui.or(field("Temporal UI:"));
        sandboxes = sandboxes.or(field("Sandboxes:"));
        console = console.or(field("Console:"));
        metrics = metrics.or(field("Metrics:"));
    }
    assert_eq!(ui.unwrap(), format!("http://127.0.0.1:{}", ports.2));
    // Keep draining stdout so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Dev {
        child,
        api: api.unwrap(),
        token: token.unwrap(),
        sandboxes: sandboxes.unwrap(),
        console: console.expect("belay dev prints the console's URL"),
        metrics: metrics.expect("belay dev prints the metrics URL"),
    }
}

/// Launches the demo case on the script harness through `dev`'s API; answers the job's id.
async fn launch_demo_job(http: &reqwest::Client, dev: &Dev) -> String {
    let r = http
        .post(format!("{}/v1/jobs", dev.api))
        .bearer_auth(&dev.token)
        .json(
            &json!({"case": {"slug": "hello", "version": "1.0.0", "variant": "default"},
            "combination": {"kind": "harness", "harness": "script", "model": "demo-model"}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let job: serde_json::Value = r.json().await.unwrap();
    job["id"].as_str().expect("a job id").to_owned()
}

/// Waits up to 60 s for the resource at `path` to show `status`, read through `dev`'s API.
async fn status_becomes(http: &reqwest::Client, dev: &Dev, path: String, status: &str, what: &str) {
    let (api, token) = (dev.api.clone(), dev.token.clone());
    wait_for(what, Duration::from_secs(60), || {
        let (http, api, token, path) = (http.clone(), api.clone(), token.clone(), path.clone());
        async move {
            let r: serde_json::Value = http
                .get(format!("{api}{path}"))
                .bearer_auth(&token)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            r["status"] == status
        }
    })
    .await;
}

fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat"))
            && let Some((_, after)) = stat.rsplit_once(')')
            && after.split_whitespace().nth(1) == Some(&pid.to_string())
        {
            out.push(p);
        }
    }
    out
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !s.rsplit_once(')').is_some_and(|(_, a)| a.trim_start().starts_with('Z')))
}

async fn stop(mut dev: Dev) {
    let pid = dev.child.id();
    let children = children_of(pid);
    assert!(!children.is_empty(), "belay dev runs the Temporal server as its child");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    wait_until(
        "belay dev to exit within 15 s of SIGTERM",
        Duration::from_secs(15),
        async || match dev.child.try_wait().unwrap() {
            Some(_) => Ok(()),
            None => Err("it runs"),
        },
    )
    .await;
    for c in children {
        let cmd = std::fs::read_to_string(format!("/proc/{c}/cmdline"))
            .unwrap_or_default()
            .replace('\0', " ");
        assert!(!alive(c), "child {c} ({cmd}) outlived belay dev");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn belay_dev_runs_a_demo_job_stops_cleanly_and_resumes_with_its_state() {
    let dir = tempfile::tempdir().unwrap();
    let ports = (free_port(), free_port(), free_port());
    let http = reqwest::Client::new();
    let _cleanup = SandboxCleanup("demo");
    let dev = start(dir.path(), ports, "demo");
    let id = launch_demo_job(&http, &dev).await;
    let token = dev.token.clone();
    status_becomes(
        &http,
        &dev,
        format!("/v1/jobs/{id}"),
        "completed",
        "the demo job to complete",
    )
    .await;
    // The addresses it printed answer: the console's page and the Prometheus exposition, whose
    // job counters have seen the demo job complete.
    let first_word = |s: &str| s.split_whitespace().next().unwrap().to_owned();
    let page = http.get(first_word(&dev.console)).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("<script"));
    let exposition = http
        .get(first_word(&dev.metrics))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        exposition
            .lines()
            .any(|l| l.starts_with("belay_jobs{") && l.contains("status=\"completed\"") && !l.ends_with(" 0")),
        "{exposition}"
    );
    stop(dev).await;

    let again = start(dir.path(), ports, "demo");
    assert_eq!(again.token, token, "the bootstrap account is created once");
    // Another account, made by pointing `account create` at the data dir alone.
    let out = Command::new(BELAY)
        .args(["account", "create", "second", "--data-dir"])
        .arg(dir.path())
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let second = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let me: serde_json::Value = http
        .get(format!("{}/v1/account", again.api))
        .bearer_auth(&second)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (me["name"].as_str(), me["role"].as_str()),
        (Some("second"), Some("member")),
        "{me}"
    );
    // `--operator` makes an operator, who may write the catalogue a member may not.
    let out = Command::new(BELAY)
        .args(["account", "create", "keeper", "--operator", "--data-dir"])
        .arg(dir.path())
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let keeper = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let me: serde_json::Value = http
        .get(format!("{}/v1/account", again.api))
        .bearer_auth(&keeper)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (me["name"].as_str(), me["role"].as_str()),
        (Some("keeper"), Some("operator")),
        "{me}"
    );
    let harness = json!({"name": "keeper-harness", "maxParallelism": 1, "adapter": {"kind": "script", "script": "true", "timeoutSeconds": 60}});
    for (token, status) in [(&second, 403), (&keeper, 201)] {
        let s = http
            .post(format!("{}/v1/harnesses", again.api))
            .bearer_auth(token)
            .json(&harness)
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(s.as_u16(), status);
    }
    let missing = Command::new(BELAY)
        .args(["account", "create", "third", "--data-dir"])
        .arg(dir.path().join("nowhere"))
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert!(!missing.status.success(), "a data dir without a database is refused");
    assert!(String::from_utf8_lossy(&missing.stderr).contains("belay dev"));
    let runs: serde_json::Value = http
        .get(format!("{}/v1/runs?jobId={id}", again.api))
        .bearer_auth(&again.token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        runs.as_array().unwrap().len(),
        1,
        "the run recorded before the restart is still there"
    );
    let artifact = &runs[0]["artifacts"][0];
    assert_eq!(artifact["path"], "build/index.html");
    let stored = dir.path().join("objects").join(artifact["key"].as_str().unwrap());
    assert!(
        std::fs::read_to_string(stored).unwrap().contains("demo-model"),
        "the artifact is in the object store"
    );
    stop(again).await;
}

/// Removes one test's Sandbox containers and network.
struct SandboxCleanup(&'static str);

impl Drop for SandboxCleanup {
    fn drop(&mut self) {
        let out = Command::new("docker")
            .args([
                "ps",
                "-aq",
                "--filter",
                &format!("label=belay.test.run={}", sandbox_tag(self.0)),
            ])
            .output()
            .unwrap();
        let ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        if !ids.is_empty() {
            let _ = Command::new("docker").args(["rm", "-f"]).args(&ids).output();
        }
        let _ = Command::new("docker")
            .args(["network", "rm", &sandbox_tag(self.0)])
            .output();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn belay_dev_serves_agent_workspaces_through_its_sandbox_network() {
    let _cleanup = SandboxCleanup("ws");
    let dir = tempfile::tempdir().unwrap();
    let dev = start(dir.path(), (free_port(), free_port(), free_port()), "ws");
    assert!(dev.sandboxes.starts_with("on"), "Sandboxes: {}", dev.sandboxes);
    let http = reqwest::Client::new();
    let post = |path: String, body: serde_json::Value| {
        let (http, api, token) = (http.clone(), dev.api.clone(), dev.token.clone());
        async move {
            let r = http
                .post(format!("{api}{path}"))
                .bearer_auth(&token)
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            (status, r.json::<serde_json::Value>().await.unwrap())
        }
    };
    let (s, p) = post("/v1/projects".into(), json!({"name": "dev"})).await;
    assert_eq!(s, 201, "{p}");
    let project = p["id"].as_str().unwrap().to_string();
    status_becomes(
        &http,
        &dev,
        format!("/v1/projects/{project}"),
        "ready",
        "the project to be provisioned",
    )
    .await;
    let (_, c) = post(format!("/v1/projects/{project}/changes"), json!({"goal": "g"})).await;
    let (_, t) = post(
        format!("/v1/changes/{}/tasks", c["id"].as_str().unwrap()),
        json!({"key": "t", "kind": "implement", "title": "t"}),
    )
    .await;
    let (_, r) = post(format!("/v1/tasks/{}/runs", t["id"].as_str().unwrap()), json!({})).await;
    let run = r["id"].as_str().unwrap().to_string();
    let (s, out) = post(
        format!("/v1/task-runs/{run}/workspace/tools"),
        json!({"tool": "read_file", "path": ".gitignore"}),
    )
    .await;
    assert_eq!(s, 200, "the workspace cloned over the Sandbox network: {out}");
    stop(dev).await;
}

/// The dev server picks its internal services' ports itself, and a port another process takes
/// between its pick and its listen makes it panic just after it printed its banner and served.
/// `belay dev` sees it die and starts it again, keeping the dead one's log. The `temporal` here
/// is the real one behind a script that, the first time, lets it start and kills it then.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn belay_dev_starts_temporal_again_when_it_dies_just_after_it_started() {
    let _cleanup = SandboxCleanup("respawn");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let once = dir.path().join("died-once");
    let script = dir.path().join("temporal");
    std::fs::write(
        &script,
        format!(
            r#"#!/bin/sh
if [ -e '{once}' ]; then exec '{real}' "$@"; fi
touch '{once}'
log=$(readlink /proc/$$/fd/1)
'{real}' "$@" &
pid=$!
until grep -q 'Temporal Server:' "$log"; do sleep 0.05; done
kill -9 $pid
echo 'panic: runtime error: invalid memory address or nil pointer dereference' >&2
exit 2
"#,
            once = once.display(),
            real = temporal_bin()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let dev = start_with(&data, (free_port(), free_port(), free_port()), "respawn", &script);
    assert!(once.exists(), "the first start went through the dying script");
    let failed = std::fs::read_to_string(data.join("temporal.failed-1.log")).expect("the dead start's log is kept");
    assert!(
        failed.contains("Temporal Server:") && failed.contains("panic:"),
        "{failed}"
    );
    // The second server serves: a job launched through the API runs to completion.
    let http = reqwest::Client::new();
    let id = launch_demo_job(&http, &dev).await;
    status_becomes(
        &http,
        &dev,
        format!("/v1/jobs/{id}"),
        "completed",
        "the job to complete on the second server",
    )
    .await;
    stop(dev).await;
}
