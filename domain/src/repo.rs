//! Repository names, the fork retention rule and the patch cut rule of the git service.
//!
//! Names are derived from database row ids only, so cleanup can compute exactly the repositories
//! one project owns and never needs to list the namespace. The rules are pure: the sweep passes in
//! the facts it read and the current time, and gets a yes or no back.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Days a fork is kept after its run or Candidate ends (FORK_RETENTION_DAYS).
pub const FORK_RETENTION_DAYS: i64 = 30;

/// Bytes a stored patch may hold; a longer patch is cut at a line boundary.
pub const PATCH_LIMIT_BYTES: usize = 512 * 1024;

const SECONDS_PER_DAY: i64 = 24 * 60 * 60;
const MAX_BODY_LEN: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RepoNameError {
    #[error("`{id}` is not a {what} id: expected `{prefix}` followed by 1 to 64 characters of [a-z0-9]")]
    NotAnId {
        what: &'static str,
        prefix: &'static str,
        id: String,
    },
}

/// The four kinds of repository in a namespace, told apart by their name alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RepoKind {
    /// `proj_<body>`: the project's canonical repository.
    Canonical,
    /// `ws-<body>`: the fork a task run works in.
    Workspace,
    /// `cand-<body>`: the fork a Candidate is composed in.
    Candidate,
    /// `edit-<body>`: the fork of a code edit session.
    EditSession,
}

/// The canonical repository of a project: the project id itself, `proj_<body>`.
pub fn canonical_repo(project_id: &str) -> Result<String, RepoNameError> {
    body_of(project_id, "proj_", "project")?;
    Ok(project_id.to_owned())
}

/// The workspace fork of task run `trun_<body>` (or, made before task runs had a prefix of their
/// own, `run_<body>`): `ws-<body>`.
pub fn workspace_fork(run_id: &str) -> Result<String, RepoNameError> {
    let body = body_of(run_id, crate::ids::TaskRunId::PREFIX, "task run")
        .or_else(|_| body_of(run_id, crate::ids::TaskRunId::LEGACY_PREFIX, "task run"))?;
    Ok(format!("ws-{body}"))
}

/// The fork of Candidate `cand_<body>`: `cand-<body>`.
pub fn candidate_fork(cand_id: &str) -> Result<String, RepoNameError> {
    Ok(format!("cand-{}", body_of(cand_id, "cand_", "candidate")?))
}

/// The fork of code edit session `edit_<body>`: `edit-<body>`.
pub fn edit_fork(session_id: &str) -> Result<String, RepoNameError> {
    Ok(format!("edit-{}", body_of(session_id, "edit_", "edit session")?))
}

/// Which kind of repository `name` is, or `None` when no row id could have produced it.
pub fn repo_kind(name: &str) -> Option<RepoKind> {
    [
        ("proj_", RepoKind::Canonical),
        ("ws-", RepoKind::Workspace),
        ("cand-", RepoKind::Candidate),
        ("edit-", RepoKind::EditSession),
    ]
    .into_iter()
    .find_map(|(prefix, kind)| name.strip_prefix(prefix).filter(|b| is_valid_body(b)).map(|_| kind))
}

/// Whether `name` is a repository name some row id derives to. Such a name is safe as a single
/// path segment and URL segment: it has no `/`, no `.` and no upper case.
pub fn is_valid_repo_name(name: &str) -> bool {
    repo_kind(name).is_some()
}

fn body_of<'a>(id: &'a str, prefix: &'static str, what: &'static str) -> Result<&'a str, RepoNameError> {
    id.strip_prefix(prefix)
        .filter(|b| is_valid_body(b))
        .ok_or_else(|| RepoNameError::NotAnId {
            what,
            prefix,
            id: id.to_owned(),
        })
}

fn is_valid_body(body: &str) -> bool {
    !body.is_empty() && body.len() <= MAX_BODY_LEN && body.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// The forks the sweep considers; canonical repositories are never swept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ForkKind {
    Workspace,
    Candidate,
    EditSession,
}

