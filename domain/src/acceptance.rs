//! The acceptance check: whether the Candidate does what the person asked for, judged by a model
//! and held to what the model was shown.
//!
//! The check is optional: it ranks siblings and gates auto-promotion, it never rejects. Every part
//! a model could get wrong is decided here in code: which criteria are judged (and which other
//! checks already cover), what the model is shown and in which order under the 60,000-character
//! cap, whether its output is valid, whether each citation really occurs in what it was shown,
//! how a second opinion is merged, and what the Evidence says. The model client only carries the
//! text there and back.

use crate::approval::{GateTrigger, HumanGate};
use crate::evidence::{CheckResult, Coverage, EvidenceStatus};
use crate::plan::says_kept;
use crate::prose::{has_phrase, words};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// At most this many characters of source go to the model (ACCEPTANCE_SOURCE_CAP).
pub const ACCEPTANCE_SOURCE_CAP: usize = 60_000;
/// At most this many composed files follow the patch.
pub const MAX_COMPOSED_FILES: usize = 24;
/// A composed file larger than this is not sent.
pub const MAX_SOURCE_FILE_BYTES: usize = 60_000;
/// A quote must have at least this many characters once white space collapses.
pub const MIN_QUOTE_CHARS: usize = 8;
/// The mark of a criterion kept from a request that went live while this one ran.
pub const KEEP_MARK: &str = "Keep (from an earlier request)";
/// The tool the model records its judgement with.
pub const RECORD_ACCEPTANCE: &str = "record_acceptance";

/// A criterion the model judges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AcceptanceCriterion {
    /// `c1`, `c2`, …: what the model names in its answer.
    pub id: String,
    /// The text shown to the model; a kept criterion starts with the mark.
    pub text: String,
    /// Kept from an earlier request: `unclear` does not block.
    pub kept: bool,
}

/// Which other check covers a criterion, so the acceptance check leaves it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CoveredBy {
    /// It only states the quality gate ("typecheck and tests pass").
    QualityGate,
    /// It only guards against breakage ("other pages and API routes behave as before").
    Breakage,
    /// A latency limit: the performance check.
    Latency,
    /// Kept behaviour ("unchanged", "must remain"): the invariant checks.
    KeptBehaviour,
}

const QUALITY_SUBJECTS: &[&str] = &[
    "typecheck",
    "typechecks",
    "typechecking",
    "tsc",
    "test",
    "tests",
    "build",
    "builds",
    "lint",
    "linter",
    "ci",
    "compile",
    "compiles",
];
const QUALITY_FILLER: &[&str] = &[
    "type", "types", "check", "checks", "unit", "suite", "bun", "and", "all", "the", "a", "existing", "must", "should",
    "still", "keep", "keeps", "stay", "stays", "remain", "remains", "pass", "passes", "passing", "green", "succeed",
    "succeeds", "clean", "with", "no", "errors", "error", "warnings", "are", "is", "be", "both", "run", "runs",
    "without", "new", "every", "project", "s",
];
const BREAKAGE_PHRASES: &[&str] = &[
    "as before",
    "no regression",
    "no regressions",
    "nothing else",
    "still work",
    "still works",
    "keep working",
    "keeps working",
    "continue to work",
    "continues to work",
    "not break",
    "without breaking",
    "breaks nothing",
    "break nothing",
    "do not break",
    "does not break",
];

/// Whether another check covers `criterion`, and which.
pub fn covered_by_other_checks(criterion: &str) -> Option<CoveredBy> {
    let w = words(criterion);
    let latency_number = w.iter().any(|x| {
        x.strip_suffix("ms")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    });
    if !w.is_empty()
        && w.iter().any(|x| QUALITY_SUBJECTS.contains(&x.as_str()))
        && w.iter()
            .all(|x| QUALITY_SUBJECTS.contains(&x.as_str()) || QUALITY_FILLER.contains(&x.as_str()))
    {
        Some(CoveredBy::QualityGate)
    } else if BREAKAGE_PHRASES.iter().any(|p| has_phrase(criterion, p)) {
        Some(CoveredBy::Breakage)
    } else if latency_number
        || w.iter()
            .any(|x| matches!(x.as_str(), "p50" | "p90" | "p95" | "p99" | "latency"))
        || has_phrase(criterion, "response time")
    {
        Some(CoveredBy::Latency)
    } else if says_kept(criterion) {
        Some(CoveredBy::KeptBehaviour)
    } else {
        None
    }
}

/// `acceptanceCriteriaToJudge`: the Change's criteria, then the criteria of the requests that went
/// live while it ran (`kept`, each marked "Keep (from an earlier request)"), both without the
/// criteria other checks cover and without repeats. Empty: the plan has no acceptance check.
pub fn acceptance_criteria_to_judge(own: &[String], kept: &[String]) -> Vec<AcceptanceCriterion> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    let candidates = own.iter().map(|c| (c, false)).chain(kept.iter().map(|c| (c, true)));
    for (text, is_kept) in candidates {
        let text = text.trim();
        if text.is_empty() || covered_by_other_checks(text).is_some() || !seen.insert(words(text).join(" ")) {
            continue;
        }
        out.push(AcceptanceCriterion {
            id: format!("c{}", out.len() + 1),
            text: if is_kept {
                format!("{KEEP_MARK}: {text}")
            } else {
                text.to_owned()
            },
            kept: is_kept,
        });
    }
    out
}

/// A path the Candidate changes, as composition saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ChangedFile {
    pub path: String,
    /// Gone from the composed tree (the patch still shows it).
    pub deleted: bool,
}

/// Tests and docs go last: a path under `test/`, `tests/`, `__tests__/`, `spec/` or `docs/`, a
/// `*.test.*`, `*.spec.*` or `*_test.*` file, a Markdown, text or reStructuredText file, or a
/// licence or changelog.
pub fn is_test_or_doc(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    let segs: Vec<&str> = lower.split('/').collect();
    let name = segs.last().copied().unwrap_or_default();
    segs[..segs.len().saturating_sub(1)]
        .iter()
        .any(|s| matches!(*s, "test" | "tests" | "__tests__" | "spec" | "docs" | "doc"))
        || name.contains(".test.")
        || name.contains(".spec.")
        || name.contains("_test.")
        || [".md", ".txt", ".rst"].iter().any(|e| name.ends_with(e))
        || name.starts_with("license")
        || name.starts_with("changelog")
}

