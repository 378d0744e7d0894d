//! Git smart HTTP at `/git/<repo>.git/…`: clone, fetch and push for sandboxes, gated by
//! repository tokens.
//!
//! Sandboxes never touch a bare repository on disk: a writable mount would let them plant hooks
//! or config that host-side git later runs. They speak smart HTTP instead, and this handler
//! checks the repository token (read for upload-pack, write for receive-pack) and then runs
//! `git http-backend` as a CGI program with a cleared environment. Only the smart protocol is
//! served (v0 and v2); the dumb protocol's raw file paths get 404.
//!
//! The request body is streamed into the CGI's stdin and counted: past `max_body` bytes (as sent,
//! so a gzip body counts compressed) the answer is 413 and the child is killed. The response is
//! held until the whole body went in, so a 413 can still be answered; meanwhile the child's early
//! output is drained into memory so it never blocks on a full pipe. After that, stdout streams
//! back as it is produced.
//!
//! Clone and fetch (upload-pack with a plain body) skip the CGI program: `git upload-pack` runs
//! directly, and this handler writes the headers and the v0 service line http-backend would have
//! written around it, byte for byte. Two processes fewer on each of a clone's three requests is
//! most of what serving a clone over HTTP cost over a local one. A gzip body, a wrong content
//! type and every push still go through `git http-backend`, which answers them as it always has.

use crate::repo_token::{self, Scope, TokenError};
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use base64::Engine as _;
use belay_domain::repo::is_valid_repo_name;
use bytes::Bytes;
use futures::StreamExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use thiserror::Error;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

/// Bytes of CGI response headers accepted before the child is considered broken.
const MAX_CGI_HEADER_BYTES: usize = 16 * 1024;
/// Bytes of child output held while the request body is still going in; git answers only after
/// reading its whole request, so this is never reached in practice.
const MAX_EARLY_OUTPUT_BYTES: usize = 8 * 1024 * 1024;
const MAX_STDERR_BYTES: usize = 8 * 1024;
/// Bytes read from the child at a time while streaming its answer: a 50,000-file clone's pack is
/// a few MiB, and 4 KiB reads made a thousand body frames of it.
const STREAM_CHUNK_BYTES: usize = 64 * 1024;

/// The answer of [`GitHttpState::revoked`].
pub type RevokedCheck = std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>>;

/// What the git endpoint needs; the application state provides it.
#[derive(Clone)]
pub struct GitHttpState {
    /// The namespace directory, `<data>/git/<namespace>`, holding `<repo>.git` directories.
    pub root: PathBuf,
    /// The HMAC key of repository tokens.
    pub secret: Vec<u8>,
    /// Whether a (verified) token id was revoked; shared by every API process through the
    /// database. Asked only about tokens whose signature checked out.
    pub revoked: Arc<dyn Fn(String) -> RevokedCheck + Send + Sync>,
    /// Largest request body accepted, in bytes.
    pub max_body: usize,
}

#[derive(Debug, Error)]
pub enum GitHttpError {
    #[error("not a git smart HTTP path")]
    NotSmartHttp,
    #[error("no such repository")]
    NoSuchRepository,
    #[error("a repository token is required (Bearer, or the password of Basic auth)")]
    MissingToken,
    #[error(transparent)]
    Token(#[from] TokenError),
    #[error("the request body is larger than {limit} bytes")]
    BodyTooLarge { limit: usize },
    #[error("the request body could not be read")]
    ClientBody,
    #[error("git http-backend could not run")]
    Spawn(#[source] std::io::Error),
    #[error("git http-backend answered without valid CGI headers")]
    BadCgiHeaders,
}

impl IntoResponse for GitHttpError {
    fn into_response(self) -> Response {
        let status = match &self {
            GitHttpError::NotSmartHttp | GitHttpError::NoSuchRepository => StatusCode::NOT_FOUND,
            GitHttpError::MissingToken => StatusCode::UNAUTHORIZED,
            GitHttpError::Token(e) if e.is_unauthenticated() => StatusCode::UNAUTHORIZED,
            GitHttpError::Token(_) => StatusCode::FORBIDDEN,
            GitHttpError::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            GitHttpError::ClientBody => StatusCode::BAD_REQUEST,
            GitHttpError::Spawn(_) | GitHttpError::BadCgiHeaders => {
                tracing::error!(error = %self, error.source = ?std::error::Error::source(&self), "git http-backend failed");
                return (StatusCode::INTERNAL_SERVER_ERROR, "internal error\n").into_response();
            }
        };
        let mut response = if status == StatusCode::PAYLOAD_TOO_LARGE {
            let body = serde_json::json!({"error": {"code": "body_too_large", "message": self.to_string()}});
            (status, axum::Json(body)).into_response()
        } else {
            (status, format!("{self}\n")).into_response()
        };
        if status == StatusCode::UNAUTHORIZED {
            // Without a challenge, git never sends the credentials of `http://agent:TOKEN@host/`.
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"belay git\""),
            );
        }
        response
    }
}

