//! The flow, the same for every app; a failed step stops it. It reports facts as step records;
//! what a fact means (a failing status, a not-found page, a sample value) is `belay_domain`'s.

use crate::intercept::{self, RefusedKind, SharedJournal, Upstream};
use crate::{Screenshot, SharedProgress, log_line};
use belay_domain::browser::{
    BrowserStep, FormFill, MAX_FORMS_PER_PAGE, MAX_PAGES, MAX_SCREENSHOTS, StepOutcome, StepRecord, crawls, form_fill,
    page_text_failure, response_fails,
};
use chromiumoxide::cdp::browser_protocol::log::{EventEntryAdded, LogEntryLevel};
use chromiumoxide::cdp::browser_protocol::page::CaptureScreenshotFormat;
use chromiumoxide::cdp::js_protocol::runtime::{ConsoleApiCalledType, EventConsoleApiCalled, EventExceptionThrown};
use chromiumoxide::page::ScreenshotParams;
use chromiumoxide::{Browser, Page};
use futures::StreamExt;
use serde::de::DeserializeOwned;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use url::Url;

/// How long after a new document the page may still load assets and throw.
const SETTLE: Duration = Duration::from_millis(250);
/// How long a form submit may take to open a new document (a script may handle it in place).
const SUBMIT_WAIT: Duration = Duration::from_secs(3);
/// One `evaluate` at most.
const EVAL_TIMEOUT: Duration = Duration::from_secs(10);

const PAGE_INFO_JS: &str = r#"(() => ({
  path: location.pathname + location.search,
  links: Array.from(document.querySelectorAll('a[href]')).map(a => a.href),
  forms: document.forms.length,
}))()"#;

const TEXT_JS: &str = "document.body ? document.body.innerText : ''";

type Outcome = Result<(), StepOutcome>;

fn wrong(detail: impl Into<String>) -> StepOutcome {
    StepOutcome::WrongBehaviour { detail: detail.into() }
}

fn blind(detail: impl Into<String>) -> StepOutcome {
    StepOutcome::CannotObserve { detail: detail.into() }
}

/// Where the journal stood before an action.
#[derive(Clone, Copy)]
struct Mark {
    served: usize,
    refused: usize,
}

struct Flow {
    page: Page,
    journal: SharedJournal,
    progress: SharedProgress,
    navigation_timeout: Duration,
}

/// Opens a page with the interceptor and the listeners, then the flow. `Err`: no page at all.
pub(crate) async fn run(
    browser: &Browser,
    up: Arc<Upstream>,
    journal: SharedJournal,
    progress: SharedProgress,
    navigation_timeout: Duration,
) -> Result<(), String> {
    let page = browser
        .new_page("about:blank")
        .await
        .map_err(|e| format!("new page: {e}"))?;
    // Registered before the first navigation: every paused request gets one answer.
    let interceptor = intercept::start(&page, up, journal.clone()).await?;
    let listeners = listen(&page, journal.clone()).await?;
    // New tabs would have no interceptor: the page opens none.
    let _ = page.evaluate_on_new_document("window.open = () => null;").await;
    let flow = Flow {
        page,
        journal,
        progress,
        navigation_timeout,
    };
    flow.steps().await;
    interceptor.abort();
    for l in listeners {
        l.abort();
    }
    Ok(())
}

