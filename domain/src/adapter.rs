//! The harness adapter contract: what a job's adapter is given, and how its exit code and
//! output manifest decide the outcome.
//!
//! The adapter itself runs in the `harness` activity; this module holds the rules.

use crate::attempt::FailureClass;
use crate::ids::JobId;
use crate::job::{CasePin, Combination};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The job file an adapter reads (also exported as `BELAY_*` environment variables).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobFile {
    pub job_id: JobId,
    pub attempt: i64,
    pub case: CasePin,
    pub combination: Combination,
    /// The gg configuration's name and capability set, for a gg job.
    pub gg_config_name: Option<String>,
    pub capabilities: Option<serde_json::Value>,
    /// Where the adapter writes artifacts and its manifest.
    pub output_dir: String,
    pub manifest: String,
}

/// File name of the manifest inside the output directory.
pub const MANIFEST_FILE: &str = "manifest.json";

/// What an adapter reports about its run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Manifest {
    pub status: ManifestStatus,
    /// Whether the build the agent produced loaded.
    #[serde(default)]
    pub loaded: bool,
    /// Artifact files to keep, relative to the output directory.
    #[serde(default)]
    pub artifacts: Vec<String>,
    #[serde(default)]
    pub message: Option<String>,
    /// Why a failed run failed: `infra` (the default), `task`, `provider_rate_limited` or
    /// `provider_refused` (see [`crate::attempt`]).
    #[serde(default)]
    pub failure_class: Option<FailureClass>,
    /// For `provider_rate_limited`: how long the provider asked to wait (clamped to 1 s – 1 h).
    #[serde(default)]
    pub retry_after_seconds: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ManifestStatus {
    Completed,
    Failed,
}

/// How the adapter process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessEnd {
    Exited(i32),
    Killed,
    TimedOut,
}

/// The outcome of one adapter run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum AdapterOutcome {
    Completed {
        loaded: bool,
        artifacts: Vec<String>,
    },
    Failed {
        reason: String,
        /// Absent in results recorded before failure classes: `infra`.
        #[serde(default)]
        class: FailureClass,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_seconds: Option<u64>,
    },
}

impl AdapterOutcome {
    /// A failure of the infrastructure (the class of a failure no adapter reported).
    pub fn infra(reason: impl Into<String>) -> Self {
        AdapterOutcome::Failed {
            reason: reason.into(),
            class: FailureClass::Infra,
            retry_after_seconds: None,
        }
    }
}

pub const MAX_ARTIFACTS: usize = 256;

/// Exit code 0 and a manifest saying `completed` make a completed run; anything else fails. A
/// failure's class is the manifest's `failureClass` when a manifest was written, else what the
/// exit code says ([`FailureClass::of_exit`]), else `infra`.
pub fn decide_outcome(end: ProcessEnd, manifest: Option<&str>) -> AdapterOutcome {
    let parsed: Option<Manifest> = manifest.and_then(|t| serde_json::from_str(t).ok());
    let failed = |reason: String, exit: Option<i32>| AdapterOutcome::Failed {
        reason: parsed.as_ref().and_then(|m| m.message.clone()).unwrap_or(reason),
        class: parsed
            .as_ref()
            .and_then(|m| m.failure_class)
            .or_else(|| exit.and_then(FailureClass::of_exit))
            .unwrap_or_default(),
        retry_after_seconds: parsed.as_ref().and_then(|m| m.retry_after_seconds),
    };
    match end {
        ProcessEnd::TimedOut => return AdapterOutcome::infra("the adapter ran past its timeout and was killed"),
        ProcessEnd::Killed => return AdapterOutcome::infra("the adapter was killed by a signal"),
        ProcessEnd::Exited(code) if code != 0 => {
            return failed(format!("the adapter exited with code {code}"), Some(code));
        }
        ProcessEnd::Exited(_) => {}
    }
    let Some(text) = manifest else {
        return AdapterOutcome::infra(format!("the adapter exited 0 but wrote no {MANIFEST_FILE}"));
    };
    let m: Manifest = match serde_json::from_str(text) {
        Ok(m) => m,
        Err(e) => return AdapterOutcome::infra(format!("{MANIFEST_FILE} is not valid: {e}")),
    };
    if m.status == ManifestStatus::Failed {
        return failed("the adapter reported failure".into(), None);
    }
    if m.artifacts.len() > MAX_ARTIFACTS {
        return AdapterOutcome::infra(format!("{MANIFEST_FILE} lists more than {MAX_ARTIFACTS} artifacts"));
    }
    for a in &m.artifacts {
        if let Err(why) = check_artifact_path(a) {
            return AdapterOutcome::infra(format!("{MANIFEST_FILE} artifact {a:?}: {why}"));
        }
    }
    AdapterOutcome::Completed {
        loaded: m.loaded,
        artifacts: m.artifacts,
    }
}