/// `/git/{repo}.git/{*rest}` for clone, fetch and push.
pub fn git_router(state: GitHttpState) -> Router {
    Router::new()
        .route("/git/{repo}/{*rest}", any(serve))
        .with_state(Arc::new(state))
}

#[derive(Debug, Clone, Copy)]
enum Service {
    UploadPack,
    ReceivePack,
}

impl Service {
    fn scope(self) -> Scope {
        match self {
            Service::UploadPack => Scope::Read,
            Service::ReceivePack => Scope::Write,
        }
    }
}

/// The smart protocol's four requests; anything else (dumb HTTP file paths) is refused.
fn classify(method: &Method, rest: &str, query: &str) -> Option<Service> {
    let service = || query.split('&').find_map(|kv| kv.strip_prefix("service="));
    match (method, rest) {
        (&Method::GET, "info/refs") => match service()? {
            "git-upload-pack" => Some(Service::UploadPack),
            "git-receive-pack" => Some(Service::ReceivePack),
            _ => None,
        },
        (&Method::POST, "git-upload-pack") => Some(Service::UploadPack),
        (&Method::POST, "git-receive-pack") => Some(Service::ReceivePack),
        _ => None,
    }
}

fn token_from(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, rest) = value.split_once(' ')?;
    if scheme.eq_ignore_ascii_case("bearer") {
        return Some(rest.trim().to_owned());
    }
    if scheme.eq_ignore_ascii_case("basic") {
        let decoded = base64::engine::general_purpose::STANDARD.decode(rest.trim()).ok()?;
        let (_user, password) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
        return Some(password.to_owned());
    }
    None
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

#[tracing::instrument(skip_all, fields(repo.name = %repo, git.path = %rest))]
async fn serve(
    State(st): State<Arc<GitHttpState>>,
    Path((repo, rest)): Path<(String, String)>,
    req: Request,
) -> Response {
    match run(&st, &repo, rest.trim_start_matches('/'), req).await {
        Ok(response) => response,
        Err(e) => {
            tracing::debug!(error = %e, "git request refused");
            e.into_response()
        }
    }
}

