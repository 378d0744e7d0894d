//! Agent workspaces end to end: real `belay api` and `belay worker` processes, a real Temporal
//! server, real git over smart HTTP and a real Docker Sandbox.

use crate::common::{Belay, ready_project_of, replays, wait_until, wait_until_every};
use belay_domain::ids::ProjectId;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

async fn change(b: &Belay, project: &str) -> String {
    let (s, c) = b
        .post(
            &format!("/v1/projects/{project}/changes"),
            json!({"goal": "Say hello", "acceptanceCriteria": ["it says hello"], "invariants": []}),
        )
        .await;
    assert_eq!(s, 201, "{c}");
    c["id"].as_str().unwrap().to_string()
}

/// A task and a running run of it; returns the run id.
async fn task_run(b: &Belay, change: &str, key: &str, kind: &str, deps: &[&str]) -> String {
    let (s, t) = b
        .post(
            &format!("/v1/changes/{change}/tasks"),
            json!({"key": key, "kind": kind, "title": format!("task {key}"), "semanticResources": [], "dependencies": deps}),
        )
        .await;
    assert_eq!(s, 201, "{t}");
    let (s, r) = b
        .post(&format!("/v1/tasks/{}/runs", t["id"].as_str().unwrap()), json!({}))
        .await;
    assert_eq!(s, 201, "{r}");
    r["id"].as_str().unwrap().to_string()
}

async fn tool(b: &Belay, run: &str, call: Value) -> (u16, Value) {
    b.post(&format!("/v1/task-runs/{run}/workspace/tools"), call).await
}

async fn tool_ok(b: &Belay, run: &str, call: Value) -> Value {
    let (s, v) = tool(b, run, call.clone()).await;
    assert_eq!(s, 200, "{call} answered {v}");
    v
}

fn assert_refused(status: u16, body: &Value, want: u16, field: &str) {
    assert_eq!(status, want, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with(&format!("{field}:")), "{field} not named in {body}");
}

/// The workspace fork of a run: `ws-<run>` for run `run_<run>`.
fn ws(run: &str) -> String {
    format!("ws-{}", belay_domain::ids::TaskRunId::body_of(run).unwrap())
}

