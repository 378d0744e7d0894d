//! The interceptor: every paused request gets exactly one answer — fulfilled from the upstream,
//! or failed (blocked when it is not for the preview host, refused when the redirect rules or
//! the upstream say no). Each request is handled on its own task so assets load in parallel.

use crate::PREVIEW_HOST;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use belay_domain::browser::{RedirectStep, redirect_step, serves_spa_index};
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::fetch::{
    EventRequestPaused, FailRequestParams, FulfillRequestParams, HeaderEntry,
};
use chromiumoxide::cdp::browser_protocol::network::ErrorReason;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use url::Url;

/// Request headers never passed on (hop-by-hop, and what the fetch sets itself).
const REQUEST_DROPPED: [&str; 10] = [
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "te",
    "trailer",
    "content-length",
    "accept-encoding",
];
/// Response headers never passed back (Chromium works the length out from the body).
const RESPONSE_DROPPED: [&str; 7] = [
    "connection",
    "keep-alive",
    "transfer-encoding",
    "upgrade",
    "trailer",
    "content-length",
    "content-encoding",
];

/// The app's port as the interceptor reaches it (through the Sandbox).
#[derive(Debug, Clone)]
pub struct Upstream {
    base: Url,
    client: reqwest::Client,
    /// The app's `public/index.html` when it declares the single-page-application convention:
    /// what a direct load of a route the app answers 404 is served.
    spa_index: Option<Arc<Vec<u8>>>,
}

impl Upstream {
    /// `base`: `http://<address>:<port>` of the app.
    pub fn new(base: &str) -> Result<Self, String> {
        Self::with_roots(base, &[])
    }

    /// `base`, its HTTPS certificates checked against the platform's roots and `extra_roots` (DER).
    pub fn with_roots(base: &str, extra_roots: &[Vec<u8>]) -> Result<Self, String> {
        let base = Url::parse(base).map_err(|e| format!("upstream {base}: {e}"))?;
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(Duration::from_secs(15));
        for der in extra_roots {
            builder = builder.add_root_certificate(reqwest::Certificate::from_der(der).map_err(|e| e.to_string())?);
        }
        let client = builder.build().map_err(|e| e.to_string())?;
        Ok(Self {
            base,
            client,
            spa_index: None,
        })
    }

    /// The app declares the single-page-application convention: `index` (its
    /// `public/index.html`) answers a direct load of a route the app answers 404.
    pub fn serving_spa_index(mut self, index: Vec<u8>) -> Self {
        self.spa_index = Some(Arc::new(index));
        self
    }

    /// The preview URL of `path` (with its query).
    pub fn preview_url(path: &str) -> String {
        format!("http://{PREVIEW_HOST}{path}")
    }

    fn target(&self, url: &Url) -> String {
        let mut t = self.base.clone();
        t.set_path(url.path());
        t.set_query(url.query());
        t.to_string()
    }

    /// One plain request to the upstream (no redirects followed): status, headers, body.
    pub async fn fetch_once(
        &self,
        method: &str,
        url: &Url,
        headers: &[(String, String)],
        body: Option<Vec<u8>>,
    ) -> Result<(u16, Vec<(String, String)>, Vec<u8>), String> {
        let method = reqwest::Method::from_bytes(method.as_bytes()).map_err(|e| e.to_string())?;
        let mut rb = self.client.request(method, self.target(url));
        for (k, v) in headers {
            let lk = k.to_ascii_lowercase();
            if REQUEST_DROPPED.contains(&lk.as_str()) || (body.is_none() && lk == "content-type") {
                continue;
            }
            rb = rb.header(k.as_str(), v.as_str());
        }
        rb = rb.header("host", PREVIEW_HOST);
        if let Some(b) = body {
            rb = rb.body(b);
        }
        let resp = rb.send().await.map_err(|e| format!("the app did not answer: {e}"))?;
        let status = resp.status().as_u16();
        let headers = resp
            .headers()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect();
        let body = resp.bytes().await.map_err(|e| format!("the app's body: {e}"))?.to_vec();
        Ok((status, headers, body))
    }
}

