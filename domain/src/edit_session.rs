//! Code edit sessions (ADR 0029): a person runs any command, as an unprivileged user of the
//! session, in a checkout of the session's fork `edit-<hex>` inside the project's Sandbox.
//!
//! One open session per person per project; one command at a time; 120 s per command, each
//! reserving 480 s on the monthly meter; after every command every process of the session's user
//! is killed. Opening starts no Sandbox: the first command does.

use crate::validation::ValidationError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// Each command gets this long.
pub const COMMAND_TIMEOUT_SECS: u64 = 120;
/// A session with no command for this long is overdue: the daily sweep ends it.
pub const OVERDUE_AFTER_SECS: i64 = 24 * 3600;
/// The first session user's uid; each open session of a project gets its own.
pub const FIRST_UID: u32 = 1000;
/// Session uids stay below this; the uids from here up are agent workspaces' (the Sandbox hands
/// those out itself), so a session never shares a user with a workspace.
pub const UID_LIMIT: u32 = 30_000;
/// In characters, as JSON counts a string's length.
const MAX_COMMAND_CHARS: usize = 16 * 1024;

/// One command of a session, run by `sh -c`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandInput {
    pub command: String,
}

impl CommandInput {
    pub fn validate(&self) -> Result<(), ValidationError> {
        if self.command.trim().is_empty() {
            return Err(ValidationError::new("command", "must not be blank"));
        }
        if self.command.chars().count() > MAX_COMMAND_CHARS || self.command.contains('\0') {
            return Err(ValidationError::new(
                "command",
                "must be at most 16384 characters without NUL",
            ));
        }
        Ok(())
    }
}

/// The lowest session uid no open session of the project holds.
pub fn free_uid(used: &BTreeSet<u32>) -> Option<u32> {
    (FIRST_UID..UID_LIMIT).find(|uid| !used.contains(uid))
}

/// When a session whose last command (or opening) was at `last_use_secs` is overdue.
pub fn due_at(last_use_secs: i64) -> i64 {
    last_use_secs.saturating_add(OVERDUE_AFTER_SECS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_open_session_gets_the_lowest_free_uid() {
        assert_eq!(free_uid(&BTreeSet::new()), Some(1000));
        assert_eq!(free_uid(&[1000, 1001, 1003].into()), Some(1002));
        let all: BTreeSet<u32> = (FIRST_UID..UID_LIMIT).collect();
        assert_eq!(free_uid(&all), None);
    }

    #[test]
    fn a_command_is_non_blank_and_bounded() {
        let c = |s: &str| CommandInput { command: s.into() };
        assert!(c("ls -la").validate().is_ok());
        assert_eq!(c("  ").validate().unwrap_err().field, "command");
        assert_eq!(c(&"x".repeat(17 * 1024)).validate().unwrap_err().field, "command");
        assert_eq!(c("a\0b").validate().unwrap_err().field, "command");
    }

    #[test]
    fn a_session_is_overdue_a_day_after_its_last_use() {
        assert_eq!(due_at(1_000), 1_000 + 86_400);
    }
}
