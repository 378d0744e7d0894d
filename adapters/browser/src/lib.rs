//! The browser check's driver: headless Chromium over the DevTools protocol.
//!
//! One session is one Chromium process, launched by us in its own process group with a fresh
//! profile, and killed with its group when the session ends, whichever way it ends; a worker
//! killed outright takes its Chromium with it (the parent-death signal, set by `setpriv`). Every request
//! the page makes is paused (the Fetch domain) and either answered from the preview upstream
//! (the app's port in the Sandbox) or failed as blocked: the preview host has no address anyone
//! can reach. Redirects on the preview host are followed here, by the rules of
//! `belay_domain::browser::redirect_step`; the browser sees only the final response. Traffic the
//! Fetch domain does not see (WebSockets) meets a dead proxy and fails.
//!
//! The flow (`flow.rs`) reports facts as `belay_domain::browser::StepRecord`s; the judgement on
//! a finished session is `belay_domain::browser::classify_browser`.

mod flow;
mod intercept;

pub use intercept::{Journal, Refused, RefusedKind, Served, Upstream};
pub use url::Url;

use belay_domain::browser::{BROWSER_SESSION_MS, BrowserRun, StepRecord};
use chromiumoxide::Browser;
use chromiumoxide::handler::HandlerConfig;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use thiserror::Error;
use tracing::warn;

/// Where Debian's `chromium` package puts the real binary (`/usr/bin/chromium` is a shell wrapper
/// that adds extensions and flags of its own).
pub const DEFAULT_CHROMIUM: &str = "/usr/lib/chromium/chromium";
/// The preview host the page sees. It resolves nowhere; only the interceptor answers it.
pub const PREVIEW_HOST: &str = "preview.belay.test";

#[derive(Debug, Error)]
pub enum BrowserError {
    #[error("chromium did not start: {0}")]
    Launch(String),
    #[error("the DevTools connection failed: {0}")]
    Connect(String),
}

/// How sessions are run.
#[derive(Debug, Clone)]
pub struct BrowserConfig {
    /// The Chromium binary (`BELAY_CHROMIUM`, else [`DEFAULT_CHROMIUM`]).
    pub chromium: PathBuf,
    /// The session deadline (BROWSER_SESSION_MS unless a test shortens it).
    pub session: Duration,
    /// How long one navigation may take before the step cannot observe the app.
    pub navigation_timeout: Duration,
    /// CA certificates (DER) the fetches trust besides the platform's roots (BELAY_CA_FILE).
    pub extra_roots: Vec<Vec<u8>>,
}

impl Default for BrowserConfig {
    fn default() -> Self {
        Self {
            chromium: PathBuf::from(DEFAULT_CHROMIUM),
            session: Duration::from_millis(BROWSER_SESSION_MS),
            navigation_timeout: Duration::from_secs(15),
            extra_roots: Vec::new(),
        }
    }
}

impl BrowserConfig {
    /// The defaults, overridden by the settings `lookup` answers by their variable names:
    /// `BELAY_CHROMIUM` names the binary; `BELAY_BROWSER_SESSION_MS` shortens the deadline. The
    /// `belay` command reads them once, as flags or environment variables.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let mut c = Self::default();
        if let Some(p) = lookup("BELAY_CHROMIUM").filter(|p| !p.trim().is_empty()) {
            c.chromium = PathBuf::from(p);
        }
        if let Some(ms) = lookup("BELAY_BROWSER_SESSION_MS").and_then(|v| v.trim().parse::<u64>().ok())
            && ms > 0
        {
            c.session = Duration::from_millis(ms.min(BROWSER_SESSION_MS));
        }
        c
    }
}

/// One screenshot, with its SHA-256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Screenshot {
    pub name: String,
    pub png: Vec<u8>,
    pub sha256: String,
}

impl Screenshot {
    fn new(name: &str, png: Vec<u8>) -> Self {
        let sha256 = hex::encode(Sha256::digest(&png));
        Self {
            name: name.to_owned(),
            png,
            sha256,
        }
    }
}

/// Where the session's time went.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Timings {
    /// From the launch to the process group gone.
    pub wall_ms: f64,
    /// Launch until the DevTools connection answered.
    pub launch_ms: f64,
    /// The flow itself.
    pub flow_ms: f64,
    /// Summed over requests: the fetches from the upstream (redirect hops included).
    pub upstream_ms: f64,
    /// Summed over requests: the interceptor's own time (paused → answered, minus the fetches).
    pub interceptor_ms: f64,
    /// The flow's time not spent in the interceptor or the fetches (requests overlap, so this
    /// is a lower bound of the time spent in Chromium).
    pub chromium_ms: f64,
    /// Close and process-group kill.
    pub shutdown_ms: f64,
}

