//! The integration harness: a real Temporal dev server, a real `belay` API process and worker
//! process on a fresh SQLite database, spoken to over real HTTP. Everything it starts is stopped
//! when the value is dropped (processes by pid, files with their temp dir).

#![allow(dead_code)]

pub mod fake_anthropic;
pub mod sample;

use serde_json::{Value, json};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub const BELAY: &str = env!("CARGO_BIN_EXE_belay");

/// Every pool but the two that need Sandboxes (and so a Sandbox network's git URL).
pub const WITHOUT_SANDBOXES: &str = "workflows,db,git,llm,harness";

pub use belay_testkit::{free_port, poll_until, temporal_bin, wait_until, wait_until_every};

/// Waits until `cond` holds, for a condition with nothing to show but yes or no
/// ([`wait_until`] for one that has).
pub async fn wait_for<F, Fut>(what: &str, limit: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    wait_until(what, limit, async || if cond().await { Ok(()) } else { Err("not yet") }).await
}

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A Temporal dev server (in memory) on free ports, with belay's search attributes.
pub type Temporal = belay_testkit::TemporalDevServer;

/// Starts a [`Temporal`] dev server logging into `dir`.
pub fn temporal(dir: &Path) -> Temporal {
    temporal_without(dir, &[])
}

/// [`temporal`] with belay's search attributes but those named in `missing` registered: a server
/// that refuses to start a workflow carrying one of them.
pub fn temporal_without(dir: &Path, missing: &[&str]) -> Temporal {
    let registered: Vec<(&str, &str)> = belay_workflows::search::ALL
        .into_iter()
        .filter(|(name, _)| !missing.contains(name))
        .collect();
    Temporal::start(dir, &registered)
}

/// belay's API and worker processes against one database and one Temporal server.
pub struct Belay {
    pub dir: tempfile::TempDir,
    pub temporal: Temporal,
    pub database_url: String,
    pub url: String,
    pub token: String,
    api: Option<Proc>,
    worker: Option<Proc>,
    pub http: reqwest::Client,
    extra_env: Vec<(String, String)>,
    api_port: u16,
    /// Where the API serves `/git/…` only, on the Sandbox network's host address.
    pub git_port: u16,
    /// `--pools` of the main worker process (every pool when `None`).
    pub worker_pools: Option<String>,
    /// Further worker processes ([`Belay::start_extra_worker`]), stopped with the rest.
    extra_workers: Vec<Proc>,
    /// Declared last so the processes stop before the Sandboxes and the network go.
    pub sandbox: Option<SandboxNet>,
}

impl Drop for Belay {
    /// A failing test shows the tail of every process log before the temp dir goes.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let Ok(entries) = std::fs::read_dir(self.dir.path()) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.ends_with(".log") {
                let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(40).collect();
                eprintln!("--- last lines of {name} ---");
                for line in tail.iter().rev() {
                    eprintln!("{line}");
                }
            }
        }
    }
}

/// A Docker network of this test's own on which its Sandboxes sit, and the label its containers
/// carry. Dropping it removes both.
pub struct SandboxNet {
    pub network: String,
    pub gateway: String,
    pub tag: String,
}

