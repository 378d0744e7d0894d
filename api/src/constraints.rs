//! The rules the request validators enforce (`belay_domain`'s `validate` functions and the
//! handlers' parameter checks), written as JSON Schema into the OpenAPI document, so that a request
//! the document calls valid is accepted and one it calls invalid is refused. The derive gives
//! each field its type; this adds what the type cannot say (ranges, lengths, item counts,
//! patterns). Each rule names the place it constrains; a place the document lacks fails the build
//! of the document (see the tests), so a renamed field cannot silently lose its rule. The
//! schemathesis step of `scripts/test.sh` checks both directions against a running API.

use belay_domain::catalogue::{MAX_ADAPTER_TIMEOUT_SECONDS, MAX_LANE, MAX_PARALLELISM_CEILING};
use serde_json::{Value, json};

/// Rust's `char::is_whitespace` (Unicode White_Space), which `str::trim` and `split_whitespace`
/// use, as a character-class body.
const WHITE: &str = r"\t\n\u000B\f\r \u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000";
/// Rust's `char::is_control` (Unicode Cc), as a character-class body.
const CONTROL: &str = r"\u0000-\u001F\u007F-\u009F";

/// `check_slug`: `[a-z0-9]` first, then `[a-z0-9._-]`, 1 to `max` characters.
fn slug(max: u64) -> Value {
    json!({"minLength": 1, "maxLength": max, "pattern": "^[a-z0-9][a-z0-9._-]*$"})
}

/// `check_name`: letters, digits, `.`, `_`, `-`, `:` and `@`, starting with a letter or digit.
fn name(max: u64) -> Value {
    json!({"minLength": 1, "maxLength": max, "pattern": "^[A-Za-z0-9][A-Za-z0-9._:@-]*$"})
}

/// Not blank: something besides whitespace.
fn non_blank() -> Value {
    json!({"minLength": 1, "pattern": format!("[^{WHITE}]")})
}

/// `check_text`: not blank, at most `max` characters.
fn text(max: u64) -> Value {
    let mut v = non_blank();
    v["maxLength"] = max.into();
    v
}

/// Not blank and without NUL, at most `max` characters.
fn text_without_nul(max: u64) -> Value {
    json!({"minLength": 1, "maxLength": max,
        "pattern": format!("^[^\\u0000]*[^{WHITE}\\u0000][^\\u0000]*$")})
}

/// `check_lines`: at most 100 entries, each `text(2000)`.
fn lines() -> Value {
    json!({"maxItems": 100, "items": text(2000)})
}

/// An exact semantic version (semver.org's grammar, numbers of at most 19 digits).
fn semver() -> Value {
    let num = "(?:0|[1-9][0-9]{0,18})";
    let pre = "(?:0|[1-9][0-9]{0,18}|[0-9]*[A-Za-z-][0-9A-Za-z-]*)";
    json!({
        "pattern": format!("^{num}\\.{num}\\.{num}(?:-{pre}(?:\\.{pre})*)?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?$")})
}

/// `check_pattern` of a workspace policy: space-separated words, the first not `*`, `*` only as
/// the last word, no control characters, at most 1024 characters. `final_star`: whether the last word
/// may be `*` (not for the install command).
fn command_pattern(final_star: bool) -> Value {
    // Separators: whitespace that is not a control character.
    let sep = r"[ \u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]";
    let ch = format!("[^{WHITE}{CONTROL}]");
    let not_star_start = format!("[^{WHITE}{CONTROL}*]");
    let word = format!("(?:{not_star_start}{ch}*|\\*{ch}+)");
    let tail = if final_star {
        format!("(?:{sep}+\\*)?")
    } else {
        String::new()
    };
    json!({"maxLength": 1024, "pattern": format!("^{sep}*{word}(?:{sep}+{word})*{tail}{sep}*$")})
}

