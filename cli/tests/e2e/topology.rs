//! belay split across hosts: every pool but `git` on a data directory of its own, reaching the rest
//! only through PostgreSQL, Temporal, an S3 object store (moto's S3 server over HTTPS with a CA
//! this test makes) and smart HTTP; adapters that die with their harness worker; and the
//! configuration a worker cannot use refused before it serves anything.

use crate::common::sample::{change, git, repo, sample_project, start_verification, task, wait_candidate, write};
use crate::common::{BELAY, Belay, wait_for, wait_until_every};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

#[path = "../../src/moto.rs"]
mod moto;

/// moto's S3 server for this test (BELAY_MOTO_SERVER, else the one scripts/setup.sh installs),
/// and the directory of its certificates, removed after it stops.
struct S3(moto::Moto, #[allow(dead_code)] tempfile::TempDir);

impl S3 {
    fn start(bucket: &str) -> S3 {
        let server = std::env::var_os("BELAY_MOTO_SERVER")
            .map(PathBuf::from)
            .unwrap_or_else(moto::default_moto_server);
        let dir = tempfile::tempdir().unwrap();
        let moto = moto::Moto::start(dir.path(), &server, bucket).unwrap();
        S3(moto, dir)
    }

    fn keys(&self) -> Vec<String> {
        self.0.keys().unwrap()
    }

    /// What a belay process needs to keep its objects under `prefix` of the bucket.
    fn env(&self, prefix: &str) -> Vec<(String, String)> {
        [
            ("BELAY_OBJECT_STORE", format!("s3://{}/{prefix}", self.0.bucket)),
            ("AWS_ENDPOINT_URL", self.0.endpoint.clone()),
            ("AWS_REGION", "us-east-1".to_owned()),
            ("AWS_ACCESS_KEY_ID", "test".to_owned()),
            ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
            ("AWS_CA_BUNDLE", self.0.ca.display().to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }
}

/// Every file under `dir` (none when it does not exist).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if e.file_type().unwrap().is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// `belay api` with the git pool on one data directory; the workflows and db pools, the harness,
/// sandbox, llm and browser pools each on a data directory of their own; PostgreSQL and S3
/// (HTTPS, a private CA) under all of them. A job runs, a project is provisioned, a Change is
/// verified and promoted, every object is in the bucket, and no data directory but the git
/// pool's holds a repository or an object, or any file at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pools_on_hosts_of_their_own_share_only_the_database_temporal_s3_and_smart_http() {
    let s3 = S3::start("belay-topology");
    let s3_env = s3.env("deploy-1");
    let env: Vec<(&str, &str)> = s3_env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut b = Belay::start_postgres_with_sandbox_env(&env, "git").await;
    let mut own_dirs = Vec::new();
    for pools in ["workflows,db", "harness", "sandbox", "llm", "browser"] {
        let data = b.dir.path().join(format!("data-{}", pools.replace(',', "-")));
        std::fs::create_dir_all(&data).unwrap();
        b.start_extra_worker(pools, &[("BELAY_DATA_DIR", data.to_str().unwrap())]);
        own_dirs.push(data);
    }

    // A job: its adapter's artifact goes to the bucket.
    b.catalogue().await;
    b.harness(
        "h",
        1,
        r#"echo topology > out.txt; printf '{"status":"completed","loaded":true,"artifacts":["out.txt"]}' > "$BELAY_MANIFEST""#,
    )
    .await;
    let job = b.launch("h").await;
    let job_id = job["id"].as_str().unwrap().to_owned();
    let done = b
        .wait_status(&job_id, &["completed", "failed"], Duration::from_secs(120))
        .await;
    assert_eq!(done["status"], "completed", "{done}");

    // A sandboxed adapter, on the harness pool's host: a one-off container that mounts nothing
    // of the worker's data directory; its artifact goes to the bucket too.
    let (s, v) = b
        .post(
            "/v1/harnesses",
            json!({"name": "hs", "maxParallelism": 1, "adapter": {"kind": "script", "timeoutSeconds": 120, "sandbox": true,
                "script": r#"test -f /.dockerenv && echo boxed > out.txt; printf '{"status":"completed","loaded":true,"artifacts":["out.txt"]}' > "$BELAY_MANIFEST""#}}),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let boxed = b.launch("hs").await;
    let boxed_id = boxed["id"].as_str().unwrap().to_owned();
    let done = b
        .wait_status(&boxed_id, &["completed", "failed"], Duration::from_secs(120))
        .await;
    assert_eq!(done["status"], "completed", "{done}");

    // A project provisioned, a Change verified and promoted (low risk: at once).
    let project = sample_project(&b).await;
    let c = change(
        &b,
        &project,
        json!({"goal": "Add alpha", "acceptanceCriteria": [], "invariants": [], "riskTier": "low"}),
    )
    .await;
    task(
        &b,
        &c,
        "t1",
        &[write("src/alpha.ts", "export const alpha = \"alpha\";\n")],
    )
    .await;
    let cand = start_verification(&b, &c).await;
    let k = wait_candidate(&b, &cand, &["promoted", "rejected", "stale"]).await;
    assert_eq!(k["status"], "promoted", "{k:#}");
    let tree = k["composedTree"].as_str().unwrap().to_owned();
    wait_for("release.started", Duration::from_secs(60), || async {
        let ev = b.get(&format!("/v1/events?entity={project}")).await;
        ev.as_array().unwrap().iter().any(|e| e["kind"] == "release.started")
    })
    .await;
    assert_eq!(
        git(&repo(&b, &project), &["rev-parse", "main"]),
        k["composedCommit"].as_str().unwrap()
    );

    // Every object is in the bucket, under the deployment's prefix.
    let keys = s3.keys();
    let has = |key: &str| keys.iter().any(|k| k == key);
    let starts = |prefix: &str| keys.iter().any(|k| k.starts_with(prefix));
    assert!(keys.iter().all(|k| k.starts_with("deploy-1/")), "{keys:#?}");
    assert!(has(&format!("deploy-1/artifacts/{job_id}/a1/out.txt")), "{keys:#?}");
    assert!(has(&format!("deploy-1/artifacts/{boxed_id}/a1/out.txt")), "{keys:#?}");
    assert!(
        has(&format!("deploy-1/source/{project}/{tree}/index.json")),
        "{keys:#?}"
    );
    assert!(has(&format!("deploy-1/source/{project}/{tree}/code.json")), "{keys:#?}");
    assert!(
        starts(&format!("deploy-1/source/{project}/patches/changesets/")),
        "{keys:#?}"
    );
    assert!(starts(&format!("deploy-1/evidence/{cand}/")), "{keys:#?}");
    // The API reads them back from there: the run's artifact through the API.
    let runs = b.get(&format!("/v1/runs?jobId={job_id}")).await;
    let run_id = runs[0]["id"].as_str().unwrap();
    let resp = b
        .http
        .get(format!("{}/v1/runs/{run_id}/artifact?path=out.txt", b.url))
        .bearer_auth(&b.token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.text().await.unwrap(), "topology\n");

    // Nothing of it on any disk: the git pool's data directory holds the repositories only, the
    // other pools' hold nothing at all.
    let data = b.dir.path().join("data");
    assert!(data.join("git").is_dir());
    assert_eq!(files_under(&data.join("objects")), Vec::<PathBuf>::new());
    for dir in &own_dirs {
        assert_eq!(files_under(dir), Vec::<PathBuf>::new(), "{}", dir.display());
        assert!(
            !dir.join("git").exists() && !dir.join("objects").exists(),
            "{}",
            dir.display()
        );
    }
}

/// The pids of the live (not zombie) processes in process group `pgid`.
fn live_in_group(pgid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp …
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string() {
            out.push(pid);
        }
    }
    out
}

/// A harness worker killed with SIGKILL while its adapter runs takes the adapter's whole process
/// group with it within a second, and the job's retry, on another harness worker, runs alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_adapter_dies_with_its_harness_worker_and_the_retry_runs_alone() {
    let mut b = Belay::start().await;
    b.kill_worker();
    b.worker_pools = Some("workflows,db,git,llm".into());
    b.start_worker().await;
    let first = b.start_extra_worker("harness", &[]);
    let marks = b.dir.path().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let m = marks.display();
    // The first run starts a child and waits; a run started once `go` exists looks for live
    // processes of the earlier run, writes what it found and completes.
    let script = format!(
        r#"echo $$ >> {m}/leaders
if [ -e {m}/go ]; then
  for p in $(cat {m}/children); do kill -0 "$p" 2>/dev/null && echo "$p" >> {m}/orphans; done
  touch {m}/checked
  printf '{{"status":"completed","loaded":true,"artifacts":[]}}' > "$BELAY_MANIFEST"
  exit 0
fi
sleep 300 &
echo $! >> {m}/children
wait"#
    );
    b.catalogue().await;
    b.harness("slow", 1, &script).await;
    let job = b.launch("slow").await;
    let job_id = job["id"].as_str().unwrap().to_owned();
    let read_pids = |name: &str| -> Vec<i32> {
        std::fs::read_to_string(marks.join(name))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    };
    wait_for("the adapter's child", Duration::from_secs(60), || async {
        !read_pids("children").is_empty()
    })
    .await;
    let leader = read_pids("leaders")[0];
    let child = read_pids("children")[0];
    assert!(
        live_in_group(leader).len() >= 2,
        "the adapter and its child run in one group"
    );
    assert!(live_in_group(leader).contains(&child));

    b.kill_extra_worker(first);
    let what = "the adapter's group to go within a second of its worker";
    wait_until_every(what, Duration::from_secs(1), Duration::from_millis(10), async || {
        let live = live_in_group(leader);
        if live.is_empty() {
            Ok(())
        } else {
            Err(format!("{live:?}"))
        }
    })
    .await;

    std::fs::write(marks.join("go"), "").unwrap();
    b.start_extra_worker("harness", &[]);
    let done = b
        .wait_status(&job_id, &["completed", "failed"], Duration::from_secs(120))
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(marks.join("checked").exists());
    assert_eq!(
        read_pids("orphans"),
        Vec::<i32>::new(),
        "the retry ran beside the first run"
    );
    assert_eq!(read_pids("leaders").len(), 2, "one run, then its retry");
}

fn belay_fails(args: &[&str], env: &[(&str, &str)]) -> (String, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BELAY)
        .args(args)
        .current_dir(dir.path())
        .env("DATABASE_URL", format!("sqlite:{}", dir.path().join("b.db").display()))
        .env("BELAY_TEMPORAL_ADDRESS", "127.0.0.1:1")
        .env("BELAY_DATA_DIR", dir.path().join("data"))
        .env_remove("BELAY_SANDBOX_GIT_URL")
        .env_remove("BELAY_GIT_TOKEN_SECRET")
        .env_remove("BELAY_OBJECT_STORE")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success(), "{args:?} succeeded");
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    let path = dir.path().to_path_buf();
    (stderr, path, dir)
}

/// A value a process cannot use stops it with a non-zero exit and one line naming the variable
/// and the rule, before it serves anything: an unknown object-store scheme (never taken for a
/// directory), a sandbox or browser pool without its git URL or secret.
#[test]
fn configuration_a_process_cannot_use_stops_it_in_one_line() {
    let (e, cwd, _d) = belay_fails(&["api", "--port", "0"], &[("BELAY_OBJECT_STORE", "gs://bucket/x")]);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.contains("BELAY_OBJECT_STORE \"gs://bucket/x\": unknown scheme \"gs\""),
        "{e}"
    );
    assert!(!cwd.join("gs:").exists());

    let (e, cwd, _d) = belay_fails(&["worker", "--pools", "db"], &[("BELAY_OBJECT_STORE", "s3:bucket")]);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("BELAY_OBJECT_STORE \"s3:bucket\""), "{e}");
    assert!(!cwd.join("s3:bucket").exists());

    let (e, _, _d) = belay_fails(&["worker", "--pools", "sandbox"], &[("BELAY_GIT_TOKEN_SECRET", "s")]);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("BELAY_SANDBOX_GIT_URL is unset: the sandbox pool"), "{e}");

    let (e, _, _d) = belay_fails(
        &["worker", "--pools", "db,browser"],
        &[("BELAY_SANDBOX_GIT_URL", "http://belay-git:8080")],
    );
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("BELAY_GIT_TOKEN_SECRET is unset: the browser pool"), "{e}");
}
