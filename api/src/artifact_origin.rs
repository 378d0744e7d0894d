//! The artifact origin: run builds served as trees from a listener of their own.
//!
//! A reviewer plays what an agent built, so the build's scripts must run; they are code nobody
//! has reviewed yet. They run on an origin that is neither the API's nor the console's (a
//! separate listener, as the Sandboxes' `/git/` one is), reached through a short-lived signed URL
//! (`belay_domain::artifact_url`) that grants reading one run's artifacts and nothing else, and
//! under a policy that keeps them in their frame: an opaque origin (`sandbox allow-scripts`, so no
//! storage and no cookies), network to this origin only, no forms, and framing by the console
//! only. The listener answers nothing but artifact bytes: no `/v1` route, no
//! console page, no account token.
//!
//! Paths: `/r/{run}/{token}/{path…}` (one artifact; relative links resolve under the same token)
//! and `/archive/{run}/{token}` (the whole tree as one `tar.gz`).

use crate::AppState;
use crate::error::ApiError;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use belay_domain::artifact_url::{self, ArtifactUrlError};
use belay_domain::run::Run;
use std::future::Future;
use std::sync::Arc;
use tokio::net::TcpListener;
use tower_http::trace::TraceLayer;

/// Where run builds are served and how their URLs are signed.
#[derive(Clone)]
pub struct ArtifactOrigin {
    /// How browsers reach the listener: `http(s)://host[:port]`, no path.
    pub public_url: String,
    /// The origins allowed to frame a build (the console's), space-separated.
    pub frame_ancestors: String,
    pub secret: Arc<Vec<u8>>,
    /// How long a minted URL lives, in seconds.
    pub ttl_secs: i64,
}

impl ArtifactOrigin {
    /// The policy every answer of the artifact origin carries. `'self'` and the public origin are
    /// both named: a sandboxed document's own origin is opaque, and browsers differ in what
    /// `'self'` then matches.
    fn policy(&self) -> String {
        let o = format!("'self' {}", self.public_url);
        format!(
            "default-src {o}; script-src {o} 'unsafe-inline' 'unsafe-eval' blob:; \
             style-src {o} 'unsafe-inline'; img-src {o} data: blob:; font-src {o} data:; \
             media-src {o} data: blob:; connect-src {o}; worker-src {o} blob:; frame-src {o}; \
             manifest-src 'none'; object-src 'none'; base-uri {o}; form-action {o}; \
             frame-ancestors {}; sandbox allow-scripts allow-pointer-lock",
            self.frame_ancestors
        )
    }

    /// The tree of `run`'s artifacts under `token` (ends in `/`; append an artifact's path).
    pub fn tree_url(&self, run: &str, token: &str) -> String {
        format!("{}/r/{run}/{token}/", self.public_url)
    }

    /// `run`'s whole tree as one archive under `token`.
    pub fn archive_url(&self, run: &str, token: &str) -> String {
        format!("{}/archive/{run}/{token}", self.public_url)
    }
}

/// The media type an artifact is served as, from its file name; anything unknown is bytes (and,
/// with `nosniff`, never run as a script or shown as a page).
pub fn media_type(path: &str) -> &'static str {
    let ext = path
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "txt" | "log" | "md" => "text/plain; charset=utf-8",
        "json" => "application/json",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "ico" => "image/x-icon",
        "wasm" => "application/wasm",
        "woff2" => "font/woff2",
        "mp3" => "audio/mpeg",
        "ogg" => "audio/ogg",
        "wav" => "audio/wav",
        _ => "application/octet-stream",
    }
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// The run a presented token grants, loaded; 403 for a token that does not grant it.
async fn granted_run(s: &AppState, origin: &ArtifactOrigin, run: &str, token: &str) -> Result<Run, ApiError> {
    let grant = artifact_url::verify(&origin.secret, token, run, now_secs()).map_err(|e| {
        let code = match e {
            ArtifactUrlError::Expired => "artifact_url_expired",
            _ => "artifact_url_invalid",
        };
        ApiError::new(StatusCode::FORBIDDEN, code, e.to_string())
    })?;
    s.store
        .get_run(&grant.run)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("run {run} not found")))
}

