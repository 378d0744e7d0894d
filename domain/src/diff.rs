//! A Candidate's patch as a person reads it before approving: file by file, each hunk with its
//! changed lines and their numbers on both sides, the acceptance check's citations found in it,
//! and the bound that keeps a huge patch from becoming a huge answer.
//!
//! The git service computes the files (`belay_git`); what counts as too much, and where a quote
//! sits in the lines, are rules, so they live here and are tested with plain data.

use crate::acceptance::JudgedCriterion;
use crate::ids::CandidateId;
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// How much of a patch one answer carries. Past a bound the rest of the files are still listed
/// (path, status), with `truncated` set and no lines, so a reader knows what was left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct DiffLimits {
    /// Files whose lines are shown; later files are listed without lines.
    pub max_files: u32,
    /// Diff lines (context included) in the whole answer.
    pub max_lines: u32,
    /// Diff lines of one file.
    pub max_file_lines: u32,
    /// A side larger than this (bytes) is not diffed: the file is listed as truncated.
    pub max_blob_bytes: u64,
}

impl DiffLimits {
    /// The API's bound: a few hundred files and five thousand lines is already more than a person
    /// reads in one sitting, and keeps the answer near a megabyte at worst.
    pub const DEFAULT: DiffLimits = DiffLimits {
        max_files: 300,
        max_lines: 5000,
        max_file_lines: 1500,
        max_blob_bytes: 1024 * 1024,
    };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum FileStatus {
    Added,
    Modified,
    Deleted,
    /// Moved from `oldPath` (its contents may have changed too).
    Renamed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum LineKind {
    Context,
    Added,
    Removed,
}

/// One line of a hunk. `oldLine` is absent on an added line, `newLine` on a removed one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct DiffLine {
    pub kind: LineKind,
    pub old_line: Option<u32>,
    pub new_line: Option<u32>,
    /// The line without its end of line.
    pub text: String,
    /// The criteria whose citation quotes this line.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cited_by: Vec<String>,
}

/// A hunk as git numbers it: `@@ -oldStart,oldLines +newStart,newLines @@`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Hunk {
    pub old_start: u32,
    pub old_lines: u32,
    pub new_start: u32,
    pub new_lines: u32,
    pub lines: Vec<DiffLine>,
}

/// A citation of the acceptance check that names this file, and whether its quote was found in
/// the lines shown (a quote of unchanged code is valid too, and is then not among them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct FileCitation {
    pub criterion_id: String,
    pub criterion: String,
    pub quote: String,
    pub removed: bool,
    pub found: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct FileDiff {
    pub path: String,
    /// Where a renamed file came from.
    pub old_path: Option<String>,
    pub status: FileStatus,
    /// Not text (a NUL near the start, or not UTF-8): listed, never shown line by line.
    pub binary: bool,
    /// Lines added and removed; absent when the file was not diffed (past the bound).
    pub additions: Option<u32>,
    pub deletions: Option<u32>,
    pub hunks: Vec<Hunk>,
    /// Some or all of its lines were left out by the bound.
    pub truncated: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub citations: Vec<FileCitation>,
}

/// `GET /v1/candidates/{id}/diff`: the patch from the Candidate's base to its composed commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct CandidateDiff {
    pub candidate_id: CandidateId,
    pub base_commit: String,
    pub composed_commit: String,
    /// Every changed file, ordered by path as git orders them.
    pub files: Vec<FileDiff>,
    /// Some file was cut or left without its lines.
    pub truncated: bool,
    pub limits: DiffLimits,
}

