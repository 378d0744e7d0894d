//! Candidates: a set of ChangeSets composed on one canonical base, verified as one.
//!
//! The status a Candidate can be in and the first decision of its verification workflow (skip,
//! stale, rejected or go on) live here, so the workflow, the store and the API agree on what each
//! status allows. A stale Candidate stays stale: recomposing makes a new Candidate.

use crate::acceptance::JudgedCriterion;
use crate::change::{ChangeSet, ChangeStatus};
use crate::ids::{CandidateId, ChangeId, ChangeSetId, ProjectId};
use crate::plan::VerificationPlan;
use crate::selection::SelectionJson;
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CandidateStatus {
    Composing,
    Verifying,
    Verified,
    Rejected,
    Stale,
    Promoted,
}

impl CandidateStatus {
    pub const ALL: [CandidateStatus; 6] = [
        CandidateStatus::Composing,
        CandidateStatus::Verifying,
        CandidateStatus::Verified,
        CandidateStatus::Rejected,
        CandidateStatus::Stale,
        CandidateStatus::Promoted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CandidateStatus::Composing => "composing",
            CandidateStatus::Verifying => "verifying",
            CandidateStatus::Verified => "verified",
            CandidateStatus::Rejected => "rejected",
            CandidateStatus::Stale => "stale",
            CandidateStatus::Promoted => "promoted",
        }
    }

    pub fn parse(s: &str) -> Option<CandidateStatus> {
        CandidateStatus::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Still composing or verifying: a sibling in this state holds selection back.
    pub fn is_pending(self) -> bool {
        matches!(self, CandidateStatus::Composing | CandidateStatus::Verifying)
    }

    /// Rejected, stale or promoted: nothing changes it any more.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            CandidateStatus::Rejected | CandidateStatus::Stale | CandidateStatus::Promoted
        )
    }
}

/// What `metrics_json` holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct CandidateMetrics {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criteria_met: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criteria_total: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p95_ms: Option<f64>,
}

/// A Candidate as stored and shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    pub id: CandidateId,
    pub change_id: ChangeId,
    pub project_id: ProjectId,
    /// The canonical generation, commit and tree it is composed on.
    pub base_generation: i64,
    pub base_commit: String,
    pub base_tree: String,
    /// In Work Graph order.
    pub change_set_ids: Vec<ChangeSetId>,
    pub status: CandidateStatus,
    pub status_reason: Option<String>,
    pub composed_commit: Option<String>,
    pub composed_tree: Option<String>,
    pub plan: Option<VerificationPlan>,
    pub selection: Option<SelectionJson>,
    pub acceptance: Option<Vec<JudgedCriterion>>,
    pub metrics: CandidateMetrics,
    /// The Candidate composed from the same ChangeSets on a newer base, once this one went stale.
    pub recomposed_as: Option<CandidateId>,
    pub created_at: i64,
}

/// The verification workflow's first decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerificationStart {
    /// Verified, rejected or promoted already: nothing to do.
    Skip,
    /// Stale, or its base is behind canonical: mark it stale (when it is not yet) and recompose.
    Stale { reason: String },
    /// The Change was cancelled.
    Reject { reason: String },
    /// Base is canonical: check compatibility and compose.
    Proceed,
}

/// Where the flowchart goes from "Load Candidate, Change, ChangeSets, canonical".
pub fn verification_start(
    status: CandidateStatus,
    base_generation: i64,
    canonical_generation: i64,
    change_status: ChangeStatus,
) -> VerificationStart {
    match status {
        CandidateStatus::Verified | CandidateStatus::Rejected | CandidateStatus::Promoted => VerificationStart::Skip,
        CandidateStatus::Stale => VerificationStart::Stale {
            reason: "stale: composed on an older canonical generation".into(),
        },
        _ if base_generation < canonical_generation => VerificationStart::Stale {
            reason: stale_reason(base_generation, canonical_generation),
        },
        _ if change_status == ChangeStatus::Cancelled => VerificationStart::Reject {
            reason: "the change was cancelled".into(),
        },
        _ => VerificationStart::Proceed,
    }
}

/// "Base generation 1 is behind canonical generation 2."
pub fn stale_reason(base_generation: i64, canonical_generation: i64) -> String {
    let relation = if base_generation < canonical_generation {
        "behind"
    } else {
        "not"
    };
    format!("Base generation {base_generation} is {relation} canonical generation {canonical_generation}.")
}

/// Why a Candidate cannot be made from the ChangeSets asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChosenRefusal {
    /// An id in `changeSetIds` that is not (or no longer) one of the Change's ChangeSets.
    NotOfChange(String),
    /// The Change has no ChangeSet to verify.
    Empty,
}

