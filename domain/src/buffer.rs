//! The review buffer: how much work a reviewer wants waiting on them, and how much is.
//!
//! The target is a property of the account (`GET/PUT /coverage-settings`) that a plan or a
//! ladder may override. `null` inherits, a bound of 0 never tops up automatically, and unbounded
//! tops up everything: three distinct instructions, so the override is an `Option` of a tagged
//! shape rather than a number. Outstanding is the one place a per-account number enters the
//! top-up arithmetic, and it is computed here only.

use crate::matrix::MatrixCell;
use crate::validation::ValidationError;
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// The ceiling a bounded target is clamped to.
pub const MAX_BUFFER_RUNS: i64 = 500;

/// The account's target when it never set one.
pub const DEFAULT_BUFFER_TARGET: BufferTarget = BufferTarget::Bounded { runs: 10 };

/// How many runs a reviewer wants outstanding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum BufferTarget {
    /// Stop a top-up once this many runs are outstanding (at the next cell boundary).
    Bounded { runs: i64 },
    /// No reviewer-backlog check: every missing cell is emitted.
    Unbounded {},
}

impl BufferTarget {
    /// The target as stored and shown: a bound above 500 becomes 500, a negative bound is refused.
    /// `field` is the path of the target in the request (`bufferTarget`).
    pub fn clamped(self, field: &str) -> Result<Self, ValidationError> {
        match self {
            BufferTarget::Bounded { runs } if runs < 0 => Err(ValidationError::new(
                format!("{field}.runs"),
                format!(
                    "must be 0 or more (0 never tops up automatically; a bound above {MAX_BUFFER_RUNS} is clamped to {MAX_BUFFER_RUNS})"
                ),
            )),
            BufferTarget::Bounded { runs } => Ok(BufferTarget::Bounded {
                runs: runs.min(MAX_BUFFER_RUNS),
            }),
            BufferTarget::Unbounded {} => Ok(BufferTarget::Unbounded {}),
        }
    }

    /// Whether `outstanding` runs fill the buffer, so a top-up emits no further cell.
    pub fn is_full(self, outstanding: i64) -> bool {
        match self {
            BufferTarget::Bounded { runs } => outstanding >= runs,
            BufferTarget::Unbounded {} => false,
        }
    }

    /// A bound of 0: the automatic triggers start nothing, and a requested top-up enqueues 0.
    pub fn is_zero(self) -> bool {
        self == BufferTarget::Bounded { runs: 0 }
    }
}

/// The target in force for a plan or a ladder: its override when it has one, else the account's
/// setting, else the default bound of ten. `account` is `None` when the account never saved one.
pub fn target_in_force(account: Option<BufferTarget>, override_target: Option<BufferTarget>) -> BufferTarget {
    override_target.or(account).unwrap_or(DEFAULT_BUFFER_TARGET)
}

/// `GET/PUT /coverage-settings`: the account-wide buffer target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CoverageSettings {
    pub buffer_target: BufferTarget,
}

impl Default for CoverageSettings {
    fn default() -> Self {
        Self {
            buffer_target: DEFAULT_BUFFER_TARGET,
        }
    }
}

impl CoverageSettings {
    /// The settings as stored and shown (the bound clamped), or why not.
    pub fn validated(self) -> Result<Self, ValidationError> {
        Ok(Self {
            buffer_target: self.buffer_target.clamped("bufferTarget")?,
        })
    }
}

