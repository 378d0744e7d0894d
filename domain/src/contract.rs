//! Contract declarations and route tables: what an agent says its ChangeSet does to the app's
//! HTTP contract, and whether the Candidate's route table agrees.
//!
//! Agents write contract lines in prose ("Adds POST /api/todos", "Removes DELETE /api/todos/:id",
//! "Uses GET /api/health"). [`parse_contract_change`] turns one line into typed route changes by
//! the spec's rules; conflict detection, `checkCompatibility` and the `contract` check all read
//! declarations through it, so a line means the same thing everywhere. The parser never panics on
//! any input (it is fuzzed).
//!
//! The `contract` check runs the policy's contract command (`bun run contract`) on the base and on
//! the Candidate. The command prints the route table as one JSON array, one object per route:
//! `[{"method":"GET","path":"/api/health"},{"method":"POST","path":"/api/todos","response":{…}}]`.
//! `method` and `path` name the route; every other field is the route's shape (request, response,
//! status, …) and is compared as JSON: a route whose other fields differ between base and Candidate
//! is changed. [`compare_route_tables`] fails on every added, removed or changed route that no
//! declaration covers. What the spec leaves open is decided in
//! `docs/decisions/0010-contract-declarations-and-route-tables.md`.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// The methods a declaration recognises before a path. They are part of a route, never verbs.
pub const DECLARED_METHODS: [&str; 7] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

/// Whether `s` is an HTTP method a declaration recognises (upper case).
pub fn is_method(s: &str) -> bool {
    DECLARED_METHODS.contains(&s)
}

/// A route as a declaration or a route table names it: its method and path only (no query string,
/// no trailing punctuation, no trailing `/`). A declaration may name a path without a method; it
/// then stands for every method on that path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Route {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    pub path: String,
}

impl Route {
    pub fn new(method: &str, path: &str) -> Route {
        Route {
            method: Some(method.to_ascii_uppercase()),
            path: normalize_path(path),
        }
    }

    /// The path with every parameter segment (`:id`, `{id}`, `[id]`, `<id>`) written `:`, so
    /// `/api/todos/:id` and `/api/todos/{todoId}` are the same route.
    pub fn path_key(&self) -> String {
        path_key(&self.path)
    }

    /// Whether this route (from a declaration) covers `other` (from a route table).
    pub fn covers(&self, other: &Route) -> bool {
        self.path_key() == other.path_key()
            && match (&self.method, &other.method) {
                (None, _) => true,
                (Some(a), Some(b)) => a == b,
                (Some(_), None) => false,
            }
    }
}

impl std::fmt::Display for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.method {
            Some(m) => write!(f, "{m} {}", self.path),
            None => f.write_str(&self.path),
        }
    }
}

fn path_key(path: &str) -> String {
    if path == "/" {
        return "/".into();
    }
    path.split('/')
        .map(|seg| {
            let param = seg.starts_with(':')
                || (seg.starts_with('{') && seg.ends_with('}'))
                || (seg.starts_with('[') && seg.ends_with(']'))
                || (seg.starts_with('<') && seg.ends_with('>'));
            if param { ":" } else { seg }
        })
        .collect::<Vec<_>>()
        .join("/")
}

const TRAILING: &[char] = &['.', ',', ';', ':', '!', '?', ')', ']', '}', '\'', '"', '`', '>'];

/// A declared path without what is not part of the route: the query string, a fragment, trailing
/// punctuation and a trailing `/`.
fn normalize_path(raw: &str) -> String {
    let mut p = raw.find(['?', '#']).map_or(raw, |i| &raw[..i]);
    while let Some(last) = p.chars().last().filter(|c| TRAILING.contains(c)) {
        // The closing bracket of a `{param}`, `[param]` or `<param>` segment is part of the path.
        let opener = match last {
            '}' => Some('{'),
            ']' => Some('['),
            '>' => Some('<'),
            _ => None,
        };
        let segment = p.rsplit('/').next().unwrap_or_default();
        if opener.is_some_and(|o| segment.starts_with(o)) {
            break;
        }
        p = &p[..p.len() - last.len_utf8()];
    }
    let p = if p.len() > 1 { p.trim_end_matches('/') } else { p };
    if p.is_empty() { "/".into() } else { p.to_owned() }
}

/// What a line does to one route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum RouteChangeKind {
    /// The route is added or its behaviour changes.
    Changed,
    /// The route goes away ("Removes DELETE /api/todos/:id").
    Removed,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RouteChange {
    pub route: Route,
    pub kind: RouteChangeKind,
}

