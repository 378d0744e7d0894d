//! The catalogue: test cases and their versions, harnesses, models and gg configurations.
//!
//! These are the inputs the API accepts and the checks each must pass before anything is written.

use crate::ids::GgConfigId;
use crate::validation::{ValidationError, check_name, check_slug, check_text};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// The engine a pin names when it names none.
pub const ENGINE_NONE: &str = "none";

/// How a test case's runs are judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TestType {
    /// Reviewed by people, a rating per domain.
    Standard,
    /// Graded by machine; never on a reviewer's worklist.
    Performance,
    /// Reviewed on the 💩→💎 category scale; records no domain ratings.
    GameJam,
}

impl TestType {
    pub fn as_str(self) -> &'static str {
        match self {
            TestType::Standard => "standard",
            TestType::Performance => "performance",
            TestType::GameJam => "game_jam",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "standard" => Some(TestType::Standard),
            "performance" => Some(TestType::Performance),
            "game_jam" => Some(TestType::GameJam),
            _ => None,
        }
    }
}

/// One version of a test case, as ingested.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestCaseVersionInput {
    /// The case's slug, `[a-z0-9._-]`.
    pub slug: String,
    /// An exact semantic version, e.g. `1.2.0`.
    pub version: String,
    pub test_type: TestType,
    /// The variants of this version; at least one.
    pub variants: Vec<String>,
    /// Engines this version declares support for (may be empty: only the `none` engine).
    #[serde(default)]
    pub engines: Vec<String>,
    #[serde(default)]
    pub title: Option<String>,
    /// The domains a reviewer rates this version's runs on, in the order offered (1 to 32
    /// distinct slugs). Absent: the version declares none, and a reviewer's own domains are used.
    #[serde(default)]
    pub review_domains: Option<Vec<String>>,
}

/// The editable part of an ingested version (refused once the version has runs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestCaseVersionUpdate {
    pub test_type: TestType,
    pub variants: Vec<String>,
    #[serde(default)]
    pub engines: Vec<String>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub review_domains: Option<Vec<String>>,
}

pub fn validate_version_string(field: &str, version: &str) -> Result<semver::Version, ValidationError> {
    semver::Version::parse(version)
        .map_err(|_| ValidationError::new(field, "must be an exact semantic version such as 1.2.0"))
}

fn validate_variants_engines(variants: &[String], engines: &[String]) -> Result<(), ValidationError> {
    if variants.is_empty() {
        return Err(ValidationError::new("variants", "must list at least one variant"));
    }
    if variants.len() > 64 {
        return Err(ValidationError::new("variants", "must list at most 64 variants"));
    }
    let mut seen = BTreeSet::new();
    for (i, v) in variants.iter().enumerate() {
        check_slug(&format!("variants[{i}]"), v, 64)?;
        if !seen.insert(v) {
            return Err(ValidationError::new(
                format!("variants[{i}]"),
                "must not repeat a variant",
            ));
        }
    }
    let mut seen = BTreeSet::new();
    for (i, e) in engines.iter().enumerate() {
        check_slug(&format!("engines[{i}]"), e, 64)?;
        if !seen.insert(e) {
            return Err(ValidationError::new(
                format!("engines[{i}]"),
                "must not repeat an engine",
            ));
        }
    }
    if engines.len() > 32 {
        return Err(ValidationError::new("engines", "must list at most 32 engines"));
    }
    Ok(())
}

/// The most domains a review rates (and so a version may declare).
pub const MAX_REVIEW_DOMAINS: usize = 32;

