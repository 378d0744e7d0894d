//! The browser session against real Chromium and the real sample app (`bun src/server.ts` on
//! loopback), one variant of the app per failure class, with a canary server that must never be
//! reached: every request is answered from the app or blocked.

use belay_browser::{BrowserConfig, RefusedKind, SessionReport, Upstream, run_session};
use belay_domain::browser::{BrowserRun, classify_browser};
use belay_domain::evidence::{Coverage, EvidenceStatus};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn sample_app() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../cli/tests/fixtures/sample-app")
}

use belay_testkit::{bun, free_port, wait_until};

/// PATH with bun's directory first, for `bun run` scripts that call `bun`.
fn path_with_bun() -> String {
    belay_testkit::path_with(bun().parent().unwrap_or(Path::new("")))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let target = to.join(p.file_name().unwrap());
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "node_modules") {
                continue;
            }
            copy_dir(&p, &target);
        } else {
            std::fs::copy(&p, &target).unwrap();
        }
    }
}

/// A canary HTTP server on loopback that logs every connection it gets.
struct Canary {
    port: u16,
    hits: Arc<Mutex<Vec<String>>>,
}

impl Canary {
    fn start() -> Canary {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(Mutex::new(vec![]));
        let h = hits.clone();
        std::thread::spawn(move || {
            use std::io::{Read, Write};
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { continue };
                let mut buf = [0u8; 2048];
                let n = s.read(&mut buf).unwrap_or(0);
                h.lock().unwrap().push(
                    String::from_utf8_lossy(&buf[..n])
                        .lines()
                        .next()
                        .unwrap_or_default()
                        .to_owned(),
                );
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
            }
        });
        Canary { port, hits }
    }

    fn hits(&self) -> Vec<String> {
        self.hits.lock().unwrap().clone()
    }
}

/// The sample app with `files` written over it, built and served on a free loopback port.
struct App {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl App {
    async fn start(files: &[(&str, String)], edits: &[(&str, &str, &str)]) -> App {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(&sample_app(), dir.path());
        for (path, content) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, content).unwrap();
        }
        for (path, old, new) in edits {
            let p = dir.path().join(path);
            let text = std::fs::read_to_string(&p).unwrap();
            assert!(text.contains(old), "{path} has no {old:?}");
            std::fs::write(&p, text.replacen(old, new, 1)).unwrap();
        }
        let build = Command::new(bun())
            .args(["run", "build"])
            .env("PATH", path_with_bun())
            .current_dir(dir.path())
            .output()
            .expect("bun: set BELAY_BUN or install it with scripts/setup.sh");
        assert!(build.status.success(), "{}", String::from_utf8_lossy(&build.stderr));
        let port = free_port();
        let child = Command::new(bun())
            .args(["src/server.ts"])
            .env("PORT", port.to_string())
            .env("HOST", "127.0.0.1")
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_until("the sample app to listen", Duration::from_secs(20), async || {
            std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())
        })
        .await;
        App { child, port, _dir: dir }
    }

    async fn check(&self, config: &BrowserConfig) -> SessionReport {
        let up = Upstream::new(&format!("http://127.0.0.1:{}", self.port)).unwrap();
        run_session(config, up).await
    }

    /// The check of an app that declares the single-page-application convention: its
    /// `public/index.html` answers a direct load of a route it answers 404.
    async fn check_as_spa(&self, config: &BrowserConfig) -> SessionReport {
        let index = std::fs::read(self._dir.path().join("public/index.html")).unwrap();
        let up = Upstream::new(&format!("http://127.0.0.1:{}", self.port))
            .unwrap()
            .serving_spa_index(index);
        run_session(config, up).await
    }
}

fn config() -> BrowserConfig {
    BrowserConfig::from_lookup(belay_testkit::var)
}

fn class(r: &SessionReport) -> (EvidenceStatus, Coverage, String) {
    let c = classify_browser(&r.run);
    (c.status, c.coverage, c.summary)
}

/// The session passed every step (or the assertion shows its log and journal).
fn assert_passes(r: &SessionReport) {
    let (status, coverage, summary) = class(r);
    assert_eq!(
        (status, coverage),
        (EvidenceStatus::Pass, Coverage::CheckedSupported),
        "{summary}\n{:#?}\n{:#?}",
        r.log,
        r.journal
    );
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title><link rel=\"stylesheet\" href=\"/style.css\"></head>\n<body>{body}</body></html>\n"
    )
}