/// `check_path`: relative, `/`-separated, no empty, `.` or `..` component, not inside `.git`, no
/// control characters or backslashes, 1 to 1024 characters.
fn workspace_path() -> Value {
    let c = format!(r"[^/\\{CONTROL}]");
    let nd = format!(r"[^/\\{CONTROL}.]");
    let component = format!(r"(?:{nd}{c}*|\.{nd}{c}*|\.\.{c}+)");
    json!({"minLength": 1, "maxLength": 1024,
        "pattern": format!(r"^(?!\.git(?:/|$)){component}(?:/{component})*$")})
}

/// At least one of `fields` is present and not null.
fn one_of_present(fields: &[&str]) -> Value {
    let arms: Vec<Value> = fields
        .iter()
        .map(|f| {
            let mut properties = serde_json::Map::new();
            properties.insert((*f).to_string(), json!({"not": {"type": "null"}}));
            json!({"required": [f], "properties": properties})
        })
        .collect();
    Value::Array(arms)
}

/// At least one of `fields` present and not null, or one of `clearable` present (its `null`
/// clears a value, which is a change too).
fn present_or_cleared(fields: &[&str], clearable: &[&str]) -> Value {
    let mut arms = one_of_present(fields);
    if let Value::Array(a) = &mut arms {
        a.extend(clearable.iter().map(|f| json!({"required": [f]})));
    }
    arms
}

/// `check_lane`: a provider's or a model's lane, 1 to `MAX_LANE` (null: no lane).
fn lane() -> Value {
    json!({"minimum": 1, "maximum": MAX_LANE})
}

