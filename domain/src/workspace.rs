//! Agent workspaces: the tools an agent calls in its task run's workspace, the commands
//! `run_command` accepts, and what a project's workspace policy may change.
//!
//! The default command list is the spec's: `bun install`, `bun test [paths]`,
//! `bunx tsc --noEmit`, `bun run typecheck|test|bench|contract|build`, `bun run <name>` for a
//! script in the workspace's `package.json`, `git status|diff|log` and `ls`. After
//! `bun run build` or `bun run build:<x>` the files the build wrote are discarded.

use crate::validation::ValidationError;
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// Each tool call, `run_command` included, gets this long.
pub const TOOL_TIMEOUT_SECS: u64 = 180;
/// At most this many workspaces are open in one Change.
pub const MAX_OPEN_PER_CHANGE: i64 = 4;
/// The largest file `write_file` writes and `read_file` returns.
pub const MAX_FILE_BYTES: usize = 1024 * 1024;
/// A command's argv: at most this many words, each at most this long.
const MAX_ARGS: usize = 64;
/// Lengths of text are in characters, as JSON (and the API's schema) counts them.
const MAX_ARG_LEN: usize = 1024;
const MAX_PATH_LEN: usize = 1024;

/// One tool call of an agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(tag = "tool", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToolCall {
    /// The file's contents (UTF-8; at most 1 MiB).
    ReadFile { path: String },
    /// Creates or replaces a file.
    WriteFile { path: String, content: String },
    /// Replaces the one occurrence of `oldText` with `newText`.
    EditFile {
        path: String,
        #[serde(rename = "oldText")]
        old_text: String,
        #[serde(rename = "newText")]
        new_text: String,
    },
    /// Runs an allowlisted command in the workspace.
    RunCommand { argv: Vec<String> },
}

impl ToolCall {
    pub fn name(&self) -> &'static str {
        match self {
            ToolCall::ReadFile { .. } => "read_file",
            ToolCall::WriteFile { .. } => "write_file",
            ToolCall::EditFile { .. } => "edit_file",
            ToolCall::RunCommand { .. } => "run_command",
        }
    }

    /// Whether the call may change the working tree (so a Sandbox loss after it loses work).
    pub fn may_write(&self) -> bool {
        !matches!(self, ToolCall::ReadFile { .. })
    }

    /// Checks everything that can be checked before the workspace is reached: the call's own
    /// shape, then whether the project's policy allows its command. The name of a
    /// `bun run <script>` is checked against `package.json` in the workspace.
    pub fn validate(&self, policy: &WorkspacePolicy) -> Result<Allowed, ToolRefusal> {
        match self {
            ToolCall::ReadFile { path } => {
                check_path("path", path)?;
                Ok(Allowed::default())
            }
            ToolCall::WriteFile { path, content } => {
                check_path("path", path)?;
                check_size("content", content)?;
                Ok(Allowed::default())
            }
            ToolCall::EditFile {
                path,
                old_text,
                new_text,
            } => {
                check_path("path", path)?;
                if old_text.is_empty() {
                    return Err(ValidationError::new("oldText", "must not be empty").into());
                }
                check_size("oldText", old_text)?;
                check_size("newText", new_text)?;
                Ok(Allowed::default())
            }
            ToolCall::RunCommand { argv } => {
                check_argv(argv)?;
                policy.allows(argv).map_err(ToolRefusal::NotAllowed)
            }
        }
    }
}

/// Why a tool call is refused before it runs: a call of the wrong shape, or a well-formed
/// command the project's policy does not allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolRefusal {
    Invalid(ValidationError),
    NotAllowed(ValidationError),
}

impl From<ValidationError> for ToolRefusal {
    fn from(e: ValidationError) -> Self {
        ToolRefusal::Invalid(e)
    }
}

/// A command's argv: 1 to 64 words of at most 1024 characters, without NUL.
pub fn check_argv(argv: &[String]) -> Result<(), ValidationError> {
    if argv.is_empty() {
        return Err(ValidationError::new("argv", "must name a command"));
    }
    if argv.len() > MAX_ARGS || argv.iter().any(|a| a.chars().count() > MAX_ARG_LEN || a.contains('\0')) {
        return Err(ValidationError::new(
            "argv",
            "must have at most 64 words of at most 1024 characters, without NUL",
        ));
    }
    Ok(())
}

