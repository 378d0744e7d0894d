//! The spec's check table: every check a verification plan can hold, with its id, kind and timeout.
//!
//! Plans, Evidence records, the gate and the API all name checks; keeping the table in one place
//! means a check id read back from the database is either one of these or refused, and a timeout is
//! never restated somewhere else.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// The id a policy may list for "the project's tests": the plan runs it as `unit`.
pub const TARGETED: &str = "targeted";

/// Every Evidence summary ends with this: all checks run in the Sandbox.
pub const RUNNER_SUFFIX: &str = "(runner: sandbox)";

/// A command's end in the words a person reads in an Evidence summary: `exit 1`, or the signal
/// that killed it by name (a shell reports a command killed by signal N as 128 + N):
/// `killed by SIGKILL (exit 137)`. `None` (no status was reported) reads `no exit status`.
pub fn exit_words(exit_code: Option<i64>) -> String {
    const SIGNALS: [(i64, &str); 15] = [
        (1, "SIGHUP"),
        (2, "SIGINT"),
        (3, "SIGQUIT"),
        (4, "SIGILL"),
        (5, "SIGTRAP"),
        (6, "SIGABRT"),
        (7, "SIGBUS"),
        (8, "SIGFPE"),
        (9, "SIGKILL"),
        (10, "SIGUSR1"),
        (11, "SIGSEGV"),
        (12, "SIGUSR2"),
        (13, "SIGPIPE"),
        (14, "SIGALRM"),
        (15, "SIGTERM"),
    ];
    match exit_code {
        None => "no exit status".into(),
        Some(code) if code > 128 => match SIGNALS.iter().find(|(n, _)| *n == code - 128) {
            Some((_, name)) => format!("killed by {name} (exit {code})"),
            None => format!("exit {code}"),
        },
        Some(code) => format!("exit {code}"),
    }
}

/// A check of a verification plan. Serialized as the spec's id string (`build`,
/// `protected-invariant-2-email-delivery`, …). The variant order is the order a plan lists them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CheckId {
    /// Not a planned check: the record a Candidate rejected by `checkCompatibility` or by a merge
    /// conflict gets, naming the reason (the files in conflict).
    Composition,
    Build,
    ClientAssets,
    Unit,
    Contract,
    /// A procedure for the `n`th protected invariant (1-based) that no test can prove.
    ProtectedInvariant {
        n: u32,
        slug: String,
    },
    Performance,
    Security,
    Browser,
    Acceptance,
    PreviewSmoke,
}

/// The kind column of the check table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CheckKind {
    Composition,
    Build,
    Unit,
    Contract,
    #[serde(rename = "protected-invariant")]
    ProtectedInvariant,
    Performance,
    Security,
    Browser,
    Acceptance,
    Smoke,
}

const PROTECTED_PREFIX: &str = "protected-invariant-";

impl CheckId {
    pub fn kind(&self) -> CheckKind {
        match self {
            CheckId::Composition => CheckKind::Composition,
            CheckId::Build | CheckId::ClientAssets => CheckKind::Build,
            CheckId::Unit => CheckKind::Unit,
            CheckId::Contract => CheckKind::Contract,
            CheckId::ProtectedInvariant { .. } => CheckKind::ProtectedInvariant,
            CheckId::Performance => CheckKind::Performance,
            CheckId::Security => CheckKind::Security,
            CheckId::Browser => CheckKind::Browser,
            CheckId::Acceptance => CheckKind::Acceptance,
            CheckId::PreviewSmoke => CheckKind::Smoke,
        }
    }

    /// The check's timeout in the Sandbox, from the check table. A record that took longer is the
    /// gap `timed_out`.
    pub fn timeout_ms(&self) -> u64 {
        match self {
            CheckId::Build | CheckId::Contract | CheckId::Performance => 120_000,
            CheckId::ClientAssets | CheckId::PreviewSmoke => 30_000,
            CheckId::Composition => 600_000,
            CheckId::Unit
            | CheckId::ProtectedInvariant { .. }
            | CheckId::Security
            | CheckId::Browser
            | CheckId::Acceptance => 180_000,
        }
    }

    fn fixed_name(&self) -> Option<&'static str> {
        Some(match self {
            CheckId::Composition => "composition",
            CheckId::Build => "build",
            CheckId::ClientAssets => "client-assets",
            CheckId::Unit => "unit",
            CheckId::Contract => "contract",
            CheckId::ProtectedInvariant { .. } => return None,
            CheckId::Performance => "performance",
            CheckId::Security => "security",
            CheckId::Browser => "browser",
            CheckId::Acceptance => "acceptance",
            CheckId::PreviewSmoke => "preview-smoke",
        })
    }

    const FIXED: [CheckId; 10] = [
        CheckId::Composition,
        CheckId::Build,
        CheckId::ClientAssets,
        CheckId::Unit,
        CheckId::Contract,
        CheckId::Performance,
        CheckId::Security,
        CheckId::Browser,
        CheckId::Acceptance,
        CheckId::PreviewSmoke,
    ];
}

impl fmt::Display for CheckId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckId::ProtectedInvariant { n, slug } => write!(f, "{PROTECTED_PREFIX}{n}-{slug}"),
            other => f.write_str(other.fixed_name().unwrap_or_default()),
        }
    }
}

