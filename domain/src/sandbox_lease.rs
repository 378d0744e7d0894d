//! A Sandbox's life as a fact every worker of a deployment shares: its lease (who may use it and
//! whether it is being removed), its last use and the commands running in it. Each worker reads
//! the same record before it starts a Sandbox, starts a command in one, or removes one, so:
//!
//! - a Sandbox is removed only when the record says nothing runs in it and its last use is at least
//!   the idle time ago ([`reapable`]); a worker that never used it cannot decide otherwise;
//! - SANDBOX_MAX counts the leases of the whole deployment, not one process's containers
//!   ([`admit`]);
//! - a command's in-flight mark carries an expiry ([`exec_expiry`]), so a worker that died in the
//!   middle of a command keeps the Sandbox awake only until that command's time is up;
//! - a removal that was started and never finished (its worker died) is taken over after
//!   [`REAP_ABANDONED_MS`].

/// How long a removal may take before another worker takes it over.
pub const REAP_ABANDONED_MS: i64 = 60_000;
/// How long past a command's own timeout its in-flight mark holds: the kill, the drain and the
/// leftover kill that follow a command all fit in it.
pub const EXEC_GRACE_MS: i64 = 60_000;

/// Whether a Sandbox may be used or is on its way out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseState {
    Live,
    /// A worker is removing it; no command may start in it.
    Reaping,
}

impl LeaseState {
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseState::Live => "live",
            LeaseState::Reaping => "reaping",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "live" => Some(LeaseState::Live),
            "reaping" => Some(LeaseState::Reaping),
            _ => None,
        }
    }
}

/// What the shared record says about one Sandbox at `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseFacts {
    pub state: LeaseState,
    /// The end of its last command, or its last ensure (ms since the epoch).
    pub last_use_ms: i64,
    /// When it entered its state.
    pub state_since_ms: i64,
    /// Commands running in it whose in-flight mark has not expired at `now`.
    pub in_flight: u32,
}

/// Whether a worker may remove the Sandbox now: live, nothing running, unused for `idle_ms`; or a
/// removal abandoned for [`REAP_ABANDONED_MS`].
pub fn reapable(facts: &LeaseFacts, now_ms: i64, idle_ms: i64) -> bool {
    match facts.state {
        LeaseState::Live => facts.in_flight == 0 && now_ms.saturating_sub(facts.last_use_ms) >= idle_ms,
        LeaseState::Reaping => now_ms.saturating_sub(facts.state_since_ms) >= REAP_ABANDONED_MS,
    }
}

/// A new Sandbox is admitted while fewer than `max` leases are held in the deployment; otherwise
/// the answer is ContainerUnavailable with the count.
pub fn admit(held: usize, max: usize) -> Result<(), (usize, usize)> {
    if held < max { Ok(()) } else { Err((held, max)) }
}

/// Until when a command started at `start_ms` with `timeout_ms` counts as running.
pub fn exec_expiry(start_ms: i64, timeout_ms: i64) -> i64 {
    start_ms.saturating_add(timeout_ms.max(0)).saturating_add(EXEC_GRACE_MS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const IDLE: i64 = 120_000;

    fn live(last_use_ms: i64, in_flight: u32) -> LeaseFacts {
        LeaseFacts {
            state: LeaseState::Live,
            last_use_ms,
            state_since_ms: 0,
            in_flight,
        }
    }

    #[test]
    fn a_sandbox_is_removed_only_after_two_idle_minutes_with_nothing_running() {
        // The case: a 50 s command started by one worker; another worker's reaper looks
        // at the record two minutes after the Sandbox was last ensured.
        let busy = live(0, 1);
        assert!(!reapable(&busy, 186_000, IDLE), "a running command keeps it");
        assert!(!reapable(&live(0, 0), 119_999, IDLE));
        assert!(reapable(&live(0, 0), 120_000, IDLE));
        // The last use is the end of the last command, not the start of the Sandbox.
        assert!(!reapable(&live(50_000, 0), 120_000, IDLE));
    }

    #[test]
    fn an_abandoned_removal_is_taken_over_after_a_minute() {
        let reaping = LeaseFacts {
            state: LeaseState::Reaping,
            last_use_ms: 0,
            state_since_ms: 1_000,
            in_flight: 0,
        };
        assert!(!reapable(&reaping, 60_999, IDLE));
        assert!(reapable(&reaping, 61_000, IDLE));
    }

    #[test]
    fn a_fifth_sandbox_anywhere_is_refused() {
        for held in 0..4 {
            assert_eq!(admit(held, 4), Ok(()));
        }
        assert_eq!(admit(4, 4), Err((4, 4)));
        assert_eq!(admit(7, 4), Err((7, 4)));
    }

    #[test]
    fn an_in_flight_mark_outlives_its_command_by_the_grace() {
        assert_eq!(exec_expiry(1_000, 120_000), 181_000);
        assert_eq!(exec_expiry(1_000, -5), 61_000);
        assert_eq!(LeaseState::parse("reaping"), Some(LeaseState::Reaping));
        assert_eq!(LeaseState::parse(LeaseState::Live.as_str()), Some(LeaseState::Live));
        assert_eq!(LeaseState::parse("gone"), None);
    }

    proptest! {
        /// Nothing running in it and used more recently than the idle time: never removed, by any
        /// worker at any later time within the idle time.
        #[test]
        fn a_used_sandbox_is_never_reapable_within_its_idle_time(last in 0i64..1_000_000, dt in 0i64..IDLE, running in 1u32..5) {
            prop_assert!(!reapable(&live(last, 0), last + dt, IDLE));
            prop_assert!(!reapable(&live(last, running), last + dt + 10 * IDLE, IDLE));
        }

        #[test]
        fn admission_never_exceeds_the_max(held in 0usize..20, max in 0usize..10) {
            prop_assert_eq!(admit(held, max).is_ok(), held < max);
        }
    }
}