/// What the reviewer still owes attention to across `cells`: their in-flight jobs plus their
/// completed runs the requesting account has not reviewed. Pass a plan's cells, or every cell a
/// ladder's climbers have reached.
pub fn outstanding<'a>(cells: impl IntoIterator<Item = &'a MatrixCell>) -> i64 {
    cells.into_iter().map(|c| c.in_flight + c.unreviewed).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_inherits_the_account_zero_and_unbounded_are_instructions_of_their_own() {
        let account = Some(BufferTarget::Bounded { runs: 25 });
        assert_eq!(target_in_force(account, None), BufferTarget::Bounded { runs: 25 });
        assert_eq!(
            target_in_force(account, Some(BufferTarget::Bounded { runs: 0 })),
            BufferTarget::Bounded { runs: 0 }
        );
        assert_eq!(
            target_in_force(account, Some(BufferTarget::Unbounded {})),
            BufferTarget::Unbounded {}
        );
        assert_eq!(target_in_force(None, None), BufferTarget::Bounded { runs: 10 });
    }

    #[test]
    fn a_bound_above_five_hundred_is_clamped_and_a_negative_one_refused() {
        let t: BufferTarget = serde_json::from_str(r#"{"kind":"bounded","runs":600}"#).unwrap();
        assert_eq!(t.clamped("bufferTarget"), Ok(BufferTarget::Bounded { runs: 500 }));
        let err = BufferTarget::Bounded { runs: -1 }.clamped("bufferTarget").unwrap_err();
        assert_eq!(err.field, "bufferTarget.runs");
        assert_eq!(
            BufferTarget::Unbounded {}.clamped("bufferTarget"),
            Ok(BufferTarget::Unbounded {})
        );
    }

    #[test]
    fn the_settings_read_their_tagged_shape_and_refuse_unknown_fields() {
        let s: CoverageSettings = serde_json::from_str(r#"{"bufferTarget":{"kind":"unbounded"}}"#).unwrap();
        assert_eq!(s.buffer_target, BufferTarget::Unbounded {});
        assert!(serde_json::from_str::<CoverageSettings>(r#"{"bufferTarget":{"kind":"unbounded","runs":3}}"#).is_err());
        assert!(serde_json::from_str::<CoverageSettings>(r#"{"bufferTarget":{"kind":"bounded"}}"#).is_err());
        assert!(serde_json::from_str::<CoverageSettings>(r#"{"bufferTarget":{"kind":"some"}}"#).is_err());
        assert_eq!(
            CoverageSettings::default().buffer_target,
            BufferTarget::Bounded { runs: 10 }
        );
        assert_eq!(
            serde_json::to_value(CoverageSettings::default()).unwrap(),
            serde_json::json!({"bufferTarget": {"kind": "bounded", "runs": 10}})
        );
    }

    #[test]
    fn an_unbounded_buffer_is_never_full_and_a_zero_bound_always_is() {
        assert!(!BufferTarget::Unbounded {}.is_full(i64::MAX));
        assert!(BufferTarget::Bounded { runs: 0 }.is_full(0));
        assert!(BufferTarget::Bounded { runs: 0 }.is_zero());
        assert!(!BufferTarget::Bounded { runs: 4 }.is_full(3));
        assert!(BufferTarget::Bounded { runs: 4 }.is_full(4));
    }

    #[test]
    fn outstanding_is_in_flight_jobs_plus_runs_the_account_has_not_reviewed() {
        use crate::catalogue::{CaseFacts, TestType};
        use crate::coverage::tests::{harness, pin};
        use crate::coverage::{OuterAxis, cross};
        use crate::job::JobStatus;
        use crate::matrix::tests::{jobs, launch_facts};
        use crate::matrix::{CellCounts, matrix};
        use std::collections::BTreeMap;

        let cells = cross(
            &[pin("snake", "1.0.0"), pin("bench", "1.0.0")],
            &[harness("cc", "m")],
            OuterAxis::Case,
        );
        let busy = CellCounts {
            completed: 4,
            unreviewed: 3,
            jobs: jobs(&[(JobStatus::Queued, 1), (JobStatus::Running, 1), (JobStatus::Failed, 5)]),
        };
        let counts = cells
            .iter()
            .map(|c| (c.cell_key.clone(), busy.clone()))
            .collect::<BTreeMap<_, _>>();
        let cases = CaseFacts::from_versions([
            ("snake", "1.0.0", TestType::Standard),
            ("bench", "1.0.0", TestType::Performance),
        ]);
        let m = matrix(&cells, 5, &counts, &cases, &launch_facts());
        // snake: 2 in flight + 3 unreviewed; bench: 2 in flight, its runs nobody can review.
        assert_eq!(outstanding(&m.cells), 7);
    }
}
