//! The console in the real Chromium, driven over the DevTools protocol against a real `belay`
//! process: a reviewer signs in, turns a plan's auto top-up on, walks the review queue by keyboard
//! and mouse, and sees the matrix move. Every request the pages make is intercepted: belay's own
//! origin goes through, anything else is failed and counted (there must be none); page script
//! errors, console errors and 4xx/5xx answers fail the test; each page's screenshot is kept
//! under the test's target tmp dir and checked to be a PNG.

use crate::common::{Belay, wait_until, wait_until_every};
use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::cdp::browser_protocol::fetch::{ContinueRequestParams, EventRequestPaused, FailRequestParams};
use chromiumoxide::cdp::browser_protocol::log::{EventEntryAdded, LogEntryLevel};
use chromiumoxide::cdp::browser_protocol::network::{ErrorReason, EventResponseReceived};
use chromiumoxide::cdp::browser_protocol::page::CaptureScreenshotFormat;
use chromiumoxide::cdp::js_protocol::runtime::{ConsoleApiCalledType, EventConsoleApiCalled, EventExceptionThrown};
use chromiumoxide::page::{Page, ScreenshotParams};
use futures::StreamExt;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the pages did that a test must see empty (or check).
#[derive(Default)]
pub(crate) struct Journal {
    pub(crate) outside: Vec<String>,
    pub(crate) errors: Vec<String>,
    pub(crate) bad_answers: Vec<String>,
}

pub(crate) struct Console {
    pub(crate) browser: Browser,
    pub(crate) page: Page,
    pub(crate) journal: Arc<Mutex<Journal>>,
    _profile: tempfile::TempDir,
    handler: tokio::task::JoinHandle<()>,
    pub(crate) base: String,
}

fn chromium() -> String {
    std::env::var("BELAY_CHROMIUM").unwrap_or_else(|_| "/usr/lib/chromium/chromium".into())
}

impl Console {
    pub(crate) async fn open(base: &str) -> Console {
        Self::open_allowing(base, &[]).await
    }

    /// As [`Console::open`], requests to the `also` origins (an artifact origin) going through too.
    pub(crate) async fn open_allowing(base: &str, also: &[String]) -> Console {
        let profile = tempfile::tempdir().unwrap();
        let config = BrowserConfig::builder()
            .chrome_executable(chromium())
            .no_sandbox()
            .user_data_dir(profile.path())
            .enable_request_intercept()
            .disable_https_first()
            .launch_timeout(Duration::from_secs(30))
            .request_timeout(Duration::from_secs(15))
            .window_size(1280, 900)
            .viewport(None)
            .args([
                "disable-gpu",
                "disable-quic",
                "no-first-run",
                "disable-background-networking",
                "disable-component-update",
                "disable-sync",
                "disable-dev-shm-usage",
            ])
            .build()
            .unwrap();
        let (browser, mut handler) = Browser::launch(config).await.expect("launch Chromium");
        let handler = tokio::spawn(async move { while handler.next().await.is_some() {} });
        let page = browser.new_page("about:blank").await.unwrap();
        let journal = Arc::new(Mutex::new(Journal::default()));

        // Every request: belay's origin goes on to belay, anything else is failed and counted.
        let mut paused = page.event_listener::<EventRequestPaused>().await.unwrap();
        let (p, j, origin) = (page.clone(), journal.clone(), format!("{base}/"));
        let also: Vec<String> = also.iter().map(|o| format!("{o}/")).collect();
        tokio::spawn(async move {
            while let Some(ev) = paused.next().await {
                let url = ev.request.url.clone();
                if url.starts_with(&origin) || also.iter().any(|o| url.starts_with(o)) {
                    let _ = p.execute(ContinueRequestParams::new(ev.request_id.clone())).await;
                } else {
                    j.lock().unwrap().outside.push(url);
                    let _ = p
                        .execute(FailRequestParams::new(
                            ev.request_id.clone(),
                            ErrorReason::BlockedByClient,
                        ))
                        .await;
                }
            }
        });
        let mut thrown = page.event_listener::<EventExceptionThrown>().await.unwrap();
        let j = journal.clone();
        tokio::spawn(async move {
            while let Some(ev) = thrown.next().await {
                let d = &ev.exception_details;
                let what = d
                    .exception
                    .as_ref()
                    .and_then(|o| o.description.clone())
                    .unwrap_or_else(|| d.text.clone());
                j.lock().unwrap().errors.push(format!("uncaught: {what}"));
            }
        });
        let mut console = page.event_listener::<EventConsoleApiCalled>().await.unwrap();
        let j = journal.clone();
        tokio::spawn(async move {
            while let Some(ev) = console.next().await {
                if matches!(ev.r#type, ConsoleApiCalledType::Error | ConsoleApiCalledType::Assert) {
                    j.lock().unwrap().errors.push(format!(
                        "console.error: {:?}",
                        ev.args.first().and_then(|a| a.value.clone())
                    ));
                }
            }
        });
        page.enable_log().await.unwrap();
        let mut logs = page.event_listener::<EventEntryAdded>().await.unwrap();
        let j = journal.clone();
        tokio::spawn(async move {
            while let Some(ev) = logs.next().await {
                if matches!(ev.entry.level, LogEntryLevel::Error) {
                    j.lock()
                        .unwrap()
                        .errors
                        .push(format!("log: {} {:?}", ev.entry.text, ev.entry.url));
                }
            }
        });
        let mut answers = page.event_listener::<EventResponseReceived>().await.unwrap();
        let j = journal.clone();
        tokio::spawn(async move {
            while let Some(ev) = answers.next().await {
                if ev.response.status >= 400 {
                    j.lock()
                        .unwrap()
                        .bad_answers
                        .push(format!("{} {}", ev.response.status, ev.response.url));
                }
            }
        });
        Console {
            browser,
            page,
            journal,
            _profile: profile,
            handler,
            base: base.to_string(),
        }
    }

    pub(crate) async fn eval<T: serde::de::DeserializeOwned>(&self, js: &str) -> T {
        self.page
            .evaluate(js)
            .await
            .unwrap_or_else(|e| panic!("evaluating {js}: {e}"))
            .into_value()
            .unwrap_or_else(|e| panic!("reading the value of {js}: {e}"))
    }

    /// Waits until `js` is true in the page.
    pub(crate) async fn until(&self, what: &str, js: &str) {
        wait_until(&format!("{what} ({js})"), Duration::from_secs(60), async || match self
            .page
            .evaluate(js)
            .await
            .map(|r| r.into_value::<bool>())
        {
            Ok(Ok(true)) => Ok(()),
            Ok(r) => Err(format!("{r:?}")),
            Err(e) => Err(e.to_string()),
        })
        .await;
    }

    /// Waits until the console has rendered the page at `path`.
    pub(crate) async fn ready(&self, path: &str) {
        self.until(
            &format!("the page {path}"),
            &format!("document.body && document.body.dataset.ready === {}", json!(path)),
        )
        .await;
    }

    /// Opens `path` and waits until the console has rendered it.
    pub(crate) async fn visit(&self, path: &str) {
        self.page.goto(format!("{}{path}", self.base)).await.unwrap();
        self.ready(path).await;
    }

    /// Signs in with `token` on the sign-in page.
    pub(crate) async fn sign_in(&self, token: &str) {
        self.visit("/sign-in").await;
        self.type_into("#token", token).await;
        self.click("button[type=submit]").await;
        self.ready("/plans").await;
    }

    /// Sets a `<select>` (or input) to `value` as a person would, firing `change`.
    pub(crate) async fn choose(&self, css: &str, value: &str) {
        let done: bool = self
            .eval(&format!(
                "(() => {{ const s = document.querySelector({}); if (!s) return false; s.value = {}; \
                  s.dispatchEvent(new Event('change', {{bubbles: true}})); return true; }})()",
                json!(css),
                json!(value)
            ))
            .await;
        assert!(done, "no {css}");
    }

    pub(crate) async fn count(&self, css: &str) -> usize {
        self.eval(&format!("document.querySelectorAll({}).length", json!(css)))
            .await
    }

    pub(crate) async fn click(&self, css: &str) {
        self.page
            .find_element(css)
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"))
            .click()
            .await
            .unwrap();
    }

    pub(crate) async fn type_into(&self, css: &str, text: &str) {
        let el = self
            .page
            .find_element(css)
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"));
        el.focus().await.unwrap();
        el.type_str(text).await.unwrap();
    }

    /// Presses `key` on whatever has the focus (keyboard only: no element is clicked or focused
    /// by the test).
    pub(crate) async fn key(&self, key: &str) {
        self.page
            .find_element(":focus")
            .await
            .expect("something has the focus")
            .press_key(key)
            .await
            .unwrap();
    }

    pub(crate) async fn text(&self, css: &str) -> String {
        self.eval(&format!(
            "(document.querySelector({}) || {{}}).textContent || ''",
            json!(css)
        ))
        .await
    }