async fn listen(page: &Page, j: SharedJournal) -> Result<Vec<tokio::task::JoinHandle<()>>, String> {
    let mut exceptions = page
        .event_listener::<EventExceptionThrown>()
        .await
        .map_err(|e| e.to_string())?;
    let jx = j.clone();
    let a = tokio::spawn(async move {
        while let Some(ev) = exceptions.next().await {
            let d = &ev.exception_details;
            let desc = d
                .exception
                .as_ref()
                .and_then(|o| o.description.clone())
                .unwrap_or_else(|| d.text.clone());
            jx.lock().expect("journal lock").exceptions.push(format!(
                "{} @ {}:{}",
                desc.lines().next().unwrap_or_default(),
                d.url.clone().unwrap_or_default(),
                d.line_number
            ));
        }
    });
    page.enable_log().await.map_err(|e| e.to_string())?;
    let mut logs = page
        .event_listener::<EventEntryAdded>()
        .await
        .map_err(|e| e.to_string())?;
    let jl = j.clone();
    let b = tokio::spawn(async move {
        while let Some(ev) = logs.next().await {
            if ev.entry.level == LogEntryLevel::Error {
                let url = ev.entry.url.clone().unwrap_or_default();
                jl.lock()
                    .expect("journal lock")
                    .console_errors
                    .push(format!("{} {url}", ev.entry.text).trim().to_owned());
            }
        }
    });
    let mut console = page
        .event_listener::<EventConsoleApiCalled>()
        .await
        .map_err(|e| e.to_string())?;
    let c = tokio::spawn(async move {
        while let Some(ev) = console.next().await {
            if ev.r#type == ConsoleApiCalledType::Error {
                let text: Vec<String> = ev
                    .args
                    .iter()
                    .map(|a| {
                        a.value
                            .as_ref()
                            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                            .or_else(|| a.description.clone())
                            .unwrap_or_default()
                    })
                    .collect();
                j.lock()
                    .expect("journal lock")
                    .console_errors
                    .push(format!("console.error: {}", text.join(" ")));
            }
        }
    });
    Ok(vec![a, b, c])
}

/// The path (and query) of a preview link, when the crawl opens it.
fn crawl_key(href: &str) -> Option<String> {
    let url = Url::parse(href).ok()?;
    let same_origin = intercept::is_preview(&url);
    if !crawls(same_origin, url.path()) {
        return None;
    }
    Some(match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    })
}

#[derive(serde::Deserialize)]
struct PageInfo {
    path: String,
    links: Vec<String>,
    forms: usize,
}

impl Flow {
    fn log(&self, line: impl Into<String>) {
        log_line(&self.progress, line);
    }

    fn record(&self, step: BrowserStep, outcome: Outcome) -> bool {
        let passed = outcome.is_ok();
        let outcome = outcome.err().unwrap_or(StepOutcome::Passed);
        self.log(format!("step {step:?}: {outcome:?}"));
        self.progress
            .lock()
            .expect("progress lock")
            .steps
            .push(StepRecord { step, outcome });
        passed
    }

    async fn steps(&self) {
        let open = self.open_app().await;
        let failed = open.is_err();
        if !self.record(BrowserStep::OpenApp, open) {
            if failed {
                self.screenshot("failure").await;
            }
            return;
        }
        let text = self.visible_text().await;
        if !self.record(BrowserStep::VisibleText, text) {
            self.screenshot("failure").await;
            return;
        }
        let health = self.health().await;
        if !self.record(BrowserStep::Health, health) {
            return;
        }
        let crawl = self.crawl().await;
        let failed = crawl.is_err();
        self.record(BrowserStep::Crawl, crawl);
        self.screenshot(if failed { "failure" } else { "final" }).await;
    }

    fn mark(&self) -> Mark {
        let j = self.journal.lock().expect("journal lock");
        Mark {
            served: j.served.len(),
            refused: j.refused.len(),
        }
    }

    async fn eval<T: DeserializeOwned>(&self, js: &str) -> Result<T, String> {
        match tokio::time::timeout(EVAL_TIMEOUT, self.page.evaluate(js)).await {
            Err(_) => Err(format!("no answer in {} s", EVAL_TIMEOUT.as_secs())),
            Ok(Err(e)) => Err(e.to_string()),
            Ok(Ok(v)) => v.into_value::<T>().map_err(|e| e.to_string()),
        }
    }

    async fn screenshot(&self, name: &str) {
        if self.progress.lock().expect("progress lock").screenshots.len() >= MAX_SCREENSHOTS {
            return;
        }
        let params = ScreenshotParams::builder()
            .format(CaptureScreenshotFormat::Png)
            .full_page(true)
            .build();
        match tokio::time::timeout(EVAL_TIMEOUT, self.page.screenshot(params)).await {
            Ok(Ok(png)) => {
                let shot = Screenshot::new(name, png);
                self.log(format!(
                    "screenshot {name}: {} bytes, sha256 {}",
                    shot.png.len(),
                    shot.sha256
                ));
                let mut p = self.progress.lock().expect("progress lock");
                if p.screenshots.len() < MAX_SCREENSHOTS {
                    p.screenshots.push(shot);
                }
            }
            Ok(Err(e)) => self.log(format!("screenshot {name} failed: {e}")),
            Err(_) => self.log(format!("screenshot {name} timed out")),
        }
    }