/// What the bound leaves of one file's hunks: the first hunks whole while they fit, then the
/// lines of the hunk that crosses the bound, cut. `remaining` is the answer's line budget left;
/// it is spent here.
pub fn cut_hunks(hunks: Vec<Hunk>, limits: &DiffLimits, remaining: &mut u32) -> (Vec<Hunk>, bool) {
    let mut budget = (*remaining).min(limits.max_file_lines);
    let mut kept = Vec::new();
    let mut truncated = false;
    for mut hunk in hunks {
        if budget == 0 {
            truncated = true;
            break;
        }
        let n = u32::try_from(hunk.lines.len()).unwrap_or(u32::MAX);
        if n > budget {
            hunk.lines.truncate(budget as usize);
            truncated = true;
            *remaining -= budget;
            kept.push(hunk);
            break;
        }
        budget -= n;
        *remaining -= n;
        kept.push(hunk);
    }
    (kept, truncated)
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The quote as the acceptance check compares it: whitespace collapsed, and the same text without
/// the diff markers a model may have copied along (`+`, `-`, a space).
fn quote_forms(quote: &str, removed: bool) -> Vec<String> {
    let marker = if removed { '-' } else { '+' };
    let unmarked: String = quote
        .lines()
        .map(|l| l.strip_prefix([marker, ' ']).unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    let mut forms = vec![collapse(quote)];
    let u = collapse(&unmarked);
    if u != forms[0] {
        forms.push(u);
    }
    forms.retain(|f| !f.is_empty());
    forms
}

/// Marks the lines of `hunks` that hold `quote`: added and context lines for a quote of the
/// composed file, removed lines for a quote that proves a removal. A quote may span lines of one
/// hunk; whitespace is collapsed as the acceptance check collapses it. True when found.
pub fn mark_quote(hunks: &mut [Hunk], quote: &str, removed: bool, criterion_id: &str) -> bool {
    let forms = quote_forms(quote, removed);
    let mut found = false;
    for hunk in hunks.iter_mut() {
        // The eligible lines in order, and their collapsed text joined by single spaces, with
        // where each line starts in it.
        let eligible: Vec<usize> = hunk
            .lines
            .iter()
            .enumerate()
            .filter(|(_, l)| match l.kind {
                LineKind::Context => true,
                LineKind::Added => !removed,
                LineKind::Removed => removed,
            })
            .map(|(i, _)| i)
            .collect();
        let mut text = String::new();
        let mut spans = Vec::with_capacity(eligible.len());
        for &i in &eligible {
            let line = collapse(&hunk.lines[i].text);
            if !text.is_empty() && !line.is_empty() {
                text.push(' ');
            }
            let start = text.len();
            text.push_str(&line);
            spans.push((i, start, text.len()));
        }
        for form in &forms {
            let mut from = 0;
            while let Some(at) = text[from..].find(form.as_str()).map(|p| p + from) {
                let end = at + form.len();
                for &(i, s, e) in &spans {
                    // A line is cited when the quote covers some of its text.
                    if s < end && at < e && e > s {
                        let cited = &mut hunk.lines[i].cited_by;
                        if !cited.iter().any(|c| c == criterion_id) {
                            cited.push(criterion_id.to_owned());
                        }
                    }
                }
                found = true;
                from = end.max(at + 1);
                if from >= text.len() {
                    break;
                }
            }
        }
    }
    found
}

/// Puts the acceptance check's citations on the files they name: each citation's lines marked,
/// and the file told which criteria cite it. Only citations the check kept count (a rejected one
/// proved nothing).
pub fn attach_citations(files: &mut [FileDiff], acceptance: &[JudgedCriterion]) {
    for c in acceptance.iter().filter(|c| !c.citation_rejected) {
        let Some(citation) = &c.citation else { continue };
        let Some(file) = files.iter_mut().find(|f| f.path == citation.path) else {
            continue;
        };
        let found = mark_quote(&mut file.hunks, &citation.quote, citation.removed, &c.id);
        file.citations.push(FileCitation {
            criterion_id: c.id.clone(),
            criterion: c.text.clone(),
            quote: citation.quote.clone(),
            removed: citation.removed,
            found,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acceptance::{Citation, CriterionResult};

    fn line(kind: LineKind, old: Option<u32>, new: Option<u32>, text: &str) -> DiffLine {
        DiffLine {
            kind,
            old_line: old,
            new_line: new,
            text: text.into(),
            cited_by: vec![],
        }
    }

    fn hunk() -> Hunk {
        Hunk {
            old_start: 1,
            old_lines: 3,
            new_start: 1,
            new_lines: 4,
            lines: vec![
                line(LineKind::Context, Some(1), Some(1), "export function total(items) {"),
                line(LineKind::Removed, Some(2), None, "  return items.length;"),
                line(
                    LineKind::Added,
                    None,
                    Some(2),
                    "  const sum = items.reduce((a, b) => a + b, 0);",
                ),
                line(LineKind::Added, None, Some(3), "  return sum;"),
                line(LineKind::Context, Some(3), Some(4), "}"),
            ],
        }
    }

    fn cited(h: &Hunk) -> Vec<(Option<u32>, Option<u32>)> {
        h.lines
            .iter()
            .filter(|l| !l.cited_by.is_empty())
            .map(|l| (l.old_line, l.new_line))
            .collect()
    }

    #[test]
    fn a_quote_of_an_added_line_marks_that_line_only() {
        let mut hunks = vec![hunk()];
        assert!(mark_quote(&mut hunks, "items.reduce((a, b) => a + b, 0)", false, "c1"));
        assert_eq!(cited(&hunks[0]), vec![(None, Some(2))]);
        assert_eq!(hunks[0].lines[2].cited_by, vec!["c1".to_owned()]);
    }

    #[test]
    fn a_quote_across_lines_with_other_whitespace_marks_every_line_it_spans() {
        let mut hunks = vec![hunk()];
        let quote = "const sum = items.reduce((a, b) => a + b, 0);\n    return   sum;";
        assert!(mark_quote(&mut hunks, quote, false, "c1"));
        assert_eq!(cited(&hunks[0]), vec![(None, Some(2)), (None, Some(3))]);
    }

    #[test]
    fn diff_markers_copied_into_the_quote_are_ignored() {
        let mut hunks = vec![hunk()];
        assert!(mark_quote(&mut hunks, "+  return sum;", false, "c1"));
        assert_eq!(cited(&hunks[0]), vec![(None, Some(3))]);
    }

    #[test]
    fn a_removed_line_is_cited_only_by_a_quote_that_says_removed() {
        let mut hunks = vec![hunk()];
        assert!(!mark_quote(&mut hunks, "return items.length;", false, "c1"));
        assert!(cited(&hunks[0]).is_empty());
        assert!(mark_quote(&mut hunks, "return items.length;", true, "c2"));
        assert_eq!(cited(&hunks[0]), vec![(Some(2), None)]);
    }

    #[test]
    fn a_quote_not_in_the_lines_shown_is_not_found() {
        let mut hunks = vec![hunk()];
        assert!(!mark_quote(&mut hunks, "export function average", false, "c1"));
        assert!(cited(&hunks[0]).is_empty());
    }

    fn file(path: &str) -> FileDiff {
        FileDiff {
            path: path.into(),
            old_path: None,
            status: FileStatus::Modified,
            binary: false,
            additions: Some(2),
            deletions: Some(1),
            hunks: vec![hunk()],
            truncated: false,
            citations: vec![],
        }
    }

    fn criterion(id: &str, path: &str, quote: &str, rejected: bool) -> JudgedCriterion {
        JudgedCriterion {
            id: id.into(),
            text: format!("criterion {id}"),
            kept: false,
            result: if rejected {
                CriterionResult::Unclear
            } else {
                CriterionResult::Met
            },
            citation: Some(Citation {
                path: path.into(),
                quote: quote.into(),
                removed: false,
            }),
            reason: None,
            citation_rejected: rejected,
        }
    }

    #[test]
    fn citations_go_to_the_file_they_name_and_a_rejected_one_is_left_out() {
        let mut files = vec![file("src/a.ts"), file("src/b.ts")];
        attach_citations(
            &mut files,
            &[
                criterion("c1", "src/b.ts", "return sum;", false),
                criterion("c2", "src/a.ts", "return sum;", true),
                criterion("c3", "src/b.ts", "a line of unchanged code", false),
                criterion("c4", "src/missing.ts", "return sum;", false),
            ],
        );
        assert!(files[0].citations.is_empty());
        assert!(cited(&files[0].hunks[0]).is_empty());
        let found: Vec<_> = files[1]
            .citations
            .iter()
            .map(|c| (c.criterion_id.as_str(), c.found))
            .collect();
        assert_eq!(found, vec![("c1", true), ("c3", false)]);
        assert_eq!(cited(&files[1].hunks[0]), vec![(None, Some(3))]);
    }

    fn hunk_of(n: usize) -> Hunk {
        Hunk {
            old_start: 1,
            old_lines: 0,
            new_start: 1,
            new_lines: n as u32,
            lines: (1..=n as u32)
                .map(|i| line(LineKind::Added, None, Some(i), "x"))
                .collect(),
        }
    }

    #[test]
    fn hunks_that_fit_are_kept_whole_and_the_one_crossing_the_bound_is_cut() {
        let limits = DiffLimits {
            max_file_lines: 10,
            ..DiffLimits::DEFAULT
        };
        let mut remaining = 100;
        let (kept, truncated) = cut_hunks(
            vec![hunk_of(4), hunk_of(4), hunk_of(4), hunk_of(4)],
            &limits,
            &mut remaining,
        );
        assert!(truncated);
        assert_eq!(kept.iter().map(|h| h.lines.len()).collect::<Vec<_>>(), vec![4, 4, 2]);
        assert_eq!(remaining, 90);

        let mut remaining = 5;
        let (kept, truncated) = cut_hunks(vec![hunk_of(3), hunk_of(3)], &limits, &mut remaining);
        assert!(truncated);
        assert_eq!(kept.iter().map(|h| h.lines.len()).collect::<Vec<_>>(), vec![3, 2]);
        assert_eq!(remaining, 0);

        let (kept, truncated) = cut_hunks(vec![hunk_of(1)], &limits, &mut remaining);
        assert!(
            truncated && kept.is_empty(),
            "a spent budget leaves a file without lines"
        );

        let mut remaining = 100;
        let (kept, truncated) = cut_hunks(vec![hunk_of(3)], &limits, &mut remaining);
        assert!(!truncated);
        assert_eq!(kept.len(), 1);
        assert_eq!(remaining, 97);
    }
}