/// An artifact path must stay inside the output directory.
pub fn check_artifact_path(p: &str) -> Result<(), &'static str> {
    if p.is_empty() || p.len() > 512 {
        return Err("must be 1-512 characters");
    }
    if p.starts_with('/') || p.contains('\\') {
        return Err("must be a relative path");
    }
    if p.split('/').any(|seg| seg.is_empty() || seg == "." || seg == "..") || p == MANIFEST_FILE {
        return Err("must name a file inside the output directory");
    }
    Ok(())
}

/// The values `{name}` placeholders expand to.
pub fn template_vars(job: &JobFile) -> BTreeMap<&'static str, String> {
    let (model, provider) = match &job.combination {
        Combination::Harness { model, provider, .. } => (model.clone(), provider.clone().unwrap_or_default()),
        Combination::Gg { bindings, .. } => (bindings.values().cloned().collect::<Vec<_>>().join(","), String::new()),
    };
    BTreeMap::from([
        ("job_id", job.job_id.to_string()),
        ("job_file", format!("{}/job.json", job.output_dir.trim_end_matches('/'))),
        ("output_dir", job.output_dir.clone()),
        ("manifest", job.manifest.clone()),
        ("slug", job.case.slug.clone()),
        ("version", job.case.version.clone()),
        ("variant", job.case.variant.clone()),
        ("engine", job.case.engine.clone()),
        ("harness", job.combination.harness().to_string()),
        ("model", model),
        ("provider", provider),
    ])
}

