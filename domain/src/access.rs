//! Who may do what: account roles for cabinet-wide actions, and which events an account sees.
//!
//! - An account is an `operator` or a `member`. The bootstrap account of `belay dev` and
//!   `belay account create --operator` make operators; every other account is a member.
//! - Catalogue writes (test cases, versions, harnesses, models) and the cabinet-wide bulk cancels
//!   need an operator.
//! - A member cancels the jobs it launched and, through halts, the jobs of its own plans and
//!   ladders; an operator cancels any job.
//! - Runs, jobs and the catalogue stay readable by every account: counts are global and reviewers
//!   share runs. Projects and everything in them (Changes, Tasks, task runs, workspaces, edit
//!   sessions, ChangeSets, repository tokens), gg configurations and accounts are their owner's.
//! - An event is visible to the accounts that may see its entity: the owner's for an owned entity,
//!   every account's for a job, run, review or catalogue entry.

use std::fmt;

/// An account's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Operator,
    Member,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Operator => "operator",
            Role::Member => "member",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "operator" => Some(Role::Operator),
            "member" => Some(Role::Member),
            _ => None,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A cabinet-wide action: one that changes what every account sees or runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CabinetAction {
    /// Creating or changing a test case, a version, a harness or a model.
    CatalogueWrite,
    /// `POST /v1/jobs/cancel`: every queued or in-flight job of every account.
    BulkCancel,
}

/// Whether `role` may take a cabinet-wide action: operators only.
pub fn may(role: Role, _action: CabinetAction) -> bool {
    role == Role::Operator
}

/// Whether an account may cancel one job: an operator any; a member the jobs it launched and
/// those of its own plans and ladders (`origin_owner` is the owner of the job's plan or ladder).
pub fn may_cancel_job(role: Role, caller: &str, launched_by: Option<&str>, origin_owner: Option<&str>) -> bool {
    role == Role::Operator || launched_by == Some(caller) || origin_owner == Some(caller)
}

/// Whether events of `kind` belong to an owned entity (seen by its owner only) rather than to a
/// job, run, review or catalogue entry (seen by every account).
pub fn event_is_owned(kind: &str) -> bool {
    const OWNED: [&str; 22] = [
        "account.",
        "api.",
        "project.",
        "change.",
        "task.",
        "task_run.",
        "workspace.",
        "change_set.",
        "edit_session.",
        "gg_config.",
        // Coverage: an account's groups, plans, buffer setting and ladders.
        "coverage_group.",
        "coverage_plan.",
        "coverage_settings.",
        "ladder.",
        // The source lane after the Change: of a project, a Change or a Candidate.
        "policy.",
        "verification.",
        "candidate.",
        "conflict.",
        "approval.",
        "repair.",
        "canonical.",
        "release.",
    ];
    OWNED.iter().any(|p| kind.starts_with(p))
}

/// Whether `viewer` sees an event whose entity's owner is `owner` (`None`: an entity every
/// account sees). An owned event whose owner could not be found is seen by nobody.
pub fn event_visible(owner: Option<&str>, viewer: &str) -> bool {
    match owner {
        None => true,
        Some(owner) => owner == viewer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_writes_and_bulk_cancels_need_an_operator() {
        for action in [CabinetAction::CatalogueWrite, CabinetAction::BulkCancel] {
            assert!(may(Role::Operator, action));
            assert!(!may(Role::Member, action));
        }
    }

    #[test]
    fn a_member_cancels_its_own_jobs_and_those_of_its_plans_and_ladders() {
        assert!(may_cancel_job(Role::Member, "acct_a", Some("acct_a"), None));
        assert!(may_cancel_job(Role::Member, "acct_a", Some("acct_b"), Some("acct_a")));
        assert!(!may_cancel_job(Role::Member, "acct_a", Some("acct_b"), None));
        assert!(!may_cancel_job(Role::Member, "acct_a", None, Some("acct_b")));
        assert!(may_cancel_job(Role::Operator, "acct_a", Some("acct_b"), None));
    }

    #[test]
    fn an_event_is_seen_by_those_who_may_see_its_entity() {
        for owned in [
            "project.created",
            "change.created",
            "edit_session.opened",
            "workspace.published",
            "gg_config.updated",
            "account.created",
            "candidate.promoted",
            "approval.requested",
            "canonical.advanced",
            "release.started",
            "repair.requested",
            "policy.updated",
            "coverage_group.created",
            "coverage_plan.topped_up",
            "coverage_settings.updated",
            "ladder.early_stopped",
        ] {
            assert!(event_is_owned(owned), "{owned}");
        }
        for global in ["job.enqueued", "run.recorded", "review.submitted", "test_case.ingested"] {
            assert!(!event_is_owned(global), "{global}");
        }
        assert!(event_visible(None, "acct_a"));
        assert!(event_visible(Some("acct_a"), "acct_a"));
        assert!(!event_visible(Some("acct_b"), "acct_a"));
        assert!(
            !event_visible(Some(""), "acct_a"),
            "an owned event without a found owner is nobody's"
        );
        assert_eq!(Role::parse("operator"), Some(Role::Operator));
        assert_eq!(Role::parse(Role::Member.as_str()), Some(Role::Member));
        assert_eq!(Role::parse("admin"), None);
    }
}
