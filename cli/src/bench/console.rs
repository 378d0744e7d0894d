//! `belay bench console`: the console's two heaviest pages in a real headless Chromium, against
//! the API call behind each, on the data the coverage and ladder benches seed (SQLite, a real
//! API, Temporal dev server and worker pools in this process):
//!
//! - the matrix page of a 10,000-cell plan (`/plans/{id}`), against `POST …/open`, the call that
//!   answers its matrix;
//! - the ladder board of 50 rungs × 100 climbers (`/ladders/{id}`), against `GET …/progress`;
//! - the review page of a cell of five repeats playing side by side (`review.rs`).
//!
//! For each: the time from navigation to the page painted with its first screenful of rows (the
//! console marks it; the shell's first contentful paint is reported beside it), and from a jump
//! to the end of the page to its last row rendered and painted (rows are rendered as they
//! scroll into view), against the same call made alone by `fetch` in the same browser and timed
//! until its whole answer has arrived; the longest main-thread task of the load and the jump
//! (`longtask` entries); and the page's weight (every byte the page loaded: the console's own
//! files and the API's answers) against the bytes of that one answer. The ratios say what the
//! page adds to the API's own time and size.
//!
//! And what live boards cost the API: `GET …/progress`'s p50 and p95 alone, and again while 20
//! boards read themselves as a live board does while work is in flight (`GET …/{id}` and
//! `GET …/progress` together every [`LIVE_EVERY`], the boards staggered across it), their calls
//! made by this process's HTTP client so the browser's own drawing does not take the machine.

use super::support::{fresh_store, ladder_body, plan_body, run_stack, seed_ladder, seed_plan, stats, temporal};
use anyhow::{Context, bail, ensure};
use chromiumoxide::browser::{Browser, BrowserConfig};
use futures::StreamExt;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Clone, Copy)]
enum Screen {
    Matrix,
    Board,
}

impl Screen {
    fn label(self) -> &'static str {
        match self {
            Screen::Matrix => "matrix page (10,000 cells)",
            Screen::Board => "ladder board (50 rungs × 100 climbers)",
        }
    }
}

/// The pages `belay bench console` can time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ConsolePage {
    Matrix,
    Board,
    Review,
}

pub(super) async fn console(samples: usize, only: Option<ConsolePage>) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (server, address) = temporal(dir.path()).await?;
    let wanted = |p: ConsolePage| only.is_none_or(|o| o == p);
    let result = async {
        let (mut browser, handler) = launch(&dir.path().join("profile")).await?;
        let mut r = Ok(());
        if wanted(ConsolePage::Matrix) {
            r = screen(Screen::Matrix, dir.path(), &address, &browser, samples).await;
        }
        if r.is_ok() && wanted(ConsolePage::Board) {
            r = screen(Screen::Board, dir.path(), &address, &browser, samples).await;
        }
        if r.is_ok() && wanted(ConsolePage::Review) {
            r = super::review::review(dir.path(), &address, &browser, samples).await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), browser.close()).await;
        let _ = browser.kill().await;
        let _ = browser.wait().await;
        handler.abort();
        r
    }
    .await;
    server.stop().await;
    result
}

async fn launch(profile: &Path) -> anyhow::Result<(Browser, tokio::task::JoinHandle<()>)> {
    let chromium = crate::settings::from_environment::<crate::settings::BrowserSettings>()
        .config()
        .chromium;
    let config = BrowserConfig::builder()
        .chrome_executable(chromium)
        .no_sandbox()
        .user_data_dir(profile)
        .launch_timeout(Duration::from_secs(30))
        .request_timeout(Duration::from_secs(120))
        .window_size(1280, 900)
        .viewport(None)
        .args([
            "disable-gpu",
            "no-first-run",
            "disable-background-networking",
            "disable-component-update",
            "disable-sync",
            "disable-dev-shm-usage",
        ])
        .build()
        .map_err(anyhow::Error::msg)?;
    let (browser, mut handler) = Browser::launch(config).await.context("launching Chromium")?;
    let handler = tokio::spawn(async move { while handler.next().await.is_some() {} });
    Ok((browser, handler))
}

