//! `belay bench dev-start`: `belay dev` cold start to ready, and the resident memory of its
//! process tree at rest.

use super::support::free_port;
use anyhow::{Context, bail};
use std::time::{Duration, Instant};

/// Resident memory (kB) of `pid` and every descendant.
fn tree_rss_kb(pid: u32) -> u64 {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat"))
                && let Some(after) = stat.rsplit_once(')').map(|(_, a)| a)
                && let Some(ppid) = after.split_whitespace().nth(1).and_then(|s| s.parse().ok())
            {
                parents.push((p, ppid));
            }
        }
    }
    let mut tree = vec![pid];
    let mut i = 0;
    while i < tree.len() {
        let cur = tree[i];
        tree.extend(parents.iter().filter(|(_, pp)| *pp == cur).map(|(p, _)| *p));
        i += 1;
    }
    tree.iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/status")).ok())
        .filter_map(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .sum()
}

pub(super) async fn dev_start_bench(rest: u64) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let dir = tempfile::tempdir()?;
    for attempt in ["cold (fresh data dir)", "resume (same data dir)"] {
        let (api, tport, uport) = (free_port()?, free_port()?, free_port()?);
        let t = Instant::now();
        let mut child = tokio::process::Command::new(&exe)
            .args([
                "dev",
                "--port",
                &api.to_string(),
                "--temporal-port",
                &tport.to_string(),
                "--ui-port",
                &uport.to_string(),
            ])
            .arg("--data-dir")
            .arg(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting belay dev")?;
        let pid = child.id().context("belay dev pid")?;
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(r) = http.get(format!("http://127.0.0.1:{api}/v1/readyz")).send().await
                && r.status().is_success()
            {
                break;
            }
            if Instant::now() > deadline {
                bail!("belay dev was not ready within 120 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let ready = t.elapsed().as_secs_f64();
        tokio::time::sleep(Duration::from_secs(rest)).await;
        let rss = tree_rss_kb(pid);
        let t = Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        )?;
        let stopped = tokio::time::timeout(Duration::from_secs(30), child.wait())
            .await
            .is_ok();
        println!(
            "belay dev {attempt}: ready in {ready:.2} s; process tree RSS at rest {:.1} MiB; SIGTERM to exit {}",
            rss as f64 / 1024.0,
            if stopped {
                format!("{:.2} s", t.elapsed().as_secs_f64())
            } else {
                "did not exit within 30 s".into()
            }
        );
    }
    Ok(())
}