/// The home page with links to the UI Change's pages.
fn home(extra: &str) -> (&'static str, String) {
    (
        "public/index.html",
        page(
            "Todos",
            &format!(
                "<h1>Todos</h1><nav><a href=\"/about.html\">About</a> <a href=\"/new.html\">New todo</a> <a href=\"/api/todos\">API</a> <a href=\"https://example.com/\">Elsewhere</a></nav><ul id=\"todos\"></ul>{extra}<script type=\"module\" src=\"/assets/main.js\"></script>"
            ),
        ),
    )
}

fn about() -> (&'static str, String) {
    (
        "public/about.html",
        page("About", "<h1>About</h1><p>A small todo app.</p><a href=\"/\">Home</a>"),
    )
}

/// A form that POSTs every kind of control to the API through a 307.
fn new_todo() -> (&'static str, String) {
    (
        "public/new.html",
        page(
            "New todo",
            "<h1>New todo</h1><form method=\"post\" action=\"/form/todo\"><input type=\"number\" name=\"qty\"><input type=\"email\" name=\"email\"><input type=\"date\" name=\"day\"><input type=\"url\" name=\"site\"><input type=\"text\" name=\"title\"><input type=\"checkbox\" name=\"agree\" value=\"yes\"><select name=\"plan\"><option>free</option><option>pro</option></select><textarea name=\"note\"></textarea><button>Add</button></form>",
        ),
    )
}

/// `POST /form/todo` answers 307 to `/form/saved`, which records the body and 303s to a page.
const FORM_ROUTES: &str = r#"  },
  { method: "POST", path: "/form/todo", handler: () => new Response(null, { status: 307, headers: { location: "/form/saved" } }) },
  {
    method: "POST",
    path: "/form/saved",
    handler: async (request, _p, store) => {
      const body = await request.text();
      store.add(body);
      return new Response(null, { status: 303, headers: { location: "/saved.html" } });
    },
  },
];"#;

fn saved() -> (&'static str, String) {
    (
        "public/saved.html",
        page("Saved", "<h1>Saved</h1><a href=\"/\">Back</a>"),
    )
}

fn ui_change() -> Vec<(&'static str, String)> {
    vec![home(""), about(), new_todo(), saved()]
}

fn png_size(png: &[u8]) -> (u32, u32) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG signature");
    assert_eq!(&png[12..16], b"IHDR");
    let w = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(png[20..24].try_into().unwrap());
    (w, h)
}

fn gone(pid: u32) -> bool {
    // A zombie is gone for our purpose (its reaper is init); anything else still runs.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z')),
    }
}

fn group_gone(pgid: u32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return true;
    };
    for e in dir.flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let rest = stat.rsplit(')').next().unwrap_or_default();
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // fields: state ppid pgrp ...
        if fields.len() > 2 && fields[2] == pgid.to_string() && fields[0] != "Z" {
            return false;
        }
    }
    true
}

