//! `belay bench verify`: the Candidate composition step as the verification workflow's compose
//! activity runs it (fork `cand-<id>` of canonical, copy the three ChangeSets' objects in from
//! their workspace forks, merge them in order), against `git merge-tree --write-tree` of the same
//! three tips with their objects already in one repository.

use super::support::compose;
use anyhow::{Context, bail};
use std::time::{Duration, Instant};

/// The compose step against `git merge-tree` (see [`compose`]).
pub(super) async fn verify(files: usize, runs: usize) -> anyhow::Result<()> {
    compose(files, runs).await
}

fn app_files(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<(String, String)>) -> anyhow::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            app_files(root, &p, out)?;
        } else {
            let rel = p.strip_prefix(root)?.to_string_lossy().into_owned();
            out.push((rel, std::fs::read_to_string(&p)?));
        }
    }
    Ok(())
}

struct Api {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl Api {
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> anyhow::Result<serde_json::Value> {
        let mut r = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            r = r.json(&b);
        }
        let resp = r.send().await?;
        let status = resp.status();
        let v: serde_json::Value = resp.json().await.unwrap_or_default();
        if !status.is_success() {
            bail!("{path}: {status} {v}");
        }
        Ok(v)
    }

    async fn get(&self, path: &str) -> anyhow::Result<serde_json::Value> {
        self.call(reqwest::Method::GET, path, None).await
    }

    async fn post(&self, path: &str, body: serde_json::Value) -> anyhow::Result<serde_json::Value> {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }
}