async fn run(st: &GitHttpState, repo_segment: &str, rest: &str, req: Request) -> Result<Response, GitHttpError> {
    let name = repo_segment
        .strip_suffix(".git")
        .filter(|n| is_valid_repo_name(n))
        .ok_or(GitHttpError::NotSmartHttp)?;
    let query = req.uri().query().unwrap_or_default().to_owned();
    let service = classify(req.method(), rest, &query).ok_or(GitHttpError::NotSmartHttp)?;
    let token = token_from(req.headers()).ok_or(GitHttpError::MissingToken)?;
    // Format and signature first, so only tokens this server issued reach the revocation lookup.
    let authentic = repo_token::authenticate(&st.secret, &token)?;
    let revoked = (st.revoked)(authentic.token_id().to_owned()).await;
    let grant = authentic.authorize(name, service.scope(), now_secs(), revoked)?;
    if !st.root.join(repo_segment).join("HEAD").is_file() {
        return Err(GitHttpError::NoSuchRepository);
    }
    let headers = req.headers();
    let content_length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if content_length.is_some_and(|n| n > st.max_body as u64) {
        // Read what the client is sending (up to a bound) so it sees the 413, not a broken pipe.
        drain(req.into_body().into_data_stream()).await;
        return Err(GitHttpError::BodyTooLarge { limit: st.max_body });
    }

    let header_value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let direct = direct_upload_pack(
        service,
        req.method(),
        header_value(header::CONTENT_TYPE.as_str()),
        header_value("content-encoding"),
        header_value("git-protocol"),
    );
    let mut cmd = Command::new("git");
    match &direct {
        Some(d) => {
            // What http-backend runs for these requests, in the directory it enters.
            cmd.arg("upload-pack")
                .arg(if d.info_refs {
                    "--http-backend-info-refs"
                } else {
                    "--stateless-rpc"
                })
                .arg(".")
                .current_dir(st.root.join(repo_segment));
        }
        None => {
            cmd.arg("http-backend");
        }
    }
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_PROJECT_ROOT", &st.root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("PATH_INFO", format!("/{repo_segment}/{rest}"))
        .env("REQUEST_METHOD", req.method().as_str())
        .env("QUERY_STRING", &query)
        // http-backend refuses receive-pack to an anonymous user; the token id names the pusher.
        .env("REMOTE_USER", &grant.token_id)
        // Objects a sandbox pushes are checked before any ref moves.
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "receive.fsckObjects")
        .env("GIT_CONFIG_VALUE_0", "true")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Without a Content-Length (chunked upload), http-backend reads stdin to its end.
    if let Some(n) = content_length {
        cmd.env("CONTENT_LENGTH", n.to_string());
    }
    for (from, to) in [
        (header::CONTENT_TYPE.as_str(), "CONTENT_TYPE"),
        ("content-encoding", "HTTP_CONTENT_ENCODING"),
        ("git-protocol", "GIT_PROTOCOL"),
    ] {
        if let Some(v) = header_value(from) {
            cmd.env(to, v);
        }
    }
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        // The repository went between the check above and the start (a removed fork), as
        // http-backend answers it.
        std::io::ErrorKind::NotFound if direct.is_some() && !st.root.join(repo_segment).is_dir() => {
            GitHttpError::NoSuchRepository
        }
        _ => GitHttpError::Spawn(e),
    })?;
    let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(GitHttpError::Spawn(std::io::Error::other("child pipes missing")));
    };
    let stderr = tokio::spawn(read_bounded(stderr, MAX_STDERR_BYTES));
    let mut writer = tokio::spawn(feed(req.into_body(), stdin, st.max_body));
    let mut stdout = BufReader::with_capacity(STREAM_CHUNK_BYTES, stdout);

    let (cgi_headers, mut early) = match &direct {
        Some(d) => (Ok((StatusCode::OK, d.headers())), d.preamble()),
        None => (read_cgi_headers(&mut stdout).await, Vec::new()),
    };
    // Hold the answer until the whole body went in, draining output so the child never blocks.
    let mut stdout_open = true;
    let fed = loop {
        let mut chunk = [0u8; 16 * 1024];
        tokio::select! {
            fed = &mut writer => break fed.unwrap_or(Err(GitHttpError::ClientBody)),
            n = stdout.read(&mut chunk), if stdout_open && early.len() < MAX_EARLY_OUTPUT_BYTES => match n {
                Ok(0) | Err(_) => stdout_open = false,
                Ok(n) => early.extend_from_slice(&chunk[..n]),
            },
        }
    };
    if let Err(e) = fed {
        let _ = child.start_kill();
        reap(child, stderr, name.to_owned());
        return Err(e);
    }
    let (status, response_headers) = match cgi_headers {
        Ok(h) => h,
        Err(e) => {
            let _ = child.start_kill();
            reap(child, stderr, name.to_owned());
            return Err(e);
        }
    };
    reap(child, stderr, name.to_owned());

    let early = futures::stream::iter((!early.is_empty()).then(|| Ok::<_, std::io::Error>(Bytes::from(early))));
    let rest = tokio_util::io::ReaderStream::with_capacity(stdout, STREAM_CHUNK_BYTES);
    let mut response = Response::new(Body::from_stream(early.chain(rest)));
    *response.status_mut() = status;
    *response.headers_mut() = response_headers;
    Ok(response)
}

/// An upload-pack request answered by `git upload-pack` itself (see the module documentation).
#[derive(Debug, PartialEq, Eq)]
struct DirectUploadPack {
    /// The ref advertisement of `GET info/refs`; otherwise a `POST git-upload-pack`.
    info_refs: bool,
    /// Whether the client asked for protocol v2, which has no service line.
    v2: bool,
}

/// The media type http-backend accepts for an upload-pack request; anything else gets its 415.
const UPLOAD_PACK_REQUEST: &str = "application/x-git-upload-pack-request";

/// When an upload-pack request can skip http-backend: not a gzip body (http-backend inflates
/// those) and, for a POST, the content type http-backend accepts. `None` for everything else.
fn direct_upload_pack(
    service: Service,
    method: &Method,
    content_type: Option<&str>,
    content_encoding: Option<&str>,
    git_protocol: Option<&str>,
) -> Option<DirectUploadPack> {
    if !matches!(service, Service::UploadPack) || content_encoding.is_some_and(|e| !e.is_empty()) {
        return None;
    }
    let info_refs = *method == Method::GET;
    if !info_refs && content_type != Some(UPLOAD_PACK_REQUEST) {
        return None;
    }
    // As git's server reads `GIT_PROTOCOL`: colon-separated keys, v2 when one is `version=2`.
    let v2 = git_protocol.is_some_and(|p| p.split(':').any(|k| k == "version=2"));
    Some(DirectUploadPack { info_refs, v2 })
}