    /// A full-page screenshot, kept as `<name>.png` and checked to be a PNG of the window's size.
    pub(crate) async fn screenshot(&self, name: &str) {
        let png = self
            .page
            .screenshot(
                ScreenshotParams::builder()
                    .format(CaptureScreenshotFormat::Png)
                    .full_page(true)
                    .build(),
            )
            .await
            .unwrap();
        check_png(&png, name);
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), &png).unwrap();
    }

    /// Nothing left the console's origin, nothing failed, nothing answered 4xx or 5xx.
    pub(crate) fn assert_clean(&self, when: &str) {
        let j = self.journal.lock().unwrap();
        assert!(j.outside.is_empty(), "{when}: requests outside belay: {:?}", j.outside);
        assert!(j.errors.is_empty(), "{when}: page errors: {:?}", j.errors);
        assert!(j.bad_answers.is_empty(), "{when}: failed answers: {:?}", j.bad_answers);
    }

    pub(crate) async fn close(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(5), self.browser.close()).await;
        match tokio::time::timeout(Duration::from_secs(5), self.browser.wait()).await {
            Ok(Ok(Some(_))) => {}
            _ => {
                let _ = self.browser.kill().await;
                let _ = self.browser.wait().await;
            }
        }
        self.handler.abort();
    }
}

/// A PNG: the signature, an IHDR of non-zero size first, chunks whose lengths add up, IEND last.
fn check_png(png: &[u8], name: &str) {
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{name}: not a PNG");
    let mut at = 8;
    let mut kinds = Vec::new();
    while at + 8 <= png.len() {
        let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
        let kind = String::from_utf8_lossy(&png[at + 4..at + 8]).into_owned();
        if kind == "IHDR" {
            let w = u32::from_be_bytes(png[at + 8..at + 12].try_into().unwrap());
            let h = u32::from_be_bytes(png[at + 12..at + 16].try_into().unwrap());
            assert!(w > 0 && h > 0, "{name}: empty image");
        }
        kinds.push(kind);
        at += 12 + len;
    }
    assert_eq!(at, png.len(), "{name}: chunk lengths do not add up");
    assert_eq!(kinds.first().map(String::as_str), Some("IHDR"), "{name}");
    assert_eq!(kinds.last().map(String::as_str), Some("IEND"), "{name}");
    assert!(kinds.iter().any(|k| k == "IDAT"), "{name}: no image data");
}

/// A loopback HTTP server that counts every connection it is sent: the canary a leak would hit.
pub(crate) async fn canary() -> (u16, Arc<Mutex<usize>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(Mutex::new(0));
    let h = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            *h.lock().unwrap() += 1;
            use tokio::io::AsyncWriteExt;
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").await;
        }
    });
    (port, hits)
}

