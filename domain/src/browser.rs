//! The browser check's rules: its limits, the meters it reserves against, how the interceptor
//! follows redirects, what the crawl fills in and what counts as a failure, and `classifyBrowser`,
//! which turns how a session ended into Evidence.
//!
//! The browser adapter drives Chromium and reports facts (a status, a page's text, a step's
//! outcome); every judgement on those facts is made here, so the check means the same whichever
//! browser drives it and each rule is testable without one.

use crate::evidence::{CheckResult, Coverage, EvidenceStatus};
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// A browser session ends after this long (BROWSER_SESSION_MS).
pub const BROWSER_SESSION_MS: u64 = 120_000;
/// The browser check's timeout (BROWSER_CHECK_TIMEOUT_MS).
pub const BROWSER_CHECK_TIMEOUT_MS: u64 = 180_000;
/// Browser runs per Candidate, retries included (MAX_BROWSER_RUNS_PER_CANDIDATE).
pub const MAX_BROWSER_RUNS_PER_CANDIDATE: u32 = 2;
/// The daily browser seconds a deployment configures (compose.yaml).
pub const BROWSER_DAILY_SECONDS: u64 = 3600;
/// The daily browser seconds when `BROWSER_DAILY_SECONDS` is unset or not a positive integer.
pub const BROWSER_DAILY_SECONDS_FALLBACK: u64 = 500;
/// Seconds reserved before a session opens, settled to the measured seconds after it closes.
pub const BROWSER_RESERVATION_SECONDS: u64 = 60;
/// Screenshots per session, each stored with its SHA-256.
pub const MAX_SCREENSHOTS: usize = 8;
/// Pages the crawl opens, breadth first from the home page.
pub const MAX_PAGES: usize = 8;
/// Forms the crawl fills and submits on each page.
pub const MAX_FORMS_PER_PAGE: usize = 3;
/// Redirect hops the interceptor follows on the preview host.
pub const MAX_REDIRECT_HOPS: u32 = 5;

/// The sample values the crawl fills in.
pub const SAMPLE_NUMBER: &str = "12";
pub const SAMPLE_EMAIL: &str = "person@example.com";
pub const SAMPLE_DATE: &str = "2026-01-15";
pub const SAMPLE_URL: &str = "https://example.com";

/// `BROWSER_DAILY_SECONDS` as configured: a positive integer, or 500 when unset or anything else.
pub fn parse_browser_daily_seconds(value: Option<&str>) -> u64 {
    value
        .map(str::trim)
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(BROWSER_DAILY_SECONDS_FALLBACK)
}

/// Which browser meter refused a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum BrowserMeter {
    /// Browser-seconds of the UTC day.
    DailySeconds,
    /// Browser runs of the Candidate.
    RunsPerCandidate,
}

/// Whether a session may open: one more run for the Candidate, and a 60 s reservation on the
/// day's seconds (`used` settled plus `reserved` still open), within `daily_limit`. Reaching a
/// limit exactly is allowed.
pub fn reserve_browser_session(
    runs_so_far: u32,
    used_today: u64,
    reserved_today: u64,
    daily_limit: u64,
) -> Result<(), BrowserMeter> {
    if runs_so_far >= MAX_BROWSER_RUNS_PER_CANDIDATE {
        return Err(BrowserMeter::RunsPerCandidate);
    }
    let total = used_today
        .saturating_add(reserved_today)
        .saturating_add(BROWSER_RESERVATION_SECONDS);
    if total > daily_limit {
        return Err(BrowserMeter::DailySeconds);
    }
    Ok(())
}

/// The seconds a closed session settles to: its measured length, rounded up to a whole second.
pub fn settled_browser_seconds(session_ms: u64) -> u64 {
    session_ms.div_ceil(1000)
}

/// The UTC day (`YYYY-MM-DD`) a unix time falls in: the browser-seconds meter's period.
pub fn day_of(unix_secs: i64) -> String {
    crate::calendar::utc_day(unix_secs)
}