impl DirectUploadPack {
    /// The headers http-backend writes for this request (no `Status`: 200).
    fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::EXPIRES,
            HeaderValue::from_static("Fri, 01 Jan 1980 00:00:00 GMT"),
        );
        headers.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
        headers.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache, max-age=0, must-revalidate"),
        );
        let content_type = if self.info_refs {
            "application/x-git-upload-pack-advertisement"
        } else {
            "application/x-git-upload-pack-result"
        };
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        headers
    }

    /// What http-backend writes before upload-pack's own output: the service line and a flush
    /// packet of a v0/v1 advertisement.
    fn preamble(&self) -> Vec<u8> {
        if self.info_refs && !self.v2 {
            b"001e# service=git-upload-pack\n0000".to_vec()
        } else {
            Vec::new()
        }
    }
}

/// How much of a body past its limit is read and discarded before the 413 is answered: a client
/// still sending when the answer comes and the connection closes sees a broken pipe instead of
/// the 413 (`git push` reported `curl 55 Send failure`). A push up to this far past the limit
/// sees the 413; one further past may see the connection close instead (it is refused either way).
pub const DRAIN_PAST_LIMIT: usize = 64 * 1024 * 1024;

/// Streams the request body into the child's stdin, at most `limit` bytes. Past the limit the
/// child's stdin is closed and the rest of the body is read and discarded, up to
/// [`DRAIN_PAST_LIMIT`], so that the client has finished sending when the 413 goes out.
async fn feed(body: Body, mut stdin: ChildStdin, limit: usize) -> Result<(), GitHttpError> {
    let mut stream = body.into_data_stream();
    let mut total = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| GitHttpError::ClientBody)?;
        total += chunk.len();
        if total > limit {
            drop(stdin);
            drain(stream).await;
            return Err(GitHttpError::BodyTooLarge { limit });
        }
        if stdin.write_all(&chunk).await.is_err() {
            // The child stopped reading: it has what it wants, or failed and says so on stdout.
            return Ok(());
        }
    }
    Ok(())
}

/// Reads and discards the rest of a body, up to [`DRAIN_PAST_LIMIT`] bytes.
async fn drain(mut stream: axum::body::BodyDataStream) {
    let mut drained = 0usize;
    while drained < DRAIN_PAST_LIMIT {
        match stream.next().await {
            Some(Ok(chunk)) => drained += chunk.len(),
            _ => break,
        }
    }
}

/// Reads CGI headers up to the blank line: `Status: 403 Forbidden` sets the status, the rest
/// become response headers.
async fn read_cgi_headers(
    stdout: &mut BufReader<tokio::process::ChildStdout>,
) -> Result<(StatusCode, HeaderMap), GitHttpError> {
    let mut status = StatusCode::OK;
    let mut headers = HeaderMap::new();
    let mut seen = 0;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = stdout
            .read_until(b'\n', &mut line)
            .await
            .map_err(|_| GitHttpError::BadCgiHeaders)?;
        seen += n;
        if n == 0 || seen > MAX_CGI_HEADER_BYTES {
            return Err(GitHttpError::BadCgiHeaders);
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if text.is_empty() {
            return Ok((status, headers));
        }
        let text = std::str::from_utf8(text).map_err(|_| GitHttpError::BadCgiHeaders)?;
        let (name, value) = text.split_once(':').ok_or(GitHttpError::BadCgiHeaders)?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code = value.split_whitespace().next().and_then(|c| c.parse::<u16>().ok());
            status = code
                .and_then(|c| StatusCode::from_u16(c).ok())
                .ok_or(GitHttpError::BadCgiHeaders)?;
        } else if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.trim().as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.append(name, value);
        }
    }
}

async fn read_bounded(mut from: impl AsyncRead + Unpin, limit: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(n) = from.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        if kept.len() < limit {
            kept.extend_from_slice(&chunk[..n.min(limit - kept.len())]);
        }
    }
    kept
}

