//! Conflicts between two Tasks' ChangeSets, and the integrate rule that turns a conflict between
//! complementary Tasks into a dependency instead of a fork.
//!
//! The conflict review runs outside belay and reports what it found. belay has no Context
//! Packets, so a finding cites what belay holds: the ChangeSet ids of both sides and the paths (or
//! declared contract lines) in them that collide. Every citation is checked here; a finding with a
//! bad one is unsupported and changes nothing. Then, before the fork rule, two Tasks whose planned
//! semantic resources do not overlap are parts of one plan: the conflict is integrated by making
//! one depend on the other, in the direction the first of the spec's four rules gives.

use crate::change::{ChangeSet, Task};
use crate::contract::parse_contract_changes;
use crate::ids::{ChangeSetId, ConflictId, TaskId};
use crate::prose::words;
use crate::validation::{ValidationError, check_text};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::BTreeSet;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

const MAX_CITATIONS: usize = 100;

/// What the conflict review concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ConflictStatus {
    /// The two sides cannot both ship: one Candidate per side.
    Confirmed,
    /// The review needs more evidence: both sides and a combined Candidate.
    ForkRequired,
    /// Not a conflict.
    Dismissed,
}

/// One side of a finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConflictSide {
    pub task_id: TaskId,
    pub change_set_ids: Vec<ChangeSetId>,
    /// Paths in those ChangeSets' patches that collide.
    #[serde(default)]
    pub paths: Vec<String>,
    /// Contract lines those ChangeSets declare that collide.
    #[serde(default)]
    pub contract_lines: Vec<String>,
}

/// `POST /v1/changes/{id}/conflicts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConflictInput {
    pub status: ConflictStatus,
    /// Exactly two sides, of two different Tasks.
    pub sides: Vec<ConflictSide>,
    #[serde(default)]
    pub summary: Option<String>,
}

/// A ChangeSet of the Change with the paths its patch changes.
#[derive(Debug, Clone, Copy)]
pub struct ChangeSetPaths<'a> {
    pub change_set: &'a ChangeSet,
    pub changed_paths: &'a [String],
}

