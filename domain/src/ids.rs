//! Prefixed, opaque identifiers. The store mints them; everything else only carries them.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! id_type {
    ($(#[$m:meta])* $name:ident, $prefix:literal) => {
        $(#[$m])*
        // `Default` (the empty id) only fills workflow state before its input is read.
        #[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            pub const PREFIX: &'static str = $prefix;

            /// Builds an id from a random hex body minted by the caller.
            pub fn from_body(body: &str) -> Self {
                Self(format!("{}{}", $prefix, body))
            }

            /// Whether `s` has this id's prefix and a non-empty body of `[a-z0-9]`.
            pub fn is_valid(s: &str) -> bool {
                s.strip_prefix($prefix).is_some_and(|b| {
                    !b.is_empty() && b.len() <= 64 && b.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                })
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        // An id is carried as the text it is: it reads where text is wanted (`&id` as a `&str`
        // key, a path segment), while its type keeps one kind of id from standing in for another.
        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self(s)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl From<&$name> for String {
            fn from(id: &$name) -> String {
                id.0.clone()
            }
        }

        impl From<&$name> for $name {
            fn from(id: &$name) -> Self {
                id.clone()
            }
        }

        impl PartialEq<&$name> for String {
            fn eq(&self, other: &&$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                self == &other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .description(Some(concat!("`", $prefix, "` followed by 1 to 64 characters of [a-z0-9]")))
                    .into()
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::ToSchema for $name {}
    };
}

id_type!(
    /// An account: the owner of tokens, gg configurations and reviews.
    AccountId, "acct_");
id_type!(
    /// A queued or executed unit of work.
    JobId, "job_");
id_type!(
    /// A completed run: one job's recorded result.
    RunId, "run_");
id_type!(
    /// A saved gg configuration.
    GgConfigId, "gg_");
id_type!(
    /// A project: its canonical repository is named after this id.
    ProjectId, "proj_");
id_type!(
    /// A Change: a request against a project, carried out by Tasks.
    ChangeId, "chg_");
id_type!(
    /// A Task of a Change.
    TaskId, "task_");
id_type!(
    /// One run of a Task (its workspace fork is `ws-<body>`). Its prefix is its own, so a task
    /// run is never mistaken for an evaluation run (`run_`); task runs made before the prefix
    /// was introduced keep their `run_` ids, and [`TaskRunId::is_valid_any`] accepts both.
    TaskRunId, "trun_");
id_type!(
    /// A ChangeSet: the commit a task run published.
    ChangeSetId, "cs_");
id_type!(
    /// An API token (its secret is never stored).
    TokenId, "tok_");
id_type!(
    /// A code edit session (its fork is `edit-<body>`).
    EditSessionId, "edit_");
id_type!(
    /// A reservation on a project's monthly Sandbox meter.
    ReservationId, "sres_");

impl RunId {
    /// The run a job records when it completes: the job's own body under the run prefix, so a
    /// run's workflow (`run-<job id>`) carries its run id (`BelayRunId`) from its start.
    pub fn for_job(job: &JobId) -> Self {
        Self::from_body(job.strip_prefix(JobId::PREFIX).unwrap_or(job.as_str()))
    }
}

impl TaskRunId {
    /// The prefix task-run ids had before they got their own.
    pub const LEGACY_PREFIX: &'static str = "run_";

    /// Whether `s` is a task-run id, current (`trun_`) or from before the prefix (`run_`).
    pub fn is_valid_any(s: &str) -> bool {
        Self::is_valid(s)
            || s.strip_prefix(Self::LEGACY_PREFIX)
                .is_some_and(|b| Self::is_valid(&format!("{}{b}", Self::PREFIX)))
    }

    /// The id without its prefix (either prefix).
    pub fn body_of(s: &str) -> Option<&str> {
        s.strip_prefix(Self::PREFIX)
            .or_else(|| s.strip_prefix(Self::LEGACY_PREFIX))
    }
}

// Coverage plans and ladders.
id_type!(
    /// A coverage group: a reusable, ordered set of combinations or of pinned cases.
    GroupId, "grp_");
id_type!(
    /// A coverage plan.
    PlanId, "plan_");
id_type!(
    /// A ladder.
    LadderId, "lad_");
id_type!(
    /// A rung of a ladder: minted when the rung is added, never reused, never its position.
    RungId, "rung_");

// The source lane's verification, selection and promotion records.
id_type!(
    /// A Candidate: a set of ChangeSets composed on one canonical base (its fork is `cand-<body>`).
    CandidateId, "cand_");
id_type!(
    /// One Evidence record: the result of one check attempt on a Candidate.
    EvidenceId, "ev_");
id_type!(
    /// A Decision Receipt: the inputs and outcome of a decision belay made (selection, repair, integration).
    ReceiptId, "rcpt_");
id_type!(
    /// A person's approval or rejection of a Candidate's composed tree.
    ApprovalId, "appr_");
id_type!(
    /// A conflict between two Tasks' ChangeSets, as the conflict review reported it.
    ConflictId, "cfl_");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jobs_run_shares_its_body() {
        assert_eq!(RunId::for_job(&JobId::from("job_0a1b")).as_str(), "run_0a1b");
        assert!(RunId::is_valid(RunId::for_job(&JobId::from("job_0a1b")).as_str()));
    }

    #[test]
    fn an_id_needs_its_own_prefix() {
        assert!(JobId::is_valid("job_0a1b"));
        assert!(!JobId::is_valid("run_0a1b"));
        assert!(!JobId::is_valid("job_"));
        assert!(!JobId::is_valid("job_A1"));
        assert_eq!(JobId::from_body("ff").to_string(), "job_ff");
    }

    #[test]
    fn a_task_run_id_has_its_own_prefix_and_old_ones_still_read() {
        assert!(TaskRunId::is_valid("trun_0a1b"));
        assert!(
            !TaskRunId::is_valid("run_0a1b"),
            "new task runs never take the run prefix"
        );
        assert!(TaskRunId::is_valid_any("run_0a1b"));
        assert!(TaskRunId::is_valid_any("trun_0a1b"));
        assert!(!TaskRunId::is_valid_any("job_0a1b"));
        assert_eq!(TaskRunId::body_of("run_0a1b"), Some("0a1b"));
        assert_eq!(TaskRunId::body_of("trun_0a1b"), Some("0a1b"));
        assert_ne!(TaskRunId::PREFIX, RunId::PREFIX);
    }
}
