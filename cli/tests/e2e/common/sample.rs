//! The sample app of `tests/fixtures/sample-app` as a project's canonical source, and the steps a
//! test takes to get a Change's ChangeSets published and verified through the API.

use super::{Belay, ready_project, wait_until_every};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let target = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &target);
        } else {
            std::fs::copy(&p, &target).unwrap();
        }
    }
}

/// Where the bare repository `name` lives.
pub fn repo(b: &Belay, name: &str) -> PathBuf {
    b.dir
        .path()
        .join("data")
        .join("git")
        .join("belay")
        .join(format!("{name}.git"))
}

/// A ready project whose canonical `main` holds the sample app (pushed by the test as a
/// fast-forward of S0, the project row brought in line).
pub async fn sample_project(b: &Belay) -> String {
    let id = ready_project(b, "sample").await;
    let bare = repo(b, &id);
    let work = b.dir.path().join(format!("seed-{id}"));
    let status = Command::new("git")
        .arg("clone")
        .arg("-q")
        .arg(&bare)
        .arg(&work)
        .status()
        .unwrap();
    assert!(status.success());
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sample-app"),
        &work,
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
    let commit = git(&work, &["rev-parse", "HEAD"]);
    let tree = git(&work, &["rev-parse", "HEAD^{tree}"]);
    let store = belay_store::Store::connect(&b.database_url).await.unwrap();
    store.seed_canonical(&id, &commit, &tree).await.unwrap();
    id
}

pub async fn change(b: &Belay, project: &str, body: Value) -> String {
    let (s, c) = b.post(&format!("/v1/projects/{project}/changes"), body).await;
    assert_eq!(s, 201, "{c}");
    c["id"].as_str().unwrap().to_string()
}

/// A Task whose run writes files in its workspace and publishes; returns the ChangeSet.
pub async fn task(b: &Belay, change: &str, key: &str, edits: &[Value]) -> Value {
    let (s, t) = b
        .post(
            &format!("/v1/changes/{change}/tasks"),
            json!({"key": key, "kind": "implement", "title": format!("task {key}"), "semanticResources": [], "dependencies": []}),
        )
        .await;
    assert_eq!(s, 201, "{t}");
    let (s, r) = b
        .post(&format!("/v1/tasks/{}/runs", t["id"].as_str().unwrap()), json!({}))
        .await;
    assert_eq!(s, 201, "{r}");
    let run = r["id"].as_str().unwrap().to_string();
    for e in edits {
        let (s, v) = b.post(&format!("/v1/task-runs/{run}/workspace/tools"), e.clone()).await;
        assert_eq!(s, 200, "{e} answered {v}");
    }
    let (s, cs) = b
        .post(
            &format!("/v1/task-runs/{run}/workspace/publish"),
            json!({"message": format!("task {key}"), "contractChanges": []}),
        )
        .await;
    assert_eq!(s, 201, "{cs}");
    cs
}

pub fn write(path: &str, content: &str) -> Value {
    json!({"tool": "write_file", "path": path, "content": content})
}

/// Starts verification of a Change; the Candidate's id.
pub async fn start_verification(b: &Belay, change: &str) -> String {
    let (s, k) = b.post(&format!("/v1/changes/{change}/verification"), json!({})).await;
    assert_eq!(s, 201, "{k}");
    k["id"].as_str().unwrap().to_string()
}

/// Waits until the Candidate is in one of `statuses`.
pub async fn wait_candidate(b: &Belay, id: &str, statuses: &[&str]) -> Value {
    let what = format!("candidate {id} to reach {statuses:?}");
    wait_until_every(
        &what,
        Duration::from_secs(400),
        Duration::from_millis(200),
        async || {
            let k = b.get(&format!("/v1/candidates/{id}")).await;
            if statuses.contains(&k["status"].as_str().unwrap_or_default()) {
                Ok(k)
            } else {
                Err(k)
            }
        },
    )
    .await
}

/// Every move canonical `main` made, from its reflog: `(old, new, message)`.
pub fn reflog(b: &Belay, project: &str) -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(repo(b, project).join("logs/refs/heads/main")).unwrap_or_default();
    text.lines()
        .map(|l| {
            let mut parts = l.splitn(3, ' ');
            let old = parts.next().unwrap_or_default().to_owned();
            let new = parts.next().unwrap_or_default().to_owned();
            let message = l.split_once('\t').map(|(_, m)| m.to_owned()).unwrap_or_default();
            (old, new, message)
        })
        .collect()
}

/// Canonical `main` was never moved by anything but a fast-forward: every move in its reflog
/// goes from a commit to a descendant of it. Answers the moves.
pub fn assert_only_fast_forwards(b: &Belay, project: &str) -> Vec<(String, String, String)> {
    let moves = reflog(b, project);
    assert!(!moves.is_empty(), "canonical keeps a reflog");
    let bare = repo(b, project);
    for (old, new, message) in &moves {
        if old.chars().all(|c| c == '0') {
            continue; // the creation of main at provisioning
        }
        let ok = Command::new("git")
            .arg("-C")
            .arg(&bare)
            .args(["merge-base", "--is-ancestor", old, new])
            .status()
            .unwrap()
            .success();
        assert!(ok, "main moved from {old} to {new} ({message}), not a fast-forward");
    }
    let head = git(&bare, &["rev-parse", "main"]);
    assert_eq!(
        moves.last().map(|m| m.1.as_str()),
        Some(head.as_str()),
        "the reflog ends at main"
    );
    moves
}