fn check_size(field: &str, text: &str) -> Result<(), ValidationError> {
    if text.len() > MAX_FILE_BYTES {
        return Err(ValidationError::new(field, "must be at most 1 MiB"));
    }
    Ok(())
}

/// `edit_file`: replaces the one occurrence of `old_text` in `text` with `new_text`. Refused
/// (naming the field) when `old_text` does not occur exactly once or the result passes 1 MiB.
pub fn apply_edit(path: &str, text: &str, old_text: &str, new_text: &str) -> Result<String, ValidationError> {
    let n = text.matches(old_text).count();
    if n != 1 {
        return Err(ValidationError::new(
            "oldText",
            format!("must occur exactly once in {path}; it occurs {n} times"),
        ));
    }
    let edited = text.replacen(old_text, new_text, 1);
    if edited.len() > MAX_FILE_BYTES {
        return Err(ValidationError::new("newText", "the edited file would pass 1 MiB"));
    }
    Ok(edited)
}

/// `bun run <script>` needs `script` in the workspace's `package.json` (its bytes, if it has one).
pub fn check_package_script(package_json: Option<&[u8]>, script: &str) -> Result<(), ValidationError> {
    let scripts = package_json
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok())
        .and_then(|v| v.get("scripts").cloned());
    if scripts.as_ref().and_then(|s| s.get(script)).is_none() {
        return Err(ValidationError::new(
            "argv",
            format!("`bun run {script}` needs a script {script:?} in the workspace package.json"),
        ));
    }
    Ok(())
}

/// A workspace path: relative, `/`-separated, without `.`/`..`/empty components, not inside
/// `.git`, without control characters.
pub fn check_path(field: &str, path: &str) -> Result<(), ValidationError> {
    if path.is_empty() || path.chars().count() > MAX_PATH_LEN {
        return Err(ValidationError::new(
            field,
            "must be a relative path of 1 to 1024 characters",
        ));
    }
    if path.starts_with('/') {
        return Err(ValidationError::new(field, "must be relative to the workspace"));
    }
    if path.chars().any(|c| c.is_control() || c == '\\') {
        return Err(ValidationError::new(
            field,
            "must not contain control characters or backslashes",
        ));
    }
    for part in path.split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return Err(ValidationError::new(
                field,
                "must not contain empty, `.` or `..` components",
            ));
        }
    }
    if path.split('/').next() == Some(".git") {
        return Err(ValidationError::new(field, "must not be inside .git"));
    }
    Ok(())
}

/// What publishing a workspace records with its ChangeSet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PublishInput {
    /// The commit message.
    pub message: String,
    /// The contract lines the agent declares.
    #[serde(default)]
    pub contract_changes: Vec<String>,
    #[serde(default)]
    pub data_changes: Vec<String>,
}

impl PublishInput {
    pub fn validate(&self) -> Result<(), ValidationError> {
        crate::validation::check_text("message", &self.message, 2000)?;
        if self.message.contains('\0') {
            return Err(ValidationError::new("message", "must not contain NUL"));
        }
        crate::change::check_lines("contractChanges", &self.contract_changes)?;
        crate::change::check_lines("dataChanges", &self.data_changes)
    }
}

/// What an allowed command needs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allowed {
    /// The script `package.json` must define (`bun run <name>`).
    pub script: Option<String>,
    /// The files this command writes are discarded afterwards.
    pub build: bool,
}

/// A project's workspace policy. Every field is optional; absent means the spec's default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkspacePolicy {
    /// The commands `run_command` accepts instead of the default list, each a space-separated
    /// argv; a final `*` accepts any further arguments (`"cargo test *"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commands: Option<Vec<String>>,
    /// Run when the workspace opens. Default: `bun install` when the tree has `package.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<String>,
    /// Commands (also accepted by `run_command`) whose written files are discarded afterwards.
    /// Default: `bun run build` and `bun run build:<x>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<Vec<String>>,
}

const DEFAULT_COMMANDS: &[&str] = &[
    "bun install",
    "bun test *",
    "bunx tsc --noEmit",
    "bun run typecheck",
    "bun run test",
    "bun run bench",
    "bun run contract",
    "bun run build",
    "git status *",
    "git diff *",
    "git log *",
    "ls *",
];

