//! Jobs: their statuses and transitions, the case pin, the combination, the cell identity and
//! the origin that attributes a job to a plan or a ladder.

use crate::catalogue::ENGINE_NONE;
use crate::ids::{AccountId, JobId};
use crate::validation::{ValidationError, check_name, check_slug};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// Where a job is in its life. `completed`, `failed` and `canceled` are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Queued,
    Pending,
    Dispatched,
    Starting,
    Running,
    Completed,
    Failed,
    Canceled,
}

impl JobStatus {
    pub const ALL: [JobStatus; 8] = [
        JobStatus::Queued,
        JobStatus::Pending,
        JobStatus::Dispatched,
        JobStatus::Starting,
        JobStatus::Running,
        JobStatus::Completed,
        JobStatus::Failed,
        JobStatus::Canceled,
    ];
    /// Not yet claimed: the dispatcher may still pick these.
    pub const WAITING: [JobStatus; 2] = [JobStatus::Queued, JobStatus::Pending];
    /// Claimed and occupying one slot of the harness cap.
    pub const OCCUPYING: [JobStatus; 3] = [JobStatus::Dispatched, JobStatus::Starting, JobStatus::Running];
    /// Every state a cell counts as in flight.
    pub const IN_FLIGHT: [JobStatus; 5] = [
        JobStatus::Queued,
        JobStatus::Pending,
        JobStatus::Dispatched,
        JobStatus::Starting,
        JobStatus::Running,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::Pending => "pending",
            JobStatus::Dispatched => "dispatched",
            JobStatus::Starting => "starting",
            JobStatus::Running => "running",
            JobStatus::Completed => "completed",
            JobStatus::Failed => "failed",
            JobStatus::Canceled => "canceled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    pub fn is_final(self) -> bool {
        matches!(self, JobStatus::Completed | JobStatus::Failed | JobStatus::Canceled)
    }

    pub fn occupies_slot(self) -> bool {
        Self::OCCUPYING.contains(&self)
    }

    /// The transitions a job may take. Cancel is allowed from every non-final state.
    pub fn can_become(self, next: JobStatus) -> bool {
        use JobStatus::*;
        match (self, next) {
            (s, Canceled) => !s.is_final(),
            (Queued, Pending) | (Queued, Dispatched) | (Pending, Dispatched) => true,
            (Dispatched, Starting) | (Starting, Running) | (Running, Completed) => true,
            (Dispatched | Starting | Running, Failed) => true,
            _ => false,
        }
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A pinned case: the slug, an exact version, a variant of it, and the engine runs are built on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CasePin {
    pub slug: String,
    pub version: String,
    pub variant: String,
    /// Absent means the `none` engine.
    #[serde(default = "engine_none")]
    pub engine: String,
}

fn engine_none() -> String {
    ENGINE_NONE.to_string()
}

impl CasePin {
    pub fn validate(&self, prefix: &str) -> Result<(), ValidationError> {
        check_slug(&format!("{prefix}.slug"), &self.slug, 64)?;
        crate::catalogue::validate_version_string(&format!("{prefix}.version"), &self.version)?;
        check_slug(&format!("{prefix}.variant"), &self.variant, 64)?;
        check_slug(&format!("{prefix}.engine"), &self.engine, 64)?;
        Ok(())
    }
}

impl fmt::Display for CasePin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}/{}/{}", self.slug, self.version, self.variant, self.engine)
    }
}

/// The harness every gg configuration's runs share as one lane.
pub const GG_HARNESS: &str = "gg";

/// What executes a cell's runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Combination {
    /// A harness, the model it runs, and a provider for a provider-routed harness.
    Harness {
        harness: String,
        model: String,
        #[serde(default)]
        provider: Option<String>,
    },
    /// A saved gg configuration and the model bound to each of its launch slots.
    Gg {
        #[serde(rename = "ggConfigId")]
        gg_config_id: String,
        bindings: BTreeMap<String, String>,
    },
}