/// The ChangeSets a new Candidate composes, from the Change's ChangeSets in Work Graph order
/// (`all`, oldest first within a Task). Without `explicit` ids: the latest ChangeSet of each Task,
/// Tasks in the order of their first ChangeSet. With them: those ids, in `all`'s order, each one
/// required to be the Change's.
pub fn chosen_change_sets(all: &[ChangeSet], explicit: Option<&[String]>) -> Result<Vec<ChangeSetId>, ChosenRefusal> {
    let chosen: Vec<ChangeSetId> = match explicit {
        None => {
            let mut latest: Vec<&ChangeSet> = Vec::new();
            for cs in all {
                match latest.iter_mut().find(|l| l.task_id == cs.task_id) {
                    Some(l) => *l = cs,
                    None => latest.push(cs),
                }
            }
            latest.into_iter().map(|c| c.id.clone()).collect()
        }
        Some(ids) => {
            if let Some(foreign) = ids.iter().find(|id| !all.iter().any(|c| c.id.as_str() == id.as_str())) {
                return Err(ChosenRefusal::NotOfChange(foreign.clone()));
            }
            all.iter()
                .filter(|c| ids.iter().any(|i| i == c.id.as_str()))
                .map(|c| c.id.clone())
                .collect()
        }
    };
    if chosen.is_empty() {
        return Err(ChosenRefusal::Empty);
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_candidate_that_is_done_is_skipped() {
        for s in [
            CandidateStatus::Verified,
            CandidateStatus::Rejected,
            CandidateStatus::Promoted,
        ] {
            assert_eq!(
                verification_start(s, 1, 1, ChangeStatus::Verifying),
                VerificationStart::Skip
            );
        }
    }

    #[test]
    fn a_base_behind_canonical_is_stale_before_anything_else() {
        assert_eq!(
            verification_start(CandidateStatus::Composing, 1, 2, ChangeStatus::Cancelled),
            VerificationStart::Stale {
                reason: "Base generation 1 is behind canonical generation 2.".into()
            }
        );
        assert!(matches!(
            verification_start(CandidateStatus::Stale, 2, 2, ChangeStatus::Verifying),
            VerificationStart::Stale { .. }
        ));
    }

    #[test]
    fn a_cancelled_change_rejects_and_otherwise_verification_proceeds() {
        assert!(matches!(
            verification_start(CandidateStatus::Composing, 2, 2, ChangeStatus::Cancelled),
            VerificationStart::Reject { .. }
        ));
        assert_eq!(
            verification_start(CandidateStatus::Verifying, 2, 2, ChangeStatus::Verifying),
            VerificationStart::Proceed
        );
    }

    #[test]
    fn statuses_read_back_and_say_what_they_allow() {
        for s in CandidateStatus::ALL {
            assert_eq!(CandidateStatus::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
            assert!(!(s.is_pending() && s.is_final()));
        }
        assert!(CandidateStatus::Verifying.is_pending());
        assert!(!CandidateStatus::Verified.is_final());
    }

    fn change_set(id: &str, task: &str) -> ChangeSet {
        ChangeSet {
            id: ChangeSetId::from(id),
            task_id: crate::ids::TaskId::from(task),
            run_id: crate::ids::TaskRunId::from("trun_1"),
            commit: String::new(),
            contract_changes: vec![],
            data_changes: vec![],
            patch_ref: None,
            created_at: 0,
        }
    }

    #[test]
    fn a_candidate_takes_the_latest_change_set_of_each_task_in_work_graph_order() {
        let all = [
            change_set("cs_a1", "task_a"),
            change_set("cs_b1", "task_b"),
            change_set("cs_a2", "task_a"),
        ];
        let chosen = chosen_change_sets(&all, None).unwrap();
        assert_eq!(chosen, [ChangeSetId::from("cs_a2"), ChangeSetId::from("cs_b1")]);
    }

    #[test]
    fn explicit_change_sets_keep_the_changes_order_and_must_be_the_changes() {
        let all = [change_set("cs_a1", "task_a"), change_set("cs_b1", "task_b")];
        let ids = ["cs_b1".to_string(), "cs_a1".to_string()];
        assert_eq!(
            chosen_change_sets(&all, Some(&ids)).unwrap(),
            [ChangeSetId::from("cs_a1"), ChangeSetId::from("cs_b1")]
        );
        let foreign = ["cs_a1".to_string(), "cs_zz".to_string()];
        assert_eq!(
            chosen_change_sets(&all, Some(&foreign)),
            Err(ChosenRefusal::NotOfChange("cs_zz".into()))
        );
    }

    #[test]
    fn a_change_without_change_sets_has_nothing_to_verify() {
        assert_eq!(chosen_change_sets(&[], None), Err(ChosenRefusal::Empty));
        assert_eq!(chosen_change_sets(&[], Some(&[])), Err(ChosenRefusal::Empty));
    }
}