/// One contract line, read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContractLine {
    /// "None", "No change", an empty line: not a contract change.
    NoChange,
    /// The line only uses, consumes or calls routes: not a contract change; the routes are the
    /// Intent's consumed contracts.
    Consumes { routes: Vec<Route> },
    /// The line changes or removes routes (and may also name routes it uses).
    Changes {
        changes: Vec<RouteChange>,
        consumed: Vec<Route>,
    },
    /// A contract change that names no route ("Todo gains a dueDate field").
    Unrouted,
}

impl ContractLine {
    /// Whether the line declares a contract change at all.
    pub fn is_change(&self) -> bool {
        matches!(self, ContractLine::Changes { .. } | ContractLine::Unrouted)
    }
}

/// A ChangeSet's contract lines, read together.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContractDeclarations {
    /// Every declared route change, sorted, without repeats.
    pub changes: Vec<RouteChange>,
    /// Routes the lines only use: conflict detection never compares them.
    pub consumed_contracts: Vec<Route>,
    /// Lines that declare a change without naming a route.
    pub unrouted: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Change,
    Remove,
    Consume,
}

fn verb_class(word: &str) -> Option<Class> {
    const CHANGE: &[&str] = &[
        "add",
        "adds",
        "added",
        "adding",
        "new",
        "change",
        "changes",
        "changed",
        "changing",
        "create",
        "creates",
        "created",
        "introduce",
        "introduces",
        "introduced",
        "update",
        "updates",
        "updated",
        "modify",
        "modifies",
        "modified",
        "rename",
        "renames",
        "renamed",
        "extend",
        "extends",
        "extended",
        "expose",
        "exposes",
        "exposed",
        "replace",
        "replaces",
        "replaced",
    ];
    const REMOVE: &[&str] = &[
        "remove", "removes", "removed", "removing", "removal", "drop", "drops", "dropped", "dropping", "retire",
        "retires", "retired", "gone",
    ];
    const CONSUME: &[&str] = &[
        "use",
        "uses",
        "used",
        "using",
        "consume",
        "consumes",
        "consumed",
        "consuming",
        "call",
        "calls",
        "called",
        "calling",
        "fetch",
        "fetches",
        "fetched",
        "fetching",
        "read",
        "reads",
        "reading",
        "query",
        "queries",
        "depend",
        "depends",
        "rely",
        "relies",
        "keep",
        "keeps",
        "kept",
        "unchanged",
        "preserve",
        "preserves",
        "preserved",
        "retain",
        "retains",
        "retained",
    ];
    if CHANGE.contains(&word) {
        Some(Class::Change)
    } else if REMOVE.contains(&word) {
        Some(Class::Remove)
    } else if CONSUME.contains(&word) {
        Some(Class::Consume)
    } else {
        None
    }
}

fn is_negation(word: &str) -> bool {
    matches!(
        word,
        "not" | "never" | "no" | "none" | "doesnt" | "dont" | "wont" | "nothing" | "without"
    )
}

/// After a removal verb these mean the removal is of something inside the route ("Removes the
/// dueDate field from GET /api/todos"): the route changes, it does not go away.
fn is_inner_preposition(word: &str) -> bool {
    matches!(word, "from" | "in" | "on" | "of" | "within" | "inside")
}

/// Whether a declaration line (contract or data) says it changes nothing: it starts with "None",
/// "No change(s)", "No contract change(s)", "N/A" or "Nothing".
pub fn says_no_change(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    let l = lower.trim_start_matches(|c: char| !c.is_ascii_alphanumeric());
    [
        "none",
        "no change",
        "no changes",
        "no contract change",
        "no contract changes",
        "n/a",
        "nothing",
    ]
    .iter()
    .any(|w| {
        l.strip_prefix(w)
            .is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_alphanumeric()))
    })
}

enum Token {
    Route(Route),
    Word(String),
    Arrow,
    /// A clause ends (`;` or a sentence's `.`).
    Break,
}

fn strip_wrapping(w: &str) -> &str {
    w.trim_start_matches(['`', '\'', '"', '(', '[', '<', '*'])
}

fn looks_like_path(w: &str) -> bool {
    let mut chars = w.chars();
    chars.next() == Some('/')
        && match chars.next() {
            None => true,
            Some(c) => c.is_alphanumeric() || matches!(c, ':' | '{' | '[' | '<' | '_' | '-' | '.' | '?'),
        }
}