/// `composedFileOrder`: the composed files the model reads after the patch, at most 24 —
/// the changed app files; then `public/index.html`, the local `.js` and `.css` files it references,
/// `src/app.ts` and `src/worker.ts`; then the other changed files (tests and docs). Only files the
/// composed tree holds, each once.
/// - `index_references`: from [`crate::client_assets::index_references`] on the composed page.
/// - `composed_paths`: every path of the composed tree.
pub fn composed_file_order(
    changed: &[ChangedFile],
    index_references: &[String],
    composed_paths: &BTreeSet<String>,
) -> Vec<String> {
    let present = |p: &String| composed_paths.contains(p);
    let live = changed.iter().filter(|c| !c.deleted).map(|c| &c.path);
    let app = live.clone().filter(|p| !is_test_or_doc(p));
    let page = std::iter::once(crate::client_assets::INDEX_HTML.to_owned())
        .chain(
            index_references
                .iter()
                .filter(|r| [".js", ".mjs", ".css"].iter().any(|e| r.ends_with(e)))
                .cloned(),
        )
        .chain(["src/app.ts".to_owned(), "src/worker.ts".to_owned()]);
    let rest = live.filter(|p| is_test_or_doc(p));
    let mut out: Vec<String> = Vec::new();
    for p in app.cloned().chain(page).chain(rest.cloned()) {
        if out.len() == MAX_COMPOSED_FILES {
            break;
        }
        if present(&p) && !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// The Candidate patch as stored.
#[derive(Debug, Clone, Copy)]
pub struct PatchSource<'a> {
    /// The object key, `source/<project>/patches/candidates/<cand>.patch`: the path the model
    /// sees the patch under.
    pub key: &'a str,
    pub text: &'a str,
    /// The composed commit the patch was written for.
    pub commit: &'a str,
}

/// A composed file read from the fork.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub path: String,
    pub bytes: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum PartKind {
    Patch,
    File,
}

/// One piece of what the model reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct InputPart {
    pub path: String,
    pub kind: PartKind,
    pub text: String,
    /// Cut at a line boundary to stay under the cap.
    pub truncated: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    Binary,
    TooLarge,
    /// The cap was reached before it.
    OverCap,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SkippedFile {
    pub path: String,
    pub reason: SkipReason,
}

/// Everything the model is given, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AcceptanceInput {
    pub parts: Vec<InputPart>,
    pub skipped: Vec<SkippedFile>,
}

impl AcceptanceInput {
    /// Nothing readable: the check records `error`, `not_checked`.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Characters given, across all parts.
    pub fn chars(&self) -> usize {
        self.parts.iter().map(|p| p.text.chars().count()).sum()
    }
}

/// The longest prefix of `text` of at most `budget` characters that ends at a line boundary.
fn cut_at_line(text: &str, budget: usize) -> &str {
    let end = text.char_indices().nth(budget).map_or(text.len(), |(i, _)| i);
    if end == text.len() {
        return text;
    }
    text[..end].rfind('\n').map_or("", |i| &text[..=i])
}

/// How many lines of a deleted file the acceptance patch shows.
pub const DELETED_FILE_LINES: usize = 40;

/// The Candidate patch as the model reads it: a deleted file keeps the first `keep` lines of its
/// hunk (its header rewritten to count them, then a line saying how many were left out), so a
/// deleted page can still be cited while the rest of it does not crowd out the composed files.
/// Every other file is as stored.
pub fn cut_deleted_files(patch: &str, keep: usize) -> String {
    let mut out = String::with_capacity(patch.len());
    let mut section: Vec<&str> = Vec::new();
    for line in patch.split_inclusive('\n') {
        if line.starts_with("diff --git ") && !section.is_empty() {
            push_section(&mut out, &section, keep);
            section.clear();
        }
        section.push(line);
    }
    push_section(&mut out, &section, keep);
    out
}

/// One file's part of a patch (or what precedes the first file), cut when it deletes the file.
fn push_section(out: &mut String, lines: &[&str], keep: usize) {
    let hunk = lines.iter().position(|l| l.starts_with("@@ "));
    let deleted = lines.first().is_some_and(|l| l.starts_with("diff --git "))
        && lines[..hunk.unwrap_or(lines.len())]
            .iter()
            .any(|l| l.starts_with("deleted file mode") || l.trim_end() == "+++ /dev/null");
    let removed = |l: &&&str| l.starts_with('-');
    let total = hunk.map_or(0, |h| lines[h + 1..].iter().filter(removed).count());
    let (Some(h), true) = (hunk, deleted && total > keep) else {
        lines.iter().for_each(|l| out.push_str(l));
        return;
    };
    lines[..h].iter().for_each(|l| out.push_str(l));
    out.push_str(&format!("@@ -1,{keep} +0,0 @@\n"));
    for l in lines[h + 1..].iter().filter(removed).take(keep) {
        out.push_str(l);
        if !l.ends_with('\n') {
            out.push('\n');
        }
    }
    out.push_str(&format!(
        "\\ {} more lines of the deleted file are not shown\n",
        total - keep
    ));
}

/// Assembles the model's input: the Candidate patch first when it belongs to `composed_commit`
/// (each deleted file in it cut at [`DELETED_FILE_LINES`] lines), then the composed files in the order given (from [`composed_file_order`]), at most 24 of them,
/// at most 60,000 characters in all. A part that crosses the cap is cut at a line boundary and
/// marked truncated, and nothing follows it. Binary files (a NUL byte or not UTF-8) and files over
/// 60,000 bytes are not sent. `files` is `None` when the fork cannot be read: the patch alone is
/// the input.
pub fn assemble_acceptance_input(
    patch: Option<PatchSource<'_>>,
    composed_commit: &str,
    files: Option<&[SourceFile]>,
) -> AcceptanceInput {
    let mut input = AcceptanceInput::default();
    let mut budget = ACCEPTANCE_SOURCE_CAP;
    let mut full = false;
    let mut push = |input: &mut AcceptanceInput, path: &str, kind: PartKind, text: &str| {
        if full {
            input.skipped.push(SkippedFile {
                path: path.to_owned(),
                reason: SkipReason::OverCap,
            });
            return;
        }
        let kept = cut_at_line(text, budget);
        let truncated = kept.len() < text.len();
        budget -= kept.chars().count();
        full = truncated || budget == 0;
        if kept.is_empty() && truncated {
            input.skipped.push(SkippedFile {
                path: path.to_owned(),
                reason: SkipReason::OverCap,
            });
            return;
        }
        input.parts.push(InputPart {
            path: path.to_owned(),
            kind,
            text: kept.to_owned(),
            truncated,
        });
    };
    if let Some(p) = patch.filter(|p| p.commit == composed_commit) {
        push(
            &mut input,
            p.key,
            PartKind::Patch,
            &cut_deleted_files(p.text, DELETED_FILE_LINES),
        );
    }
    for f in files.unwrap_or_default().iter().take(MAX_COMPOSED_FILES) {
        if f.bytes.len() > MAX_SOURCE_FILE_BYTES {
            input.skipped.push(SkippedFile {
                path: f.path.clone(),
                reason: SkipReason::TooLarge,
            });
            continue;
        }
        match std::str::from_utf8(&f.bytes) {
            Ok(text) if !text.contains('\0') => push(&mut input, &f.path, PartKind::File, text),
            _ => input.skipped.push(SkippedFile {
                path: f.path.clone(),
                reason: SkipReason::Binary,
            }),
        }
    }
    input
}

/// What the model says of one criterion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CriterionResult {
    Met,
    NotMet,
    Unclear,
}

