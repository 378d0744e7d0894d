//! `belay bench browser`: the whole browser check on the sample app grown to 8 pages (a home page
//! linking 7 more, one with a form), served by Bun on loopback: the wall time, and where it went
//! (Chromium, the interceptor, the fetches from the app); then the interceptor's added latency
//! per request, against a direct fetch of the same URL with the same client.

use anyhow::{Context, bail};
use belay_browser::{Upstream, run_session};
use belay_domain::browser::classify_browser;
use std::path::Path;
use std::time::{Duration, Instant};

fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let p = e?.path();
        let target = to.join(p.file_name().context("a file name")?);
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "node_modules") {
                continue;
            }
            copy_dir(&p, &target)?;
        } else {
            std::fs::copy(&p, &target)?;
        }
    }
    Ok(())
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title><link rel=\"stylesheet\" href=\"/style.css\"></head><body>{body}<script type=\"module\" src=\"/assets/main.js\"></script></body></html>\n"
    )
}

/// Writes the 8 pages over the app's `public/`.
fn grow(dir: &Path) -> anyhow::Result<()> {
    let links: String = (1..=7)
        .map(|n| format!("<a href=\"/page{n}.html\">Page {n}</a> "))
        .collect();
    std::fs::write(
        dir.join("public/index.html"),
        page(
            "Todos",
            &format!("<h1>Todos</h1><nav>{links}</nav><ul id=\"todos\"></ul>"),
        ),
    )?;
    for n in 1..=7 {
        let body = if n == 1 {
            "<h1>Find</h1><form method=\"get\" action=\"/page2.html\"><input type=\"text\" name=\"q\"><input type=\"number\" name=\"n\"><button>Find</button></form><a href=\"/\">Home</a>".to_owned()
        } else {
            format!("<h1>Page {n}</h1><p>Some text on page {n}.</p><a href=\"/\">Home</a>")
        };
        std::fs::write(
            dir.join(format!("public/page{n}.html")),
            page(&format!("Page {n}"), &body),
        )?;
    }
    Ok(())
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

struct Served(std::process::Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(super) async fn browser(app: &Path, bun: &Path, runs: usize) -> anyhow::Result<()> {
    let runs = runs.max(1);
    let dir = tempfile::tempdir()?;
    copy_dir(app, dir.path())?;
    grow(dir.path())?;
    let path = format!(
        "{}:{}",
        bun.parent().map(|p| p.display().to_string()).unwrap_or_default(),
        std::env::var("PATH").unwrap_or_default()
    );
    let built = std::process::Command::new(bun)
        .args(["run", "build"])
        .env("PATH", &path)
        .current_dir(dir.path())
        .output()
        .with_context(|| format!("running {}", bun.display()))?;
    if !built.status.success() {
        bail!("bun run build: {}", String::from_utf8_lossy(&built.stderr));
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let _server = Served(
        std::process::Command::new(bun)
            .args(["src/server.ts"])
            .env("PORT", port.to_string())
            .env("HOST", "127.0.0.1")
            .current_dir(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()?,
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            bail!("the sample app never listened");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let base = format!("http://127.0.0.1:{port}");
    let config = crate::settings::from_environment::<crate::settings::BrowserSettings>().config();
    println!(
        "browser check on the sample app (8 pages), {runs} runs, chromium {}",
        config.chromium.display()
    );
    let mut through = vec![];
    let mut paths = vec![];
    for run in 1..=runs {
        let r = run_session(&config, Upstream::new(&base).map_err(anyhow::Error::msg)?).await;
        let result = classify_browser(&r.run);
        let t = &r.timings;
        let pages = r
            .journal
            .served
            .iter()
            .filter(|s| s.resource_type == "Document")
            .count();
        println!(
            "run {run}: {} — wall {:.0} ms (launch {:.0}, flow {:.0}, shutdown {:.0}); in the flow: chromium ≥ {:.0} ms, \
             interceptor {:.0} ms, fetches from the app {:.0} ms; {} requests ({} documents), {} blocked, {} screenshots",
            format!("{:?}", result.status).to_lowercase(),
            t.wall_ms,
            t.launch_ms,
            t.flow_ms,
            t.shutdown_ms,
            t.chromium_ms,
            t.interceptor_ms,
            t.upstream_ms,
            r.journal.served.len(),
            pages,
            r.journal.refused.len(),
            r.screenshots.len()
        );
        through.extend(
            r.journal
                .served
                .iter()
                .filter(|s| s.method == "GET" && s.hops == 0)
                .map(|s| s.total_ms),
        );
        paths.extend(
            r.journal
                .served
                .iter()
                .filter(|s| s.method == "GET" && s.hops == 0)
                .map(|s| s.path.clone()),
        );
    }
    // The same URLs fetched directly, with the interceptor's own client.
    let direct_client = Upstream::new(&base).map_err(anyhow::Error::msg)?;
    let mut direct = vec![];
    for p in &paths {
        let url = belay_browser::Url::parse(&Upstream::preview_url(p))?;
        let t = Instant::now();
        direct_client
            .fetch_once("GET", &url, &[], None)
            .await
            .map_err(anyhow::Error::msg)?;
        direct.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let (a, d) = (mean(&through), mean(&direct));
    println!(
        "per request ({} GETs): paused → answered through the interceptor {a:.2} ms, a direct fetch of the same URL {d:.2} ms; \
         added {:.2} ms, ratio {:.2}",
        through.len(),
        a - d,
        if d > 0.0 { a / d } else { 0.0 }
    );
    Ok(())
}
