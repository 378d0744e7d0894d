//! Sandboxes shared by several workers on one Docker Engine, through real `belay` processes: the
//! lease, the last use and the running commands live in the deployment's database, so no
//! worker's reaper removes another's busy Sandbox, SANDBOX_MAX counts every worker's, the
//! deployment label keeps two deployments apart, and a Sandbox lost mid-command is answered as
//! lost (workspaces and edit sessions alike) instead of being run again.

use crate::common::{Belay, ready_project};
use belay_domain::ids::ProjectId;
use serde_json::{Value, json};
use std::process::Command;
use std::time::{Duration, Instant};

async fn edit_session(b: &Belay, project: &str) -> String {
    let (s, session) = b
        .post(&format!("/v1/projects/{project}/edit-sessions"), json!({}))
        .await;
    assert_eq!(s, 201, "{session}");
    session["id"].as_str().unwrap().to_string()
}

async fn command(b: &Belay, session: &str, command: &str) -> (u16, Value) {
    b.post(
        &format!("/v1/edit-sessions/{session}/commands"),
        json!({ "command": command }),
    )
    .await
}

/// A POST of `body` to `url` with `token` that holds no borrow of the test's `Belay`, so it can
/// run in a task of its own while the test kills and starts workers.
async fn post(url: String, token: String, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json::<Value>().await.unwrap())
}

/// A running task run of a new one-task Change (its workspace opens at its first tool call).
async fn task_run(b: &Belay, project: &str) -> String {
    let (s, c) = b
        .post(
            &format!("/v1/projects/{project}/changes"),
            json!({"goal": "Say hello", "acceptanceCriteria": ["it says hello"], "invariants": []}),
        )
        .await;
    assert_eq!(s, 201, "{c}");
    let (s, t) = b
        .post(
            &format!("/v1/changes/{}/tasks", c["id"].as_str().unwrap()),
            json!({"key": "a", "kind": "implement", "title": "task a", "semanticResources": [], "dependencies": []}),
        )
        .await;
    assert_eq!(s, 201, "{t}");
    let (s, r) = b
        .post(&format!("/v1/tasks/{}/runs", t["id"].as_str().unwrap()), json!({}))
        .await;
    assert_eq!(s, 201, "{r}");
    r["id"].as_str().unwrap().to_string()
}

fn container(project: &str) -> String {
    format!("proj-{}", project.strip_prefix("proj_").unwrap())
}

