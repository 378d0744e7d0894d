//! The console in the real Chromium, driven over the DevTools protocol against a real `belay`
//! process: a reviewer signs in, turns a plan's auto top-up on, walks the review queue by keyboard
//! and mouse, and sees the matrix move. Every request the pages make is intercepted: belay's own
//! origin goes through, anything else is failed and counted (there must be none); page script
//! errors, console errors and 4xx/5xx answers fail the test; each page's screenshot is kept
//! under the test's target tmp dir and checked to be a PNG.

mod common;

use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::cdp::browser_protocol::fetch::{ContinueRequestParams, EventRequestPaused, FailRequestParams};
use chromiumoxide::cdp::browser_protocol::log::{EventEntryAdded, LogEntryLevel};
use chromiumoxide::cdp::browser_protocol::network::{ErrorReason, EventResponseReceived};
use chromiumoxide::cdp::browser_protocol::page::CaptureScreenshotFormat;
use chromiumoxide::cdp::js_protocol::runtime::{ConsoleApiCalledType, EventConsoleApiCalled, EventExceptionThrown};
use chromiumoxide::page::{Page, ScreenshotParams};
use common::Belay;
use futures::StreamExt;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the pages did that a test must see empty (or check).
#[derive(Default)]
struct Journal {
    outside: Vec<String>,
    errors: Vec<String>,
    bad_answers: Vec<String>,
}

struct Console {
    browser: Browser,
    page: Page,
    journal: Arc<Mutex<Journal>>,
    _profile: tempfile::TempDir,
    handler: tokio::task::JoinHandle<()>,
    base: String,
}

fn chromium() -> String {
    std::env::var("BELAY_CHROMIUM").unwrap_or_else(|_| "/usr/lib/chromium/chromium".into())
}