    /// How the document request after `mark` ended: its status, or why there is none.
    fn document_since(&self, mark: Mark, what: &str) -> Result<u16, StepOutcome> {
        let j = self.journal.lock().expect("journal lock");
        if let Some(s) = j.served[mark.served..]
            .iter()
            .rev()
            .find(|s| s.resource_type == "Document")
        {
            return Ok(s.status);
        }
        match j.refused[mark.refused..].iter().find(|r| r.resource_type == "Document") {
            Some(r) if r.kind == RefusedKind::Redirect => Err(wrong(format!("{what}: {}", r.reason))),
            Some(r) if r.kind == RefusedKind::Blocked => {
                Err(wrong(format!("{what} opened {}, which is blocked", r.url)))
            }
            Some(r) => Err(blind(format!("{what}: {}", r.reason))),
            None => Err(blind(format!("{what}: no document was requested"))),
        }
    }

    /// Waits until a new document replaced the one carrying the marker (or, for a client-side
    /// route, until the location is `target`).
    async fn wait_new_document(&self, within: Duration, target: Option<&str>) -> bool {
        let deadline = Instant::now() + within;
        let check = match target {
            Some(t) => format!(
                "(typeof window.__belayMarker === 'undefined' && document.readyState === 'complete') || (location.pathname + location.search) === {}",
                serde_json::Value::String(t.to_owned())
            ),
            None => "typeof window.__belayMarker === 'undefined' && document.readyState === 'complete'".to_owned(),
        };
        while Instant::now() < deadline {
            if let Ok(true) = self.eval::<bool>(&check).await {
                tokio::time::sleep(SETTLE).await;
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    /// A direct load of `path`: the document's status (from the interceptor).
    async fn load(&self, path: &str) -> Result<u16, StepOutcome> {
        let mark = self.mark();
        let what = format!("GET {path}");
        let url = Upstream::preview_url(path);
        let went = tokio::time::timeout(self.navigation_timeout, self.page.goto(url.as_str())).await;
        match went {
            Err(_) => {
                return Err(blind(format!(
                    "{what} did not load in {} s",
                    self.navigation_timeout.as_secs()
                )));
            }
            Ok(Err(e)) => {
                // A failed or blocked document: the journal says why.
                let status = self.document_since(mark, &what);
                self.log(format!("{what}: {e}"));
                return status.and_then(|_| Err(blind(format!("{what}: {e}"))));
            }
            Ok(Ok(_)) => {}
        }
        tokio::time::sleep(SETTLE).await;
        let status = self.document_since(mark, &what)?;
        self.log(format!("{what} (direct load) answered {status}"));
        Ok(status)
    }

    async fn open_app(&self) -> Outcome {
        let status = self.load("/").await?;
        if status >= 400 {
            return Err(wrong(format!("GET / answered {status}")));
        }
        self.screenshot("home").await;
        Ok(())
    }

    async fn page_text(&self, what: &str) -> Outcome {
        let text: String = self
            .eval(TEXT_JS)
            .await
            .map_err(|e| blind(format!("{what}: the text could not be read: {e}")))?;
        match page_text_failure(&text) {
            Some(why) => Err(wrong(format!("{what}: {why}"))),
            None => Ok(()),
        }
    }

    async fn visible_text(&self) -> Outcome {
        self.page_text("/").await
    }

    async fn health(&self) -> Outcome {
        let status: i64 = self
            .eval("fetch('/api/health').then(r => r.status).catch(() => -1)")
            .await
            .map_err(|e| blind(format!("fetch('/api/health') from the page: {e}")))?;
        self.log(format!("fetch('/api/health') from the page answered {status}"));
        match status {
            200 => Ok(()),
            -1 => Err(wrong("fetch('/api/health') from the page failed")),
            s => Err(wrong(format!("fetch('/api/health') from the page answered {s}"))),
        }
    }

    /// Everything wrong the journal holds: a script error, a failing status, a refused redirect.
    fn journal_failure(&self) -> Outcome {
        let j = self.journal.lock().expect("journal lock");
        if let Some(e) = j.exceptions.first() {
            return Err(wrong(format!("an uncaught page script error: {e}")));
        }
        if let Some(s) = j.served.iter().find(|s| {
            let path = s.final_path.split('?').next().unwrap_or_default();
            response_fails(s.status, path)
        }) {
            return Err(wrong(format!(
                "{} {} ({}) answered {}",
                s.method, s.path, s.resource_type, s.status
            )));
        }
        if let Some(r) = j.refused.iter().find(|r| r.kind == RefusedKind::Redirect) {
            return Err(wrong(format!("{} {}: {}", r.method, r.url, r.reason)));
        }
        if let Some(r) = j.refused.iter().find(|r| r.kind == RefusedKind::Upstream) {
            return Err(blind(format!("{} {}: {}", r.method, r.url, r.reason)));
        }
        Ok(())
    }

    /// A page as it was opened: its document status, its text, and the journal.
    async fn judge(&self, what: &str, status: u16) -> Outcome {
        if response_fails(status, what.split('?').next().unwrap_or_default()) {
            return Err(wrong(format!("{what} answered {status}")));
        }
        self.page_text(what).await?;
        self.journal_failure()
    }

    async fn info(&self) -> Result<PageInfo, StepOutcome> {
        self.eval(PAGE_INFO_JS)
            .await
            .map_err(|e| blind(format!("the page's links could not be read: {e}")))
    }

    /// Clicks the first link to `href` on the current page; the new document's status.
    async fn click(&self, href: &str, key: &str) -> Result<u16, StepOutcome> {
        let what = format!("the link to {key}");
        let _: bool = self
            .eval("(document.querySelectorAll('a[target]').forEach(a => a.removeAttribute('target')), window.__belayMarker = 1, true)")
            .await
            .map_err(|e| blind(format!("{what}: {e}")))?;
        let index: i64 = self
            .eval(&format!(
                "Array.from(document.querySelectorAll('a[href]')).findIndex(a => a.href === {})",
                serde_json::Value::String(href.to_owned())
            ))
            .await
            .map_err(|e| blind(format!("{what}: {e}")))?;
        let mark = self.mark();
        let elements = self
            .page
            .find_elements("a[href]")
            .await
            .map_err(|e| blind(format!("{what}: {e}")))?;
        let element = usize::try_from(index)
            .ok()
            .and_then(|i| elements.get(i))
            .ok_or_else(|| blind(format!("{what} is gone from the page")))?;
        if element.click().await.is_err() {
            // Not clickable where it is (hidden, covered): the element's own click.
            let _: bool = self
                .eval(&format!(
                    "(document.querySelectorAll('a[href]')[{index}].click(), true)"
                ))
                .await
                .map_err(|e| blind(format!("{what}: {e}")))?;
        }
        if !self.wait_new_document(self.navigation_timeout, Some(key)).await {
            return Err(wrong(format!("clicking {what} opened nothing")));
        }
        let status = {
            let j = self.journal.lock().expect("journal lock");
            j.served[mark.served..]
                .iter()
                .rev()
                .find(|s| s.resource_type == "Document")
                .map(|s| s.status)
        };
        let status = match status {
            Some(s) => s,
            // A client-side route: no document, the page itself answers.
            None => match self.document_since(mark, &what) {
                Err(StepOutcome::CannotObserve { .. }) => 200,
                other => other?,
            },
        };
        self.log(format!("clicked {what}: answered {status}"));
        Ok(status)
    }

    /// Fills form `index` of the current page with the sample values and submits it.
    async fn submit(&self, index: usize) -> Result<bool, StepOutcome> {
        let types: Vec<String> = self
            .eval(&format!(
                "Array.from(document.forms[{index}].elements).map(el => (el.type || el.tagName || '').toLowerCase())"
            ))
            .await
            .map_err(|e| blind(format!("form {index}: {e}")))?;
        let mut text_index = 0;
        let fills: Vec<serde_json::Value> = types
            .iter()
            .map(|t| {
                let text_like = matches!(
                    form_fill(t, 0),
                    FormFill::Value(ref v) if v.starts_with("Sample ")
                );
                if text_like {
                    text_index += 1;
                }
                match form_fill(t, text_index) {
                    FormFill::Value(v) => serde_json::json!({ "value": v }),
                    FormFill::Check => serde_json::json!("check"),
                    FormFill::SecondOption => serde_json::json!("second"),
                    FormFill::Leave => serde_json::Value::Null,
                }
            })
            .collect();
        let js = format!(
            r#"((i, fills) => {{
  const f = document.forms[i];
  Array.from(f.elements).forEach((el, k) => {{
    const how = fills[k];
    if (how === null || how === undefined || el.tagName === 'BUTTON' || el.type === 'submit') return;
    if (how === 'check') el.checked = true;
    else if (how === 'second') {{ if (el.options && el.options.length > 1) el.selectedIndex = 1; }}
    else el.value = how.value;
    el.dispatchEvent(new Event('input', {{ bubbles: true }}));
    el.dispatchEvent(new Event('change', {{ bubbles: true }}));
  }});
  window.__belayMarker = 1;
  if (!f.checkValidity()) return 'invalid';
  f.requestSubmit();
  return 'submitted';
}})({index}, {})"#,
            serde_json::Value::Array(fills)
        );
        let submitted: String = self.eval(&js).await.map_err(|e| blind(format!("form {index}: {e}")))?;
        if submitted != "submitted" {
            self.log(format!(
                "form {index}: the sample values do not pass its validation; not submitted"
            ));
            return Ok(false);
        }
        let navigated = self.wait_new_document(SUBMIT_WAIT, None).await;
        if !navigated {
            // Handled in place by a script: let its requests finish.
            tokio::time::sleep(SETTLE).await;
        }
        self.log(format!(
            "form {index}: submitted{}",
            if navigated {
                ", a new page opened"
            } else {
                ", handled in place"
            }
        ));
        Ok(navigated)
    }

