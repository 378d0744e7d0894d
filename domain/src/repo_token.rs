//! Repository tokens: short-lived, single-repository credentials for git over smart HTTP.
//!
//! A token is an HMAC-SHA256 signature over (token id, repository, scope, expiry), so checking one
//! needs only the server secret and the revocation list, not a database row per token. Sandboxes
//! get one per clone or push; the code revokes a token after use.
//!
//! Format: `rt_<32 hex>.<repository>.<read|write>.<expiry unix secs>.<64 hex mac>`. Every part is
//! URL-safe and none contains a `.` (repository names never do), so the token fits in the password
//! of `http://agent:TOKEN@host/...`.

use crate::repo::{RepoKind, is_valid_repo_name, repo_kind};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;
use thiserror::Error;

/// Seconds a repository token lives.
pub const TOKEN_TTL_SECS: i64 = 600;

const TOKEN_ID_PREFIX: &str = "rt_";
const MAC_DOMAIN: &[u8] = b"belay repository token v1";

type HmacSha256 = Hmac<Sha256>;

/// What a token allows. A write token also reads: a push starts with a ref advertisement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    Read,
    Write,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "read" => Some(Scope::Read),
            "write" => Some(Scope::Write),
            _ => None,
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A verified token: who may do what, where, until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub token_id: String,
    pub repo: String,
    pub scope: Scope,
    pub expires_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TokenError {
    #[error("`{0}` is not a repository name")]
    InvalidRepo(String),
    #[error("a token lifetime must be positive, got {0} s")]
    InvalidTtl(i64),
    #[error("the repository token is malformed")]
    Malformed,
    #[error("the repository token's signature does not match")]
    Forged,
    #[error("the repository token expired")]
    Expired,
    #[error("the repository token was revoked")]
    Revoked,
    #[error("the repository token is for another repository")]
    OtherRepository,
    #[error("the canonical repository is read-only over HTTP: it moves only by promotion")]
    CanonicalReadOnly,
    #[error("the repository token only grants {granted} access, this needs {required}")]
    InsufficientScope { granted: Scope, required: Scope },
}

impl TokenError {
    /// Whether presenting a different token could help (401) rather than the caller being known
    /// and simply not allowed (403).
    pub fn is_unauthenticated(&self) -> bool {
        matches!(
            self,
            TokenError::Malformed | TokenError::Forged | TokenError::Expired | TokenError::Revoked
        )
    }
}

/// The id of a new token from a random body the caller draws (this crate draws no randomness):
/// `rt_<body>`, the body 32 lowercase hex digits.
pub fn new_token_id(body: &str) -> String {
    format!("{TOKEN_ID_PREFIX}{body}")
}

/// Issues the token `token_id` (from [`new_token_id`]) for `repo` with `scope`, valid from
/// `now_secs` for `ttl_secs` ([`TOKEN_TTL_SECS`] unless the caller has a reason). A write token
/// for a canonical repository is never issued: canonical moves only by promotion.
pub fn issue(
    secret: &[u8],
    token_id: &str,
    repo: &str,
    scope: Scope,
    now_secs: i64,
    ttl_secs: i64,
) -> Result<String, TokenError> {
    if !is_valid_repo_name(repo) {
        return Err(TokenError::InvalidRepo(repo.to_owned()));
    }
    if ttl_secs <= 0 {
        return Err(TokenError::InvalidTtl(ttl_secs));
    }
    if !is_token_id(token_id) {
        return Err(TokenError::Malformed);
    }
    if scope == Scope::Write && repo_kind(repo) == Some(RepoKind::Canonical) {
        return Err(TokenError::CanonicalReadOnly);
    }
    let expires_at = now_secs.saturating_add(ttl_secs);
    let mac = hex::encode(
        signer(secret, token_id, repo, scope, expires_at)
            .finalize()
            .into_bytes(),
    );
    Ok(format!("{token_id}.{repo}.{scope}.{expires_at}.{mac}"))
}

/// Whether `s` is a token id: `rt_` and 32 lowercase hex digits (128 random bits, the form every
/// issuer draws).
pub fn is_token_id(s: &str) -> bool {
    s.strip_prefix(TOKEN_ID_PREFIX)
        .is_some_and(|hex| hex.len() == 32 && hex.chars().all(|c| c.is_ascii_digit() || matches!(c, 'a'..='f')))
}

/// A token whose format and signature hold: it was issued by this server, as it reads. Whether it
/// still grants anything is [`Authentic::authorize`]'s question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authentic(Grant);

impl Authentic {
    /// The id under which a revocation of this token would be recorded.
    pub fn token_id(&self) -> &str {
        &self.0.token_id
    }