impl Console {
    async fn open(base: &str) -> Console {
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
        tokio::spawn(async move {
            while let Some(ev) = paused.next().await {
                let url = ev.request.url.clone();
                if url.starts_with(&origin) {
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

    async fn eval<T: serde::de::DeserializeOwned>(&self, js: &str) -> T {
        self.page
            .evaluate(js)
            .await
            .unwrap_or_else(|e| panic!("evaluating {js}: {e}"))
            .into_value()
            .unwrap_or_else(|e| panic!("reading the value of {js}: {e}"))
    }

    /// Waits until `js` is true in the page.
    async fn until(&self, what: &str, js: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = self.page.evaluate(js).await
                && r.into_value::<bool>().unwrap_or(false)
            {
                return;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what} ({js})");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the console has rendered the page at `path`.
    async fn ready(&self, path: &str) {
        self.until(
            &format!("the page {path}"),
            &format!("document.body && document.body.dataset.ready === {}", json!(path)),
        )
        .await;
    }

    async fn click(&self, css: &str) {
        self.page
            .find_element(css)
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"))
            .click()
            .await
            .unwrap();
    }

    async fn type_into(&self, css: &str, text: &str) {
        let el = self
            .page
            .find_element(css)
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"));
        el.type_str(text).await.unwrap();
    }

    /// Presses `key` on whatever has the focus (keyboard only: no element is clicked or focused
    /// by the test).
    async fn key(&self, key: &str) {
        self.page
            .find_element(":focus")
            .await
            .expect("something has the focus")
            .press_key(key)
            .await
            .unwrap();
    }

    async fn text(&self, css: &str) -> String {
        self.eval(&format!(
            "(document.querySelector({}) || {{}}).textContent || ''",
            json!(css)
        ))
        .await
    }

    /// A full-page screenshot, kept as `<name>.png` and checked to be a PNG of the window's size.
    async fn screenshot(&self, name: &str) {
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
    fn assert_clean(&self, when: &str) {
        let j = self.journal.lock().unwrap();
        assert!(j.outside.is_empty(), "{when}: requests outside belay: {:?}", j.outside);
        assert!(j.errors.is_empty(), "{when}: page errors: {:?}", j.errors);
        assert!(j.bad_answers.is_empty(), "{when}: failed answers: {:?}", j.bad_answers);
    }

    async fn close(mut self) {
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
async fn canary() -> (u16, Arc<Mutex<usize>>) {
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
    let b = Belay::start().await;
    b.catalogue().await;
    let (s, v) = b
        .post(
            "/v1/test-cases",
            json!({"slug": "d", "version": "1.0.0", "testType": "standard", "variants": ["default"]}),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    // Each run keeps one HTML artifact that tries to reach the canary: the console shows it in a
    // frame with no scripts and no network, so the canary must stay silent.
    let (canary_port, canary_hits) = canary().await;
    let script = format!(
        "printf '<h1>Run output</h1><p>built</p><img src=\"http://127.0.0.1:{canary_port}/pixel.png\"><script>fetch(\"http://127.0.0.1:{canary_port}/leak\")</script>' > index.html\n\
         printf '{{\"status\":\"completed\",\"loaded\":true,\"artifacts\":[\"index.html\"]}}' > manifest.json"
    );
    b.harness("h", 4, &script).await;
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

    let c = Console::open(&b.url).await;
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
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let m = b.get(&format!("/v1/coverage-plans/{plan}/coverage")).await;
        if cell_value(&m, "c", "completed") == 3 {
            assert_eq!(
                cell_value(&m, "d", "completed") + cell_value(&m, "d", "inFlight"),
                0,
                "{m}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "the first cell's runs did not complete: {m}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
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

    // Walk it from the front. The artifact frame has no scripts and no network.
    let frame: Value = c
        .eval(
            "(() => { const f = document.querySelector('#artifact-frame'); \
              return {sandbox: f.getAttribute('sandbox'), policy: f.srcdoc.startsWith('<meta http-equiv=\"Content-Security-Policy\"'), text: f.srcdoc.includes('Run output')}; })()",
        )
        .await;
    assert_eq!(frame, json!({"sandbox": "", "policy": true, "text": true}));
    for (i, run) in queue.iter().enumerate() {
        assert_eq!(&c.text("#run-id").await, run, "the queue is walked in its order");
        if i == 0 {
            // Keyboard only: the page focused the first field (the domain name); Tab to its
            // rating, arrow down to "great", Tab past "Add a domain" and the note to the submit
            // button, Enter.
            assert_eq!(c.eval::<String>("document.activeElement.className").await, "domain");
            c.key("Tab").await;
            for _ in 0..4 {
                c.key("ArrowDown").await;
            }
            assert_eq!(c.eval::<String>("document.activeElement.value").await, "great");
            for _ in 0..3 {
                c.key("Tab").await;
            }
            assert_eq!(c.eval::<String>("document.activeElement.id").await, "submit-review");
            c.key("Enter").await;
        } else {
            c.eval::<bool>(
                "(() => { const s = document.querySelector('.rating'); s.value = 'passable'; \
                  s.dispatchEvent(new Event('change', {bubbles: true})); return true; })()",
            )
            .await;
            c.click("#submit-review").await;
        }
        // The review landed and the console moved on.
        let wait = Instant::now() + Duration::from_secs(30);
        loop {
            let reviews = b.get(&format!("/v1/runs/{run}/reviews")).await;
            if reviews.as_array().is_some_and(|r| r.len() == 1) {
                let want = if i == 0 { "great" } else { "passable" };
                assert_eq!(reviews[0]["ratings"], json!({"overall": want}), "{reviews}");
                break;
            }
            assert!(Instant::now() < wait, "the review of {run} did not land");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        c.until(
            "the next run",
            &format!(
                "document.body.dataset.ready && !(document.querySelector('#run-id') && document.querySelector('#run-id').textContent === {})",
                json!(run)
            ),
        )
        .await;
    }
    c.until(
        "the walked queue",
        "!!document.querySelector('#queue-empty') || !!document.querySelector('#run-id')",
    )
    .await;

    // Back on the plan: the first cell is reviewed, and the reviews topped the plan up.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        c.page.goto(format!("{}/plans/{plan}", c.base)).await.unwrap();
        c.ready(&format!("/plans/{plan}")).await;
        let unreviewed_c = c.text("tr[data-cell] [data-col=unreviewed]").await;
        let m = b.get(&format!("/v1/coverage-plans/{plan}/coverage")).await;
        let next = cell_value(&m, "d", "completed") + cell_value(&m, "d", "inFlight");
        if next > 0 {
            assert_eq!(cell_value(&m, "c", "unreviewed"), 0, "{m}");
            assert_eq!(unreviewed_c, "0", "the console shows the first cell reviewed");
            let shown: i64 = c.text("#totals [data-col=completed]").await.parse().unwrap();
            assert!(shown >= 3, "totals completed {shown}");
            break;
        }
        assert!(Instant::now() < deadline, "no top-up after the reviews: {m}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
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
    assert_eq!(*canary_hits.lock().unwrap(), 0, "an artifact reached the canary");
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
    // A bound above the ceiling is clamped by the API; a negative one is refused, and the console
    // shows the API's own words (the field and the rule).
    c.eval::<bool>(
        "(() => { const k = document.querySelector('#plan-target-kind'); k.value = 'bounded'; \
          k.dispatchEvent(new Event('change')); document.querySelector('#plan-target-runs').value = '-1'; return true; })()",
    )
    .await;
    c.click("#plan-target-save").await;
    c.until("the error", "!document.querySelector('#error').hidden").await;
    let error = c.text("#error").await;
    assert!(error.starts_with("422 invalid_field: bufferTarget"), "{error}");
    assert_eq!(
        b.get(&format!("/v1/coverage-plans/{plan}")).await,
        before,
        "nothing changed"
    );
    c.screenshot("plan-error").await;
    {
        let mut j = c.journal.lock().unwrap();
        // The refused PUT is the one failed answer, and it was the API's.
        assert_eq!(j.bad_answers.len(), 1, "{:?}", j.bad_answers);
        assert!(j.bad_answers[0].starts_with("422 "), "{:?}", j.bad_answers);
        j.bad_answers.clear();
        // Chromium logs a failed fetch as a console error; that is the refused PUT too.
        j.errors
            .retain(|e| !(e.starts_with("log: Failed to load resource") && e.contains(&plan)));
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