fn cell_value(m: &Value, slug: &str, col: &str) -> i64 {
    m["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["case"]["slug"] == slug)
        .unwrap_or_else(|| panic!("no cell of {slug} in {m}"))[col]
        .as_i64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reviewer_turns_auto_top_up_on_walks_the_queue_and_the_matrix_moves() {
    let artifact_port = crate::common::free_port();
    let artifacts = format!("http://127.0.0.1:{artifact_port}");
    let b = Belay::start_with_env(&[
        ("BELAY_API_ARTIFACT_LISTEN", &format!("127.0.0.1:{artifact_port}")),
        ("BELAY_ARTIFACT_SECRET", "an-artifact-secret-of-at-least-32-bytes"),
    ])
    .await;
    b.catalogue().await;
    let (s, v) = b
        .post(
            "/v1/test-cases",
            json!({"slug": "d", "version": "1.0.0", "testType": "standard", "variants": ["default"]}),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    // Each run keeps one HTML artifact, played from the artifact origin (console_play.rs walks
    // what such a frame may and may not do).
    let script = "printf '<h1>Run output</h1><p>built</p>' > index.html\n\
         printf '{\"status\":\"completed\",\"loaded\":true,\"artifacts\":[\"index.html\"]}' > manifest.json";
    b.harness("h", 4, script).await;
    let combo = json!({"kind": "harness", "harness": "h", "model": "m"});
    let (s, plan) = b
        .post(
            "/v1/coverage-plans",
            json!({
                "name": "nightly",
                "cases": [
                    {"slug": "c", "version": "1.0.0", "variant": "default"},
                    {"slug": "d", "version": "1.0.0", "variant": "default"}
                ],
                "combinations": [combo],
                "runsPerCell": 3,
                "bufferTarget": {"kind": "bounded", "runs": 3},
                "autoTopUp": false,
                "paused": true
            }),
        )
        .await;
    assert_eq!(s, 201, "{plan}");
    let plan = plan["id"].as_str().unwrap().to_string();

    let c = Console::open_allowing(&b.url, std::slice::from_ref(&artifacts)).await;
    c.page.goto(format!("{}/", c.base)).await.unwrap();
    // Not signed in: the console asks for a token.
    c.ready("/sign-in").await;
    c.screenshot("sign-in").await;
    c.type_into("#token", &b.token).await;
    c.key("Enter").await;
    c.ready("/plans").await;
    c.screenshot("plans").await;
    assert!(c.text("#plans").await.contains("nightly"));
    c.click(&format!("a[href='/plans/{plan}']")).await;
    c.ready(&format!("/plans/{plan}")).await;
    // Paused with auto top-up off: opening it launched nothing.
    assert_eq!(c.text("#totals [data-col=inFlight]").await, "0");
    assert_eq!(c.text("#totals [data-col=completed]").await, "0");
    assert!(!c.eval::<bool>("document.querySelector('#auto-top-up').checked").await);

    // Auto top-up on: the plan is resumed with autoTopUp, and opening it tops up the first cell
    // (three runs fill the buffer of 3).
    c.click("#auto-top-up").await;
    let m = wait_until_every(
        "the first cell's runs to complete",
        Duration::from_secs(90),
        Duration::from_millis(200),
        async || {
            let m = b.get(&format!("/v1/coverage-plans/{plan}/coverage")).await;
            if cell_value(&m, "c", "completed") == 3 {
                Ok(m)
            } else {
                Err(m)
            }
        },
    )
    .await;
    assert_eq!(
        cell_value(&m, "d", "completed") + cell_value(&m, "d", "inFlight"),
        0,
        "{m}"
    );
    let p = b.get(&format!("/v1/coverage-plans/{plan}")).await;
    assert_eq!(
        (p["autoTopUp"].clone(), p["paused"].clone()),
        (json!(true), json!(false)),
        "{p}"
    );
    c.screenshot("plan-after-auto-top-up").await;

    c.click(&format!("a[href='/plans/{plan}/queue']")).await;
    c.ready(&format!("/plans/{plan}/queue")).await;
    assert!(
        c.text("#queue-count").await.starts_with("3 runs"),
        "{}",
        c.text("#queue-count").await
    );
    let queue: Vec<String> = b.get(&format!("/v1/coverage-plans/{plan}/queue")).await["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    assert_eq!(queue.len(), 3);
    c.screenshot("review-queue").await;

    // The artifact as the API serves it: its bytes, inert (sandboxed, no network).
    let resp = b
        .http
        .get(format!("{}/v1/runs/{}/artifact?path=index.html", b.url, queue[0]))
        .bearer_auth(&b.token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/html; charset=utf-8");
    assert!(
        resp.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .starts_with("sandbox; default-src 'none'")
    );
    assert!(resp.text().await.unwrap().starts_with("<h1>Run output</h1>"));
    let (s, v) = b
        .request(
            "GET",
            &format!("/v1/runs/{}/artifact?path=other.html", queue[0]),
            Some(&b.token),
            None,
        )
        .await;
    assert_eq!((s, v["error"]["code"].as_str()), (404, Some("not_found")), "{v}");
    let (s, v) = b
        .request("GET", &format!("/v1/runs/{}/artifact", queue[0]), Some(&b.token), None)
        .await;
    assert_eq!(s, 422, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("path"), "{v}");
    let (s, _) = b
        .request(
            "GET",
            &format!("/v1/runs/{}/artifact?path=index.html", queue[0]),
            None,
            None,
        )
        .await;
    assert_eq!(s, 401);

    // Walk it from the front. The build plays in a sandboxed frame from the artifact origin.
    let frame: Value = c
        .eval(
            "(() => { const f = document.querySelector('.artifact-frame'); \
              return {sandbox: f.getAttribute('sandbox'), artifacts: f.src.startsWith(%ORIGIN%)}; })()"
                .replace("%ORIGIN%", &json!(format!("{artifacts}/r/{}/", queue[0])).to_string())
                .as_str(),
        )
        .await;
    assert_eq!(
        frame,
        json!({"sandbox": "allow-scripts allow-pointer-lock", "artifacts": true})
    );
    // The cell's three repeats are shown side by side, in the queue's order.
    let shown: Vec<String> = c
        .eval("[...document.querySelectorAll('section.repeat')].map((s) => s.dataset.run)")
        .await;
    assert_eq!(shown, queue, "the cell's repeats side by side, in the queue's order");
    for (i, run) in queue.iter().enumerate() {
        // Focus is on the rating of the repeat to review next, in the queue's order.
        assert_eq!(
            &c.eval::<String>("document.activeElement.closest('section.repeat').dataset.run")
                .await,
            run,
            "the queue is walked in its order"
        );
        if i == 0 {
            // Keyboard only: the page focused the rating; 4 chooses "great", Enter submits.
            assert_eq!(c.eval::<String>("document.activeElement.className").await, "choice");
            c.key("4").await;
            assert_eq!(c.eval::<String>("document.activeElement.dataset.value").await, "great");
            c.key("Enter").await;
        } else {
            c.click(&format!(
                "section.repeat[data-run='{run}'] button.opt[data-value=passable]"
            ))
            .await;
            c.click(&format!("section.repeat[data-run='{run}'] .submit-review"))
                .await;
        }
        // The review landed and the console shows it.
        let reviews = wait_until(
            &format!("the review of {run} to land"),
            Duration::from_secs(30),
            async || {
                let reviews = b.get(&format!("/v1/runs/{run}/reviews")).await;
                if reviews.as_array().is_some_and(|r| r.len() == 1) {
                    Ok(reviews)
                } else {
                    Err(reviews)
                }
            },
        )
        .await;
        let want = if i == 0 { "great" } else { "passable" };
        assert_eq!(reviews[0]["ratings"], json!({"overall": want}), "{reviews}");
        if i + 1 < queue.len() {
            c.until(
                "the review shown and the next repeat focused",
                &format!(
                    "document.querySelector(\"section.repeat[data-run='{run}']\").dataset.reviewed === 'true' \
                     && document.activeElement.closest('section.repeat').dataset.run === {}",
                    json!(queue[i + 1])
                ),
            )
            .await;
        }
    }
    // The cell is done: the console moved on to the next cell, or says nothing waits.
    c.until(
        "the walked queue",
        &format!(
            "!!document.querySelector('#queue-empty') || (!!document.querySelector('#cell') && !document.querySelector(\"section.repeat[data-run='{}']\"))",
            queue[0]
        ),
    )
    .await;

    // Back on the plan: the first cell is reviewed, and the reviews topped the plan up.
    // The page is loaded again on each look, so it is asked every 500 ms.
    wait_until_every(
        "a top-up after the reviews",
        Duration::from_secs(90),
        Duration::from_millis(500),
        async || {
            c.page.goto(format!("{}/plans/{plan}", c.base)).await.unwrap();
            c.ready(&format!("/plans/{plan}")).await;
            let unreviewed_c = c.text("tr[data-cell] [data-col=unreviewed]").await;
            let m = b.get(&format!("/v1/coverage-plans/{plan}/coverage")).await;
            let next = cell_value(&m, "d", "completed") + cell_value(&m, "d", "inFlight");
            if next == 0 {
                return Err(m);
            }
            assert_eq!(cell_value(&m, "c", "unreviewed"), 0, "{m}");
            assert_eq!(unreviewed_c, "0", "the console shows the first cell reviewed");
            let shown: i64 = c.text("#totals [data-col=completed]").await.parse().unwrap();
            assert!(shown >= 3, "totals completed {shown}");
            Ok(())
        },
    )
    .await;
    c.screenshot("plan-after-reviews").await;

    // "Top up now" shows the top-up's answer.
    c.click("#top-up-now").await;
    c.until("the top-up answer", "!!document.querySelector('#topup-answer')")
        .await;
    let answer = c.text("#topup-answer").await;
    assert!(answer.contains("Buffer target in force: bounded: 3 runs"), "{answer}");
    c.screenshot("plan-top-up-answer").await;

    // Halt all asks first; keeping them changes nothing.
    c.click("#halt-all").await;
    c.until("the halt-all dialog", "document.querySelector('#halt-all-dialog').open")
        .await;
    c.click("#halt-all-cancel").await;
    c.until("the dialog closed", "!document.querySelector('#halt-all-dialog').open")
        .await;
    let p = b.get(&format!("/v1/coverage-plans/{plan}")).await;
    assert_eq!(p["paused"], json!(false), "cancelling the dialog does not halt: {p}");
    c.assert_clean("after the walk");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_console_shows_the_api_error_as_stated_and_changes_nothing() {
    let b = Belay::start().await;
    b.catalogue().await;
    let (s, plan) = b
        .post(
            "/v1/coverage-plans",
            json!({"name": "p", "cases": [{"slug": "c", "version": "1.0.0", "variant": "default"}],
                   "combinations": [{"kind": "harness", "harness": "nowhere", "model": "m"}],
                   "runsPerCell": 1, "paused": true, "autoTopUp": false}),
        )
        .await;
    assert_eq!(s, 201, "{plan}");
    let plan = plan["id"].as_str().unwrap().to_string();
    let before = b.get(&format!("/v1/coverage-plans/{plan}")).await;
    let c = Console::open(&b.url).await;
    c.page.goto(format!("{}/sign-in", c.base)).await.unwrap();
    c.ready("/sign-in").await;
    c.type_into("#token", &b.token).await;
    c.click("button[type=submit]").await;
    c.ready("/plans").await;
    c.page.goto(format!("{}/plans/{plan}", c.base)).await.unwrap();
    c.ready(&format!("/plans/{plan}")).await;
    // The unlaunchable cell is shown with its reason.
    let notes = c.text("tr[data-cell] .tag.unlaunchable").await;
    assert!(notes.starts_with("unlaunchable: "), "{notes}");
    // A negative bound is refused before anything is sent, next to the field, in the API's
    // terms (the field and the rule); the field goes back to the stored value.
    c.eval::<bool>(
        "(() => { const k = document.querySelector('#plan-target-kind'); k.value = 'bounded'; \
          k.dispatchEvent(new Event('change')); document.querySelector('#plan-target-runs').value = '-1'; return true; })()",
    )
    .await;
    c.click("#plan-target-save").await;
    c.until(
        "the refusal",
        "document.querySelector('#plan-target-note').dataset.outcome === 'refused'",
    )
    .await;
    let note = c.text("#plan-target-note").await;
    assert!(
        note.starts_with("runs: give a whole number of runs, 0 or more"),
        "{note}"
    );
    assert_eq!(
        b.get(&format!("/v1/coverage-plans/{plan}")).await,
        before,
        "nothing changed"
    );
    c.screenshot("plan-error").await;
    {
        let j = c.journal.lock().unwrap();
        // Nothing was sent, so nothing failed.
        assert!(j.bad_answers.is_empty(), "{:?}", j.bad_answers);
    }
    c.assert_clean("after the refused edit");

    // A wrong token: the console says so and asks for another.
    c.page.goto(format!("{}/sign-in", c.base)).await.unwrap();
    c.ready("/sign-in").await;
    c.type_into("#token", "blt_wrong").await;
    c.click("button[type=submit]").await;
    c.until("the error", "!document.querySelector('#error').hidden").await;
    assert!(c.text("#error").await.starts_with("401 "), "{}", c.text("#error").await);
    assert_eq!(c.eval::<String>("location.pathname").await, "/sign-in");
    c.close().await;
}

const OK_SCRIPT: &str = r#"printf '{"status":"completed","loaded":true}' > "$BELAY_MANIFEST""#;

fn climber_of<'a>(board: &'a Value, harness: &str) -> &'a Value {
    board["climbers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["combination"]["harness"] == harness)
        .unwrap_or_else(|| panic!("no climber on {harness} in {board}"))
}

/// The live standing of `climber` on `rung`.
fn standing_on<'a>(climber: &'a Value, rung: &str) -> &'a Value {
    climber["rungs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["rungId"] == rung && s["stale"] == false)
        .unwrap_or_else(|| panic!("no standing on {rung} in {climber}"))
}

/// The board's cell of a climber on a rung, as a CSS selector.
fn cell(climber: &str, rung: &str) -> String {
    format!("td[data-climber={}][data-rung={}]", json!(climber), json!(rung))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_ladder_board_shows_a_wall_with_its_tally_and_a_promotion_past_it_beside_the_gates_verdict() {
    let b = Belay::start().await;
    b.catalogue().await;
    let (s, v) = b
        .post(
            "/v1/test-cases",
            json!({"slug": "d", "version": "1.0.0", "testType": "standard", "variants": ["default"]}),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    b.harness("x", 4, OK_SCRIPT).await;
    b.harness("y", 4, OK_SCRIPT).await;
    let (s, l) = b
        .post(
            "/v1/ladders",
            json!({"name": "climb",
                   "rungs": [{"slug": "c", "version": "1.0.0", "variant": "default"},
                             {"slug": "d", "version": "1.0.0", "variant": "default"}],
                   "combinations": [{"kind": "harness", "harness": "x", "model": "m"},
                                    {"kind": "harness", "harness": "y", "model": "m"}],
                   "runsPerCell": 1, "autoTopUp": false, "bufferTarget": {"kind": "unbounded"}}),
        )
        .await;
    assert_eq!(s, 201, "{l}");
    let id = l["id"].as_str().unwrap().to_string();
    let rungs: Vec<String> = l["rungs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    let board = b.get(&format!("/v1/ladders/{id}/progress")).await;
    let (x, y) = (
        climber_of(&board, "x")["climberKey"].as_str().unwrap().to_string(),
        climber_of(&board, "y")["climberKey"].as_str().unwrap().to_string(),
    );

    let c = Console::open(&b.url).await;
    c.sign_in(&b.token).await;
    c.click("a[href='/ladders']").await;
    c.ready("/ladders").await;
    assert!(
        c.text("#ladders").await.contains("Rung by rung"),
        "{}",
        c.text("#ladders").await
    );
    c.click(&format!("a[href='/ladders/{id}']")).await;
    c.ready(&format!("/ladders/{id}")).await;
    // A new ladder is disabled: opening the board enqueued nothing, and the board says how to
    // start spending. The outer axis reads as the console's words; the five statuses are named.
    assert_eq!(c.text("#enable").await, "Start spending on this climb");
    assert_eq!(
        b.get(&format!("/v1/jobs?origin=ladder:{id}"))
            .await
            .as_array()
            .unwrap()
            .len(),
        0
    );
    assert_eq!(
        c.eval::<String>("document.querySelector('#outer-axis').selectedOptions[0].textContent")
            .await,
        "Rung by rung"
    );
    let legend = c.text("#statuses").await;
    for status in ["climbing", "awaitingReview", "walled", "held", "toppedOut"] {
        assert!(legend.contains(status), "{legend}");
    }
    // Disabled reads as off everywhere: each climber, and the board's line.
    let states: Vec<String> = c
        .eval("[...document.querySelectorAll('#board .climber-status')].map((e) => e.textContent)")
        .await;
    assert_eq!(states, ["off", "off"]);
    assert!(c.text("#board-summary").await.starts_with("off"));
    c.screenshot("ladder-disabled").await;

    // Start spending: rung one launches for both climbers.
    c.click("#enable").await;
    c.until(
        "the enabled board",
        "document.querySelector('#enable') && document.querySelector('#enable').textContent === 'Stop spending on this climb'",
    )
    .await;
    let runs: Vec<(String, String)> = wait_until_every(
        "rung one to run",
        Duration::from_secs(90),
        Duration::from_millis(200),
        async || {
            let mut runs = Vec::new();
            for j in b.get(&format!("/v1/jobs?origin=ladder:{id}")).await.as_array().unwrap() {
                if j["status"] == "completed" {
                    let r = b.get(&format!("/v1/runs?jobId={}", j["id"].as_str().unwrap())).await;
                    if let Some(run) = r[0]["id"].as_str() {
                        runs.push((
                            j["combination"]["harness"].as_str().unwrap().to_string(),
                            run.to_string(),
                        ));
                    }
                }
            }
            if runs.len() == 2 {
                Ok(runs)
            } else {
                Err(format!("{runs:?}"))
            }
        },
    )
    .await;
    // Before any review both climbers wait on the reviewer.
    c.visit(&format!("/ladders/{id}")).await;
    assert_eq!(
        c.text(&format!("th[data-climber={}] .climber-status", json!(x))).await,
        "needs your review"
    );
    assert_eq!(
        c.eval::<String>(&format!(
            "document.querySelector({}).dataset.status",
            json!(format!("th[data-climber={}] .climber-status", json!(x)))
        ))
        .await,
        "awaitingReview",
        "the spec's status stays on the element"
    );
    // The ledger beside the buffer: both runs reported nothing and settled at m's list price.
    let page: String = c.eval("document.body.textContent").await;
    assert!(page.contains("spent $1.80, reserved $0.00; no budget"), "{page}");
    c.screenshot("ladder-awaiting-review").await;
    // x's run is broken, y's great: x walls at rung one, y moves on.
    for (harness, run) in &runs {
        let rating = if harness == "x" { "broken" } else { "great" };
        let (s, v) = b
            .post(&format!("/v1/runs/{run}/review"), json!({"ratings": {"code": rating}}))
            .await;
        assert_eq!(s, 200, "{v}");
    }
    c.visit(&format!("/ladders/{id}")).await;
    let board = b.get(&format!("/v1/ladders/{id}/progress")).await;
    assert_eq!(climber_of(&board, "x")["status"], "walled", "{board}");
    let wall = cell(&x, &rungs[0]);
    assert_eq!(
        c.text(&format!("th[data-climber={}] .climber-status", json!(x))).await,
        "walled"
    );
    assert_eq!(c.text(&format!("{wall} .status")).await, "▶ walled");
    assert_eq!(
        c.eval::<Value>(&format!(
            "(() => {{ const v = document.querySelector({}).dataset; return [v.verdict, v.outcome, v.override, v.recorded]; }})()",
            json!(format!("{wall} .verdict"))
        ))
        .await,
        json!(["wall", "wall", "", "false"])
    );
    // The tally behind the verdict, as the API states it; computed live, so marked unrecorded.
    let tally = c.text(&format!("{wall} .tally")).await;
    assert_eq!(
        tally, "passing 0 of 1 needed · completed 1, judged 1, unjudged 0, pending 0",
        "{tally}"
    );
    assert_eq!(c.text(&format!("{wall} .tag.live")).await.trim(), "recorded: false");
    assert_eq!(c.count(&format!("{wall} button.promote")).await, 1);
    assert_eq!(c.count(&format!("{wall} button.wall")).await, 0);
    // y cleared rung one: the gate's advance can be walled by hand, not promoted again.
    let passed = cell(&y, &rungs[0]);
    assert_eq!(c.count(&format!("{passed} button.wall")).await, 1);
    assert_eq!(c.count(&format!("{passed} button.promote")).await, 0);
    // x has not reached rung two: its cell there has no controls.
    let unreached = cell(&x, &rungs[1]);
    assert_eq!(
        c.eval::<String>(&format!("document.querySelector({}).dataset.reached", json!(unreached)))
            .await,
        "false"
    );
    assert_eq!(c.count(&format!("{unreached} button")).await, 0);
    assert!(c.text(&cell(&y, &rungs[1])).await.starts_with("▶ "));
    c.screenshot("ladder-walled").await;

    // Promote past the wall: x moves on to rung two, and the override sits beside the gate's
    // wall, which is still the gate's verdict.
    c.click(&format!("{wall} button.promote")).await;
    c.until(
        "the override on the board",
        &format!(
            "(() => {{ const v = document.querySelector({}); return !!v && v.dataset.override === 'advance'; }})()",
            json!(format!("{wall} .verdict"))
        ),
    )
    .await;
    let shown = c.text(&format!("{wall} .verdict")).await;
    assert!(shown.starts_with("gate: wall override: advance"), "{shown}");
    assert_eq!(
        c.count(&format!("{wall} .status")).await,
        0,
        "x no longer stands on rung one"
    );
    assert!(
        c.text(&cell(&x, &rungs[1])).await.starts_with("▶ "),
        "x stands on rung two"
    );
    let board = b.get(&format!("/v1/ladders/{id}/progress")).await;
    let cx = climber_of(&board, "x");
    assert_eq!(cx["currentRung"], rungs[1].as_str(), "{cx}");
    let st = standing_on(cx, &rungs[0]);
    assert_eq!(
        (st["verdict"].clone(), st["override"].clone(), st["outcome"].clone()),
        (json!("wall"), json!("advance"), json!("advance")),
        "{st}"
    );
    assert_eq!(c.count(&format!("{wall} button.clear-override")).await, 1);
    // Nothing in flight on rung two yet, the ladder on: x waits for a top-up, and says so.
    let x_status = format!("th[data-climber={}] .climber-status", json!(x));
    assert_eq!(c.text(&x_status).await, "waiting for a top-up");
    assert_eq!(
        c.eval::<String>(&format!("document.querySelector({}).dataset.status", json!(x_status)))
            .await,
        "climbing"
    );
    c.screenshot("ladder-promoted-past-the-wall").await;

    // Top up now records the verdicts (no more `recorded: false`) and launches rung two for both;
    // the override survives it.
    c.click("#top-up-now").await;
    c.until("the top-up answer", "!!document.querySelector('#topup-answer')")
        .await;
    assert!(
        c.text("#topup-answer").await.contains("enqueued: 2"),
        "{}",
        c.text("#topup-answer").await
    );
    // The board redraws after its own top-up: x is no longer waiting.
    c.until(
        "x no longer waiting",
        &format!(
            "(() => {{ const s = document.querySelector({}); return !!s && s.dataset.state !== 'waiting'; }})()",
            json!(x_status)
        ),
    )
    .await;
    c.visit(&format!("/ladders/{id}")).await;
    assert_eq!(c.count(".tag.live").await, 0, "every decided verdict is recorded now");
    assert_eq!(
        c.eval::<String>(&format!(
            "document.querySelector({}).dataset.override",
            json!(format!("{wall} .verdict"))
        ))
        .await,
        "advance"
    );

    // Steering and hold: y held, x prioritised and focused.
    c.click(&format!("th[data-climber={}] input.held", json!(y))).await;
    c.until(
        "y held",
        &format!(
            "(() => {{ const s = document.querySelector({}); return !!s && s.textContent === 'held'; }})()",
            json!(format!("th[data-climber={}] .climber-status", json!(y)))
        ),
    )
    .await;
    c.choose(&format!("th[data-climber={}] input.priority", json!(x)), "5")
        .await;
    let board = wait_until("the priority to land", Duration::from_secs(30), async || {
        let board = b.get(&format!("/v1/ladders/{id}/progress")).await;
        if climber_of(&board, "x")["steering"]["priority"] == 5 {
            Ok(board)
        } else {
            Err(board)
        }
    })
    .await;
    assert_eq!(climber_of(&board, "y")["status"], "held", "{board}");
    assert_eq!(climber_of(&board, "y")["steering"]["held"], true, "{board}");
    c.ready(&format!("/ladders/{id}")).await;

    // Model by model: the outer axis is changed with the console's words.
    c.choose("#outer-axis", "combination").await;
    wait_until("the outer axis to change", Duration::from_secs(30), async || {
        let axis = b.get(&format!("/v1/ladders/{id}")).await["outerAxis"].clone();
        if axis == "combination" { Ok(()) } else { Err(axis) }
    })
    .await;
    c.until(
        "Model by model",
        "document.body.dataset.ready && document.querySelector('#outer-axis') && document.querySelector('#outer-axis').selectedOptions[0].textContent === 'Model by model'",
    )
    .await;

    // A newer version of rung one's case: the pin is marked behind.
    let (s, v) = b
        .post(
            "/v1/test-cases",
            json!({"slug": "c", "version": "1.1.0", "testType": "standard", "variants": ["default"]}),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    c.visit(&format!("/ladders/{id}")).await;
    assert_eq!(
        c.text(&format!("tr[data-rung={}] th .tag.stale", json!(rungs[0])))
            .await,
        "pin behind: 1.1.0 is out"
    );
    c.screenshot("ladder-board").await;
    c.assert_clean("after the ladder board");
    c.close().await;
}

/// A Change of `tier` with one Task whose run writes `edits` and publishes.
async fn sample_change(b: &Belay, project: &str, goal: &str, tier: &str, edits: &[Value]) -> String {
    let c = crate::common::sample::change(
        b,
        project,
        json!({"goal": goal, "acceptanceCriteria": [], "invariants": [], "riskTier": tier}),
    )
    .await;
    crate::common::sample::task(b, &c, "t1", edits).await;
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rejected_candidate_shows_its_gaps_output_and_screenshots_and_an_approval_on_the_tree_moves_canonical() {
    use crate::common::sample::{sample_project, start_verification, wait_candidate, write};
    let b = Belay::start_with_sandbox().await;
    let project = sample_project(&b).await;
    // A broken test and a restyle: `unit` fails, and the UI file plans the browser check, which
    // takes its screenshots.
    let broken = sample_change(
        &b,
        &project,
        "Restyle and break a test",
        "low",
        &[
            write("public/style.css", "body { font-family: serif; margin: 3rem; }\nh1 { font-size: 2rem; }\n"),
            write(
                "test/broken.test.ts",
                "import { expect, test } from \"bun:test\";\n\ntest(\"the broken sum\", () => {\n  expect(1 + 1).toBe(3);\n});\n",
            ),
        ],
    )
    .await;
    let risky = sample_change(
        &b,
        &project,
        "Add bravo",
        "high",
        &[write("src/bravo.ts", "export const bravo = \"bravo\";\n")],
    )
    .await;
    let kr = start_verification(&b, &broken).await;
    let ka = start_verification(&b, &risky).await;
    let rejected = wait_candidate(&b, &kr, &["verified", "rejected", "stale", "promoted"]).await;
    assert_eq!(rejected["status"], "rejected", "{rejected:#}");
    let approvable = wait_candidate(&b, &ka, &["verified", "rejected", "stale", "promoted"]).await;
    assert_eq!(approvable["status"], "verified", "{approvable:#}");
    let evidence = rejected["evidence"].as_array().unwrap().clone();
    let failed = evidence
        .iter()
        .find(|e| e["status"] == "fail" && e["checkId"] == "unit")
        .unwrap_or_else(|| panic!("no failed unit check: {rejected:#}"))
        .clone();
    let browser = evidence
        .iter()
        .find(|e| e["checkId"] == "browser")
        .unwrap_or_else(|| panic!("no browser check: {rejected:#}"))
        .clone();

    // The output of an Evidence row through the API: the owner's, 404 to anyone else, in the
    // document.
    let out_path = format!("/v1/candidates/{kr}/evidence/{}/output", failed["id"].as_str().unwrap());
    let out = b.get(&out_path).await;
    let part = &out["parts"][0];
    assert_eq!(
        (out["checkId"].as_str(), part["label"].as_str()),
        (Some("unit"), Some("output")),
        "{out:#}"
    );
    assert_ne!(part["exitCode"], json!(0), "{out:#}");
    let tail = part["tail"].as_str().unwrap().to_string();
    assert!(tail.contains("the broken sum"), "{tail}");
    let store = b.store().await;
    let (_, bob) = store.create_account("bob").await.unwrap();
    let (s, v) = b.request("GET", &out_path, Some(&bob), None).await;
    assert_eq!((s, v["error"]["code"].as_str()), (404, Some("not_found")), "{v}");
    let (s, v) = b
        .request(
            "GET",
            &format!("/v1/candidates/{kr}/evidence/ev_nope/output"),
            Some(&b.token),
            None,
        )
        .await;
    assert_eq!(s, 404, "{v}");
    let (s, _) = b.request("GET", &out_path, None, None).await;
    assert_eq!(s, 401);
    let doc = b.get("/v1/openapi.json").await;
    assert!(
        doc["paths"]["/v1/candidates/{id}/evidence/{evidenceId}/output"]["get"].is_object(),
        "the route is in the document"
    );
    assert!(doc["components"]["schemas"]["EvidenceOutput"].is_object());

    let c = Console::open(&b.url).await;
    c.sign_in(&b.token).await;
    c.visit(&format!("/projects/{project}")).await;
    assert!(c.text("#canonical").await.starts_with("canonical generation 0"));
    c.click(&format!("a[href='/changes/{broken}']")).await;
    c.ready(&format!("/changes/{broken}")).await;
    let row = format!("tr[data-candidate={}]", json!(kr));
    assert_eq!(c.text(&format!("{row} .status")).await, "rejected");
    assert!(c.text("main").await.contains("Decision Receipts"));
    c.screenshot("change-rejected").await;
    c.click(&format!("a[href='/candidates/{kr}']")).await;
    c.ready(&format!("/candidates/{kr}")).await;
    assert_eq!(c.text("#candidate-status").await, "rejected");

    // Every Evidence row that is not a supported pass reads as a gap, and none of them is green.
    let rows: Value = c
        .eval(
            "[...document.querySelectorAll('tr.evidence')].map((r) => ({check: r.dataset.check, status: r.dataset.status, \
              coverage: r.dataset.coverage, gap: r.classList.contains('gap'), tag: r.querySelector('.tag').textContent, \
              background: getComputedStyle(r.querySelector('td')).backgroundColor}))",
        )
        .await;
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), evidence.len(), "{rows:?}");
    let ok_green = "rgb(243, 250, 245)";
    for r in rows {
        let supported = r["status"] == "pass" && r["coverage"] == "checked_supported";
        assert_eq!(r["gap"], json!(!supported), "{r}");
        if !supported {
            assert_eq!(r["tag"], "gap", "{r}");
            assert_ne!(r["background"], ok_green, "a gap shown green: {r}");
        }
    }
    let gaps = rejected["gaps"].as_array().unwrap();
    assert!(!gaps.is_empty());
    assert_eq!(c.count("#gaps li.gap").await, gaps.len());
    assert!(
        c.text("#gaps").await.contains("unit: failed"),
        "{}",
        c.text("#gaps").await
    );
    // The failed check's output, open, as the API states it.
    let failed_row = "tr.evidence[data-check=unit]";
    assert!(
        c.eval::<bool>(&format!("document.querySelector('{failed_row} details.output').open"))
            .await
    );
    assert_eq!(c.text(&format!("{failed_row} pre.tail")).await, tail);
    // The browser check's screenshots, as images that decoded.
    let shots = b
        .get(&format!(
            "/v1/candidates/{kr}/evidence/{}/screenshots",
            browser["id"].as_str().unwrap()
        ))
        .await;
    let n = shots.as_array().unwrap().len();
    assert!(n >= 1, "{shots}");
    c.until(
        "the screenshots decoded",
        &format!(
            "(() => {{ const i = [...document.querySelectorAll('tr.evidence[data-check=browser] img.screenshot')]; \
               return i.length === {n} && i.every((x) => x.complete && x.naturalWidth > 0); }})()"
        ),
    )
    .await;
    c.screenshot("candidate-rejected").await;
    // A rejected Candidate offers no gesture (the API's rule, not the page's): no Approve, no
    // Reject, no Promote, and the page says why. Promotion through the API lists what blocks it.
    assert_eq!(rejected["gestures"], json!([]), "{rejected:#}");
    for gesture in ["#grant", "#reject", "#promote"] {
        assert_eq!(c.count(gesture).await, 0, "{gesture} offered on a rejected Candidate");
    }
    assert!(
        c.text("#no-gestures").await.contains("rejected"),
        "{}",
        c.text("#gestures").await
    );
    let (s, blocked) = b
        .request("POST", &format!("/v1/candidates/{kr}/promote"), Some(&b.token), None)
        .await;
    assert_eq!((s, blocked["outcome"].as_str()), (200, Some("blocked")), "{blocked}");
    assert!(!blocked["blocks"].as_array().unwrap().is_empty(), "{blocked}");

    // What waits on a person: the high-risk Candidate, approved on its exact composed tree.
    c.click("a[href='/approvals']").await;
    c.ready("/approvals").await;
    c.click(&format!("a[href='/candidates/{ka}']")).await;
    c.ready(&format!("/candidates/{ka}")).await;
    let tree = approvable["composedTree"].as_str().unwrap();
    c.screenshot("candidate-awaiting-approval").await;
    assert_eq!(c.text("#composed-tree").await, tree, "{}", c.text("main").await);
    // Waiting on a person: Approve and Reject, and no Promote until a person decides.
    assert_eq!(c.count("#grant").await, 1);
    assert_eq!(c.count("#reject").await, 1);
    assert_eq!(c.count("#promote").await, 0);
    assert_eq!(
        c.text("tr[data-precondition=approval_granted_or_not_required] td:nth-child(2)")
            .await,
        "not satisfied"
    );
    c.type_into("#approval-reason", "read it; ship it").await;
    assert_eq!(
        c.eval::<String>("document.querySelector('#approval-reason').value")
            .await,
        "read it; ship it"
    );
    c.click("#grant").await;
    c.until("the decision answer", "!!document.querySelector('#decision-answer')")
        .await;
    assert_eq!(
        c.text("#decision-answer").await,
        "Recorded: granted. Promotion: promoted; canonical is at generation 1."
    );
    let approvals = b.get("/v1/approvals?status=granted").await;
    let a = approvals
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["candidateId"] == ka.as_str())
        .unwrap_or_else(|| panic!("no granted approval: {approvals}"));
    assert_eq!(
        (a["tree"].as_str(), a["decisionReason"].as_str()),
        (Some(tree), Some("read it; ship it")),
        "{a}"
    );
    // Promoted: the page follows the Candidate's new state and offers nothing more; a promotion
    // asked again through the API answers that it already promoted.
    c.until(
        "the gestures of the promoted Candidate",
        "!!document.querySelector('#no-gestures')",
    )
    .await;
    assert_eq!(c.text("#candidate-status").await, "promoted");
    for gesture in ["#grant", "#reject", "#promote"] {
        assert_eq!(c.count(gesture).await, 0, "{gesture} offered on a promoted Candidate");
    }
    let (s, again) = b
        .request("POST", &format!("/v1/candidates/{ka}/promote"), Some(&b.token), None)
        .await;
    assert_eq!(
        (s, again["outcome"].as_str()),
        (200, Some("alreadyPromoted")),
        "{again}"
    );
    c.visit(&format!("/projects/{project}")).await;
    let canonical = c.text("#canonical").await;
    assert!(canonical.starts_with("canonical generation 1 at "), "{canonical}");
    assert_eq!(b.get(&format!("/v1/projects/{project}")).await["generation"], 1);
    c.screenshot("project-promoted").await;
    c.assert_clean("after the approval");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_long_matrix_shows_its_first_rows_with_the_page_and_every_row_in_the_apis_order_after() {
    let b = Belay::start().await;
    b.catalogue().await;
    let mut cases = vec![json!({"slug": "c", "version": "1.0.0", "variant": "default"})];
    for i in 0..14 {
        let slug = format!("k{i:02}");
        let (s, v) = b
            .post(
                "/v1/test-cases",
                json!({"slug": slug, "version": "1.0.0", "testType": "standard", "variants": ["default"]}),
            )
            .await;
        assert_eq!(s, 201, "{v}");
        cases.push(json!({"slug": slug, "version": "1.0.0", "variant": "default"}));
    }
    let combos: Vec<Value> = (0..10)
        .map(|h| json!({"kind": "harness", "harness": format!("h{h}"), "model": "m"}))
        .collect();
    let (s, plan) = b
        .post(
            "/v1/coverage-plans",
            json!({"name": "wide", "cases": cases, "combinations": combos, "runsPerCell": 1,
                   "paused": true, "autoTopUp": false}),
        )
        .await;
    assert_eq!(s, 201, "{plan}");
    let plan = plan["id"].as_str().unwrap().to_string();
    let c = Console::open(&b.url).await;
    c.sign_in(&b.token).await;
    c.visit(&format!("/plans/{plan}")).await;
    // Rendered: the totals and at least the first screenful are in; the rest follows.
    c.until(
        "the plan totals",
        "(document.querySelector('#totals td') || {}).textContent === 'Plan totals (150 cells)'",
    )
    .await;
    assert_eq!(c.text("#totals td").await, "Plan totals (150 cells)");
    assert!(c.count("#matrix tr[data-cell]").await >= 100);
    // The rest are rendered as they scroll into view: placeholders until then.
    assert!(c.count("#matrix tr.pending-rows").await >= 1);
    c.eval::<bool>("(() => { window.scrollTo(0, document.documentElement.scrollHeight); return true; })()")
        .await;
    c.until(
        "the last rows, scrolled to",
        "!document.querySelector('#totals').previousElementSibling.classList.contains('pending-rows')",
    )
    .await;
    // The header stays in view while the rows scroll under it.
    assert!(
        c.eval::<f64>("document.querySelector('#matrix thead th').getBoundingClientRect().top")
            .await
            .abs()
            < 1.0
    );
    c.until(
        "every row",
        "(() => { const p = document.querySelector('#matrix tr.pending-rows'); \
           if (p) { p.scrollIntoView(); return false; } return true; })()",
    )
    .await;
    let shown: Vec<String> = c
        .eval("[...document.querySelectorAll('#matrix tr[data-cell]')].map((r) => r.dataset.cell)")
        .await;
    let m = b.get(&format!("/v1/coverage-plans/{plan}/coverage")).await;
    let want: Vec<String> = m["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cellKey"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(shown, want, "every cell, in the API's order");
    assert_eq!(
        c.eval::<String>("document.querySelector('#matrix tbody').lastElementChild.id")
            .await,
        "totals"
    );
    // The filter by status: nothing has run, so every cell has runs to launch and none is
    // complete.
    c.choose("#matrix-filter", "done").await;
    assert_eq!(c.count("#matrix tr[data-cell]").await, 0);
    assert_eq!(c.text("#totals td").await, "Plan totals (150 cells)");
    c.choose("#matrix-filter", "remaining").await;
    assert_eq!(
        c.eval::<String>("document.querySelector('#matrix').dataset.shown")
            .await,
        "150"
    );
    c.screenshot("plan-long-matrix").await;
    c.assert_clean("after the long matrix");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_plan_page_shows_its_cells_reasons_buffer_targets_top_up_answer_and_halts_and_every_page_loads_clean() {
    let b = Belay::start().await;
    b.catalogue().await;
    for (slug, version, kind) in [("d", "1.0.0", "standard"), ("jam", "1.0.0", "game_jam")] {
        let (s, v) = b
            .post(
                "/v1/test-cases",
                json!({"slug": slug, "version": version, "testType": kind, "variants": ["default"]}),
            )
            .await;
        assert_eq!(s, 201, "{v}");
    }
    // One slow lane (one at a time, so a halt finds jobs waiting) and one quick one.
    b.harness(
        "slow",
        1,
        r#"sleep 60; printf '{"status":"completed","loaded":true}' > "$BELAY_MANIFEST""#,
    )
    .await;
    b.harness(
        "quick",
        2,
        r#"printf '{"status":"completed","loaded":true}' > "$BELAY_MANIFEST""#,
    )
    .await;
    let pin = |slug: &str| json!({"slug": slug, "version": "1.0.0", "variant": "default"});
    let slow = json!({"kind": "harness", "harness": "slow", "model": "m"});
    let ghost = json!({"kind": "harness", "harness": "ghost", "model": "m"});
    let (s, plan) = b
        .post(
            "/v1/coverage-plans",
            json!({"name": "mixed", "cases": [pin("c"), pin("d")], "combinations": [slow, ghost],
                   "runsPerCell": 2, "bufferTarget": {"kind": "unbounded"}, "paused": true, "autoTopUp": false,
                   "budget": {"usd": 100}}),
        )
        .await;
    assert_eq!(s, 201, "{plan}");
    let plan = plan["id"].as_str().unwrap().to_string();
    // A newer version of d makes its cells stale; "ghost" is no harness of the catalogue.
    let (s, v) = b
        .post(
            "/v1/test-cases",
            json!({"slug": "d", "version": "1.1.0", "testType": "standard", "variants": ["default"]}),
        )
        .await;
    assert_eq!(s, 201, "{v}");

    let c = Console::open(&b.url).await;
    // The home page leads to the sign-in page, and once signed in to the plans.
    c.page.goto(format!("{}/", c.base)).await.unwrap();
    c.ready("/sign-in").await;
    c.sign_in(&b.token).await;
    c.visit(&format!("/plans/{plan}")).await;
    assert_eq!(c.text("#spend").await, "spent $0.00, reserved $0.00; budget $100.00");
    let notes: Vec<(String, String)> = c
        .eval(
            "[...document.querySelectorAll('#matrix tr[data-cell]')].map((r) => \
             [r.children[0].textContent + ' × ' + r.children[1].textContent, r.children[8].textContent])",
        )
        .await;
    assert_eq!(notes.len(), 4, "{notes:?}");
    for (cell, note) in &notes {
        assert_eq!(
            note.contains("unlaunchable: "),
            cell.contains("ghost"),
            "{cell}: {note}"
        );
        assert_eq!(
            note.contains("stale: 1.1.0 is out"),
            cell.starts_with("d"),
            "{cell}: {note}"
        );
    }
    c.screenshot("plan-stale-and-unlaunchable").await;

    // The buffer targets: the plan's inherits (null), then 0, then unbounded again; the
    // account's default is its own editor.
    let plan_target = || async { b.get(&format!("/v1/coverage-plans/{plan}")).await["bufferTarget"].clone() };
    for (kind, runs, want) in [
        ("inherit", None, Value::Null),
        ("bounded", Some(0), json!({"kind": "bounded", "runs": 0})),
        ("unbounded", None, json!({"kind": "unbounded"})),
    ] {
        c.choose("#plan-target-kind", kind).await;
        if let Some(n) = runs {
            c.eval::<bool>(&format!(
                "(() => {{ document.querySelector('#plan-target-runs').value = '{n}'; return true; }})()"
            ))
            .await;
        }
        c.click("#plan-target-save").await;
        wait_until(
            &format!("the plan's target to become {want}"),
            Duration::from_secs(10),
            async || {
                let target = plan_target().await;
                if target == want { Ok(()) } else { Err(target) }
            },
        )
        .await;
    }
    c.choose("#account-target-kind", "bounded").await;
    c.eval::<bool>("(() => { document.querySelector('#account-target-runs').value = '7'; return true; })()")
        .await;
    c.click("#account-target-save").await;
    wait_until(
        "the account's default to become 7",
        Duration::from_secs(10),
        async || {
            let target = b.get("/v1/coverage-settings").await["bufferTarget"].clone();
            if target == json!({"kind": "bounded", "runs": 7}) {
                Ok(())
            } else {
                Err(target)
            }
        },
    )
    .await;

    // Paused: "Top up now" answers that it skipped.
    c.click("#top-up-now").await;
    c.until("the top-up answer", "!!document.querySelector('#topup-answer')")
        .await;
    assert!(c.text("#topup-answer").await.contains("skipped: paused"));
    // Resumed (auto top-up stays off): the answer lists the launched cells with their job ids
    // and the cells it could not launch, with why.
    let got = b.get(&format!("/v1/coverage-plans/{plan}")).await;
    let mut p = json!({});
    for k in [
        "name",
        "caseGroups",
        "comboGroups",
        "cases",
        "combinations",
        "runsPerCell",
        "outerAxis",
        "bufferTarget",
        "autoTopUp",
    ] {
        p[k] = got[k].clone();
    }
    p["paused"] = json!(false);
    let (s, v) = b
        .request(
            "PUT",
            &format!("/v1/coverage-plans/{plan}"),
            Some(&b.token),
            Some(&p.to_string()),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    c.visit(&format!("/plans/{plan}")).await;
    c.click("#top-up-now").await;
    c.until("the top-up answer", "!!document.querySelector('#launched')")
        .await;
    let jobs: Vec<String> = b
        .get(&format!("/v1/jobs?origin=plan:{plan}"))
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(jobs.len(), 4, "two launchable cells of two runs");
    let launched = c.text("#launched").await;
    assert!(
        jobs.iter().all(|j| launched.contains(j.as_str())),
        "{launched} {jobs:?}"
    );
    let answer = c.text("#topup-answer").await;
    // Each with the reason the matrix gives it.
    assert!(
        answer.contains("Unlaunchable")
            && answer
                .matches("ghost · m: harness ghost is not in the catalogue")
                .count()
                == 2,
        "{answer}"
    );
    assert!(!answer.contains("skipped"), "{answer}");
    c.screenshot("plan-top-up-launched").await;

    // Halt cancels what waits; halt all, confirmed, what runs too.
    wait_until_every(
        "one job of the slow lane to start",
        Duration::from_secs(60),
        Duration::from_millis(200),
        async || {
            let running = b.get(&format!("/v1/jobs?origin=plan:{plan}&status=running")).await;
            if running.as_array().unwrap().len() == 1 {
                Ok(())
            } else {
                Err(running)
            }
        },
    )
    .await;
    c.click("#halt").await;
    c.until("the halt answer", "!!document.querySelector('#halt-answer')")
        .await;
    assert_eq!(c.text("#halt-answer").await, "Halt cancelled 3 queued or pending jobs.");
    c.click("#halt-all").await;
    c.until("the halt-all dialog", "document.querySelector('#halt-all-dialog').open")
        .await;
    c.click("#halt-all-confirm").await;
    c.until(
        "the halt-all answer",
        "(document.querySelector('#halt-answer') || {}).textContent === 'Halt all cancelled 1 jobs.'",
    )
    .await;
    let statuses: Vec<String> = b
        .get(&format!("/v1/jobs?origin=plan:{plan}"))
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(statuses, vec!["canceled"; 4], "{statuses:?}");
    assert_eq!(b.get(&format!("/v1/coverage-plans/{plan}")).await["paused"], true);
    c.screenshot("plan-halted").await;

    // A game-jam run is reviewed on the category scale.
    let (s, jam) = b
        .post(
            "/v1/coverage-plans",
            json!({"name": "jam", "cases": [pin("jam")], "combinations": [{"kind": "harness", "harness": "quick", "model": "m"}],
                   "runsPerCell": 1, "autoTopUp": false}),
        )
        .await;
    assert_eq!(s, 201, "{jam}");
    let jam = jam["id"].as_str().unwrap().to_string();
    let (s, v) = b.post(&format!("/v1/coverage-plans/{jam}/topup"), json!({})).await;
    assert_eq!((s, v["enqueued"].as_i64()), (200, Some(1)), "{v}");
    let run = wait_until_every(
        "the jam run to complete",
        Duration::from_secs(60),
        Duration::from_millis(200),
        async || {
            let q = b.get(&format!("/v1/coverage-plans/{jam}/queue")).await;
            match q["runs"].as_array().and_then(|r| r.first()) {
                Some(r) => Ok(r.as_str().unwrap().to_owned()),
                None => Err(q),
            }
        },
    )
    .await;
    c.visit(&format!("/plans/{jam}/queue")).await;
    let shown: Vec<String> = c
        .eval("[...document.querySelectorAll('section.repeat')].map((s) => s.dataset.run)")
        .await;
    assert_eq!(shown, std::slice::from_ref(&run));
    assert_eq!(
        c.count(".choice:not([data-name=category])").await,
        0,
        "a game-jam run takes no ratings"
    );
    let offered: Vec<String> = c
        .eval("[...document.querySelectorAll('.choice[data-name=category] button.opt')].map((o) => o.textContent)")
        .await;
    assert_eq!(
        offered,
        ["1 💩 poop", "2 🧱 brick", "3 🥈 silver", "4 🥇 gold", "5 💎 diamond"]
    );
    c.screenshot("review-game-jam").await;
    c.click(".choice[data-name=category] button.opt[data-value=diamond]")
        .await;
    c.click(".submit-review").await;
    wait_until("the category review to land", Duration::from_secs(30), async || {
        let category = b.get(&format!("/v1/runs/{run}")).await["category"].clone();
        if category == "diamond" { Ok(()) } else { Err(category) }
    })
    .await;

    // Every other page loads clean: the ladders, a ladder's queue, the projects, what waits on
    // a person.
    let (s, ladder) = b
        .post(
            "/v1/ladders",
            json!({"name": "climb", "rungs": [pin("c")], "combinations": [{"kind": "harness", "harness": "quick", "model": "m"}]}),
        )
        .await;
    assert_eq!(s, 201, "{ladder}");
    let ladder = ladder["id"].as_str().unwrap().to_string();
    for (path, name) in [
        ("/ladders".to_owned(), "ladders"),
        (format!("/ladders/{ladder}/queue"), "ladder-queue"),
        ("/projects".to_owned(), "projects"),
        ("/approvals".to_owned(), "approvals"),
    ] {
        c.visit(&path).await;
        c.screenshot(name).await;
    }
    assert!(c.text("#main").await.contains("Nothing waits on a person."));
    c.assert_clean("after every page");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn siblings_show_their_acceptance_citations_selection_and_receipts_and_a_rejection_with_a_reason_asks_for_a_repair()
 {
    use crate::common::fake_anthropic::{FakeAnthropic, Reply, Seen, acceptance};
    use crate::common::sample;
    const STATS: &str = "export function countTodos(titles: string[]): number {\n  return titles.length;\n}\n";
    const EXPORT: &str =
        "export function todoTitles(todos: { title: string }[]): string[] {\n  return todos.map((t) => t.title);\n}\n";
    // The model finds a criterion met when its function is in what it was shown, and cites it.
    let fake = FakeAnthropic::start(|s: &Seen| {
        if s.tool != "record_acceptance" {
            return Reply::Status(400);
        }
        let judged: Vec<Value> = [
            ("c1", "export function countTodos", "src/stats.ts"),
            ("c2", "export function todoTitles", "src/export.ts"),
        ]
        .iter()
        .filter(|(id, _, _)| s.user.contains(&format!("- {id}:")))
        .map(|(id, needle, path)| {
            if s.user.contains(needle) {
                json!({"id": id, "result": "met", "citation": {"path": path, "quote": needle}})
            } else {
                json!({"id": id, "result": "not_met", "reason": "not in the source"})
            }
        })
        .collect();
        acceptance(Value::Array(judged))
    })
    .await;
    let env = fake.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let b = Belay::start_with_sandbox_env(&env, None).await;
    let project = sample::sample_project(&b).await;
    // High risk: the winner waits on a person.
    let c = sample::change(
        &b,
        &project,
        json!({"goal": "Helpers for the todos", "acceptanceCriteria": ["A helper counts the todos", "A helper lists the todo titles"],
               "invariants": [], "riskTier": "high"}),
    )
    .await;
    let cs1 = sample::task(&b, &c, "t1", &[sample::write("src/stats.ts", STATS)]).await;
    let cs2 = sample::task(&b, &c, "t2", &[sample::write("src/export.ts", EXPORT)]).await;
    let side = |cs: &Value, path: &str| json!({"taskId": cs["taskId"], "changeSetIds": [cs["id"]], "paths": [path]});
    let (s, v) = b
        .post(
            &format!("/v1/changes/{c}/conflicts"),
            json!({"status": "fork_required", "sides": [side(&cs1, "src/stats.ts"), side(&cs2, "src/export.ts")]}),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let (s, round) = b.post(&format!("/v1/changes/{c}/verification"), json!({})).await;
    assert_eq!(s, 201, "{round}");
    assert_eq!(round["candidates"].as_array().unwrap().len(), 3, "{round}");
    // Selected and waiting on a person.
    let winner = wait_until_every(
        "an approval to be requested",
        Duration::from_secs(600),
        Duration::from_millis(500),
        async || {
            let waiting = b.get("/v1/approvals?status=requested").await;
            match waiting.as_array().and_then(|a| a.first()) {
                Some(a) => Ok(a["candidateId"].as_str().unwrap().to_owned()),
                None => Err(waiting),
            }
        },
    )
    .await;
    let k = b.get(&format!("/v1/candidates/{winner}")).await;
    assert_eq!(
        k["changeSetIds"].as_array().unwrap().len(),
        2,
        "the combined Candidate wins: {k:#}"
    );

    let con = Console::open(&b.url).await;
    con.sign_in(&b.token).await;
    // The Change: its three Candidates, the losers with why, and the selection's receipt.
    con.visit(&format!("/changes/{c}")).await;
    assert_eq!(con.count("#candidates tr[data-candidate]").await, 3);
    let reasons: Vec<String> = con
        .eval("[...document.querySelectorAll('#candidates tr[data-candidate]')].map((r) => r.children[2].textContent)")
        .await;
    assert_eq!(
        reasons
            .iter()
            .filter(|r| r.starts_with(&format!("Lost to {winner}: met 2 of 2 criteria, this met 1 of 2.")))
            .count(),
        2,
        "{reasons:?}"
    );
    assert!(con.text("#receipts").await.contains("CANDIDATE_SELECTION"));
    con.screenshot("change-with-siblings").await;

    // The winner: each criterion met with its citation, the selection and its ranking.
    con.visit(&format!("/candidates/{winner}")).await;
    let criteria: Vec<(String, String, String)> = con
        .eval(
            "[...document.querySelectorAll('#acceptance tbody tr')].map((r) =>              [r.children[0].textContent, r.dataset.result, r.children[2].textContent])",
        )
        .await;
    assert_eq!(
        criteria,
        vec![
            (
                "A helper counts the todos".to_owned(),
                "met".to_owned(),
                "src/stats.ts: “export function countTodos”".to_owned()
            ),
            (
                "A helper lists the todo titles".to_owned(),
                "met".to_owned(),
                "src/export.ts: “export function todoTitles”".to_owned()
            ),
        ]
    );
    let selection = con.text("#selection").await;
    assert_eq!(
        selection,
        format!("Winner {winner} (this Candidate), decided by ranking.")
    );
    let ranked: Vec<String> = con
        .eval("[...document.querySelectorAll('#ranking tr[data-candidate]')].map((r) => r.dataset.candidate + ' ' + r.children[3].textContent)")
        .await;
    assert_eq!(ranked.len(), 3, "{ranked:?}");
    assert_eq!(ranked[0], format!("{winner} 2 of 2"));
    con.screenshot("candidate-selected-awaiting-approval").await;

    // What waits on a person leads to it; a rejection with a reason is recorded on that tree and
    // asks the agents for one repair.
    con.visit("/approvals").await;
    con.click(&format!("a[href='/candidates/{winner}']")).await;
    con.ready(&format!("/candidates/{winner}")).await;
    assert_eq!(con.text("#composed-tree").await, k["composedTree"].as_str().unwrap());
    con.type_into("#approval-reason", "Keep one helper per file").await;
    con.click("#reject").await;
    con.until("the decision", "!!document.querySelector('#decision-answer')")
        .await;
    assert_eq!(con.text("#decision-answer").await, "Recorded: rejected.");
    let decided = b.get(&format!("/v1/candidates/{winner}")).await;
    assert_eq!(decided["status"], "rejected", "{decided:#}");
    let approvals = b.get("/v1/approvals?status=rejected").await;
    let a = approvals
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["candidateId"] == winner)
        .unwrap_or_else(|| panic!("{approvals:#}"));
    assert_eq!(
        (a["decisionReason"].as_str(), a["tree"].as_str()),
        (Some("Keep one helper per file"), k["composedTree"].as_str())
    );
    con.visit(&format!("/changes/{c}")).await;
    assert_eq!(con.text("#change-status").await, "running");
    assert!(con.text("#receipts").await.contains("ACCEPTANCE_REPAIR"));
    // One repair Task, depending on both Tasks, its objective carrying the reason.
    let tasks = b.get(&format!("/v1/changes/{c}/tasks")).await;
    let repair: Vec<&Value> = tasks
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["key"] == "repair")
        .collect();
    assert_eq!(repair.len(), 1, "{tasks:#}");
    let receipts = b.get(&format!("/v1/changes/{c}/receipts")).await;
    let asked = receipts
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "ACCEPTANCE_REPAIR")
        .unwrap_or_else(|| panic!("{receipts:#}"));
    assert_eq!(asked["outcome"]["taskId"], repair[0]["id"], "{asked:#}");
    assert_eq!(asked["outcome"]["dependencies"], json!(["t1", "t2"]), "{asked:#}");
    assert!(
        asked["outcome"]["objective"]
            .as_str()
            .unwrap()
            .contains("Keep one helper per file"),
        "{asked:#}"
    );
    con.screenshot("change-after-rejection").await;
    con.assert_clean("after the rejection");
    con.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_console_says_why_the_api_refused_its_token() {
    let b = Belay::start().await;
    let (s, created) = b.post("/v1/accounts", json!({"name": "reviewer"})).await;
    assert_eq!(s, 201, "{created}");
    let member = created["account"]["id"].as_str().unwrap().to_owned();
    let first = created["token"].as_str().unwrap().to_owned();
    let (s, browser) = b
        .request(
            "POST",
            "/v1/account/tokens",
            Some(&first),
            Some(r#"{"name":"browser"}"#),
        )
        .await;
    assert_eq!(s, 201, "{browser}");
    let secret = browser["secret"].as_str().unwrap().to_owned();
    let id = browser["token"]["id"].as_str().unwrap().to_owned();

    let c = Console::open(&b.url).await;
    c.sign_in(&secret).await;
    // Revoked while signed in: the next page's call is refused, and the sign-in page says why.
    let (s, _) = b
        .request("DELETE", &format!("/v1/account/tokens/{id}"), Some(&first), None)
        .await;
    assert_eq!(s, 200);
    c.page.goto(format!("{}/plans", c.base)).await.unwrap();
    c.until(
        "the sign-in page saying why",
        "location.pathname === '/sign-in' && !!document.querySelector('#signed-out') && !document.querySelector('#signed-out').hidden",
    )
    .await;
    assert_eq!(
        c.eval::<String>("document.querySelector('#signed-out').dataset.code")
            .await,
        "token_revoked"
    );
    let said = c.text("#signed-out").await;
    assert!(said.contains("revoked") && said.ends_with("(token_revoked)"), "{said}");

    // A disabled account's token, at sign-in.
    let (s, _) = b
        .request(
            "PATCH",
            &format!("/v1/accounts/{member}"),
            Some(&b.token),
            Some(r#"{"disabled":true}"#),
        )
        .await;
    assert_eq!(s, 200);
    c.type_into("#token", &first).await;
    c.click("button[type=submit]").await;
    c.until(
        "the disabled account's reason",
        "document.querySelector('#signed-out').dataset.code === 'account_disabled'",
    )
    .await;
    assert!(c.text("#signed-out").await.contains("disabled"));
    assert!(
        c.text("#error").await.starts_with("401 account_disabled"),
        "{}",
        c.text("#error").await
    );
    assert_eq!(c.eval::<String>("location.pathname").await, "/sign-in");
    c.screenshot("sign-in-account-disabled").await;
    {
        // The refused calls are the failed answers, and they were the API's.
        let mut j = c.journal.lock().unwrap();
        assert!(
            j.bad_answers.iter().all(|a| a.starts_with("401 ")),
            "{:?}",
            j.bad_answers
        );
        j.bad_answers.clear();
        j.errors.retain(|e| !e.starts_with("log: Failed to load resource"));
    }
    c.assert_clean("after the refused tokens");
    c.close().await;
}