/// What the interceptor does with a response on the preview host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedirectStep {
    /// Not a redirect (or one without a usable `Location`): the browser gets this response.
    Final,
    /// Request the target: with `method` and, when `keep_body`, the same body.
    Follow { method: &'static str, keep_body: bool },
    /// A sixth hop: the request fails.
    TooManyHops,
    /// The target is not on the preview host: the request fails.
    LeavesPreviewHost,
}

/// The redirect rule: 301, 302, 303, 307 and 308 with a `Location` are followed by belay, up to 5
/// hops while the target stays on the preview host; 307 and 308 keep the method and the body,
/// every other redirect becomes a `GET` without a body.
/// - `hops_followed`: redirects already followed for this request;
/// - `target_on_preview_host`: `None` when the response has no `Location`.
pub fn redirect_step(
    status: u16,
    method: &str,
    hops_followed: u32,
    target_on_preview_host: Option<bool>,
) -> RedirectStep {
    if !matches!(status, 301 | 302 | 303 | 307 | 308) {
        return RedirectStep::Final;
    }
    let Some(on_host) = target_on_preview_host else {
        return RedirectStep::Final;
    };
    if hops_followed >= MAX_REDIRECT_HOPS {
        return RedirectStep::TooManyHops;
    }
    if !on_host {
        return RedirectStep::LeavesPreviewHost;
    }
    if matches!(status, 307 | 308) {
        RedirectStep::Follow {
            method: match method.to_ascii_uppercase().as_str() {
                "GET" => "GET",
                "POST" => "POST",
                "PUT" => "PUT",
                "PATCH" => "PATCH",
                "DELETE" => "DELETE",
                "HEAD" => "HEAD",
                "OPTIONS" => "OPTIONS",
                _ => "GET",
            },
            keep_body: true,
        }
    } else {
        RedirectStep::Follow {
            method: "GET",
            keep_body: false,
        }
    }
}

/// What the crawl puts into one form control.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormFill {
    Value(String),
    /// Tick the checkbox.
    Check,
    /// Select the second option (when there is one).
    SecondOption,
    /// Leave it alone (buttons, hidden fields, files, …).
    Leave,
}

/// The sample value for a control of `input_type` (`number`, `email`, `date`, `url`, `checkbox`,
/// `select-one`, `text`, `textarea`, …). `text_index` counts the other text fields of the form
/// from 1: they get `Sample <n>`.
pub fn form_fill(input_type: &str, text_index: usize) -> FormFill {
    match input_type.to_ascii_lowercase().as_str() {
        "number" | "range" => FormFill::Value(SAMPLE_NUMBER.into()),
        "email" => FormFill::Value(SAMPLE_EMAIL.into()),
        "date" => FormFill::Value(SAMPLE_DATE.into()),
        "url" => FormFill::Value(SAMPLE_URL.into()),
        "checkbox" => FormFill::Check,
        t if t.starts_with("select") => FormFill::SecondOption,
        "" | "text" | "search" | "tel" | "password" | "textarea" => FormFill::Value(format!("Sample {text_index}")),
        _ => FormFill::Leave,
    }
}

/// Whether the crawl opens a link: same origin, and not under `/api/`.
pub fn crawls(same_origin: bool, path: &str) -> bool {
    same_origin && !(path == "/api" || path.starts_with("/api/"))
}

/// What a page must show: some text, whose whole (trimmed) text does not start with "404" or
/// "not found". `Some(why)` when the page fails.
pub fn page_text_failure(text: &str) -> Option<String> {
    let t = text.trim();
    if t.is_empty() {
        return Some("the page shows no text".into());
    }
    let lower = t.to_lowercase();
    if lower.starts_with("404") || lower.starts_with("not found") {
        let first: String = t.chars().take(60).collect();
        return Some(format!("the page reads as not found: {first}"));
    }
    None
}

/// Whether a response fails the crawl: any 5xx; a 4xx for a page or asset outside `/api/`, except
/// `/favicon.ico`.
pub fn response_fails(status: u16, path: &str) -> bool {
    match status {
        500..=599 => true,
        400..=499 => !(path == "/api" || path.starts_with("/api/") || path == "/favicon.ico"),
        _ => false,
    }
}