/// How a Candidate ended, as far as its fork is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CandidateEnd {
    Rejected,
    Stale,
    Promoted,
}

/// A ChangeSet's tip: its commit, the fork that holds it, and the label its merge carries (the
/// task key). The one shape of "a tip to merge": what a new workspace fork stacks on and what a
/// Candidate composes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tip {
    /// The merge label (the task key).
    pub label: String,
    /// The fork holding the commit.
    pub fork: String,
    pub commit: String,
}

/// What the sweep read from the rows behind one fork. Only the fields of the fork's kind are
/// looked at; the others keep their defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkFacts {
    /// Workspace: the task run failed.
    pub run_failed: bool,
    /// Workspace: the task run recorded a ChangeSet.
    pub run_has_change_set: bool,
    /// Workspace: the run's Change is finished.
    pub change_finished: bool,
    /// Candidate: how it ended; `None` while it is still open.
    pub candidate_end: Option<CandidateEnd>,
    /// Candidate: canonical `main` holds the composed commit (it is `main` or an ancestor of it).
    pub canonical_main_holds_composed: bool,
    /// Edit session: when the session is overdue, unix seconds.
    pub session_due_at_secs: Option<i64>,
}

/// One fork the daily sweep considers, as read from the rows behind it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepFork {
    pub kind: ForkKind,
    pub repo: String,
    pub project_id: crate::ids::ProjectId,
    /// When the run, Candidate or session ended, unix seconds.
    pub ended_at_secs: Option<i64>,
    pub facts: ForkFacts,
    /// Edit sessions still open: the session id and its uid (an overdue one is ended first).
    pub session: Option<(crate::ids::EditSessionId, u32)>,
}

/// Whether the daily sweep deletes this fork now.
///
/// `ended_at_secs` is when the run or Candidate ended, or when the edit session ended; `None`
/// while it is still going.
/// - A workspace fork goes FORK_RETENTION_DAYS after its run ended, when the run failed, recorded no
///   ChangeSet, or its Change is finished.
/// - A Candidate fork goes FORK_RETENTION_DAYS after the Candidate ended, when it was rejected or
///   went stale, or was promoted and canonical `main` holds the composed commit.
/// - An edit-session fork goes at once when the session has ended (a delete that failed left it)
///   or is overdue: the sweep ends an overdue session before deleting its fork.
pub fn fork_due_for_deletion(kind: ForkKind, ended_at_secs: Option<i64>, now_secs: i64, facts: &ForkFacts) -> bool {
    let retained_past =
        |ended: Option<i64>| ended.is_some_and(|t| now_secs >= t.saturating_add(FORK_RETENTION_DAYS * SECONDS_PER_DAY));
    match kind {
        ForkKind::Workspace => {
            retained_past(ended_at_secs) && (facts.run_failed || !facts.run_has_change_set || facts.change_finished)
        }
        ForkKind::Candidate => {
            retained_past(ended_at_secs)
                && match facts.candidate_end {
                    Some(CandidateEnd::Rejected | CandidateEnd::Stale) => true,
                    Some(CandidateEnd::Promoted) => facts.canonical_main_holds_composed,
                    None => false,
                }
        }
        ForkKind::EditSession => {
            ended_at_secs.is_some() || facts.session_due_at_secs.is_some_and(|due| now_secs >= due)
        }
    }
}