impl ConflictInput {
    /// Checks the finding and every citation against the Change's Tasks and ChangeSets. A bad
    /// citation makes the finding unsupported: the error names it, and every refusal is
    /// [`Refused::Invalid`](crate::validation::Refused) (422), as the spec says. What the body
    /// gets wrong by itself (two sides, the counts of citations, the summary) is checked first;
    /// then a citation of the wrong Task, ChangeSet, path or contract line (both sides one Task
    /// included).
    pub fn validate(&self, tasks: &[Task], change_sets: &[ChangeSetPaths<'_>]) -> Result<(), ValidationError> {
        if self.sides.len() != 2 {
            return Err(ValidationError::new("sides", "must name exactly two sides"));
        }
        if let Some(s) = &self.summary {
            check_text("summary", s, 2000)?;
        }
        for (i, side) in self.sides.iter().enumerate() {
            let at = |f: &str| format!("sides[{i}].{f}");
            if side.change_set_ids.is_empty() || side.change_set_ids.len() > MAX_CITATIONS {
                return Err(ValidationError::new(
                    at("changeSetIds"),
                    format!("must cite 1 to {MAX_CITATIONS} ChangeSets of the side's Task"),
                ));
            }
            if side.paths.is_empty() && side.contract_lines.is_empty() {
                return Err(ValidationError::new(
                    at("paths"),
                    "must cite at least one path or contract line of the cited ChangeSets",
                ));
            }
            if side.paths.len() > MAX_CITATIONS || side.contract_lines.len() > MAX_CITATIONS {
                return Err(ValidationError::new(
                    at("paths"),
                    format!("must cite at most {MAX_CITATIONS} paths and {MAX_CITATIONS} contract lines"),
                ));
            }
        }
        if self.sides[0].task_id == self.sides[1].task_id {
            return Err(ValidationError::new(
                "sides[1].taskId",
                "must be another Task than sides[0].taskId",
            ));
        }
        for (i, side) in self.sides.iter().enumerate() {
            let at = |f: &str| format!("sides[{i}].{f}");
            if !tasks.iter().any(|t| t.id == side.task_id.0) {
                return Err(ValidationError::new(at("taskId"), "is not a Task of this Change"));
            }
            let mut cited: Vec<&ChangeSetPaths<'_>> = Vec::new();
            for (j, id) in side.change_set_ids.iter().enumerate() {
                match change_sets.iter().find(|c| c.change_set.id == id.0) {
                    Some(c) if c.change_set.task_id == side.task_id.0 => cited.push(c),
                    Some(_) => {
                        return Err(ValidationError::new(
                            at(&format!("changeSetIds[{j}]")),
                            format!("{id} is not a ChangeSet of Task {}", side.task_id),
                        ));
                    }
                    None => {
                        return Err(ValidationError::new(
                            at(&format!("changeSetIds[{j}]")),
                            format!("{id} is not a ChangeSet of this Change"),
                        ));
                    }
                }
            }
            for (j, p) in side.paths.iter().enumerate() {
                if !cited.iter().any(|c| c.changed_paths.contains(p)) {
                    return Err(ValidationError::new(
                        at(&format!("paths[{j}]")),
                        format!("{p} is not a path in the patches of the cited ChangeSets"),
                    ));
                }
            }
            for (j, l) in side.contract_lines.iter().enumerate() {
                if !cited
                    .iter()
                    .any(|c| c.change_set.contract_changes.iter().any(|d| d.trim() == l.trim()))
                {
                    return Err(ValidationError::new(
                        at(&format!("contractLines[{j}]")),
                        "is not a contract line the cited ChangeSets declare",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// How an integrated conflict was resolved (`review_json.integrate`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConflictIntegration {
    /// The key of the Task that now depends on the other.
    pub dependent: String,
    pub depends_on: String,
    pub rule: DirectionRule,
}

/// A conflict as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Conflict {
    pub id: ConflictId,
    pub status: ConflictStatus,
    pub sides: Vec<ConflictSide>,
    pub summary: Option<String>,
    /// Set once the conflict is resolved by the integrate rule.
    pub integrate: Option<ConflictIntegration>,
    pub created_at: i64,
}

/// The last segment of a semantic resource (`todos:ui` → `ui`, `missions:calendar-ui` →
/// `calendar-ui`) is, or ends after a `-` with, one of `words`.
fn resource_ends_with(resource: &str, words: &[&str]) -> bool {
    let last = resource.rsplit([':', '/']).next().unwrap_or(resource);
    words
        .iter()
        .any(|w| last == *w || last.strip_suffix(w).is_some_and(|rest| rest.ends_with('-')))
}

/// A UI Task: a resource whose last segment is `ui`, `frontend` or `page` (alone or after `-`), or
/// a title that says UI, page or frontend.
pub fn is_ui_task(task: &Task) -> bool {
    const UI: &[&str] = &["ui", "frontend", "page"];
    task.semantic_resources.iter().any(|r| resource_ends_with(r, UI))
        || words(&task.title).iter().any(|w| UI.contains(&w.as_str()))
}

/// An API Task: a resource whose last segment is `api` (alone or after `-`), or a title that says
/// API.
pub fn is_api_task(task: &Task) -> bool {
    task.semantic_resources.iter().any(|r| resource_ends_with(r, &["api"]))
        || words(&task.title).iter().any(|w| w == "api")
}

/// Two Tasks are complementary when each plans semantic resources and none is shared
/// (`todos:api` and `todos:ui`; `missions:calendar-ui` and `missions:kanban-ui`).
pub fn complementary(a: &Task, b: &Task) -> bool {
    !a.semantic_resources.is_empty()
        && !b.semantic_resources.is_empty()
        && a.semantic_resources.iter().all(|r| !b.semantic_resources.contains(r))
}

/// Which of the four rules gave the direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DirectionRule {
    /// 1. A dependency path already leads from one Task to the other.
    ExistingPath,
    /// 2. The UI Task depends on the API Task.
    UiOnApi,
    /// 3. The Task whose Intent uses the other's contract depends on it.
    Consumer,
    /// 4. The higher Task key depends on the lower.
    HigherKey,
}

/// Whether `from` depends on `to`, directly or through other Tasks (by key).
pub fn depends_on(tasks: &[Task], from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from.to_owned()];
    while let Some(k) = stack.pop() {
        let Some(t) = tasks.iter().find(|t| t.key == k) else {
            continue;
        };
        for d in &t.dependencies {
            if d == to {
                return true;
            }
            if seen.insert(d.clone()) {
                stack.push(d.clone());
            }
        }
    }
    false
}

/// Orders Task keys as people number them: `t2` before `t10`.
pub fn natural_key_order(a: &str, b: &str) -> Ordering {
    fn chunks(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let b = s.as_bytes();
        for i in 1..=b.len() {
            if i == b.len() || b[i].is_ascii_digit() != b[start].is_ascii_digit() {
                out.push((b[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (ca, cb) = (chunks(a), chunks(b));
    for (x, y) in ca.iter().zip(&cb) {
        let o = match (x, y) {
            ((true, n), (true, m)) => {
                let (n, m) = (n.trim_start_matches('0'), m.trim_start_matches('0'));
                n.len().cmp(&m.len()).then_with(|| n.cmp(m))
            }
            ((_, n), (_, m)) => n.cmp(m),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    ca.len().cmp(&cb.len()).then_with(|| a.cmp(b))
}

/// One Task of a conflict with the contract lines of its ChangeSets.
#[derive(Debug, Clone, Copy)]
pub struct TaskContracts<'a> {
    pub task: &'a Task,
    /// Every contract line its ChangeSets declare.
    pub contract_lines: &'a [String],
}

/// The dependency direction by the first rule that applies: (dependent, depends on, rule).
pub fn dependency_direction<'a>(
    a: TaskContracts<'a>,
    b: TaskContracts<'a>,
    tasks: &[Task],
) -> (&'a Task, &'a Task, DirectionRule) {
    let (ta, tb) = (a.task, b.task);
    if depends_on(tasks, &ta.key, &tb.key) {
        return (ta, tb, DirectionRule::ExistingPath);
    }
    if depends_on(tasks, &tb.key, &ta.key) {
        return (tb, ta, DirectionRule::ExistingPath);
    }
    let ui_on_api = |x: &Task, y: &Task| is_ui_task(x) && is_api_task(y);
    match (ui_on_api(ta, tb), ui_on_api(tb, ta)) {
        (true, false) => return (ta, tb, DirectionRule::UiOnApi),
        (false, true) => return (tb, ta, DirectionRule::UiOnApi),
        _ => {}
    }
    let (da, db) = (
        parse_contract_changes(a.contract_lines),
        parse_contract_changes(b.contract_lines),
    );
    let consumes = |x: &crate::contract::ContractDeclarations, y: &crate::contract::ContractDeclarations| {
        x.consumed_contracts
            .iter()
            .any(|used| y.changes.iter().any(|c| c.route.covers(used) || used.covers(&c.route)))
    };
    match (consumes(&da, &db), consumes(&db, &da)) {
        (true, false) => return (ta, tb, DirectionRule::Consumer),
        (false, true) => return (tb, ta, DirectionRule::Consumer),
        _ => {}
    }
    if natural_key_order(&ta.key, &tb.key) == Ordering::Greater {
        (ta, tb, DirectionRule::HigherKey)
    } else {
        (tb, ta, DirectionRule::HigherKey)
    }
}

/// The integration a conflict gets, or `None` when the fork rule applies: only a `confirmed` or
/// `fork_required` conflict between complementary Tasks is integrated, once per Task pair.
/// `integrated_pairs` holds the key pairs already integrated (either order).
pub fn integration_for(
    status: ConflictStatus,
    a: TaskContracts<'_>,
    b: TaskContracts<'_>,
    tasks: &[Task],
    integrated_pairs: &BTreeSet<(String, String)>,
) -> Option<ConflictIntegration> {
    if status == ConflictStatus::Dismissed || !complementary(a.task, b.task) {
        return None;
    }
    let (ka, kb) = (a.task.key.clone(), b.task.key.clone());
    if integrated_pairs.contains(&(ka.clone(), kb.clone())) || integrated_pairs.contains(&(kb, ka)) {
        return None;
    }
    let (dependent, on, rule) = dependency_direction(a, b, tasks);
    Some(ConflictIntegration {
        dependent: dependent.key.clone(),
        depends_on: on.key.clone(),
        rule,
    })
}

/// The Tasks an integration resets to pending (and whose ChangeSets it rejects): the dependent
/// and every Task built on it, by key, in the Change's order.
pub fn tasks_to_reset(dependent: &str, tasks: &[Task]) -> Vec<String> {
    tasks
        .iter()
        .filter(|t| t.key == dependent || depends_on(tasks, &t.key, dependent))
        .map(|t| t.key.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::TaskKind;
    use proptest::prelude::*;

    fn task(key: &str, title: &str, resources: &[&str], deps: &[&str]) -> Task {
        Task {
            id: format!("task_{key}").into(),
            change_id: "chg_1".into(),
            key: key.into(),
            kind: TaskKind::Implement,
            title: title.into(),
            semantic_resources: resources.iter().map(|s| s.to_string()).collect(),
            dependencies: deps.iter().map(|s| s.to_string()).collect(),
            created_at: 0,
        }
    }

    fn cs(id: &str, task_id: &str, contract: &[&str]) -> ChangeSet {
        ChangeSet {
            id: id.into(),
            task_id: task_id.into(),
            run_id: "run_1".into(),
            commit: "0".repeat(40),
            contract_changes: contract.iter().map(|s| s.to_string()).collect(),
            data_changes: vec![],
            patch_ref: None,
            created_at: 0,
        }
    }

    fn side(task: &str, css: &[&str], paths: &[&str], lines: &[&str]) -> ConflictSide {
        ConflictSide {
            task_id: TaskId(task.into()),
            change_set_ids: css.iter().map(|c| ChangeSetId(c.to_string())).collect(),
            paths: paths.iter().map(|s| s.to_string()).collect(),
            contract_lines: lines.iter().map(|s| s.to_string()).collect(),
        }
    }

    struct Fixture {
        tasks: Vec<Task>,
        sets: Vec<ChangeSet>,
        paths: Vec<Vec<String>>,
    }

    impl Fixture {
        fn new() -> Fixture {
            Fixture {
                tasks: vec![
                    task("t1", "Todos API", &["todos:api"], &[]),
                    task("t2", "Todos page", &["todos:ui"], &[]),
                ],
                sets: vec![
                    cs("cs_a", "task_t1", &["Adds POST /api/todos"]),
                    cs("cs_b", "task_t2", &[]),
                ],
                paths: vec![
                    vec!["src/app.ts".into()],
                    vec!["src/app.ts".into(), "public/index.html".into()],
                ],
            }
        }

        fn check(&self, input: &ConflictInput) -> Result<(), ValidationError> {
            let views: Vec<ChangeSetPaths<'_>> = self
                .sets
                .iter()
                .zip(&self.paths)
                .map(|(c, p)| ChangeSetPaths {
                    change_set: c,
                    changed_paths: p,
                })
                .collect();
            input.validate(&self.tasks, &views)
        }
    }

    fn finding(sides: Vec<ConflictSide>) -> ConflictInput {
        ConflictInput {
            status: ConflictStatus::Confirmed,
            sides,
            summary: None,
        }
    }

    #[test]
    fn a_finding_citing_both_sides_change_sets_and_their_paths_is_supported() {
        let f = Fixture::new();
        let input = finding(vec![
            side("task_t1", &["cs_a"], &["src/app.ts"], &["Adds POST /api/todos"]),
            side("task_t2", &["cs_b"], &["src/app.ts"], &[]),
        ]);
        assert_eq!(f.check(&input), Ok(()));
    }

    #[test]
    fn a_bad_citation_makes_the_finding_unsupported_and_names_it() {
        use crate::validation::Refused::Invalid;
        let f = Fixture::new();
        let refused = |sides| {
            let e = f.check(&finding(sides)).unwrap_err();
            (e.field, e.refused)
        };
        let t1 = |cs: &[&str], paths: &[&str], lines: &[&str]| side("task_t1", cs, paths, lines);
        let t2_app = || side("task_t2", &["cs_b"], &["src/app.ts"], &[]);
        // Citing what the Change does not hold that way: unsupported, 422 naming the citation.
        assert_eq!(
            refused(vec![t1(&["cs_b"], &["src/app.ts"], &[]), t2_app()]),
            ("sides[0].changeSetIds[0]".into(), Invalid)
        );
        assert_eq!(
            refused(vec![
                t1(&["cs_a"], &["src/app.ts"], &[]),
                side("task_t2", &["cs_b"], &["src/other.ts"], &[])
            ]),
            ("sides[1].paths[0]".into(), Invalid)
        );
        assert_eq!(
            refused(vec![t1(&["cs_a"], &[], &["Adds DELETE /api/todos"]), t2_app()]),
            ("sides[0].contractLines[0]".into(), Invalid)
        );
        assert_eq!(
            refused(vec![t1(&["cs_zz"], &["src/app.ts"], &[]), t2_app()]),
            ("sides[0].changeSetIds[0]".into(), Invalid)
        );
        assert_eq!(
            refused(vec![side("task_t9", &["cs_a"], &["src/app.ts"], &[]), t2_app()]),
            ("sides[0].taskId".into(), Invalid)
        );
        assert_eq!(
            refused(vec![
                t1(&["cs_a"], &["src/app.ts"], &[]),
                t1(&["cs_a"], &["src/app.ts"], &[])
            ]),
            ("sides[1].taskId".into(), Invalid)
        );
        // What the body gets wrong by itself, checked before any citation: even a side of
        // an unknown Task is refused for its empty citations first.
        assert_eq!(
            refused(vec![t1(&["cs_a"], &[], &[]), t2_app()]),
            ("sides[0].paths".into(), Invalid)
        );
        assert_eq!(
            refused(vec![t1(&["cs_a"], &["src/app.ts"], &[])]),
            ("sides".into(), Invalid)
        );
        assert_eq!(
            refused(vec![side("task_t9", &[], &["src/app.ts"], &[]), t2_app()]),
            ("sides[0].changeSetIds".into(), Invalid)
        );
    }

    #[test]
    fn a_finding_reads_the_api_shape() {
        let input: ConflictInput = serde_json::from_str(
            r#"{"status":"fork_required","sides":[
                {"taskId":"task_t1","changeSetIds":["cs_a"],"paths":["src/app.ts"]},
                {"taskId":"task_t2","changeSetIds":["cs_b"],"contractLines":[]}]}"#,
        )
        .unwrap();
        assert_eq!(input.status, ConflictStatus::ForkRequired);
        assert!(serde_json::from_str::<ConflictInput>(r#"{"status":"maybe","sides":[]}"#).is_err());
    }

    #[test]
    fn tasks_on_different_semantic_resources_are_complementary() {
        let api = task("t1", "x", &["todos:api"], &[]);
        let ui = task("t2", "x", &["todos:ui"], &[]);
        let cal = task("t3", "x", &["missions:calendar-ui"], &[]);
        let kanban = task("t4", "x", &["missions:kanban-ui"], &[]);
        let also_api = task("t5", "x", &["todos:api", "tags:api"], &[]);
        assert!(complementary(&api, &ui));
        assert!(complementary(&cal, &kanban));
        assert!(!complementary(&api, &also_api));
        assert!(!complementary(&api, &task("t6", "x", &[], &[])));
    }

    #[test]
    fn ui_and_api_tasks_are_told_by_their_resources_last_segment_or_title() {
        assert!(is_ui_task(&task("t", "x", &["todos:ui"], &[])));
        assert!(is_ui_task(&task("t", "x", &["missions:calendar-ui"], &[])));
        assert!(is_ui_task(&task("t", "x", &["todos:frontend"], &[])));
        assert!(is_ui_task(&task("t", "Build the settings page", &["settings"], &[])));
        assert!(!is_ui_task(&task("t", "x", &["todos:guide"], &[])));
        assert!(is_api_task(&task("t", "x", &["billing:public-api"], &[])));
        assert!(is_api_task(&task("t", "Add the API", &["todos"], &[])));
        assert!(!is_api_task(&task("t", "Capital letters", &["todos:rapid"], &[])));
    }

    fn tc<'a>(t: &'a Task, lines: &'a [String]) -> TaskContracts<'a> {
        TaskContracts {
            task: t,
            contract_lines: lines,
        }
    }

    #[test]
    fn the_direction_comes_from_the_first_rule_that_applies() {
        let none: Vec<String> = vec![];
        // 1. An existing path wins over the UI rule.
        let api = task("t1", "Todos API", &["todos:api"], &["t2"]);
        let ui = task("t2", "Todos page", &["todos:ui"], &[]);
        let tasks = vec![api.clone(), ui.clone()];
        let (d, on, rule) = dependency_direction(tc(&ui, &none), tc(&api, &none), &tasks);
        assert_eq!(
            (d.key.as_str(), on.key.as_str(), rule),
            ("t1", "t2", DirectionRule::ExistingPath)
        );
        // 2. UI on API.
        let api = task("t1", "Todos API", &["todos:api"], &[]);
        let tasks = vec![api.clone(), ui.clone()];
        let (d, _, rule) = dependency_direction(tc(&api, &none), tc(&ui, &none), &tasks);
        assert_eq!((d.key.as_str(), rule), ("t2", DirectionRule::UiOnApi));
        // 3. The consumer of the other's contract.
        let tags = task("t1", "Tags", &["tags:store"], &[]);
        let search = task("t2", "Search", &["search:store"], &[]);
        let uses = vec!["Uses GET /api/tags".to_string()];
        let adds = vec!["Adds GET /api/tags".to_string()];
        let tasks = vec![tags.clone(), search.clone()];
        let (d, _, rule) = dependency_direction(tc(&tags, &uses), tc(&search, &adds), &tasks);
        assert_eq!((d.key.as_str(), rule), ("t1", DirectionRule::Consumer));
        // 4. The higher key, in natural order.
        let t2 = task("t2", "Tags", &["tags:store"], &[]);
        let t10 = task("t10", "Search", &["search:store"], &[]);
        let tasks = vec![t2.clone(), t10.clone()];
        let (d, on, rule) = dependency_direction(tc(&t2, &none), tc(&t10, &none), &tasks);
        assert_eq!(
            (d.key.as_str(), on.key.as_str(), rule),
            ("t10", "t2", DirectionRule::HigherKey)
        );
    }

    #[test]
    fn a_conflict_is_integrated_once_per_task_pair_and_never_when_dismissed_or_overlapping() {
        let none: Vec<String> = vec![];
        let api = task("t1", "Todos API", &["todos:api"], &[]);
        let ui = task("t2", "Todos page", &["todos:ui"], &[]);
        let tasks = vec![api.clone(), ui.clone()];
        let i = integration_for(
            ConflictStatus::ForkRequired,
            tc(&api, &none),
            tc(&ui, &none),
            &tasks,
            &BTreeSet::new(),
        )
        .unwrap();
        assert_eq!((i.dependent.as_str(), i.depends_on.as_str()), ("t2", "t1"));
        let done: BTreeSet<(String, String)> = [("t2".to_string(), "t1".to_string())].into();
        assert_eq!(
            integration_for(
                ConflictStatus::Confirmed,
                tc(&api, &none),
                tc(&ui, &none),
                &tasks,
                &done
            ),
            None
        );
        assert_eq!(
            integration_for(
                ConflictStatus::Dismissed,
                tc(&api, &none),
                tc(&ui, &none),
                &tasks,
                &BTreeSet::new()
            ),
            None
        );
        let rival = task("t3", "Todos API v2", &["todos:api"], &[]);
        assert_eq!(
            integration_for(
                ConflictStatus::Confirmed,
                tc(&api, &none),
                tc(&rival, &none),
                &tasks,
                &BTreeSet::new()
            ),
            None
        );
    }

    #[test]
    fn an_integration_resets_the_dependent_and_every_task_built_on_it() {
        let tasks = vec![
            task("t1", "a", &["a:api"], &[]),
            task("t2", "b", &["b:ui"], &[]),
            task("t3", "c", &["c:ui"], &["t2"]),
            task("t4", "d", &["d:ui"], &["t3"]),
            task("t5", "e", &["e:ui"], &["t1"]),
        ];
        assert_eq!(tasks_to_reset("t2", &tasks), ["t2", "t3", "t4"]);
    }

    #[test]
    fn keys_order_by_their_numbers() {
        assert_eq!(natural_key_order("t2", "t10"), Ordering::Less);
        assert_eq!(natural_key_order("t10", "t2"), Ordering::Greater);
        assert_eq!(natural_key_order("api", "ui"), Ordering::Less);
        assert_eq!(natural_key_order("t1", "t1a"), Ordering::Less);
        assert_eq!(natural_key_order("t01", "t1"), "t01".cmp("t1"));
    }

    proptest! {
        #[test]
        fn the_direction_never_depends_on_which_side_is_named_first(
            ra in prop::sample::select(vec!["x:api", "x:ui", "x:store", "x:calendar-ui"]),
            rb in prop::sample::select(vec!["y:api", "y:ui", "y:store", "y:kanban-page"]),
            ka in "t[0-9]{1,2}", kb in "s[0-9]{1,2}", dep in any::<bool>(),
        ) {
            let none: Vec<String> = vec![];
            let deps: Vec<&str> = if dep { vec![kb.as_str()] } else { vec![] };
            let a = task(&ka, "a", &[ra], &deps);
            let b = task(&kb, "b", &[rb], &[]);
            let tasks = vec![a.clone(), b.clone()];
            let (d1, o1, r1) = dependency_direction(tc(&a, &none), tc(&b, &none), &tasks);
            let (d2, o2, r2) = dependency_direction(tc(&b, &none), tc(&a, &none), &tasks);
            prop_assert_eq!((&d1.key, &o1.key, r1), (&d2.key, &o2.key, r2));
            prop_assert_ne!(&d1.key, &o1.key);
            prop_assert!(!depends_on(&tasks, &o1.key, &d1.key), "the new edge never closes a cycle");
        }
    }
}
