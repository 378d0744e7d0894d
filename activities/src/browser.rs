//! The browser check, on the `belay.browser` pool: reserve the meters, start the composed app in
//! the project's Sandbox with the dev command, run one Chromium session against it (every
//! request answered from the Sandbox or blocked), record the Evidence and its screenshots, and
//! settle the meters to the measured seconds. The judgement is `classify_browser`.
//!
//! The Evidence row is keyed by Candidate, check and attempt: a retry after a lost worker finds
//! it and answers it; reservations such a worker left open are settled at what they held.

use crate::sandbox::SandboxActivities;
use crate::{Plain, fatal, heartbeating, now_secs, retryable, sandbox_error, store_error};
use belay_browser::{BrowserConfig, SessionReport, Upstream, run_session};
use belay_domain::browser::{
    BrowserRun, SPA_INDEX, WRANGLER_JSONC, classify_browser, declares_single_page_application, settled_browser_seconds,
};
use belay_domain::check::CheckId;
use belay_domain::evidence::Evidence;
use belay_domain::ids::CandidateId;
use belay_sandbox::SandboxUser;
use belay_store::browser_meter::BrowserReserve;
use belay_store::candidates::NewEvidence;
use belay_store::now_ms;
use belay_workflows::browser::BrowserCheckRequest;
use object_store::ObjectStore;
use std::sync::Arc;
use std::time::{Duration, Instant};
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use tracing::{instrument, warn};

/// How long the dev command may take to answer its first request.
const PREVIEW_START: Duration = Duration::from_secs(90);
/// Sets `sid` to the session of the shell running it (field 6 of its stat, read past the command
/// name, which may hold spaces).
const SESSION_OF_SELF: &str =
    r#"{ read -r st < /proc/$$/stat; } 2>/dev/null; st=${st##*) }; r=${st#* }; r=${r#* }; r=${r#* }; sid=${r%% *};"#;