/// Everything a session saw: the run for `classify_browser`, and what the Evidence object holds.
#[derive(Debug, Clone)]
pub struct SessionReport {
    pub run: BrowserRun,
    /// One line per thing the flow did.
    pub log: Vec<String>,
    pub journal: Journal,
    pub screenshots: Vec<Screenshot>,
    pub timings: Timings,
    /// The Chromium process (its group id too); gone when the report is returned.
    pub chromium_pid: Option<u32>,
    /// `Chrome/<version>` as the browser reported it.
    pub browser_version: Option<String>,
}

/// State the flow shares with the session, so a deadline keeps what finished.
#[derive(Default)]
pub(crate) struct Progress {
    pub steps: Vec<StepRecord>,
    pub log: Vec<String>,
    pub screenshots: Vec<Screenshot>,
}

pub(crate) type SharedProgress = Arc<Mutex<Progress>>;

pub(crate) fn log_line(p: &SharedProgress, line: impl Into<String>) {
    p.lock().expect("progress lock").log.push(line.into());
}

/// A launched Chromium: the child (its own process group), the connection and its profile.
struct Launched {
    child: Option<std::process::Child>,
    pid: u32,
    browser: Browser,
    handler: tokio::task::JoinHandle<()>,
    _profile: tempfile::TempDir,
}

impl Drop for Launched {
    /// A session dropped before its shutdown (its activity cancelled) still takes its Chromium
    /// with it.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill_group_now(self.pid, &mut child);
            std::thread::spawn(move || child.wait());
        }
        self.handler.abort();
    }
}

/// `setpriv` (util-linux) sets the parent-death signal and then runs Chromium, so Chromium gets
/// SIGKILL the moment the thread that started it dies: with the whole worker process, since that
/// thread lives as long as it. (Setting it ourselves would need `pre_exec`, which is `unsafe`.)
const SETPRIV: &str = "/usr/bin/setpriv";

type Spawn = (
    std::process::Command,
    tokio::sync::oneshot::Sender<std::io::Result<std::process::Child>>,
);

/// The one thread that starts every Chromium of this process. A parent-death signal fires when
/// the *thread* that forked the child exits, so the child is forked from a thread that never
/// does: not from a runtime's worker thread, which may come and go.
fn launcher() -> &'static std::sync::mpsc::Sender<Spawn> {
    static LAUNCHER: std::sync::OnceLock<std::sync::mpsc::Sender<Spawn>> = std::sync::OnceLock::new();
    LAUNCHER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Spawn>();
        std::thread::Builder::new()
            .name("chromium-launcher".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("the chromium launcher thread starts");
        tx
    })
}