fn kill_sandbox(project: &str) {
    let name = format!("proj-{}", project.strip_prefix("proj_").unwrap());
    let out = Command::new("docker").args(["rm", "-f", &name]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_workspace_opens_edits_and_publishes_a_change_set_whose_patch_applies_and_a_lost_sandbox_restores() {
    let b = Belay::start_with_sandbox().await;
    let project = ready_project_of(
        &b,
        json!({"name": "hello", "workspacePolicy": {
            "commands": ["git status *", "ls *", "cat *"],
            "build": ["sh build.sh"]
        }}),
    )
    .await;
    // A bad policy is refused naming the field, and no project is made.
    let before = b.get("/v1/projects").await.as_array().unwrap().len();
    let (s, v) = b
        .post(
            "/v1/projects",
            json!({"name": "bad", "workspacePolicy": {"commands": ["* everything"]}}),
        )
        .await;
    assert_refused(s, &v, 422, "workspacePolicy.commands[0]");
    let (s, v) = b
        .post(
            "/v1/projects",
            json!({"name": "bad", "workspacePolicy": {"shell": "bash"}}),
        )
        .await;
    assert_eq!(s, 422, "{v}");
    assert_eq!(b.get("/v1/projects").await.as_array().unwrap().len(), before);

    let change = change(&b, &project).await;
    let r1 = task_run(&b, &change, "t1", "implement", &[]).await;
    let (s, v) = b.post(&format!("/v1/task-runs/{r1}/workspace/close"), json!({})).await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (409, Some("workspace_not_open")),
        "{v}"
    );
    let (s, v) = tool(&b, "run_0000", json!({"tool": "read_file", "path": "a"})).await;
    assert_eq!(s, 404, "{v}");

    // Bad input is refused before the workspace opens, naming the field.
    let (s, v) = tool(&b, &r1, json!({"tool": "read_file", "path": "../etc/passwd"})).await;
    assert_refused(s, &v, 422, "path");
    let (s, v) = tool(&b, &r1, json!({"tool": "run_command", "argv": ["rm", "-rf", "/"]})).await;
    assert_refused(s, &v, 403, "argv");
    assert_eq!(v["error"]["code"], "command_not_allowed", "{v}");
    let (s, v) = tool(
        &b,
        &r1,
        json!({"tool": "edit_file", "path": "a", "oldText": "", "newText": "x"}),
    )
    .await;
    assert_refused(s, &v, 422, "oldText");
    let (s, v) = tool(&b, &r1, json!({"tool": "format_disk"})).await;
    assert_eq!(s, 422, "{v}");
    let (s, v) = b
        .post(
            &format!("/v1/task-runs/{r1}/workspace/publish"),
            json!({"message": "x"}),
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (409, Some("workspace_not_open")),
        "{v}"
    );
    assert_eq!(b.get(&format!("/v1/task-runs/{r1}/workspace")).await["status"], "none");

    // The first call opens the workspace: the fork, the clone, HEAD at the start commit.
    let ls = tool_ok(&b, &r1, json!({"tool": "run_command", "argv": ["ls", "-a"]})).await;
    assert!(ls["stdout"].as_str().unwrap().contains(".gitignore"), "{ls}");
    let view = b.get(&format!("/v1/task-runs/{r1}/workspace")).await;
    assert_eq!(view["status"], "open", "{view}");
    let canonical_main = b.get(&format!("/v1/projects/{project}")).await["canonicalCommit"].clone();
    assert_eq!(view["baseCommit"], canonical_main);
    assert_eq!(
        view["startCommit"], canonical_main,
        "no stacked ChangeSets: start is the base"
    );
    let git_root = b.dir.path().join("data").join("git").join("belay");
    assert!(
        git_root.join(format!("{}.git", ws(&r1))).is_dir(),
        "the workspace fork exists"
    );

    tool_ok(
        &b,
        &r1,
        json!({"tool": "write_file", "path": "src/hello.txt", "content": "hello\n"}),
    )
    .await;
    tool_ok(
        &b,
        &r1,
        json!({"tool": "write_file", "path": "build.sh",
               "content": "mkdir -p dist && echo built > dist/out.txt && echo changed >> src/hello.txt\n"}),
    )
    .await;
    let build = tool_ok(&b, &r1, json!({"tool": "run_command", "argv": ["sh", "build.sh"]})).await;
    assert_eq!(build["exitCode"], 0, "{build}");
    let discarded: Vec<&str> = build["discarded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        discarded.contains(&"src/hello.txt") && discarded.iter().any(|d| d.starts_with("dist")),
        "{build}"
    );
    let read = tool_ok(&b, &r1, json!({"tool": "read_file", "path": "src/hello.txt"})).await;
    assert_eq!(read["content"], "hello\n", "the build's write was discarded");
    let (s, v) = tool(&b, &r1, json!({"tool": "read_file", "path": "dist/out.txt"})).await;
    assert_refused(s, &v, 422, "path");

    tool_ok(
        &b,
        &r1,
        json!({"tool": "edit_file", "path": "src/hello.txt", "oldText": "hello", "newText": "hello, world"}),
    )
    .await;
    let (s, v) = tool(
        &b,
        &r1,
        json!({"tool": "edit_file", "path": "src/hello.txt", "oldText": "absent", "newText": "x"}),
    )
    .await;
    assert_refused(s, &v, 422, "oldText");
    // A file larger than one output chunk survives the round trip intact.
    let big: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
    tool_ok(
        &b,
        &r1,
        json!({"tool": "write_file", "path": "data/big.txt", "content": big}),
    )
    .await;
    let read = tool_ok(&b, &r1, json!({"tool": "read_file", "path": "data/big.txt"})).await;
    assert!(
        read["content"] == big.as_str(),
        "a {} byte file read back differently",
        big.len()
    );
    let status = tool_ok(
        &b,
        &r1,
        json!({"tool": "run_command", "argv": ["git", "status", "--short"]}),
    )
    .await;
    assert!(status["stdout"].as_str().unwrap().contains("src/"), "{status}");

    let (s, v) = b
        .post(&format!("/v1/task-runs/{r1}/workspace/publish"), json!({"message": ""}))
        .await;
    assert_refused(s, &v, 422, "message");
    let (s, cs) = b
        .post(
            &format!("/v1/task-runs/{r1}/workspace/publish"),
            json!({"message": "Say hello", "contractChanges": ["hello: added"]}),
        )
        .await;
    assert_eq!(s, 201, "{cs}");
    let commit = cs["commit"].as_str().unwrap();
    let patch_ref = cs["patchRef"].as_str().unwrap();
    assert_eq!(
        patch_ref,
        format!(
            "source/{project}/patches/changesets/{}.patch",
            cs["id"].as_str().unwrap()
        )
    );
    assert_eq!(
        b.get(&format!("/v1/task-runs/{r1}/workspace")).await["status"],
        "published"
    );
    let fork = git_root.join(format!("{}.git", ws(&r1)));
    assert_eq!(
        git(&fork, &["rev-parse", "refs/heads/main"]).trim(),
        commit,
        "the push landed"
    );
    let (s, v) = tool(&b, &r1, json!({"tool": "read_file", "path": "src/hello.txt"})).await;
    assert_eq!((s, v["error"]["code"].as_str()), (409, Some("workspace_closed")), "{v}");

    // The patch applies cleanly to the base and reproduces the published tree.
    let patch = b.dir.path().join("data").join("objects").join(patch_ref);
    let work = tempfile::tempdir().unwrap();
    let canonical = git_root.join(format!("{project}.git"));
    let out = Command::new("git")
        .args(["clone", "-q"])
        .arg(&canonical)
        .arg(work.path().join("c"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let checkout = work.path().join("c");
    git(&checkout, &["apply", "--check", patch.to_str().unwrap()]);
    git(&checkout, &["apply", "--index", patch.to_str().unwrap()]);
    let applied_tree = git(&checkout, &["write-tree"]);
    let published_tree = git(&fork, &["rev-parse", &format!("{commit}^{{tree}}")]);
    assert_eq!(applied_tree.trim(), published_tree.trim());
    assert_eq!(
        std::fs::read_to_string(checkout.join("src/hello.txt")).unwrap(),
        "hello, world\n"
    );
    assert!(!checkout.join("build.sh").exists() || checkout.join("build.sh").is_file());

    // A run stacked on t1 starts from t1's ChangeSet.
    let r2 = task_run(&b, &change, "t2", "implement", &["t1"]).await;
    let read = tool_ok(&b, &r2, json!({"tool": "read_file", "path": "src/hello.txt"})).await;
    assert_eq!(read["content"], "hello, world\n");
    let view = b.get(&format!("/v1/task-runs/{r2}/workspace")).await;
    assert_ne!(view["startCommit"], view["baseCommit"], "the start commit merges t1");

    // The Sandbox is killed: the next call restores the committed work (the stacked merge) from
    // the fork; nothing was edited yet, so nothing is lost.
    kill_sandbox(&project);
    let read = tool_ok(&b, &r2, json!({"tool": "read_file", "path": "src/hello.txt"})).await;
    assert_eq!(read["content"], "hello, world\n", "{read}");
    assert_eq!(
        (read["restored"].as_bool(), read["editsLost"].as_bool()),
        (Some(true), Some(false))
    );

    // An edit, then another loss: the edit is gone, and the run cannot publish partial work.
    tool_ok(
        &b,
        &r2,
        json!({"tool": "write_file", "path": "src/second.txt", "content": "two\n"}),
    )
    .await;
    kill_sandbox(&project);
    let (s, v) = tool(&b, &r2, json!({"tool": "read_file", "path": "src/second.txt"})).await;
    assert_refused(s, &v, 422, "path");
    let view = b.get(&format!("/v1/task-runs/{r2}/workspace")).await;
    assert_eq!(
        (view["editsLost"].as_bool(), view["restores"].as_u64()),
        (Some(true), Some(2)),
        "{view}"
    );
    let (s, v) = b
        .post(
            &format!("/v1/task-runs/{r2}/workspace/publish"),
            json!({"message": "partial"}),
        )
        .await;
    assert_eq!((s, v["error"]["code"].as_str()), (409, Some("workspace_lost")), "{v}");
    let view = b.get(&format!("/v1/task-runs/{r2}/workspace")).await;
    assert_eq!(view["status"], "failed", "{view}");
    replays(&b, "workspace-published", &format!("ws-{r1}")).await;
    replays(&b, "workspace-lost", &format!("ws-{r2}")).await;

    // The meter charged the project for the uses it settled.
    let store = b.store().await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(
        store
            .sandbox_charged(&ProjectId::from(project.as_str()), now)
            .await
            .unwrap()
            > 0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_change_opens_at_most_four_workspaces_and_the_meter_cap_refuses_with_429() {
    let b = Belay::start_with_sandbox().await;
    let project = ready_project_of(&b, json!({"name": "caps"})).await;
    let change = change(&b, &project).await;
    let other = task_run(&b, &change, "notes", "other", &[]).await;
    let (s, v) = tool(&b, &other, json!({"tool": "run_command", "argv": ["ls"]})).await;
    assert_refused(s, &v, 409, "task.kind");

    let mut runs = Vec::new();
    for i in 0..5 {
        runs.push(task_run(&b, &change, &format!("t{i}"), "test", &[]).await);
    }
    for run in &runs[..4] {
        tool_ok(&b, run, json!({"tool": "run_command", "argv": ["ls"]})).await;
    }
    let (s, v) = tool(&b, &runs[4], json!({"tool": "run_command", "argv": ["ls"]})).await;
    assert_eq!((s, v["error"]["code"].as_str()), (429, Some("workspace_cap")), "{v}");
    assert_eq!(
        b.get(&format!("/v1/task-runs/{}/workspace", runs[4])).await["status"],
        "none"
    );

    // Closing one frees its place.
    let (s, v) = b
        .post(&format!("/v1/task-runs/{}/workspace/close", runs[0]), json!({}))
        .await;
    assert_eq!((s, v["closed"].as_bool()), (200, Some(true)), "{v}");
    assert_eq!(
        b.get(&format!("/v1/task-runs/{}/workspace", runs[0])).await["status"],
        "failed"
    );
    tool_ok(&b, &runs[4], json!({"tool": "run_command", "argv": ["ls"]})).await;

    // A project whose month is all reserved is refused with sandbox_cap, and nothing opens.
    let full = ready_project_of(&b, json!({"name": "full"})).await;
    let store = b.store().await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    for _ in 0..240 {
        let r = store
            .reserve_sandbox(
                &ProjectId::from(full.as_str()),
                belay_domain::meter::Reservation::OpenWorkspace,
                now,
            )
            .await
            .unwrap();
        assert!(matches!(r, belay_store::meter::Reserve::Reserved { .. }), "{r:?}");
    }
    let full_change = self::change(&b, &full).await;
    let run = task_run(&b, &full_change, "t", "implement", &[]).await;
    let (s, v) = tool(&b, &run, json!({"tool": "run_command", "argv": ["ls"]})).await;
    assert_eq!((s, v["error"]["code"].as_str()), (429, Some("sandbox_cap")), "{v}");
    assert_eq!(b.get(&format!("/v1/task-runs/{run}/workspace")).await["status"], "none");
    assert!(
        !b.dir
            .path()
            .join("data/git/belay")
            .join(format!("{}.git", ws(&run)))
            .exists()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_edit_session_runs_any_command_as_its_own_user_and_leaves_no_process_behind() {
    let b = Belay::start_with_sandbox().await;
    let project = ready_project_of(&b, json!({"name": "edit"})).await;
    let (s, session) = b
        .post(&format!("/v1/projects/{project}/edit-sessions"), json!({}))
        .await;
    assert_eq!(s, 201, "{session}");
    let id = session["id"].as_str().unwrap().to_string();
    assert_eq!(
        (session["status"].as_str(), session["uid"].as_u64()),
        (Some("open"), Some(1000))
    );
    assert!(
        b.sandbox.as_ref().unwrap().containers().is_empty(),
        "opening starts no Sandbox"
    );
    let (s, v) = b
        .post(&format!("/v1/projects/{project}/edit-sessions"), json!({}))
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (409, Some("edit_session_open")),
        "{v}"
    );

    let run = |command: &str| {
        let (b, id, command) = (&b, id.clone(), command.to_owned());
        async move {
            b.post(
                &format!("/v1/edit-sessions/{id}/commands"),
                json!({ "command": command }),
            )
            .await
        }
    };
    let (s, v) = run("   ").await;
    assert_refused(s, &v, 422, "command");
    let (s, v) = b
        .post(&format!("/v1/edit-sessions/{id}/commands"), json!({"argv": ["ls"]}))
        .await;
    assert_eq!(s, 422, "{v}");

    let (s, out) = run("id -u && test -f .gitignore && echo cloned").await;
    assert_eq!(s, 200, "{out}");
    assert_eq!(out["stdout"], "1000\ncloned\n", "{out}");
    // The check sees a sleep of the session's user while its command runs...
    let (s, out) = run("sleep 300 & (sleep 301 &) ; sleep 0.2; ps -o comm= -u \"$(id -u)\" | grep -c '^sleep'").await;
    assert_eq!((s, out["stdout"].as_str()), (200, Some("2\n")), "{out}");
    // ...and none once the command has returned.
    let (s, out) = run("ps -o comm= -u \"$(id -u)\" | grep -c '^sleep' || true").await;
    assert_eq!(
        (s, out["stdout"].as_str()),
        (200, Some("0\n")),
        "a sleep outlived its command: {out}"
    );
    let (s, out) = run("echo x > /workspace/outside").await;
    assert_eq!(s, 200);
    assert_ne!(
        out["exitCode"], 0,
        "the session user cannot write outside its directory: {out}"
    );

    let dir = format!("/workspace/edit-{}", id.strip_prefix("edit_").unwrap());
    let container = format!("proj-{}", project.strip_prefix("proj_").unwrap());
    let fork = b
        .dir
        .path()
        .join("data/git/belay")
        .join(format!("edit-{}.git", id.strip_prefix("edit_").unwrap()));
    assert!(fork.is_dir());
    let (s, ended) = b.post(&format!("/v1/edit-sessions/{id}/end"), json!({})).await;
    assert_eq!((s, ended["status"].as_str()), (200, Some("ended")), "{ended}");
    assert!(!fork.exists(), "the end deletes the fork");
    let gone = Command::new("docker")
        .args(["exec", &container, "test", "-d", &dir])
        .status()
        .unwrap();
    assert!(!gone.success(), "the end removes the session directory");
    let (s, v) = run("ls").await;
    assert_eq!((s, v["error"]["code"].as_str()), (409, Some("session_ended")), "{v}");
    let (s, v) = b
        .post(&format!("/v1/projects/{project}/edit-sessions"), json!({}))
        .await;
    assert_eq!(s, 201, "a new session may open once the last ended: {v}");
    replays(
        &b,
        "edit-session",
        &format!("edit-{}", id.strip_prefix("edit_").unwrap()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_daily_forks_sweep_deletes_only_the_forks_its_rules_make_due() {
    let b = Belay::start_with_sandbox().await;
    let project = ready_project_of(&b, json!({"name": "sweep"})).await;
    let change = change(&b, &project).await;
    let mut runs = Vec::new();
    for i in 0..4 {
        runs.push(task_run(&b, &change, &format!("t{i}"), "implement", &[]).await);
    }
    let git_root = b.dir.path().join("data/git/belay");
    let git = belay_git::GitService::new(git_root.clone());
    for run in &runs {
        git.fork(&project, &ws(run)).await.unwrap();
    }
    let canonical = b.get(&format!("/v1/projects/{project}")).await["canonicalCommit"].clone();
    let (s, cs) = b
        .post(
            &format!("/v1/task-runs/{}/change-set", runs[1]),
            json!({ "commit": canonical }),
        )
        .await;
    assert_eq!(s, 201, "{cs}");
    // An edit session idle for a day is overdue; one in another project was just used.
    let (_, overdue) = b
        .post(&format!("/v1/projects/{project}/edit-sessions"), json!({}))
        .await;
    let overdue = overdue["id"].as_str().unwrap().to_string();
    let other = ready_project_of(&b, json!({"name": "other"})).await;
    let (_, fresh) = b.post(&format!("/v1/projects/{other}/edit-sessions"), json!({})).await;
    let fresh = fresh["id"].as_str().unwrap().to_string();
    let edit_repo = |id: &str| git_root.join(format!("edit-{}.git", id.strip_prefix("edit_").unwrap()));
    wait_until("the session forks to be made", Duration::from_secs(30), async || {
        let made = (edit_repo(&overdue).is_dir(), edit_repo(&fresh).is_dir());
        if made == (true, true) {
            Ok(())
        } else {
            Err(format!("made (overdue, fresh): {made:?}"))
        }
    })
    .await;

    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let day = 86_400_000i64;
    let store = b.store().await;
    for (run, status, ended) in [
        (&runs[0], "failed", now_ms - 31 * day),    // failed, past retention: due
        (&runs[1], "succeeded", now_ms - 31 * day), // has a ChangeSet, Change running: kept
        (&runs[3], "failed", now_ms - 5 * day),     // failed, within retention: kept
    ] {
        store
            .execute_admin(&format!(
                "update task_runs set status = '{status}', ended_at = {ended} where id = '{run}'"
            ))
            .await
            .unwrap();
    }
    store
        .execute_admin(&format!(
            "update edit_sessions set last_used_at = {} where id = '{overdue}'",
            now_ms - 25 * 3_600_000
        ))
        .await
        .unwrap();

    let temporal = |args: &[&str]| {
        let out = Command::new(crate::common::temporal_bin())
            .args(args)
            .args(["--address", &b.temporal.address])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "temporal {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let described = temporal(&["schedule", "describe", "--schedule-id", "forks-sweep", "-o", "json"]);
    assert!(described.contains("86400s"), "the schedule fires daily: {described}");
    temporal(&["schedule", "trigger", "--schedule-id", "forks-sweep"]);

    let what = "the sweep to delete the due forks";
    wait_until_every(what, Duration::from_secs(60), Duration::from_millis(100), async || {
        let left = (
            git_root.join(format!("{}.git", ws(&runs[0]))).exists(),
            edit_repo(&overdue).exists(),
        );
        if left == (false, false) {
            Ok(())
        } else {
            Err(format!("left (run's, session's): {left:?}"))
        }
    })
    .await;
    let session = b.get(&format!("/v1/edit-sessions/{overdue}")).await;
    assert_eq!(session["status"], "ended", "{session}");
    let workflow = format!("edit-{}", overdue.strip_prefix("edit_").unwrap());
    let what = "the overdue session's workflow to complete";
    wait_until_every(what, Duration::from_secs(30), Duration::from_millis(100), async || {
        let described = temporal(&["workflow", "describe", "--workflow-id", &workflow, "-o", "json"]);
        if described.contains("COMPLETED") {
            Ok(())
        } else {
            Err(described)
        }
    })
    .await;
    for kept in [&runs[1], &runs[2], &runs[3]] {
        assert!(
            git_root.join(format!("{}.git", ws(kept))).is_dir(),
            "{kept}'s fork was kept"
        );
    }
    assert!(edit_repo(&fresh).is_dir());
    assert_eq!(b.get(&format!("/v1/edit-sessions/{fresh}")).await["status"], "open");
    assert!(
        git_root.join(format!("{project}.git")).is_dir(),
        "canonical is never swept"
    );
    let listed = temporal(&[
        "workflow",
        "list",
        "--query",
        "WorkflowType='ForksSweepWorkflow'",
        "-o",
        "json",
    ]);
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let sweep_id = listed[0]["execution"]["workflowId"]
        .as_str()
        .unwrap_or_else(|| panic!("{listed}"))
        .to_owned();
    assert!(sweep_id.starts_with("forks-sweep"), "{sweep_id}");
    replays(&b, "forks-sweep-v3", &sweep_id).await;
}