/// A version's declared review domains, when it declares them: 1 to 32 distinct slugs of at most
/// 64 characters, the same rule a review's own domain names follow. The error names the field.
pub fn validate_review_domains(domains: Option<&[String]>) -> Result<(), ValidationError> {
    let Some(domains) = domains else { return Ok(()) };
    if domains.is_empty() || domains.len() > MAX_REVIEW_DOMAINS {
        return Err(ValidationError::new(
            "reviewDomains",
            format!("must list 1 to {MAX_REVIEW_DOMAINS} domains (or be left out)"),
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, d) in domains.iter().enumerate() {
        check_slug(&format!("reviewDomains[{i}]"), d, 64)?;
        if !seen.insert(d) {
            return Err(ValidationError::new(
                format!("reviewDomains[{i}]"),
                "must not repeat a domain",
            ));
        }
    }
    Ok(())
}

impl TestCaseVersionInput {
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_slug("slug", &self.slug, 64)?;
        validate_version_string("version", &self.version)?;
        validate_variants_engines(&self.variants, &self.engines)?;
        if let Some(t) = &self.title {
            check_text("title", t, 200)?;
        }
        validate_review_domains(self.review_domains.as_deref())
    }
}

impl TestCaseVersionUpdate {
    pub fn validate(&self) -> Result<(), ValidationError> {
        validate_variants_engines(&self.variants, &self.engines)?;
        if let Some(t) = &self.title {
            check_text("title", t, 200)?;
        }
        validate_review_domains(self.review_domains.as_deref())
    }
}

/// The highest semantic version among `versions`; unparsable strings are ignored.
pub fn latest_version<'a>(versions: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    versions
        .into_iter()
        .filter_map(|v| semver::Version::parse(v).ok().map(|p| (p, v)))
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, v)| v)
}

/// Whether a case version supports `engine`. The `none` engine is always supported.
pub fn engine_supported(declared: &[String], engine: &str) -> bool {
    engine == ENGINE_NONE || declared.iter().any(|e| e == engine)
}

/// How a harness runs one job: a command template, or the built-in `script` adapter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum AdapterSpec {
    /// Runs `argv` after expanding `{job_file}`, `{output_dir}`, `{manifest}`, `{job_id}`,
    /// `{slug}`, `{version}`, `{variant}`, `{engine}`, `{model}` and `{provider}`.
    Command {
        argv: Vec<String>,
        #[serde(default = "default_timeout", rename = "timeoutSeconds")]
        timeout_seconds: u64,
        /// Run in a Sandbox container (the Sandbox image, limits and internal network) instead of
        /// as a local process of the harness worker.
        #[serde(default)]
        sandbox: bool,
    },
    /// Runs `script` with `/bin/sh -c`, in the same environment a command adapter gets.
    Script {
        script: String,
        #[serde(default = "default_timeout", rename = "timeoutSeconds")]
        timeout_seconds: u64,
        #[serde(default)]
        sandbox: bool,
    },
}

fn default_timeout() -> u64 {
    3600
}

pub const MAX_ADAPTER_TIMEOUT_SECONDS: u64 = 24 * 3600;

impl AdapterSpec {
    pub fn timeout_seconds(&self) -> u64 {
        match self {
            AdapterSpec::Command { timeout_seconds, .. } | AdapterSpec::Script { timeout_seconds, .. } => {
                *timeout_seconds
            }
        }
    }

    /// Whether the adapter runs inside a Sandbox container.
    pub fn in_sandbox(&self) -> bool {
        match self {
            AdapterSpec::Command { sandbox, .. } | AdapterSpec::Script { sandbox, .. } => *sandbox,
        }
    }

    pub fn validate(&self) -> Result<(), ValidationError> {
        let t = self.timeout_seconds();
        if t == 0 || t > MAX_ADAPTER_TIMEOUT_SECONDS {
            return Err(ValidationError::new(
                "adapter.timeoutSeconds",
                format!("must be between 1 and {MAX_ADAPTER_TIMEOUT_SECONDS}"),
            ));
        }
        match self {
            AdapterSpec::Command { argv, .. } => {
                if argv.is_empty() || argv[0].trim().is_empty() {
                    return Err(ValidationError::new(
                        "adapter.argv",
                        "must name a program as its first element",
                    ));
                }
                if argv.len() > 256 {
                    return Err(ValidationError::new("adapter.argv", "must have at most 256 elements"));
                }
            }
            AdapterSpec::Script { script, .. } => {
                check_text("adapter.script", script, 64 * 1024)?;
            }
        }
        Ok(())
    }
}