/// Reads one object of the store; a missing one is 404, an unreachable store 503.
pub async fn read_object(
    objects: &dyn object_store::ObjectStore,
    key: &str,
    what: impl FnOnce() -> String,
) -> Result<bytes::Bytes, ApiError> {
    let key = object_store::path::Path::from(key);
    match objects.get(&key).await {
        Ok(got) => got.bytes().await,
        Err(e) => Err(e),
    }
    .map_err(|e| match e {
        object_store::Error::NotFound { .. } => ApiError::not_found(format!("{} is not in the object store", what())),
        e => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "objects_unavailable", e.to_string()),
    })
}

async fn file(
    State((s, origin)): State<(AppState, ArtifactOrigin)>,
    Path((run, token, path)): Path<(String, String, String)>,
) -> Result<Response, ApiError> {
    let found = granted_run(&s, &origin, &run, &token).await?;
    // The tree's root is its page: `index.html` when the run kept one.
    let path = if path.is_empty() { "index.html" } else { path.as_str() };
    let artifact = found
        .artifacts
        .iter()
        .find(|a| a.path == path)
        .ok_or_else(|| ApiError::not_found(format!("run {run} has no artifact at path {path:?}")))?;
    let bytes = read_object(s.objects.as_ref(), &artifact.key, || {
        format!("run {run}'s artifact {path:?}")
    })
    .await?;
    Ok((
        [
            (header::CONTENT_TYPE, media_type(path)),
            // The frame's own fetches come from an opaque origin: they are cross-origin. Anyone
            // who can read this already holds the token in the URL.
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
        ],
        bytes,
    )
        .into_response())
}

async fn root(
    state: State<(AppState, ArtifactOrigin)>,
    Path((run, token)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    file(state, Path((run, token, String::new()))).await
}

/// The largest tree served as one archive (bytes, before compression); past it the answer is
/// 413 naming the limit. The archive is built in memory.
pub const ARCHIVE_LIMIT: u64 = 256 * 1024 * 1024;

async fn archive(
    State((s, origin)): State<(AppState, ArtifactOrigin)>,
    Path((run, token)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let found = granted_run(&s, &origin, &run, &token).await?;
    let total: u64 = found.artifacts.iter().map(|a| a.size).sum();
    if total > ARCHIVE_LIMIT {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "archive_too_large",
            format!(
                "run {run}'s artifacts are {total} bytes, over the archive limit of {ARCHIVE_LIMIT} bytes; fetch them one by one"
            ),
        ));
    }
    let mut files = Vec::with_capacity(found.artifacts.len());
    for a in &found.artifacts {
        let bytes = read_object(s.objects.as_ref(), &a.key, || {
            format!("run {run}'s artifact {:?}", a.path)
        })
        .await?;
        files.push((a.path.clone(), bytes));
    }
    let prefix = run.clone();
    let gz = tokio::task::spawn_blocking(move || tar_gz(&prefix, &files))
        .await
        .map_err(|e| ApiError::internal(&e))?
        .map_err(|e| ApiError::internal(&e))?;
    let disposition = format!("attachment; filename=\"{run}.tar.gz\"");
    Ok((
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("application/gzip")),
            (
                header::CONTENT_DISPOSITION,
                HeaderValue::from_str(&disposition).map_err(|e| ApiError::internal(&e))?,
            ),
        ],
        gz,
    )
        .into_response())
}