fn tokenize(line: &str) -> Vec<Token> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let raw = words[i];
        let w = strip_wrapping(raw);
        let bare = w.trim_end_matches(TRAILING);
        if matches!(w, "->" | "=>" | "→") {
            tokens.push(Token::Arrow);
            i += 1;
            continue;
        }
        let next = words.get(i + 1).map(|n| strip_wrapping(n));
        let upper = bare.to_ascii_uppercase();
        // A method word with punctuation after it ("GET,") ends there: it is not before a path.
        if is_method(&upper)
            && bare == w
            && let Some(path) = next.filter(|n| looks_like_path(n))
        {
            tokens.push(Token::Route(Route {
                method: Some(upper),
                path: normalize_path(path),
            }));
            push_break(&mut tokens, words[i + 1]);
            i += 2;
            continue;
        }
        if looks_like_path(w) && w.len() > 1 {
            tokens.push(Token::Route(Route {
                method: None,
                path: normalize_path(w),
            }));
        } else {
            let word: String = w
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == '/')
                .flat_map(char::to_lowercase)
                .collect();
            if !word.is_empty() {
                tokens.push(Token::Word(word));
            }
        }
        push_break(&mut tokens, raw);
        i += 1;
    }
    tokens
}

fn push_break(tokens: &mut Vec<Token>, raw: &str) {
    let end = raw.trim_end_matches(['`', '\'', '"', ')', ']']);
    if end.ends_with(';') || end.ends_with('.') {
        tokens.push(Token::Break);
    }
}

/// Reads one contract line by the spec's rules:
/// - a route keeps only its method and path (`GET /api/report?month=YYYY-MM.` is `GET /api/report`);
/// - `GET`, `POST`, `PUT`, `PATCH`, `DELETE` (and `HEAD`, `OPTIONS`) before a path are part of the
///   route, never verbs;
/// - a route is changed unless removal wording ("Removes", "is removed", "drops", "retires",
///   "no longer") applies to it, so `DELETE /api/todos/:id -> {ok:true}` changes that route;
/// - "None", "No change", "N/A", "Nothing" is no change;
/// - routes the line only uses, consumes, calls, fetches, reads, depends on or keeps are not
///   changes: they are consumed contracts.
///
/// The verb that governs a route is the nearest one before it in its clause (a clause ends at `;`
/// or `.`), or, when none comes before, the first one after it ("GET /api/legacy is removed").
/// A negation before a verb ("does not change") makes the routes it governs consumed, not changed.
pub fn parse_contract_change(line: &str) -> ContractLine {
    let no_change_wording = says_no_change(line);
    let mut changes: BTreeSet<RouteChange> = BTreeSet::new();
    let mut consumed: BTreeSet<Route> = BTreeSet::new();
    let mut current: Option<Class> = None;
    let mut inner = false;
    let mut negated = false;
    let mut pending: Vec<Route> = Vec::new();
    let mut prev_word = String::new();

    let mut assign = |route: Route, class: Class, inner: bool| match class {
        Class::Consume => {
            consumed.insert(route);
        }
        Class::Remove if !inner => {
            changes.insert(RouteChange {
                route,
                kind: RouteChangeKind::Removed,
            });
        }
        Class::Change | Class::Remove => {
            changes.insert(RouteChange {
                route,
                kind: RouteChangeKind::Changed,
            });
        }
    };

    for token in tokenize(line) {
        match token {
            Token::Route(route) => match current {
                Some(class) => assign(route, class, inner),
                None => pending.push(route),
            },
            Token::Arrow => {
                for r in pending.drain(..) {
                    assign(r, Class::Change, false);
                }
                current = Some(Class::Change);
                inner = false;
                negated = false;
            }
            Token::Break => {
                for r in pending.drain(..) {
                    assign(r, Class::Change, false);
                }
                current = None;
                inner = false;
                negated = false;
            }
            Token::Word(word) => {
                let class = if word == "longer" && prev_word == "no" {
                    negated = false;
                    Some(Class::Remove)
                } else {
                    verb_class(&word)
                };
                if let Some(class) = class {
                    let class = match (negated, class) {
                        (true, Class::Change | Class::Remove) => Class::Consume,
                        _ => class,
                    };
                    negated = false;
                    for r in pending.drain(..) {
                        assign(r, class, false);
                    }
                    current = Some(class);
                    inner = false;
                } else if is_negation(&word) {
                    negated = true;
                } else if current == Some(Class::Remove) && is_inner_preposition(&word) {
                    inner = true;
                }
                prev_word = word;
            }
        }
    }
    for r in pending.drain(..) {
        assign(r, Class::Change, false);
    }

    if changes.is_empty() {
        if no_change_wording {
            return ContractLine::NoChange;
        }
        if !consumed.is_empty() {
            return ContractLine::Consumes {
                routes: consumed.into_iter().collect(),
            };
        }
        return if line.chars().any(char::is_alphanumeric) {
            ContractLine::Unrouted
        } else {
            ContractLine::NoChange
        };
    }
    ContractLine::Changes {
        changes: changes.into_iter().collect(),
        consumed: consumed.into_iter().collect(),
    }
}