/// The file an app declares its conventions in (APP_CONVENTIONS), at the root of its tree.
pub const WRANGLER_JSONC: &str = "wrangler.jsonc";
/// The page a single-page application serves for a route its client handles.
pub const SPA_INDEX: &str = "public/index.html";

/// The single-page-application convention: the app's `wrangler.jsonc` sets
/// `assets.not_found_handling` to `single-page-application` (comments and trailing commas
/// allowed, as JSONC has them). Anything unreadable declares nothing.
pub fn declares_single_page_application(wrangler_jsonc: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(&jsonc_to_json(wrangler_jsonc))
        .is_ok_and(|v| v["assets"]["not_found_handling"] == "single-page-application")
}

/// JSONC without its comments and trailing commas: JSON, when the rest of it is.
fn jsonc_to_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => out.extend(chars.next()),
                '"' => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if skip_comment(c, &mut chars) {
            out.push(' ');
        } else if c != ',' || !matches!(next_significant(chars.clone()), Some('}' | ']')) {
            // (A comma followed, past white space and comments, by a closing bracket goes.)
            out.push(c);
        }
    }
    out
}

/// Consumes the comment that `c` (just read) opens; false when it opens none.
fn skip_comment(c: char, chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> bool {
    match (c, chars.peek()) {
        ('/', Some('/')) => {
            while chars.next_if(|&n| n != '\n').is_some() {}
            true
        }
        ('/', Some('*')) => {
            chars.next();
            let mut last = ' ';
            for n in chars.by_ref() {
                if last == '*' && n == '/' {
                    break;
                }
                last = n;
            }
            true
        }
        _ => false,
    }
}

/// The next character that is neither white space nor in a comment.
fn next_significant(mut chars: std::iter::Peekable<std::str::Chars<'_>>) -> Option<char> {
    while let Some(c) = chars.next() {
        if !c.is_whitespace() && !skip_comment(c, &mut chars) {
            return Some(c);
        }
    }
    None
}

/// Whether the browser is served `public/index.html` in place of what the app answered: a
/// direct document load (a navigation, `GET`) of a route the app answers 404, when the app
/// declares the single-page-application convention. Assets, API routes and other statuses keep
/// the app's answer.
pub fn serves_spa_index(declared: bool, is_document: bool, method: &str, path: &str, status: u16) -> bool {
    declared
        && is_document
        && method.eq_ignore_ascii_case("GET")
        && status == 404
        && !(path == "/api" || path.starts_with("/api/"))
}

/// The steps of the flow, in order; a failed step stops it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum BrowserStep {
    /// `GET /` answers below 400; a screenshot.
    OpenApp,
    /// The home page shows visible text.
    VisibleText,
    /// `fetch('/api/health')` from the page answers 200.
    Health,
    /// Every linked page opens by a click and by a direct load; forms, errors, statuses; a
    /// screenshot at the end.
    Crawl,
}

impl BrowserStep {
    pub const ALL: [BrowserStep; 4] = [
        BrowserStep::OpenApp,
        BrowserStep::VisibleText,
        BrowserStep::Health,
        BrowserStep::Crawl,
    ];

    fn name(self) -> &'static str {
        match self {
            BrowserStep::OpenApp => "open the app",
            BrowserStep::VisibleText => "visible text",
            BrowserStep::Health => "/api/health",
            BrowserStep::Crawl => "linked pages",
        }
    }
}