impl Combination {
    /// What identifies the combination in a cell key and as a ladder climber:
    /// `harness/model[/provider]`, or `gg:<config id>[slot=model,…]` with slots in order.
    pub fn identity(&self) -> String {
        match self {
            Combination::Harness {
                harness,
                model,
                provider,
            } => match provider {
                Some(p) => format!("{harness}/{model}/{p}"),
                None => format!("{harness}/{model}"),
            },
            Combination::Gg { gg_config_id, bindings } => {
                let bound: Vec<String> = bindings.iter().map(|(s, m)| format!("{s}={m}")).collect();
                format!("gg:{gg_config_id}[{}]", bound.join(","))
            }
        }
    }

    /// The harness lane whose cap this combination's runs occupy.
    pub fn harness(&self) -> &str {
        match self {
            Combination::Harness { harness, .. } => harness,
            Combination::Gg { .. } => GG_HARNESS,
        }
    }

    /// Every model this combination runs, in slot order for gg.
    pub fn models(&self) -> Vec<&str> {
        match self {
            Combination::Harness { model, .. } => vec![model.as_str()],
            Combination::Gg { bindings, .. } => bindings.values().map(String::as_str).collect(),
        }
    }

    /// Every model this combination drives, each once, in slot order (a run's `BelayModel`).
    pub fn distinct_models(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for m in self.models() {
            if !out.iter().any(|o| o == m) {
                out.push(m.to_owned());
            }
        }
        out
    }

    pub fn validate_shape(&self) -> Result<(), ValidationError> {
        self.validate_shape_at("combination")
    }

    /// Checks the shape, naming fields under `prefix` (`members[2]` → `members[2].model`).
    pub fn validate_shape_at(&self, prefix: &str) -> Result<(), ValidationError> {
        match self {
            Combination::Harness {
                harness,
                model,
                provider,
            } => {
                check_slug(&format!("{prefix}.harness"), harness, 64)?;
                if harness == GG_HARNESS {
                    return Err(ValidationError::new(
                        format!("{prefix}.harness"),
                        "the gg lane is launched with kind \"gg\" and a ggConfigId",
                    ));
                }
                check_name(&format!("{prefix}.model"), model, 128)?;
                if let Some(p) = provider {
                    check_slug(&format!("{prefix}.provider"), p, 64)?;
                }
            }
            Combination::Gg { gg_config_id, bindings } => {
                if !crate::ids::GgConfigId::is_valid(gg_config_id) {
                    return Err(ValidationError::new(
                        format!("{prefix}.ggConfigId"),
                        "must be a gg configuration id (gg_…)",
                    ));
                }
                for (slot, model) in bindings {
                    check_slug(&format!("{prefix}.bindings.{slot}"), slot, 64)?;
                    check_name(&format!("{prefix}.bindings.{slot}"), model, 128)?;
                }
            }
        }
        Ok(())
    }
}

/// The identity a cell is counted by: the whole pin × harness/model/provider, or the whole pin ×
/// the gg configuration's id and every bound model. Its text form is the `cell_key` column.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CellKey(pub String);

impl CellKey {
    /// What joins a cell key's pin and its combination's identity.
    const JOIN: &'static str = " × ";

    pub fn of(pin: &CasePin, combo: &Combination) -> Self {
        Self::joined(&pin.to_string(), &combo.identity())
    }

    /// The key of the cell whose pin is written `pin` and whose combination's identity is
    /// `identity`: [`CellKey::of`] for a caller that crosses many pins with many combinations
    /// and writes each once.
    pub fn joined(pin: &str, identity: &str) -> Self {
        let mut k = String::with_capacity(pin.len() + Self::JOIN.len() + identity.len());
        k.push_str(pin);
        k.push_str(Self::JOIN);
        k.push_str(identity);
        CellKey(k)
    }
}

impl fmt::Display for CellKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Which plan or ladder launched a job. Plan and ladder ids are minted independently, so the
/// prefix is part of the identity.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Origin {
    Plan(String),
    Ladder(String),
}

