//! Failed authentication, bounded per client address (`belay_domain::api_token::FailureBound`):
//! an address that keeps presenting tokens that fail is answered more slowly, then refused with
//! 429 and `Retry-After` for a while. Only failures are counted and only failures are slowed or
//! refused: a valid token is checked first and answered at once, so nobody's failures slow it.
//! The figures are this process's, added to its `/metrics`.

use belay_domain::api_token::{FailureAnswer, FailureBound, FailureRecord};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The most addresses remembered at once; past it, records whose window passed are dropped and,
/// if that is not enough, the oldest window goes, so a flood of addresses cannot grow memory
/// without bound.
const MAX_ADDRESSES: usize = 100_000;

/// Authentication settings and failure records of one API process.
#[derive(Clone)]
pub struct AuthGuard {
    inner: Arc<Inner>,
}

struct Inner {
    bound: FailureBound,
    /// Whether a token's last use is written (at most once a minute per token).
    track_last_used: bool,
    records: Mutex<HashMap<IpAddr, FailureRecord>>,
    failures: [AtomicU64; 5],
    slowed: AtomicU64,
    refused: AtomicU64,
}

/// Why a presented token failed, as `/metrics` labels it.
const REASONS: [&str; 5] = [
    "unknown",
    "token_revoked",
    "token_expired",
    "account_disabled",
    "malformed",
];

impl Default for AuthGuard {
    fn default() -> Self {
        Self::new(FailureBound::default(), true)
    }
}

impl AuthGuard {
    pub fn new(bound: FailureBound, track_last_used: bool) -> Self {
        AuthGuard {
            inner: Arc::new(Inner {
                bound,
                track_last_used,
                records: Mutex::new(HashMap::new()),
                failures: Default::default(),
                slowed: AtomicU64::new(0),
                refused: AtomicU64::new(0),
            }),
        }
    }

    /// The same bound, last use tracked or not (the auth bench compares the two).
    pub fn with_last_used_tracking(&self, track: bool) -> Self {
        Self::new(self.inner.bound, track)
    }

    pub fn track_last_used(&self) -> bool {
        self.inner.track_last_used
    }

    /// Records a failure of `reason` from `address` at `now` and says how to answer it.
    pub fn fail(&self, address: IpAddr, reason: &str, now: i64) -> FailureAnswer {
        let i = REASONS.iter().position(|r| *r == reason).unwrap_or(0);
        self.inner.failures[i].fetch_add(1, Ordering::Relaxed);
        let answer = {
            let mut records = self.inner.records.lock().unwrap_or_else(|p| p.into_inner());
            if records.len() >= MAX_ADDRESSES && !records.contains_key(&address) {
                let bound = self.inner.bound;
                records.retain(|_, r| !bound.expired(r, now));
                if records.len() >= MAX_ADDRESSES
                    && let Some(oldest) = records.iter().min_by_key(|(_, r)| r.window_start).map(|(a, _)| *a)
                {
                    records.remove(&oldest);
                }
            }
            let record = records.entry(address).or_insert(FailureRecord {
                failures: 0,
                window_start: now,
                refused_until: None,
            });
            self.inner.bound.fail(record, now)
        };
        match answer {
            FailureAnswer::Unauthorized { delay_ms } if delay_ms > 0 => {
                self.inner.slowed.fetch_add(1, Ordering::Relaxed);
            }
            FailureAnswer::TooMany { .. } => {
                self.inner.refused.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
        answer
    }

    /// This process's figures in the text exposition format.
    pub fn exposition(&self) -> String {
        let mut out = String::new();
        out.push_str(
            "# HELP belay_auth_failures_total Requests whose bearer token failed, by why (this API process)\n",
        );
        out.push_str("# TYPE belay_auth_failures_total counter\n");
        for (reason, n) in REASONS.iter().zip(&self.inner.failures) {
            out.push_str(&format!(
                "belay_auth_failures_total{{reason=\"{reason}\"}} {}\n",
                n.load(Ordering::Relaxed)
            ));
        }
        out.push_str("# HELP belay_auth_failures_slowed_total Failed authentications answered after a delay (this API process)\n");
        out.push_str("# TYPE belay_auth_failures_slowed_total counter\n");
        out.push_str(&format!(
            "belay_auth_failures_slowed_total {}\n",
            self.inner.slowed.load(Ordering::Relaxed)
        ));
        out.push_str(
            "# HELP belay_auth_failures_refused_total Failed authentications refused with 429 (this API process)\n",
        );
        out.push_str("# TYPE belay_auth_failures_refused_total counter\n");
        out.push_str(&format!(
            "belay_auth_failures_refused_total {}\n",
            self.inner.refused.load(Ordering::Relaxed)
        ));
        out
    }
}