/// How one step ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum StepOutcome {
    Passed,
    /// The app behaved wrongly (a 404 page, a script error, a 5xx, no text, …).
    WrongBehaviour {
        detail: String,
    },
    /// The step could not observe the app (a navigation that never finished, a lost page, …).
    CannotObserve {
        detail: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct StepRecord {
    pub step: BrowserStep,
    #[serde(flatten)]
    pub outcome: StepOutcome,
}

/// How a browser session ended, as the adapter saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(tag = "run", rename_all = "snake_case")]
pub enum BrowserRun {
    /// A meter refused the reservation: no session opened.
    ReservationRefused { meter: BrowserMeter },
    /// The composed app did not start in the Sandbox.
    NoPreview { detail: String },
    /// Chromium did not start or its DevTools connection failed.
    NoBrowserConnection { detail: String },
    /// The session passed BROWSER_SESSION_MS; `steps` is what finished before.
    DeadlineExceeded { steps: Vec<StepRecord> },
    /// The flow ran; it stops at the first step that did not pass.
    Completed { steps: Vec<StepRecord> },
}

/// `classifyBrowser`: every step passes → `pass`/`checked_supported`; a step finds wrong app
/// behaviour → `fail`/`checked_supported`; a refused reservation → `skipped`/`not_checked`; no
/// preview or no browser connection → `error`/`not_checked`; the session deadline or a step that
/// cannot observe the app → `error`/`not_checked`. A flow that stopped before its last step
/// without a failing step observed nothing there, so it is `error`/`not_checked` too.
pub fn classify_browser(run: &BrowserRun) -> CheckResult {
    let gap = |status, summary: String| CheckResult::new(status, Coverage::NotChecked, &summary);
    match run {
        BrowserRun::ReservationRefused { meter } => gap(
            EvidenceStatus::Skipped,
            match meter {
                BrowserMeter::DailySeconds => "browser time for today is spent".into(),
                BrowserMeter::RunsPerCandidate => {
                    format!("the candidate has had its {MAX_BROWSER_RUNS_PER_CANDIDATE} browser runs")
                }
            },
        ),
        BrowserRun::NoPreview { detail } => gap(EvidenceStatus::Error, format!("no preview: {detail}")),
        BrowserRun::NoBrowserConnection { detail } => {
            gap(EvidenceStatus::Error, format!("the browser did not connect: {detail}"))
        }
        BrowserRun::DeadlineExceeded { steps } => gap(
            EvidenceStatus::Error,
            format!(
                "the session passed {} s after {} of {} steps",
                BROWSER_SESSION_MS / 1000,
                steps.iter().filter(|s| s.outcome == StepOutcome::Passed).count(),
                BrowserStep::ALL.len()
            ),
        ),
        BrowserRun::Completed { steps } => {
            for s in steps {
                match &s.outcome {
                    StepOutcome::Passed => {}
                    StepOutcome::WrongBehaviour { detail } => {
                        return CheckResult::new(
                            EvidenceStatus::Fail,
                            Coverage::CheckedSupported,
                            &format!("{} failed: {detail}", s.step.name()),
                        );
                    }
                    StepOutcome::CannotObserve { detail } => {
                        return gap(
                            EvidenceStatus::Error,
                            format!("{} could not observe the app: {detail}", s.step.name()),
                        );
                    }
                }
            }
            let passed: Vec<BrowserStep> = steps.iter().map(|s| s.step).collect();
            match BrowserStep::ALL.iter().find(|s| !passed.contains(s)) {
                Some(missing) => gap(
                    EvidenceStatus::Error,
                    format!("the flow stopped before {}", missing.name()),
                ),
                None => CheckResult::new(
                    EvidenceStatus::Pass,
                    Coverage::CheckedSupported,
                    "every step passed: the app opened, showed text, answered /api/health and every linked page opened",
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_app_declares_the_single_page_application_convention_in_its_wrangler_jsonc() {
        let declared = r#"{
  // The app's conventions.
  "name": "todos", /* the worker */
  "assets": {
    "directory": "./public", // served as is
    "not_found_handling": "single-page-application",
  },
  "routes": ["https://x.example/*", ],
}"#;
        assert!(declares_single_page_application(declared));
        assert!(declares_single_page_application(
            r#"{"assets":{"not_found_handling":"single-page-application"}}"#
        ));
        // A comment marker or a comma inside a string is text.
        assert!(declares_single_page_application(
            r#"{"url": "https://a//b,}", "assets": {"not_found_handling": "single-page-application"}}"#
        ));
        for not in [
            r#"{"assets": {"not_found_handling": "404-page"}}"#,
            r#"{"not_found_handling": "single-page-application"}"#,
            r#"{"assets": {/* "not_found_handling": "single-page-application" */}}"#,
            "{\"assets\": {\n// \"not_found_handling\": \"single-page-application\"\n}}",
            "not json",
            "",
        ] {
            assert!(!declares_single_page_application(not), "{not}");
        }
    }

    #[test]
    fn only_a_document_load_the_app_answers_404_gets_the_index_and_only_when_declared() {
        assert!(serves_spa_index(true, true, "GET", "/board/7", 404));
        assert!(!serves_spa_index(false, true, "GET", "/board/7", 404), "not declared");
        assert!(
            !serves_spa_index(true, false, "GET", "/logo.png", 404),
            "an asset stays 404"
        );
        assert!(
            !serves_spa_index(true, true, "GET", "/api/todos/9", 404),
            "an API route stays 404"
        );
        assert!(!serves_spa_index(true, true, "POST", "/board", 404));
        assert!(!serves_spa_index(true, true, "GET", "/board", 500));
        assert!(!serves_spa_index(true, true, "GET", "/board", 200));
    }

    proptest::proptest! {
        #[test]
        fn reading_any_wrangler_file_never_panics(text in ".*") {
            let _ = declares_single_page_application(&text);
        }
    }
    use proptest::prelude::*;

    fn step(step: BrowserStep, outcome: StepOutcome) -> StepRecord {
        StepRecord { step, outcome }
    }

    fn all_passed() -> Vec<StepRecord> {
        BrowserStep::ALL.iter().map(|s| step(*s, StepOutcome::Passed)).collect()
    }

    fn class(run: BrowserRun) -> (EvidenceStatus, Coverage) {
        let r = classify_browser(&run);
        assert!(r.summary.ends_with("(runner: sandbox)"));
        (r.status, r.coverage)
    }

    #[test]
    fn the_limits_are_the_specs() {
        assert_eq!(BROWSER_SESSION_MS, 120_000);
        assert_eq!(BROWSER_CHECK_TIMEOUT_MS, crate::check::CheckId::Browser.timeout_ms());
        assert_eq!(MAX_BROWSER_RUNS_PER_CANDIDATE, 2);
        assert_eq!((BROWSER_DAILY_SECONDS, BROWSER_DAILY_SECONDS_FALLBACK), (3600, 500));
        assert_eq!(BROWSER_RESERVATION_SECONDS, 60);
        assert_eq!((MAX_SCREENSHOTS, MAX_PAGES, MAX_REDIRECT_HOPS), (8, 8, 5));
    }

    #[test]
    fn every_step_passing_is_a_supported_pass() {
        assert_eq!(
            class(BrowserRun::Completed { steps: all_passed() }),
            (EvidenceStatus::Pass, Coverage::CheckedSupported)
        );
    }

    #[test]
    fn wrong_app_behaviour_is_a_supported_failure_and_names_the_step() {
        let mut steps = all_passed();
        steps[3] = step(
            BrowserStep::Crawl,
            StepOutcome::WrongBehaviour {
                detail: "/about answered 404".into(),
            },
        );
        let r = classify_browser(&BrowserRun::Completed { steps });
        assert_eq!(
            (r.status, r.coverage),
            (EvidenceStatus::Fail, Coverage::CheckedSupported)
        );
        assert_eq!(r.summary, "linked pages failed: /about answered 404 (runner: sandbox)");
    }

    #[test]
    fn a_refused_reservation_is_skipped_and_not_checked() {
        for meter in [BrowserMeter::DailySeconds, BrowserMeter::RunsPerCandidate] {
            assert_eq!(
                class(BrowserRun::ReservationRefused { meter }),
                (EvidenceStatus::Skipped, Coverage::NotChecked)
            );
        }
    }

    #[test]
    fn no_preview_or_no_browser_connection_is_an_error() {
        assert_eq!(
            class(BrowserRun::NoPreview {
                detail: "bun run dev exited 1".into()
            }),
            (EvidenceStatus::Error, Coverage::NotChecked)
        );
        assert_eq!(
            class(BrowserRun::NoBrowserConnection {
                detail: "no DevToolsActivePort".into()
            }),
            (EvidenceStatus::Error, Coverage::NotChecked)
        );
    }

    #[test]
    fn the_deadline_or_a_step_that_cannot_observe_the_app_is_an_error() {
        assert_eq!(
            class(BrowserRun::DeadlineExceeded {
                steps: all_passed()[..2].to_vec()
            }),
            (EvidenceStatus::Error, Coverage::NotChecked)
        );
        let blind = vec![
            step(BrowserStep::OpenApp, StepOutcome::Passed),
            step(
                BrowserStep::VisibleText,
                StepOutcome::CannotObserve {
                    detail: "the page went away".into(),
                },
            ),
        ];
        assert_eq!(
            class(BrowserRun::Completed { steps: blind }),
            (EvidenceStatus::Error, Coverage::NotChecked)
        );
        assert_eq!(
            class(BrowserRun::Completed {
                steps: all_passed()[..3].to_vec()
            }),
            (EvidenceStatus::Error, Coverage::NotChecked),
            "a flow that stopped early without a failure observed nothing after"
        );
    }

    #[test]
    fn the_daily_seconds_are_a_positive_integer_or_500() {
        assert_eq!(parse_browser_daily_seconds(Some("3600")), 3600);
        assert_eq!(parse_browser_daily_seconds(Some(" 90 ")), 90);
        for bad in [
            None,
            Some(""),
            Some("0"),
            Some("-5"),
            Some("1.5"),
            Some("abc"),
            Some("+7"),
            Some("99999999999999999999999"),
        ] {
            assert_eq!(parse_browser_daily_seconds(bad), 500, "{bad:?}");
        }
    }

    #[test]
    fn the_daily_meter_is_the_utc_day() {
        assert_eq!(day_of(0), "1970-01-01");
        assert_eq!(day_of(86_399), "1970-01-01");
        assert_eq!(day_of(86_400), "1970-01-02");
        // 2026-12-01T23:59:59Z and the next second.
        assert_eq!(day_of(1_796_169_599), "2026-12-01");
        assert_eq!(day_of(1_796_169_600), "2026-12-02");
        assert_eq!(day_of(951_782_400), "2000-02-29");
        assert_eq!(day_of(-1), "1969-12-31");
    }

    #[test]
    fn a_session_reserves_60_seconds_and_at_most_two_runs() {
        assert_eq!(reserve_browser_session(0, 3_540, 0, 3_600), Ok(()));
        assert_eq!(
            reserve_browser_session(1, 3_500, 60, 3_600),
            Err(BrowserMeter::DailySeconds)
        );
        assert_eq!(
            reserve_browser_session(2, 0, 0, 3_600),
            Err(BrowserMeter::RunsPerCandidate)
        );
        assert_eq!(settled_browser_seconds(5_001), 6);
        assert_eq!(settled_browser_seconds(0), 0);
    }

    #[test]
    fn redirects_307_and_308_keep_the_method_and_body_others_become_get() {
        assert_eq!(
            redirect_step(307, "POST", 0, Some(true)),
            RedirectStep::Follow {
                method: "POST",
                keep_body: true
            }
        );
        assert_eq!(
            redirect_step(308, "put", 1, Some(true)),
            RedirectStep::Follow {
                method: "PUT",
                keep_body: true
            }
        );
        for status in [301, 302, 303] {
            assert_eq!(
                redirect_step(status, "POST", 0, Some(true)),
                RedirectStep::Follow {
                    method: "GET",
                    keep_body: false
                }
            );
        }
        assert_eq!(redirect_step(200, "GET", 0, Some(true)), RedirectStep::Final);
        assert_eq!(redirect_step(302, "GET", 0, None), RedirectStep::Final);
    }

    #[test]
    fn five_hops_are_followed_and_a_sixth_or_one_off_the_preview_host_fails() {
        assert!(matches!(
            redirect_step(302, "GET", 4, Some(true)),
            RedirectStep::Follow { .. }
        ));
        assert_eq!(redirect_step(302, "GET", 5, Some(true)), RedirectStep::TooManyHops);
        assert_eq!(
            redirect_step(302, "GET", 0, Some(false)),
            RedirectStep::LeavesPreviewHost
        );
    }

    #[test]
    fn forms_get_the_sample_values() {
        assert_eq!(form_fill("number", 0), FormFill::Value("12".into()));
        assert_eq!(form_fill("email", 0), FormFill::Value("person@example.com".into()));
        assert_eq!(form_fill("date", 0), FormFill::Value("2026-01-15".into()));
        assert_eq!(form_fill("url", 0), FormFill::Value("https://example.com".into()));
        assert_eq!(form_fill("text", 2), FormFill::Value("Sample 2".into()));
        assert_eq!(form_fill("textarea", 3), FormFill::Value("Sample 3".into()));
        assert_eq!(form_fill("checkbox", 0), FormFill::Check);
        assert_eq!(form_fill("select-one", 0), FormFill::SecondOption);
        assert_eq!(form_fill("submit", 0), FormFill::Leave);
        assert_eq!(form_fill("hidden", 0), FormFill::Leave);
    }

    #[test]
    fn the_crawl_skips_api_routes_and_other_origins() {
        assert!(crawls(true, "/about"));
        assert!(!crawls(true, "/api/todos"));
        assert!(!crawls(false, "/about"));
        assert!(crawls(true, "/apiary"));
    }

    #[test]
    fn a_page_must_show_text_that_is_not_a_not_found_page() {
        assert_eq!(page_text_failure("Todos\nAdd one"), None);
        assert!(page_text_failure("   ").is_some());
        assert!(page_text_failure("404 Not Found").is_some());
        assert!(page_text_failure("Not found: /x").is_some());
        assert_eq!(page_text_failure("The 404 club"), None);
    }

    #[test]
    fn a_5xx_always_fails_and_a_4xx_only_for_pages_and_assets_outside_the_api() {
        assert!(response_fails(500, "/api/todos"));
        assert!(response_fails(404, "/about"));
        assert!(response_fails(404, "/app.css"));
        assert!(!response_fails(404, "/api/todos/9"));
        assert!(!response_fails(404, "/favicon.ico"));
        assert!(!response_fails(302, "/old"));
    }

    fn any_outcome() -> impl Strategy<Value = StepOutcome> {
        prop_oneof![
            Just(StepOutcome::Passed),
            "[a-z]{0,5}".prop_map(|detail| StepOutcome::WrongBehaviour { detail }),
            "[a-z]{0,5}".prop_map(|detail| StepOutcome::CannotObserve { detail }),
        ]
    }

    proptest! {
        #[test]
        fn only_a_completed_flow_with_every_step_passed_is_a_pass(
            outcomes in prop::collection::vec(any_outcome(), 0..5), deadline in any::<bool>()
        ) {
            let steps: Vec<StepRecord> = outcomes
                .into_iter()
                .zip(BrowserStep::ALL)
                .map(|(outcome, s)| step(s, outcome))
                .collect();
            let every = steps.len() == BrowserStep::ALL.len() && steps.iter().all(|s| s.outcome == StepOutcome::Passed);
            let run = if deadline { BrowserRun::DeadlineExceeded { steps } } else { BrowserRun::Completed { steps } };
            let r = classify_browser(&run);
            prop_assert_eq!(r.status == EvidenceStatus::Pass, every && !deadline);
            prop_assert_eq!(r.coverage == Coverage::CheckedSupported, matches!(r.status, EvidenceStatus::Pass | EvidenceStatus::Fail));
        }

        #[test]
        fn a_redirect_chain_never_follows_more_than_5_hops(status in 300u16..309, hops in 0u32..20) {
            if let RedirectStep::Follow { .. } = redirect_step(status, "GET", hops, Some(true)) {
                prop_assert!(hops < MAX_REDIRECT_HOPS);
            }
        }

        #[test]
        fn the_daily_seconds_parse_never_panics_and_is_positive(v in any::<String>()) {
            prop_assert!(parse_browser_daily_seconds(Some(&v)) > 0);
        }
    }
}