    /// Checks, in this order, that the token has not expired at `now_secs`, was not revoked, and
    /// covers the operation: this repository, the `required` access, and no write to a canonical
    /// repository (canonical is read-only over HTTP whatever a token says).
    pub fn authorize(self, repo: &str, required: Scope, now_secs: i64, revoked: bool) -> Result<Grant, TokenError> {
        let grant = self.0;
        if now_secs >= grant.expires_at {
            return Err(TokenError::Expired);
        }
        if revoked {
            return Err(TokenError::Revoked);
        }
        if grant.repo != repo {
            return Err(TokenError::OtherRepository);
        }
        if required == Scope::Write && repo_kind(repo) == Some(RepoKind::Canonical) {
            return Err(TokenError::CanonicalReadOnly);
        }
        if grant.scope < required {
            return Err(TokenError::InsufficientScope {
                granted: grant.scope,
                required,
            });
        }
        Ok(grant)
    }
}

/// Checks a presented token's format, then its signature. A caller then looks up whether its id
/// was revoked and calls [`Authentic::authorize`]: the one verification every route uses, as
/// [`verify`] does in one call where revocations are at hand.
pub fn authenticate(secret: &[u8], token: &str) -> Result<Authentic, TokenError> {
    let parts: Vec<&str> = token.split('.').collect();
    let [token_id, token_repo, scope, expiry, mac] = parts[..] else {
        return Err(TokenError::Malformed);
    };
    let scope = Scope::parse(scope).ok_or(TokenError::Malformed)?;
    let expires_at: i64 = expiry.parse().map_err(|_| TokenError::Malformed)?;
    if !is_token_id(token_id) || !is_valid_repo_name(token_repo) {
        return Err(TokenError::Malformed);
    }
    let mac = hex::decode(mac).map_err(|_| TokenError::Malformed)?;
    // `verify_slice` compares in constant time.
    signer(secret, token_id, token_repo, scope, expires_at)
        .verify_slice(&mac)
        .map_err(|_| TokenError::Forged)?;
    Ok(Authentic(Grant {
        token_id: token_id.to_owned(),
        repo: token_repo.to_owned(),
        scope,
        expires_at,
    }))
}

/// Checks `token` for an operation needing `required` on `repo` at `now_secs`: format, signature,
/// expiry, revocation, then scope (see [`authenticate`] and [`Authentic::authorize`]).
pub fn verify(
    secret: &[u8],
    token: &str,
    repo: &str,
    required: Scope,
    now_secs: i64,
    is_revoked: impl Fn(&str) -> bool,
) -> Result<Grant, TokenError> {
    let authentic = authenticate(secret, token)?;
    let revoked = is_revoked(authentic.token_id());
    authentic.authorize(repo, required, now_secs, revoked)
}