/// Whether `url` is on the preview host (plain http, default port).
pub fn is_preview(url: &Url) -> bool {
    url.scheme() == "http" && url.host_str() == Some(PREVIEW_HOST) && url.port_or_known_default() == Some(80)
}

fn path_and_query(url: &Url) -> String {
    match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    }
}

/// A request answered from the upstream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Served {
    pub method: String,
    /// Path and query as the page asked.
    pub path: String,
    /// Where the redirects ended.
    pub final_path: String,
    pub resource_type: String,
    pub status: u16,
    pub hops: u32,
    pub bytes: usize,
    pub upstream_ms: f64,
    pub total_ms: f64,
    /// The app answered 404 and the browser was served `public/index.html` (the
    /// single-page-application convention).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub spa_index: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusedKind {
    /// Not for the preview host: failed as blocked by the client.
    Blocked,
    /// A redirect past 5 hops or off the preview host.
    Redirect,
    /// The upstream did not answer.
    Upstream,
}

/// A request failed instead of answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Refused {
    pub kind: RefusedKind,
    pub method: String,
    pub url: String,
    pub resource_type: String,
    pub reason: String,
    pub total_ms: f64,
}

/// What the page did, as the interceptor and the listeners saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Journal {
    pub served: Vec<Served>,
    pub refused: Vec<Refused>,
    /// Uncaught page script errors.
    pub exceptions: Vec<String>,
    /// Console and browser log entries of level error.
    pub console_errors: Vec<String>,
}

pub(crate) type SharedJournal = Arc<Mutex<Journal>>;

struct Fetched {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    final_url: Url,
    hops: u32,
    upstream_ms: f64,
}

/// Follows the redirect rules; `Err((kind, why))` when the request must fail.
async fn fetch_following(
    up: &Upstream,
    method: &str,
    mut url: Url,
    headers: &[(String, String)],
    mut body: Option<Vec<u8>>,
) -> Result<Fetched, (RefusedKind, String)> {
    let mut method = method.to_owned();
    let mut hops = 0u32;
    let mut upstream_ms = 0.0;
    loop {
        let t = Instant::now();
        let (status, resp_headers, resp_body) = up
            .fetch_once(&method, &url, headers, body.clone())
            .await
            .map_err(|e| (RefusedKind::Upstream, e))?;
        upstream_ms += t.elapsed().as_secs_f64() * 1000.0;
        let location = resp_headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("location"))
            .and_then(|(_, v)| url.join(v).ok());
        match redirect_step(status, &method, hops, location.as_ref().map(is_preview)) {
            RedirectStep::Final => {
                return Ok(Fetched {
                    status,
                    headers: resp_headers,
                    body: resp_body,
                    final_url: url,
                    hops,
                    upstream_ms,
                });
            }
            RedirectStep::TooManyHops => {
                return Err((
                    RefusedKind::Redirect,
                    format!(
                        "more than {} redirects (the last from {})",
                        belay_domain::browser::MAX_REDIRECT_HOPS,
                        path_and_query(&url)
                    ),
                ));
            }
            RedirectStep::LeavesPreviewHost => {
                let to = location.map(|l| l.to_string()).unwrap_or_default();
                return Err((
                    RefusedKind::Redirect,
                    format!("{} redirects off the preview host to {to}", path_and_query(&url)),
                ));
            }
            RedirectStep::Follow { method: m, keep_body } => {
                method = m.to_owned();
                if !keep_body {
                    body = None;
                }
                url = location.expect("a followed redirect has a target");
                hops += 1;
            }
        }
    }
}

fn headers_of(ev: &EventRequestPaused) -> Vec<(String, String)> {
    ev.request
        .headers
        .inner()
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect()
}