/// Kills every process of the session the pid file `$1` names (the preview's exec), then removes
/// the file.
const STOP_SESSION: &str = r#"[ -f "$1" ] || exit 0
s=$(cat "$1"); rm -f "$1"
[ "$s" -gt 1 ] 2>/dev/null || exit 0
for i in 1 2 3 4 5; do
  n=0
  for d in /proc/[0-9]*; do
    { read -r st < "$d/stat"; } 2>/dev/null || continue
    st=${st##*) }; r=${st#* }; r=${r#* }; r=${r#* }
    [ "${r%% *}" = "$s" ] || continue
    kill -9 "${d#/proc/}" 2>/dev/null && n=$((n + 1))
  done
  [ "$n" -eq 0 ] && break
done
true"#;
/// The most of `wrangler.jsonc` or `public/index.html` the check reads.
const SPA_FILE_BYTES: usize = 1 << 20;

/// The key of an attempt's Evidence object.
pub fn browser_evidence_key(candidate: &str, attempt: u32) -> String {
    format!("evidence/{candidate}/browser-{attempt}.json")
}

/// The key of screenshot `index` of an attempt.
pub fn screenshot_key(candidate: &str, attempt: u32, index: usize) -> String {
    format!("evidence/{candidate}/browser-{attempt}/screenshot-{index}.png")
}

/// The port the preview listens on in the Sandbox: one per Candidate, so sibling Candidates of
/// one project (one Sandbox) do not meet.
pub fn preview_port(candidate: &str) -> u16 {
    let h = candidate
        .bytes()
        .fold(2_166_136_261u32, |h, b| (h ^ u32::from(b)).wrapping_mul(16_777_619));
    4000 + (h % 2000) as u16
}

pub struct BrowserActivities {
    /// The Sandbox side: the checkout and the execs.
    pub sandbox: Arc<SandboxActivities>,
    pub config: BrowserConfig,
    /// BROWSER_DAILY_SECONDS as parsed.
    pub daily_seconds: u64,
}

impl BrowserActivities {
    fn objects(&self) -> &dyn ObjectStore {
        self.sandbox.objects.as_ref()
    }

    async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), ActivityError> {
        self.objects()
            .put(&object_store::path::Path::from(key), bytes.into())
            .await
            .map(drop)
            .map_err(retryable)
    }

    /// Stops the dev command the pid file names, with everything in its session (the exec's
    /// own leftover kill does the same when the exec ends, but not for an exec whose worker was
    /// lost).
    /// Stops the preview from the Candidate's own checkout directory (`dir`): the Sandbox runs
    /// commands only in a directory of its own, never `/`.
    async fn stop_preview(&self, project: &str, dir: &str, pidfile: &str) {
        let stopped = self
            .sandbox
            .sandboxes
            .sh(
                project,
                dir,
                SandboxUser::Root,
                STOP_SESSION,
                &[pidfile],
                Duration::from_secs(15),
            )
            .await;
        if let Err(e) = stopped {
            warn!(error = %e, "stopping the preview");
        }
    }

    /// The checkout's `public/index.html` when its `wrangler.jsonc` declares the
    /// single-page-application convention; `None` when it declares nothing (or has no index).
    async fn spa_index(&self, project: &str, dir: &str) -> Result<Option<Vec<u8>>, ActivityError> {
        let sandboxes = &self.sandbox.sandboxes;
        let declared = match sandboxes
            .read_file(project, dir, SandboxUser::Root, WRANGLER_JSONC, SPA_FILE_BYTES)
            .await
            .map_err(sandbox_error)?
        {
            Ok(bytes) => declares_single_page_application(&String::from_utf8_lossy(&bytes)),
            Err(_) => false,
        };
        if !declared {
            return Ok(None);
        }
        match sandboxes
            .read_file(project, dir, SandboxUser::Root, SPA_INDEX, SPA_FILE_BYTES)
            .await
            .map_err(sandbox_error)?
        {
            Ok(index) => Ok(Some(index)),
            Err(why) => {
                warn!(reason = %why, "the app declares a single-page application but has no index to serve");
                Ok(None)
            }
        }
    }

    /// Keeps each screenshot of the session as an object; their entries in the Evidence object.
    async fn put_screenshots(
        &self,
        candidate: &str,
        attempt: u32,
        report: &SessionReport,
    ) -> Result<Vec<serde_json::Value>, ActivityError> {
        let mut shots = vec![];
        for (i, s) in report.screenshots.iter().enumerate() {
            let key = screenshot_key(candidate, attempt, i);
            self.put(&key, s.png.clone()).await?;
            shots.push(serde_json::json!({
                "index": i, "name": s.name, "key": key, "sha256": s.sha256, "bytes": s.png.len(),
                "contentType": "image/png",
            }));
        }
        Ok(shots)
    }

    /// Starts the dev command in the Sandbox, runs the session against its port, stops it.
    async fn session(&self, input: &BrowserCheckRequest) -> Result<(SessionReport, serde_json::Value), ActivityError> {
        let project = input.project_id.as_str();
        let candidate = input.candidate_id.as_str();
        let sandboxes = self.sandbox.sandboxes.clone();
        let dir = self.sandbox.ensure_checkout(project, candidate).await?;
        let port = preview_port(candidate);
        let pidfile = format!("/tmp/belay-browser-{candidate}.pid");
        let dev = input.commands.dev.clone();
        // The pid file and the port, then the dev command's words (shell-word split).
        let mut dev_args: Vec<String> = vec![pidfile.clone(), port.to_string()];
        dev_args.extend(crate::verification::command_argv(&dev));
        let limit = self.config.session + PREVIEW_START + Duration::from_secs(30);
        let spa_index = self.spa_index(project, &dir).await?;
        // A dev server an earlier attempt left (its worker lost mid-session) still holds the port.
        self.stop_preview(project, &dir, &pidfile).await;
        let preview = {
            let (sandboxes, project, dir, dev_args) = (sandboxes.clone(), project.to_owned(), dir.clone(), dev_args);
            tokio::spawn(async move {
                sandboxes
                    .sh(
                        &project,
                        &dir,
                        SandboxUser::Root,
                        &format!(
                            r#"{SESSION_OF_SELF} echo "$sid" > "$1"; port=$2; shift 2; PORT="$port" HOST=0.0.0.0 exec "$@""#
                        ),
                        &dev_args.iter().map(String::as_str).collect::<Vec<_>>(),
                        limit,
                    )
                    .await
            })
        };
        let address = sandboxes.address(project).await.map_err(sandbox_error)?;
        let base = format!("http://{address}:{port}");
        let mut upstream = Upstream::with_roots(&base, &self.config.extra_roots).map_err(|e| fatal(Plain(e)))?;
        let single_page_application = spa_index.is_some();
        if let Some(index) = spa_index {
            upstream = upstream.serving_spa_index(index);
        }
        let started = Instant::now();
        let listening = answers_before_start_limit(&upstream, &preview).await;
        let preview_ms = started.elapsed().as_secs_f64() * 1000.0;
        let report = if listening {
            run_session(&self.config, upstream).await
        } else {
            let detail = if preview.is_finished() {
                format!("{dev} exited before it answered on port {port}")
            } else {
                format!(
                    "{dev} did not answer on port {port} within {} s",
                    PREVIEW_START.as_secs()
                )
            };
            report_without_session(BrowserRun::NoPreview { detail })
        };
        self.stop_preview(project, &dir, &pidfile).await;
        let tail = output_tail(preview).await;
        Ok((
            report,
            serde_json::json!({
                "command": dev, "port": port, "startMs": preview_ms, "outputTail": tail,
                "singlePageApplication": single_page_application,
            }),
        ))
    }
}