/// One Candidate of a Change whose single Task writes the sample app into an empty project (so
/// no fixture is pushed into canonical), verified end to end; answers the Candidate and its
/// wall time from `POST …/verification` to its end.
async fn verify_app(
    api: &Api,
    files: &[(String, String)],
    policy: Option<serde_json::Value>,
    invariants: &[&str],
    cold: bool,
) -> anyhow::Result<(serde_json::Value, Duration, i64)> {
    let p = api.post("/v1/projects", serde_json::json!({"name": "bench"})).await?;
    let project = p["id"].as_str().context("project id")?.to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    while api.get(&format!("/v1/projects/{project}")).await?["status"] != "ready" {
        anyhow::ensure!(Instant::now() < deadline, "project not ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if let Some(policy) = policy {
        api.call(
            reqwest::Method::PUT,
            &format!("/v1/projects/{project}/policy"),
            Some(policy),
        )
        .await?;
    }
    let c = api
        .post(
            &format!("/v1/projects/{project}/changes"),
            serde_json::json!({"goal": "The sample app", "acceptanceCriteria": ["lists todos"], "invariants": invariants, "riskTier": "low"}),
        )
        .await?;
    let change = c["id"].as_str().context("change id")?.to_owned();
    let t = api
        .post(
            &format!("/v1/changes/{change}/tasks"),
            serde_json::json!({"key": "app", "kind": "implement", "title": "app", "semanticResources": [], "dependencies": []}),
        )
        .await?;
    let run = api
        .post(
            &format!("/v1/tasks/{}/runs", t["id"].as_str().context("task id")?),
            serde_json::json!({}),
        )
        .await?;
    let run = run["id"].as_str().context("run id")?.to_owned();
    for (path, content) in files {
        api.post(
            &format!("/v1/task-runs/{run}/workspace/tools"),
            serde_json::json!({"tool": "write_file", "path": path, "content": content}),
        )
        .await?;
    }
    api.post(
        &format!("/v1/task-runs/{run}/workspace/publish"),
        serde_json::json!({"message": "the app"}),
    )
    .await?;
    let sandbox = format!("proj-{}", project.strip_prefix("proj_").unwrap_or(&project));
    let remove_sandbox = || {
        let _ = std::process::Command::new("docker")
            .args(["rm", "-f", &sandbox])
            .output();
    };
    if cold {
        // The workspace left the project's Sandbox running: remove it, so the checks start one.
        remove_sandbox();
    }
    let started = Instant::now();
    let posted_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    let k = api
        .post(&format!("/v1/changes/{change}/verification"), serde_json::json!({}))
        .await?;
    let id = k["id"].as_str().context("candidate id")?.to_owned();
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let k = api.get(&format!("/v1/candidates/{id}")).await?;
        if ["verified", "rejected", "stale"].contains(&k["status"].as_str().unwrap_or_default()) {
            let wall = started.elapsed();
            // Each run's Sandbox goes, so the bench never holds more than one of the four.
            remove_sandbox();
            return Ok((k, wall, posted_ms));
        }
        if Instant::now() >= deadline {
            remove_sandbox();
            bail!("candidate {id} never finished");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Each check's wall time (from the previous record's completion; for the first, from the
/// verification start, so it holds the composition) and its own duration, in completion order.
fn steps(k: &serde_json::Value, posted_ms: i64) -> Vec<(String, f64, f64)> {
    let mut rows: Vec<(String, i64, i64)> = k["evidence"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    (
                        e["checkId"].as_str().unwrap_or_default().to_owned(),
                        e["completedAt"].as_i64().unwrap_or_default(),
                        e["durationMs"].as_i64().unwrap_or_default(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    rows.sort_by_key(|r| r.1);
    rows.insert(0, ("verification start".into(), posted_ms, 0));
    rows.windows(2)
        .map(|w| (w[1].0.clone(), (w[1].1 - w[0].1) as f64, w[1].2 as f64))
        .collect()
}

/// The whole verification of the sample app (cold and warm Sandbox) with a per-step breakdown,
/// and the orchestration overhead of a plan of trivial (`true`) checks against a bare
/// one-activity workflow on the same server, through a `belay dev` of its own.
pub(super) async fn end_to_end(app: &std::path::Path, probes: usize) -> anyhow::Result<()> {
    use belay_workflows::probe::ProbeWorkflow;
    use temporalio_client::{WorkflowGetResultOptions, WorkflowStartOptions};
    let exe = std::env::current_exe()?;
    let dir = tempfile::tempdir()?;
    let free = || -> anyhow::Result<u16> { Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port()) };
    let (port, tport, uport) = (free()?, free()?, free()?);
    let mut child = tokio::process::Command::new(&exe)
        .args([
            "dev",
            "--port",
            &port.to_string(),
            "--temporal-port",
            &tport.to_string(),
            "--ui-port",
            &uport.to_string(),
        ])
        .arg("--data-dir")
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("dev.log"))?)
        .kill_on_drop(true)
        .spawn()
        .context("starting belay dev")?;
    let measured: anyhow::Result<()> = async {
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if let Ok(r) = http.get(format!("http://127.0.0.1:{port}/v1/readyz")).send().await
            && r.status().is_success()
        {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "belay dev was not ready within 180 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let token = std::fs::read_to_string(dir.path().join("dev-token"))?.trim().to_owned();
    let api = Api {
        http,
        url: format!("http://127.0.0.1:{port}"),
        token,
    };
    let mut files = Vec::new();
    app_files(app, app, &mut files)?;
    files.sort();

    for (label, cold) in [("cold Sandbox", true), ("warm Sandbox", false)] {
        let (k, wall, posted) = verify_app(&api, &files, None, &[], cold).await?;
        println!(
            "sample app verification, {label}: {} in {:.2} s (POST …/verification → {})",
            k["status"].as_str().unwrap_or_default(),
            wall.as_secs_f64(),
            k["status"].as_str().unwrap_or_default()
        );
        for (i, (check, wall, own)) in steps(&k, posted).into_iter().enumerate() {
            let what = if i == 0 {
                format!("{check} (with load, fork, merge, clone, build, plan)")
            } else {
                check
            };
            println!("  {what:<60} step {wall:>7.0} ms, of which the check itself {own:>7.0} ms");
        }
    }

    let trivial = serde_json::json!({
        "requiredChecksByRisk": {"low": ["build", "targeted", "contract", "security", "performance"]},
        "commands": {"install": "true", "build": "true", "typecheck": "true", "test": "true", "bench": "true", "contract": "true", "dev": "true"}
    });
    let (k, _, posted) = verify_app(
        &api,
        &files,
        Some(trivial),
        &["Email delivery must remain working", "Uptime must remain above 99.9%"],
        false,
    )
    .await?;
    // The first step also holds the composition: the overhead is read from the others.
    let rows: Vec<_> = steps(&k, posted).into_iter().skip(1).collect();
    let mut overhead: Vec<f64> = rows.iter().map(|(_, wall, own)| wall - own).collect();
    overhead.sort_by(f64::total_cmp);
    let client = belay_client::connect(&format!("127.0.0.1:{tport}"), "default", "belay-bench").await?;
    let mut bare = Vec::new();
    for i in 0..(probes + 3) {
        let t = Instant::now();
        let h = client
            .start_workflow(
                ProbeWorkflow::run,
                format!("p{i}"),
                WorkflowStartOptions::new(
                    belay_workflows::queues::WORKFLOWS,
                    format!("probe-verify-{}-{i}", std::process::id()),
                )
                .build(),
            )
            .await?;
        let _: String = h.get_result(WorkflowGetResultOptions::default()).await?;
        if i >= 3 {
            bare.push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    bare.sort_by(f64::total_cmp);
    let med = |v: &[f64]| if v.is_empty() { f64::NAN } else { v[v.len() / 2] };
    println!(
        "orchestration overhead: {} check steps with `true` commands ({}), per step minus the check's own time: median {:.1} ms; \
         bare one-activity workflow: median {:.1} ms; ratio {:.2}",
        rows.len(),
        k["plan"]["checks"]
            .as_array()
            .map(|a| a
                .iter()
                .map(|c| c["checkId"].as_str().unwrap_or_default())
                .collect::<Vec<_>>()
                .join(", "))
            .unwrap_or_default(),
        med(&overhead),
        med(&bare),
        med(&overhead) / med(&bare)
    );
    Ok(())
    }
    .await;
    // SIGTERM lets `belay dev` stop the Temporal server it started; SIGKILL would leave it behind.
    if let Some(pid) = child.id() {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    if tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
    measured
}