/// A harness: what runs a job, and how many of its runs may execute at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HarnessInput {
    pub name: String,
    /// Whether a launch must name a provider.
    #[serde(default)]
    pub provider_routed: bool,
    /// The parallelism cap: at most this many jobs dispatched, starting or running at once.
    pub max_parallelism: i64,
    pub adapter: AdapterSpec,
    /// The provider this harness's runs go to when a launch names none (its lane is occupied).
    #[serde(default)]
    pub provider: Option<String>,
}

/// The editable part of a harness.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HarnessUpdate {
    #[serde(default)]
    pub provider_routed: Option<bool>,
    #[serde(default)]
    pub max_parallelism: Option<i64>,
    #[serde(default)]
    pub adapter: Option<AdapterSpec>,
    /// The provider the harness runs on; `null` clears it, absent leaves it.
    #[serde(default, deserialize_with = "present")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub provider: Option<Option<String>>,
}

/// Reads a field that may be present with `null` (`Some(None)`) as distinct from absent (`None`).
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

pub const MAX_PARALLELISM_CEILING: i64 = 1000;

fn check_cap(cap: i64) -> Result<(), ValidationError> {
    if !(1..=MAX_PARALLELISM_CEILING).contains(&cap) {
        return Err(ValidationError::new(
            "maxParallelism",
            format!("must be an integer from 1 to {MAX_PARALLELISM_CEILING}"),
        ));
    }
    Ok(())
}

impl HarnessInput {
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_slug("name", &self.name, 64)?;
        check_cap(self.max_parallelism)?;
        if let Some(p) = &self.provider {
            check_slug("provider", p, 64)?;
        }
        self.adapter.validate()
    }
}

impl HarnessUpdate {
    pub fn validate(&self) -> Result<(), ValidationError> {
        if let Some(c) = self.max_parallelism {
            check_cap(c)?;
        }
        if let Some(a) = &self.adapter {
            a.validate()?;
        }
        if let Some(Some(p)) = &self.provider {
            check_slug("provider", p, 64)?;
        }
        if self.provider_routed.is_none()
            && self.max_parallelism.is_none()
            && self.adapter.is_none()
            && self.provider.is_none()
        {
            return Err(ValidationError::new(
                "body",
                "must change at least one of providerRouted, maxParallelism, adapter, provider",
            ));
        }
        Ok(())
    }
}

/// A model's list price in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListPrice {
    pub input_per_mtok_usd: f64,
    pub output_per_mtok_usd: f64,
}

/// A catalogue model. The context window and the list price may each be unknown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelInput {
    pub id: String,
    #[serde(default)]
    pub context_window: Option<i64>,
    #[serde(default)]
    pub list_price: Option<ListPrice>,
    /// The provider this model is served by (its lane is occupied by the model's runs).
    #[serde(default)]
    pub provider: Option<String>,
    /// The model's own lane: at most this many of its jobs dispatched, starting or running.
    #[serde(default)]
    pub max_parallelism: Option<i64>,
}

/// The editable part of a model; a present `null` clears a value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelUpdate {
    #[serde(default)]
    pub context_window: Option<i64>,
    #[serde(default)]
    pub list_price: Option<ListPrice>,
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub max_parallelism: Option<i64>,
}

fn check_model_facts(context_window: Option<i64>, price: Option<ListPrice>) -> Result<(), ValidationError> {
    if let Some(w) = context_window
        && !(1..=100_000_000).contains(&w)
    {
        return Err(ValidationError::new(
            "contextWindow",
            "must be a positive number of tokens up to 100000000",
        ));
    }
    if let Some(p) = price {
        for (f, v) in [
            ("listPrice.inputPerMtokUsd", p.input_per_mtok_usd),
            ("listPrice.outputPerMtokUsd", p.output_per_mtok_usd),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(ValidationError::new(
                    f,
                    "must be a finite, non-negative number of dollars",
                ));
            }
        }
    }
    Ok(())
}