/// Reads every contract line of a ChangeSet (or of all ChangeSets of a Candidate).
pub fn parse_contract_changes<S: AsRef<str>>(lines: &[S]) -> ContractDeclarations {
    let mut changes = BTreeSet::new();
    let mut consumed = BTreeSet::new();
    let mut unrouted = Vec::new();
    for line in lines {
        match parse_contract_change(line.as_ref()) {
            ContractLine::NoChange => {}
            ContractLine::Consumes { routes } => consumed.extend(routes),
            ContractLine::Changes {
                changes: c,
                consumed: u,
            } => {
                changes.extend(c);
                consumed.extend(u);
            }
            ContractLine::Unrouted => unrouted.push(line.as_ref().trim().to_owned()),
        }
    }
    ContractDeclarations {
        changes: changes.into_iter().collect(),
        consumed_contracts: consumed.into_iter().collect(),
        unrouted,
    }
}

/// One route of a route table as `bun run contract` prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct RouteEntry {
    pub method: String,
    pub path: String,
    /// Everything else the script prints for the route: its shape.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub shape: BTreeMap<String, serde_json::Value>,
}

impl RouteEntry {
    fn route(&self) -> Route {
        Route::new(&self.method, &self.path)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractError {
    #[error(
        "printed no route table: expected a JSON array like \
         [{{\"method\":\"GET\",\"path\":\"/api/health\"}}] ({0})"
    )]
    NotARouteTable(String),
}

/// Reads the route table from the contract command's standard output: the whole output, or else
/// its last line that is a JSON array (a script may log before it).
pub fn parse_route_table(stdout: &str) -> Result<Vec<RouteEntry>, ContractError> {
    let whole = serde_json::from_str::<Vec<RouteEntry>>(stdout.trim());
    let entries = match whole {
        Ok(e) => e,
        Err(first) => stdout
            .lines()
            .rev()
            .map(str::trim)
            .filter(|l| l.starts_with('['))
            .find_map(|l| serde_json::from_str::<Vec<RouteEntry>>(l).ok())
            .ok_or_else(|| ContractError::NotARouteTable(first.to_string()))?,
    };
    if let Some(bad) = entries
        .iter()
        .find(|e| !e.path.starts_with('/') || e.method.trim().is_empty())
    {
        return Err(ContractError::NotARouteTable(format!(
            "a route needs a method and a path starting with /: {} {}",
            bad.method, bad.path
        )));
    }
    Ok(entries)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum RouteDiffKind {
    Added,
    Removed,
    Changed,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RouteDiff {
    pub route: Route,
    pub kind: RouteDiffKind,
}

/// Which side of the contract check printed what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableSide {
    /// The canonical base the Candidate was composed on.
    Base,
    Candidate,
}

/// What the base's contract command gave. A base with no contract script (a new project at S0
/// has only `.gitignore`) has no routes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BaseTable<'a> {
    /// The base has no such script: an empty route table.
    NoScript,
    /// The command ran: its exit code and standard output.
    Ran { exit_code: Option<i64>, stdout: &'a str },
}

/// Reads both route tables, naming the side that failed. A base with no contract script, or whose
/// contract command printed nothing, has an empty route table; a base command that failed, or a
/// Candidate's output that is not a route table, fails the check and says whose it was.
pub fn read_route_tables(
    candidate_stdout: &str,
    candidate_exit: Option<i64>,
    base: &BaseTable<'_>,
) -> Result<(Vec<RouteEntry>, Vec<RouteEntry>), String> {
    let side = |side: TableSide, stdout: &str, exit: Option<i64>| -> Result<Vec<RouteEntry>, String> {
        let who = match side {
            TableSide::Base => "the base's contract command",
            TableSide::Candidate => "the Candidate's contract command",
        };
        if exit != Some(0) {
            return Err(format!("{who} failed ({})", crate::check::exit_words(exit)));
        }
        if side == TableSide::Base && stdout.trim().is_empty() {
            return Ok(Vec::new());
        }
        parse_route_table(stdout).map_err(|e| format!("{who} {e}"))
    };
    let cand = side(TableSide::Candidate, candidate_stdout, candidate_exit)?;
    let base = match base {
        BaseTable::NoScript => Vec::new(),
        BaseTable::Ran { exit_code, stdout } => side(TableSide::Base, stdout, *exit_code)?,
    };
    Ok((cand, base))
}

/// The script a `bun run <script>` command runs (the base may not have it).
pub fn run_script_name(argv: &[String]) -> Option<&str> {
    match argv {
        [bun, run, script, ..] if bun == "bun" && run == "run" && !script.starts_with('-') => Some(script),
        _ => None,
    }
}

/// What the `contract` check found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContractComparison {
    /// Every difference between the base and the Candidate route tables.
    pub diffs: Vec<RouteDiff>,
    /// The differences no declaration covers: the check fails when there is one.
    pub undeclared: Vec<RouteDiff>,
}