/// The rules, as (JSON pointer into the document, keywords merged into the schema found there).
fn rules() -> Vec<(String, Value)> {
    let schema = |name: &str, rest: &str| format!("/components/schemas/{name}{rest}");
    let job_status = "(?:queued|pending|dispatched|starting|running|completed|failed|canceled)";
    let mut rules = vec![
        // Test cases.
        (schema("TestCaseVersionInput", "/properties/slug"), slug(64)),
        (schema("TestCaseVersionInput", "/properties/version"), semver()),
        (schema("TestCaseVersionInput", "/properties/title"), text(200)),
        (schema("TestCaseVersionUpdate", "/properties/title"), text(200)),
        // Harnesses.
        (schema("HarnessInput", "/properties/name"), slug(64)),
        (
            schema("HarnessInput", "/properties/maxParallelism"),
            json!({"minimum": 1, "maximum": MAX_PARALLELISM_CEILING}),
        ),
        (
            schema("HarnessUpdate", "/properties/maxParallelism"),
            json!({"minimum": 1, "maximum": MAX_PARALLELISM_CEILING}),
        ),
        (schema("HarnessInput", "/properties/provider"), slug(64)),
        (schema("HarnessUpdate", "/properties/provider"), slug(64)),
        (
            schema("HarnessUpdate", ""),
            json!({"anyOf": present_or_cleared(&["providerRouted", "maxParallelism", "adapter"], &["provider"])}),
        ),
        (
            schema("AdapterSpec", "/oneOf/0"),
            json!({"additionalProperties": false, "properties": {
                "argv": {"minItems": 1, "maxItems": 256, "prefixItems": [{"type": "string", "allOf": [non_blank()]}]},
                "timeoutSeconds": {"minimum": 1, "maximum": MAX_ADAPTER_TIMEOUT_SECONDS}}}),
        ),
        (
            schema("AdapterSpec", "/oneOf/1"),
            json!({"additionalProperties": false, "properties": {
                "script": text(64 * 1024),
                "timeoutSeconds": {"minimum": 1, "maximum": MAX_ADAPTER_TIMEOUT_SECONDS}}}),
        ),
        // Models.
        (schema("ModelInput", "/properties/id"), name(128)),
        (schema("ModelInput", "/properties/provider"), slug(64)),
        (schema("ModelUpdate", "/properties/provider"), slug(64)),
        (schema("ModelInput", "/properties/maxParallelism"), lane()),
        (schema("ModelUpdate", "/properties/maxParallelism"), lane()),
        // Providers: `maxParallelism` must be given on a change (null clears the lane).
        (schema("ProviderInput", "/properties/name"), slug(64)),
        (schema("ProviderInput", "/properties/maxParallelism"), lane()),
        (schema("ProviderUpdate", "/properties/maxParallelism"), lane()),
        (schema("ProviderUpdate", ""), json!({"required": ["maxParallelism"]})),
        (
            schema("ModelInput", "/properties/contextWindow"),
            json!({"minimum": 1, "maximum": 100_000_000}),
        ),
        (
            schema("ModelUpdate", "/properties/contextWindow"),
            json!({"minimum": 1, "maximum": 100_000_000}),
        ),
        (
            schema("ListPrice", "/properties/inputPerMtokUsd"),
            json!({"minimum": 0}),
        ),
        (
            schema("ListPrice", "/properties/outputPerMtokUsd"),
            json!({"minimum": 0}),
        ),
        // gg configurations.
        (schema("GgConfigInput", "/properties/name"), text(200)),
        (schema("GgConfigUpdate", "/properties/name"), text(200)),
        // Jobs.
        (schema("CasePin", "/properties/slug"), slug(64)),
        (schema("CasePin", "/properties/version"), semver()),
        (schema("CasePin", "/properties/variant"), slug(64)),
        (schema("CasePin", "/properties/engine"), slug(64)),
        (
            schema("Combination", "/oneOf/0"),
            json!({"additionalProperties": false, "properties": {
                "harness": {"allOf": [slug(64), {"not": {"const": belay_domain::job::GG_HARNESS}}]},
                "model": name(128),
                "provider": slug(64)}}),
        ),
        (
            schema("Combination", "/oneOf/1"),
            json!({"additionalProperties": false, "properties": {
                "ggConfigId": {"pattern": "^gg_[a-z0-9]{1,64}$"},
                "bindings": {"propertyNames": slug(64), "additionalProperties": name(128)}}}),
        ),
        // Reviews: exactly one of ratings and category.
        (schema("ReviewInput", "/properties/note"), text(10_000)),
        (
            schema("ReviewInput", "/properties/ratings"),
            json!({"minProperties": 1, "maxProperties": 32, "propertyNames": slug(64)}),
        ),
        (
            schema("ReviewInput", ""),
            json!({
                "anyOf": one_of_present(&["ratings", "category"]),
                "not": {"required": ["ratings", "category"], "properties": {
                    "ratings": {"not": {"type": "null"}}, "category": {"not": {"type": "null"}}}}}),
        ),
        // Projects.
        (schema("ProjectInput", "/properties/name"), text(200)),
        // Accounts and tokens.
        (schema("AccountInput", "/properties/name"), text(200)),
        (schema("TokenInput", "/properties/name"), text(200)),
        (
            schema("TokenInput", "/properties/expiresInSeconds"),
            json!({"minimum": 1, "maximum": belay_domain::api_token::MAX_TOKEN_LIFETIME_SECONDS}),
        ),
        (
            schema("WorkspacePolicy", "/properties/commands"),
            json!({"maxItems": 100, "items": command_pattern(true)}),
        ),
        (schema("WorkspacePolicy", "/properties/install"), command_pattern(false)),
        (
            schema("WorkspacePolicy", "/properties/build"),
            json!({"items": command_pattern(true)}),
        ),
        (
            schema("TokenRequest", "/properties/scope"),
            json!({"$ref": null, "type": "string", "enum": ["read"],
                "description": "`read`: the canonical repository is read-only over HTTP."}),
        ),
        // Changes, Tasks, ChangeSets.
        (schema("ChangeInput", "/properties/goal"), text(10_000)),
        (schema("ChangeInput", "/properties/acceptanceCriteria"), lines()),
        (schema("ChangeInput", "/properties/invariants"), lines()),
        (schema("TaskInput", "/properties/key"), slug(64)),
        (schema("TaskInput", "/properties/title"), text(500)),
        (
            schema("TaskInput", "/properties/semanticResources"),
            json!({"items": {"pattern": "^[a-z0-9:._/-]{1,128}$"}}),
        ),
        (
            schema("TaskInput", "/properties/dependencies"),
            json!({"uniqueItems": true}),
        ),
        (
            schema("ChangeSetInput", "/properties/commit"),
            json!({"pattern": "^[0-9a-f]{40}$"}),
        ),
        (schema("ChangeSetInput", "/properties/contractChanges"), lines()),
        (schema("ChangeSetInput", "/properties/dataChanges"), lines()),
        // Workspaces and edit sessions.
        (schema("PublishInput", "/properties/message"), text_without_nul(2000)),
        (schema("PublishInput", "/properties/contractChanges"), lines()),
        (schema("PublishInput", "/properties/dataChanges"), lines()),
        (
            schema("CommandInput", "/properties/command"),
            text_without_nul(16 * 1024),
        ),
        (
            schema("ToolCall", "/oneOf/0"),
            json!({"additionalProperties": false, "properties": {"path": workspace_path()}}),
        ),
        (
            schema("ToolCall", "/oneOf/1"),
            json!({"additionalProperties": false, "properties": {
                "path": workspace_path(),
                "content": {"description": "At most 1 MiB of UTF-8 (a limit in bytes, which JSON Schema cannot state)."}}}),
        ),
        (
            schema("ToolCall", "/oneOf/2"),
            json!({"additionalProperties": false, "properties": {
                "path": workspace_path(),
                "oldText": {"minLength": 1, "description": "Not empty; at most 1 MiB of UTF-8."},
                "newText": {"description": "At most 1 MiB of UTF-8."}}}),
        ),
        (
            schema("ToolCall", "/oneOf/3"),
            json!({"additionalProperties": false, "properties": {"argv": {
                "minItems": 1, "maxItems": 64, "items": {"maxLength": 1024, "pattern": "^[^\\u0000]*$"}}}}),
        ),
        // Coverage groups, plans and settings.
        (schema("CoverageGroupInput", "/properties/name"), text(200)),
        (
            schema("CoverageGroupInput", "/properties/members"),
            json!({"maxItems": belay_domain::coverage::MAX_GROUP_MEMBERS, "uniqueItems": true}),
        ),
        (
            schema("CoverageGroupInput", ""),
            json!({"if": {"properties": {"kind": {"const": "combo"}}},
                "then": {"properties": {"members": {"items": {"$ref": "#/components/schemas/Combination"}}}},
                "else": {"properties": {"members": {"items": {"$ref": "#/components/schemas/CasePin"}}}}}),
        ),
        (schema("CoveragePlanInput", "/properties/name"), text(200)),
        (
            schema("CoveragePlanInput", "/properties/runsPerCell"),
            json!({"minimum": 1, "maximum": belay_domain::coverage::MAX_RUNS_PER_CELL}),
        ),
        (
            schema("CoveragePlanInput", "/properties/cases"),
            json!({"maxItems": belay_domain::coverage::MAX_ONE_OFF_MEMBERS, "uniqueItems": true}),
        ),
        (
            schema("CoveragePlanInput", "/properties/combinations"),
            json!({"maxItems": belay_domain::coverage::MAX_ONE_OFF_MEMBERS, "uniqueItems": true}),
        ),
        // Budgets (`belay_domain::budget`): whole dollars and cents alike, as numbers.
        (
            schema("BudgetInput", "/properties/usd"),
            json!({"minimum": 0, "maximum": belay_domain::budget::MAX_USD}),
        ),
        (schema("BudgetInput", ""), json!({"additionalProperties": false})),
        (
            schema("CoveragePlanInput", "/properties/estimatedRunUsd"),
            json!({"minimum": belay_domain::budget::MIN_ESTIMATED_RUN_USD, "maximum": belay_domain::budget::MAX_USD}),
        ),
        (
            schema("LadderInput", "/properties/estimatedRunUsd"),
            json!({"minimum": belay_domain::budget::MIN_ESTIMATED_RUN_USD, "maximum": belay_domain::budget::MAX_USD}),
        ),
        (
            schema("BufferTarget", "/oneOf/0"),
            json!({"additionalProperties": false, "properties": {"runs": {"minimum": 0,
                "description": "0 never tops up automatically; a bound above 500 is clamped to 500."}}}),
        ),
        (
            schema("BufferTarget", "/oneOf/1"),
            json!({"additionalProperties": false}),
        ),
        (
            "/paths/~1v1~1coverage-plans~1{id}~1queue/get/parameters/limit/schema".into(),
            json!({"type": "integer", "minimum": 1, "maximum": belay_domain::queue::MAX_QUEUE_LIMIT}),
        ),
        // Query strings (kept as text by the handlers, parsed with `int_param`).
        (
            "/paths/~1v1~1jobs/get/parameters/status/schema".into(),
            json!({"type": "string", "pattern": format!("^,*(?:{job_status}(?:,+{job_status})*)?,*$")}),
        ),
        (
            "/paths/~1v1~1jobs/get/parameters/origin/schema".into(),
            json!({"type": "string", "pattern": "^(?:plan|ladder):[A-Za-z0-9_-]{1,128}$"}),
        ),
        (
            "/paths/~1v1~1repo-tokens~1{token_id}~1revoke/post/parameters/token_id/schema".into(),
            json!({"pattern": crate::routes::repo_tokens::TOKEN_ID_PATTERN}),
        ),
    ];
    // Ladders, approvals, conflicts, screenshots.
    rules.push((schema("LadderInput", "/properties/name"), text(200)));
    rules.push((
        schema("LadderInput", "/properties/rungs"),
        json!({"minItems": 1, "maxItems": belay_domain::ladder::MAX_RUNGS, "uniqueItems": true}),
    ));
    rules.push((
        schema("LadderInput", "/properties/runsPerCell"),
        json!({"minimum": 1, "maximum": belay_domain::coverage::MAX_RUNS_PER_CELL}),
    ));
    // A rung is pinned as a case is (`CasePin::validate`), plus its id when it has one.
    rules.push((schema("RungInput", "/properties/slug"), slug(64)));
    rules.push((schema("RungInput", "/properties/version"), semver()));
    rules.push((schema("RungInput", "/properties/variant"), slug(64)));
    rules.push((schema("RungInput", "/properties/engine"), slug(64)));
    rules.push((
        schema("RungInput", "/properties/id"),
        json!({"pattern": "^rung_[a-z0-9]{1,64}$"}),
    ));
    rules.push((
        schema("RungInput", "/properties/runs"),
        json!({"minimum": 1, "maximum": belay_domain::coverage::MAX_RUNS_PER_CELL}),
    ));
    rules.push((
        schema("LadderInput", "/properties/combinations"),
        json!({"maxItems": belay_domain::coverage::MAX_ONE_OFF_MEMBERS, "uniqueItems": true}),
    ));
    rules.push((
        schema("LadderInput", "/properties/comboGroups"),
        json!({"maxItems": belay_domain::coverage::MAX_GROUP_POINTERS, "uniqueItems": true,
            "items": {"pattern": "^grp_[a-z0-9]{1,64}$"}}),
    ));
    rules.push((
        schema("Threshold", "/oneOf/0"),
        json!({"additionalProperties": false, "properties": {"runs": {"minimum": 1}}}),
    ));
    rules.push((
        schema("Threshold", "/oneOf/1"),
        json!({"additionalProperties": false, "properties": {"of": {"exclusiveMinimum": 0, "maximum": 1}}}),
    ));
    // Steering changes something: at least one of its three fields is not null.
    rules.push((
        schema("SteeringInput", ""),
        json!({"anyOf": [
            {"required": ["priority"], "properties": {"priority": {"type": "integer"}}},
            {"required": ["focused"], "properties": {"focused": {"type": "boolean"}}},
            {"required": ["held"], "properties": {"held": {"type": "boolean"}}},
        ]}),
    ));
    rules.push((
        schema("SteeringInput", "/properties/priority"),
        json!({"minimum": -belay_domain::ladder::MAX_PRIORITY, "maximum": belay_domain::ladder::MAX_PRIORITY}),
    ));
    rules.push((
        schema("OutcomeInput", ""),
        json!({"required": ["combination", "rungId", "outcome"]}),
    ));
    rules.push((
        schema("ApprovalInput", "/properties/tree"),
        json!({"pattern": "^[0-9a-f]{40}$"}),
    ));
    rules.push((schema("ApprovalInput", "/properties/reason"), text(2000)));
    rules.push((schema("ChangeCancelInput", "/properties/reason"), text(2000)));
    rules.push((
        schema("ConflictInput", "/properties/sides"),
        json!({"minItems": 2, "maxItems": 2}),
    ));
    rules.push((schema("ConflictInput", "/properties/summary"), text(2000)));
    // A side's own counts (`ConflictInput::validate` checks them before any citation).
    rules.push((
        schema("ConflictSide", "/properties/changeSetIds"),
        json!({"minItems": 1, "maxItems": 100}),
    ));
    for field in ["paths", "contractLines"] {
        rules.push((
            schema("ConflictSide", &format!("/properties/{field}")),
            json!({"maxItems": 100}),
        ));
    }
    rules.push((
        schema("ConflictSide", ""),
        json!({"anyOf": [
            {"required": ["paths"], "properties": {"paths": {"minItems": 1}}},
            {"required": ["contractLines"], "properties": {"contractLines": {"minItems": 1}}},
        ]}),
    ));
    rules.push((
        "/paths/~1v1~1approvals/get/parameters/status/schema".into(),
        json!({"type": "string", "enum": ["requested", "granted", "rejected", "cancelled"]}),
    ));
    rules.push((
        "/paths/~1v1~1candidates~1{id}~1evidence~1{evidenceId}~1screenshots~1{index}/get/parameters/index/schema"
            .into(),
        json!({"type": "string", "pattern": "^[0-7]$"}),
    ));
    rules.push((
        "/paths/~1v1~1ladders~1{id}~1queue/get/parameters/limit/schema".into(),
        json!({"type": "integer", "minimum": 1, "maximum": 200}),
    ));
    for (path, name, min, max) in [
        ("/v1/jobs", "afterSeq", 0, i64::MAX),
        ("/v1/jobs", "limit", 1, 10_000),
        ("/v1/job-transitions", "afterSeq", 0, i64::MAX),
        ("/v1/job-transitions", "limit", 1, 10_000),
        ("/v1/runs", "limit", 1, 1000),
        ("/v1/events", "after", 0, i64::MAX),
        ("/v1/events", "limit", 1, 1000),
        ("/v1/approvals", "limit", 1, 1000),
    ] {
        rules.push((
            format!("/paths/{}/get/parameters/{name}/schema", path.replace('/', "~1")),
            json!({"type": "integer", "minimum": min, "maximum": max}),
        ));
    }
    for (name, max_items) in [("TestCaseVersionInput", 64), ("TestCaseVersionUpdate", 64)] {
        rules.push((
            schema(name, "/properties/variants"),
            json!({"minItems": 1, "maxItems": max_items, "uniqueItems": true, "items": slug(64)}),
        ));
        rules.push((
            schema(name, "/properties/engines"),
            json!({"maxItems": 32, "uniqueItems": true, "items": slug(64)}),
        ));
        rules.push((
            schema(name, "/properties/reviewDomains"),
            json!({"minItems": 1, "maxItems": belay_domain::catalogue::MAX_REVIEW_DOMAINS,
                "uniqueItems": true, "items": slug(64)}),
        ));
    }
    for field in ["caseGroups", "comboGroups"] {
        rules.push((
            schema("CoveragePlanInput", &format!("/properties/{field}")),
            json!({"maxItems": belay_domain::coverage::MAX_GROUP_POINTERS, "uniqueItems": true,
                "items": {"pattern": "^grp_[a-z0-9]{1,64}$"}}),
        ));
    }
    // Verification: an explicit Candidate, and a policy write.
    // A tier is gated or auto-promoted, never both (the cross-field rule of `policy::validate`),
    // with an absent or null list standing for the default policy's.
    rules.push((schema("PolicyInput", ""), json!({"allOf": tier_exclusions()})));
    rules.push((
        schema("ComposeInput", "/properties/changeSetIds"),
        json!({"minItems": 1, "maxItems": 100, "uniqueItems": true, "items": {"minLength": 1, "maxLength": 100}}),
    ));
    rules.push((
        schema("PolicyInput", "/properties/requiredChecksByRisk"),
        json!({"additionalProperties": {"maxItems": 16, "uniqueItems": true,
            "items": {"enum": belay_domain::policy::POLICY_CHECK_IDS}}}),
    ));
    for field in ["gatedRiskTiers", "autoPromoteRiskTiers"] {
        rules.push((
            schema("PolicyInput", &format!("/properties/{field}")),
            json!({"uniqueItems": true}),
        ));
    }
    rules.push((
        schema("PolicyInput", "/properties/protectedResources"),
        json!({"maxItems": 100, "items": {"pattern":
            "^(?:[a-z0-9:._/*-]{1,200}|/[^\\s\\u0000-\\u001F\\u007F-\\u009F]{0,199}|(?:GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) /[^\\s\\u0000-\\u001F\\u007F-\\u009F]{0,199})$"}}),
    ));
    for field in ["install", "build", "typecheck", "test", "bench", "contract", "dev"] {
        rules.push((
            schema("PolicyCommandsInput", &format!("/properties/{field}")),
            json!({"minLength": 1, "maxLength": 500, "pattern": format!("^[^{CONTROL}]*[^{WHITE}{CONTROL}][^{CONTROL}]*$")}),
        ));
    }
    for name in ["GgConfigInput", "GgConfigUpdate"] {
        rules.push((
            schema(name, "/properties/launchSlots"),
            json!({"minItems": 1, "maxItems": 16, "uniqueItems": true, "items": slug(64)}),
        ));
    }
    rules
}