/// The largest cap a provider or model lane takes.
pub const MAX_LANE: i64 = 10_000;

/// A provider or model lane's cap: absent (unbounded) or 1 to [`MAX_LANE`].
pub fn check_lane(field: &str, cap: Option<i64>) -> Result<(), ValidationError> {
    match cap {
        Some(c) if !(1..=MAX_LANE).contains(&c) => Err(ValidationError::new(
            field,
            format!("must be an integer from 1 to {MAX_LANE} (or null: no lane)"),
        )),
        _ => Ok(()),
    }
}

fn check_model_lane(provider: Option<&str>, cap: Option<i64>) -> Result<(), ValidationError> {
    if let Some(p) = provider {
        check_slug("provider", p, 64)?;
    }
    check_lane("maxParallelism", cap)
}

/// A provider: where harnesses and models send their calls, rate-limited per key. Its optional
/// lane caps how many jobs that reach it run at once, across every harness.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderInput {
    pub name: String,
    #[serde(default)]
    pub max_parallelism: Option<i64>,
}

impl ProviderInput {
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_slug("name", &self.name, 64)?;
        check_lane("maxParallelism", self.max_parallelism)
    }
}

/// The editable part of a provider: `maxParallelism` set, or cleared with `null`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderUpdate {
    #[serde(default, deserialize_with = "present")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<i64>))]
    pub max_parallelism: Option<Option<i64>>,
}

impl ProviderUpdate {
    pub fn validate(&self) -> Result<(), ValidationError> {
        match self.max_parallelism {
            None => Err(ValidationError::new(
                "maxParallelism",
                "must be given (a number, or null: no lane)",
            )),
            Some(cap) => check_lane("maxParallelism", cap),
        }
    }
}

/// A provider as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Provider {
    pub name: String,
    pub max_parallelism: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl ModelInput {
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_name("id", &self.id, 128)?;
        check_model_facts(self.context_window, self.list_price)?;
        check_model_lane(self.provider.as_deref(), self.max_parallelism)
    }
}

impl ModelUpdate {
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_model_facts(self.context_window, self.list_price)?;
        check_model_lane(self.provider.as_deref(), self.max_parallelism)
    }
}

/// A gg configuration as its owner saves it. Names need not be unique; the id is the identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GgConfigInput {
    pub name: String,
    /// The launch slots a launch must bind to models, e.g. `["root", "reviewer"]`.
    pub launch_slots: Vec<String>,
    /// The capability set, carried to every run of this configuration.
    #[serde(default = "empty_object")]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub capabilities: serde_json::Value,
}

/// The editable part of a gg configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GgConfigUpdate {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub launch_slots: Option<Vec<String>>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub capabilities: Option<serde_json::Value>,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

fn check_slots(slots: &[String]) -> Result<(), ValidationError> {
    if slots.is_empty() || slots.len() > 16 {
        return Err(ValidationError::new("launchSlots", "must list 1 to 16 launch slots"));
    }
    let mut seen = BTreeSet::new();
    for (i, s) in slots.iter().enumerate() {
        check_slug(&format!("launchSlots[{i}]"), s, 64)?;
        if !seen.insert(s) {
            return Err(ValidationError::new(
                format!("launchSlots[{i}]"),
                "must not repeat a slot",
            ));
        }
    }
    Ok(())
}

fn check_capabilities(v: &serde_json::Value) -> Result<(), ValidationError> {
    if !v.is_object() {
        return Err(ValidationError::new("capabilities", "must be a JSON object"));
    }
    if v.to_string().len() > 64 * 1024 {
        return Err(ValidationError::new("capabilities", "must be at most 64 KiB of JSON"));
    }
    Ok(())
}

impl GgConfigInput {
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_text("name", &self.name, 200)?;
        check_slots(&self.launch_slots)?;
        check_capabilities(&self.capabilities)
    }
}

