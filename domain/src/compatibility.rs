//! `checkCompatibility`: whether a Candidate's ChangeSets may be composed at all, decided from
//! their declarations and bases before any fork or Sandbox second is spent.
//!
//! Deterministic and cheap: a ChangeSet that declares a contract or data change on a resource the
//! policy protects is an `invariant_violation`; a ChangeSet built on a base the Candidate cannot
//! hold is incompatible; a file two ChangeSets both change is reported and composition goes on
//! (the merge decides whether it really collides).

use crate::change::{ChangeSet, Task};
use crate::contract::{ContractLine, Route, parse_contract_change, says_no_change};
use crate::ids::ChangeSetId;
use crate::prose::words;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// One ChangeSet of the Candidate, with what the check needs to know about it.
#[derive(Debug, Clone, Copy)]
pub struct ChangeSetFacts<'a> {
    pub change_set: &'a ChangeSet,
    pub task: &'a Task,
    /// The paths its patch changes.
    pub changed_paths: &'a [String],
    /// The canonical generation its workspace started from; `None` when its base is not a
    /// canonical commit of the project.
    pub base_generation: Option<i64>,
    /// The ChangeSets its workspace had merged in (stacked) before the agent worked.
    pub stacked_on: &'a [String],
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum Incompatibility {
    /// The ChangeSet declares a contract or data change on a protected resource.
    InvariantViolation {
        change_set_id: ChangeSetId,
        resource: String,
        declaration: String,
    },
    /// The ChangeSet was built on a base the Candidate cannot hold.
    IncompatibleBase { change_set_id: ChangeSetId, reason: String },
}

/// A file more than one ChangeSet changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SharedFile {
    pub path: String,
    pub change_set_ids: Vec<ChangeSetId>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Compatibility {
    pub incompatible: Vec<Incompatibility>,
    pub shared_files: Vec<SharedFile>,
}

impl Compatibility {
    pub fn is_compatible(&self) -> bool {
        self.incompatible.is_empty()
    }

    /// The composition Evidence summary and the Candidate's status reason when it is rejected.
    pub fn rejection_reason(&self) -> Option<String> {
        let list: Vec<String> = self
            .incompatible
            .iter()
            .map(|i| match i {
                Incompatibility::InvariantViolation {
                    change_set_id,
                    resource,
                    declaration,
                } => format!(
                    "invariant_violation: {change_set_id} declares a change on protected resource {resource} (\"{declaration}\")"
                ),
                Incompatibility::IncompatibleBase { change_set_id, reason } => {
                    format!("incompatible_base: {change_set_id} {reason}")
                }
            })
            .collect();
        (!list.is_empty()).then(|| list.join("; "))
    }
}

/// A protected resource, read: a route (`/api/billing`, `GET /api/health`, protecting the path and
/// everything under it) or a name (`billing`, `billing:api`).
enum Protected {
    Route(Route),
    Name(Vec<String>),
}

fn read_protected(resource: &str) -> Protected {
    let r = resource.trim().trim_end_matches("/*");
    let route = match r.split_once(' ') {
        Some((m, p)) if p.starts_with('/') => Some(Route::new(m, p)),
        None if r.starts_with('/') => Some(Route {
            method: None,
            path: Route::new("GET", r).path,
        }),
        _ => None,
    };
    match route {
        Some(route) => Protected::Route(route),
        None => Protected::Name(words(r)),
    }
}

fn under(path_key: &str, root_key: &str) -> bool {
    root_key == "/" || path_key == root_key || path_key.starts_with(&format!("{root_key}/"))
}