    async fn crawl(&self) -> Outcome {
        let mut visited: Vec<String> = vec!["/".to_owned()];
        let mut queue: VecDeque<(String, bool)> = VecDeque::from([("/".to_owned(), true)]);
        let room = |visited: &Vec<String>| visited.len() < MAX_PAGES;
        while let Some((path, loaded)) = queue.pop_front() {
            if !loaded {
                let status = self.load(&path).await?;
                self.judge(&path, status).await?;
            }
            let info = self.info().await?;
            let mut new: Vec<(String, String)> = vec![];
            for href in &info.links {
                if let Some(key) = crawl_key(href)
                    && !visited.contains(&key)
                    && room(&visited)
                {
                    visited.push(key.clone());
                    new.push((href.clone(), key));
                }
            }
            let mut here = true;
            for (href, key) in &new {
                if !here {
                    let status = self.load(&path).await?;
                    self.judge(&path, status).await?;
                }
                let status = self.click(href, key).await?;
                self.judge(key, status).await?;
                here = false;
                queue.push_back((key.clone(), false));
            }
            for index in 0..info.forms.min(MAX_FORMS_PER_PAGE) {
                if !here {
                    let status = self.load(&path).await?;
                    self.judge(&path, status).await?;
                }
                here = false;
                let navigated = self.submit(index).await?;
                if navigated {
                    self.page_text(&format!("the page form {index} of {path} opened"))
                        .await?;
                    // Links the new data made appear are opened by a direct load.
                    let after = self.info().await?;
                    for href in &after.links {
                        if let Some(key) = crawl_key(href)
                            && !visited.contains(&key)
                            && room(&visited)
                        {
                            visited.push(key.clone());
                            queue.push_back((key, false));
                        }
                    }
                }
                self.journal_failure()?;
            }
            let _ = info.path;
        }
        self.journal_failure()?;
        self.log(format!("crawled {} pages: {}", visited.len(), visited.join(", ")));
        Ok(())
    }
}
