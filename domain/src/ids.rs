//! Prefixed, opaque identifiers. The store mints them; everything else only carries them.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! id_type {
    ($(#[$m:meta])* $name:ident, $prefix:literal) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
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
    /// One run of a Task (its workspace fork is `ws-<body>`).
    TaskRunId, "run_");
id_type!(
    /// A ChangeSet: the commit a task run published.
    ChangeSetId, "cs_");
id_type!(
    /// An API token (its secret is never stored).
    TokenId, "tok_");

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
    fn an_id_needs_its_own_prefix() {
        assert!(JobId::is_valid("job_0a1b"));
        assert!(!JobId::is_valid("run_0a1b"));
        assert!(!JobId::is_valid("job_"));
        assert!(!JobId::is_valid("job_A1"));
        assert_eq!(JobId::from_body("ff").to_string(), "job_ff");
    }
}