/// `words` matches `pattern` (space-separated; a final `*` matches any further words).
fn matches(pattern: &str, words: &[String]) -> bool {
    let parts: Vec<&str> = pattern.split_whitespace().collect();
    match parts.split_last() {
        Some((&"*", head)) => words.len() >= head.len() && head.iter().zip(words).all(|(p, w)| p == w),
        _ => parts.len() == words.len() && parts.iter().zip(words).all(|(p, w)| p == w),
    }
}

fn check_pattern(field: &str, pattern: &str) -> Result<(), ValidationError> {
    let parts: Vec<&str> = pattern.split_whitespace().collect();
    if parts.is_empty() || parts[0] == "*" {
        return Err(ValidationError::new(field, "must start with a program name"));
    }
    if parts[..parts.len() - 1].contains(&"*") {
        return Err(ValidationError::new(field, "may have `*` only as its last word"));
    }
    if pattern.chars().count() > MAX_ARG_LEN || pattern.chars().any(char::is_control) {
        return Err(ValidationError::new(
            field,
            "must be at most 1024 characters without control characters",
        ));
    }
    Ok(())
}

impl WorkspacePolicy {
    pub fn validate(&self) -> Result<(), ValidationError> {
        if let Some(commands) = &self.commands {
            if commands.len() > 100 {
                return Err(ValidationError::new(
                    "workspacePolicy.commands",
                    "must list at most 100 commands",
                ));
            }
            for (i, c) in commands.iter().enumerate() {
                check_pattern(&format!("workspacePolicy.commands[{i}]"), c)?;
            }
        }
        if let Some(install) = &self.install {
            check_pattern("workspacePolicy.install", install)?;
            if install.split_whitespace().last() == Some("*") {
                return Err(ValidationError::new(
                    "workspacePolicy.install",
                    "must be one exact command",
                ));
            }
        }
        for (i, c) in self.build.iter().flatten().enumerate() {
            check_pattern(&format!("workspacePolicy.build[{i}]"), c)?;
        }
        Ok(())
    }

    /// The install command run when a workspace opens, if any; `has_package_json` says whether
    /// the checked-out tree has `package.json`.
    pub fn install_argv(&self, has_package_json: bool) -> Option<Vec<String>> {
        match &self.install {
            Some(cmd) => Some(cmd.split_whitespace().map(str::to_owned).collect()),
            None if has_package_json => Some(vec!["bun".into(), "install".into()]),
            None => None,
        }
    }

    /// Whether `run_command` accepts `argv`, and what running it needs.
    pub fn allows(&self, argv: &[String]) -> Result<Allowed, ValidationError> {
        check_argv(argv)?;
        let is_build = |argv: &[String]| match &self.build {
            Some(list) => list.iter().any(|p| matches(p, argv)),
            None => {
                argv.len() == 3
                    && argv[0] == "bun"
                    && argv[1] == "run"
                    && (argv[2] == "build" || argv[2].starts_with("build:"))
            }
        };
        let build = is_build(argv);
        match &self.commands {
            Some(list) => {
                if build || list.iter().any(|p| matches(p, argv)) {
                    return Ok(Allowed { script: None, build });
                }
            }
            None => {
                if DEFAULT_COMMANDS.iter().any(|p| matches(p, argv)) {
                    if argv[0] == "git"
                        && argv
                            .iter()
                            .any(|a| a.starts_with("--output") || a.starts_with("--ext-diff"))
                    {
                        return Err(ValidationError::new(
                            "argv",
                            "git may not write files or run external diff tools",
                        ));
                    }
                    return Ok(Allowed { script: None, build });
                }
                // `bun run <name>` for a script in package.json.
                if argv.len() == 3 && argv[0] == "bun" && argv[1] == "run" && is_script_name(&argv[2]) {
                    return Ok(Allowed {
                        script: Some(argv[2].clone()),
                        build,
                    });
                }
            }
        }
        Err(ValidationError::new(
            "argv",
            "is not on the workspace's command allowlist",
        ))
    }
}

fn is_script_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 200
        && !s.starts_with('-')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_:.@/".contains(c))
}

