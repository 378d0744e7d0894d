//! Artifact URLs: short-lived signed grants to read one run's artifacts, and nothing else.
//!
//! A reviewer plays a run's build in the console. The build is code an agent wrote, so it is
//! served from an origin of its own (the artifact listener), which holds no account token: the
//! browser proves it may read the run with a token in the URL path instead. A token is an
//! HMAC-SHA256 signature over (run, expiry), as repository tokens are (`repo_token`), so the
//! listener checks it with the server secret alone, no database row per token. It names no
//! account and is not revocable: it is short-lived instead, and grants only reading.
//!
//! URL form: `/r/{run}/{token}/{path…}`, token `v1.<expiry unix secs>.<64 hex mac>`. Every part is
//! URL-safe and free of `/`, so relative links in a build (`js/game.js` from `index.html`)
//! resolve under the same token.

use crate::ids::RunId;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use thiserror::Error;

/// Seconds an artifact URL lives unless the server is configured otherwise: long enough to play
/// a build through, short enough that a copied URL soon stops working.
pub const DEFAULT_TTL_SECS: i64 = 900;
/// The longest lifetime a server may be configured with (a day).
pub const MAX_TTL_SECS: i64 = 86_400;

const VERSION: &str = "v1";
/// Separates these MACs from every other MAC belay makes, so a secret shared with another
/// token kind can never make one pass for the other.
const MAC_DOMAIN: &[u8] = b"belay artifact url v1";

type HmacSha256 = Hmac<Sha256>;

/// A verified artifact URL token: this run's artifacts may be read until `expires_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactGrant {
    pub run: RunId,
    pub expires_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ArtifactUrlError {
    #[error("an artifact URL lifetime must be 1 to {MAX_TTL_SECS} s, got {0} s")]
    InvalidTtl(i64),
    #[error("`{0}` is not a run id")]
    InvalidRun(String),
    #[error("the artifact URL's token is malformed")]
    Malformed,
    #[error("the artifact URL's signature does not match")]
    Forged,
    #[error("the artifact URL expired; open the run again for a fresh one")]
    Expired,
}

/// Issues the token granting reading `run`'s artifacts from `now_secs` for `ttl_secs`.
pub fn issue(secret: &[u8], run: &RunId, now_secs: i64, ttl_secs: i64) -> Result<String, ArtifactUrlError> {
    if !(1..=MAX_TTL_SECS).contains(&ttl_secs) {
        return Err(ArtifactUrlError::InvalidTtl(ttl_secs));
    }
    if !RunId::is_valid(run.as_str()) {
        return Err(ArtifactUrlError::InvalidRun(run.to_string()));
    }
    let expires_at = now_secs.saturating_add(ttl_secs);
    let mac = hex::encode(signer(secret, run.as_str(), expires_at).finalize().into_bytes());
    Ok(format!("{VERSION}.{expires_at}.{mac}"))
}

/// Checks `token`, presented in a URL for `run`'s artifacts, at `now_secs`: its format, its
/// signature over this run (a token for another run does not verify), then its expiry.
pub fn verify(secret: &[u8], token: &str, run: &str, now_secs: i64) -> Result<ArtifactGrant, ArtifactUrlError> {
    let parts: Vec<&str> = token.split('.').collect();
    let [VERSION, expiry, mac] = parts[..] else {
        return Err(ArtifactUrlError::Malformed);
    };
    // Only the canonical spelling is accepted (digits without leading zeros, lowercase hex), so
    // one grant has exactly one token.
    let canonical_expiry =
        !expiry.is_empty() && expiry.bytes().all(|b| b.is_ascii_digit()) && (expiry == "0" || !expiry.starts_with('0'));
    let canonical_mac = mac.len() == 64 && mac.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !RunId::is_valid(run) || !canonical_expiry || !canonical_mac {
        return Err(ArtifactUrlError::Malformed);
    }
    let expires_at: i64 = expiry.parse().map_err(|_| ArtifactUrlError::Malformed)?;
    let mac = hex::decode(mac).map_err(|_| ArtifactUrlError::Malformed)?;
    // `verify_slice` compares in constant time.
    signer(secret, run, expires_at)
        .verify_slice(&mac)
        .map_err(|_| ArtifactUrlError::Forged)?;
    if now_secs >= expires_at {
        return Err(ArtifactUrlError::Expired);
    }
    Ok(ArtifactGrant {
        run: RunId(run.to_owned()),
        expires_at,
    })
}

