//! The rules of account tokens a team can run (decision 0042): how long a token may live, which
//! answer a presented token gets, when its last use is worth a write, who may lose the operator
//! role, and how failed authentication from one client address is bounded. Pure: the time is
//! passed in, in milliseconds since the epoch.

use crate::ValidationError;

/// The longest a token may live: one year (365 days) from its creation, in seconds.
pub const MAX_TOKEN_LIFETIME_SECONDS: i64 = 365 * 24 * 60 * 60;

/// A token's last use is written at most this often, so authentication adds no write to most
/// requests.
pub const LAST_USED_EVERY_MS: i64 = 60 * 1000;

/// The longest a token's name may be.
pub const MAX_TOKEN_NAME: usize = 200;

/// `expiresInSeconds` of a new token: absent (it never expires), or from 1 second (an expiry in
/// the future) to one year.
pub fn check_lifetime(seconds: Option<i64>) -> Result<(), ValidationError> {
    match seconds {
        None => Ok(()),
        Some(s) if s < 1 => Err(ValidationError::new(
            "expiresInSeconds",
            "must be at least 1: the expiry must be in the future",
        )),
        Some(s) if s > MAX_TOKEN_LIFETIME_SECONDS => Err(ValidationError::new(
            "expiresInSeconds",
            format!("must be at most {MAX_TOKEN_LIFETIME_SECONDS} (one year of 365 days)"),
        )),
        Some(_) => Ok(()),
    }
}

/// What a presented token that the database knows amounts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenState {
    Valid,
    Revoked,
    Expired,
    AccountDisabled,
}

impl TokenState {
    /// The `code` of the 401 a token in this state is answered with.
    pub fn code(self) -> &'static str {
        match self {
            TokenState::Valid => "ok",
            TokenState::Revoked => "token_revoked",
            TokenState::Expired => "token_expired",
            TokenState::AccountDisabled => "account_disabled",
        }
    }
}

/// The state of a token at `now`. What is wrong with the token itself is said before what is
/// wrong with its account: a revoked token of a disabled account is `Revoked`, so that enabling
/// the account again is not what its holder is told to wait for.
pub fn token_state(now: i64, revoked_at: Option<i64>, expires_at: Option<i64>, disabled_at: Option<i64>) -> TokenState {
    if revoked_at.is_some() {
        TokenState::Revoked
    } else if expires_at.is_some_and(|at| at <= now) {
        TokenState::Expired
    } else if disabled_at.is_some() {
        TokenState::AccountDisabled
    } else {
        TokenState::Valid
    }
}

/// Whether a use at `now` should be written, the last written being `last_used_at`.
pub fn last_used_due(now: i64, last_used_at: Option<i64>) -> bool {
    last_used_at.is_none_or(|at| now - at >= LAST_USED_EVERY_MS)
}

/// Whether an account may stop being an enabled operator (be demoted or disabled): not when it is
/// the last enabled operator, or nobody could administer the deployment through the API again.
/// `enabled_operators` counts the enabled operators, this account included when it is one.
pub fn may_stop_operating(is_enabled_operator: bool, enabled_operators: i64) -> bool {
    !is_enabled_operator || enabled_operators > 1
}

/// How failed authentication from one client address is bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureBound {
    /// Failures within a window answered at once.
    pub free: u32,
    /// Failures after the free ones answered after a growing delay, before refusals start.
    pub slowed: u32,
    /// Each slowed failure waits this much more than the one before.
    pub delay_step_ms: u64,
    /// A window's length: failures older than this are forgotten.
    pub window_ms: i64,
    /// How long an address is refused once it used up its free and slowed failures.
    pub refusal_ms: i64,
}

impl Default for FailureBound {
    /// 10 failures at once, 10 more each slowed by 100 ms more (100 ms … 1 s), then 429 for a
    /// minute; failures are counted over five minutes.
    fn default() -> Self {
        FailureBound {
            free: 10,
            slowed: 10,
            delay_step_ms: 100,
            window_ms: 5 * 60 * 1000,
            refusal_ms: 60 * 1000,
        }
    }
}

/// One address's recent failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FailureRecord {
    pub failures: u32,
    pub window_start: i64,
    pub refused_until: Option<i64>,
}

/// How a failed authentication is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureAnswer {
    /// 401, after `delay_ms` (0: at once).
    Unauthorized { delay_ms: u64 },
    /// 429 with `Retry-After: retry_after_s`.
    TooMany { retry_after_s: u64 },
}

impl FailureBound {
    /// Records a failure from an address at `now` and says how to answer it.
    pub fn fail(&self, record: &mut FailureRecord, now: i64) -> FailureAnswer {
        if let Some(until) = record.refused_until
            && now < until
        {
            return FailureAnswer::TooMany {
                retry_after_s: retry_after(until - now),
            };
        }
        if record.refused_until.is_some() || now - record.window_start >= self.window_ms {
            *record = FailureRecord {
                failures: 0,
                window_start: now,
                refused_until: None,
            };
        }
        record.failures += 1;
        let n = record.failures;
        if n <= self.free {
            return FailureAnswer::Unauthorized { delay_ms: 0 };
        }
        if n <= self.free + self.slowed {
            return FailureAnswer::Unauthorized {
                delay_ms: u64::from(n - self.free) * self.delay_step_ms,
            };
        }
        record.refused_until = Some(now + self.refusal_ms);
        FailureAnswer::TooMany {
            retry_after_s: retry_after(self.refusal_ms),
        }
    }