/// Cuts `patch` to at most `limit` bytes at a line boundary, so what is kept still applies as far
/// as it goes. Returns the kept text, whether anything was cut, and the full size in bytes. A
/// first line longer than `limit` leaves nothing.
pub fn cut_patch(patch: &str, limit: usize) -> (String, bool, usize) {
    let full_size = patch.len();
    if full_size <= limit {
        return (patch.to_owned(), false, full_size);
    }
    // `limit` may fall inside a multi-byte character; the last newline at or before it cannot.
    let kept = patch.as_bytes()[..limit]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    (patch[..kept].to_owned(), true, full_size)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = SECONDS_PER_DAY;
    const ENDED: i64 = 1_700_000_000;

    #[test]
    fn names_come_from_row_ids() {
        assert_eq!(canonical_repo("proj_0a1b2c").unwrap(), "proj_0a1b2c");
        assert_eq!(workspace_fork("run_9f8e").unwrap(), "ws-9f8e");
        assert_eq!(candidate_fork("cand_77aa").unwrap(), "cand-77aa");
        assert_eq!(edit_fork("edit_c0ffee").unwrap(), "edit-c0ffee");
    }

    #[test]
    fn an_id_of_another_kind_or_with_path_characters_gives_no_name() {
        assert!(workspace_fork("cand_77aa").is_err());
        assert!(candidate_fork("run_1").is_err());
        assert!(canonical_repo("proj_").is_err());
        assert!(canonical_repo("proj_../etc").is_err());
        assert!(edit_fork("edit_AB").is_err());
        assert!(workspace_fork(&format!("run_{}", "a".repeat(65))).is_err());
        let err = edit_fork("edit_x/y").unwrap_err();
        assert!(err.to_string().contains("edit_x/y"), "{err}");
    }

    #[test]
    fn every_derived_name_is_valid_and_nothing_else_is() {
        for name in ["proj_0a", "ws-0a", "cand-0a", "edit-0a"] {
            assert!(is_valid_repo_name(name), "{name}");
        }
        for name in [
            "",
            "proj_",
            "ws_0a",
            "cand_0a",
            "edit_0a",
            "ws-0a.git",
            "ws-0A",
            "ws-",
            "../proj_0a",
            "proj_0a/x",
        ] {
            assert!(!is_valid_repo_name(name), "{name}");
        }
        assert_eq!(repo_kind("cand-1"), Some(RepoKind::Candidate));
        assert_eq!(repo_kind("proj_1"), Some(RepoKind::Canonical));
    }

    fn failed_run() -> ForkFacts {
        ForkFacts {
            run_failed: true,
            ..ForkFacts::default()
        }
    }

    #[test]
    fn a_failed_runs_fork_goes_thirty_days_after_the_run_ended() {
        let f = failed_run();
        assert!(!fork_due_for_deletion(
            ForkKind::Workspace,
            Some(ENDED),
            ENDED + 29 * DAY,
            &f
        ));
        assert!(!fork_due_for_deletion(
            ForkKind::Workspace,
            Some(ENDED),
            ENDED + 30 * DAY - 1,
            &f
        ));
        assert!(fork_due_for_deletion(
            ForkKind::Workspace,
            Some(ENDED),
            ENDED + 30 * DAY,
            &f
        ));
    }

    #[test]
    fn a_run_that_has_not_ended_keeps_its_fork() {
        assert!(!fork_due_for_deletion(
            ForkKind::Workspace,
            None,
            ENDED + 365 * DAY,
            &failed_run()
        ));
    }

    #[test]
    fn a_run_without_a_change_set_loses_its_fork_and_one_with_a_change_set_keeps_it_until_the_change_finishes() {
        let later = ENDED + 31 * DAY;
        let no_change_set = ForkFacts::default();
        assert!(fork_due_for_deletion(
            ForkKind::Workspace,
            Some(ENDED),
            later,
            &no_change_set
        ));
        let published = ForkFacts {
            run_has_change_set: true,
            ..ForkFacts::default()
        };
        assert!(!fork_due_for_deletion(
            ForkKind::Workspace,
            Some(ENDED),
            later,
            &published
        ));
        let finished = ForkFacts {
            run_has_change_set: true,
            change_finished: true,
            ..ForkFacts::default()
        };
        assert!(fork_due_for_deletion(
            ForkKind::Workspace,
            Some(ENDED),
            later,
            &finished
        ));
    }

    #[test]
    fn rejected_and_stale_candidates_lose_their_fork_after_thirty_days() {
        for end in [CandidateEnd::Rejected, CandidateEnd::Stale] {
            let f = ForkFacts {
                candidate_end: Some(end),
                ..ForkFacts::default()
            };
            assert!(!fork_due_for_deletion(
                ForkKind::Candidate,
                Some(ENDED),
                ENDED + 10 * DAY,
                &f
            ));
            assert!(fork_due_for_deletion(
                ForkKind::Candidate,
                Some(ENDED),
                ENDED + 30 * DAY,
                &f
            ));
        }
    }

    #[test]
    fn a_promoted_candidates_fork_goes_only_when_canonical_main_holds_the_composed_commit() {
        let later = ENDED + 40 * DAY;
        let not_yet = ForkFacts {
            candidate_end: Some(CandidateEnd::Promoted),
            ..ForkFacts::default()
        };
        assert!(!fork_due_for_deletion(
            ForkKind::Candidate,
            Some(ENDED),
            later,
            &not_yet
        ));
        let held = ForkFacts {
            canonical_main_holds_composed: true,
            ..not_yet
        };
        assert!(fork_due_for_deletion(ForkKind::Candidate, Some(ENDED), later, &held));
    }

    #[test]
    fn an_open_candidate_keeps_its_fork() {
        let f = ForkFacts {
            canonical_main_holds_composed: true,
            ..ForkFacts::default()
        };
        assert!(!fork_due_for_deletion(
            ForkKind::Candidate,
            Some(ENDED),
            ENDED + 90 * DAY,
            &f
        ));
    }

    #[test]
    fn an_overdue_or_ended_edit_session_loses_its_fork_at_once() {
        let due = ForkFacts {
            session_due_at_secs: Some(ENDED),
            ..ForkFacts::default()
        };
        assert!(!fork_due_for_deletion(ForkKind::EditSession, None, ENDED - 1, &due));
        assert!(fork_due_for_deletion(ForkKind::EditSession, None, ENDED, &due));
        assert!(fork_due_for_deletion(
            ForkKind::EditSession,
            Some(ENDED),
            ENDED,
            &ForkFacts::default()
        ));
        assert!(!fork_due_for_deletion(
            ForkKind::EditSession,
            None,
            ENDED,
            &ForkFacts::default()
        ));
    }

    #[test]
    fn a_patch_within_the_limit_is_kept_whole() {
        let patch = "a\n".repeat(PATCH_LIMIT_BYTES / 2);
        assert_eq!(patch.len(), PATCH_LIMIT_BYTES);
        let (kept, truncated, full) = cut_patch(&patch, PATCH_LIMIT_BYTES);
        assert_eq!(
            (kept.len(), truncated, full),
            (PATCH_LIMIT_BYTES, false, PATCH_LIMIT_BYTES)
        );
    }

    #[test]
    fn a_patch_past_the_limit_stops_at_the_last_whole_line() {
        let patch = format!("{}{}", "0123456789\n".repeat(50_000), "tail\n");
        let (kept, truncated, full) = cut_patch(&patch, PATCH_LIMIT_BYTES);
        assert!(truncated);
        assert_eq!(full, patch.len());
        assert!(kept.len() <= PATCH_LIMIT_BYTES);
        assert!(kept.len() > PATCH_LIMIT_BYTES - 11);
        assert!(kept.ends_with('\n'));
        assert!(patch.starts_with(&kept));
    }

    #[test]
    fn a_line_straddling_the_limit_is_dropped_whole() {
        let (kept, truncated, full) = cut_patch("ab\ncdef\n", 5);
        assert_eq!((kept.as_str(), truncated, full), ("ab\n", true, 8));
        let (kept, _, _) = cut_patch("abcdef\n", 3);
        assert_eq!(kept, "");
    }

    #[test]
    fn a_cut_never_splits_a_multi_byte_character() {
        let (kept, truncated, _) = cut_patch("é\nééé\n", 4);
        assert_eq!((kept.as_str(), truncated), ("é\n", true));
    }
}