fn contains_seq(hay: &[String], needle: &[String]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// Whether a declaration line (contract or data) touches a protected resource.
fn violates(protected: &Protected, line: &str, contract: Option<&ContractLine>, task: &Task) -> bool {
    match protected {
        Protected::Route(root) => {
            let Some(ContractLine::Changes { changes, .. }) = contract else {
                return false;
            };
            changes.iter().any(|c| {
                under(&c.route.path_key(), &root.path_key())
                    && match (&root.method, &c.route.method) {
                        (Some(a), Some(b)) => a == b,
                        _ => true,
                    }
            })
        }
        Protected::Name(name) => {
            contains_seq(&words(line), name) || task.semantic_resources.iter().any(|r| words(r).starts_with(name))
        }
    }
}

/// `checkCompatibility` for a Candidate composed on `candidate_base_generation`, under the
/// policy's `protected_resources`.
pub fn check_compatibility(
    candidate_base_generation: i64,
    change_sets: &[ChangeSetFacts<'_>],
    protected_resources: &[String],
) -> Compatibility {
    let protected: Vec<(&String, Protected)> = protected_resources.iter().map(|r| (r, read_protected(r))).collect();
    let held: Vec<&str> = change_sets.iter().map(|c| c.change_set.id.as_str()).collect();
    let mut out = Compatibility::default();
    for facts in change_sets {
        let id = facts.change_set.id.clone();
        let contract = facts
            .change_set
            .contract_changes
            .iter()
            .map(|l| (l, Some(parse_contract_change(l))))
            .filter(|(_, parsed)| parsed.as_ref().is_some_and(ContractLine::is_change));
        let data = facts
            .change_set
            .data_changes
            .iter()
            .filter(|l| !says_no_change(l) && l.chars().any(char::is_alphanumeric))
            .map(|l| (l, None));
        'lines: for (line, parsed) in contract.chain(data) {
            for (resource, p) in &protected {
                if violates(p, line, parsed.as_ref(), facts.task) {
                    out.incompatible.push(Incompatibility::InvariantViolation {
                        change_set_id: id.clone(),
                        resource: (*resource).clone(),
                        declaration: line.trim().to_owned(),
                    });
                    continue 'lines;
                }
            }
        }
        let base = match facts.base_generation {
            None => Some("is not built on a canonical commit of the project".to_owned()),
            Some(g) if g > candidate_base_generation => Some(format!(
                "is built on generation {g}, newer than the candidate's base generation {candidate_base_generation}"
            )),
            Some(_) => None,
        };
        let missing = facts.stacked_on.iter().find(|s| !held.contains(&s.as_str()));
        for reason in base
            .into_iter()
            .chain(missing.map(|m| format!("is stacked on {m}, which the candidate does not hold")))
        {
            out.incompatible.push(Incompatibility::IncompatibleBase {
                change_set_id: id.clone(),
                reason,
            });
        }
    }
    let mut by_path: BTreeMap<&str, Vec<ChangeSetId>> = BTreeMap::new();
    for facts in change_sets {
        for p in facts.changed_paths {
            let ids = by_path.entry(p.as_str()).or_default();
            let id = facts.change_set.id.clone();
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    out.shared_files = by_path
        .into_iter()
        .filter(|(_, ids)| ids.len() > 1)
        .map(|(path, change_set_ids)| SharedFile {
            path: path.to_owned(),
            change_set_ids,
        })
        .collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::TaskKind;
    use proptest::prelude::*;

    fn task(key: &str, resources: &[&str]) -> Task {
        Task {
            id: format!("task_{key}").into(),
            change_id: "chg_1".into(),
            key: key.into(),
            kind: TaskKind::Implement,
            title: key.into(),
            semantic_resources: resources.iter().map(|s| s.to_string()).collect(),
            dependencies: vec![],
            created_at: 0,
        }
    }

    fn cs(id: &str, contract: &[&str], data: &[&str]) -> ChangeSet {
        ChangeSet {
            id: id.into(),
            task_id: "task_t1".into(),
            run_id: "run_1".into(),
            commit: "0".repeat(40),
            contract_changes: contract.iter().map(|s| s.to_string()).collect(),
            data_changes: data.iter().map(|s| s.to_string()).collect(),
            patch_ref: None,
            created_at: 0,
        }
    }

    fn facts<'a>(c: &'a ChangeSet, t: &'a Task, paths: &'a [String]) -> ChangeSetFacts<'a> {
        ChangeSetFacts {
            change_set: c,
            task: t,
            changed_paths: paths,
            base_generation: Some(0),
            stacked_on: &[],
        }
    }

    fn protected(r: &[&str]) -> Vec<String> {
        r.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_contract_change_on_a_protected_route_is_an_invariant_violation() {
        let t = task("t1", &["todos:api"]);
        let c = cs("cs_a", &["Adds POST /api/billing/refunds"], &[]);
        let out = check_compatibility(0, &[facts(&c, &t, &[])], &protected(&["/api/billing"]));
        assert!(!out.is_compatible());
        assert_eq!(
            out.rejection_reason().unwrap(),
            "invariant_violation: cs_a declares a change on protected resource /api/billing (\"Adds POST /api/billing/refunds\")"
        );
        let only_uses = cs("cs_b", &["Uses GET /api/billing"], &[]);
        assert!(check_compatibility(0, &[facts(&only_uses, &t, &[])], &protected(&["/api/billing"])).is_compatible());
        let other_method = cs("cs_c", &["Adds POST /api/health"], &[]);
        assert!(
            check_compatibility(0, &[facts(&other_method, &t, &[])], &protected(&["GET /api/health"])).is_compatible()
        );
    }

    #[test]
    fn a_data_change_naming_a_protected_resource_is_an_invariant_violation() {
        let t = task("t1", &["todos:api"]);
        let c = cs("cs_a", &["None"], &["Adds a column to the users table"]);
        let out = check_compatibility(0, &[facts(&c, &t, &[])], &protected(&["users"]));
        assert!(
            matches!(&out.incompatible[0], Incompatibility::InvariantViolation { resource, .. } if resource == "users")
        );
        let none = cs("cs_b", &["None"], &["No change"]);
        assert!(check_compatibility(0, &[facts(&none, &t, &[])], &protected(&["users"])).is_compatible());
    }

    #[test]
    fn any_declared_change_by_a_task_on_a_protected_semantic_resource_violates() {
        let t = task("t1", &["billing:api"]);
        let c = cs("cs_a", &["Adds GET /api/invoices"], &[]);
        assert!(!check_compatibility(0, &[facts(&c, &t, &[])], &protected(&["billing"])).is_compatible());
        assert!(!check_compatibility(0, &[facts(&c, &t, &[])], &protected(&["billing:api"])).is_compatible());
        let quiet = cs("cs_b", &["No change"], &[]);
        assert!(check_compatibility(0, &[facts(&quiet, &t, &[])], &protected(&["billing"])).is_compatible());
    }

    #[test]
    fn the_default_policy_protects_nothing() {
        let t = task("t1", &["billing:api"]);
        let c = cs("cs_a", &["Removes DELETE /api/billing"], &["Drops the users table"]);
        let out = check_compatibility(
            0,
            &[facts(&c, &t, &[])],
            &crate::policy::DEFAULT_POLICY.protected_resources,
        );
        assert!(out.is_compatible());
    }

    #[test]
    fn a_change_set_on_a_newer_or_foreign_base_or_stacked_on_a_missing_one_is_incompatible() {
        let t = task("t1", &[]);
        let c = cs("cs_a", &[], &[]);
        let newer = ChangeSetFacts {
            base_generation: Some(3),
            ..facts(&c, &t, &[])
        };
        let foreign = ChangeSetFacts {
            base_generation: None,
            ..facts(&c, &t, &[])
        };
        let stacked = ["cs_z".to_string()];
        let orphan = ChangeSetFacts {
            stacked_on: &stacked,
            ..facts(&c, &t, &[])
        };
        for f in [newer, foreign, orphan] {
            let out = check_compatibility(2, &[f], &[]);
            assert!(
                matches!(out.incompatible[0], Incompatibility::IncompatibleBase { .. }),
                "{out:?}"
            );
        }
        let older = ChangeSetFacts {
            base_generation: Some(1),
            ..facts(&c, &t, &[])
        };
        assert!(check_compatibility(2, &[older], &[]).is_compatible());
    }

    #[test]
    fn a_file_two_change_sets_share_is_reported_and_does_not_stop_composition() {
        let (t1, t2) = (task("t1", &[]), task("t2", &[]));
        let (a, b) = (cs("cs_a", &[], &[]), cs("cs_b", &["Stacked on cs_a"], &[]));
        let pa = ["src/app.ts".to_string(), "src/a.ts".to_string()];
        let pb = ["src/app.ts".to_string(), "src/b.ts".to_string()];
        let stacked = ["cs_a".to_string()];
        let fb = ChangeSetFacts {
            stacked_on: &stacked,
            ..facts(&b, &t2, &pb)
        };
        let out = check_compatibility(0, &[facts(&a, &t1, &pa), fb], &[]);
        assert!(out.is_compatible());
        assert_eq!(
            out.shared_files,
            [SharedFile {
                path: "src/app.ts".into(),
                change_set_ids: vec![ChangeSetId("cs_a".into()), ChangeSetId("cs_b".into())]
            }]
        );
    }

    proptest! {
        #[test]
        fn no_protected_resource_means_no_invariant_violation(
            lines in prop::collection::vec(any::<String>(), 0..5),
            data in prop::collection::vec(any::<String>(), 0..3),
        ) {
            let t = task("t1", &["billing:api"]);
            let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
            let data: Vec<&str> = data.iter().map(String::as_str).collect();
            let c = cs("cs_a", &lines, &data);
            let out = check_compatibility(0, &[facts(&c, &t, &[])], &[]);
            prop_assert!(out.is_compatible());
            let _ = check_compatibility(0, &[facts(&c, &t, &[])], &protected(&["billing", "/api", "GET /x"]));
        }
    }
}