/// Finds the value at `pointer`, reading a `parameters/<name>` step as the parameter of that name.
fn locate<'a>(doc: &'a mut Value, pointer: &str) -> Option<&'a mut Value> {
    let mut at = doc;
    let mut steps = pointer
        .split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"));
    while let Some(step) = steps.next() {
        at = if step == "parameters" {
            let wanted = steps.next()?;
            at.get_mut("parameters")?
                .as_array_mut()?
                .iter_mut()
                .find(|p| p["name"] == wanted.as_str())?
        } else if let Ok(i) = step.parse::<usize>()
            && at.is_array()
        {
            at.get_mut(i)?
        } else {
            at.get_mut(step.as_str())?
        };
    }
    Some(at)
}

/// Merges `patch` into `target`: objects key by key, anything else replaced; a `null` in the
/// patch removes the key.
/// The schema form of "no tier both gated and auto-promoted": per tier, neither two explicit
/// lists naming it, nor one list naming a tier the other's default names.
fn tier_exclusions() -> Vec<Value> {
    use belay_domain::policy::DEFAULT_POLICY;
    let names = |field: &str, t: &str| json!({"required": [field], "properties": {field: {"type": "array", "contains": {"const": t}}}});
    let defaulted = |field: &str| json!({"not": {"required": [field], "properties": {field: {"type": "array"}}}});
    let mut out = Vec::new();
    for tier in belay_domain::change::RiskTier::ALL {
        let t = tier.as_str();
        let (g, a) = (names("gatedRiskTiers", t), names("autoPromoteRiskTiers", t));
        out.push(json!({"not": {"allOf": [g.clone(), a.clone()]}}));
        if DEFAULT_POLICY.gated_risk_tiers.contains(&tier) {
            out.push(json!({"not": {"allOf": [a, defaulted("gatedRiskTiers")]}}));
        }
        if DEFAULT_POLICY.auto_promote_risk_tiers.contains(&tier) {
            out.push(json!({"not": {"allOf": [g, defaulted("autoPromoteRiskTiers")]}}));
        }
    }
    out
}

fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

/// Writes every rule into `doc`; the pointers a rule names that the document lacks, if any.
pub fn apply(doc: &mut Value) -> Result<(), Vec<String>> {
    let mut missing = Vec::new();
    for (pointer, patch) in rules() {
        match locate(doc, &pointer) {
            // A nullable field keeps `null`: the string and number keywords do not apply to it.
            Some(at) => merge(at, &patch),
            None => missing.push(pointer),
        }
    }
    if missing.is_empty() { Ok(()) } else { Err(missing) }
}