impl ContractComparison {
    pub fn passes(&self) -> bool {
        self.undeclared.is_empty()
    }

    /// The Evidence summary, before the runner suffix.
    pub fn summary(&self) -> String {
        if self.passes() {
            return match self.diffs.len() {
                0 => "route table unchanged".into(),
                n => format!(
                    "route table matches the declared contract changes ({n} route{} changed)",
                    if n == 1 { "" } else { "s" }
                ),
            };
        }
        let list: Vec<String> = self
            .undeclared
            .iter()
            .map(|d| {
                let kind = match d.kind {
                    RouteDiffKind::Added => "added",
                    RouteDiffKind::Removed => "removed",
                    RouteDiffKind::Changed => "changed",
                };
                format!("{kind} {}", d.route)
            })
            .collect();
        format!("undeclared route changes: {}", list.join(", "))
    }
}

/// Compares the base route table with the Candidate's against the declared changes. An added or
/// changed route must be covered by a declared change, a removed route by a declared removal.
/// A declaration of something the table does not show (a change in behaviour the table cannot see)
/// is not a failure.
pub fn compare_route_tables(
    base: &[RouteEntry],
    candidate: &[RouteEntry],
    declared: &ContractDeclarations,
) -> ContractComparison {
    type Table = BTreeMap<(String, String), (Route, BTreeSet<String>)>;
    let index = |t: &[RouteEntry]| -> Table {
        let mut m: Table = BTreeMap::new();
        for e in t {
            let r = e.route();
            let key = (r.method.clone().unwrap_or_default(), r.path_key());
            let shape = serde_json::to_string(&e.shape).unwrap_or_default();
            m.entry(key).or_insert_with(|| (r, BTreeSet::new())).1.insert(shape);
        }
        m
    };
    let (b, c) = (index(base), index(candidate));
    let mut diffs = Vec::new();
    for (key, (route, shape)) in &c {
        match b.get(key) {
            None => diffs.push(RouteDiff {
                route: route.clone(),
                kind: RouteDiffKind::Added,
            }),
            Some((_, base_shape)) if base_shape != shape => diffs.push(RouteDiff {
                route: route.clone(),
                kind: RouteDiffKind::Changed,
            }),
            Some(_) => {}
        }
    }
    for (key, (route, _)) in &b {
        if !c.contains_key(key) {
            diffs.push(RouteDiff {
                route: route.clone(),
                kind: RouteDiffKind::Removed,
            });
        }
    }
    diffs.sort();
    let covered = |d: &RouteDiff| {
        let want = match d.kind {
            RouteDiffKind::Removed => RouteChangeKind::Removed,
            RouteDiffKind::Added | RouteDiffKind::Changed => RouteChangeKind::Changed,
        };
        declared
            .changes
            .iter()
            .any(|ch| ch.kind == want && ch.route.covers(&d.route))
    };
    let undeclared = diffs.iter().filter(|d| !covered(d)).cloned().collect();
    ContractComparison { diffs, undeclared }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn changed(m: &str, p: &str) -> RouteChange {
        RouteChange {
            route: Route::new(m, p),
            kind: RouteChangeKind::Changed,
        }
    }

    fn removed(m: &str, p: &str) -> RouteChange {
        RouteChange {
            route: Route::new(m, p),
            kind: RouteChangeKind::Removed,
        }
    }

    fn changes_of(line: &str) -> Vec<RouteChange> {
        match parse_contract_change(line) {
            ContractLine::Changes { changes, .. } => changes,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn a_route_keeps_only_its_method_and_path() {
        assert_eq!(
            changes_of("Adds GET /api/report?month=YYYY-MM."),
            [changed("GET", "/api/report")]
        );
        assert_eq!(changes_of("Adds `POST /api/todos`, "), [changed("POST", "/api/todos")]);
        assert_eq!(
            changes_of("Changes (PATCH /api/todos/:id)."),
            [changed("PATCH", "/api/todos/:id")]
        );
        assert_eq!(
            changes_of("Adds GET /api/items/{id}."),
            [changed("GET", "/api/items/{id}")]
        );
    }

    #[test]
    fn a_delete_route_with_a_new_response_changes_that_route() {
        assert_eq!(
            changes_of("DELETE /api/todos/:id -> {ok:true}"),
            [changed("DELETE", "/api/todos/:id")]
        );
    }

    #[test]
    fn only_removal_wording_removes_a_route() {
        assert_eq!(
            changes_of("Removes DELETE /api/todos/:id"),
            [removed("DELETE", "/api/todos/:id")]
        );
        assert_eq!(
            changes_of("GET /api/legacy is removed."),
            [removed("GET", "/api/legacy")]
        );
        assert_eq!(
            changes_of("GET /api/legacy is no longer served"),
            [removed("GET", "/api/legacy")]
        );
        assert_eq!(
            changes_of("Removes the dueDate field from GET /api/todos"),
            [changed("GET", "/api/todos")]
        );
    }

    #[test]
    fn method_names_are_never_verbs() {
        // DELETE before a path is a route; it does not make the line a removal.
        assert_eq!(
            changes_of("DELETE /api/todos/:id now answers 204"),
            [changed("DELETE", "/api/todos/:id")]
        );
        assert_eq!(
            changes_of("PUT /api/todos/:id replaces the whole todo"),
            [changed("PUT", "/api/todos/:id")]
        );
    }

    #[test]
    fn none_and_no_change_lines_are_not_contract_changes() {
        for line in [
            "None",
            "none.",
            "No change",
            "No changes to the API",
            "N/A",
            "- None",
            "",
        ] {
            assert_eq!(parse_contract_change(line), ContractLine::NoChange, "{line}");
        }
        assert!(!parse_contract_change("None").is_change());
        assert_eq!(
            parse_contract_change("No change to GET /api/todos"),
            ContractLine::NoChange
        );
    }

    #[test]
    fn a_line_that_only_uses_routes_gives_consumed_contracts() {
        let line = parse_contract_change("Uses GET /api/todos and calls POST /api/todos.");
        assert_eq!(
            line,
            ContractLine::Consumes {
                routes: vec![Route::new("GET", "/api/todos"), Route::new("POST", "/api/todos")]
            }
        );
        assert!(!line.is_change());
        assert!(matches!(
            parse_contract_change("Consumes GET /api/health"),
            ContractLine::Consumes { .. }
        ));
    }

    #[test]
    fn a_line_that_changes_one_route_and_uses_another_keeps_them_apart() {
        let line = parse_contract_change("Adds POST /api/todos, which calls GET /api/users; removes GET /api/old");
        assert_eq!(
            line,
            ContractLine::Changes {
                changes: vec![removed("GET", "/api/old"), changed("POST", "/api/todos")],
                consumed: vec![Route::new("GET", "/api/users")],
            }
        );
    }

    #[test]
    fn a_verb_carries_over_a_list_of_routes() {
        assert_eq!(
            changes_of("Removes GET /api/a and GET /api/b"),
            [removed("GET", "/api/a"), removed("GET", "/api/b")]
        );
    }

    #[test]
    fn a_negated_change_is_not_a_change() {
        assert_eq!(
            parse_contract_change("Does not change GET /api/todos"),
            ContractLine::Consumes {
                routes: vec![Route::new("GET", "/api/todos")]
            }
        );
    }

    #[test]
    fn a_path_without_a_method_stands_for_every_method_on_it() {
        let c = changes_of("Adds a dueDate field to /api/todos responses");
        assert_eq!(
            c,
            [RouteChange {
                route: Route {
                    method: None,
                    path: "/api/todos".into()
                },
                kind: RouteChangeKind::Changed
            }]
        );
        assert!(c[0].route.covers(&Route::new("GET", "/api/todos")));
        assert!(c[0].route.covers(&Route::new("POST", "/api/todos/")));
    }

    #[test]
    fn a_change_without_a_route_is_unrouted() {
        assert_eq!(
            parse_contract_change("Todo gains a dueDate field"),
            ContractLine::Unrouted
        );
    }

    #[test]
    fn declarations_of_several_lines_merge_without_repeats() {
        let d = parse_contract_changes(&[
            "Adds POST /api/todos",
            "Adds POST /api/todos.",
            "Uses GET /api/health",
            "None",
            "Todo gains a dueDate field",
        ]);
        assert_eq!(d.changes, [changed("POST", "/api/todos")]);
        assert_eq!(d.consumed_contracts, [Route::new("GET", "/api/health")]);
        assert_eq!(d.unrouted, ["Todo gains a dueDate field"]);
    }

    fn table(json: &str) -> Vec<RouteEntry> {
        parse_route_table(json).unwrap()
    }

    const BASE: &str = r#"[{"method":"GET","path":"/api/health"},{"method":"GET","path":"/api/todos"},
        {"method":"DELETE","path":"/api/todos/:id","response":{"status":204}}]"#;

    #[test]
    fn an_undeclared_added_route_fails_with_the_list() {
        let cand = table(
            r#"[{"method":"GET","path":"/api/health"},{"method":"GET","path":"/api/todos"},
            {"method":"DELETE","path":"/api/todos/:id","response":{"status":204}},
            {"method":"POST","path":"/api/secret"}]"#,
        );
        let cmp = compare_route_tables(&table(BASE), &cand, &ContractDeclarations::default());
        assert!(!cmp.passes());
        assert_eq!(cmp.summary(), "undeclared route changes: added POST /api/secret");
        let declared = parse_contract_changes(&["Adds POST /api/secret"]);
        assert!(compare_route_tables(&table(BASE), &cand, &declared).passes());
    }

    #[test]
    fn a_removed_route_needs_a_declared_removal() {
        let cand = table(
            r#"[{"method":"GET","path":"/api/health"},
                {"method":"DELETE","path":"/api/todos/:id","response":{"status":204}}]"#,
        );
        let as_change = parse_contract_changes(&["Changes GET /api/todos"]);
        let cmp = compare_route_tables(&table(BASE), &cand, &as_change);
        assert_eq!(cmp.summary(), "undeclared route changes: removed GET /api/todos");
        let as_removal = parse_contract_changes(&["Removes GET /api/todos"]);
        assert!(compare_route_tables(&table(BASE), &cand, &as_removal).passes());
    }

    #[test]
    fn a_route_whose_shape_changed_needs_a_declared_change() {
        let cand = table(
            r#"[{"method":"GET","path":"/api/health"},{"method":"GET","path":"/api/todos"},
            {"method":"DELETE","path":"/api/todos/{todoId}","response":{"ok":true}}]"#,
        );
        let cmp = compare_route_tables(&table(BASE), &cand, &ContractDeclarations::default());
        assert_eq!(
            cmp.undeclared,
            [RouteDiff {
                route: Route::new("DELETE", "/api/todos/{todoId}"),
                kind: RouteDiffKind::Changed
            }]
        );
        let declared = parse_contract_changes(&["DELETE /api/todos/:id -> {ok:true}"]);
        let cmp = compare_route_tables(&table(BASE), &cand, &declared);
        assert!(cmp.passes());
        assert_eq!(
            cmp.summary(),
            "route table matches the declared contract changes (1 route changed)"
        );
    }

    #[test]
    fn an_unchanged_table_passes_whatever_was_declared() {
        let declared = parse_contract_changes(&["Adds POST /api/todos"]);
        let cmp = compare_route_tables(&table(BASE), &table(BASE), &declared);
        assert!(cmp.passes());
        assert_eq!(cmp.summary(), "route table unchanged");
    }

    #[test]
    fn the_route_table_may_follow_log_lines() {
        let out = "$ bun src/contract.ts\nloading routes\n[{\"method\":\"get\",\"path\":\"/api/health/\"}]\n";
        let t = parse_route_table(out).unwrap();
        assert_eq!(t[0].route(), Route::new("GET", "/api/health"));
        assert!(parse_route_table("no table here").is_err());
        assert!(parse_route_table(r#"[{"method":"GET","path":"api"}]"#).is_err());
        assert!(parse_route_table(r#"{"routes":[]}"#).is_err());
    }

    fn method() -> impl Strategy<Value = &'static str> {
        prop::sample::select(DECLARED_METHODS.to_vec())
    }

    fn path() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof!["[a-z][a-z0-9-]{0,8}", "[a-z]{1,6}".prop_map(|s| format!(":{s}"))],
            1..5,
        )
        .prop_map(|segs| format!("/{}", segs.join("/")))
    }

    proptest! {
        #[test]
        fn parsing_any_line_never_panics(line in any::<String>()) {
            let _ = parse_contract_change(&line);
        }

        #[test]
        fn parsing_any_line_of_route_like_words_never_panics(
            words in prop::collection::vec(
                prop_oneof![
                    Just("GET".to_string()), Just("DELETE".to_string()), Just("->".to_string()),
                    Just("removes".to_string()), Just("uses".to_string()), Just("no".to_string()),
                    Just("longer".to_string()), Just("from".to_string()), Just(";".to_string()),
                    "/[a-z:{}\\[\\]?.#/]{0,12}", "[`'\"(]{0,2}[A-Za-z]{0,6}[.,;:)`]{0,2}", "\\PC{0,4}",
                ],
                0..16,
            )
        ) {
            let line = words.join(" ");
            let parsed = parse_contract_change(&line);
            if let ContractLine::Changes { changes, .. } = parsed {
                prop_assert!(!changes.is_empty());
                for c in changes {
                    prop_assert!(c.route.path.starts_with('/'));
                    prop_assert!(!c.route.path.contains('?') && !c.route.path.contains('#'));
                }
            }
        }

        #[test]
        fn a_declared_route_is_read_exactly_whatever_trails_it(
            m in method(),
            p in path(),
            query in prop::option::of("[a-z]{1,5}=[A-Z-]{1,7}"),
            punct in "[.,;:!)]{0,2}",
        ) {
            let q = query.map(|q| format!("?{q}")).unwrap_or_default();
            let line = format!("Adds {m} {p}{q}{punct}");
            prop_assert_eq!(changes_of(&line), vec![changed(m, &p)]);
        }

        #[test]
        fn a_method_before_a_path_is_never_taken_for_a_verb(m in method(), p in path()) {
            let line = format!("{m} {p} -> {{ok:true}}");
            prop_assert_eq!(changes_of(&line), vec![changed(m, &p)]);
            let removal = format!("Removes {m} {p}");
            prop_assert_eq!(changes_of(&removal), vec![removed(m, &p)]);
        }

        #[test]
        fn a_table_compared_with_itself_has_no_difference(
            routes in prop::collection::vec((method(), path()), 0..8)
        ) {
            let t: Vec<RouteEntry> = routes
                .iter()
                .map(|(m, p)| RouteEntry { method: m.to_string(), path: p.clone(), shape: BTreeMap::new() })
                .collect();
            let cmp = compare_route_tables(&t, &t, &ContractDeclarations::default());
            prop_assert!(cmp.diffs.is_empty());
        }

        #[test]
        fn every_added_route_is_undeclared_until_declared(
            routes in prop::collection::btree_set((method(), path()), 1..6)
        ) {
            let t: Vec<RouteEntry> = routes
                .iter()
                .map(|(m, p)| RouteEntry { method: m.to_string(), path: p.clone(), shape: BTreeMap::new() })
                .collect();
            let cmp = compare_route_tables(&[], &t, &ContractDeclarations::default());
            prop_assert_eq!(cmp.undeclared.len(), cmp.diffs.len());
            let lines: Vec<String> = routes.iter().map(|(m, p)| format!("Adds {m} {p}")).collect();
            prop_assert!(compare_route_tables(&[], &t, &parse_contract_changes(&lines)).passes());
        }
    }

    #[test]
    fn a_base_with_no_contract_script_or_no_output_has_an_empty_route_table() {
        let cand = r#"[{"method":"GET","path":"/api/health"}]"#;
        let (c, b) = read_route_tables(cand, Some(0), &BaseTable::NoScript).unwrap();
        assert_eq!((c.len(), b.len()), (1, 0));
        let (_, b) = read_route_tables(
            cand,
            Some(0),
            &BaseTable::Ran {
                exit_code: Some(0),
                stdout: "  \n",
            },
        )
        .unwrap();
        assert!(b.is_empty());
        let (_, b) = read_route_tables(
            cand,
            Some(0),
            &BaseTable::Ran {
                exit_code: Some(0),
                stdout: "[]",
            },
        )
        .unwrap();
        assert!(b.is_empty());
    }

    #[test]
    fn the_summary_names_the_side_that_failed() {
        let good = r#"[{"method":"GET","path":"/api/health"}]"#;
        let base_failed = read_route_tables(
            good,
            Some(0),
            &BaseTable::Ran {
                exit_code: Some(1),
                stdout: "",
            },
        )
        .unwrap_err();
        assert_eq!(base_failed, "the base's contract command failed (exit 1)");
        let base_garbled = read_route_tables(
            good,
            Some(0),
            &BaseTable::Ran {
                exit_code: Some(0),
                stdout: "hello",
            },
        )
        .unwrap_err();
        assert!(
            base_garbled.starts_with("the base's contract command printed no route table"),
            "{base_garbled}"
        );
        let cand = read_route_tables("", Some(0), &BaseTable::NoScript).unwrap_err();
        assert!(
            cand.starts_with("the Candidate's contract command printed no route table"),
            "{cand}"
        );
        let cand = read_route_tables(good, Some(2), &BaseTable::NoScript).unwrap_err();
        assert_eq!(cand, "the Candidate's contract command failed (exit 2)");
    }

    #[test]
    fn a_bun_run_command_names_its_script() {
        let argv = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(run_script_name(&argv("bun run contract")), Some("contract"));
        assert_eq!(run_script_name(&argv("bun run contract --json")), Some("contract"));
        assert_eq!(run_script_name(&argv("bun x contract")), None);
        assert_eq!(run_script_name(&argv("sh -c x")), None);
    }
}