/// Starts `cmd` from the launcher thread.
async fn spawn_from_launcher(cmd: std::process::Command) -> std::io::Result<std::process::Child> {
    let (reply, answer) = tokio::sync::oneshot::channel();
    launcher()
        .send((cmd, reply))
        .map_err(|_| std::io::Error::other("the chromium launcher thread is gone"))?;
    answer
        .await
        .map_err(|_| std::io::Error::other("the chromium launcher thread is gone"))?
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Reads `<profile>/DevToolsActivePort` (line 1: the port, line 2: the browser's path).
async fn devtools_ws(profile: &Path, child: &mut std::process::Child, within: Duration) -> Result<String, String> {
    let deadline = Instant::now() + within;
    let file = profile.join("DevToolsActivePort");
    loop {
        if let Ok(text) = tokio::fs::read_to_string(&file).await {
            let mut lines = text.lines();
            if let (Some(port), Some(path)) = (lines.next(), lines.next()) {
                return Ok(format!("ws://127.0.0.1:{}{}", port.trim(), path.trim()));
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("chromium exited with {status} before it listened"));
        }
        if Instant::now() > deadline {
            return Err(format!("no DevToolsActivePort after {} s", within.as_secs()));
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn launch(config: &BrowserConfig) -> Result<Launched, BrowserError> {
    let profile = tempfile::Builder::new()
        .prefix("belay-chromium-")
        .tempdir()
        .map_err(|e| BrowserError::Launch(format!("profile directory: {e}")))?;
    let with_setpriv = Path::new(SETPRIV).exists();
    let mut cmd = if with_setpriv {
        let mut c = std::process::Command::new(SETPRIV);
        c.args(["--pdeathsig", "KILL", "--"]).arg(&config.chromium);
        c
    } else {
        warn!("{SETPRIV} is missing: a Chromium outlives a worker that is killed");
        std::process::Command::new(&config.chromium)
    };
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-dev-shm-usage",
        "--disable-default-apps",
        "--mute-audio",
        "--hide-scrollbars",
        // Chromium 156 upgrades http:// to https:// for public-looking hosts.
        "--disable-features=HttpsUpgrades,HttpsFirstBalancedModeAutoEnable",
        // WebSockets (and anything else) that bypass the Fetch domain meet a dead proxy.
        "--proxy-server=http://127.0.0.1:9",
        "--proxy-bypass-list=<-loopback>",
        "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
        "--remote-debugging-port=0",
        "--window-size=1280,900",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .arg("about:blank")
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .process_group(0);
    let mut child = spawn_from_launcher(cmd)
        .await
        .map_err(|e| BrowserError::Launch(format!("{}: {e}", config.chromium.display())))?;
    let pid = child.id();
    let ws = match devtools_ws(profile.path(), &mut child, Duration::from_secs(30)).await {
        Ok(ws) => ws,
        Err(e) => {
            kill_group(pid, &mut child).await;
            return Err(BrowserError::Launch(e));
        }
    };
    let connected = Browser::connect_with_config(
        ws,
        HandlerConfig {
            request_intercept: true,
            request_timeout: Duration::from_secs(15),
            viewport: None,
            cache_enabled: false,
            ..Default::default()
        },
    )
    .await;
    let (browser, mut handler) = match connected {
        Ok(c) => c,
        Err(e) => {
            kill_group(pid, &mut child).await;
            return Err(BrowserError::Connect(e.to_string()));
        }
    };
    // The handler stream is the connection: nothing resolves unless it is polled.
    let handler = tokio::spawn(async move {
        while let Some(r) = handler.next().await {
            if let Err(e) = r {
                warn!(error = %e, "devtools handler");
            }
        }
    });
    Ok(Launched {
        child: Some(child),
        pid,
        browser,
        handler,
        _profile: profile,
    })
}

/// SIGKILL to Chromium's process group (ours alone: it was launched as its leader).
fn kill_group_now(pid: u32, child: &mut std::process::Child) {
    if pid > 1 {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let _ = child.kill();
}

/// Kills Chromium's process group and reaps its leader (waiting 5 s at most).
async fn kill_group(pid: u32, child: &mut std::process::Child) {
    kill_group_now(pid, child);
    let deadline = Instant::now() + Duration::from_secs(5);
    while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn shutdown(mut l: Launched) {
    let _ = tokio::time::timeout(Duration::from_secs(3), l.browser.close()).await;
    if let Some(mut child) = l.child.take() {
        kill_group(l.pid, &mut child).await;
    }
    l.handler.abort();
}

/// Runs one browser session against `upstream`: launch, the flow within the session deadline,
/// and the shutdown, always.
pub async fn run_session(config: &BrowserConfig, upstream: Upstream) -> SessionReport {
    let started = Instant::now();
    let journal = Arc::new(Mutex::new(Journal::default()));
    let progress: SharedProgress = Arc::new(Mutex::new(Progress::default()));
    let launched = match launch(config).await {
        Ok(l) => l,
        Err(e) => {
            return SessionReport {
                run: BrowserRun::NoBrowserConnection { detail: e.to_string() },
                log: vec![e.to_string()],
                journal: Journal::default(),
                screenshots: vec![],
                timings: Timings {
                    wall_ms: ms(started.elapsed()),
                    ..Default::default()
                },
                chromium_pid: None,
                browser_version: None,
            };
        }
    };
    let launch_ms = ms(started.elapsed());
    let pid = launched.pid;
    let version = tokio::time::timeout(Duration::from_secs(5), launched.browser.version())
        .await
        .ok()
        .and_then(Result::ok)
        .map(|v| v.product);
    let remaining = config.session.saturating_sub(started.elapsed());
    let flow_started = Instant::now();
    let upstream = Arc::new(upstream);
    let outcome = tokio::time::timeout(
        remaining,
        flow::run(
            &launched.browser,
            upstream.clone(),
            journal.clone(),
            progress.clone(),
            config.navigation_timeout,
        ),
    )
    .await;
    let flow_ms = ms(flow_started.elapsed());
    let shutdown_started = Instant::now();
    shutdown(launched).await;
    let shutdown_ms = ms(shutdown_started.elapsed());
    let mut p = std::mem::take(&mut *progress.lock().expect("progress lock"));
    let run = match outcome {
        Ok(Ok(())) => BrowserRun::Completed { steps: p.steps },
        Ok(Err(no_page)) => {
            p.log.push(format!("no page: {no_page}"));
            BrowserRun::NoBrowserConnection { detail: no_page }
        }
        Err(_) => {
            p.log
                .push(format!("the session passed {} ms", config.session.as_millis()));
            BrowserRun::DeadlineExceeded { steps: p.steps }
        }
    };
    let journal = std::mem::take(&mut *journal.lock().expect("journal lock"));
    let upstream_ms: f64 = journal.served.iter().map(|s| s.upstream_ms).sum();
    let interceptor_ms: f64 = journal
        .served
        .iter()
        .map(|s| (s.total_ms - s.upstream_ms).max(0.0))
        .sum::<f64>()
        + journal.refused.iter().map(|r| r.total_ms).sum::<f64>();
    SessionReport {
        run,
        log: p.log,
        screenshots: p.screenshots,
        timings: Timings {
            wall_ms: ms(started.elapsed()),
            launch_ms,
            flow_ms,
            upstream_ms,
            interceptor_ms,
            chromium_ms: (flow_ms - upstream_ms - interceptor_ms).max(0.0),
            shutdown_ms,
        },
        journal,
        chromium_pid: Some(pid),
        browser_version: version,
    }
}