fn body_of(ev: &EventRequestPaused) -> Option<Vec<u8>> {
    ev.request.post_data_entries.as_ref().map(|entries| {
        entries
            .iter()
            .filter_map(|e| e.bytes.as_ref())
            .flat_map(|b| B64.decode(AsRef::<str>::as_ref(b)).unwrap_or_default())
            .collect()
    })
}

async fn fail(page: &Page, ev: &EventRequestPaused, reason: ErrorReason) {
    let _ = page
        .execute(FailRequestParams::new(ev.request_id.clone(), reason))
        .await;
}

async fn handle(page: &Page, up: &Upstream, j: &SharedJournal, ev: &EventRequestPaused) {
    let started = Instant::now();
    let rtype = ev.resource_type.as_ref().to_string();
    let refuse = |kind: RefusedKind, reason: String| {
        j.lock().expect("journal lock").refused.push(Refused {
            kind,
            method: ev.request.method.clone(),
            url: ev.request.url.clone(),
            resource_type: rtype.clone(),
            reason,
            total_ms: started.elapsed().as_secs_f64() * 1000.0,
        });
    };
    let url = match Url::parse(&ev.request.url) {
        Ok(u) if is_preview(&u) => u,
        Ok(_) | Err(_) => {
            refuse(RefusedKind::Blocked, "not the preview host".into());
            fail(page, ev, ErrorReason::BlockedByClient).await;
            return;
        }
    };
    let fetched = fetch_following(up, &ev.request.method, url.clone(), &headers_of(ev), body_of(ev)).await;
    let mut f = match fetched {
        Ok(f) => f,
        Err((kind, why)) => {
            refuse(kind, why);
            fail(page, ev, ErrorReason::Failed).await;
            return;
        }
    };
    let spa_index = up.spa_index.as_ref().filter(|_| {
        serves_spa_index(
            true,
            rtype == "Document",
            &ev.request.method,
            f.final_url.path(),
            f.status,
        )
    });
    if let Some(index) = spa_index {
        f.status = 200;
        f.headers = vec![("content-type".into(), "text/html; charset=utf-8".into())];
        f.body = index.as_ref().clone();
    }
    let headers: Vec<HeaderEntry> = f
        .headers
        .iter()
        .filter(|(k, _)| !RESPONSE_DROPPED.contains(&k.to_ascii_lowercase().as_str()))
        .map(|(k, v)| HeaderEntry::new(k.clone(), v.clone()))
        .collect();
    let params = FulfillRequestParams::builder()
        .request_id(ev.request_id.clone())
        .response_code(f.status as i64)
        .response_headers(headers)
        .body(B64.encode(&f.body))
        .build();
    let answered = match params {
        Ok(p) => page.execute(p).await.map(drop).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = answered {
        refuse(RefusedKind::Upstream, format!("the browser refused the response: {e}"));
        fail(page, ev, ErrorReason::Failed).await;
        return;
    }
    j.lock().expect("journal lock").served.push(Served {
        method: ev.request.method.clone(),
        path: path_and_query(&url),
        final_path: path_and_query(&f.final_url),
        resource_type: rtype,
        status: f.status,
        hops: f.hops,
        bytes: f.body.len(),
        upstream_ms: f.upstream_ms,
        total_ms: started.elapsed().as_secs_f64() * 1000.0,
        spa_index: spa_index.is_some(),
    });
}

/// Starts answering the page's paused requests; register it before the first navigation.
pub(crate) async fn start(
    page: &Page,
    up: Arc<Upstream>,
    j: SharedJournal,
) -> Result<tokio::task::JoinHandle<()>, String> {
    let mut events = page
        .event_listener::<EventRequestPaused>()
        .await
        .map_err(|e| e.to_string())?;
    let page = page.clone();
    Ok(tokio::spawn(async move {
        while let Some(ev) = events.next().await {
            let (page, up, j) = (page.clone(), up.clone(), j.clone());
            tokio::spawn(async move { handle(&page, &up, &j, &ev).await });
        }
    }))
}