/// A quote of what the model was given. `text` is read as `quote`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Citation {
    pub path: String,
    #[serde(alias = "text")]
    pub quote: String,
    /// The quote is a removed line, cited to prove a removal.
    #[serde(default)]
    pub removed: bool,
}

/// One criterion as the model judged it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Judgement {
    pub id: String,
    pub result: CriterionResult,
    #[serde(default)]
    pub citation: Option<Citation>,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordAcceptance {
    criteria: Vec<Judgement>,
}

/// One tool call of a model answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub name: String,
    pub input: serde_json::Value,
}

/// The JSON schema of the `record_acceptance` tool's input.
pub fn record_acceptance_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["criteria"],
        "properties": {
            "criteria": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["id", "result"],
                    "properties": {
                        "id": {"type": "string", "description": "the criterion id, c1, c2, …"},
                        "result": {"type": "string", "enum": ["met", "not_met", "unclear"]},
                        "citation": {
                            "type": "object",
                            "additionalProperties": false,
                            "required": ["path", "quote"],
                            "properties": {
                                "path": {"type": "string", "description": "a path you were given"},
                                "quote": {"type": "string", "description": "at least 8 characters copied from that text"},
                                "removed": {"type": "boolean", "description": "the quote is a removed line of the patch"}
                            }
                        },
                        "reason": {"type": "string"}
                    }
                }
            }
        }
    })
}

/// Why a model answer is not valid (then the next model is asked, or the check records `error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidOutput {
    #[error("expected exactly one tool call, got {0}")]
    ToolCalls(usize),
    #[error("expected the tool {expected}, got {got}")]
    WrongTool { expected: &'static str, got: String },
    #[error("the tool input does not match its schema: {0}")]
    Schema(String),
    #[error("criterion {0} is judged twice")]
    Repeated(String),
    #[error("criterion {0} is not one that was asked")]
    Unknown(String),
    #[error("criterion {0} is not judged")]
    Missing(String),
}