/// How the admission of a run's workspace goes, from what the store found under one lock: the
/// run's workspace admitted before (an activity retried), and how many of its Change's are open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmissionStep {
    /// Admitted before, with its reservation (or no longer open): answered as it is.
    AsBefore,
    /// Admitted before admission and reservation were one step: reserve its seconds now.
    ReserveNow,
    /// A new workspace: reserve its seconds and open it.
    Open,
    /// The Change has [`MAX_OPEN_PER_CHANGE`] open workspaces already.
    Refused { open: i64 },
}

/// A run whose workspace was admitted before (an activity retried) is admitted again without
/// counting: as it is, or, when it is open without a reservation (admitted before admission and
/// reservation were one step), with its seconds reserved now.
pub fn readmission(open: bool, reserved: bool) -> AdmissionStep {
    if open && !reserved {
        AdmissionStep::ReserveNow
    } else {
        AdmissionStep::AsBefore
    }
}

/// A new workspace opens while its Change has fewer than [`MAX_OPEN_PER_CHANGE`] open ones.
pub fn new_admission(open_of_change: i64) -> AdmissionStep {
    if open_of_change >= MAX_OPEN_PER_CHANGE {
        AdmissionStep::Refused { open: open_of_change }
    } else {
        AdmissionStep::Open
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At most four open workspaces per Change; a retried admission neither counts nor refuses.
    #[test]
    fn a_change_opens_at_most_four_workspaces_and_a_retry_is_admitted_as_before() {
        assert_eq!(new_admission(0), AdmissionStep::Open);
        assert_eq!(new_admission(3), AdmissionStep::Open);
        assert_eq!(new_admission(4), AdmissionStep::Refused { open: 4 });
        assert_eq!(new_admission(5), AdmissionStep::Refused { open: 5 });
        assert_eq!(readmission(true, true), AdmissionStep::AsBefore);
        assert_eq!(readmission(false, false), AdmissionStep::AsBefore);
        assert_eq!(readmission(false, true), AdmissionStep::AsBefore);
        assert_eq!(readmission(true, false), AdmissionStep::ReserveNow);
    }

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    fn default_allows(s: &str) -> Result<Allowed, ValidationError> {
        WorkspacePolicy::default().allows(&argv(s))
    }

    #[test]
    fn the_default_list_is_the_specs() {
        for ok in [
            "bun install",
            "bun test",
            "bun test src/a.test.ts src/b.test.ts",
            "bunx tsc --noEmit",
            "bun run typecheck",
            "bun run contract",
            "git status",
            "git diff HEAD~1",
            "git log --oneline",
            "ls",
            "ls -la src",
        ] {
            assert!(default_allows(ok).is_ok(), "{ok}");
        }
        for refused in [
            "rm -rf /",
            "bun add left-pad",
            "bunx tsc",
            "bun install --global x",
            "git push",
            "git diff --output=/etc/passwd",
            "curl http://example.com",
            "sh -c ls",
            "bun run --bun x",
        ] {
            let e = default_allows(refused).unwrap_err();
            assert_eq!(e.field, "argv", "{refused}");
        }
    }

    #[test]
    fn a_named_script_must_be_checked_against_package_json_and_builds_are_discarded() {
        assert_eq!(
            default_allows("bun run lint").unwrap(),
            Allowed {
                script: Some("lint".into()),
                build: false
            }
        );
        assert!(default_allows("bun run build").unwrap().build);
        let web = default_allows("bun run build:web").unwrap();
        assert!(web.build && web.script.as_deref() == Some("build:web"));
        assert!(!default_allows("bun run test").unwrap().build);
    }

    #[test]
    fn a_policy_replaces_the_list() {
        let policy = WorkspacePolicy {
            commands: Some(vec!["make test".into(), "cargo test *".into()]),
            install: Some("make deps".into()),
            build: Some(vec!["make build".into()]),
        };
        assert!(policy.validate().is_ok());
        assert!(policy.allows(&argv("make test")).is_ok());
        assert!(policy.allows(&argv("cargo test -p x")).is_ok());
        assert!(policy.allows(&argv("make build")).unwrap().build);
        assert!(policy.allows(&argv("bun install")).is_err());
        assert!(policy.allows(&argv("make test extra")).is_err());
        assert_eq!(policy.install_argv(false), Some(argv("make deps")));
        assert_eq!(WorkspacePolicy::default().install_argv(true), Some(argv("bun install")));
        assert_eq!(WorkspacePolicy::default().install_argv(false), None);
    }

    #[test]
    fn a_bad_policy_names_its_field() {
        let bad = WorkspacePolicy {
            commands: Some(vec!["make test".into(), "* x".into()]),
            ..Default::default()
        };
        assert_eq!(bad.validate().unwrap_err().field, "workspacePolicy.commands[1]");
        let bad = WorkspacePolicy {
            install: Some("make *".into()),
            ..Default::default()
        };
        assert_eq!(bad.validate().unwrap_err().field, "workspacePolicy.install");
    }

    #[test]
    fn paths_stay_inside_the_workspace_and_out_of_git() {
        for ok in ["src/main.ts", "a", "dir/.env.example", "x/y/z.rs"] {
            assert!(check_path("path", ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../b",
            "a//b",
            "./a",
            ".git/config",
            ".git",
            "a\nb",
        ] {
            assert_eq!(check_path("path", bad).unwrap_err().field, "path", "{bad:?}");
        }
    }

    #[test]
    fn tool_calls_read_as_the_api_sends_them() {
        let call: ToolCall =
            serde_json::from_str(r#"{"tool":"edit_file","path":"a.txt","oldText":"x","newText":"y"}"#).unwrap();
        assert_eq!(
            call,
            ToolCall::EditFile {
                path: "a.txt".into(),
                old_text: "x".into(),
                new_text: "y".into()
            }
        );
        assert!(call.may_write());
        let e = call.validate(&WorkspacePolicy::default());
        assert!(e.is_ok());
        let empty = ToolCall::EditFile {
            path: "a".into(),
            old_text: String::new(),
            new_text: "y".into(),
        };
        assert!(matches!(
            empty.validate(&WorkspacePolicy::default()),
            Err(ToolRefusal::Invalid(e)) if e.field == "oldText"
        ));
        assert!(serde_json::from_str::<ToolCall>(r#"{"tool":"delete_everything"}"#).is_err());
        assert!(serde_json::from_str::<ToolCall>(r#"{"tool":"read_file","path":"a","mode":"r"}"#).is_err());
    }

    #[test]
    fn a_command_of_the_wrong_shape_is_invalid_and_one_off_the_allowlist_is_not_allowed() {
        let run = |words: &[&str]| ToolCall::RunCommand {
            argv: words.iter().map(|w| w.to_string()).collect(),
        };
        let policy = WorkspacePolicy::default();
        assert!(matches!(run(&[]).validate(&policy), Err(ToolRefusal::Invalid(e)) if e.field == "argv"));
        assert!(matches!(run(&["a\0b"]).validate(&policy), Err(ToolRefusal::Invalid(_))));
        assert!(
            matches!(run(&["rm", "-rf", "/"]).validate(&policy), Err(ToolRefusal::NotAllowed(e)) if e.field == "argv")
        );
        assert!(run(&["bun", "test"]).validate(&policy).is_ok());
    }

    #[test]
    fn an_edit_replaces_exactly_one_occurrence() {
        assert_eq!(apply_edit("a.ts", "let x = 1;", "1", "2").unwrap(), "let x = 2;");
        let twice = apply_edit("a.ts", "1 + 1", "1", "2").unwrap_err();
        assert_eq!(twice.field, "oldText");
        assert!(twice.rule.contains("occurs 2 times"), "{}", twice.rule);
        assert_eq!(apply_edit("a.ts", "x", "y", "z").unwrap_err().field, "oldText");
        let big = "b".repeat(MAX_FILE_BYTES + 1);
        assert_eq!(apply_edit("a.ts", "a", "a", &big).unwrap_err().field, "newText");
    }

    #[test]
    fn a_bun_run_needs_its_script_in_package_json() {
        let pkg = br#"{"scripts":{"lint":"tsc"}}"#;
        assert!(check_package_script(Some(pkg), "lint").is_ok());
        assert_eq!(check_package_script(Some(pkg), "deploy").unwrap_err().field, "argv");
        assert!(check_package_script(None, "lint").is_err());
        assert!(check_package_script(Some(b"not json"), "lint").is_err());
    }
}