    /// Whether a record can be forgotten at `now`: its window passed and it refuses nothing.
    pub fn expired(&self, record: &FailureRecord, now: i64) -> bool {
        record.refused_until.is_none_or(|until| until <= now) && now - record.window_start >= self.window_ms
    }
}

/// Whole seconds, rounded up, never 0.
fn retry_after(ms: i64) -> u64 {
    (ms.max(1) as u64).div_ceil(1000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NOW: i64 = 1_800_000_000_000;

    #[test]
    fn an_expiry_must_be_ahead_and_within_a_year() {
        assert!(check_lifetime(None).is_ok());
        assert!(check_lifetime(Some(1)).is_ok());
        assert!(check_lifetime(Some(MAX_TOKEN_LIFETIME_SECONDS)).is_ok());
        for past in [0, -60] {
            let e = check_lifetime(Some(past)).unwrap_err();
            assert_eq!(e.field, "expiresInSeconds");
            assert!(e.rule.contains("future"), "{}", e.rule);
        }
        let far = check_lifetime(Some(MAX_TOKEN_LIFETIME_SECONDS + 1)).unwrap_err();
        assert!(far.rule.contains("one year"), "{}", far.rule);
    }

    #[test]
    fn a_revoked_token_says_so_before_its_expiry_or_its_account() {
        assert_eq!(token_state(NOW, None, None, None), TokenState::Valid);
        assert_eq!(token_state(NOW, Some(1), Some(1), Some(1)), TokenState::Revoked);
        assert_eq!(token_state(NOW, None, Some(NOW), Some(1)), TokenState::Expired);
        assert_eq!(token_state(NOW, None, Some(NOW + 1), None), TokenState::Valid);
        assert_eq!(
            token_state(NOW, None, Some(NOW + 1), Some(1)),
            TokenState::AccountDisabled
        );
        assert_eq!(TokenState::Expired.code(), "token_expired");
    }

    #[test]
    fn a_use_is_written_once_a_minute() {
        assert!(last_used_due(NOW, None));
        assert!(!last_used_due(NOW + LAST_USED_EVERY_MS - 1, Some(NOW)));
        assert!(last_used_due(NOW + LAST_USED_EVERY_MS, Some(NOW)));
    }

    #[test]
    fn the_last_enabled_operator_cannot_stop_operating() {
        assert!(!may_stop_operating(true, 1));
        assert!(may_stop_operating(true, 2));
        assert!(may_stop_operating(false, 1));
    }

    #[test]
    fn failures_are_free_then_slowed_then_refused_for_a_while() {
        let bound = FailureBound::default();
        let mut r = FailureRecord::default();
        let answers: Vec<_> = (0..21).map(|i| bound.fail(&mut r, NOW + i)).collect();
        assert!(
            answers[..10]
                .iter()
                .all(|a| *a == FailureAnswer::Unauthorized { delay_ms: 0 })
        );
        assert_eq!(answers[10], FailureAnswer::Unauthorized { delay_ms: 100 });
        assert_eq!(answers[19], FailureAnswer::Unauthorized { delay_ms: 1000 });
        assert_eq!(answers[20], FailureAnswer::TooMany { retry_after_s: 60 });
        // Still refused half a minute on, with the time left.
        assert_eq!(
            bound.fail(&mut r, NOW + 30_020),
            FailureAnswer::TooMany { retry_after_s: 30 }
        );
        // After the refusal a fresh window starts.
        assert_eq!(
            bound.fail(&mut r, NOW + 60_021),
            FailureAnswer::Unauthorized { delay_ms: 0 }
        );
        assert_eq!(r.failures, 1);
    }

    #[test]
    fn failures_older_than_the_window_are_forgotten() {
        let bound = FailureBound::default();
        let mut r = FailureRecord::default();
        for i in 0..15 {
            bound.fail(&mut r, NOW + i);
        }
        assert!(!bound.expired(&r, NOW + 100));
        assert!(bound.expired(&r, NOW + bound.window_ms));
        assert_eq!(
            bound.fail(&mut r, NOW + bound.window_ms),
            FailureAnswer::Unauthorized { delay_ms: 0 }
        );
    }

    proptest! {
        /// However failures arrive, no more than `free + slowed + 1` of them in a row get past
        /// without a refusal, and a delay never exceeds `slowed` steps.
        #[test]
        fn failures_are_bounded(gaps in proptest::collection::vec(0i64..2_000, 1..200)) {
            let bound = FailureBound::default();
            let mut r = FailureRecord::default();
            let mut now = NOW;
            let mut unrefused_in_window = 0u32;
            for gap in gaps {
                now += gap;
                let window_reset = now - r.window_start >= bound.window_ms || r.refused_until.is_some_and(|u| u <= now);
                if window_reset { unrefused_in_window = 0; }
                match bound.fail(&mut r, now) {
                    FailureAnswer::Unauthorized { delay_ms } => {
                        unrefused_in_window += 1;
                        prop_assert!(delay_ms <= u64::from(bound.slowed) * bound.delay_step_ms);
                        prop_assert!(unrefused_in_window <= bound.free + bound.slowed);
                    }
                    FailureAnswer::TooMany { retry_after_s } => {
                        prop_assert!((1..=60).contains(&retry_after_s));
                    }
                }
            }
        }
    }
}