/// A string that is not a check id of the table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a check id (composition, build, client-assets, unit, contract, protected-invariant-<n>-<slug>, performance, security, browser, acceptance, preview-smoke)"
)]
pub struct UnknownCheck(pub String);

impl FromStr for CheckId {
    type Err = UnknownCheck;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(c) = CheckId::FIXED.iter().find(|c| c.fixed_name() == Some(s)) {
            return Ok(c.clone());
        }
        let rest = s
            .strip_prefix(PROTECTED_PREFIX)
            .ok_or_else(|| UnknownCheck(s.to_owned()))?;
        let (n, slug) = rest.split_once('-').ok_or_else(|| UnknownCheck(s.to_owned()))?;
        let valid_n = !n.is_empty() && n.len() <= 4 && n.bytes().all(|b| b.is_ascii_digit()) && !n.starts_with('0');
        let valid_slug = !slug.is_empty()
            && !slug.starts_with('-')
            && !slug.ends_with('-')
            && slug
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        match (valid_n, valid_slug, n.parse::<u32>()) {
            (true, true, Ok(n)) => Ok(CheckId::ProtectedInvariant {
                n,
                slug: slug.to_owned(),
            }),
            _ => Err(UnknownCheck(s.to_owned())),
        }
    }
}

impl Serialize for CheckId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CheckId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for CheckId {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .description(Some(
                "A check id: build, client-assets, unit, contract, protected-invariant-<n>-<slug>, performance, \
                 security, browser, acceptance or preview-smoke",
            ))
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for CheckId {}

/// `text` as an Evidence summary: it ends with the runner, `(runner: sandbox)`.
pub fn evidence_summary(text: &str) -> String {
    let text = text.trim_end();
    if text.ends_with(RUNNER_SUFFIX) {
        text.to_owned()
    } else if text.is_empty() {
        RUNNER_SUFFIX.to_owned()
    } else {
        format!("{text} {RUNNER_SUFFIX}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exit_reads_as_a_person_says_it() {
        assert_eq!(exit_words(Some(1)), "exit 1");
        assert_eq!(exit_words(Some(0)), "exit 0");
        assert_eq!(exit_words(Some(137)), "killed by SIGKILL (exit 137)");
        assert_eq!(exit_words(Some(143)), "killed by SIGTERM (exit 143)");
        assert_eq!(exit_words(Some(139)), "killed by SIGSEGV (exit 139)");
        assert_eq!(exit_words(Some(200)), "exit 200");
        assert_eq!(exit_words(None), "no exit status");
        assert!(!exit_words(Some(1)).contains("Some"));
    }
    use proptest::prelude::*;

    #[test]
    fn the_timeouts_are_the_check_tables() {
        let table = [
            ("build", CheckKind::Build, 120),
            ("client-assets", CheckKind::Build, 30),
            ("unit", CheckKind::Unit, 180),
            ("contract", CheckKind::Contract, 120),
            (
                "protected-invariant-1-email-delivery",
                CheckKind::ProtectedInvariant,
                180,
            ),
            ("performance", CheckKind::Performance, 120),
            ("security", CheckKind::Security, 180),
            ("browser", CheckKind::Browser, 180),
            ("acceptance", CheckKind::Acceptance, 180),
            ("preview-smoke", CheckKind::Smoke, 30),
        ];
        for (id, kind, secs) in table {
            let check: CheckId = id.parse().unwrap();
            assert_eq!((check.kind(), check.timeout_ms()), (kind, secs * 1000), "{id}");
            assert_eq!(check.to_string(), id);
        }
    }

    #[test]
    fn a_check_id_serializes_as_the_spec_string_and_kinds_as_their_names() {
        let id = CheckId::ProtectedInvariant {
            n: 2,
            slug: "uptime".into(),
        };
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"protected-invariant-2-uptime\"");
        assert_eq!(
            serde_json::from_str::<CheckId>("\"preview-smoke\"").unwrap(),
            CheckId::PreviewSmoke
        );
        assert_eq!(
            serde_json::to_string(&CheckKind::ProtectedInvariant).unwrap(),
            "\"protected-invariant\""
        );
        assert!(serde_json::from_str::<CheckId>("\"targeted\"").is_err());
    }

    #[test]
    fn a_malformed_procedure_id_is_not_a_check() {
        for s in [
            "protected-invariant-",
            "protected-invariant-1",
            "protected-invariant-1-",
            "protected-invariant-x-uptime",
            "protected-invariant-01-uptime",
            "protected-invariant-1-Up",
            "Build",
        ] {
            assert!(s.parse::<CheckId>().is_err(), "{s}");
        }
    }

    #[test]
    fn a_summary_ends_with_the_sandbox_runner_once() {
        assert_eq!(evidence_summary("bun test passed"), "bun test passed (runner: sandbox)");
        assert_eq!(evidence_summary("done (runner: sandbox)"), "done (runner: sandbox)");
        assert_eq!(evidence_summary(""), "(runner: sandbox)");
    }

    proptest! {
        #[test]
        fn every_check_id_reads_back_as_itself(n in 1u32..10_000, slug in "[a-z0-9]{1,8}(-[a-z0-9]{1,8}){0,4}") {
            let id = CheckId::ProtectedInvariant { n, slug };
            prop_assert_eq!(id.to_string().parse::<CheckId>().unwrap(), id);
        }

        #[test]
        fn parsing_any_string_never_panics(s in ".{0,64}") {
            let _ = s.parse::<CheckId>();
        }
    }
}