async fn screen(which: Screen, dir: &Path, address: &str, browser: &Browser, samples: usize) -> anyhow::Result<()> {
    let name = match which {
        Screen::Matrix => "matrix",
        Screen::Board => "board",
    };
    let dir = dir.join(name);
    std::fs::create_dir_all(&dir)?;
    let store = fresh_store(&dir, None, name).await?;
    let client = belay_client::connect(address, "default", "belay-bench").await?;
    let (_, token) = match which {
        Screen::Matrix => seed_plan(name, &store).await?,
        Screen::Board => seed_ladder(name, &store).await?,
    };
    let measure = |api: String| async move { measure(which, &api, &token, browser, samples).await };
    let figures = run_stack(&store, &client, &dir, measure).await;
    store.close().await;
    figures
}

/// How often a live page reads itself while work is in flight (the console's `LIVE_EVERY`).
const LIVE_EVERY: Duration = Duration::from_secs(5);
/// Live boards open at once.
const LIVE_BOARDS: usize = 20;

/// `GET path`'s times, `n` in turn, in ms.
async fn timed_gets(http: &reqwest::Client, url: &str, token: &str, n: usize) -> anyhow::Result<Vec<f64>> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let resp = http.get(url).bearer_auth(token).send().await?;
        ensure!(resp.status().is_success(), "GET {url}: {}", resp.status());
        resp.bytes().await?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(times)
}

/// The cost of [`LIVE_BOARDS`] live boards on `GET …/progress` (see the module doc).
async fn live_boards(api: &str, token: &str, id: &str, samples: usize) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let progress = format!("{api}/v1/ladders/{id}/progress");
    let n = (samples * 4).max(20);
    timed_gets(&http, &progress, token, 2).await?;
    let (alone50, alone95) = stats(timed_gets(&http, &progress, token, n).await?);
    let mut boards = Vec::new();
    for b in 0..LIVE_BOARDS {
        let (http, token) = (http.clone(), token.to_owned());
        let (ladder, progress) = (format!("{api}/v1/ladders/{id}"), progress.clone());
        let offset = LIVE_EVERY.mul_f64(b as f64 / LIVE_BOARDS as f64);
        boards.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + offset, LIVE_EVERY);
            loop {
                tick.tick().await;
                let a = http.get(&ladder).bearer_auth(&token).send();
                let b = http.get(&progress).bearer_auth(&token).send();
                if let (Ok(a), Ok(b)) = tokio::join!(a, b) {
                    let _ = tokio::join!(a.bytes(), b.bytes());
                }
            }
        }));
    }
    // One full round of every board first, then the same calls as alone.
    tokio::time::sleep(LIVE_EVERY).await;
    let (live50, live95) = stats(timed_gets(&http, &progress, token, n).await?);
    for b in boards {
        b.abort();
    }
    println!(
        "{LIVE_BOARDS} live boards (each GET /v1/ladders/{{id}} and …/progress every {} s): GET …/progress alone p50 {alone50:.0} ms, p95 {alone95:.0} ms; with the boards p50 {live50:.0} ms, p95 {live95:.0} ms; p95 moved {:+.0}% (target within +20%)",
        LIVE_EVERY.as_secs(),
        (live95 / alone95 - 1.0) * 100.0
    );
    Ok(())
}

/// Records the longest main-thread task of the page (`window.belayLongestTask`, ms), from the
/// start of each document.
const LONGEST_TASK: &str = "window.belayLongestTask = 0; \
    new PerformanceObserver((list) => { for (const e of list.getEntries()) \
      window.belayLongestTask = Math.max(window.belayLongestTask, e.duration); }) \
      .observe({ type: 'longtask', buffered: true });";