impl GgConfigUpdate {
    pub fn validate(&self) -> Result<(), ValidationError> {
        if let Some(n) = &self.name {
            check_text("name", n, 200)?;
        }
        if let Some(s) = &self.launch_slots {
            check_slots(s)?;
        }
        if let Some(c) = &self.capabilities {
            check_capabilities(c)?;
        }
        Ok(())
    }
}

/// A model's facts as far as the catalogue knows them (absent model: both unknown).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ModelFacts {
    pub context_window: Option<i64>,
    pub list_price: Option<ListPrice>,
}

/// A saved gg configuration, as the launch check sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct GgConfigFacts {
    pub name: String,
    pub launch_slots: Vec<String>,
    pub capabilities: serde_json::Value,
}

/// The catalogue facts a launch check reads, keyed by model id.
pub type ModelCatalogue = BTreeMap<String, ModelFacts>;

/// What the matrix and the ladder read of the ingested case versions: each slug's latest
/// version and each version's test type. A version that was never ingested is simply absent.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CaseFacts {
    /// Slug → its highest ingested version.
    pub latest_versions: BTreeMap<String, String>,
    /// (slug, version) → the version's test type.
    pub test_types: BTreeMap<(String, String), TestType>,
}

impl CaseFacts {
    /// Builds the facts from `(slug, version, test type)` rows, one per ingested version.
    pub fn from_versions<'a>(rows: impl IntoIterator<Item = (&'a str, &'a str, TestType)>) -> Self {
        let mut test_types = BTreeMap::new();
        let mut by_slug: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (slug, version, test_type) in rows {
            test_types.insert((slug.to_string(), version.to_string()), test_type);
            by_slug.entry(slug).or_default().push(version);
        }
        let latest_versions = by_slug
            .into_iter()
            .filter_map(|(slug, versions)| latest_version(versions).map(|v| (slug.to_string(), v.to_string())))
            .collect();
        Self {
            latest_versions,
            test_types,
        }
    }

    pub fn latest(&self, slug: &str) -> Option<&str> {
        self.latest_versions.get(slug).map(String::as_str)
    }

    /// Whether a version newer than `version` of `slug` has been ingested.
    pub fn is_stale(&self, slug: &str, version: &str) -> bool {
        match (
            self.latest(slug).map(semver::Version::parse),
            semver::Version::parse(version),
        ) {
            (Some(Ok(latest)), Ok(pinned)) => latest > pinned,
            _ => false,
        }
    }

    /// The test type of an ingested version.
    pub fn test_type(&self, slug: &str, version: &str) -> Option<TestType> {
        self.test_types.get(&(slug.to_string(), version.to_string())).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_version_is_the_highest_semver_not_the_newest_string() {
        assert_eq!(latest_version(["1.9.0", "1.10.0", "1.2.0"]), Some("1.10.0"));
        assert_eq!(latest_version(["1.0.0-rc.1", "1.0.0"]), Some("1.0.0"));
        assert_eq!(latest_version(Vec::<&str>::new()), None);
    }

    #[test]
    fn a_case_is_stale_only_when_a_higher_version_was_ingested() {
        let facts = CaseFacts::from_versions([
            ("snake", "1.0.0", TestType::Standard),
            ("snake", "1.10.0", TestType::Standard),
            ("snake", "1.2.0", TestType::Standard),
            ("bench", "2.0.0", TestType::Performance),
        ]);
        assert_eq!(facts.latest("snake"), Some("1.10.0"));
        assert!(facts.is_stale("snake", "1.2.0"));
        assert!(!facts.is_stale("snake", "1.10.0"));
        assert!(
            !facts.is_stale("snake", "2.0.0"),
            "a pin ahead of every ingested version is not stale"
        );
        assert!(!facts.is_stale("never-ingested", "1.0.0"));
        assert_eq!(facts.test_type("bench", "2.0.0"), Some(TestType::Performance));
        assert_eq!(facts.test_type("bench", "1.0.0"), None);
    }

    #[test]
    fn declared_review_domains_are_one_to_thirty_two_distinct_slugs() {
        let d = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(validate_review_domains(None).is_ok());
        assert!(validate_review_domains(Some(&d(&["gameplay", "visuals"]))).is_ok());
        assert_eq!(validate_review_domains(Some(&[])).unwrap_err().field, "reviewDomains");
        let dup = validate_review_domains(Some(&d(&["gameplay", "gameplay"]))).unwrap_err();
        assert_eq!(
            (dup.field.as_str(), dup.rule.as_str()),
            ("reviewDomains[1]", "must not repeat a domain")
        );
        assert_eq!(
            validate_review_domains(Some(&d(&["Game Play"]))).unwrap_err().field,
            "reviewDomains[0]"
        );
        let many: Vec<String> = (0..33).map(|i| format!("d{i}")).collect();
        assert_eq!(validate_review_domains(Some(&many)).unwrap_err().field, "reviewDomains");
    }

    #[test]
    fn a_pin_without_engine_is_always_supported() {
        assert!(engine_supported(&[], ENGINE_NONE));
        assert!(!engine_supported(&[], "godot"));
        assert!(engine_supported(&["godot".into()], "godot"));
    }

    #[test]
    fn a_version_must_be_exact_semver() {
        let mut v = TestCaseVersionInput {
            slug: "snake".into(),
            version: "1.0".into(),
            test_type: TestType::Standard,
            variants: vec!["default".into()],
            engines: vec![],
            title: None,
            review_domains: None,
        };
        assert_eq!(v.validate().unwrap_err().field, "version");
        v.version = "1.0.0".into();
        assert!(v.validate().is_ok());
        v.variants.push("default".into());
        assert_eq!(v.validate().unwrap_err().field, "variants[1]");
    }

    #[test]
    fn a_harness_cap_must_be_positive() {
        let h = HarnessInput {
            provider: None,
            name: "claude-code".into(),
            provider_routed: false,
            max_parallelism: 0,
            adapter: AdapterSpec::Script {
                script: "true".into(),
                timeout_seconds: 10,
                sandbox: false,
            },
        };
        assert_eq!(h.validate().unwrap_err().field, "maxParallelism");
    }

    #[test]
    fn an_adapter_spec_reads_its_tagged_json_shape() {
        let a: AdapterSpec =
            serde_json::from_str(r#"{"kind":"command","argv":["run-agent","{job_file}"],"timeoutSeconds":30}"#)
                .unwrap();
        assert_eq!(a.timeout_seconds(), 30);
        let s: AdapterSpec = serde_json::from_str(r#"{"kind":"script","script":"echo hi"}"#).unwrap();
        assert_eq!(s.timeout_seconds(), 3600);
    }
}

/// A harness as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Harness {
    pub name: String,
    pub provider_routed: bool,
    pub max_parallelism: i64,
    pub adapter: AdapterSpec,
    pub provider: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A model as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Model {
    pub id: String,
    pub context_window: Option<i64>,
    pub list_price: Option<ListPrice>,
    pub provider: Option<String>,
    pub max_parallelism: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// One ingested version of a test case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TestCaseVersion {
    pub slug: String,
    pub version: String,
    pub test_type: TestType,
    pub variants: Vec<String>,
    pub engines: Vec<String>,
    pub title: Option<String>,
    /// The domains its runs are rated on, when the version declares them.
    pub review_domains: Option<Vec<String>>,
    /// When this version was ingested (ms since the epoch, UTC).
    pub ingested_at: i64,
    pub updated_at: i64,
    /// A version is frozen once it has runs: it can no longer be edited.
    pub frozen: bool,
}

/// A test case: its slug, its latest version and every ingested version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TestCase {
    pub slug: String,
    pub latest_version: Option<String>,
    pub versions: Vec<TestCaseVersion>,
}

/// A saved gg configuration, as its owner sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct GgConfig {
    pub id: GgConfigId,
    pub name: String,
    pub launch_slots: Vec<String>,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub capabilities: serde_json::Value,
    pub created_at: i64,
    pub updated_at: i64,
}
