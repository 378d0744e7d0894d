//! `belay bench console`'s review page: a cell of five repeats, each a multi-file canvas game (an
//! `index.html`, a script under `js/`, a sprite under `assets/`; then the same beside a 600 KiB
//! bundled library) built by a real script harness and kept in the object store, reviewed side by
//! side on `/plans/{id}/queue` with every build playing in its frame from the artifact origin
//! (decision 0051). Timed from navigation until every frame
//! has fired `load` (its document, script and sprite in, the script run: the console marks each),
//! against the reference a reviewer could not do better than: the same five builds' files fetched
//! directly from the artifact origin in the same browser, all at once, until every byte is in.

use super::support::{fresh_store, run_stack_with, stats};
use anyhow::{Context, bail, ensure};
use belay_worker::Pool;
use chromiumoxide::browser::Browser;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// The repeats of the reviewed cell: the most the review page shows side by side.
const REPEATS: usize = 5;

/// The script harness: writes the game's three files and lists them in its manifest.
const GAME_SCRIPT: &str = r##"mkdir -p js assets
cat > index.html <<'HTML'
<!doctype html>
<html><head><meta charset="utf-8"><title>Ball run</title>
<style>body{margin:0;font:16px sans-serif;background:#f4f1e8} #start{position:absolute;left:8px;top:8px}
#hud{position:absolute;left:120px;top:16px} canvas{position:absolute;left:8px;top:52px;border:1px solid #333}</style></head>
<body><button id="start">Start</button><div id="hud">Score: <span id="score">0</span></div>
<canvas id="board" width="480" height="240"></canvas>
VENDOR_TAG<script src="js/game.js"></script></body></html>
HTML
VENDOR_FILE
cat > js/game.js <<'JS'
const board = document.getElementById("board");
const ctx = board.getContext("2d");
const sprite = new Image();
sprite.onload = () => draw();
sprite.src = "assets/sprite.svg";
let score = 0, x = 0, running = false;
function draw() {
  ctx.fillStyle = "#0b3d91"; ctx.fillRect(0, 0, board.width, board.height);
  ctx.fillStyle = "#3a7d44"; ctx.fillRect(0, 200, board.width, 40);
  if (sprite.complete) ctx.drawImage(sprite, x, 150, 48, 48);
  ctx.fillStyle = "#fff"; ctx.font = "20px sans-serif"; ctx.fillText("Score " + score, 12, 28);
}
document.getElementById("start").addEventListener("click", () => {
  if (running) return;
  running = true;
  setInterval(() => { x = (x + 6) % (board.width - 48); score += 1;
    document.getElementById("score").textContent = String(score); draw(); }, 40);
});
draw();
JS
cat > assets/sprite.svg <<'SVG'
<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16"><circle cx="8" cy="8" r="7" fill="#f5c400"/></svg>
SVG
printf '{"status":"completed","loaded":true,"artifacts":["index.html","js/game.js","assets/sprite.svg"VENDOR_LISTED]}' > "$BELAY_MANIFEST"
"##;

/// The two builds timed: the small game alone, and the same game with a bundled library
/// beside it, as a build made with a game framework ships.
#[derive(Clone, Copy)]
struct Build {
    label: &'static str,
    /// Functions in `js/vendor.js` (about 40 bytes each); none: no vendor script.
    vendor_functions: usize,
}

const BUILDS: [Build; 2] = [
    Build {
        label: "small game (3 files)",
        vendor_functions: 0,
    },
    Build {
        label: "game with a 600 KiB bundled library (4 files)",
        vendor_functions: 15_000,
    },
];

impl Build {
    fn files(self) -> usize {
        if self.vendor_functions == 0 { 3 } else { 4 }
    }

    /// The harness script writing this build.
    fn script(self) -> String {
        if self.vendor_functions == 0 {
            return GAME_SCRIPT
                .replace("VENDOR_TAG", "")
                .replace("VENDOR_FILE\n", "")
                .replace("VENDOR_LISTED", "");
        }
        GAME_SCRIPT
            .replace("VENDOR_TAG", "<script src=\"js/vendor.js\"></script>")
            .replace(
                "VENDOR_FILE",
                &format!(
                    "awk 'BEGIN {{ for (i = 0; i < {}; i++) printf \"function vendor%d(a) {{ return a * %d + 1; }}\\n\", i, i }}' > js/vendor.js",
                    self.vendor_functions
                ),
            )
            .replace("VENDOR_LISTED", ",\"js/vendor.js\"")
    }
}

/// Seeds a plan of one cell of [`REPEATS`] runs through the API and a real harness, then times
/// its review page against fetching the builds directly.
pub(super) async fn review(dir: &Path, address: &str, browser: &Browser, samples: usize) -> anyhow::Result<()> {
    let dir = dir.join("review");
    std::fs::create_dir_all(&dir)?;
    let store = fresh_store(&dir, None, "review").await?;
    let client = belay_client::connect(address, "default", "belay-bench").await?;
    let (_, token) = store
        .create_account_with_role("bench", belay_domain::access::Role::Operator)
        .await?;
    let pools = [Pool::Workflows, Pool::Db, Pool::Harness];
    let figures = run_stack_with(&store, &client, &dir, &pools, true, |api, artifacts| async move {
        let artifacts = artifacts.context("an artifact origin")?;
        for (i, build) in BUILDS.into_iter().enumerate() {
            let plan = seed(&api, &token, i, build).await?;
            measure(&api, &artifacts, &token, &plan, build, browser, samples).await?;
        }
        Ok(())
    })
    .await;
    store.close().await;
    figures
}

/// POSTs `body` to `path`, expecting success; the answer.
async fn post(http: &reqwest::Client, api: &str, token: &str, path: &str, body: Value) -> anyhow::Result<Value> {
    let resp = http
        .post(format!("{api}{path}"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await?;
    let status = resp.status();
    let v: Value = resp.json().await.unwrap_or(Value::Null);
    ensure!(status.is_success(), "POST {path}: {status} {v}");
    Ok(v)
}

/// The catalogue, the game harness and a plan of one cell of [`REPEATS`] runs, topped up until
/// every run has completed with its build; the plan's id.
async fn seed(api: &str, token: &str, i: usize, build: Build) -> anyhow::Result<String> {
    let http = reqwest::Client::new();
    let slug = format!("game{i}");
    let harness = format!("game{i}");
    let case = json!({"slug": slug, "version": "1.0.0", "variant": "default"});
    post(
        &http,
        api,
        token,
        "/v1/test-cases",
        json!({"slug": slug, "version": "1.0.0", "testType": "standard", "variants": ["default"]}),
    )
    .await?;
    if i == 0 {
        post(&http, api, token, "/v1/models",
            json!({"id": "m", "contextWindow": 200000, "listPrice": {"inputPerMtokUsd": 3.0, "outputPerMtokUsd": 15.0}})).await?;
    }
    post(
        &http,
        api,
        token,
        "/v1/harnesses",
        json!({"name": harness, "maxParallelism": REPEATS,
        "adapter": {"kind": "script", "script": build.script(), "timeoutSeconds": 120}}),
    )
    .await?;
    let plan = post(
        &http,
        api,
        token,
        "/v1/coverage-plans",
        json!({
            "name": format!("review bench {i}"), "cases": [case],
            "combinations": [{"kind": "harness", "harness": harness, "model": "m"}],
            "runsPerCell": REPEATS, "bufferTarget": {"kind": "bounded", "runs": REPEATS}, "autoTopUp": false
        }),
    )
    .await?;
    let id = plan["id"].as_str().context("a plan id")?.to_owned();
    post(&http, api, token, &format!("/v1/coverage-plans/{id}/topup"), json!({})).await?;
    let t = Instant::now();
    loop {
        let q: Value = http
            .get(format!("{api}/v1/coverage-plans/{id}/queue"))
            .bearer_auth(token)
            .send()
            .await?
            .json()
            .await?;
        if q["runs"].as_array().map(Vec::len) == Some(REPEATS) {
            break;
        }
        if t.elapsed() > Duration::from_secs(300) {
            bail!("the plan's {REPEATS} runs did not complete in 300 s: {q}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    println!(
        "review page, {}: {REPEATS} runs of one cell built by the harness in {:.1} s",
        build.label,
        t.elapsed().as_secs_f64()
    );
    Ok(id)
}

/// Every file of every queued run, under a freshly signed URL each (minted before any timing).
async fn build_urls(api: &str, token: &str, plan: &str, build: Build) -> anyhow::Result<Vec<String>> {
    let http = reqwest::Client::new();
    let q: Value = http
        .get(format!("{api}/v1/coverage-plans/{plan}/queue"))
        .bearer_auth(token)
        .send()
        .await?
        .json()
        .await?;
    let mut urls = Vec::new();
    for run in q["runs"].as_array().context("the queue's runs")? {
        let run = run.as_str().context("a run id")?;
        let r: Value = http
            .get(format!("{api}/v1/runs/{run}"))
            .bearer_auth(token)
            .send()
            .await?
            .json()
            .await?;
        let grant = post(&http, api, token, &format!("/v1/runs/{run}/artifact-url"), json!({})).await?;
        let base = grant["url"].as_str().context("a signed URL")?;
        for a in r["artifacts"].as_array().context("the run's artifacts")? {
            urls.push(format!("{base}{}", a["path"].as_str().context("a path")?));
        }
    }
    let want = REPEATS * build.files();
    ensure!(urls.len() == want, "expected {want} files, got {}", urls.len());
    Ok(urls)
}

async fn measure(
    api: &str,
    artifacts: &str,
    token: &str,
    plan: &str,
    build: Build,
    browser: &Browser,
    samples: usize,
) -> anyhow::Result<()> {
    let page = browser.new_page("about:blank").await?;
    page.goto(format!("{api}/sign-in")).await?;
    page.evaluate(format!("sessionStorage.setItem('belay.token', {})", json!(token)))
        .await?;

    // The reference: the five builds' files fetched at once from the artifact origin, uncached,
    // from a blank tab (the console's own policy lets its pages connect to the API only).
    let blank = browser.new_page("about:blank").await?;
    let mut alone = Vec::new();
    let mut bytes = 0;
    for i in 0..samples + 2 {
        let urls = build_urls(api, token, plan, build).await?;
        let v: Value = blank
            .evaluate(format!(
                "(async () => {{ const t = performance.now(); \
                   const sizes = await Promise.all({urls}.map(async (u) => {{ \
                     const r = await fetch(u, {{ cache: 'no-store', referrerPolicy: 'no-referrer' }}); \
                     if (!r.ok) throw new Error(u + ' answered ' + r.status); \
                     return (await r.arrayBuffer()).byteLength; }})); \
                   return {{ ms: performance.now() - t, bytes: sizes.reduce((a, b) => a + b, 0) }}; }})()",
                urls = json!(urls),
            ))
            .await?
            .into_value()?;
        bytes = v["bytes"].as_u64().context("bytes")?;
        if i >= 2 {
            alone.push(v["ms"].as_f64().context("ms")?);
        }
    }
    let _ = blank.close().await;

    // The second reference: the five builds framed directly on a page of the console's origin
    // (the only one their policy lets frame them), with the review frame's sandbox, without the
    // console: what playing the builds costs the browser by itself.
    let mut framed = Vec::new();
    for i in 0..samples + 2 {
        let entries: Vec<String> = build_urls(api, token, plan, build)
            .await?
            .into_iter()
            .filter(|u| u.ends_with("/index.html"))
            .collect();
        let ms: f64 = page
            .evaluate(format!(
                "(async () => {{ const box = document.createElement('div'); document.body.append(box); \
                   const t = performance.now(); \
                   await Promise.all({entries}.map((u) => new Promise((resolve) => {{ \
                     const f = document.createElement('iframe'); f.setAttribute('sandbox', 'allow-scripts allow-pointer-lock'); \
                     f.referrerPolicy = 'no-referrer'; f.addEventListener('load', resolve, {{ once: true }}); \
                     f.src = u; box.append(f); }}))); \
                   const ms = performance.now() - t; box.remove(); return ms; }})()",
                entries = json!(entries),
            ))
            .await?
            .into_value()?;
        if i >= 2 {
            framed.push(ms);
        }
    }

    let path = format!("/plans/{plan}/queue");
    let (mut loads, mut shell, mut answers) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..samples + 1 {
        page.goto(format!("{api}{path}")).await?;
        let deadline = Instant::now() + Duration::from_secs(120);
        let v: Value = loop {
            let v: Value = page
                .evaluate(
                    "(() => { const marks = performance.getEntriesByType('mark').filter((m) => m.name.startsWith('belay:frame ')); \
                       const frames = document.querySelectorAll('section.repeat iframe.artifact-frame').length; \
                       const err = document.querySelector('#error'); \
                       const res = performance.getEntriesByType('resource'); \
                       const end = (f) => Math.max(0, ...res.filter(f).map((e) => e.responseEnd)); \
                       return { frames, loaded: marks.length, last: Math.max(0, ...marks.map((m) => m.startTime)), \
                         shell: end((e) => new URL(e.name).pathname.startsWith('/console/')), \
                         api: end((e) => new URL(e.name).pathname.startsWith('/v1/')), \
                         error: err && !err.hidden ? err.textContent : null }; })()",
                )
                .await?
                .into_value()?;
            ensure!(v["error"].is_null(), "{path} showed an error: {}", v["error"]);
            if v["loaded"].as_u64() == Some(REPEATS as u64) {
                break v;
            }
            if Instant::now() > deadline {
                bail!("{path}: {} of {REPEATS} builds loaded in 120 s ({v})", v["loaded"]);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        ensure!(
            v["frames"].as_u64() == Some(REPEATS as u64),
            "{path} showed {} frames",
            v["frames"]
        );
        if i >= 1 {
            loads.push(v["last"].as_f64().context("last")?);
            shell.push(v["shell"].as_f64().context("shell")?);
            answers.push(v["api"].as_f64().context("api")?);
        }
    }
    let _ = page.close().await;

    let (a50, a95) = stats(alone);
    let (d50, d95) = stats(framed);
    let (p50, p95) = stats(loads);
    let (s50, _) = stats(shell);
    let (api50, _) = stats(answers);
    println!(
        "review page, {} ({REPEATS} repeats side by side from {artifacts}): every build loaded and playable median {p50:.0} ms, p95 {p95:.0} ms; \
         (the console's own files in by {s50:.0} ms, its API calls answered by {api50:.0} ms); \
         the {} files ({:.1} KiB) fetched directly in the same browser median {a50:.0} ms, p95 {a95:.0} ms; ratio {:.2}; \
         the five builds framed directly without the console median {d50:.0} ms, p95 {d95:.0} ms; ratio {:.2}",
        build.label,
        REPEATS * build.files(),
        bytes as f64 / 1024.0,
        p50 / a50,
        p50 / d50
    );
    Ok(())
}