/// Jumps to the end of the page and answers the time until its last row (`last`, a JS
/// expression true once it is rendered) is in and painted, in ms.
fn jump_to_end(last: &str) -> String {
    format!(
        "(async () => {{ const t = performance.now(); window.scrollTo(0, document.documentElement.scrollHeight); \
           await new Promise((resolve) => {{ const check = () => {{ if ({last}) requestAnimationFrame(() => setTimeout(resolve, 0)); \
             else requestAnimationFrame(check); }}; check(); }}); \
           return performance.now() - t; }})()"
    )
}

/// What one load of the page measured.
struct Load {
    /// Navigation to the page painted with its first screenful of rows.
    painted: f64,
    /// A jump to the end of the page to its last row rendered and painted.
    to_end: f64,
    /// The longest main-thread task of the load and the jump.
    longest_task: f64,
    first_paint: f64,
    /// Bytes of the console's own files (shell, script, style, icon).
    own: u64,
    /// Bytes of the API's answers the page fetched.
    answers: u64,
    /// The call behind the page, as timed inside the page.
    call_in_page: f64,
}

async fn measure(which: Screen, api: &str, token: &str, browser: &Browser, samples: usize) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let (create, body) = match which {
        Screen::Matrix => ("/v1/coverage-plans", plan_body()),
        Screen::Board => ("/v1/ladders", ladder_body()),
    };
    let resp = http
        .post(format!("{api}{create}"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await?;
    ensure!(resp.status().is_success(), "POST {create}: {}", resp.status());
    let id = resp.json::<Value>().await?["id"].as_str().context("an id")?.to_string();
    // The last row: the matrix's is the one before its totals, the board's its last rung's.
    let (page_path, method, call, last) = match which {
        Screen::Matrix => (
            format!("/plans/{id}"),
            reqwest::Method::POST,
            format!("/v1/coverage-plans/{id}/open"),
            "(() => { const r = document.querySelector('#totals').previousElementSibling; \
               return !!r && !!r.dataset.cell; })()",
        ),
        Screen::Board => (
            format!("/ladders/{id}"),
            reqwest::Method::GET,
            format!("/v1/ladders/{id}/progress"),
            "(() => { const r = document.querySelector('#board tbody').lastElementChild; \
               return !!r && !!r.dataset.rung && r.querySelectorAll('td[data-climber]').length === 100; })()",
        ),
    };

    // The page's tab, signed in once (the token in the tab's session).
    let page = browser.new_page("about:blank").await?;
    page.evaluate_on_new_document(LONGEST_TASK).await?;
    page.goto(format!("{api}/sign-in")).await?;
    page.evaluate(format!("sessionStorage.setItem('belay.token', {})", json!(token)))
        .await?;

    // The call alone, made by `fetch` in the same browser and timed until its whole answer has
    // arrived: the same client and network stack as the page's, without the page.
    let v: Value = page
        .evaluate(format!(
            "(async () => {{ const times = []; let bytes = 0; \
               for (let i = 0; i < {n}; i++) {{ const t = performance.now(); \
                 const r = await fetch({call}, {{ method: {method}, headers: {{ Authorization: 'Bearer ' + sessionStorage.getItem('belay.token') }} }}); \
                 if (!r.ok) throw new Error('answered ' + r.status); \
                 bytes = (await r.arrayBuffer()).byteLength; times.push(performance.now() - t); }} \
               return {{ times, bytes }}; }})()",
            n = samples + 2,
            call = json!(call),
            method = json!(method.as_str()),
        ))
        .await?
        .into_value()?;
    let alone: Vec<f64> = v["times"]
        .as_array()
        .context("times")?
        .iter()
        .skip(2)
        .filter_map(Value::as_f64)
        .collect();
    let answer_bytes = v["bytes"].as_u64().context("bytes")?;

    let mut loads = Vec::new();
    for i in 0..samples + 1 {
        page.goto(format!("{api}{page_path}")).await?;
        let mark = json!(format!("belay:painted {page_path}"));
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let done: bool = page
                .evaluate(format!("performance.getEntriesByName({mark}).length > 0"))
                .await?
                .into_value()?;
            if done {
                break;
            }
            if Instant::now() > deadline {
                bail!("{page_path} was not painted in 300 s");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let v: Value = page
            .evaluate(format!(
                "(() => {{ const size = (e) => e.transferSize || e.encodedBodySize || 0; \
                   const res = performance.getEntriesByType('resource'); \
                   const nav = performance.getEntriesByType('navigation')[0]; \
                   const own = size(nav) + res.filter((e) => new URL(e.name).pathname.startsWith('/console/')).reduce((a, e) => a + size(e), 0); \
                   const answers = res.filter((e) => new URL(e.name).pathname.startsWith('/v1/')).reduce((a, e) => a + size(e), 0); \
                   const call = res.find((e) => new URL(e.name).pathname === {call}); \
                   const fcp = performance.getEntriesByName('first-contentful-paint')[0]; \
                   return {{ painted: performance.getEntriesByName({mark})[0].startTime, \
                     firstPaint: fcp ? fcp.startTime : -1, own, answers, \
                     callInPage: call ? call.responseEnd - call.startTime : -1, \
                     error: document.querySelector('#error').hidden ? null : document.querySelector('#error').textContent }}; }})()",
                call = json!(call),
            ))
            .await?
            .into_value()?;
        ensure!(v["error"].is_null(), "{page_path} showed an error: {}", v["error"]);
        let to_end: f64 = page.evaluate(jump_to_end(last)).await?.into_value()?;
        let longest_task: f64 = page.evaluate("window.belayLongestTask || 0").await?.into_value()?;
        if i >= 1 {
            loads.push(Load {
                painted: v["painted"].as_f64().context("painted")?,
                to_end,
                longest_task,
                first_paint: v["firstPaint"].as_f64().unwrap_or(-1.0),
                own: v["own"].as_u64().unwrap_or(0),
                answers: v["answers"].as_u64().unwrap_or(0),
                call_in_page: v["callInPage"].as_f64().unwrap_or(-1.0),
            });
        }
    }
    let _ = page.close().await;

    let (a50, a95) = stats(alone);
    let (p50, p95) = stats(loads.iter().map(|l| l.painted).collect());
    let (w50, w95) = stats(loads.iter().map(|l| l.to_end).collect());
    let (t50, t95) = stats(loads.iter().map(|l| l.longest_task).collect());
    let (f50, _) = stats(loads.iter().map(|l| l.first_paint).collect());
    let (c50, _) = stats(loads.iter().map(|l| l.call_in_page).collect());
    let last = loads.last().context("a load")?;
    let kib = |b: u64| b as f64 / 1024.0;
    println!(
        "{}: first screenful painted median {p50:.0} ms, p95 {p95:.0} ms; a jump to the last row answered median {w50:.0} ms, p95 {w95:.0} ms; longest main-thread task median {t50:.0} ms, p95 {t95:.0} ms (the shell's first contentful paint {f50:.0} ms; {method} {} inside the page {c50:.0} ms); the call alone (fetch in the same browser) median {a50:.0} ms, p95 {a95:.0} ms; ratios {:.2} (first screenful) and {:.2} (last row)",
        which.label(),
        call.replace(&id, "{id}"),
        p50 / a50,
        w50 / a50
    );
    println!(
        "{}: page weight {:.0} KiB (the console's own files {:.0} KiB, the API's answers {:.0} KiB); the call's answer {:.0} KiB; ratio {:.2}",
        which.label(),
        kib(last.own + last.answers),
        kib(last.own),
        kib(last.answers),
        kib(answer_bytes),
        (last.own + last.answers) as f64 / answer_bytes as f64
    );
    if let Screen::Board = which {
        live_boards(api, token, &id, samples).await?;
    }
    Ok(())
}