/// The files as one gzip-compressed tar, each under `prefix/` (so unpacking makes one folder).
fn tar_gz(prefix: &str, files: &[(String, bytes::Bytes)]) -> std::io::Result<Vec<u8>> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    for (path, bytes) in files {
        let mut head = tar::Header::new_gnu();
        head.set_size(bytes.len() as u64);
        head.set_mode(0o644);
        head.set_mtime(0);
        // `append_data` refuses absolute paths and `..`: an artifact path cannot escape the folder.
        tar.append_data(&mut head, format!("{prefix}/{path}"), bytes.as_ref())?;
    }
    tar.into_inner()?.finish()
}

/// Every answer of the artifact origin, errors too, carries its policy: what a build may do.
async fn policed(
    State(policy): State<HeaderValue>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let mut r = next.run(req).await;
    let h = r.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, policy);
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-cache"));
    r
}

/// What the artifact listener serves: artifact trees and archives, nothing else (every other
/// path is 404 in the error schema). `None` when `state` has no artifact origin.
pub fn artifact_router(state: AppState) -> Option<Router> {
    let origin = state.artifacts.clone()?;
    let policy = HeaderValue::from_str(&origin.policy()).ok()?;
    Some(
        Router::new()
            .route("/r/{run}/{token}/", get(root))
            .route("/r/{run}/{token}/{*path}", get(file))
            .route("/archive/{run}/{token}", get(archive))
            .fallback(|| async { ApiError::not_found("only run artifacts are served on this origin") })
            .method_not_allowed_fallback(|| async {
                ApiError::new(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "method_not_allowed",
                    "the artifact origin only answers GET",
                )
            })
            .with_state((state, origin))
            .layer(axum::middleware::from_fn_with_state(policy, policed))
            .layer(TraceLayer::new_for_http()),
    )
}

/// Serves [`artifact_router`] on `listener` until `shutdown` resolves.
pub async fn serve_artifacts(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let Some(router) = artifact_router(state) else {
        return Err(std::io::Error::other(
            "the artifact listener needs an artifact origin (its URL, secret and lifetime)",
        ));
    };
    axum::serve(crate::without_delay(listener), router)
        .with_graceful_shutdown(shutdown)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_and_assets_get_media_types_a_browser_runs() {
        assert_eq!(media_type("js/game.js"), "text/javascript; charset=utf-8");
        assert_eq!(media_type("assets/sprite.PNG"), "image/png");
        assert_eq!(media_type("index.html"), "text/html; charset=utf-8");
        assert_eq!(media_type("Makefile"), "application/octet-stream");
    }

    #[test]
    fn an_archive_holds_every_file_under_the_run_folder() {
        let gz = tar_gz(
            "run_1",
            &[
                ("index.html".into(), bytes::Bytes::from_static(b"<p>hi</p>")),
                ("js/game.js".into(), bytes::Bytes::from_static(b"go()")),
            ],
        )
        .unwrap();
        let mut a = tar::Archive::new(flate2::read::GzDecoder::new(&gz[..]));
        let names: Vec<String> = a
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert_eq!(names, ["run_1/index.html", "run_1/js/game.js"]);
        assert!(tar_gz("run_1", &[("../x".into(), bytes::Bytes::new())]).is_err());
    }

    #[test]
    fn the_policy_keeps_a_build_on_its_origin_and_in_the_consoles_frame() {
        let o = ArtifactOrigin {
            public_url: "http://127.0.0.1:8081".into(),
            frame_ancestors: "http://127.0.0.1:8080".into(),
            secret: Arc::new(b"s".to_vec()),
            ttl_secs: 900,
        };
        let p = o.policy();
        assert!(p.contains("connect-src 'self' http://127.0.0.1:8081;"), "{p}");
        assert!(p.contains("form-action 'self' http://127.0.0.1:8081;"), "{p}");
        assert!(p.contains("frame-ancestors http://127.0.0.1:8080;"), "{p}");
        assert!(p.ends_with("sandbox allow-scripts allow-pointer-lock"), "{p}");
        for flag in [
            "allow-same-origin",
            "allow-top-navigation",
            "allow-popups",
            "allow-forms",
        ] {
            assert!(!p.contains(flag), "{p}");
        }
    }
}