/// Expands `{name}` placeholders; an unknown name is left as written.
pub fn expand(template: &str, vars: &BTreeMap<&'static str, String>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        match after.find('}') {
            Some(end) if vars.contains_key(&after[..end]) => {
                out.push_str(&vars[&after[..end]]);
                rest = &after[end + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The environment an adapter gets, beside the job file.
pub fn environment(job: &JobFile) -> Vec<(String, String)> {
    let v = template_vars(job);
    let mut env: Vec<(String, String)> = [
        ("BELAY_JOB_ID", "job_id"),
        ("BELAY_JOB_FILE", "job_file"),
        ("BELAY_OUTPUT_DIR", "output_dir"),
        ("BELAY_MANIFEST", "manifest"),
        ("BELAY_CASE_SLUG", "slug"),
        ("BELAY_CASE_VERSION", "version"),
        ("BELAY_CASE_VARIANT", "variant"),
        ("BELAY_ENGINE", "engine"),
        ("BELAY_HARNESS", "harness"),
        ("BELAY_MODEL", "model"),
        ("BELAY_PROVIDER", "provider"),
    ]
    .into_iter()
    .map(|(k, n)| (k.to_string(), v[n].clone()))
    .collect();
    env.push(("BELAY_ATTEMPT".into(), job.attempt.to_string()));
    if let Combination::Gg { gg_config_id, bindings } = &job.combination {
        env.push(("BELAY_GG_CONFIG_ID".into(), gg_config_id.clone()));
        env.push((
            "BELAY_GG_BINDINGS".into(),
            serde_json::to_string(bindings).unwrap_or_default(),
        ));
    }
    env
}

/// Why a pin cannot run, decided when the run executes (the catalogue moves under a standing
/// plan, so an author-time check would be stale).
pub fn pin_problem(pin: &CasePin, ingested: Option<(&[String], &[String])>) -> Option<String> {
    let Some((variants, engines)) = ingested else {
        return Some(format!(
            "case version {}@{} has not been ingested",
            pin.slug, pin.version
        ));
    };
    if !variants.iter().any(|v| v == &pin.variant) {
        return Some(format!(
            "case version {}@{} has no variant {}",
            pin.slug, pin.version, pin.variant
        ));
    }
    if !crate::catalogue::engine_supported(engines, &pin.engine) {
        return Some(format!(
            "case version {}@{} does not declare support for engine {}",
            pin.slug, pin.version, pin.engine
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_zero_with_a_completed_manifest_completes() {
        let m = r#"{"status":"completed","loaded":true,"artifacts":["build/index.html"]}"#;
        assert_eq!(
            decide_outcome(ProcessEnd::Exited(0), Some(m)),
            AdapterOutcome::Completed {
                loaded: true,
                artifacts: vec!["build/index.html".into()]
            }
        );
    }

    #[test]
    fn a_nonzero_exit_fails_whatever_the_manifest_says() {
        let m = r#"{"status":"completed","loaded":true}"#;
        assert!(matches!(
            decide_outcome(ProcessEnd::Exited(3), Some(m)),
            AdapterOutcome::Failed { .. }
        ));
        assert!(matches!(
            decide_outcome(ProcessEnd::TimedOut, Some(m)),
            AdapterOutcome::Failed { .. }
        ));
    }

    #[test]
    fn a_missing_or_malformed_manifest_fails() {
        assert!(matches!(
            decide_outcome(ProcessEnd::Exited(0), None),
            AdapterOutcome::Failed { .. }
        ));
        assert!(matches!(
            decide_outcome(ProcessEnd::Exited(0), Some("{")),
            AdapterOutcome::Failed { .. }
        ));
    }

    #[test]
    fn a_failure_is_classed_by_the_manifest_else_the_exit_code_else_infra() {
        let class = |o: AdapterOutcome| match o {
            AdapterOutcome::Failed {
                class,
                retry_after_seconds,
                ..
            } => (class, retry_after_seconds),
            AdapterOutcome::Completed { .. } => panic!("completed"),
        };
        let m = r#"{"status":"failed","failureClass":"provider_rate_limited","retryAfterSeconds":5,"message":"429"}"#;
        assert_eq!(
            class(decide_outcome(ProcessEnd::Exited(0), Some(m))),
            (FailureClass::ProviderRateLimited, Some(5))
        );
        let m = r#"{"status":"failed","failureClass":"task"}"#;
        assert_eq!(
            class(decide_outcome(ProcessEnd::Exited(1), Some(m))).0,
            FailureClass::Task
        );
        assert_eq!(
            class(decide_outcome(ProcessEnd::Exited(77), None)).0,
            FailureClass::ProviderRefused
        );
        assert_eq!(
            class(decide_outcome(ProcessEnd::Exited(3), None)).0,
            FailureClass::Infra
        );
        let m = r#"{"status":"failed"}"#;
        assert_eq!(
            class(decide_outcome(ProcessEnd::Exited(0), Some(m))).0,
            FailureClass::Infra
        );
        assert_eq!(class(decide_outcome(ProcessEnd::TimedOut, None)).0, FailureClass::Infra);
    }

    #[test]
    fn a_result_recorded_before_failure_classes_reads_as_infra() {
        let old: AdapterOutcome = serde_json::from_str(r#"{"outcome":"failed","reason":"x"}"#).unwrap();
        assert_eq!(old, AdapterOutcome::infra("x"));
    }

    #[test]
    fn an_artifact_outside_the_output_directory_fails_the_run() {
        let m = r#"{"status":"completed","artifacts":["../../etc/passwd"]}"#;
        assert!(matches!(
            decide_outcome(ProcessEnd::Exited(0), Some(m)),
            AdapterOutcome::Failed { .. }
        ));
        assert!(check_artifact_path("/abs").is_err());
        assert!(check_artifact_path("a/./b").is_err());
        assert!(check_artifact_path("a/b.txt").is_ok());
    }

    #[test]
    fn placeholders_expand_and_unknown_ones_stay() {
        let vars = BTreeMap::from([("model", "m1".to_string())]);
        assert_eq!(expand("--model={model} {nope} {", &vars), "--model=m1 {nope} {");
    }

    #[test]
    fn a_pin_on_an_undeclared_engine_is_reported_by_the_run() {
        let pin = CasePin {
            slug: "s".into(),
            version: "1.0.0".into(),
            variant: "v".into(),
            engine: "godot".into(),
        };
        let variants = vec!["v".to_string()];
        assert!(
            pin_problem(&pin, Some((&variants, &[])))
                .unwrap()
                .contains("engine godot")
        );
        assert!(pin_problem(&pin, None).unwrap().contains("not been ingested"));
        assert!(pin_problem(&pin, Some((&variants, &["godot".to_string()]))).is_none());
    }
}