impl Origin {
    /// The plan's or ladder's id.
    pub fn id(&self) -> &str {
        match self {
            Origin::Plan(id) | Origin::Ladder(id) => id,
        }
    }

    pub fn parse(s: &str) -> Result<Self, ValidationError> {
        let (kind, id) = s
            .split_once(':')
            .ok_or_else(|| ValidationError::new("origin", "must be plan:<id> or ladder:<id>"))?;
        if id.is_empty() || id.len() > 128 || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(ValidationError::new("origin", "must be plan:<id> or ladder:<id>"));
        }
        match kind {
            "plan" => Ok(Origin::Plan(id.to_string())),
            "ladder" => Ok(Origin::Ladder(id.to_string())),
            _ => Err(ValidationError::new("origin", "must be plan:<id> or ladder:<id>")),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Plan(id) => write!(f, "plan:{id}"),
            Origin::Ladder(id) => write!(f, "ladder:{id}"),
        }
    }
}

impl TryFrom<String> for Origin {
    type Error = ValidationError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Origin::parse(&s)
    }
}

impl From<Origin> for String {
    fn from(o: Origin) -> String {
        o.to_string()
    }
}

/// Infrastructure failures are retried as a new job, at most this many attempts in all.
pub const MAX_ATTEMPTS: i64 = 3;

/// What happens after a job failed on infrastructure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// Enqueue a new job with this attempt number, same launcher and origin.
    Retry { attempt: i64 },
    /// The origin plan or ladder is paused: the next attempt is withheld.
    Withheld,
    /// Out of attempts.
    Exhausted,
    /// The failure is not about infrastructure (e.g. the pin names an unsupported engine).
    NotRetryable,
}

/// Decides whether a failed job is tried again. A job launched by hand always retries (while
/// attempts remain); one launched by a paused plan or ladder is withheld.
pub fn retry_decision(
    attempt: i64,
    infrastructure: bool,
    origin: Option<&Origin>,
    origin_paused: bool,
) -> RetryDecision {
    if !infrastructure {
        return RetryDecision::NotRetryable;
    }
    if attempt >= MAX_ATTEMPTS {
        return RetryDecision::Exhausted;
    }
    if origin.is_some() && origin_paused {
        return RetryDecision::Withheld;
    }
    RetryDecision::Retry { attempt: attempt + 1 }
}

/// A job about to be enqueued.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    pub case: CasePin,
    pub combination: Combination,
    pub gg_config_name: Option<String>,
    /// The gg capability set recorded at launch.
    pub capabilities: Option<serde_json::Value>,
    pub test_type: Option<crate::catalogue::TestType>,
    pub user_id: Option<AccountId>,
    pub origin: Option<Origin>,
    pub attempt: i64,
    pub retry_of: Option<JobId>,
}