/// Whether the preview answers `GET /` before [`PREVIEW_START`] passes or its command ends.
async fn answers_before_start_limit<T>(upstream: &Upstream, preview: &tokio::task::JoinHandle<T>) -> bool {
    let started = Instant::now();
    while started.elapsed() < PREVIEW_START && !preview.is_finished() {
        let url = url_of(&Upstream::preview_url("/"));
        if upstream.fetch_once("GET", &url, &[], None).await.is_ok() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

/// The last 2,000 characters the stopped preview command wrote (stdout, then stderr); empty when
/// it did not end within 20 s or failed to run.
async fn output_tail(
    preview: tokio::task::JoinHandle<Result<belay_sandbox::ExecOutput, belay_sandbox::SandboxError>>,
) -> String {
    let out = match tokio::time::timeout(Duration::from_secs(20), preview).await {
        Ok(Ok(Ok(out))) => out,
        Ok(Ok(Err(e))) => {
            warn!(error = %e, "the preview command failed");
            return String::new();
        }
        _ => return String::new(),
    };
    let all = format!("{}{}", out.stdout, out.stderr);
    let n = all.chars().count();
    all.chars().skip(n.saturating_sub(2000)).collect()
}

/// The report of a check that ran no browser session (no preview, or the meter refused it).
fn report_without_session(run: BrowserRun) -> SessionReport {
    SessionReport {
        run,
        log: vec![],
        journal: Default::default(),
        screenshots: vec![],
        timings: Default::default(),
        chromium_pid: None,
        browser_version: None,
    }
}

fn url_of(s: &str) -> belay_browser::Url {
    belay_browser::Url::parse(s).expect("a preview URL parses")
}

#[activities]
impl BrowserActivities {
    #[activity(definition = belay_workflows::browser::browser_definitions::Check)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id), err(Debug))]
    pub async fn check(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: BrowserCheckRequest,
    ) -> Result<Evidence, ActivityError> {
        let candidate = input.candidate_id.to_string();
        let store = &self.sandbox.store;
        if let Some(row) = store
            .evidence_of(&CandidateId::from(candidate.as_str()), &CheckId::Browser, input.attempt)
            .await
            .map_err(store_error)?
        {
            return Ok(row.evidence);
        }
        heartbeating(&ctx, async {
            store
                .settle_open_browser_reservations(&CandidateId::from(candidate.as_str()))
                .await
                .map_err(store_error)?;
            let started_at = now_ms();
            let reserved = store
                .reserve_browser(&CandidateId::from(candidate.as_str()), now_secs(), self.daily_seconds)
                .await
                .map_err(store_error)?;
            let (report, preview, reservation) = match reserved {
                BrowserReserve::Refused(meter) => (
                    report_without_session(BrowserRun::ReservationRefused { meter }),
                    serde_json::Value::Null,
                    None,
                ),
                BrowserReserve::Reserved { id, .. } => {
                    let session_started = Instant::now();
                    let outcome = self.session(&input).await;
                    let seconds = settled_browser_seconds(session_started.elapsed().as_millis() as u64);
                    store.settle_browser(&id, seconds).await.map_err(store_error)?;
                    let (report, preview) = outcome?;
                    (report, preview, Some((id, seconds)))
                }
            };
            let result = classify_browser(&report.run);
            let shots = self.put_screenshots(&candidate, input.attempt, &report).await?;
            let key = browser_evidence_key(&candidate, input.attempt);
            let object = serde_json::json!({
                "result": result,
                "run": report.run,
                "log": report.log,
                "requests": { "served": report.journal.served, "refused": report.journal.refused },
                "exceptions": report.journal.exceptions,
                "consoleErrors": report.journal.console_errors,
                "screenshots": shots,
                "timings": report.timings,
                "browserVersion": report.browser_version,
                "preview": preview,
                "meter": reservation.as_ref().map(|(id, s)| serde_json::json!({ "reservationId": id, "settledSeconds": s })),
            });
            self.put(&key, serde_json::to_vec(&object).map_err(fatal)?).await?;
            let row = store
                .record_evidence(&NewEvidence {
                    candidate_id: candidate.clone(),
                    check_id: CheckId::Browser,
                    attempt: input.attempt,
                    result,
                    object_key: Some(key),
                    started_at,
                    completed_at: now_ms(),
                })
                .await
                .map_err(store_error)?;
            Ok(row.evidence)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_candidate_has_a_stable_preview_port_in_range() {
        let a = preview_port("cand_abc");
        assert_eq!(a, preview_port("cand_abc"));
        assert!((4000..6000).contains(&a));
        assert_ne!(preview_port("cand_abc"), preview_port("cand_abd"));
        assert_eq!(
            screenshot_key("cand_a", 1, 0),
            "evidence/cand_a/browser-1/screenshot-0.png"
        );
    }
}