fn signer(secret: &[u8], run: &str, expires_at: i64) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes a key of any length");
    // Newline-separated fields: none of them can contain a newline, so the encoding is unambiguous.
    for field in [MAC_DOMAIN, run.as_bytes(), expires_at.to_string().as_bytes()] {
        mac.update(field);
        mac.update(b"\n");
    }
    mac
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SECRET: &[u8] = b"test secret, not for production";
    const NOW: i64 = 1_700_000_000;

    fn run(s: &str) -> RunId {
        RunId(s.to_owned())
    }

    #[test]
    fn a_fresh_token_grants_its_run_until_it_expires() {
        let t = issue(SECRET, &run("run_0a1b"), NOW, 900).unwrap();
        assert_eq!(
            verify(SECRET, &t, "run_0a1b", NOW + 899),
            Ok(ArtifactGrant {
                run: run("run_0a1b"),
                expires_at: NOW + 900
            })
        );
        assert_eq!(
            verify(SECRET, &t, "run_0a1b", NOW + 900),
            Err(ArtifactUrlError::Expired)
        );
    }

    #[test]
    fn a_token_for_one_run_opens_no_other() {
        let t = issue(SECRET, &run("run_0a1b"), NOW, 900).unwrap();
        assert_eq!(verify(SECRET, &t, "run_0a1c", NOW), Err(ArtifactUrlError::Forged));
    }

    #[test]
    fn a_token_with_a_later_expiry_written_in_is_forged() {
        let t = issue(SECRET, &run("run_0a1b"), NOW, 900).unwrap();
        let later = t.replacen(&(NOW + 900).to_string(), &(NOW + 90_000).to_string(), 1);
        assert_eq!(
            verify(SECRET, &later, "run_0a1b", NOW + 1000),
            Err(ArtifactUrlError::Forged)
        );
    }

    #[test]
    fn a_token_signed_with_another_secret_is_forged() {
        let t = issue(b"another secret", &run("run_0a1b"), NOW, 900).unwrap();
        assert_eq!(verify(SECRET, &t, "run_0a1b", NOW), Err(ArtifactUrlError::Forged));
    }

    #[test]
    fn garbage_is_malformed_not_a_panic() {
        for t in [
            "",
            "v1",
            "v1..00",
            "v2.1.00",
            "v1.-5.00",
            "v1.+5.00",
            "v1.1.zz",
            "v1.99999999999999999999999.00",
            "v1.1.00.00",
            "v1.01.0000000000000000000000000000000000000000000000000000000000000000",
        ] {
            assert_eq!(
                verify(SECRET, t, "run_0a1b", NOW),
                Err(ArtifactUrlError::Malformed),
                "{t}"
            );
        }
        let t = issue(SECRET, &run("run_0a1b"), NOW, 900).unwrap();
        assert_eq!(verify(SECRET, &t, "../etc", NOW), Err(ArtifactUrlError::Malformed));
        // The same MAC in capitals is another spelling of the token: refused.
        assert_eq!(
            verify(SECRET, &t.to_ascii_uppercase().replacen("V1", "v1", 1), "run_0a1b", NOW),
            Err(ArtifactUrlError::Malformed)
        );
    }

    #[test]
    fn a_lifetime_out_of_bounds_or_a_bad_run_is_not_issued() {
        assert_eq!(
            issue(SECRET, &run("run_1"), NOW, 0),
            Err(ArtifactUrlError::InvalidTtl(0))
        );
        assert_eq!(
            issue(SECRET, &run("run_1"), NOW, MAX_TTL_SECS + 1),
            Err(ArtifactUrlError::InvalidTtl(MAX_TTL_SECS + 1))
        );
        assert_eq!(
            issue(SECRET, &run("job_1"), NOW, 900),
            Err(ArtifactUrlError::InvalidRun("job_1".into()))
        );
    }

    #[test]
    fn a_token_is_url_safe_and_free_of_slashes() {
        let t = issue(SECRET, &run("run_0a1b"), NOW, 900).unwrap();
        assert!(t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.'), "{t}");
    }

    fn run_id() -> impl Strategy<Value = String> {
        "[a-z0-9]{1,20}".prop_map(|s| format!("run_{s}"))
    }

    proptest! {
        #[test]
        fn a_token_verifies_for_its_run_exactly_while_it_lives(
            r in run_id(), now in 0i64..4_000_000_000, ttl in 1i64..=MAX_TTL_SECS, at in 0i64..=MAX_TTL_SECS * 2
        ) {
            let t = issue(SECRET, &run(&r), now, ttl).unwrap();
            let got = verify(SECRET, &t, &r, now + at);
            if at < ttl {
                prop_assert_eq!(got, Ok(ArtifactGrant { run: run(&r), expires_at: now + ttl }));
            } else {
                prop_assert_eq!(got, Err(ArtifactUrlError::Expired));
            }
        }

        #[test]
        fn an_expired_token_is_refused(r in run_id(), now in 0i64..4_000_000_000, ttl in 1i64..=MAX_TTL_SECS, late in 0i64..1_000_000) {
            let t = issue(SECRET, &run(&r), now, ttl).unwrap();
            prop_assert_eq!(verify(SECRET, &t, &r, now + ttl + late), Err(ArtifactUrlError::Expired));
        }

        #[test]
        fn a_token_for_another_run_is_refused(a in run_id(), b in run_id(), now in 0i64..4_000_000_000) {
            prop_assume!(a != b);
            let t = issue(SECRET, &run(&a), now, 900).unwrap();
            prop_assert_eq!(verify(SECRET, &t, &b, now), Err(ArtifactUrlError::Forged));
        }

        #[test]
        fn a_tampered_token_is_refused(r in run_id(), now in 0i64..4_000_000_000, at in 0usize..200, with in any::<u8>()) {
            let t = issue(SECRET, &run(&r), now, 900).unwrap();
            let mut bytes = t.clone().into_bytes();
            let i = at % bytes.len();
            prop_assume!(bytes[i] != with);
            bytes[i] = with;
            let tampered = String::from_utf8_lossy(&bytes).into_owned();
            prop_assume!(tampered != t);
            let got = verify(SECRET, &tampered, &r, now);
            prop_assert!(
                matches!(got, Err(ArtifactUrlError::Forged | ArtifactUrlError::Malformed)),
                "{} -> {:?}", tampered, got
            );
        }
    }
}
