//! The `client-assets` check: a Candidate that changes client code must also change the bundle
//! the page loads, or the live app would serve a stale one.
//!
//! Composition runs the build script and commits what it wrote, so when a client source changed,
//! some script or style that `public/index.html` references must differ between base and
//! composed commit. The check needs no runner: it reads the changed paths, the build script and
//! the page, all of which composition already has. The page reading here is also what the
//! acceptance input uses to find the page's local scripts and styles.

use crate::evidence::{CheckResult, Coverage, EvidenceStatus};
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// The page whose scripts and styles are the bundle.
pub const INDEX_HTML: &str = "public/index.html";

/// Client sources: every file under `src/client/`, plus the `src/` paths the build script names.
/// A named file also adds its directory, except `src/` itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ClientSources {
    /// Directories whose files are client sources (without the trailing `/`).
    pub dirs: Vec<String>,
    /// Single files that are client sources.
    pub files: Vec<String>,
}

impl ClientSources {
    pub fn contains(&self, path: &str) -> bool {
        self.files.iter().any(|f| f == path)
            || self
                .dirs
                .iter()
                .any(|d| path.strip_prefix(d.as_str()).is_some_and(|rest| rest.starts_with('/')))
    }
}

fn push_unique(v: &mut Vec<String>, s: String) {
    if !v.contains(&s) {
        v.push(s);
    }
}

/// Reads the client sources from the build script (`bun build src/client/main.ts --outdir
/// public/assets`, `bun build ./src/ui/index.tsx …`).
pub fn client_sources(build_script: &str) -> ClientSources {
    let mut out = ClientSources {
        dirs: vec!["src/client".into()],
        files: vec![],
    };
    let tokens = build_script.split(|c: char| c.is_whitespace() || "&|;()'\"=,`<>".contains(c));
    for token in tokens {
        let t = token.trim_start_matches("./");
        if !t.starts_with("src/") {
            continue;
        }
        // A glob names the directory its wildcard sits in.
        if let Some(i) = t.find(['*', '{', '?']) {
            let head = &t[..i];
            let dir = match head.strip_suffix('/') {
                Some(d) => d,
                None => head.rsplit_once('/').map_or("", |(d, _)| d),
            };
            if dir.starts_with("src/") {
                push_unique(&mut out.dirs, dir.to_owned());
            }
            continue;
        }
        let t = t.trim_end_matches('/');
        if t == "src" {
            continue;
        }
        let last = t.rsplit('/').next().unwrap_or(t);
        if last.contains('.') {
            push_unique(&mut out.files, t.to_owned());
            if let Some((dir, _)) = t.rsplit_once('/')
                && dir != "src"
            {
                push_unique(&mut out.dirs, dir.to_owned());
            }
        } else {
            push_unique(&mut out.dirs, t.to_owned());
        }
    }
    out
}

fn attr(tag: &str, name: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find(name).map(|i| i + from) {
        from = i + name.len();
        let before_ok = i == 0 || lower.as_bytes()[i - 1].is_ascii_whitespace();
        let rest = lower[from..].trim_start();
        if !before_ok || !rest.starts_with('=') {
            continue;
        }
        let value_at = tag.len() - rest.len() + 1;
        let v = tag[value_at..].trim_start();
        let value = match v.chars().next() {
            Some(q @ ('"' | '\'')) => v[1..].split(q).next().unwrap_or_default(),
            _ => v
                .split(|c: char| c.is_whitespace() || c == '>')
                .next()
                .unwrap_or_default(),
        };
        return Some(value.to_owned());
    }
    None
}

/// The tags of `html` that open with `<name` (case-insensitive), each up to its `>`.
fn tags<'a>(html: &'a str, name: &str) -> Vec<&'a str> {
    let lower = html.to_ascii_lowercase();
    let open = format!("<{name}");
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = lower[from..].find(&open).map(|i| i + from) {
        from = i + open.len();
        if !lower[from..].starts_with(|c: char| c.is_ascii_whitespace() || c == '>' || c == '/') {
            continue;
        }
        let end = lower[from..].find('>').map_or(html.len(), |e| from + e);
        out.push(&html[i..end]);
    }
    out
}