impl Job {
    /// The job that retries this one under `decision`, when the decision is to retry: the same
    /// pin, combination, gg configuration and capabilities, launcher and origin, the decided
    /// attempt, and `retry_of` naming this job. `capabilities` are this job's, as recorded.
    pub fn retry(&self, decision: &RetryDecision, capabilities: Option<serde_json::Value>) -> Option<NewJob> {
        let RetryDecision::Retry { attempt } = *decision else {
            return None;
        };
        Some(NewJob {
            case: self.case.clone(),
            combination: self.combination.clone(),
            gg_config_name: self.gg_config_name.clone(),
            capabilities,
            test_type: self.test_type,
            user_id: self.user_id.clone(),
            origin: self.origin.clone(),
            attempt,
            retry_of: Some(self.id.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_models_names_each_model_once() {
        let harness = Combination::Harness {
            harness: "codex".into(),
            model: "m1".into(),
            provider: None,
        };
        assert_eq!(harness.distinct_models(), ["m1"]);
        let gg = |models: &[&str]| Combination::Gg {
            gg_config_id: "gg_1".into(),
            bindings: models
                .iter()
                .enumerate()
                .map(|(i, m)| (format!("slot{i}"), m.to_string()))
                .collect(),
        };
        assert_eq!(gg(&["m1", "m1"]).distinct_models(), ["m1"]);
        assert_eq!(gg(&["m2", "m1", "m2"]).distinct_models(), ["m2", "m1"]);
        assert!(gg(&[]).distinct_models().is_empty());
    }

    fn pin(engine: &str) -> CasePin {
        CasePin {
            slug: "snake".into(),
            version: "1.0.0".into(),
            variant: "default".into(),
            engine: engine.into(),
        }
    }

    #[test]
    fn cancel_is_allowed_from_every_state_that_is_not_final() {
        for s in JobStatus::ALL {
            assert_eq!(s.can_become(JobStatus::Canceled), !s.is_final(), "{s}");
        }
    }

    #[test]
    fn a_job_cannot_skip_from_queued_to_running() {
        assert!(!JobStatus::Queued.can_become(JobStatus::Running));
        assert!(JobStatus::Pending.can_become(JobStatus::Dispatched));
        assert!(!JobStatus::Completed.can_become(JobStatus::Failed));
    }

    #[test]
    fn a_pin_without_engine_reads_as_the_none_engine() {
        let p: CasePin = serde_json::from_str(r#"{"slug":"snake","version":"1.0.0","variant":"default"}"#).unwrap();
        assert_eq!(p.engine, "none");
    }

    #[test]
    fn the_engine_is_part_of_the_cell_identity() {
        let c = Combination::Harness {
            harness: "cc".into(),
            model: "m".into(),
            provider: None,
        };
        assert_ne!(CellKey::of(&pin("none"), &c), CellKey::of(&pin("godot"), &c));
        assert_eq!(CellKey::of(&pin("none"), &c).0, "snake@1.0.0/default/none × cc/m");
    }

    #[test]
    fn a_gg_cell_is_its_config_id_and_every_bound_model() {
        let a = Combination::Gg {
            gg_config_id: "gg_1".into(),
            bindings: BTreeMap::from([("root".into(), "m1".into()), ("reviewer".into(), "m2".into())]),
        };
        let b = Combination::Gg {
            gg_config_id: "gg_1".into(),
            bindings: BTreeMap::from([("root".into(), "m1".into()), ("reviewer".into(), "m3".into())]),
        };
        assert_ne!(CellKey::of(&pin("none"), &a), CellKey::of(&pin("none"), &b));
        assert_eq!(
            CellKey::of(&pin("none"), &a).0,
            "snake@1.0.0/default/none × gg:gg_1[reviewer=m2,root=m1]"
        );
        assert_eq!(a.harness(), GG_HARNESS);
    }

    #[test]
    fn origins_keep_their_prefix() {
        assert_eq!(Origin::parse("plan:p1").unwrap(), Origin::Plan("p1".into()));
        assert_ne!(Origin::parse("plan:x").unwrap(), Origin::parse("ladder:x").unwrap());
        assert!(Origin::parse("x:1").is_err());
        assert!(Origin::parse("plan:").is_err());
    }

    #[test]
    fn a_retry_keeps_the_pin_launcher_and_origin_and_names_the_job_it_retries() {
        let job = Job {
            id: "job_1".into(),
            queue_seq: 7,
            status: JobStatus::Failed,
            case: pin("python"),
            combination: Combination::Harness {
                harness: "h".into(),
                model: "m".into(),
                provider: None,
            },
            gg_config_name: Some("gg".into()),
            cell_key: "k".into(),
            test_type: Some(crate::catalogue::TestType::Standard),
            user_id: Some("alice".into()),
            origin: Some(Origin::Plan("plan_1".into())),
            attempt: 1,
            retry_of: None,
            retry_withheld: false,
            held_by: None,
            failure_class: None,
            error: Some("lost".into()),
            created_at: 1,
            timestamps: JobTimestamps::default(),
        };
        let caps = Some(serde_json::json!({"tools": ["bash"]}));
        let decision = retry_decision(job.attempt, true, job.origin.as_ref(), false);
        let retry = job
            .retry(&decision, caps.clone())
            .expect("an infrastructure failure retries");
        assert_eq!(retry.attempt, 2);
        assert_eq!(retry.retry_of.as_deref(), Some("job_1"));
        assert_eq!((&retry.case, &retry.combination), (&job.case, &job.combination));
        assert_eq!((&retry.user_id, &retry.origin), (&job.user_id, &job.origin));
        assert_eq!(retry.gg_config_name, job.gg_config_name);
        assert_eq!(retry.capabilities, caps);
        for no in [
            RetryDecision::Withheld,
            RetryDecision::Exhausted,
            RetryDecision::NotRetryable,
        ] {
            assert_eq!(job.retry(&no, None), None, "{no:?}");
        }
    }

    #[test]
    fn a_retry_inherits_nothing_when_the_origin_is_paused() {
        let o = Origin::Plan("p".into());
        assert_eq!(
            retry_decision(1, true, Some(&o), false),
            RetryDecision::Retry { attempt: 2 }
        );
        assert_eq!(retry_decision(1, true, Some(&o), true), RetryDecision::Withheld);
        assert_eq!(retry_decision(1, true, None, true), RetryDecision::Retry { attempt: 2 });
        assert_eq!(
            retry_decision(MAX_ATTEMPTS, true, None, false),
            RetryDecision::Exhausted
        );
        assert_eq!(retry_decision(1, false, None, false), RetryDecision::NotRetryable);
    }
}

/// A job as stored and shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Job {
    pub id: JobId,
    pub queue_seq: i64,
    pub status: JobStatus,
    pub case: CasePin,
    pub combination: Combination,
    /// The gg configuration's name as it was at launch (the run records it).
    pub gg_config_name: Option<String>,
    /// The cell identity this job counts toward.
    pub cell_key: String,
    /// The case version's test type, when the version was ingested at launch.
    pub test_type: Option<crate::catalogue::TestType>,
    pub user_id: Option<AccountId>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub origin: Option<Origin>,
    pub attempt: i64,
    /// The job this one retries after an infrastructure failure.
    pub retry_of: Option<JobId>,
    pub error: Option<String>,
    /// The job failed on infrastructure while its plan or ladder was paused, so its next attempt
    /// was withheld (the plan's next top-up counts the missing run instead).
    #[serde(default)]
    pub retry_withheld: bool,
    /// What holds a pending job back: the lane at its cap (`harness:…`, `provider:…`,
    /// `model:…`) or the game-jam rule (`jam:<model>`).
    #[serde(default)]
    pub held_by: Option<String>,
    /// How the job's last attempt failed, when it failed (a `task` failure completes the job).
    #[serde(default)]
    pub failure_class: Option<crate::attempt::FailureClass>,
    pub created_at: i64,
    pub timestamps: JobTimestamps,
}

/// When the job entered each state (ms since the epoch, UTC).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobTimestamps {
    pub queued_at: Option<i64>,
    pub pending_at: Option<i64>,
    pub dispatched_at: Option<i64>,
    pub starting_at: Option<i64>,
    pub running_at: Option<i64>,
    pub completed_at: Option<i64>,
    pub failed_at: Option<i64>,
    pub canceled_at: Option<i64>,
}

/// A job launched by hand.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LaunchInput {
    pub case: CasePin,
    pub combination: Combination,
}

impl LaunchInput {
    pub fn validate(&self) -> Result<(), ValidationError> {
        self.case.validate("case")?;
        self.combination.validate_shape()
    }
}

/// One recorded status change, in global order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobTransition {
    pub seq: i64,
    pub job_id: JobId,
    pub harness: String,
    pub queue_seq: i64,
    pub from: Option<JobStatus>,
    pub to: JobStatus,
    pub at: i64,
}