fn signer(secret: &[u8], token_id: &str, repo: &str, scope: Scope, expires_at: i64) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes a key of any length");
    // Newline-separated fields: none of them can contain a newline, so the encoding is unambiguous.
    for field in [
        MAC_DOMAIN,
        token_id.as_bytes(),
        repo.as_bytes(),
        scope.as_str().as_bytes(),
        expires_at.to_string().as_bytes(),
    ] {
        mac.update(field);
        mac.update(b"\n");
    }
    mac
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"test secret, not for production";
    const NOW: i64 = 1_700_000_000;
    const REPO: &str = "ws-0a1b";

    fn never_revoked(_: &str) -> bool {
        false
    }

    fn token(scope: Scope) -> (String, String) {
        let id = new_token_id("000000000000000000000000000a1b2c");
        let t = issue(SECRET, &id, REPO, scope, NOW, TOKEN_TTL_SECS).unwrap();
        (id, t)
    }

    #[test]
    fn a_fresh_token_grants_its_repository_and_scope() {
        let (id, t) = token(Scope::Write);
        let grant = verify(SECRET, &t, REPO, Scope::Write, NOW, never_revoked).unwrap();
        assert_eq!(
            grant,
            Grant {
                token_id: id,
                repo: REPO.into(),
                scope: Scope::Write,
                expires_at: NOW + 600
            }
        );
        assert!(
            verify(SECRET, &t, REPO, Scope::Read, NOW + 599, never_revoked).is_ok(),
            "write implies read"
        );
    }

    #[test]
    fn an_expired_token_is_refused() {
        let (_, t) = token(Scope::Read);
        assert_eq!(
            verify(SECRET, &t, REPO, Scope::Read, NOW + 600, never_revoked),
            Err(TokenError::Expired)
        );
    }

    #[test]
    fn a_token_signed_with_another_secret_is_forged() {
        let t = issue(
            b"another secret",
            &new_token_id("00000000000000000000000000000001"),
            REPO,
            Scope::Read,
            NOW,
            600,
        )
        .unwrap();
        assert_eq!(
            verify(SECRET, &t, REPO, Scope::Read, NOW, never_revoked),
            Err(TokenError::Forged)
        );
    }

    #[test]
    fn a_token_with_an_edited_field_is_forged() {
        let (_, t) = token(Scope::Read);
        let widened = t.replacen(".read.", ".write.", 1);
        assert_eq!(
            verify(SECRET, &widened, REPO, Scope::Write, NOW, never_revoked),
            Err(TokenError::Forged)
        );
        let later = t.replacen(&format!(".{}.", NOW + 600), &format!(".{}.", NOW + 6000), 1);
        assert_eq!(
            verify(SECRET, &later, REPO, Scope::Read, NOW + 700, never_revoked),
            Err(TokenError::Forged)
        );
        let moved = t.replacen(REPO, "ws-0a1c", 1);
        assert_eq!(
            verify(SECRET, &moved, "ws-0a1c", Scope::Read, NOW, never_revoked),
            Err(TokenError::Forged)
        );
    }

    #[test]
    fn a_token_for_another_repository_is_refused() {
        let (_, t) = token(Scope::Write);
        let err = verify(SECRET, &t, "cand-0a1b", Scope::Read, NOW, never_revoked).unwrap_err();
        assert_eq!(err, TokenError::OtherRepository);
        assert!(!err.is_unauthenticated());
    }

    #[test]
    fn a_revoked_token_is_refused() {
        let (id, t) = token(Scope::Read);
        assert_eq!(
            verify(SECRET, &t, REPO, Scope::Read, NOW, |tid| tid == id),
            Err(TokenError::Revoked)
        );
    }

    #[test]
    fn a_read_token_cannot_write() {
        let (_, t) = token(Scope::Read);
        assert_eq!(
            verify(SECRET, &t, REPO, Scope::Write, NOW, never_revoked),
            Err(TokenError::InsufficientScope {
                granted: Scope::Read,
                required: Scope::Write
            })
        );
    }

    #[test]
    fn garbage_is_malformed_not_a_panic() {
        for t in [
            "",
            "rt_1",
            "a.b.c.d.e",
            "rt_1.ws-1.read.notanumber.00",
            "rt_1.ws-1.admin.1.00",
            "rt_1.ws-1.read.1.zz",
            "rt_1..read.1.00",
        ] {
            assert_eq!(
                verify(SECRET, t, REPO, Scope::Read, NOW, never_revoked),
                Err(TokenError::Malformed),
                "{t}"
            );
        }
    }

    #[test]
    fn a_token_is_only_issued_for_a_repository_name() {
        let id = new_token_id("00000000000000000000000000000001");
        assert_eq!(
            issue(SECRET, &id, "../x", Scope::Read, NOW, 600),
            Err(TokenError::InvalidRepo("../x".into()))
        );
        assert_eq!(
            issue(SECRET, &id, REPO, Scope::Read, NOW, 0),
            Err(TokenError::InvalidTtl(0))
        );
        assert_eq!(
            issue(SECRET, "tok_1", REPO, Scope::Read, NOW, 600),
            Err(TokenError::Malformed)
        );
    }

    #[test]
    fn no_write_token_is_issued_for_a_canonical_repository() {
        assert_eq!(
            issue(
                SECRET,
                &new_token_id("00000000000000000000000000000001"),
                "proj_0a1b",
                Scope::Write,
                NOW,
                600
            ),
            Err(TokenError::CanonicalReadOnly)
        );
        assert!(
            issue(
                SECRET,
                &new_token_id("00000000000000000000000000000001"),
                "proj_0a1b",
                Scope::Read,
                NOW,
                600
            )
            .is_ok()
        );
    }

    #[test]
    fn a_write_to_a_canonical_repository_is_refused_even_with_a_write_token() {
        // A write token minted for canonical by anything but `issue` (an old build, a leaked
        // secret) is still refused at verification.
        let id = new_token_id("00000000000000000000000000000001");
        let expires_at = NOW + 600;
        let mac = hex::encode(
            signer(SECRET, &id, "proj_0a1b", Scope::Write, expires_at)
                .finalize()
                .into_bytes(),
        );
        let t = format!("{id}.proj_0a1b.write.{expires_at}.{mac}");
        assert_eq!(
            verify(SECRET, &t, "proj_0a1b", Scope::Write, NOW, never_revoked),
            Err(TokenError::CanonicalReadOnly)
        );
        assert!(verify(SECRET, &t, "proj_0a1b", Scope::Read, NOW, never_revoked).is_ok());
    }

    #[test]
    fn the_checks_run_in_order_format_signature_expiry_revocation_scope() {
        let (id, t) = token(Scope::Read);
        // Expired and revoked and for another repository and too weak: expiry is reported.
        assert_eq!(
            verify(SECRET, &t, "cand-0a1b", Scope::Write, NOW + 600, |_| true),
            Err(TokenError::Expired)
        );
        // Revoked and for another repository and too weak: revocation is reported.
        assert_eq!(
            verify(SECRET, &t, "cand-0a1b", Scope::Write, NOW, |tid| tid == id),
            Err(TokenError::Revoked)
        );
        // Forged and expired: the signature is reported.
        assert_eq!(
            verify(b"other", &t, REPO, Scope::Read, NOW + 600, never_revoked),
            Err(TokenError::Forged)
        );
    }
}
