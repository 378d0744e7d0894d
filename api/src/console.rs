//! The console: belay's own web UI for reviewers and operators, served at `/`. It is a client of
//! the `/v1` API like any other (the account token stays in the browser session and goes out as
//! the bearer token), so this module only serves its page and assets: every page is one HTML
//! shell whose script renders it from the API's answers. Nothing is fetched from outside belay:
//! the policy below allows this origin only, and the assets are compiled into the binary.

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

const INDEX: &str = include_str!("../console/index.html");
const APP_JS: &str = include_str!("../console/app.js");
const APP_CSS: &str = include_str!("../console/app.css");
const ICON: &str = include_str!("../console/icon.svg");

/// The console's content security policy: this origin only; inline styles are allowed for the
/// run artifacts shown in sandboxed frames (which inherit it), scripts never. Frames may show
/// this origin and, when one is served, the artifact origin (`{frames}`): a build that navigates
/// its own frame anywhere else is stopped by this policy.
pub const POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
     img-src 'self' data: blob:; connect-src 'self'; frame-src 'self'{frames}; object-src 'none'; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// [`POLICY`] with the artifact origin (`http://host:port`) allowed in frames, if there is one.
pub fn policy(artifact_origin: Option<&str>) -> String {
    let frames = artifact_origin.map(|o| format!(" {o}")).unwrap_or_default();
    POLICY.replace("{frames}", &frames)
}

/// The paths that are console pages (each answers the shell; its script renders the page).
pub const PAGES: &[&str] = &[
    "/",
    "/sign-in",
    "/plans",
    "/plans/{id}",
    "/plans/{id}/queue",
    "/ladders",
    "/ladders/{id}",
    "/ladders/{id}/queue",
    "/projects",
    "/projects/{id}",
    "/changes/{id}",
    "/candidates/{id}",
    "/approvals",
    "/runs/{id}",
];

fn asset(policy: &HeaderValue, content_type: &'static str, body: &'static str) -> Response {
    let mut r = (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        ],
        body,
    )
        .into_response();
    r.headers_mut().insert(header::CONTENT_SECURITY_POLICY, policy.clone());
    r
}

/// The Web UI's pages of `namespace`, from the Web UI's address (`http://host:port`).
pub fn temporal_ui_for(ui: &str, namespace: &str) -> String {
    format!("{}/namespaces/{namespace}", ui.trim_end_matches('/'))
}

/// The shell with the Web UI's address in a `belay-temporal-ui` meta tag (the page's script
/// reads it to link each page to its workflows; no tag when none is configured).
fn index_with(temporal_ui: Option<&str>) -> &'static str {
    match temporal_ui {
        None => INDEX,
        Some(ui) => {
            let escaped = ui
                .replace('&', "&amp;")
                .replace('"', "&quot;")
                .replace('<', "&lt;")
                .replace('>', "&gt;");
            let meta = format!("<meta name=\"belay-temporal-ui\" content=\"{escaped}\">\n</head>");
            // Built once per router: the shell lives as long as the process serves it.
            Box::leak(INDEX.replacen("</head>", &meta, 1).into_boxed_str())
        }
    }
}

fn shell(policy: &HeaderValue, index: &'static str) -> Response {
    let mut r = asset(policy, "text/html; charset=utf-8", index);
    r.headers_mut()
        .insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    r
}

/// The console's routes, merged beside the API's; `artifact_origin` is where run builds are
/// served (the only other origin the console frames), `temporal_ui` the Web UI's pages of
/// belay's namespace ([`temporal_ui_for`]).
pub fn router<S: Clone + Send + Sync + 'static>(artifact_origin: Option<&str>, temporal_ui: Option<&str>) -> Router<S> {
    // The origin is checked where it is configured; a value no header can carry leaves frames
    // to this origin only.
    let policy = HeaderValue::from_str(&policy(artifact_origin)).unwrap_or_else(|_| {
        HeaderValue::from_str(&policy(None)).unwrap_or(HeaderValue::from_static("default-src 'self'"))
    });
    let index = index_with(temporal_ui);
    let mut r = Router::new();
    for page in PAGES {
        let p = policy.clone();
        r = r.route(page, get(move || async move { shell(&p, index) }));
    }
    let (js, css, icon) = (policy.clone(), policy.clone(), policy);
    r.route(
        "/console/app.js",
        get(move || async move { asset(&js, "text/javascript; charset=utf-8", APP_JS) }),
    )
    .route(
        "/console/app.css",
        get(move || async move { asset(&css, "text/css; charset=utf-8", APP_CSS) }),
    )
    .route(
        "/console/icon.svg",
        get(move || async move { asset(&icon, "image/svg+xml", ICON) }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_web_ui_address_reaches_the_shell_escaped_and_only_when_configured() {
        assert_eq!(
            temporal_ui_for("http://127.0.0.1:8233/", "default"),
            "http://127.0.0.1:8233/namespaces/default"
        );
        assert!(!index_with(None).contains("belay-temporal-ui"));
        let shell = index_with(Some("http://ui/\"><script>"));
        assert!(
            shell.contains(r#"<meta name="belay-temporal-ui" content="http://ui/&quot;&gt;&lt;script&gt;">"#),
            "{shell}"
        );
    }
}