/// A page reference as a repository path (`/app.js` and `app.js` are `public/app.js`), or
/// `None` when it points elsewhere (another host, `data:`, …).
fn local_path(reference: &str) -> Option<String> {
    let r = reference.trim();
    let lower = r.to_ascii_lowercase();
    if r.is_empty() || r.starts_with("//") || lower.contains(':') {
        return None;
    }
    let r = r.split(['?', '#']).next().unwrap_or_default();
    let joined = if let Some(abs) = r.strip_prefix('/') {
        format!("public/{abs}")
    } else {
        format!("public/{r}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for seg in joined.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// The local scripts and styles `public/index.html` references, as repository paths, in page
/// order: `<script src>`, `<link rel="stylesheet" href>` and `<link rel="modulepreload" href>`.
pub fn index_references(html: &str) -> Vec<String> {
    let mut refs = Vec::new();
    let mut found: Vec<(usize, String)> = Vec::new();
    for tag in tags(html, "script") {
        if let Some(src) = attr(tag, "src") {
            found.push((offset(html, tag), src));
        }
    }
    for tag in tags(html, "link") {
        let rel = attr(tag, "rel").unwrap_or_default().to_ascii_lowercase();
        if rel
            .split_whitespace()
            .any(|r| r == "stylesheet" || r == "modulepreload")
            && let Some(href) = attr(tag, "href")
        {
            found.push((offset(html, tag), href));
        }
    }
    found.sort_by_key(|(at, _)| *at);
    for (_, r) in found {
        if let Some(p) = local_path(&r) {
            push_unique(&mut refs, p);
        }
    }
    refs
}

fn offset(whole: &str, part: &str) -> usize {
    part.as_ptr() as usize - whole.as_ptr() as usize
}

/// What the check found, with the lists behind its summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ClientAssetsOutcome {
    pub result: CheckResult,
    pub changed_client_sources: Vec<String>,
    pub references: Vec<String>,
}

/// The `client-assets` rule.
/// - `changed_paths`: every path that differs between the base and the composed commit (the
///   build's output included);
/// - `build_script`: the composed `package.json`'s `build` script;
/// - `index_html`: the composed `public/index.html`, `None` when there is none.
pub fn check_client_assets(
    changed_paths: &[String],
    build_script: &str,
    index_html: Option<&str>,
) -> ClientAssetsOutcome {
    let sources = client_sources(build_script);
    let changed_client: Vec<String> = changed_paths.iter().filter(|p| sources.contains(p)).cloned().collect();
    let references = index_html.map(index_references).unwrap_or_default();
    let pass = |summary: &str| CheckResult::new(EvidenceStatus::Pass, Coverage::CheckedSupported, summary);
    let result = if changed_client.is_empty() {
        pass("no client source changed")
    } else if index_html.is_none() {
        pass("no public/index.html: nothing serves a bundle")
    } else if references.is_empty() {
        pass("public/index.html references no local script or style")
    } else {
        let changed_refs: Vec<&String> = references.iter().filter(|r| changed_paths.contains(r)).collect();
        if changed_refs.is_empty() {
            CheckResult::new(
                EvidenceStatus::Fail,
                Coverage::CheckedSupported,
                &format!(
                    "client sources changed ({}) but no script or style that public/index.html references changed \
                     ({}): the live app would serve a stale bundle",
                    changed_client.join(", "),
                    references.join(", ")
                ),
            )
        } else {
            pass(&format!(
                "client sources changed and so did {}",
                changed_refs.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            ))
        }
    };
    ClientAssetsOutcome {
        result,
        changed_client_sources: changed_client,
        references,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PAGE: &str = r#"<!doctype html><html><head>
        <link rel="stylesheet" href="/styles.css?v=2">
        <link rel="icon" href="/favicon.ico">
        <script src="https://cdn.example.com/lib.js"></script>
        </head><body><h1>Todos</h1><SCRIPT type="module" SRC='app.js'></SCRIPT></body></html>"#;

    fn paths(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_page_references_its_local_scripts_and_styles_only() {
        assert_eq!(index_references(PAGE), ["public/styles.css", "public/app.js"]);
        assert_eq!(
            index_references(r#"<script src="./js/../main.js"></script><scripts src="x.js">"#),
            ["public/main.js"]
        );
        assert!(index_references(r#"<script>inline()</script><link rel="preload" href="a.css">"#).is_empty());
        assert!(index_references(r#"<script src="data:text/javascript,1"></script>"#).is_empty());
    }

    #[test]
    fn client_sources_are_src_client_and_the_src_paths_the_build_script_names() {
        let s =
            client_sources("bun build ./src/ui/main.tsx src/app.ts --outdir public/assets && cp src/static/ public/");
        assert!(s.contains("src/client/widgets/list.ts"));
        assert!(s.contains("src/ui/main.tsx"));
        assert!(
            s.contains("src/ui/components/row.tsx"),
            "a named file adds its directory"
        );
        assert!(s.contains("src/app.ts"));
        assert!(
            !s.contains("src/server.ts"),
            "naming src/app.ts does not add src/ itself"
        );
        assert!(s.contains("src/static/logo.svg"));
        assert!(!s.contains("src/clientele.ts"));
        let glob = client_sources("bun build src/web/**/*.ts src/*.css --outdir=public");
        assert!(glob.contains("src/web/a/b.ts"));
        assert!(
            !glob.contains("src/app.css"),
            "a glob directly in src/ does not add src/"
        );
    }

    #[test]
    fn a_client_change_without_a_changed_bundle_fails() {
        let out = check_client_assets(
            &paths(&["src/client/app.ts", "README.md"]),
            "bun build src/client/app.ts --outfile public/app.js",
            Some(PAGE),
        );
        assert_eq!(out.result.status, EvidenceStatus::Fail);
        assert_eq!(out.result.coverage, Coverage::CheckedSupported);
        assert_eq!(
            out.result.summary,
            "client sources changed (src/client/app.ts) but no script or style that public/index.html references \
             changed (public/styles.css, public/app.js): the live app would serve a stale bundle (runner: sandbox)"
        );
    }

    #[test]
    fn a_client_change_with_its_bundle_rebuilt_passes() {
        let out = check_client_assets(&paths(&["src/client/app.ts", "public/app.js"]), "bun build", Some(PAGE));
        assert_eq!(out.result.status, EvidenceStatus::Pass);
        assert_eq!(out.changed_client_sources, ["src/client/app.ts"]);
    }

    #[test]
    fn no_changed_client_source_passes() {
        let out = check_client_assets(&paths(&["src/server.ts"]), "bun build src/client/app.ts", Some(PAGE));
        assert_eq!(out.result.status, EvidenceStatus::Pass);
        assert_eq!(out.result.summary, "no client source changed (runner: sandbox)");
    }

    #[test]
    fn a_page_without_index_html_or_without_a_local_asset_passes_with_that_reason() {
        let changed = paths(&["src/client/app.ts"]);
        let none = check_client_assets(&changed, "bun build", None);
        assert_eq!(
            (none.result.status, none.result.summary.as_str()),
            (
                EvidenceStatus::Pass,
                "no public/index.html: nothing serves a bundle (runner: sandbox)"
            )
        );
        let remote = check_client_assets(
            &changed,
            "bun build",
            Some(r#"<script src="https://x.test/a.js"></script>"#),
        );
        assert_eq!(
            remote.result.summary,
            "public/index.html references no local script or style (runner: sandbox)"
        );
    }

    proptest! {
        #[test]
        fn reading_any_page_or_script_never_panics(html in any::<String>(), script in any::<String>()) {
            let refs = index_references(&html);
            prop_assert!(refs.iter().all(|r| r.starts_with("public/") || !r.contains("..")));
            let _ = client_sources(&script);
        }

        #[test]
        fn reading_tag_soup_never_panics(parts in prop::collection::vec(
            prop_oneof![
                Just("<script".to_string()), Just("<link".to_string()), Just(" src=".to_string()),
                Just(" href=".to_string()), Just(" rel=stylesheet".to_string()), Just("\"".to_string()),
                Just("'".to_string()), Just(">".to_string()), "[a-z./é]{0,6}",
            ], 0..20)) {
            let _ = index_references(&parts.concat());
        }

        #[test]
        fn a_change_outside_the_client_sources_always_passes(
            changed in prop::collection::vec("(docs|tests|src/server)/[a-z]{1,6}\\.ts", 0..5)
        ) {
            let out = check_client_assets(&changed, "bun build src/client/app.ts", Some(PAGE));
            prop_assert_eq!(out.result.status, EvidenceStatus::Pass);
        }
    }
}