/// Validates a model answer against the criteria it was asked: exactly one `record_acceptance`
/// call, its input of the schema, each asked criterion judged exactly once, no other.
pub fn validate_acceptance_output(
    calls: &[ToolCall],
    criteria: &[AcceptanceCriterion],
) -> Result<Vec<Judgement>, InvalidOutput> {
    let [call] = calls else {
        return Err(InvalidOutput::ToolCalls(calls.len()));
    };
    if call.name != RECORD_ACCEPTANCE {
        return Err(InvalidOutput::WrongTool {
            expected: RECORD_ACCEPTANCE,
            got: call.name.clone(),
        });
    }
    let record: RecordAcceptance =
        serde_json::from_value(call.input.clone()).map_err(|e| InvalidOutput::Schema(e.to_string()))?;
    let asked: BTreeSet<&str> = criteria.iter().map(|c| c.id.as_str()).collect();
    let mut seen = BTreeSet::new();
    for j in &record.criteria {
        if !asked.contains(j.id.as_str()) {
            return Err(InvalidOutput::Unknown(j.id.clone()));
        }
        if !seen.insert(j.id.as_str()) {
            return Err(InvalidOutput::Repeated(j.id.clone()));
        }
    }
    if let Some(missing) = criteria.iter().find(|c| !seen.contains(c.id.as_str())) {
        return Err(InvalidOutput::Missing(missing.id.clone()));
    }
    Ok(record.criteria)
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One file's lines in a unified diff.
#[derive(Default)]
struct PatchFile {
    /// Added and context lines, without their marker.
    kept: Vec<String>,
    removed: Vec<String>,
}

/// Reads a git patch into its files' added-or-context and removed lines. Hunk line counts decide
/// what is a line of the hunk, so an added line starting `++` is not taken for a header.
fn read_patch(patch: &str) -> BTreeMap<String, PatchFile> {
    let mut files: BTreeMap<String, PatchFile> = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut old_path: Option<String> = None;
    let (mut old_left, mut new_left) = (0u64, 0u64);
    let count = |spec: &str| -> u64 {
        spec.split_once(',')
            .map_or(Some(1), |(_, n)| n.parse().ok())
            .unwrap_or(0)
    };
    for line in patch.lines() {
        if old_left > 0 || new_left > 0 {
            let Some(path) = &current else { break };
            let file = files.entry(path.clone()).or_default();
            match line.as_bytes().first() {
                Some(b'+') => {
                    file.kept.push(line[1..].to_owned());
                    new_left = new_left.saturating_sub(1);
                }
                Some(b'-') => {
                    file.removed.push(line[1..].to_owned());
                    old_left = old_left.saturating_sub(1);
                }
                Some(b'\\') => {}
                _ => {
                    file.kept.push(line.get(1..).unwrap_or_default().to_owned());
                    old_left = old_left.saturating_sub(1);
                    new_left = new_left.saturating_sub(1);
                }
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("diff --git ") {
            current = rest.rsplit_once(" b/").map(|(_, b)| b.to_owned());
            old_path = rest
                .split_once(" b/")
                .map(|(a, _)| a.trim_start_matches("a/").to_owned());
        } else if let Some(p) = line.strip_prefix("+++ ") {
            if p != "/dev/null" {
                current = Some(p.trim_start_matches("b/").to_owned());
            } else if let Some(old) = &old_path {
                current = Some(old.clone());
            }
        } else if let Some(p) = line.strip_prefix("--- ")
            && p != "/dev/null"
        {
            old_path = Some(p.trim_start_matches("a/").to_owned());
            if current.is_none() {
                current = old_path.clone();
            }
        } else if let Some(h) = line.strip_prefix("@@ ") {
            let mut specs = h.split_whitespace();
            let old = specs.next().and_then(|s| s.strip_prefix('-')).map_or(0, count);
            let new = specs.next().and_then(|s| s.strip_prefix('+')).map_or(0, count);
            old_left = old;
            new_left = new;
        }
    }
    files
}

/// What the model was given, read for citations.
struct Given {
    /// Composed file path → its collapsed text.
    files: BTreeMap<String, String>,
    /// The patch's key, and its files' collapsed kept and removed text.
    patch_key: Option<String>,
    patch_files: BTreeMap<String, (String, String)>,
}

impl Given {
    fn new(input: &AcceptanceInput) -> Given {
        let mut g = Given {
            files: BTreeMap::new(),
            patch_key: None,
            patch_files: BTreeMap::new(),
        };
        for part in &input.parts {
            match part.kind {
                PartKind::File => {
                    g.files.insert(part.path.clone(), collapse(&part.text));
                }
                PartKind::Patch => {
                    g.patch_key = Some(part.path.clone());
                    for (path, f) in read_patch(&part.text) {
                        g.patch_files
                            .insert(path, (collapse(&f.kept.join("\n")), collapse(&f.removed.join("\n"))));
                    }
                }
            }
        }
        g
    }

    /// The kept (added or context) and removed text a citation's path names.
    fn patch_texts(&self, path: &str) -> Vec<(&str, &str)> {
        if self.patch_key.as_deref() == Some(path) {
            self.patch_files
                .values()
                .map(|(k, r)| (k.as_str(), r.as_str()))
                .collect()
        } else {
            self.patch_files
                .get(path)
                .map(|(k, r)| vec![(k.as_str(), r.as_str())])
                .unwrap_or_default()
        }
    }

    fn named(&self, path: &str) -> bool {
        self.files.contains_key(path) || self.patch_key.as_deref() == Some(path) || self.patch_files.contains_key(path)
    }

    /// Whether any text the model received (a composed file, or the patch's added and context
    /// lines) holds the quote.
    fn anywhere(&self, quote: &str) -> bool {
        self.files.values().any(|t| t.contains(quote)) || self.patch_files.values().any(|(k, _)| k.contains(quote))
    }
}

/// `citationValid`:
/// - the path was given to the model (a composed file, the patch, or a file in the patch) and the
///   quote occurs in that text;
/// - in a composed file the quote may come from any line; in the patch only from added or context
///   lines;
/// - a removed line proves a removal only with `removed: true`, and only when no text the model
///   received contains the quote;
/// - the quote has at least 8 characters once white space collapses.
///
/// A quote copied from the patch with its diff markers (`+`, `-` or a space at the start of each
/// line) is read without them as well.
pub fn citation_valid(citation: &Citation, input: &AcceptanceInput) -> bool {
    let given = Given::new(input);
    if !given.named(&citation.path) {
        return false;
    }
    let marker = if citation.removed { '-' } else { '+' };
    let unmarked: String = citation
        .quote
        .lines()
        .map(|l| l.strip_prefix([marker, ' ']).unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    let patch = given.patch_texts(&citation.path);
    [collapse(&citation.quote), collapse(&unmarked)]
        .into_iter()
        .filter(|q| q.chars().count() >= MIN_QUOTE_CHARS)
        .any(|quote| {
            if citation.removed {
                patch.iter().any(|(_, removed)| removed.contains(&quote)) && !given.anywhere(&quote)
            } else {
                given.files.get(&citation.path).is_some_and(|t| t.contains(&quote))
                    || patch.iter().any(|(kept, _)| kept.contains(&quote))
            }
        })
}

/// A criterion with its final result, as stored in `acceptance_json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct JudgedCriterion {
    pub id: String,
    pub text: String,
    pub kept: bool,
    pub result: CriterionResult,
    pub citation: Option<Citation>,
    pub reason: Option<String>,
    /// The model said `met` but its citation was not valid, so it counts as `unclear`.
    pub citation_rejected: bool,
}

/// Joins a valid answer with its criteria and checks every citation: a `met` without a valid
/// citation counts as `unclear`.
pub fn judge_with_citations(
    criteria: &[AcceptanceCriterion],
    judgements: &[Judgement],
    input: &AcceptanceInput,
) -> Vec<JudgedCriterion> {
    criteria
        .iter()
        .filter_map(|c| {
            let j = judgements.iter().find(|j| j.id == c.id)?;
            let rejected =
                j.result == CriterionResult::Met && !j.citation.as_ref().is_some_and(|ct| citation_valid(ct, input));
            Some(JudgedCriterion {
                id: c.id.clone(),
                text: c.text.clone(),
                kept: c.kept,
                result: if rejected { CriterionResult::Unclear } else { j.result },
                citation: j.citation.clone(),
                reason: j.reason.clone(),
                citation_rejected: rejected,
            })
        })
        .collect()
}

/// The criteria of the request itself that the first answer left `unclear`: Sonnet judges these
/// once. Kept criteria are not asked again (`unclear` there does not block).
pub fn criteria_for_second_opinion(judged: &[JudgedCriterion]) -> Vec<AcceptanceCriterion> {
    judged
        .iter()
        .filter(|j| !j.kept && j.result == CriterionResult::Unclear)
        .map(|j| AcceptanceCriterion {
            id: j.id.clone(),
            text: j.text.clone(),
            kept: false,
        })
        .collect()
}

/// Applies the second opinion (already through [`judge_with_citations`]) to the criteria the first
/// left unclear, and to nothing else.
pub fn merge_second_opinion(first: &[JudgedCriterion], second: &[JudgedCriterion]) -> Vec<JudgedCriterion> {
    first
        .iter()
        .map(|f| {
            let asked = !f.kept && f.result == CriterionResult::Unclear;
            match second.iter().find(|s| s.id == f.id) {
                Some(s) if asked => s.clone(),
                _ => f.clone(),
            }
        })
        .collect()
}

/// How the acceptance check ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcceptanceRun {
    /// The model judged every criterion (citations checked, second opinion merged).
    Judged(Vec<JudgedCriterion>),
    /// Both models gave no valid answer, or the call failed.
    ModelError(String),
    /// A meter refused the call before it was made (Change budget, daily call cap, monthly budget).
    Refused(String),
    /// No patch and no composed file could be read.
    NoReadableSource,
    /// An earlier check has no passing result: the Candidate cannot ship, no model is called.
    EarlierCheckFailed,
}

/// The acceptance Evidence and the numbers for `metrics_json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AcceptanceOutcome {
    pub result: CheckResult,
    /// Of the request's own criteria.
    pub criteria_met: u32,
    pub criteria_total: u32,
    /// The request's criteria not met, then those unclear, by text.
    pub not_met: Vec<String>,
    pub unclear: Vec<String>,
    /// Kept criteria found not met.
    pub kept_not_met: Vec<String>,
}

impl AcceptanceOutcome {
    pub fn passed(&self) -> bool {
        self.result.status == EvidenceStatus::Pass && self.result.coverage == Coverage::CheckedSupported
    }
}

fn label(text: &str) -> String {
    text.strip_prefix(KEEP_MARK)
        .map(|t| t.trim_start_matches(':').trim())
        .unwrap_or(text)
        .trim()
        .trim_end_matches('.')
        .to_owned()
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The acceptance Evidence: `pass`/`checked_supported` when every criterion of the request is
/// met and no kept criterion is `not_met` (a kept `unclear` does not block); `fail`/
/// `checked_supported` in every other judged case, summarised as "2 of 3 criteria met; not met:
/// calendar view"; `error`/`not_checked` on a model error, a refused call or no readable source;
/// `skipped`/`not_checked` when an earlier check has no passing result.
pub fn acceptance_outcome(run: &AcceptanceRun) -> AcceptanceOutcome {
    let gap = |status, summary: String| AcceptanceOutcome {
        result: CheckResult::new(status, Coverage::NotChecked, &summary),
        criteria_met: 0,
        criteria_total: 0,
        not_met: vec![],
        unclear: vec![],
        kept_not_met: vec![],
    };
    let judged = match run {
        AcceptanceRun::Judged(j) => j,
        AcceptanceRun::ModelError(e) => return gap(EvidenceStatus::Error, format!("model error: {e}")),
        AcceptanceRun::Refused(meter) => return gap(EvidenceStatus::Error, format!("model call refused: {meter}")),
        AcceptanceRun::NoReadableSource => {
            return gap(
                EvidenceStatus::Error,
                "no readable source: neither the patch nor the fork".into(),
            );
        }
        AcceptanceRun::EarlierCheckFailed => {
            return gap(
                EvidenceStatus::Skipped,
                "not judged: an earlier check has no passing result".into(),
            );
        }
    };
    let own: Vec<&JudgedCriterion> = judged.iter().filter(|j| !j.kept).collect();
    let with = |list: &[&JudgedCriterion], r: CriterionResult| -> Vec<String> {
        list.iter().filter(|j| j.result == r).map(|j| label(&j.text)).collect()
    };
    let met = own.iter().filter(|j| j.result == CriterionResult::Met).count();
    let not_met = with(&own, CriterionResult::NotMet);
    let unclear = with(&own, CriterionResult::Unclear);
    let kept: Vec<&JudgedCriterion> = judged.iter().filter(|j| j.kept).collect();
    let kept_not_met = with(&kept, CriterionResult::NotMet);
    let mut summary = format!("{met} of {} criteria met", own.len());
    if !not_met.is_empty() {
        summary.push_str(&format!("; not met: {}", not_met.join(", ")));
    }
    if !unclear.is_empty() {
        summary.push_str(&format!("; unclear: {}", unclear.join(", ")));
    }
    if !kept_not_met.is_empty() {
        summary.push_str(&format!("; kept criteria not met: {}", kept_not_met.join(", ")));
    }
    let pass = met == own.len() && kept_not_met.is_empty();
    AcceptanceOutcome {
        result: CheckResult::new(
            if pass {
                EvidenceStatus::Pass
            } else {
                EvidenceStatus::Fail
            },
            Coverage::CheckedSupported,
            &summary,
        ),
        criteria_met: count(met),
        criteria_total: count(own.len()),
        not_met,
        unclear,
        kept_not_met,
    }
}

/// The acceptance hold for a selected Candidate whose acceptance did not pass:
/// "Best candidate meets 2 of 3 criteria; not met: calendar view."
pub fn acceptance_hold(outcome: &AcceptanceOutcome) -> HumanGate {
    let reason = if outcome.result.coverage == Coverage::CheckedSupported {
        let mut r = format!(
            "Best candidate meets {} of {} criteria",
            outcome.criteria_met, outcome.criteria_total
        );
        let not_met: Vec<String> = outcome.not_met.iter().chain(&outcome.kept_not_met).cloned().collect();
        if !not_met.is_empty() {
            r.push_str(&format!("; not met: {}", not_met.join(", ")));
        }
        if !outcome.unclear.is_empty() {
            r.push_str(&format!("; unclear: {}", outcome.unclear.join(", ")));
        }
        r.push('.');
        r
    } else {
        let why = outcome
            .result
            .summary
            .strip_suffix(crate::check::RUNNER_SUFFIX)
            .unwrap_or(&outcome.result.summary)
            .trim();
        format!("The acceptance check could not judge the best candidate ({why}).")
    };
    HumanGate {
        trigger: GateTrigger::Acceptance,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::approval_reason;
    use proptest::prelude::*;
    use serde_json::json;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn criteria_other_checks_cover_are_left_out() {
        let own = s(&[
            "A calendar view shows each todo on its due date",
            "typecheck and tests pass",
            "Other pages and API routes behave as before",
            "GET /api/todos answers in under 200ms",
            "The p95 stays low",
            "The export format is unchanged",
            "Sorting must remain stable",
            "All tests pass.",
        ]);
        let judged = acceptance_criteria_to_judge(&own, &[]);
        assert_eq!(
            judged,
            [AcceptanceCriterion {
                id: "c1".into(),
                text: "A calendar view shows each todo on its due date".into(),
                kept: false
            }]
        );
        assert_eq!(
            covered_by_other_checks("typecheck and tests pass"),
            Some(CoveredBy::QualityGate)
        );
        assert_eq!(
            covered_by_other_checks("Other pages and API routes behave as before"),
            Some(CoveredBy::Breakage)
        );
        assert_eq!(covered_by_other_checks("p95 below 300ms"), Some(CoveredBy::Latency));
        assert_eq!(
            covered_by_other_checks("Sorting must remain stable"),
            Some(CoveredBy::KeptBehaviour)
        );
        assert_eq!(covered_by_other_checks("Tests for the calendar cover leap years"), None);
    }

    #[test]
    fn kept_criteria_of_requests_that_went_live_are_marked_and_follow() {
        let judged = acceptance_criteria_to_judge(
            &s(&["Todos can be tagged"]),
            &s(&[
                "The list shows due dates",
                "typecheck and tests pass",
                "todos can be TAGGED",
            ]),
        );
        assert_eq!(judged.len(), 2);
        assert_eq!(judged[1].id, "c2");
        assert_eq!(
            judged[1].text,
            "Keep (from an earlier request): The list shows due dates"
        );
        assert!(judged[1].kept);
    }

    #[test]
    fn no_criterion_left_means_no_acceptance_check() {
        assert!(acceptance_criteria_to_judge(&s(&["typecheck and tests pass"]), &[]).is_empty());
    }

    fn changed(p: &[&str]) -> Vec<ChangedFile> {
        p.iter()
            .map(|p| ChangedFile {
                path: p.trim_start_matches('-').into(),
                deleted: p.starts_with('-'),
            })
            .collect()
    }

    #[test]
    fn composed_files_come_app_first_then_the_page_then_tests_and_docs() {
        let tree: BTreeSet<String> = s(&[
            "src/app.ts",
            "src/calendar.ts",
            "public/index.html",
            "public/app.js",
            "public/app.css",
            "tests/calendar.test.ts",
            "README.md",
        ])
        .into_iter()
        .collect();
        let order = composed_file_order(
            &changed(&[
                "README.md",
                "tests/calendar.test.ts",
                "src/calendar.ts",
                "-src/old.ts",
                "public/app.css",
            ]),
            &s(&["public/app.css", "public/app.js", "public/logo.png"]),
            &tree,
        );
        assert_eq!(
            order,
            [
                "src/calendar.ts",
                "public/app.css",
                "public/index.html",
                "public/app.js",
                "src/app.ts",
                "README.md",
                "tests/calendar.test.ts"
            ]
        );
    }

    #[test]
    fn at_most_24_composed_files_are_read() {
        let names: Vec<String> = (0..40).map(|i| format!("src/f{i}.ts")).collect();
        let tree: BTreeSet<String> = names.iter().cloned().collect();
        let files: Vec<ChangedFile> = names
            .iter()
            .map(|p| ChangedFile {
                path: p.clone(),
                deleted: false,
            })
            .collect();
        assert_eq!(composed_file_order(&files, &[], &tree).len(), MAX_COMPOSED_FILES);
    }

    const COMMIT: &str = "c0ffee";
    const KEY: &str = "source/proj_1/patches/candidates/cand_1.patch";

    fn file(path: &str, text: &str) -> SourceFile {
        SourceFile {
            path: path.into(),
            bytes: text.as_bytes().to_vec(),
        }
    }

    fn patch(text: &str) -> Option<PatchSource<'_>> {
        Some(PatchSource {
            key: KEY,
            text,
            commit: COMMIT,
        })
    }

    #[test]
    fn the_patch_comes_first_when_it_belongs_to_the_composed_commit() {
        let files = [file("src/app.ts", "export const x = 1;\n")];
        let input = assemble_acceptance_input(patch("diff\n"), COMMIT, Some(&files));
        assert_eq!(input.parts[0].kind, PartKind::Patch);
        assert_eq!(input.parts[1].path, "src/app.ts");
        let other = assemble_acceptance_input(patch("diff\n"), "another", Some(&files));
        assert_eq!(other.parts.len(), 1);
        assert_eq!(other.parts[0].kind, PartKind::File);
    }

    #[test]
    fn the_patch_alone_is_the_input_when_the_fork_cannot_be_read() {
        let input = assemble_acceptance_input(patch("diff\n"), COMMIT, None);
        assert_eq!(input.parts.len(), 1);
        assert!(assemble_acceptance_input(None, COMMIT, None).is_empty());
    }

    #[test]
    fn the_input_stops_under_60000_characters_at_a_line_boundary() {
        let big = "0123456789\n".repeat(5_000); // 55,000 characters
        let files = [
            file("src/a.ts", &big),
            file("src/b.ts", &big),
            file("src/c.ts", "tail\n"),
        ];
        let input = assemble_acceptance_input(None, COMMIT, Some(&files));
        assert_eq!(input.parts.len(), 2);
        assert!(!input.parts[0].truncated);
        let b = &input.parts[1];
        assert!(b.truncated);
        assert!(b.text.ends_with('\n'));
        assert_eq!(b.text.len(), 4_994);
        assert!(input.chars() <= ACCEPTANCE_SOURCE_CAP);
        assert_eq!(
            input.skipped,
            [SkippedFile {
                path: "src/c.ts".into(),
                reason: SkipReason::OverCap
            }]
        );
    }

    #[test]
    fn binary_files_and_files_over_60000_bytes_are_not_sent() {
        let files = [
            SourceFile {
                path: "public/logo.png".into(),
                bytes: vec![0x89, b'P', b'N', b'G', 0, 1],
            },
            file("src/huge.ts", &"x".repeat(60_001)),
            SourceFile {
                path: "src/latin1.ts".into(),
                bytes: vec![0xe9, b'\n'],
            },
            file("src/ok.ts", "ok\n"),
        ];
        let input = assemble_acceptance_input(None, COMMIT, Some(&files));
        assert_eq!(input.parts.len(), 1);
        let reasons: Vec<SkipReason> = input.skipped.iter().map(|s| s.reason).collect();
        assert_eq!(reasons, [SkipReason::Binary, SkipReason::TooLarge, SkipReason::Binary]);
    }

    fn criteria() -> Vec<AcceptanceCriterion> {
        acceptance_criteria_to_judge(
            &s(&[
                "Todos can be tagged",
                "A calendar view shows due dates",
                "Tags can be renamed",
            ]),
            &s(&["The list shows due dates"]),
        )
    }

    fn call(input: serde_json::Value) -> Vec<ToolCall> {
        vec![ToolCall {
            name: RECORD_ACCEPTANCE.into(),
            input,
        }]
    }

    fn answer(results: &[(&str, &str)]) -> serde_json::Value {
        json!({"criteria": results.iter().map(|(id, r)| json!({"id": id, "result": r})).collect::<Vec<_>>()})
    }

    #[test]
    fn a_valid_answer_judges_each_criterion_once() {
        let out = validate_acceptance_output(
            &call(answer(&[
                ("c1", "met"),
                ("c2", "not_met"),
                ("c3", "unclear"),
                ("c4", "met"),
            ])),
            &criteria(),
        )
        .unwrap();
        assert_eq!(out.len(), 4);
    }

    #[test]
    fn an_invalid_answer_is_named() {
        let crit = criteria();
        let err = |calls: Vec<ToolCall>| validate_acceptance_output(&calls, &crit).unwrap_err();
        assert_eq!(err(vec![]), InvalidOutput::ToolCalls(0));
        let mut two = call(answer(&[]));
        two.extend(call(answer(&[])));
        assert_eq!(err(two), InvalidOutput::ToolCalls(2));
        assert!(matches!(
            err(vec![ToolCall {
                name: "record_verdict".into(),
                input: json!({})
            }]),
            InvalidOutput::WrongTool { .. }
        ));
        assert!(matches!(
            err(call(json!({"criteria": "all met"}))),
            InvalidOutput::Schema(_)
        ));
        assert!(matches!(
            err(call(json!({"criteria": [{"id": "c1", "result": "mostly"}]}))),
            InvalidOutput::Schema(_)
        ));
        assert!(matches!(
            err(call(json!({"criteria": [], "extra": 1}))),
            InvalidOutput::Schema(_)
        ));
        assert_eq!(
            err(call(answer(&[
                ("c1", "met"),
                ("c1", "met"),
                ("c2", "met"),
                ("c3", "met"),
                ("c4", "met")
            ]))),
            InvalidOutput::Repeated("c1".into())
        );
        assert_eq!(
            err(call(answer(&[("c1", "met"), ("c9", "met")]))),
            InvalidOutput::Unknown("c9".into())
        );
        assert_eq!(
            err(call(answer(&[("c1", "met"), ("c2", "met"), ("c3", "met")]))),
            InvalidOutput::Missing("c4".into())
        );
    }

    const PATCH: &str = "diff --git a/src/app.ts b/src/app.ts
index 1111111..2222222 100644
--- a/src/app.ts
+++ b/src/app.ts
@@ -1,2 +1,3 @@
 export const routes = ['/api/todos'];
-export const legacyExport = 'csv';
+export const calendarView = renderCalendar(todos);
++counter; // an added line that looks like a header
diff --git a/public/old.html b/public/old.html
deleted file mode 100644
--- a/public/old.html
+++ /dev/null
@@ -1,2 +0,0 @@
-<h1>Old archive page</h1>
-<p>gone</p>
";

    fn given() -> AcceptanceInput {
        let files = [file(
            "src/tags.ts",
            "export function renameTag(from: string, to: string) {}\n",
        )];
        assemble_acceptance_input(patch(PATCH), COMMIT, Some(&files))
    }

    fn cite(path: &str, quote: &str, removed: bool) -> Citation {
        Citation {
            path: path.into(),
            quote: quote.into(),
            removed,
        }
    }

    #[test]
    fn a_citation_must_name_a_path_the_model_was_given_and_quote_its_text() {
        let input = given();
        assert!(citation_valid(
            &cite("src/tags.ts", "function renameTag(", false),
            &input
        ));
        assert!(!citation_valid(
            &cite("src/other.ts", "function renameTag(", false),
            &input
        ));
        assert!(!citation_valid(
            &cite("src/tags.ts", "function deleteTag(", false),
            &input
        ));
    }

    #[test]
    fn a_composed_file_may_be_quoted_from_any_line_and_the_patch_only_from_added_or_context_lines() {
        let input = given();
        assert!(citation_valid(
            &cite("src/app.ts", "calendarView = renderCalendar", false),
            &input
        ));
        assert!(citation_valid(
            &cite(KEY, "export const routes = ['/api/todos']", false),
            &input
        ));
        assert!(
            citation_valid(&cite(KEY, "++counter; // an added", false), &input),
            "a quote copied with its diff marker"
        );
        assert!(citation_valid(&cite(KEY, "+export const calendarView", false), &input));
        assert!(!citation_valid(
            &cite("src/app.ts", "legacyExport = 'csv'", false),
            &input
        ));
    }

    #[test]
    fn a_removed_line_proves_a_removal_only_with_removed_true_and_nowhere_else_in_the_input() {
        let input = given();
        assert!(citation_valid(
            &cite("public/old.html", "<h1>Old archive page</h1>", true),
            &input
        ));
        assert!(citation_valid(&cite(KEY, "legacyExport = 'csv'", true), &input));
        assert!(!citation_valid(
            &cite("public/old.html", "<h1>Old archive page</h1>", false),
            &input
        ));
        // The quote is removed in the patch but a composed file the model read still has it.
        let files = [file("src/legacy.ts", "export const legacyExport = 'csv';\n")];
        let still_there = assemble_acceptance_input(patch(PATCH), COMMIT, Some(&files));
        assert!(!citation_valid(&cite(KEY, "legacyExport = 'csv'", true), &still_there));
        // `removed: true` on a quote that was added is not a removal.
        assert!(!citation_valid(
            &cite("src/app.ts", "calendarView = renderCalendar", true),
            &input
        ));
    }

    /// A patch deleting a page of `lines` numbered lines, between two changed files.
    fn deleting(lines: usize) -> String {
        let page: String = (1..=lines).map(|n| format!("-<p>Archived line {n:03}</p>\n")).collect();
        format!(
            "diff --git a/public/a.html b/public/a.html\nindex 1111111..2222222 100644\n--- a/public/a.html\n+++ b/public/a.html\n@@ -1 +1 @@\n-<p>Before</p>\n+<p>After the change</p>\n\
             diff --git a/public/archive.html b/public/archive.html\ndeleted file mode 100644\nindex 3333333..0000000\n--- a/public/archive.html\n+++ /dev/null\n@@ -1,{lines} +0,0 @@\n{page}\
             diff --git a/src/z.ts b/src/z.ts\nnew file mode 100644\nindex 0000000..4444444\n--- /dev/null\n+++ b/src/z.ts\n@@ -0,0 +1 @@\n+export const zebraStripes = true;\n"
        )
    }

    #[test]
    fn a_deleted_file_keeps_its_first_40_lines_and_says_how_many_it_left_out() {
        let cut = cut_deleted_files(&deleting(100), DELETED_FILE_LINES);
        assert!(
            cut.contains("+++ /dev/null\n@@ -1,40 +0,0 @@\n-<p>Archived line 001</p>\n"),
            "{cut}"
        );
        assert!(
            cut.contains(
                "-<p>Archived line 040</p>\n\\ 60 more lines of the deleted file are not shown\ndiff --git a/src/z.ts"
            ),
            "{cut}"
        );
        assert!(!cut.contains("Archived line 041"), "{cut}");
        // The files around it are as they were.
        assert!(cut.starts_with("diff --git a/public/a.html b/public/a.html\nindex 1111111..2222222 100644\n"));
        assert!(cut.ends_with("+export const zebraStripes = true;\n"));
        // A deleted file within the limit, and a patch without deletions, are left as they are.
        assert_eq!(cut_deleted_files(&deleting(40), DELETED_FILE_LINES), deleting(40));
        assert_eq!(cut_deleted_files(PATCH, DELETED_FILE_LINES), PATCH);
        assert_eq!(cut_deleted_files("", DELETED_FILE_LINES), "");
    }

    #[test]
    fn a_removed_line_of_a_deleted_page_is_cited_only_from_its_first_40_lines() {
        let text = deleting(100);
        let input = assemble_acceptance_input(patch(&text), COMMIT, None);
        assert!(input.parts[0].text.contains("@@ -1,40 +0,0 @@"));
        assert!(citation_valid(
            &cite("public/archive.html", "<p>Archived line 040</p>", true),
            &input
        ));
        assert!(citation_valid(&cite(KEY, "-<p>Archived line 007</p>", true), &input));
        // Line 41 was not given to the model.
        assert!(!citation_valid(
            &cite("public/archive.html", "<p>Archived line 041</p>", true),
            &input
        ));
        // Not a removal without `removed: true`; the file after the deletion still reads as added.
        assert!(!citation_valid(
            &cite("public/archive.html", "<p>Archived line 001</p>", false),
            &input
        ));
        assert!(citation_valid(
            &cite("src/z.ts", "export const zebraStripes = true;", false),
            &input
        ));
    }

    #[test]
    fn a_quote_needs_8_characters_once_white_space_collapses() {
        let input = given();
        assert!(!citation_valid(&cite("src/tags.ts", "  rename ", false), &input));
        assert!(!citation_valid(&cite("src/tags.ts", "from:   s", false), &input));
        assert!(citation_valid(
            &cite("src/tags.ts", "(from:   string,\n to", false),
            &input
        ));
    }

    #[test]
    fn a_citation_may_name_its_quote_text() {
        let c: Citation =
            serde_json::from_value(json!({"path": "src/tags.ts", "text": "function renameTag("})).unwrap();
        assert!(citation_valid(&c, &given()));
    }

    #[test]
    fn a_met_without_a_valid_citation_counts_as_unclear() {
        let crit = criteria();
        let out = validate_acceptance_output(
            &call(json!({"criteria": [
                {"id": "c1", "result": "met", "citation": {"path": "src/tags.ts", "quote": "made up quote"}},
                {"id": "c2", "result": "met", "citation": {"path": "src/app.ts", "quote": "renderCalendar(todos)"}},
                {"id": "c3", "result": "met"},
                {"id": "c4", "result": "not_met"}
            ]})),
            &crit,
        )
        .unwrap();
        let judged = judge_with_citations(&crit, &out, &given());
        let results: Vec<(CriterionResult, bool)> = judged.iter().map(|j| (j.result, j.citation_rejected)).collect();
        assert_eq!(
            results,
            [
                (CriterionResult::Unclear, true),
                (CriterionResult::Met, false),
                (CriterionResult::Unclear, true),
                (CriterionResult::NotMet, false)
            ]
        );
    }

    fn judged(id: &str, result: CriterionResult, kept: bool) -> JudgedCriterion {
        JudgedCriterion {
            id: id.into(),
            text: format!("criterion {id}"),
            kept,
            result,
            citation: None,
            reason: None,
            citation_rejected: false,
        }
    }

    #[test]
    fn sonnet_judges_only_the_requests_own_unclear_criteria_and_its_answer_applies_only_to_them() {
        let first = vec![
            judged("c1", CriterionResult::Met, false),
            judged("c2", CriterionResult::Unclear, false),
            judged("c3", CriterionResult::Unclear, true),
        ];
        let ask = criteria_for_second_opinion(&first);
        assert_eq!(ask.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["c2"]);
        let second = vec![
            judged("c1", CriterionResult::NotMet, false),
            judged("c2", CriterionResult::Met, false),
            judged("c3", CriterionResult::NotMet, true),
        ];
        let merged = merge_second_opinion(&first, &second);
        let results: Vec<CriterionResult> = merged.iter().map(|j| j.result).collect();
        assert_eq!(
            results,
            [CriterionResult::Met, CriterionResult::Met, CriterionResult::Unclear]
        );
    }

    fn named(text: &str, result: CriterionResult, kept: bool) -> JudgedCriterion {
        JudgedCriterion {
            text: text.into(),
            ..judged("c", result, kept)
        }
    }

    #[test]
    fn two_of_three_met_fails_with_the_specs_summary_and_hold() {
        let run = AcceptanceRun::Judged(vec![
            named("Todos can be tagged", CriterionResult::Met, false),
            named("Tags can be renamed.", CriterionResult::Met, false),
            named("calendar view", CriterionResult::NotMet, false),
        ]);
        let out = acceptance_outcome(&run);
        assert_eq!(
            (out.result.status, out.result.coverage),
            (EvidenceStatus::Fail, Coverage::CheckedSupported)
        );
        assert_eq!(
            out.result.summary,
            "2 of 3 criteria met; not met: calendar view (runner: sandbox)"
        );
        assert_eq!((out.criteria_met, out.criteria_total), (2, 3));
        assert_eq!(
            approval_reason(&[acceptance_hold(&out)]).unwrap(),
            "Best candidate meets 2 of 3 criteria; not met: calendar view. Approve to ship it or cancel the change."
        );
    }

    #[test]
    fn a_kept_criterion_left_unclear_does_not_block_but_one_not_met_does() {
        let own = named("Todos can be tagged", CriterionResult::Met, false);
        let kept_unclear = named(
            "Keep (from an earlier request): due dates",
            CriterionResult::Unclear,
            true,
        );
        let out = acceptance_outcome(&AcceptanceRun::Judged(vec![own.clone(), kept_unclear]));
        assert!(out.passed());
        assert_eq!(out.result.summary, "1 of 1 criteria met (runner: sandbox)");
        let kept_not_met = named(
            "Keep (from an earlier request): due dates.",
            CriterionResult::NotMet,
            true,
        );
        let out = acceptance_outcome(&AcceptanceRun::Judged(vec![own, kept_not_met]));
        assert_eq!(out.result.status, EvidenceStatus::Fail);
        assert_eq!(
            out.result.summary,
            "1 of 1 criteria met; kept criteria not met: due dates (runner: sandbox)"
        );
    }

    #[test]
    fn an_unclear_criterion_of_the_request_fails_the_check() {
        let out = acceptance_outcome(&AcceptanceRun::Judged(vec![
            named("Todos can be tagged", CriterionResult::Met, false),
            named("calendar view", CriterionResult::Unclear, false),
        ]));
        assert_eq!(out.result.status, EvidenceStatus::Fail);
        assert_eq!(
            out.result.summary,
            "1 of 2 criteria met; unclear: calendar view (runner: sandbox)"
        );
    }

    #[test]
    fn a_model_error_a_refused_call_or_no_source_is_a_gap_and_an_earlier_failure_skips() {
        for run in [
            AcceptanceRun::ModelError("HTTP 529".into()),
            AcceptanceRun::Refused("the daily call cap".into()),
            AcceptanceRun::NoReadableSource,
        ] {
            let out = acceptance_outcome(&run);
            assert_eq!(
                (out.result.status, out.result.coverage),
                (EvidenceStatus::Error, Coverage::NotChecked)
            );
        }
        let skipped = acceptance_outcome(&AcceptanceRun::EarlierCheckFailed);
        assert_eq!(
            (skipped.result.status, skipped.result.coverage),
            (EvidenceStatus::Skipped, Coverage::NotChecked)
        );
        assert_eq!(
            acceptance_hold(&acceptance_outcome(&AcceptanceRun::Refused("the Change budget".into()))).reason,
            "The acceptance check could not judge the best candidate (model call refused: the Change budget)."
        );
    }

    proptest! {
        #[test]
        fn the_input_never_passes_the_cap_and_every_part_is_a_prefix_cut_at_a_line(
            shapes in prop::collection::vec((0usize..120, 0usize..700, any::<bool>()), 0..30),
        ) {
            // Built, not drawn character by character: large inputs stay cheap to generate.
            let texts: Vec<String> = shapes
                .iter()
                .map(|&(len, lines, wide)| format!("{}\n", if wide { "é" } else { "x" }.repeat(len)).repeat(lines))
                .collect();
            let files: Vec<SourceFile> = texts.iter().enumerate().map(|(i, t)| file(&format!("f{i}"), t)).collect();
            let input = assemble_acceptance_input(None, COMMIT, Some(&files));
            prop_assert!(input.chars() <= ACCEPTANCE_SOURCE_CAP);
            prop_assert!(input.parts.len() <= MAX_COMPOSED_FILES);
            for part in &input.parts {
                let original = &texts[part.path[1..].parse::<usize>().unwrap()];
                prop_assert!(original.starts_with(&part.text));
                prop_assert_eq!(part.truncated, part.text.len() < original.len());
                if part.truncated { prop_assert!(part.text.ends_with('\n')); }
            }
            prop_assert!(input.parts.iter().filter(|p| p.truncated).count() <= 1);
        }

        #[test]
        fn a_quote_shorter_than_8_characters_is_never_valid(quote in "[a-z ]{0,7}") {
            let input = assemble_acceptance_input(None, COMMIT, Some(&[file("a.ts", "abcdefgh")]));
            prop_assert!(!citation_valid(&cite("a.ts", &quote, false), &input));
        }

        #[test]
        fn reading_any_patch_never_panics(p in any::<String>(), quote in any::<String>(), removed in any::<bool>()) {
            let input = assemble_acceptance_input(patch(&p), COMMIT, None);
            let _ = citation_valid(&cite(KEY, &quote, removed), &input);
        }

        #[test]
        fn validating_any_json_answer_never_panics(v in prop::collection::vec(("c[0-9]", "met|not_met|unclear|x"), 0..6)) {
            let input = json!({"criteria": v.iter().map(|(id, r)| json!({"id": id, "result": r})).collect::<Vec<_>>()});
            let _ = validate_acceptance_output(&call(input), &criteria());
        }
    }
}
