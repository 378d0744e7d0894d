//! Search attributes belay sets on its workflows, so operators find them in the Web UI by
//! domain ids. `belay dev` registers them with the dev server; a production cluster registers
//! them once with `temporal operator search-attribute create` (compose.yaml's
//! `temporal-search-attributes` service does; a test keeps its list equal to [`ALL`]).

use temporalio_common::search_attributes::SearchAttributeKey;

pub const JOB_ID: SearchAttributeKey<String> = SearchAttributeKey::keyword("BelayJobId");
pub const HARNESS: SearchAttributeKey<String> = SearchAttributeKey::keyword("BelayHarness");
pub const ORIGIN: SearchAttributeKey<String> = SearchAttributeKey::keyword("BelayOrigin");
pub const PLAN_ID: SearchAttributeKey<String> = SearchAttributeKey::keyword("BelayPlanId");
pub const CANDIDATE_ID: SearchAttributeKey<String> = SearchAttributeKey::keyword("BelayCandidateId");
pub const CHANGE_ID: SearchAttributeKey<String> = SearchAttributeKey::keyword("BelayChangeId");
pub const PROJECT_ID: SearchAttributeKey<String> = SearchAttributeKey::keyword("BelayProjectId");
/// The run a job records when it completes (`run_<job body>`), or a task run (`trun_…`).
pub const RUN_ID: SearchAttributeKey<String> = SearchAttributeKey::keyword("BelayRunId");
/// The case a run evaluates: `slug@version/variant/engine`.
pub const CASE: SearchAttributeKey<String> = SearchAttributeKey::keyword("BelayCase");
/// Every model a run drives (a gg run's slots may bind several): a KeywordList, so
/// `BelayModel = 'm'` finds a run with `m` among them. (A SQL-backed visibility store allows ten
/// Keyword attributes, which the others take.)
pub const MODEL: SearchAttributeKey<Vec<String>> = SearchAttributeKey::keyword_list("BelayModel");
/// The ladder a climb, a top-up or a run belongs to.
pub const LADDER_ID: SearchAttributeKey<String> = SearchAttributeKey::keyword("BelayLadderId");

/// Every attribute with its type name, as `temporal` expects them (`Name=Keyword`).
pub const ALL: [(&str, &str); 11] = [
    ("BelayJobId", "Keyword"),
    ("BelayHarness", "Keyword"),
    ("BelayOrigin", "Keyword"),
    ("BelayPlanId", "Keyword"),
    ("BelayCandidateId", "Keyword"),
    ("BelayChangeId", "Keyword"),
    ("BelayProjectId", "Keyword"),
    ("BelayRunId", "Keyword"),
    ("BelayCase", "Keyword"),
    ("BelayModel", "KeywordList"),
    ("BelayLadderId", "Keyword"),
];