/// Waits for the child in the background and logs a failure once, with what it said.
fn reap(mut child: Child, stderr: tokio::task::JoinHandle<Vec<u8>>, repo: String) {
    tokio::spawn(async move {
        let status = child.wait().await;
        let said = stderr.await.unwrap_or_default();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => {
                tracing::warn!(repo, exit = ?s.code(), stderr = %String::from_utf8_lossy(&said), "git http-backend failed")
            }
            Err(e) => tracing::warn!(repo, error = %e, "git http-backend could not be awaited"),
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repo_token::TOKEN_TTL_SECS;
    use belay_git::GitService;
    use std::collections::HashSet;
    use std::net::SocketAddr;
    use std::path::Path as FsPath;
    use std::sync::Mutex;

    const PROJECT: &str = "proj_0a1b2c";
    const SECRET: &[u8] = b"git http test secret";

    struct Server {
        dir: tempfile::TempDir,
        addr: SocketAddr,
        git: GitService,
        revoked: Arc<Mutex<HashSet<String>>>,
    }

    impl Server {
        async fn start(max_body: usize) -> Server {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().join("git/belay");
            let git = GitService::new(&root);
            let revoked: Arc<Mutex<HashSet<String>>> = Arc::default();
            let seen = revoked.clone();
            let state = GitHttpState {
                root,
                secret: SECRET.to_vec(),
                revoked: Arc::new(move |id: String| {
                    let revoked = seen.lock().unwrap().contains(&id);
                    Box::pin(async move { revoked })
                }),
                max_body,
            };
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move { axum::serve(listener, git_router(state)).await.unwrap() });
            Server {
                dir,
                addr,
                git,
                revoked,
            }
        }

        fn token(&self, repo: &str, scope: Scope) -> (String, String) {
            let id = repo_token::new_token_id(&uuid::Uuid::new_v4().simple().to_string());
            let token = repo_token::issue(SECRET, &id, repo, scope, now_secs(), TOKEN_TTL_SECS).unwrap();
            (id, token)
        }

        fn url(&self, repo: &str, token: &str) -> String {
            format!("http://agent:{token}@{}/git/{repo}.git", self.addr)
        }

        fn work(&self, name: &str) -> PathBuf {
            self.dir.path().join(name)
        }

        async fn status(&self, repo: &str, service: &str, token: &str) -> StatusCode {
            let url = format!("http://{}/git/{repo}.git/info/refs?service={service}", self.addr);
            let r = reqwest::Client::new()
                .get(url)
                .basic_auth("agent", Some(token))
                .send()
                .await
                .unwrap();
            StatusCode::from_u16(r.status().as_u16()).unwrap()
        }
    }

    struct Out {
        ok: bool,
        stdout: String,
        stderr: String,
    }

    /// The real git CLI, isolated from the machine's configuration and never prompting.
    async fn git(dir: &FsPath, args: &[&str], env: &[(&str, &str)]) -> Out {
        let out = tokio::process::Command::new("git")
            .current_dir(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_AUTHOR_NAME", "agent")
            .env("GIT_AUTHOR_EMAIL", "agent@sandbox")
            .env("GIT_COMMITTER_NAME", "agent")
            .env("GIT_COMMITTER_EMAIL", "agent@sandbox")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap();
        Out {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    async fn git_ok(dir: &FsPath, args: &[&str]) -> String {
        let out = git(dir, args, &[]).await;
        assert!(out.ok, "git {args:?} failed: {}", out.stderr);
        out.stdout
    }

    /// Clones `repo` into `<tmp>/<into>` and commits one file there.
    async fn clone_and_commit(s: &Server, repo: &str, token: &str, into: &str, file: &str, contents: &[u8]) -> PathBuf {
        git_ok(s.dir.path(), &["clone", "--quiet", &s.url(repo, token), into]).await;
        let work = s.work(into);
        std::fs::write(work.join(file), contents).unwrap();
        git_ok(&work, &["add", file]).await;
        git_ok(&work, &["commit", "--quiet", "-m", &format!("add {file}")]).await;
        work
    }

    /// Bytes no compressor can shrink, so pushes are as large as they look.
    fn noise(len: usize) -> Vec<u8> {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_token_clones_over_protocol_v2() {
        let s = Server::start(64 << 20).await;
        let p = s.git.provision(PROJECT).await.unwrap();
        let (_, token) = s.token(PROJECT, Scope::Read);
        let out = git(
            s.dir.path(),
            &["-c", "protocol.version=2", "clone", &s.url(PROJECT, &token), "c"],
            &[("GIT_TRACE_PACKET", "1")],
        )
        .await;
        assert!(out.ok, "{}", out.stderr);
        assert!(out.stderr.contains("git< version 2"), "the server spoke protocol v2");
        assert_eq!(git_ok(&s.work("c"), &["rev-parse", "HEAD"]).await.trim(), p.commit);
        assert!(s.work("c/.gitignore").is_file());
        git_ok(
            &s.work("c"),
            &["-c", "protocol.version=2", "fetch", "--quiet", "origin"],
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_token_pushes_into_a_fork_with_alternates_and_fsck_stays_clean() {
        let s = Server::start(64 << 20).await;
        s.git.provision(PROJECT).await.unwrap();
        s.git.fork(PROJECT, "ws-1").await.unwrap();
        let (_, token) = s.token("ws-1", Scope::Write);
        let work = clone_and_commit(&s, "ws-1", &token, "w", "a.txt", b"hello\n").await;
        git_ok(&work, &["push", "--quiet", "origin", "HEAD:refs/heads/main"]).await;
        // Past git's 1 MiB post buffer the push goes chunked, without a Content-Length.
        std::fs::write(work.join("big.bin"), noise(3 << 20)).unwrap();
        git_ok(&work, &["add", "big.bin"]).await;
        git_ok(&work, &["commit", "--quiet", "-m", "big"]).await;
        git_ok(&work, &["push", "--quiet", "origin", "HEAD:refs/heads/main"]).await;

        let pushed = git_ok(&work, &["rev-parse", "HEAD"]).await;
        assert_eq!(s.git.head("ws-1").await.unwrap().as_deref(), Some(pushed.trim()));
        let bare = s.git.repo_path("ws-1").unwrap();
        git_ok(&bare, &["fsck", "--strict", "--no-dangling"]).await;
        let alternates = std::fs::read_to_string(bare.join("objects/info/alternates")).unwrap();
        assert_eq!(alternates.trim(), format!("../../{PROJECT}.git/objects"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn expired_revoked_forged_and_other_repository_tokens_are_refused_and_push_nothing() {
        let s = Server::start(64 << 20).await;
        s.git.provision(PROJECT).await.unwrap();
        let before = s.git.fork(PROJECT, "ws-1").await.unwrap().main;
        s.git.fork(PROJECT, "ws-2").await.unwrap();
        let (_, good) = s.token("ws-1", Scope::Write);
        let work = clone_and_commit(&s, "ws-1", &good, "w", "a.txt", b"a\n").await;

        let expired = repo_token::issue(
            SECRET,
            &repo_token::new_token_id("00000000000000000000000000000001"),
            "ws-1",
            Scope::Write,
            now_secs() - 2 * TOKEN_TTL_SECS,
            TOKEN_TTL_SECS,
        )
        .unwrap();
        let (revoked_id, revoked) = s.token("ws-1", Scope::Write);
        s.revoked.lock().unwrap().insert(revoked_id);
        let forged = repo_token::issue(
            b"not the server secret",
            &repo_token::new_token_id("00000000000000000000000000000002"),
            "ws-1",
            Scope::Write,
            now_secs(),
            TOKEN_TTL_SECS,
        )
        .unwrap();
        let (_, other_repo) = s.token("ws-2", Scope::Write);
        let (_, read_only) = s.token("ws-1", Scope::Read);
        let cases = [
            ("expired", expired, StatusCode::UNAUTHORIZED),
            ("revoked", revoked, StatusCode::UNAUTHORIZED),
            ("forged", forged, StatusCode::UNAUTHORIZED),
            ("other repository", other_repo, StatusCode::FORBIDDEN),
            ("read only", read_only, StatusCode::FORBIDDEN),
        ];
        for (what, token, status) in cases {
            assert_eq!(s.status("ws-1", "git-receive-pack", &token).await, status, "{what}");
            let url = s.url("ws-1", &token);
            let out = git(&work, &["push", &url, "HEAD:refs/heads/main"], &[]).await;
            assert!(!out.ok, "a push with a {what} token went through");
            assert_eq!(s.git.head("ws-1").await.unwrap(), Some(before.clone()), "{what}");
        }
        assert_eq!(s.status("ws-1", "git-upload-pack", "").await, StatusCode::UNAUTHORIZED);
        let no_auth = reqwest::get(format!(
            "http://{}/git/ws-1.git/info/refs?service=git-upload-pack",
            s.addr
        ))
        .await
        .unwrap();
        assert_eq!(no_auth.status().as_u16(), 401);
        assert!(no_auth.headers().contains_key("www-authenticate"));
        git_ok(
            &s.git.repo_path("ws-1").unwrap(),
            &["fsck", "--strict", "--no-dangling"],
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_push_past_the_body_limit_gets_413_and_moves_nothing() {
        let s = Server::start(256 * 1024).await;
        s.git.provision(PROJECT).await.unwrap();
        let before = s.git.fork(PROJECT, "ws-1").await.unwrap().main;
        let (_, token) = s.token("ws-1", Scope::Write);
        let work = clone_and_commit(&s, "ws-1", &token, "w", "big.bin", &noise(2 << 20)).await;
        let out = git(&work, &["push", "origin", "HEAD:refs/heads/main"], &[]).await;
        // Exactly the 413: the server reads the rest of the body before answering, so git never
        // sees the connection close under it (`curl 55 Send failure: Broken pipe`).
        assert!(!out.ok);
        assert!(
            out.stderr.contains("HTTP 413") && !out.stderr.contains("curl 55") && !out.stderr.contains("Broken pipe"),
            "{}",
            out.stderr
        );
        assert_eq!(s.git.head("ws-1").await.unwrap(), Some(before));

        // The same with a declared length: refused before git runs at all.
        let url = format!("http://{}/git/ws-1.git/git-receive-pack", s.addr);
        let r = reqwest::Client::new()
            .post(url)
            .basic_auth("agent", Some(&token))
            .body(noise(300 * 1024))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 413);
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "body_too_large");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains(&(256 * 1024).to_string()),
            "the limit is named: {body}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_smart_http_clone_of_fifty_thousand_files_is_complete() {
        let s = Server::start(1 << 20).await;
        s.git.provision(PROJECT).await.unwrap();
        let bare = s.git.repo_path(PROJECT).unwrap();
        let mut script = String::from(
            "commit refs/heads/main\ncommitter t <t@t> 1700000000 +0000\ndata 4\ngrow\nfrom refs/heads/main^0\n",
        );
        for i in 0..50_000 {
            let body = format!("// file {i}\npub fn f{i}() -> usize {{ {i} }}\n");
            script.push_str(&format!(
                "M 100644 inline src/m{}/f{i}.rs\ndata {}\n{body}\n",
                i / 500,
                body.len()
            ));
        }
        let mut child = tokio::process::Command::new("git")
            .current_dir(&bare)
            .args(["fast-import", "--quiet"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(script.as_bytes()).await.unwrap();
        assert!(child.wait().await.unwrap().success());

        let (_, token) = s.token(PROJECT, Scope::Read);
        // A bare clone: the transfer, not a checkout of 50,000 files (`belay bench source` times it).
        git_ok(
            s.dir.path(),
            &["clone", "--bare", "--quiet", &s.url(PROJECT, &token), "over-http.git"],
        )
        .await;
        let main = git_ok(&bare, &["rev-parse", "main"]).await;
        let cloned = s.work("over-http.git");
        assert_eq!(git_ok(&cloned, &["rev-parse", "main"]).await, main);
        let files = git_ok(&cloned, &["ls-tree", "-r", "--name-only", "main"]).await;
        assert_eq!(files.lines().count(), 50_001, "every file and .gitignore");
        git_ok(&cloned, &["fsck", "--strict"]).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn only_the_smart_protocol_of_an_existing_repository_is_served() {
        let s = Server::start(1 << 20).await;
        s.git.provision(PROJECT).await.unwrap();
        let (_, token) = s.token(PROJECT, Scope::Read);
        let client = reqwest::Client::new();
        for path in [
            format!("/git/{PROJECT}.git/HEAD"),
            format!("/git/{PROJECT}.git/info/refs"),
            format!("/git/{PROJECT}.git/objects/info/alternates"),
            format!("/git/{PROJECT}/info/refs?service=git-upload-pack"),
            "/git/..%2F..%2Fetc.git/info/refs?service=git-upload-pack".to_owned(),
        ] {
            let r = client
                .get(format!("http://{}{path}", s.addr))
                .basic_auth("agent", Some(&token))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 404, "{path}");
        }
        let (_, missing) = s.token("cand-404", Scope::Read);
        assert_eq!(
            s.status("cand-404", "git-upload-pack", &missing).await,
            StatusCode::NOT_FOUND
        );
        assert_eq!(s.status(PROJECT, "git-upload-pack", &token).await, StatusCode::OK);
    }

    #[test]
    fn only_plain_upload_pack_requests_skip_http_backend() {
        let request = Some(UPLOAD_PACK_REQUEST);
        let direct = |service, method: &Method, content_type, encoding, protocol| {
            direct_upload_pack(service, method, content_type, encoding, protocol)
        };
        assert_eq!(
            direct(Service::UploadPack, &Method::GET, None, None, Some("version=2")),
            Some(DirectUploadPack {
                info_refs: true,
                v2: true
            })
        );
        assert_eq!(
            direct(Service::UploadPack, &Method::GET, None, None, Some("foo=bar:version=2")),
            Some(DirectUploadPack {
                info_refs: true,
                v2: true
            })
        );
        assert_eq!(
            direct(Service::UploadPack, &Method::GET, None, None, Some("version=1")),
            Some(DirectUploadPack {
                info_refs: true,
                v2: false
            })
        );
        assert_eq!(
            direct(Service::UploadPack, &Method::POST, request, None, None),
            Some(DirectUploadPack {
                info_refs: false,
                v2: false
            })
        );
        // http-backend inflates gzip bodies and answers a wrong content type with its 415.
        assert_eq!(
            direct(Service::UploadPack, &Method::POST, request, Some("gzip"), None),
            None
        );
        assert_eq!(
            direct(Service::UploadPack, &Method::POST, Some("text/plain"), None, None),
            None
        );
        assert_eq!(direct(Service::UploadPack, &Method::POST, None, None, None), None);
        // Pushes always go through http-backend.
        assert_eq!(direct(Service::ReceivePack, &Method::GET, None, None, None), None);
        assert_eq!(
            direct(
                Service::ReceivePack,
                &Method::POST,
                Some("application/x-git-receive-pack-request"),
                None,
                None
            ),
            None
        );
    }

    /// What `git http-backend` answers as a CGI program, split into the headers and the body.
    fn http_backend(
        root: &FsPath,
        path_info: &str,
        method: &str,
        query: &str,
        protocol: &str,
        body: &[u8],
    ) -> (Vec<(String, String)>, Vec<u8>) {
        use std::io::Write as _;
        let mut child = std::process::Command::new("git")
            .arg("http-backend")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_PROJECT_ROOT", root)
            .env("GIT_HTTP_EXPORT_ALL", "1")
            .env("PATH_INFO", path_info)
            .env("REQUEST_METHOD", method)
            .env("QUERY_STRING", query)
            .env("GIT_PROTOCOL", protocol)
            .env("CONTENT_TYPE", UPLOAD_PACK_REQUEST)
            .env("CONTENT_LENGTH", body.len().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(body).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let split = out.stdout.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let headers = String::from_utf8(out.stdout[..split].to_vec())
            .unwrap()
            .split("\r\n")
            .map(|l| {
                let (k, v) = l.split_once(':').unwrap();
                (k.trim().to_ascii_lowercase(), v.trim().to_owned())
            })
            .collect();
        (headers, out.stdout[split + 4..].to_vec())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn upload_pack_answers_byte_for_byte_what_http_backend_answers() {
        let s = Server::start(1 << 20).await;
        s.git.provision(PROJECT).await.unwrap();
        let (_, token) = s.token(PROJECT, Scope::Read);
        let client = reqwest::Client::new();
        let base = format!("http://{}/git/{PROJECT}.git", s.addr);
        let ls_refs = b"0014command=ls-refs\n0000".to_vec();
        for (protocol, post) in [
            ("", false),
            ("version=1", false),
            ("version=2", false),
            ("version=2", true),
        ] {
            let request = if post {
                client
                    .post(format!("{base}/git-upload-pack"))
                    .header(header::CONTENT_TYPE, UPLOAD_PACK_REQUEST)
                    .body(ls_refs.clone())
            } else {
                client.get(format!("{base}/info/refs?service=git-upload-pack"))
            };
            let r = request
                .bearer_auth(&token)
                .header("git-protocol", protocol)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 200);
            let got_headers = r.headers().clone();
            let got = r.bytes().await.unwrap().to_vec();
            let (want_headers, want) = if post {
                http_backend(
                    s.git.root(),
                    &format!("/{PROJECT}.git/git-upload-pack"),
                    "POST",
                    "",
                    protocol,
                    &ls_refs,
                )
            } else {
                let path = format!("/{PROJECT}.git/info/refs");
                http_backend(s.git.root(), &path, "GET", "service=git-upload-pack", protocol, b"")
            };
            assert!(!want.is_empty());
            assert_eq!(got, want, "protocol {protocol:?}, post {post}");
            for (name, value) in &want_headers {
                assert_eq!(
                    got_headers.get(name.as_str()).and_then(|v| v.to_str().ok()),
                    Some(value.as_str()),
                    "header {name}, protocol {protocol:?}, post {post}"
                );
            }
        }
    }
}