async fn wait_gone(pid: u32) {
    wait_until(
        &format!("chromium {pid} and its group to go with the session"),
        Duration::from_secs(5),
        async || match (gone(pid), group_gone(pid)) {
            (true, true) => Ok(()),
            left => Err(format!("(chromium gone, group gone): {left:?}")),
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ui_change_passes_the_whole_flow_and_nothing_reaches_the_canary() {
    let canary = Canary::start();
    let c = canary.port;
    let leaks = format!(
        "<img src=\"http://127.0.0.1:{c}/tracker.png\" alt=\"\"><img src=\"http://example.com/x.png\" alt=\"\"><script>try {{ new WebSocket('ws://127.0.0.1:{c}/ws'); }} catch (e) {{}} new Worker('/leak-worker.js'); fetch('http://127.0.0.1:{c}/xhr').catch(() => {{}});</script>"
    );
    let mut files = ui_change();
    files[0] = home(&leaks);
    files.push((
        "public/leak-worker.js",
        format!("fetch('http://127.0.0.1:{c}/from-worker').catch(() => {{}});\n"),
    ));
    let app = App::start(&files, &[("src/routes.ts", "  },\n];", FORM_ROUTES)]).await;
    let r = app.check(&config()).await;
    assert_passes(&r);
    assert!(
        r.browser_version.as_deref().is_some_and(|v| v.contains("Chrome/")),
        "{:?}",
        r.browser_version
    );

    // Every page was opened by a click and by a direct load; the API link and the other origin
    // were not crawled.
    let docs: Vec<&str> = r
        .journal
        .served
        .iter()
        .filter(|s| s.resource_type == "Document")
        .map(|s| s.path.as_str())
        .collect();
    for p in ["/about.html", "/new.html"] {
        assert!(docs.iter().filter(|d| **d == p).count() >= 2, "{p}: {docs:?}");
        assert!(
            r.log.iter().any(|l| l.contains(&format!("clicked the link to {p}"))),
            "{:#?}",
            r.log
        );
    }
    assert!(!docs.contains(&"/api/todos"), "{docs:?}");
    // The form went through the 307 with its body and the sample values, then the 303 as GET.
    let posted = r
        .journal
        .served
        .iter()
        .find(|s| s.method == "POST" && s.path == "/form/todo")
        .expect("the form was submitted");
    assert_eq!(
        (posted.status, posted.hops, posted.final_path.as_str()),
        (200, 2, "/saved.html")
    );
    let todos = reqwest::get(format!("http://127.0.0.1:{}/api/todos", app.port))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        todos.contains("qty=12&email=person%40example.com&day=2026-01-15&site=https%3A%2F%2Fexample.com&title=Sample+1&agree=yes&plan=pro&note=Sample+2"),
        "{todos}"
    );
    // fetch('/api/health') from the page.
    assert!(
        r.journal
            .served
            .iter()
            .any(|s| s.path == "/api/health" && s.status == 200)
    );

    // The outside requests were blocked, and the canary heard nothing (WebSocket and worker too).
    let blocked: Vec<&str> = r
        .journal
        .refused
        .iter()
        .filter(|x| x.kind == RefusedKind::Blocked)
        .map(|x| x.url.as_str())
        .collect();
    for u in [
        format!("http://127.0.0.1:{c}/tracker.png"),
        "http://example.com/x.png".to_owned(),
        format!("http://127.0.0.1:{c}/xhr"),
        format!("http://127.0.0.1:{c}/from-worker"),
    ] {
        assert!(blocked.contains(&u.as_str()), "{u} not blocked: {blocked:?}");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(canary.hits(), Vec::<String>::new(), "the canary was reached");

    // Two screenshots, valid PNGs, with their hashes.
    let names: Vec<&str> = r.screenshots.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["home", "final"]);
    for s in &r.screenshots {
        let (w, h) = png_size(&s.png);
        assert!(w >= 800 && h >= 400, "{w}x{h}");
        use sha2::Digest;
        assert_eq!(s.sha256, hex::encode(sha2::Sha256::digest(&s.png)));
    }
    let t = &r.timings;
    assert!(
        t.wall_ms > 0.0 && t.upstream_ms > 0.0 && t.flow_ms <= t.wall_ms,
        "{t:?}"
    );
    wait_gone(r.chromium_pid.unwrap()).await;
}

/// Runs the sample app with `files` and `edits` and expects the flow to fail, naming `needle`.
async fn fails(files: Vec<(&'static str, String)>, edits: &[(&str, &str, &str)], needle: &str) -> SessionReport {
    let app = App::start(&files, edits).await;
    let r = app.check(&config()).await;
    let (status, coverage, summary) = class(&r);
    assert_eq!(
        (status, coverage),
        (EvidenceStatus::Fail, Coverage::CheckedSupported),
        "{summary}\n{:#?}\n{:#?}",
        r.log,
        r.journal
    );
    assert!(summary.contains(needle), "{summary:?} should name {needle:?}");
    wait_gone(r.chromium_pid.unwrap()).await;
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_throws_fails() {
    let mut files = ui_change();
    files[1] = (
        "public/about.html",
        page(
            "About",
            "<h1>About</h1><script>document.getElementById('nope').explode();</script>",
        ),
    );
    fails(
        files,
        &[("src/routes.ts", "  },\n];", FORM_ROUTES)],
        "uncaught page script error: TypeError",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_link_fails() {
    let mut files = ui_change();
    files[1] = (
        "public/about.html",
        page("About", "<h1>About</h1><a href=\"/team.html\">Team</a>"),
    );
    fails(files, &[], "/team.html answered 404").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_500_from_a_form_submit_fails() {
    let files = ui_change();
    fails(
        files,
        &[(
            "src/routes.ts",
            "  },\n];",
            "  },\n  { method: \"POST\", path: \"/form/todo\", handler: () => new Response(\"boom\", { status: 500 }) },\n];",
        )],
        "POST /form/todo (Document) answered 500",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asset_404_fails() {
    let mut files = ui_change();
    files[1] = (
        "public/about.html",
        page("About", "<h1>About</h1><img src=\"/logo.png\" alt=\"logo\">"),
    );
    fails(files, &[], "GET /logo.png (Image) answered 404").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_without_visible_text_fails() {
    let files = vec![(
        "public/index.html",
        page(
            "Todos",
            "<div style=\"display:none\">hidden</div><script type=\"module\" src=\"/assets/main.js\"></script>",
        ),
    )];
    let r = fails(files, &[], "visible text failed: /: the page shows no text").await;
    assert_eq!(
        r.screenshots.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        vec!["home", "failure"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_health_route_that_is_down_fails() {
    fails(
        ui_change(),
        &[(
            "src/routes.ts",
            "handler: () => json({ ok: true })",
            "handler: () => json({ ok: false }, 503)",
        )],
        "/api/health failed: fetch('/api/health') from the page answered 503",
    )
    .await;
}

const HOPS: &str = r#"  },
  {
    method: "GET",
    path: "/hop/:n",
    handler: (_r, params) => {
      const n = Number(params.n);
      return new Response(null, { status: 302, headers: { location: n > 0 ? `/hop/${n - 1}` : "/about.html" } });
    },
  },
  { method: "GET", path: "/away", handler: () => new Response(null, { status: 302, headers: { location: "http://example.com/" } }) },
];"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_redirects_pass_and_six_fail() {
    let mut files = ui_change();
    files[1] = (
        "public/about.html",
        page("About", "<h1>About</h1><a href=\"/hop/4\">Five hops</a>"),
    );
    let app = App::start(
        &files,
        &[
            ("src/routes.ts", "  },\n];", FORM_ROUTES),
            ("src/routes.ts", "  },\n];", HOPS),
        ],
    )
    .await;
    let r = app.check(&config()).await;
    assert_eq!(class(&r).0, EvidenceStatus::Pass, "{:#?}", r.log);
    assert!(r.journal.served.iter().any(|s| s.path == "/hop/4" && s.hops == 5));
    drop(app);

    files[1] = (
        "public/about.html",
        page("About", "<h1>About</h1><a href=\"/hop/5\">Six hops</a>"),
    );
    fails(
        files,
        &[
            ("src/routes.ts", "  },\n];", FORM_ROUTES),
            ("src/routes.ts", "  },\n];", HOPS),
        ],
        "more than 5 redirects",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_off_the_preview_host_fails() {
    let mut files = ui_change();
    files[1] = (
        "public/about.html",
        page("About", "<h1>About</h1><a href=\"/away\">Away</a>"),
    );
    fails(
        files,
        &[
            ("src/routes.ts", "  },\n];", FORM_ROUTES),
            ("src/routes.ts", "  },\n];", HOPS),
        ],
        "/away redirects off the preview host to http://example.com/",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_calls_an_outside_host_is_blocked_and_the_canary_hears_nothing() {
    let canary = Canary::start();
    let mut files = ui_change();
    files[1] = (
        "public/about.html",
        page(
            "About",
            &format!(
                "<h1>About</h1><script>fetch('http://127.0.0.1:{}/beacon').then(r => r.text());</script>",
                canary.port
            ),
        ),
    );
    let r = fails(files, &[], "uncaught page script error").await;
    assert!(
        r.journal
            .refused
            .iter()
            .any(|x| x.kind == RefusedKind::Blocked && x.url.ends_with("/beacon")),
        "{:#?}",
        r.journal.refused
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(canary.hits(), Vec::<String>::new());
}

/// A single-page application: its client draws `/board` itself (a click pushes the route), and
/// the server knows only `/`.
fn spa(extra: &str) -> Vec<(&'static str, String)> {
    vec![(
        "public/index.html",
        page(
            "Todos",
            &format!(
                "<h1>Todos</h1><nav><a href=\"/board\">Board</a></nav><main id=\"view\"></main>{extra}<script>\
                 function render() {{ document.getElementById('view').textContent = location.pathname === '/board' ? 'The board: three columns.' : 'Welcome home.'; }}\
                 document.addEventListener('click', (e) => {{ const a = e.target.closest('a[href=\"/board\"]'); if (a) {{ e.preventDefault(); history.pushState({{}}, '', '/board'); render(); }} }});\
                 render();</script>"
            ),
        ),
    )]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_page_application_is_served_its_index_on_a_direct_load_of_its_routes() {
    // Declared: the direct load of /board is answered with public/index.html, and passes.
    let app = App::start(&spa(""), &[]).await;
    let r = app.check_as_spa(&config()).await;
    assert_passes(&r);
    let board: Vec<_> = r
        .journal
        .served
        .iter()
        .filter(|s| s.path == "/board" && s.resource_type == "Document")
        .collect();
    assert_eq!(
        board.len(),
        1,
        "the click drew it in place, the direct load asked for it"
    );
    assert_eq!((board[0].status, board[0].spa_index), (200, true));
    assert!(
        r.log.iter().any(|l| l.contains("clicked the link to /board")),
        "{:#?}",
        r.log
    );
    // The app itself still answers 404 there, and `/` is not a fallback.
    let direct = reqwest::get(format!("http://127.0.0.1:{}/board", app.port))
        .await
        .unwrap();
    assert_eq!(direct.status(), 404);
    assert!(r.journal.served.iter().filter(|s| s.path == "/").all(|s| !s.spa_index));
    wait_gone(r.chromium_pid.unwrap()).await;

    // Not declared: the same direct load is a broken page.
    let r = app.check(&config()).await;
    let (status, _, summary) = class(&r);
    assert_eq!(status, EvidenceStatus::Fail, "{:#?}", r.log);
    assert!(summary.contains("/board answered 404"), "{summary}");
    wait_gone(r.chromium_pid.unwrap()).await;
    drop(app);

    // Declared, but an asset the page loads is missing: assets keep their 404.
    let app = App::start(&spa("<img src=\"/logo.png\" alt=\"logo\">"), &[]).await;
    let r = app.check_as_spa(&config()).await;
    let (status, _, summary) = class(&r);
    assert_eq!(status, EvidenceStatus::Fail, "{:#?}", r.log);
    assert!(summary.contains("GET /logo.png (Image) answered 404"), "{summary}");
    wait_gone(r.chromium_pid.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_past_its_deadline_is_an_error_and_chromium_is_gone() {
    let mut files = ui_change();
    files[1] = (
        "public/about.html",
        page("About", "<h1>About</h1><a href=\"/slow\">Slow</a>"),
    );
    let app = App::start(
        &files,
        &[(
            "src/routes.ts",
            "  },\n];",
            "  },\n  { method: \"GET\", path: \"/slow\", handler: async () => { await Bun.sleep(30000); return new Response(\"late\"); } },\n];",
        )],
    ).await;
    let mut config = config();
    config.session = Duration::from_secs(4);
    let started = Instant::now();
    let r = app.check(&config).await;
    assert!(started.elapsed() < Duration::from_secs(12), "{:?}", started.elapsed());
    assert!(matches!(r.run, BrowserRun::DeadlineExceeded { .. }), "{:?}", r.run);
    assert_eq!(
        (class(&r).0, class(&r).1),
        (EvidenceStatus::Error, Coverage::NotChecked)
    );
    wait_gone(r.chromium_pid.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_app_is_an_error_and_no_browser_is_no_browser_connection() {
    // Nothing listens: the first document cannot be observed.
    let up = Upstream::new(&format!("http://127.0.0.1:{}", free_port())).unwrap();
    let r = run_session(&config(), up).await;
    assert_eq!(
        (class(&r).0, class(&r).1),
        (EvidenceStatus::Error, Coverage::NotChecked),
        "{:?}",
        r.run
    );
    wait_gone(r.chromium_pid.unwrap()).await;

    let mut missing = config();
    missing.chromium = "/nonexistent/chromium".into();
    let up = Upstream::new("http://127.0.0.1:9").unwrap();
    let r = run_session(&missing, up).await;
    assert!(matches!(r.run, BrowserRun::NoBrowserConnection { .. }), "{:?}", r.run);
}