/// The container's id, or `None` when there is none.
fn container_id(project: &str) -> Option<String> {
    let out = Command::new("docker")
        .args(["inspect", "-f", "{{.Id}}", &container(project)])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn label(project: &str, key: &str) -> String {
    let out = Command::new("docker")
        .args([
            "inspect",
            "-f",
            &format!("{{{{index .Config.Labels \"{key}\"}}}}"),
            &container(project),
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Removes the project's Sandbox with `docker rm -f` after `after`.
async fn kill_after(project: &str, after: Duration) {
    tokio::time::sleep(after).await;
    let out = Command::new("docker")
        .args(["rm", "-f", &container(project)])
        .output()
        .unwrap();
    assert!(out.status.success());
}

async fn wait_gone(project: &str, limit: Duration) {
    crate::common::wait_for(&format!("the Sandbox of {project} to be reaped"), limit, || async {
        container_id(project).is_none()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_50_s_command_survives_the_reapers_of_another_worker_and_of_another_deployment() {
    // Both deployments reap after 3 idle seconds, each with a reaper looking every second; the
    // first runs two sandbox workers on one database.
    let idle = [("BELAY_SANDBOX_IDLE_SECONDS", "3")];
    let mut a = Belay::start_with_sandbox_env(&idle, None).await;
    a.start_extra_worker("sandbox", &[]);
    let b = Belay::start_with_sandbox_env(&idle, None).await;

    // The other deployment's reaper is at work: its own Sandbox goes once idle.
    let other = ready_project(&b, "other").await;
    let other_session = edit_session(&b, &other).await;
    let (s, out) = command(&b, &other_session, "true").await;
    assert_eq!(s, 200, "{out}");
    let (da, db) = (
        a.store().await.deployment_name().await.unwrap(),
        b.store().await.deployment_name().await.unwrap(),
    );
    assert_ne!(da, db);
    assert_eq!(label(&other, "belay.deployment"), db);

    let project = ready_project(&a, "busy").await;
    let session = edit_session(&a, &project).await;
    let started = Instant::now();
    let run = command(&a, &session, "sleep 50; echo survived");
    let watch = async {
        crate::common::wait_for("the busy Sandbox to start", Duration::from_secs(60), || async {
            container_id(&project).is_some()
        })
        .await;
        let id = container_id(&project).unwrap();
        assert_eq!(label(&project, "belay.deployment"), da);
        id
    };
    let ((s, out), first_id) = tokio::join!(run, watch);
    let took = started.elapsed();
    assert_eq!(s, 200, "{out}");
    assert_eq!(
        (out["stdout"].as_str(), out["exitCode"].as_i64()),
        (Some("survived\n"), Some(0)),
        "{out}"
    );
    assert!(
        took < Duration::from_secs(100),
        "the command ran once, not again from the start: {took:?}"
    );
    assert_eq!(
        container_id(&project).as_deref(),
        Some(first_id.as_str()),
        "the same container ran the whole command"
    );
    // The other deployment's Sandbox was reaped long ago, by its own reaper.
    assert!(
        container_id(&other).is_none(),
        "the other deployment's idle Sandbox was kept"
    );

    // Once idle, the shared record lets a reaper (either worker's) remove it, and the lease goes.
    wait_gone(&project, Duration::from_secs(30)).await;
    crate::common::wait_for("the lease to go", Duration::from_secs(10), || async {
        a.store().await.sandbox_leases(0).await.unwrap().is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_sandboxes_across_two_workers_block_a_fifth() {
    // The main worker runs everything but Sandboxes; two sandbox workers share the database.
    let mut a = Belay::start_with_sandbox_env(&[], Some("workflows,db,git,harness")).await;
    let mut projects = Vec::new();
    let mut sessions = Vec::new();
    for n in 0..5 {
        let p = ready_project(&a, &format!("p{n}")).await;
        sessions.push(edit_session(&a, &p).await);
        projects.push(p);
    }
    let first = a.start_extra_worker("sandbox", &[]);
    for session in &sessions[..2] {
        let (s, out) = command(&a, session, "true").await;
        assert_eq!(s, 200, "{out}");
    }
    a.kill_extra_worker(first);
    a.start_extra_worker("sandbox", &[]);
    for session in &sessions[2..4] {
        let (s, out) = command(&a, session, "true").await;
        assert_eq!(s, 200, "{out}");
    }
    let leases = a.store().await.sandbox_leases(0).await.unwrap();
    let holders: std::collections::BTreeSet<_> = leases.iter().map(|l| l.holder.clone()).collect();
    assert_eq!((leases.len(), holders.len()), (4, 2), "{leases:?}");
    // Both workers up: neither starts a fifth.
    a.start_extra_worker("sandbox", &[]);
    let (s, out) = command(&a, &sessions[4], "true").await;
    assert_eq!(
        (s, out["error"]["code"].as_str()),
        (503, Some("sandbox_unavailable")),
        "{out}"
    );
    let message = out["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("4 of 4 are live"), "{message}");
    assert!(container_id(&projects[4]).is_none());
    for p in &projects[..4] {
        assert!(container_id(p).is_some(), "{p}");
    }
    // A freed slot serves the fifth.
    Command::new("docker")
        .args(["rm", "-f", &container(&projects[0])])
        .output()
        .unwrap();
    a.store()
        .await
        .release_sandbox_lease(&ProjectId::from(projects[0].as_str()))
        .await
        .unwrap();
    let (s, out) = command(&a, &sessions[4], "echo fifth").await;
    assert_eq!((s, out["stdout"].as_str()), (200, Some("fifth\n")), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sandbox_removed_mid_command_answers_the_loss_for_edit_sessions_and_workspaces() {
    let b = Belay::start_with_sandbox().await;
    let project = ready_project(&b, "lost").await;

    // An edit session.
    let session = edit_session(&b, &project).await;
    let (s, out) = command(&b, &session, "true").await;
    assert_eq!(s, 200, "{out}");
    let marker = format!("/tmp/belay-ran-{}", session);
    let kill = kill_after(&project, Duration::from_secs(4));
    let started = Instant::now();
    let slow = format!("echo ran >> {marker}; sleep 30");
    let ((s, out), ()) = tokio::join!(command(&b, &session, &slow), kill);
    assert_eq!((s, out["error"]["code"].as_str()), (409, Some("sandbox_lost")), "{out}");
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "answered at the loss, not after a rerun"
    );
    // Not run again: a rerun would have started a fresh Sandbox and left its mark there.
    tokio::time::sleep(Duration::from_secs(2)).await;
    if container_id(&project).is_some() {
        let ran = Command::new("docker")
            .args(["exec", &container(&project), "cat", &marker])
            .output()
            .unwrap();
        assert!(
            !ran.status.success(),
            "the command ran again: {}",
            String::from_utf8_lossy(&ran.stdout)
        );
    }
    // The next command runs, in a fresh checkout.
    let (s, out) = command(&b, &session, "test -f .gitignore && echo back").await;
    assert_eq!((s, out["stdout"].as_str()), (200, Some("back\n")), "{out}");

    // An agent workspace.
    let run = task_run(&b, &project).await;
    let tool = |call: Value| {
        let (b, run) = (&b, run.clone());
        async move { b.post(&format!("/v1/task-runs/{run}/workspace/tools"), call).await }
    };
    let (s, v) = tool(json!({"tool": "run_command", "argv": ["ls"]})).await;
    assert_eq!(s, 200, "{v}");
    // A command given as one string is refused naming the field (`argv`), not the body.
    let (s, v) = tool(json!({"tool": "run_command", "argv": "ls -la"})).await;
    assert_eq!(s, 422, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().starts_with("argv"), "{v}");
    // An edit before the loss: it is gone with the Sandbox, and the caller is told.
    let (s, v) =
        tool(json!({"tool": "write_file", "path": "package.json", "content": "{\"scripts\":{\"slow\":\"sleep 30\"}}"}))
            .await;
    assert_eq!(s, 200, "{v}");
    let kill = kill_after(&project, Duration::from_secs(4));
    let started = Instant::now();
    let ((s, v), ()) = tokio::join!(
        tool(json!({"tool": "run_command", "argv": ["bun", "run", "slow"]})),
        kill
    );
    assert_eq!((s, v["error"]["code"].as_str()), (409, Some("sandbox_lost")), "{v}");
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "answered at the loss, not after a rerun"
    );
    // The next call restores the workspace, and says the edits made before the loss are gone.
    let (s, v) = tool(json!({"tool": "run_command", "argv": ["ls"]})).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        (v["restored"].as_bool(), v["editsLost"].as_bool()),
        (Some(true), Some(true)),
        "{v}"
    );

    // One Sandbox, two uses, each directory its own user's alone: the edit session's user cannot
    // read the agent workspace, and the agent workspace's commands cannot read the edit session.
    let run_dir = format!("/workspace/{}", &run[run.len() - 24..]);
    let (s, out) = command(
        &b,
        &session,
        &format!("ls {run_dir} && echo readable; stat -c %a:%u . {run_dir}"),
    )
    .await;
    assert_eq!(s, 200, "{out}");
    let stdout = out["stdout"].as_str().unwrap_or_default();
    assert!(!stdout.contains("readable"), "the workspace was readable: {out}");
    let modes: Vec<&str> = stdout.lines().collect();
    assert_eq!(modes.first(), Some(&"700:1000"), "{out}");
    let workspace_uid: u32 = modes
        .get(1)
        .and_then(|m| m.strip_prefix("700:"))
        .and_then(|u| u.parse().ok())
        .unwrap_or_else(|| panic!("the workspace directory is not 700 of a uid: {out}"));
    assert!(
        (30_000..60_000).contains(&workspace_uid),
        "the workspace runs as a user of its own: {out}"
    );
    let edit_dir = format!("/workspace/edit-{}", session.strip_prefix("edit_").unwrap());
    let (s, v) = tool(json!({"tool": "run_command", "argv": ["ls", &edit_dir]})).await;
    assert_eq!(s, 200, "{v}");
    assert_ne!(v["exitCode"], 0, "the workspace listed the edit session: {v}");
    assert!(
        v["stderr"].as_str().unwrap_or_default().contains("Permission denied"),
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn from_inside_a_sandbox_only_git_answers_on_the_host_address() {
    let b = Belay::start_with_sandbox().await;
    let project = ready_project(&b, "reach").await;
    let session = edit_session(&b, &project).await;
    let net = b.sandbox.as_ref().unwrap();
    let git_url = format!("http://{}:{}", net.gateway, b.git_port);
    let api_url = format!("http://{}:{}", net.gateway, b.url.rsplit(':').next().unwrap());
    let script = format!(
        r#"for (const url of ["{git_url}/v1/healthz", "{git_url}/v1/projects", "{git_url}/v1/openapi.json", "{api_url}/v1/healthz"]) {{
  try {{
    const r = await fetch(url, {{ headers: {{ authorization: "Bearer {token}" }}, signal: AbortSignal.timeout(3000) }});
    const body = await r.json().catch(() => null);
    console.log(r.status, body?.error?.code ?? "-");
  }} catch (e) {{
    console.log("unreachable");
  }}
}}"#,
        token = b.token
    );
    // The first command clones the session's fork over /git on that same address.
    let (s, out) = command(&b, &session, "test -f .gitignore && echo cloned").await;
    assert_eq!((s, out["stdout"].as_str()), (200, Some("cloned\n")), "{out}");
    let (s, out) = command(
        &b,
        &session,
        &format!("cat > /tmp/reach.js <<'EOF'\n{script}\nEOF\nbun /tmp/reach.js"),
    )
    .await;
    assert_eq!(s, 200, "{out}");
    assert_eq!(
        out["stdout"].as_str().unwrap_or_default(),
        "404 not_found\n404 not_found\n404 not_found\nunreachable\n",
        "{out}"
    );
    // A clone over /git with a repository token works from the Sandbox.
    let (s, token) = b
        .post(&format!("/v1/projects/{project}/repo-tokens"), json!({"scope": "read"}))
        .await;
    assert_eq!(s, 201, "{token}");
    let clone = format!(
        "export HOME=/tmp; git -c http.extraHeader=\"Authorization: Bearer {}\" clone -q {git_url}{} /tmp/again 2>&1 && test -f /tmp/again/.gitignore && echo again",
        token["token"].as_str().unwrap(),
        token["path"].as_str().unwrap()
    );
    let (s, out) = command(&b, &session, &clone).await;
    assert_eq!((s, out["stdout"].as_str()), (200, Some("again\n")), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_command_whose_worker_dies_is_answered_as_lost_and_not_run_again() {
    let mut b = Belay::start_with_sandbox().await;
    let project = ready_project(&b, "dies").await;
    let session = edit_session(&b, &project).await;
    let (s, out) = command(&b, &session, "true").await;
    assert_eq!(s, 200, "{out}");
    let marker = format!("/tmp/belay-ran-{session}");
    let slow = format!("echo ran >> {marker}; sleep 40");
    let reply = tokio::spawn(post(
        format!("{}/v1/edit-sessions/{session}/commands", b.url),
        b.token.clone(),
        json!({ "command": slow }),
    ));
    tokio::time::sleep(Duration::from_secs(5)).await;
    b.kill_worker();
    b.start_worker().await;
    let (s, out) = reply.await.unwrap();
    assert_eq!((s, out["error"]["code"].as_str()), (409, Some("sandbox_lost")), "{out}");
    let ran = Command::new("docker")
        .args(["exec", &container(&project), "cat", &marker])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&ran.stdout), "ran\n", "the command ran once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_killed_right_after_starting_a_command_gets_it_answered_as_lost_and_run_once() {
    // The sandbox pool runs in a process of its own, one at a time; a failpoint makes it die
    // (SIGKILL) the moment its command has run, before any "started" heartbeat: only the start
    // recorded in the database tells the retry that the command was handed over.
    const DIE: (&str, &str) = ("BELAY_FAILPOINT", "sandbox-command-started");
    let mut b = Belay::start_with_sandbox_env(&[], Some("workflows,db,git,llm,browser,harness")).await;
    let project = ready_project(&b, "once").await;

    // An edit session: its first command clones, then runs and the worker dies.
    let dying = b.start_extra_worker("sandbox", &[DIE]);
    let session = edit_session(&b, &project).await;
    let reply = tokio::spawn(post(
        format!("{}/v1/edit-sessions/{session}/commands", b.url),
        b.token.clone(),
        json!({ "command": "echo ran >> ran.txt" }),
    ));
    b.wait_extra_worker_exit(dying, Duration::from_secs(120)).await;
    let healthy = b.start_extra_worker("sandbox", &[]);
    let (s, out) = reply.await.unwrap();
    assert_eq!((s, out["error"]["code"].as_str()), (409, Some("sandbox_lost")), "{out}");
    let (s, out) = command(&b, &session, "cat ran.txt").await;
    assert_eq!(
        (s, out["stdout"].as_str()),
        (200, Some("ran\n")),
        "the command ran once: {out}"
    );

    // An agent workspace, opened on the healthy worker; its command runs on a dying one.
    let run = task_run(&b, &project).await;
    let (tools, token) = (format!("{}/v1/task-runs/{run}/workspace/tools", b.url), b.token.clone());
    let tool = |call: Value| post(tools.clone(), token.clone(), call);
    let (s, v) = tool(json!({"tool": "write_file", "path": "package.json",
        "content": "{\"scripts\":{\"mark\":\"echo ran >> ran.txt\"}}"}))
    .await;
    assert_eq!(s, 200, "{v}");
    b.kill_extra_worker(healthy);
    let dying = b.start_extra_worker("sandbox", &[DIE]);
    let reply = tokio::spawn(tool(json!({"tool": "run_command", "argv": ["bun", "run", "mark"]})));
    b.wait_extra_worker_exit(dying, Duration::from_secs(120)).await;
    b.start_extra_worker("sandbox", &[]);
    let (s, v) = reply.await.unwrap();
    assert_eq!((s, v["error"]["code"].as_str()), (409, Some("sandbox_lost")), "{v}");
    let (s, v) = tool(json!({"tool": "read_file", "path": "ran.txt"})).await;
    assert_eq!(
        (s, v["content"].as_str()),
        (200, Some("ran\n")),
        "the command ran once: {v}"
    );
}