impl SandboxNet {
    pub fn create() -> SandboxNet {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let tag = format!(
            "{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        );
        let network = format!("belay-test-ws-{tag}");
        let out = Command::new("docker")
            .args(["network", "create", "--internal", "--label", "belay.test=1"])
            .args(["--label", &format!("belay.test.run={tag}"), &network])
            .output()
            .expect("docker");
        assert!(
            out.status.success(),
            "docker network create: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = Command::new("docker")
            .args([
                "network",
                "inspect",
                &network,
                "-f",
                "{{(index .IPAM.Config 0).Gateway}}",
            ])
            .output()
            .unwrap();
        let gateway = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        assert!(!gateway.is_empty(), "the network has no gateway");
        SandboxNet { network, gateway, tag }
    }

    /// The ids of this test's Sandbox containers.
    pub fn containers(&self) -> Vec<String> {
        let out = Command::new("docker")
            .args(["ps", "-aq", "--filter", &format!("label=belay.test.run={}", self.tag)])
            .output()
            .unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for SandboxNet {
    fn drop(&mut self) {
        let ids = self.containers();
        if !ids.is_empty() {
            let _ = Command::new("docker").args(["rm", "-f"]).args(&ids).output();
        }
        let _ = Command::new("docker").args(["network", "rm", &self.network]).output();
    }
}

impl Belay {
    /// belay on a fresh SQLite database.
    pub async fn start() -> Belay {
        Self::start_with_env(&[]).await
    }

    /// belay on a fresh SQLite database, its processes given these extra environment variables.
    pub async fn start_with_env(env: &[(&str, &str)]) -> Belay {
        let dir = tempfile::tempdir().unwrap();
        let database_url = format!("sqlite:{}", dir.path().join("belay.db").display());
        let extra = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Self::start_on(dir, database_url, extra).await
    }

    /// belay on a fresh SQLite database with the sandbox pool on a Docker network of its own; the
    /// API listens where that network's Sandboxes reach it.
    pub async fn start_with_sandbox() -> Belay {
        let dir = tempfile::tempdir().unwrap();
        let database_url = format!("sqlite:{}", dir.path().join("belay.db").display());
        Self::start_full(dir, database_url, vec![], Some(SandboxNet::create())).await
    }

    /// As [`Belay::start_with_sandbox`], its processes given these extra environment variables,
    /// the main worker running only `pools` when given.
    pub async fn start_with_sandbox_env(env: &[(&str, &str)], pools: Option<&str>) -> Belay {
        let dir = tempfile::tempdir().unwrap();
        let database_url = format!("sqlite:{}", dir.path().join("belay.db").display());
        let extra = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let temporal = temporal(dir.path());
        let mut b = Self::prepare(dir, temporal, database_url, extra, Some(SandboxNet::create()));
        b.worker_pools = pools.map(str::to_owned);
        b.start_api().await;
        b.start_worker().await;
        b
    }

    /// belay on a fresh PostgreSQL database (`BELAY_TEST_POSTGRES_URL`).
    pub async fn start_postgres() -> Belay {
        let dir = tempfile::tempdir().unwrap();
        let db = belay_store::testing::fresh(belay_store::Backend::Postgres).await;
        db.store.close().await;
        Self::start_on(dir, db.url.clone(), vec![]).await
    }

    /// belay on a fresh PostgreSQL database with the sandbox pool on a Docker network of its own,
    /// its processes given `env`, the main worker (and the API, on the same data dir) running
    /// only `pools`.
    pub async fn start_postgres_with_sandbox_env(env: &[(&str, &str)], pools: &str) -> Belay {
        let dir = tempfile::tempdir().unwrap();
        let db = belay_store::testing::fresh(belay_store::Backend::Postgres).await;
        db.store.close().await;
        let extra = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let temporal = temporal(dir.path());
        let mut b = Self::prepare(dir, temporal, db.url.clone(), extra, Some(SandboxNet::create()));
        b.worker_pools = Some(pools.to_owned());
        b.start_api().await;
        b.start_worker().await;
        b
    }

    /// A temp dir and a Temporal dev server in it, for a test that puts something in front of the
    /// server before belay starts ([`Belay::start_on_temporal`]).
    pub fn temporal_first() -> (tempfile::TempDir, Temporal) {
        let dir = tempfile::tempdir().unwrap();
        let temporal = temporal(dir.path());
        (dir, temporal)
    }

    /// belay on a fresh SQLite database and the given Temporal server, its processes given `env`
    /// (which may name another `BELAY_TEMPORAL_ADDRESS`).
    pub async fn start_on_temporal(dir: tempfile::TempDir, temporal: Temporal, env: &[(&str, &str)]) -> Belay {
        let database_url = format!("sqlite:{}", dir.path().join("belay.db").display());
        let extra = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut b = Self::prepare(dir, temporal, database_url, extra, None);
        b.start_api().await;
        b.start_worker().await;
        b
    }

    async fn start_on(dir: tempfile::TempDir, database_url: String, extra_env: Vec<(String, String)>) -> Belay {
        Self::start_full(dir, database_url, extra_env, None).await
    }

    async fn start_full(
        dir: tempfile::TempDir,
        database_url: String,
        extra_env: Vec<(String, String)>,
        sandbox: Option<SandboxNet>,
    ) -> Belay {
        let temporal = temporal(dir.path());
        let mut b = Self::prepare(dir, temporal, database_url, extra_env, sandbox);
        b.start_api().await;
        b.start_worker().await;
        b
    }

    /// Migrates, creates the `tester` account, and starts nothing.
    fn prepare(
        dir: tempfile::TempDir,
        temporal: Temporal,
        database_url: String,
        extra_env: Vec<(String, String)>,
        sandbox: Option<SandboxNet>,
    ) -> Belay {
        let out = Command::new(BELAY)
            .args(["migrate", "--database-url", &database_url])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "migrate: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let token = create_operator(&database_url, "tester");
        Belay {
            dir,
            temporal,
            database_url,
            url: String::new(),
            token,
            api: None,
            worker: None,
            http: reqwest::Client::new(),
            extra_env,
            api_port: free_port(),
            git_port: free_port(),
            worker_pools: None,
            extra_workers: Vec::new(),
            sandbox,
        }
    }

    fn env(&self, cmd: &mut Command) {
        cmd.env("DATABASE_URL", &self.database_url)
            .env("BELAY_TEMPORAL_ADDRESS", &self.temporal.address)
            .env("BELAY_DATA_DIR", self.dir.path().join("data"))
            .env("BELAY_GIT_TOKEN_SECRET", "a-test-secret-of-at-least-thirty-two-bytes")
            .env("RUST_LOG", "info,sqlx=warn,temporalio_sdk_core=warn")
            // Many tests walk every route with bad tokens from one address, more failures than
            // the failed-authentication bound answers at once; the bound's own test (accounts.rs)
            // runs with the default (an empty value).
            .env("BELAY_AUTH_FAILURES_FREE", "1000000")
            .envs(self.extra_env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        if let Some(net) = &self.sandbox {
            cmd.env("BELAY_SANDBOX_NETWORK", &net.network)
                .env(
                    "BELAY_SANDBOX_LABELS",
                    format!("belay.test=1,belay.test.run={}", net.tag),
                )
                .env(
                    "BELAY_SANDBOX_GIT_URL",
                    format!("http://{}:{}", net.gateway, self.git_port),
                )
                // The whole API on loopback; the Sandbox network sees /git only.
                .env("BELAY_API_GIT_LISTEN", format!("{}:{}", net.gateway, self.git_port));
        }
    }

    async fn start_api(&mut self) {
        let port = self.api_port;
        let log = std::fs::File::create(self.dir.path().join("api.log")).unwrap();
        let mut cmd = Command::new(BELAY);
        self.env(&mut cmd);
        cmd.args(["api", "--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(log);
        self.api = Some(Proc(cmd.spawn().unwrap()));
        self.url = format!("http://127.0.0.1:{port}");
        let http = self.http.clone();
        let url = self.url.clone();
        wait_for("the API to answer", Duration::from_secs(60), || {
            let http = http.clone();
            let url = url.clone();
            async move { http.get(format!("{url}/v1/healthz")).send().await.is_ok() }
        })
        .await;
    }

    /// Starts (or restarts) the worker process with every pool (every pool that can run: without
    /// a Sandbox network, [`WITHOUT_SANDBOXES`]).
    pub async fn start_worker(&mut self) {
        let n = std::fs::read_dir(self.dir.path())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("worker"))
            .count();
        let log = std::fs::File::create(self.dir.path().join(format!("worker-{n}.log"))).unwrap();
        let mut cmd = Command::new(BELAY);
        self.env(&mut cmd);
        cmd.arg("worker").stdout(Stdio::null()).stderr(log);
        match (&self.worker_pools, &self.sandbox) {
            (Some(pools), _) => {
                cmd.args(["--pools", pools]);
            }
            // Without a Sandbox network there is no git URL for Sandboxes, and a sandbox or
            // browser pool would refuse to start.
            (None, None) => {
                cmd.args(["--pools", WITHOUT_SANDBOXES]);
            }
            (None, Some(_)) => {}
        }
        self.worker = Some(Proc(cmd.spawn().unwrap()));
    }

    pub fn worker_pid(&self) -> u32 {
        self.worker.as_ref().unwrap().0.id()
    }

    /// SIGKILL to the worker: no chance to drain.
    pub fn kill_worker(&mut self) {
        if let Some(mut p) = self.worker.take() {
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(p.0.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            )
            .unwrap();
            let _ = p.0.wait();
            std::mem::forget(p);
        }
    }

    /// Starts one more worker process on the same database, Temporal and Docker network, running
    /// only `pools`, with `env` on top of the rest. Returns its index for
    /// [`Belay::kill_extra_worker`].
    pub fn start_extra_worker(&mut self, pools: &str, env: &[(&str, &str)]) -> usize {
        let n = self.extra_workers.len();
        let log = std::fs::File::create(self.dir.path().join(format!("extra-worker-{n}.log"))).unwrap();
        let mut cmd = Command::new(BELAY);
        self.env(&mut cmd);
        cmd.envs(env.iter().copied())
            .args(["worker", "--pools", pools])
            .stdout(Stdio::null())
            .stderr(log);
        self.extra_workers.push(Proc(cmd.spawn().unwrap()));
        n
    }

    pub fn extra_worker_pid(&self, n: usize) -> u32 {
        self.extra_workers[n].0.id()
    }

    /// Waits until extra worker `n` has exited by itself (a failpoint killed it).
    pub async fn wait_extra_worker_exit(&mut self, n: usize, limit: Duration) {
        let what = format!("extra worker {n} to exit");
        wait_until(&what, limit, async || {
            match self.extra_workers[n].0.try_wait().unwrap() {
                Some(_) => Ok(()),
                None => Err("it still runs"),
            }
        })
        .await;
    }

    /// SIGKILL to an extra worker.
    pub fn kill_extra_worker(&mut self, n: usize) {
        let p = &mut self.extra_workers[n].0;
        let _ = p.kill();
        let _ = p.wait();
    }

    /// Starts another `belay api` process over the same database and Temporal server (stopped
    /// when the value is dropped); its base URL is [`SecondApi::url`].
    pub async fn start_second_api(&self) -> SecondApi {
        let port = free_port();
        let log = std::fs::File::create(self.dir.path().join(format!("api-{port}.log"))).unwrap();
        let mut cmd = Command::new(BELAY);
        self.env(&mut cmd);
        cmd.args(["api", "--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(log);
        let process = Proc(cmd.spawn().unwrap());
        let url = format!("http://127.0.0.1:{port}");
        let http = self.http.clone();
        let probe = url.clone();
        wait_for("the second API to answer", Duration::from_secs(60), || {
            let http = http.clone();
            let url = probe.clone();
            async move { http.get(format!("{url}/v1/healthz")).send().await.is_ok() }
        })
        .await;
        SecondApi { _process: process, url }
    }

    pub async fn request(&self, method: &str, path: &str, token: Option<&str>, body: Option<&str>) -> (u16, Value) {
        let mut r = self
            .http
            .request(method.parse().unwrap(), format!("{}{path}", self.url));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        if let Some(b) = body {
            r = r.header("content-type", "application/json").body(b.to_string());
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    pub async fn get(&self, path: &str) -> Value {
        let (s, v) = self.request("GET", path, Some(&self.token), None).await;
        assert_eq!(s, 200, "GET {path}: {v}");
        v
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.request("POST", path, Some(&self.token), Some(&body.to_string()))
            .await
    }

    /// Adds a harness whose adapter is `script`.
    pub async fn harness(&self, name: &str, cap: i64, script: &str) {
        let (s, v) = self
            .post("/v1/harnesses", json!({"name": name, "maxParallelism": cap, "adapter": {"kind": "script", "script": script, "timeoutSeconds": 120}}))
            .await;
        assert_eq!(s, 201, "{v}");
    }

    /// The standard catalogue: case `c@1.0.0/default`, priced model `m`.
    pub async fn catalogue(&self) {
        let (s, v) = self
            .post(
                "/v1/test-cases",
                json!({"slug": "c", "version": "1.0.0", "testType": "standard", "variants": ["default"]}),
            )
            .await;
        assert_eq!(s, 201, "{v}");
        let (s, v) = self
            .post("/v1/models", json!({"id": "m", "contextWindow": 200000, "listPrice": {"inputPerMtokUsd": 3.0, "outputPerMtokUsd": 15.0}}))
            .await;
        assert_eq!(s, 201, "{v}");
    }

    pub async fn launch(&self, harness: &str) -> Value {
        let (s, v) = self
            .post(
                "/v1/jobs",
                json!({"case": {"slug": "c", "version": "1.0.0", "variant": "default"}, "combination": {"kind": "harness", "harness": harness, "model": "m"}}),
            )
            .await;
        assert_eq!(s, 201, "{v}");
        v
    }

    pub async fn job(&self, id: &str) -> Value {
        self.get(&format!("/v1/jobs/{id}")).await
    }

    pub async fn wait_status(&self, id: &str, statuses: &[&str], limit: Duration) -> Value {
        let what = format!("job {id} to reach {statuses:?} (logs in {})", self.dir.path().display());
        wait_until(&what, limit, async || {
            let j = self.job(id).await;
            if statuses.contains(&j["status"].as_str().unwrap()) {
                Ok(j)
            } else {
                Err(format!("it is {}", j["status"]))
            }
        })
        .await
    }

    pub async fn transitions(&self) -> Vec<Value> {
        self.get("/v1/job-transitions?limit=10000")
            .await
            .as_array()
            .unwrap()
            .clone()
    }

    pub async fn store(&self) -> belay_store::Store {
        belay_store::Store::connect(&self.database_url).await.unwrap()
    }
}

/// Creates a project named `name` and waits until it is ready; its id.
pub async fn ready_project(b: &Belay, name: &str) -> String {
    ready_project_of(b, json!({ "name": name })).await
}

/// Creates the project `body` describes and waits until it is ready (failing at once if it
/// failed); its id.
pub async fn ready_project_of(b: &Belay, body: Value) -> String {
    let (s, p) = b.post("/v1/projects", body).await;
    assert_eq!(s, 201, "{p}");
    let id = p["id"].as_str().unwrap().to_string();
    wait_until(
        &format!("project {id} to be ready"),
        Duration::from_secs(60),
        async || {
            let p = b.get(&format!("/v1/projects/{id}")).await;
            assert!(p["status"] != "failed", "{p}");
            if p["status"] == "ready" { Ok(()) } else { Err(p) }
        },
    )
    .await;
    id
}

/// A further `belay api` process ([`Belay::start_second_api`]).
pub struct SecondApi {
    _process: Proc,
    pub url: String,
}

/// A member account's token.
pub fn create_account(database_url: &str, name: &str) -> String {
    account(database_url, name, false)
}

/// An operator account's token.
pub fn create_operator(database_url: &str, name: &str) -> String {
    account(database_url, name, true)
}

fn account(database_url: &str, name: &str, operator: bool) -> String {
    let mut cmd = Command::new(BELAY);
    cmd.args(["account", "create", name, "--database-url", database_url]);
    if operator {
        cmd.arg("--operator");
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "account create: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Replays the history of the closed workflow `workflow_id` against the current code. With
/// `BELAY_RECORD_HISTORIES=DIR` it is also written to `DIR/<name>.json`, but only when no history
/// of that name exists: recorded histories are append-only (see the worker crate's replay test), so
/// a change to a workflow's commands records under a new name (`…-v3`) and the old file stays.
pub async fn replays(b: &Belay, name: &str, workflow_id: &str) -> Vec<u8> {
    let json = completed_history(b, workflow_id).await;
    replays_json(name, json).await
}

/// The history of a workflow that completed, as JSON.
pub async fn completed_history(b: &Belay, workflow_id: &str) -> Vec<u8> {
    let client = belay_client::connect(&b.temporal.address, "default", "test")
        .await
        .unwrap();
    let json = belay_client::closed_history_json(&client, workflow_id, Duration::from_secs(30))
        .await
        .unwrap();
    assert!(
        String::from_utf8_lossy(&json).contains("WorkflowExecutionCompletedEventAttributes"),
        "{workflow_id} never completed"
    );
    json
}

/// [`replays`] for a history already fetched.
pub async fn replays_json(name: &str, json: Vec<u8>) -> Vec<u8> {
    belay_client::replay::replay_json(&json)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    record_history(name, &json);
    json
}

/// The activity types a history scheduled on task queues, in order (local activities are markers
/// instead).
pub fn scheduled_activities(history: &[u8]) -> Vec<String> {
    let history: serde_json::Value = serde_json::from_slice(history).unwrap();
    history["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["attributes"]["ActivityTaskScheduledEventAttributes"]["activity_type"]["name"].as_str())
        .map(str::to_string)
        .collect()
}

/// With `BELAY_RECORD_HISTORIES=DIR`, writes `json` to `DIR/<name>.json` unless a history of that
/// name is there already (recorded histories are append-only).
pub fn record_history(name: &str, json: &[u8]) {
    if let Some(dir) = belay_testkit::var("BELAY_RECORD_HISTORIES") {
        let path = Path::new(&dir).join(format!("{name}.json"));
        if !path.exists() {
            std::fs::write(&path, json).unwrap();
        }
    }
}
