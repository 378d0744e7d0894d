//! Project provisioning through the API: a canonical repository at generation 0 holding one
//! commit with only `.gitignore`, with its file index and code manifest in the object store.

use crate::common::{Belay, create_account, wait_until};
use serde_json::json;
use std::process::Command;
use std::time::Duration;

fn git(repo: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(repo)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_project_gets_a_canonical_repository_at_generation_zero() {
    let b = Belay::start().await;
    let (s, p) = b.post("/v1/projects", json!({"name": "todos"})).await;
    assert_eq!(s, 201, "{p}");
    let id = p["id"].as_str().unwrap().to_string();
    assert_eq!(
        (p["status"].as_str(), p["generation"].as_i64()),
        (Some("provisioning"), Some(0))
    );

    let ready = wait_until("the project to become ready", Duration::from_secs(60), async || {
        let p = b.get(&format!("/v1/projects/{id}")).await;
        if p["status"] == "ready" {
            return Ok(p);
        }
        assert!(p["status"] != "failed", "{p}");
        Err(p)
    })
    .await;
    assert_eq!(ready["generation"], 0);
    let commit = ready["canonicalCommit"].as_str().unwrap();
    let tree = ready["canonicalTree"].as_str().unwrap();

    let data = b.dir.path().join("data");
    let repo = data.join("git").join("belay").join(format!("{id}.git"));
    assert_eq!(git(&repo, &["rev-parse", "refs/heads/main"]).trim(), commit);
    assert_eq!(
        git(&repo, &["rev-list", "--count", "main"]).trim(),
        "1",
        "S0 is one commit"
    );
    assert_eq!(
        git(&repo, &["ls-tree", "--name-only", "-r", "main"]).trim(),
        ".gitignore"
    );
    assert_eq!(git(&repo, &["rev-parse", "main^{tree}"]).trim(), tree);
    git(&repo, &["fsck", "--strict"]);

    let objects = data.join("objects").join("source").join(&id).join(tree);
    let index: serde_json::Value = serde_json::from_slice(&std::fs::read(objects.join("index.json")).unwrap()).unwrap();
    assert_eq!(index["files"][0]["path"], ".gitignore");
    let code: serde_json::Value = serde_json::from_slice(&std::fs::read(objects.join("code.json")).unwrap()).unwrap();
    let blob = code[".gitignore"].as_str().unwrap();
    assert!(
        data.join("objects")
            .join("source")
            .join(&id)
            .join("blobs")
            .join(blob)
            .is_file()
    );

    // Only the owner sees it; bad input writes nothing.
    let other = create_account(&b.database_url, "other");
    let (s, _) = b
        .request("GET", &format!("/v1/projects/{id}"), Some(&other), None)
        .await;
    assert_eq!(s, 404);
    let (s, v) = b.post("/v1/projects", json!({"name": "  "})).await;
    assert_eq!(s, 422, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("name"));
    let (s, v) = b.post("/v1/projects", json!({})).await;
    assert_eq!(s, 422, "{v}");
    assert_eq!(b.get("/v1/projects").await.as_array().unwrap().len(), 1);

    // Smart HTTP with a repository token: a read token clones; a write token for canonical is
    // refused; a revoked token, another account's request or no token gets nothing.
    let (s, t) = b
        .post(&format!("/v1/projects/{id}/repo-tokens"), json!({"scope": "read"}))
        .await;
    assert_eq!(s, 201, "{t}");
    let host = b.url.trim_start_matches("http://");
    let url = format!(
        "http://belay:{}@{host}{}",
        t["token"].as_str().unwrap(),
        t["path"].as_str().unwrap()
    );
    let work = b.dir.path().join("clone");
    let clone = |url: &str, into: &std::path::Path| {
        Command::new("git")
            .args(["-c", "protocol.version=2", "clone", "--quiet", url])
            .arg(into)
            .env("GIT_TERMINAL_PROMPT", "0")
            .output()
            .unwrap()
    };
    let out = clone(&url, &work);
    assert!(out.status.success(), "clone: {}", String::from_utf8_lossy(&out.stderr));
    assert!(work.join(".gitignore").is_file());
    let (s, v) = b
        .post(&format!("/v1/projects/{id}/repo-tokens"), json!({"scope": "write"}))
        .await;
    assert_eq!(s, 422, "{v}");
    let (s, _) = b
        .request(
            "POST",
            &format!("/v1/projects/{id}/repo-tokens"),
            Some(&other),
            Some(r#"{"scope":"read"}"#),
        )
        .await;
    assert_eq!(s, 404);
    let (s, v) = b
        .post(
            &format!("/v1/repo-tokens/{}/revoke", t["tokenId"].as_str().unwrap()),
            json!({}),
        )
        .await;
    assert_eq!((s, v["revoked"].clone()), (200, json!(true)), "{v}");
    assert!(
        !clone(&url, &b.dir.path().join("clone-revoked")).status.success(),
        "a revoked token clones nothing"
    );
    let anonymous = format!("http://{host}{}", t["path"].as_str().unwrap());
    assert!(!clone(&anonymous, &b.dir.path().join("clone-anon")).status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn changes_tasks_runs_and_change_sets_are_recorded_for_the_projects_owner() {
    let b = Belay::start().await;
    let (_, p) = b.post("/v1/projects", json!({"name": "todos"})).await;
    let pid = p["id"].as_str().unwrap();
    let (s, c) = b
        .post(
            &format!("/v1/projects/{pid}/changes"),
            json!({"goal": "Add a calendar view", "acceptanceCriteria": ["A calendar page lists todos by date"], "riskTier": "medium"}),
        )
        .await;
    assert_eq!(s, 201, "{c}");
    assert_eq!(c["status"], "running");
    let cid = c["id"].as_str().unwrap();
    let (s, t1) = b
        .post(
            &format!("/v1/changes/{cid}/tasks"),
            json!({"key": "api", "kind": "implement", "title": "API", "semanticResources": ["todos:api"]}),
        )
        .await;
    assert_eq!(s, 201, "{t1}");
    let (s, t2) = b
        .post(
            &format!("/v1/changes/{cid}/tasks"),
            json!({"key": "ui", "kind": "implement", "title": "UI", "dependencies": ["api"]}),
        )
        .await;
    assert_eq!(s, 201, "{t2}");
    assert_eq!(t2["dependencies"], json!(["api"]));
    let before = b.get(&format!("/v1/changes/{cid}/tasks")).await;
    // A Task of the wrong shape is 422; one that conflicts with the Change as it is, 409.
    for (body, status, field) in [
        (json!({"key": "x", "kind": "refactor", "title": "t"}), 422, "kind"),
        (
            json!({"key": "x", "kind": "test", "title": "t", "dependencies": ["nope"]}),
            409,
            "dependencies[0]",
        ),
        (json!({"key": "api", "kind": "test", "title": "t"}), 409, "key"),
        (json!({"kind": "test", "title": "t"}), 422, "key"),
    ] {
        let (s, v) = b.post(&format!("/v1/changes/{cid}/tasks"), body).await;
        assert_eq!(s, status, "{v}");
        assert!(v["error"]["message"].as_str().unwrap().contains(field), "{v}");
    }
    assert_eq!(
        b.get(&format!("/v1/changes/{cid}/tasks")).await,
        before,
        "refused tasks wrote nothing"
    );
    let (s, run) = b
        .post(&format!("/v1/tasks/{}/runs", t1["id"].as_str().unwrap()), json!({}))
        .await;
    assert_eq!(s, 201, "{run}");
    let rid = run["id"].as_str().unwrap();
    let (s, v) = b
        .post(&format!("/v1/task-runs/{rid}/change-set"), json!({"commit": "abc"}))
        .await;
    assert_eq!(s, 422, "{v}");
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let (s, cs) = b
        .post(
            &format!("/v1/task-runs/{rid}/change-set"),
            json!({"commit": commit, "contractChanges": ["GET /api/calendar"]}),
        )
        .await;
    assert_eq!(s, 201, "{cs}");
    let (s, _) = b
        .post(&format!("/v1/task-runs/{rid}/change-set"), json!({"commit": commit}))
        .await;
    assert_eq!(s, 409, "one ChangeSet per run");
    assert_eq!(
        b.get(&format!("/v1/change-sets/{}", cs["id"].as_str().unwrap())).await["commit"],
        commit
    );
    let other = create_account(&b.database_url, "other");
    for path in [
        format!("/v1/changes/{cid}"),
        format!("/v1/change-sets/{}", cs["id"].as_str().unwrap()),
    ] {
        let (s, _) = b.request("GET", &path, Some(&other), None).await;
        assert_eq!(s, 404, "{path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deleting_a_project_removes_its_repositories_and_sources_and_no_others() {
    let b = Belay::start().await;
    let ready = |id: String| {
        let b = &b;
        async move {
            wait_until(
                &format!("project {id} to be ready"),
                Duration::from_secs(60),
                async || {
                    let p = b.get(&format!("/v1/projects/{id}")).await;
                    if p["status"] == "ready" { Ok(p) } else { Err(p) }
                },
            )
            .await
        }
    };
    let (_, doomed) = b.post("/v1/projects", json!({"name": "doomed"})).await;
    let (_, kept) = b.post("/v1/projects", json!({"name": "kept"})).await;
    let (doomed, kept) = (
        doomed["id"].as_str().unwrap().to_string(),
        kept["id"].as_str().unwrap().to_string(),
    );
    ready(doomed.clone()).await;
    ready(kept.clone()).await;
    // A task run of the doomed project, with its workspace fork.
    let (_, c) = b
        .post(&format!("/v1/projects/{doomed}/changes"), json!({"goal": "g"}))
        .await;
    let (_, t) = b
        .post(
            &format!("/v1/changes/{}/tasks", c["id"].as_str().unwrap()),
            json!({"key": "t", "kind": "implement", "title": "t"}),
        )
        .await;
    let (_, run) = b
        .post(&format!("/v1/tasks/{}/runs", t["id"].as_str().unwrap()), json!({}))
        .await;
    let ws = belay_domain::repo::workspace_fork(run["id"].as_str().unwrap()).unwrap();
    let git_root = b.dir.path().join("data").join("git").join("belay");
    let git = belay_git::GitService::new(git_root.clone());
    git.fork(&doomed, &ws).await.unwrap();
    assert!(git_root.join(format!("{ws}.git")).is_dir());

    let other = create_account(&b.database_url, "other");
    let (s, _) = b
        .request("DELETE", &format!("/v1/projects/{doomed}"), Some(&other), None)
        .await;
    assert_eq!(s, 404, "only the owner deletes");
    let (s, v) = b
        .request("DELETE", &format!("/v1/projects/{doomed}"), Some(&b.token), None)
        .await;
    assert_eq!((s, v["status"].as_str()), (202, Some("deleting")), "{v}");
    // Gone from the moment the deletion is accepted: the project and everything in it.
    let change = c["id"].as_str().unwrap();
    let task = t["id"].as_str().unwrap();
    let run_id = run["id"].as_str().unwrap();
    for (method, path, body) in [
        ("GET", format!("/v1/projects/{doomed}"), None),
        ("DELETE", format!("/v1/projects/{doomed}"), None),
        ("GET", format!("/v1/projects/{doomed}/changes"), None),
        (
            "POST",
            format!("/v1/projects/{doomed}/changes"),
            Some(r#"{"goal":"g"}"#),
        ),
        ("GET", format!("/v1/changes/{change}"), None),
        ("GET", format!("/v1/changes/{change}/tasks"), None),
        (
            "POST",
            format!("/v1/changes/{change}/tasks"),
            Some(r#"{"key":"u","kind":"implement","title":"u"}"#),
        ),
        ("POST", format!("/v1/tasks/{task}/runs"), None),
        ("GET", format!("/v1/task-runs/{run_id}/workspace"), None),
        (
            "POST",
            format!("/v1/task-runs/{run_id}/change-set"),
            Some(r#"{"commit":"0123456789abcdef0123456789abcdef01234567"}"#),
        ),
        (
            "POST",
            format!("/v1/task-runs/{run_id}/workspace/tools"),
            Some(r#"{"tool":"read_file","path":"a"}"#),
        ),
        (
            "POST",
            format!("/v1/projects/{doomed}/repo-tokens"),
            Some(r#"{"scope":"read"}"#),
        ),
        ("POST", format!("/v1/projects/{doomed}/edit-sessions"), None),
    ] {
        let (s, v) = b.request(method, &path, Some(&b.token), body).await;
        assert_eq!(s, 404, "{method} {path} after the deletion was accepted: {v}");
    }
    assert!(
        b.get("/v1/projects")
            .await
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["id"] != doomed.as_str()),
        "a project being deleted is not listed"
    );
    // The workflow records `project.deleted` once the repositories, objects and rows are gone.
    wait_until("the project to be deleted", Duration::from_secs(60), async || {
        let events = b.get(&format!("/v1/events?entity={doomed}&limit=1000")).await;
        if events
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "project.deleted")
        {
            Ok(())
        } else {
            Err(events)
        }
    })
    .await;
    assert!(!git_root.join(format!("{doomed}.git")).exists());
    assert!(!git_root.join(format!("{ws}.git")).exists());
    let objects = b.dir.path().join("data").join("objects").join("source");
    assert_eq!(
        files_under(&objects.join(&doomed)),
        0,
        "no source object of the deleted project is left"
    );
    // The other project is untouched.
    assert!(git_root.join(format!("{kept}.git")).is_dir());
    assert!(
        files_under(&objects.join(&kept)) >= 3,
        "the kept project's index, manifest and blob remain"
    );
    assert_eq!(b.get(&format!("/v1/projects/{kept}")).await["status"], "ready");
}

/// Regular files below `dir` (the local object store leaves empty directories behind).
fn files_under(dir: &std::path::Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| if e.path().is_dir() { files_under(&e.path()) } else { 1 })
        .sum()
}
