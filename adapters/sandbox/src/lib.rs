//! The Sandbox: one Docker container per Project, in which agent workspaces, Candidate checks and
//! code edit sessions run their commands.
//!
//! It exists so that untrusted commands (an agent's `bun test`, anything a person types in a code
//! edit session) run with hard limits that the rest of belay can rely on:
//!
//! - one container per Project, named `proj-<id>`; at most [`SANDBOX_MAX`] live, and a call that
//!   needs one more fails with [`SandboxError::ContainerUnavailable`];
//! - 2 CPUs, 2 GiB of memory and no swap, 512 processes, an init process as pid 1 that reaps
//!   orphans, a read-only root filesystem, `/workspace` on an anonymous volume (removed with the
//!   container), `/tmp` on a tmpfs, no new privileges, and every capability dropped except
//!   `CHOWN` (hand a session directory to its unprivileged user), `DAC_OVERRIDE` and `FOWNER`
//!   (root's git and `rm -rf` in directories owned by that user). No `KILL`, `SETUID`/`SETGID`
//!   (Docker switches the exec user itself) or `NET_RAW`;
//! - an internal Docker network (no route out through Docker; host services on the bridge
//!   address stay reachable, which is how the Sandbox reaches the git service);
//! - every command gets a timeout that really kills it: coreutils `timeout -s KILL` in the
//!   container kills the command's process group, a client-side deadline backs it up, and after
//!   every command whatever it left behind is killed — for root commands every process of the
//!   command's session (each exec is a session leader), for an unprivileged user every process
//!   of that user (the kill runs as that user, so no capability is needed). Processes a root
//!   command detaches into a new session escape that kill; they die with the container when it is
//!   reaped after two idle minutes.
//!
//! Docker cannot kill an exec, and the exec's host pid is useless under gVisor, so the killing is
//! done by one more exec inside the container: a small `sh` script that uses only builtins, so it
//! works even when a fork bomb has used up the pids limit (see [`KILLER`]).

pub mod files;
pub mod git;
pub mod lease;
pub mod oneoff;
pub mod preview;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use belay_domain::sandbox_lease::exec_expiry;
use lease::{Acquired, Leases, LocalLeases, wall_ms};

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::errors::Error as DockerError;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::models::{ContainerCreateBody, ContainerSummary, HostConfig, Mount, MountType, NetworkCreateRequest};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
};
use futures::StreamExt;
use thiserror::Error;
use tracing::{instrument, warn};

/// At most this many Sandboxes are live at one time.
pub const SANDBOX_MAX: usize = 4;
/// A Sandbox unused for this long is removed with its disk (sleepAfter 2 min).
pub const IDLE_AFTER: Duration = Duration::from_secs(120);
/// The image used when the configuration names none.
pub const DEFAULT_IMAGE: &str = "belay-sandbox:dev";
/// The internal network Sandboxes sit on when the configuration names none.
pub const DEFAULT_NETWORK: &str = "belay_sbx";
/// Where the per-use directories live inside the container.
pub const WORKSPACE: &str = "/workspace";
/// stdout and stderr each keep at most this many bytes: the tail, where errors are.
pub const OUTPUT_LIMIT: usize = 64 * 1024;

const NANO_CPUS: i64 = 2_000_000_000;
const MEMORY_BYTES: i64 = 2 << 30;
const PIDS_LIMIT: i64 = 512;
const TMP_TMPFS: &str = "rw,exec,nosuid,nodev,size=512m,mode=1777";
/// What `timeout -k` waits between its signal and KILL (the signal is KILL already, so this is
/// only a second chance if the first did not land).
const KILL_AFTER_SECONDS: u64 = 2;
/// How long past the in-container timeout the client-side backstop waits.
const BACKSTOP_GRACE: Duration = Duration::from_secs(5);
/// How often a running exec is inspected, so that a command whose background children hold
/// its output open is noticed as finished without waiting for the daemon's own IO grace.
const EXEC_POLL: Duration = Duration::from_millis(250);
/// How long the output may take to close once the command and its leftovers are gone.
const DRAIN_GRACE: Duration = Duration::from_secs(3);
/// How long the leftover kill may take before the container is given up as lost.
const KILL_DEADLINE: Duration = Duration::from_secs(30);
/// How long creating or removing a directory may take.
const HOUSEKEEPING_DEADLINE: Duration = Duration::from_secs(120);
/// How long an exec may take to be reported finished after its output closed.
const EXIT_WAIT: Duration = Duration::from_secs(5);
/// The first line the exec wrapper writes to stderr, before running anything: its session id.
const SID_HEADER: &[u8] = b"belay-sid=";
/// The last line [`ALONE_CHECK`] writes to stderr when nothing else is left in its session.
const ALONE_TRAILER: &[u8] = b"belay-alone\n";
/// The leftover kill as a shell function, `belay_kill MODE WANT [KEEP]`, from ONE process that
/// never forks: after a fork bomb the pids limit is used up, so a killer that needed a process per
/// pass (a `pkill` exec each) could wait for a free slot for tens of seconds, and a kill that frees
/// slots lets the survivors fork again. So it stops first (a stopped process cannot fork) until
/// nothing in the selection can run, then kills, and repeats until nothing is alive; then it waits
/// until the dead are reaped by the container's init, so that their pid slots are free for the next
/// command. MODE and WANT: `session <sid>` (as root) or `user -` (as that user: every process it
/// owns). It spares its own shell and KEEP. Returns 1: nothing was left; 0: leftovers were killed;
/// 3 or 4: it gave up.
macro_rules! kill_fn {
    () => {
        r#"belay_kill() {
  mode=$1 want=$2 keep=" $$ $3 " n=0
  pass() {
    n=0
    for d in /proc/[0-9]*; do
      p=${d#/proc/}
      case "$keep" in *" $p "*) continue ;; esac
      { read -r st < "$d/stat"; } 2>/dev/null || continue
      st=${st##*) }
      state=${st%% *}
      case "$state" in ""|*" "*) continue ;; esac
      case "$2" in *"$state"*) ;; *) continue ;; esac
      if [ "$mode" = session ]; then
        r=${st#* }; r=${r#* }; r=${r#* }
        [ "${r%% *}" = "$want" ] || continue
      elif [ ! -O "$d" ]; then
        continue
      fi
      kill -s "$1" "$p" 2>/dev/null && n=$((n + 1))
    done
  }
  pass 0 RSDTt
  [ "$n" -eq 0 ] && return 1
  i=0
  while :; do
    pass STOP RSD
    while [ "$n" -gt 0 ]; do
      i=$((i + 1)); [ "$i" -gt 2000 ] && return 3
      pass STOP RSD
    done
    pass KILL RSDTt
    [ "$n" -eq 0 ] && break
    i=$((i + 1)); [ "$i" -gt 2000 ] && return 3
  done
  i=0
  while :; do
    pass 0 Z
    [ "$n" -eq 0 ] && return 0
    i=$((i + 1)); [ "$i" -gt 20000 ] && return 4
  done
}
"#
    };
}
/// Runs a root command (as `sh -c ALONE_CHECK belay-run <argv>` under the wrapper's `timeout`),
/// then looks through /proc for anything else left in its session (not itself, not `timeout`
/// above it) and says [`ALONE_TRAILER`] when there is nothing: the exec then needs no leftover
/// kill, which is a second exec. The command runs under `timeout --foreground 0` (no time limit,
/// no process group of its own, the same messages as the wrapper's `timeout` when it cannot
/// start) so that it is never a shell builtin, and is waited for with the shell's own stderr on
/// /dev/null so that the shell adds no `Killed` line of its own. The look is only trusted when
/// every process it listed could be read: one that vanished meanwhile may have forked a new one,
/// so it looks again (a few times, then gives up and says nothing). When something is left it
/// kills the session itself with [`kill_fn!`] before it exits, without the trailer: the exec's
/// own session kill still follows, and then finds nothing and a pid to start with. Says nothing
/// either when the command timed out (`timeout` above kills this shell too). A command can write the trailer
/// itself, but a root command can leave its session anyway (`setsid`), so the session kill this
/// skips never bound it; unprivileged commands, whose kill takes every process of their uid,
/// never run this (they run [`USER_SWEEP`]).
const ALONE_CHECK: &str = concat!(
    kill_fn!(),
    r#"timeout --foreground 0 "$@" & wait "$!" 2>/dev/null; rc=$?
read -r st < /proc/self/stat; st=${st##*) }; st=${st#* }; st=${st#* }; st=${st#* }; sid=${st%% *}
i=0
while [ "$i" -lt 5 ]; do
  i=$((i + 1)); gone=0
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    { [ "$p" = "$$" ] || [ "$p" = "$PPID" ]; } && continue
    if ! { read -r st < "$d/stat"; } 2>/dev/null; then gone=1; continue; fi
    st=${st##*) }; st=${st#* }; st=${st#* }; st=${st#* }
    [ "${st%% *}" = "$sid" ] && break 2
  done
  [ "$gone" -eq 0 ] && { printf 'belay-alone\n' >&2; exit "$rc"; }
done
belay_kill session "$sid" "$PPID"
exit "$rc""#
);
/// Runs an unprivileged command (as `sh -c USER_SWEEP belay-run <argv>` under the wrapper's
/// `timeout`), then kills, from this same shell, every other process of its user but the `timeout`
/// above it. It needs no pid to do so: a command that used up the pids limit (a fork bomb) is
/// stopped and killed by a process that already runs, where a kill exec started afterwards could
/// wait for a free slot past its deadline. The user's processes can kill this shell too, so its
/// sweep is never trusted: the exec's own kill of every process of the uid follows, and finds
/// nothing in the ordinary case.
const USER_SWEEP: &str = concat!(
    kill_fn!(),
    r#"timeout --foreground 0 "$@" & wait "$!" 2>/dev/null; rc=$?
belay_kill user - "$PPID"
exit "$rc""#
);
/// The kill exec: [`kill_fn!`] with the exec's arguments, `session <sid>` (run as root) or
/// `user -` (run as that user). Exit 1: nothing was left; 0: leftovers were killed; 3 or 4: it
/// gave up.
const KILLER: &str = concat!(kill_fn!(), r#"belay_kill "$1" "$2"; exit $?"#);
/// Runs as the exec's own process (a session leader under runc): reports its session id, makes
/// the user's own home the command's `HOME` (and Bun's cache under it), then becomes coreutils
/// `timeout`, which puts the command in its own process group and kills that group when time runs
/// out. Forks nothing itself once the home exists, so it starts even when the pids limit is
/// exhausted. A home that is not a directory of the user's own (another user made it first, or a
/// link) is replaced, or the command is refused. Arguments: the home, the timeout in seconds,
/// then the command.
const WRAPPER: &str = r#"read -r st < /proc/self/stat; st=${st##*) }; st=${st#* }; st=${st#* }; st=${st#* }; printf 'belay-sid=%s\n' "${st%% *}" >&2; h=$1; t=$2; shift 2; if [ -L "$h" ] || [ ! -O "$h" ] || [ ! -d "$h" ]; then rm -rf -- "$h" 2>/dev/null; mkdir -m 0700 -- "$h" || { echo "belay: cannot make the home directory $h" >&2; exit 125; }; fi; export HOME="$h" BUN_INSTALL_CACHE_DIR="$h/.bun/install/cache"; exec timeout -s KILL -k 2 "$t" "$@""#;

/// The uids agent workspaces run as, each directory its own (edit sessions' uids lie below).
pub const WORKSPACE_UIDS: std::ops::Range<u32> = belay_domain::edit_session::UID_LIMIT..60_000;

/// Hands `$1` (a directory below /workspace, removed first) to a uid of `$2 ≤ uid < $3` that owns
/// no other directory of /workspace, starting the search at `$4`; makes that user's home afresh
/// and prints the uid. The search and the hand-over hold a lock on /workspace, so two directories
/// prepared at once never get the same uid.
pub(crate) const PRIVATE_DIR: &str = r#"set -e
exec 9< /workspace
flock 9
rm -rf -- "$1"
used=" $(stat -c %u /workspace/*/ 2>/dev/null | tr '\n' ' ') "
uid=$4
while :; do
  case "$used" in *" $uid "*) ;; *) break ;; esac
  uid=$((uid + 1))
  [ "$uid" -lt "$3" ] || uid=$2
  [ "$uid" -ne "$4" ] || { echo "every workspace uid is taken" >&2; exit 3; }
done
mkdir -- "$1"
chown -- "$uid:$uid" "$1"
chmod 0700 -- "$1"
h=/tmp/belay-home-$uid
rm -rf -- "$h"
mkdir -m 0700 -- "$h"
chown -- "$uid:$uid" "$h"
echo "$uid""#;

/// The container runtime a Sandbox runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// The default OCI runtime.
    Runc,
    /// gVisor, for Linux servers.
    Runsc,
}

impl Runtime {
    /// The name Docker knows the runtime by.
    pub fn as_str(self) -> &'static str {
        match self {
            Runtime::Runc => "runc",
            Runtime::Runsc => "runsc",
        }
    }

    /// Parses `runc` or `runsc`.
    pub fn parse(s: &str) -> Result<Self, SandboxError> {
        match s {
            "runc" => Ok(Runtime::Runc),
            "runsc" => Ok(Runtime::Runsc),
            other => Err(SandboxError::InvalidConfig(format!(
                "SANDBOX_RUNTIME must be runc or runsc, not {other:?}"
            ))),
        }
    }
}

/// How Sandboxes are made. One deployment has one configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    /// The image every Sandbox runs (BELAY_SANDBOX_IMAGE). It must provide a POSIX `sh`,
    /// `sleep`, coreutils `timeout` (busybox's does not kill the process group), `mkdir`,
    /// `chown`, `rm`, and what the Projects run.
    pub image: String,
    /// BELAY_SANDBOX_RUNTIME.
    pub runtime: Runtime,
    /// The internal network (BELAY_SANDBOX_NETWORK), created with `internal: true` if missing.
    pub network: String,
    /// SANDBOX_MAX.
    pub max_live: usize,
    /// Labels are `<prefix>.sandbox` and `<prefix>.project`; only containers carrying them are
    /// counted, reaped or removed.
    pub label_prefix: String,
    /// Further labels put on every container and network created (tests use `belay.test=1`).
    pub extra_labels: BTreeMap<String, String>,
    /// An egress proxy on the internal network (BELAY_SANDBOX_EGRESS_PROXY), exported to
    /// commands as HTTP(S)_PROXY; its allowlist is the proxy's own configuration.
    pub egress_proxy: Option<String>,
    /// The deployment's identity (BELAY_DEPLOYMENT; a worker falls back to the one its database
    /// holds): the `<prefix>.deployment` label on every container and network made, and the
    /// only containers listed, counted or removed. Two deployments on one Docker Engine never
    /// touch each other's containers. `None` lists every deployment's (tests of one process).
    pub deployment: Option<String>,
    /// How long a Sandbox stays with nothing running before it is removed
    /// (BELAY_SANDBOX_IDLE_SECONDS; [`IDLE_AFTER`] by default).
    pub idle_after: Duration,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            image: DEFAULT_IMAGE.to_owned(),
            runtime: Runtime::Runc,
            network: DEFAULT_NETWORK.to_owned(),
            max_live: SANDBOX_MAX,
            label_prefix: "belay".to_owned(),
            extra_labels: BTreeMap::new(),
            egress_proxy: None,
            deployment: None,
            idle_after: IDLE_AFTER,
        }
    }
}

impl SandboxConfig {
    /// The defaults, overridden by the settings `lookup` answers by their variable names
    /// (BELAY_SANDBOX_IMAGE, BELAY_SANDBOX_RUNTIME, BELAY_SANDBOX_NETWORK,
    /// BELAY_SANDBOX_EGRESS_PROXY, BELAY_DEPLOYMENT, BELAY_SANDBOX_IDLE_SECONDS, BELAY_SANDBOX_MAX
    /// and BELAY_SANDBOX_LABELS, `key=value,…` put on every container and network created). The
    /// `belay` command reads them once, as flags or environment variables; an empty value is
    /// unset, and an error names the variable and its rule.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, SandboxError> {
        let mut config = Self::default();
        let set = |key: &str| lookup(key).filter(|v| !v.is_empty());
        if let Some(image) = set("BELAY_SANDBOX_IMAGE") {
            config.image = image;
        }
        if let Some(runtime) = set("BELAY_SANDBOX_RUNTIME") {
            config.runtime = Runtime::parse(&runtime)?;
        }
        if let Some(network) = set("BELAY_SANDBOX_NETWORK") {
            config.network = network;
        }
        config.egress_proxy = set("BELAY_SANDBOX_EGRESS_PROXY");
        config.deployment = set("BELAY_DEPLOYMENT");
        if let Some(d) = &config.deployment
            && (d.len() > 63 || !d.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)))
        {
            return Err(SandboxError::InvalidConfig(format!(
                "BELAY_DEPLOYMENT must be 1 to 63 of [A-Za-z0-9._-], not {d:?}"
            )));
        }
        if let Some(idle) = set("BELAY_SANDBOX_IDLE_SECONDS") {
            let secs: u64 = idle.parse().ok().filter(|s| *s > 0).ok_or_else(|| {
                SandboxError::InvalidConfig(format!(
                    "BELAY_SANDBOX_IDLE_SECONDS must be a whole number above 0, not {idle:?}"
                ))
            })?;
            config.idle_after = Duration::from_secs(secs);
        }
        if let Some(max) = set("BELAY_SANDBOX_MAX") {
            config.max_live = max.parse().ok().filter(|m| *m > 0).ok_or_else(|| {
                SandboxError::InvalidConfig(format!("BELAY_SANDBOX_MAX must be a whole number above 0, not {max:?}"))
            })?;
        }
        if let Some(labels) = set("BELAY_SANDBOX_LABELS") {
            for pair in labels.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let (k, v) = pair.split_once('=').ok_or_else(|| {
                    SandboxError::InvalidConfig(format!("BELAY_SANDBOX_LABELS: {pair:?} is not key=value"))
                })?;
                config.extra_labels.insert(k.trim().to_owned(), v.trim().to_owned());
            }
        }
        Ok(config)
    }

    fn sandbox_label(&self) -> String {
        format!("{}.sandbox", self.label_prefix)
    }

    fn project_label(&self) -> String {
        format!("{}.project", self.label_prefix)
    }

    /// `<prefix>.deployment`.
    pub fn deployment_label(&self) -> String {
        format!("{}.deployment", self.label_prefix)
    }

    /// How often a worker looks for idle Sandboxes: every 15 s, or a quarter of a shorter idle
    /// time (at least every second).
    pub fn reap_every(&self) -> Duration {
        (self.idle_after / 4).clamp(Duration::from_secs(1), Duration::from_secs(15))
    }
}

/// A live Sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    pub id: String,
    /// `proj-<id>`.
    pub name: String,
    pub project_id: String,
    /// Whether this call started it (a fresh container has an empty /workspace).
    pub fresh: bool,
}

/// Who a command runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxUser {
    /// Candidate checks (allowlisted commands) and belay's own housekeeping.
    Root,
    /// A code edit session's or an agent workspace's own user: its directory is readable by it
    /// alone, and after every command every process of that uid is killed. Each open session of
    /// a project has its own uid (1000 for the first); each workspace directory gets one of
    /// [`WORKSPACE_UIDS`] from [`Sandboxes::fresh_private_dir`].
    Unprivileged(u32),
}

impl SandboxUser {
    /// The image's `sandbox` user.
    pub const SANDBOX: SandboxUser = SandboxUser::Unprivileged(1000);

    fn check(self) -> Result<Self, SandboxError> {
        match self {
            SandboxUser::Unprivileged(uid) if !(1000..60_000).contains(&uid) => Err(SandboxError::InvalidUser(uid)),
            user => Ok(user),
        }
    }

    fn docker_user(self) -> String {
        match self {
            SandboxUser::Root => "0:0".to_owned(),
            SandboxUser::Unprivileged(uid) => format!("{uid}:{uid}"),
        }
    }

    /// The user whose uid this is.
    pub fn of_uid(uid: u32) -> Self {
        if uid == 0 {
            SandboxUser::Root
        } else {
            SandboxUser::Unprivileged(uid)
        }
    }

    /// The user's own `HOME`, on the Sandbox's tmpfs: each user's git and Bun configuration and
    /// caches are its own, never a file another user of the Sandbox could have written.
    fn home(self) -> String {
        match self {
            SandboxUser::Root => "/tmp/belay-home-0".to_owned(),
            SandboxUser::Unprivileged(uid) => format!("/tmp/belay-home-{uid}"),
        }
    }
}

/// What a command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    /// The last [`OUTPUT_LIMIT`] bytes of stdout (invalid UTF-8 replaced).
    pub stdout: String,
    /// The last [`OUTPUT_LIMIT`] bytes of stderr.
    pub stderr: String,
    /// Whether earlier output was dropped.
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    /// The exit status; 137 when killed (by the timeout or the OOM killer).
    pub exit_code: Option<i64>,
    /// Whether the command ran out of time and was killed.
    pub timed_out: bool,
}

impl ExecOutput {
    /// Exited 0 within its time.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }
}

#[derive(Debug, Error)]
pub enum SandboxError {
    #[error("no Sandbox available: {live} of {max} are live; retry when one is idle")]
    ContainerUnavailable { live: usize, max: usize },
    #[error("the Sandbox of {project_id} is gone or not running ({reason}); ensure it again and restore the workspace")]
    Lost { project_id: String, reason: String },
    #[error(
        "the Sandbox image {0} does not exist: build it with scripts/build-sandbox-image.sh or set BELAY_SANDBOX_IMAGE"
    )]
    ImageMissing(String),
    #[error("invalid project id {0:?}: expected proj_ followed by 1 to 64 of [a-z0-9-]")]
    InvalidProjectId(String),
    #[error("invalid Sandbox directory {0:?}")]
    InvalidDirectory(String),
    #[error("invalid Sandbox user uid {0}: unprivileged users have uids 1000 to 59999")]
    InvalidUser(u32),
    #[error("the Sandbox directory {0} does not exist (a fresh Sandbox starts empty): prepare it again")]
    MissingDirectory(String),
    #[error("the command could not be started: {0}")]
    NotStarted(String),
    #[error("a command needs at least a program name")]
    EmptyCommand,
    #[error("a command needs a timeout above zero")]
    InvalidTimeout,
    #[error("invalid Sandbox configuration: {0}")]
    InvalidConfig(String),
    #[error("{what} failed with exit code {code:?}: {stderr}")]
    Command {
        what: &'static str,
        code: Option<i64>,
        stderr: String,
    },
    #[error("Docker: {0}")]
    Docker(#[from] DockerError),
    #[error("the Sandbox lease book could not be read or written: {0}")]
    Leases(String),
    /// A one-off container's working directory could not be put in or brought back.
    #[error("a one-off container's files: {0}")]
    Collect(String),
}

impl SandboxError {
    /// Whether a later attempt may succeed: the Docker daemon, a lost container and a full
    /// house are transient; bad input, a missing image and a failing housekeeping command are not.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            SandboxError::ContainerUnavailable { .. }
                | SandboxError::Lost { .. }
                | SandboxError::NotStarted(_)
                | SandboxError::Docker(_)
                | SandboxError::Leases(_)
        )
    }
}

/// `proj_<id>` → `proj-<id>`, the Sandbox's container name.
pub fn container_name(project_id: &str) -> Result<String, SandboxError> {
    let body = project_id.strip_prefix("proj_").unwrap_or_default();
    if body.is_empty()
        || body.len() > 64
        || !body
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Err(SandboxError::InvalidProjectId(project_id.to_owned()));
    }
    Ok(format!("proj-{body}"))
}

/// An agent workspace's directory: `/workspace/<last 24 characters of the run id>`.
pub fn run_dir(run_id: &str) -> Result<String, SandboxError> {
    let name = safe_name(run_id)?;
    Ok(format!("{WORKSPACE}/{}", &name[name.len().saturating_sub(24)..]))
}

/// A Candidate's check directory: `/workspace/cand-<id>` (a `cand_` prefix of the id is dropped).
pub fn candidate_dir(candidate_id: &str) -> Result<String, SandboxError> {
    let id = candidate_id.strip_prefix("cand_").unwrap_or(candidate_id);
    Ok(format!("{WORKSPACE}/cand-{}", safe_name(id)?))
}

/// A code edit session's directory: `/workspace/edit-<hex>`.
pub fn edit_dir(hex: &str) -> Result<String, SandboxError> {
    if hex.is_empty() || hex.len() > 64 || !hex.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)) {
        return Err(SandboxError::InvalidDirectory(format!("edit-{hex}")));
    }
    Ok(format!("{WORKSPACE}/edit-{hex}"))
}

fn safe_name(s: &str) -> Result<&str, SandboxError> {
    if s.is_empty() || s.len() > 128 || !s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return Err(SandboxError::InvalidDirectory(s.to_owned()));
    }
    Ok(s)
}

/// `/workspace` or a path below it, without `.`/`..` or unusual characters.
pub(crate) fn check_dir(dir: &str) -> Result<(), SandboxError> {
    let bad = || SandboxError::InvalidDirectory(dir.to_owned());
    let rest = dir.strip_prefix(WORKSPACE).ok_or_else(bad)?;
    if rest.is_empty() {
        return Ok(());
    }
    let rest = rest.strip_prefix('/').ok_or_else(bad)?;
    for part in rest.split('/') {
        if part.is_empty()
            || part == "."
            || part == ".."
            || !part.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        {
            return Err(bad());
        }
    }
    Ok(())
}

/// The Sandboxes of one deployment, on one Docker Engine.
pub struct Sandboxes {
    pub(crate) docker: Docker,
    pub(crate) config: SandboxConfig,
    /// Where every worker of the deployment records each Sandbox's lease, last use and running
    /// commands.
    leases: Arc<dyn Leases>,
    /// Serialises the lease-then-create of `ensure` and the take-then-remove of `reap_idle`
    /// within this process; the lease book serialises them across processes.
    lifecycle: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Sandboxes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandboxes")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A command marked running in the shared record for as long as it lives. Ended explicitly
/// (so the last use is recorded before the call returns); dropped unended (the call was
/// cancelled), the end is recorded in the background, and the mark's expiry backs that up.
struct InUse {
    leases: Arc<dyn Leases>,
    project_id: String,
    exec_id: String,
    ended: bool,
}

impl InUse {
    async fn end(mut self) {
        self.ended = true;
        if let Err(e) = self.leases.end_exec(&self.project_id, &self.exec_id, wall_ms()).await {
            warn!(error = %e, "recording the end of a Sandbox command failed; its mark expires");
        }
    }
}

impl Drop for InUse {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let (leases, project, exec) = (self.leases.clone(), self.project_id.clone(), self.exec_id.clone());
            handle.spawn(async move {
                let _ = leases.end_exec(&project, &exec, wall_ms()).await;
            });
        }
    }
}

impl Sandboxes {
    /// Sandboxes whose lease book is this process's own (see [`LocalLeases`]).
    pub fn new(docker: Docker, config: SandboxConfig) -> Self {
        Self::with_leases(docker, config, Arc::new(LocalLeases::default()))
    }

    /// Sandboxes whose lease book is `leases`: the deployment's shared one for a worker.
    pub fn with_leases(docker: Docker, config: SandboxConfig, leases: Arc<dyn Leases>) -> Self {
        Self {
            docker,
            config,
            leases,
            lifecycle: tokio::sync::Mutex::new(()),
        }
    }

    /// As [`Sandboxes::connect`], with the deployment's lease book.
    pub async fn connect_with_leases(config: SandboxConfig, leases: Arc<dyn Leases>) -> Result<Self, SandboxError> {
        let docker = Docker::connect_with_defaults()?.negotiate_version().await?;
        Ok(Self::with_leases(docker, config, leases))
    }

    /// Connects to the Docker Engine named by DOCKER_HOST (the local socket by default, or a
    /// socket proxy over TCP) and agrees on an API version with it.
    /// What `belay doctor` reports of the Docker Engine (DOCKER_HOST, else the local socket): its
    /// version, and that the Sandbox image is there.
    pub async fn probe_engine(config: &SandboxConfig) -> Result<String, SandboxError> {
        let docker = Docker::connect_with_defaults()?.negotiate_version().await?;
        let version = docker.version().await?;
        match docker.inspect_image(&config.image).await {
            Ok(_) => Ok(format!(
                "Docker Engine {} (API {}), image {} present",
                version.version.unwrap_or_default(),
                version.api_version.unwrap_or_default(),
                config.image
            )),
            Err(DockerError::DockerResponseServerError { status_code: 404, .. }) => {
                Err(SandboxError::ImageMissing(config.image.clone()))
            }
            Err(e) => Err(e.into()),
        }
    }

    pub async fn connect(config: SandboxConfig) -> Result<Self, SandboxError> {
        let docker = Docker::connect_with_defaults()?.negotiate_version().await?;
        Ok(Self::new(docker, config))
    }

    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    /// The Project's running Sandbox, started if needed. A container that exists but is not
    /// running (it crashed, or was stopped) is removed and replaced: a Sandbox loss.
    ///
    /// The Project's lease in the deployment's book comes first: a new Sandbox takes a slot only
    /// while fewer than SANDBOX_MAX are held by every worker together, and a Sandbox some worker
    /// is removing is not handed out ([`SandboxError::Lost`], retryable).
    #[instrument(skip_all, fields(project.id = %project_id), err)]
    pub async fn ensure(&self, project_id: &str) -> Result<Container, SandboxError> {
        let name = container_name(project_id)?;
        let _lifecycle = self.lifecycle.lock().await;
        let lease = self
            .leases
            .acquire(project_id, self.config.max_live, wall_ms())
            .await
            .map_err(SandboxError::Leases)?;
        match lease {
            Acquired::Full { held, max } => return Err(SandboxError::ContainerUnavailable { live: held, max }),
            Acquired::Reaping => {
                return Err(SandboxError::Lost {
                    project_id: project_id.to_owned(),
                    reason: "it is being removed after idling".to_owned(),
                });
            }
            Acquired::Held | Acquired::Taken => {}
        }
        let made = self.ensure_container(project_id, &name).await;
        if made.is_err() && lease == Acquired::Taken {
            // Do not hold a slot for a Sandbox that never ran.
            let _ = self.leases.release(project_id).await;
        }
        made
    }

    async fn ensure_container(&self, project_id: &str, name: &str) -> Result<Container, SandboxError> {
        // Another worker may be between creating and starting it: give that a moment.
        let mut waited = Duration::ZERO;
        loop {
            match self.docker.inspect_container(name, None).await {
                Ok(found) => {
                    let state = found.state.as_ref();
                    let running = state.and_then(|s| s.running).unwrap_or(false);
                    if running {
                        return Ok(Container {
                            id: found.id.unwrap_or_default(),
                            name: name.to_owned(),
                            project_id: project_id.to_owned(),
                            fresh: false,
                        });
                    }
                    let created =
                        state.and_then(|s| s.status) == Some(bollard::models::ContainerStateStatusEnum::CREATED);
                    if created && waited < Duration::from_secs(10) {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        waited += Duration::from_millis(200);
                        continue;
                    }
                    warn!(container.name = %name, "replacing a Sandbox that is not running");
                    self.remove_container(name).await?;
                    break;
                }
                Err(e) if status(&e) == Some(404) => break,
                Err(e) => return Err(e.into()),
            }
        }
        self.ensure_network().await?;
        match self.docker.inspect_image(&self.config.image).await {
            Ok(_) => {}
            Err(e) if status(&e) == Some(404) => {
                return Err(SandboxError::ImageMissing(self.config.image.clone()));
            }
            Err(e) => return Err(e.into()),
        }

        let options = CreateContainerOptionsBuilder::default().name(name).build();
        let created = match self
            .docker
            .create_container(Some(options), self.container_body(project_id, name))
            .await
        {
            Ok(created) => created,
            // Another worker of the deployment created it at the same moment: that one is the
            // Sandbox, and it starts as empty as this one would have.
            Err(e) if status(&e) == Some(409) => {
                let mut waited = Duration::ZERO;
                loop {
                    let found = self.docker.inspect_container(name, None).await?;
                    if found.state.as_ref().and_then(|s| s.running).unwrap_or(false) {
                        return Ok(Container {
                            id: found.id.unwrap_or_default(),
                            name: name.to_owned(),
                            project_id: project_id.to_owned(),
                            fresh: true,
                        });
                    }
                    if waited >= Duration::from_secs(10) {
                        return Err(e.into());
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    waited += Duration::from_millis(200);
                }
            }
            Err(e) => return Err(e.into()),
        };
        if let Err(e) = self.docker.start_container(&created.id, None).await {
            let _ = self.remove_container(name).await;
            return Err(e.into());
        }
        Ok(Container {
            id: created.id,
            name: name.to_owned(),
            project_id: project_id.to_owned(),
            fresh: true,
        })
    }

    /// Runs `argv` in `dir` as `user`, killed after `timeout` together with everything it
    /// started; whatever it leaves behind is killed when it returns. The container must have
    /// been ensured and `dir` prepared.
    #[instrument(skip_all, fields(project.id = %project_id, exec.dir = %dir), err)]
    pub async fn exec(
        &self,
        project_id: &str,
        dir: &str,
        argv: &[String],
        user: SandboxUser,
        timeout: Duration,
    ) -> Result<ExecOutput, SandboxError> {
        let name = container_name(project_id)?;
        check_dir(dir)?;
        let user = user.check()?;
        if argv.is_empty() {
            return Err(SandboxError::EmptyCommand);
        }
        if timeout.is_zero() {
            return Err(SandboxError::InvalidTimeout);
        }
        let in_use = self.begin_use(project_id, timeout).await?;
        let out = self.exec_in(project_id, &name, dir, argv, user, timeout).await;
        in_use.end().await;
        out
    }

    async fn exec_in(
        &self,
        project_id: &str,
        name: &str,
        dir: &str,
        argv: &[String],
        user: SandboxUser,
        timeout: Duration,
    ) -> Result<ExecOutput, SandboxError> {
        let started = Instant::now();

        let seconds = format!("{}.{:03}", timeout.as_secs(), timeout.subsec_millis());
        let mut cmd: Vec<String> = ["sh", "-c", WRAPPER, "belay-exec"].map(str::to_owned).to_vec();
        cmd.push(user.home());
        cmd.push(seconds);
        let checked = matches!(user, SandboxUser::Root);
        let runner = if checked { ALONE_CHECK } else { USER_SWEEP };
        cmd.extend(["sh", "-c", runner, "belay-run"].map(str::to_owned));
        cmd.extend(argv.iter().cloned());
        let exec = self
            .docker
            .create_exec(
                name,
                CreateExecOptions {
                    cmd: Some(cmd),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    user: Some(user.docker_user()),
                    working_dir: Some(dir.to_owned()),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| lost_or(project_id, e))?;
        let started_exec = self
            .docker
            .start_exec(
                &exec.id,
                Some(StartExecOptions {
                    detach: false,
                    tty: false,
                    output_capacity: None,
                }),
            )
            .await
            .map_err(|e| lost_or(project_id, e))?;
        let StartExecResults::Attached { mut output, .. } = started_exec else {
            return Err(SandboxError::Lost {
                project_id: project_id.to_owned(),
                reason: "the exec started detached".to_owned(),
            });
        };

        let backstop = tokio::time::Instant::from_std(
            started + timeout + Duration::from_secs(KILL_AFTER_SECONDS) + BACKSTOP_GRACE,
        );
        let mut poll = tokio::time::interval_at(tokio::time::Instant::now() + EXEC_POLL, EXEC_POLL);
        let mut collected = Collected::default();
        let mut closed = false;
        let mut backstop_fired = false;
        loop {
            tokio::select! {
                item = output.next() => match item {
                    Some(Ok(chunk)) => collected.push(chunk),
                    Some(Err(e)) => {
                        warn!(error = %e, "the exec's output broke off");
                        break;
                    }
                    None => {
                        closed = true;
                        break;
                    }
                },
                _ = poll.tick() => {
                    let inspected = self.docker.inspect_exec(&exec.id).await.map_err(|e| lost_or(project_id, e))?;
                    if inspected.running != Some(true) {
                        break;
                    }
                }
                _ = tokio::time::sleep_until(backstop) => {
                    backstop_fired = true;
                    break;
                }
            }
        }

        let ran_for = started.elapsed();
        // Kill what the command left behind; that also closes output its children held open. A
        // root command whose output closed and whose runner saw nothing else in its session left
        // nothing to kill.
        let sid = collected.sid();
        let alone = checked && collected.take_alone();
        if !(alone && closed) {
            self.kill_leftovers(project_id, name, user, sid).await?;
        }
        if !closed {
            let drain_until = tokio::time::Instant::now() + DRAIN_GRACE;
            while let Ok(Some(Ok(chunk))) = tokio::time::timeout_at(drain_until, output.next()).await {
                collected.push(chunk);
            }
            // The poll can see the exec end before its output closes: the runner's trailer may
            // come in the drain. It is the runner's line, never the command's.
            if checked {
                collected.take_alone();
            }
        }
        let exit_code = match self.exit_code(&exec.id).await.map_err(|e| lost_or(project_id, e))? {
            Finished::Exited(code) => code,
            Finished::StillRunning => {
                return Err(self.give_up(project_id, name, "a command could not be killed").await);
            }
        };
        if sid.is_none() && exit_code == Some(126) {
            // The wrapper never ran: the runtime refused to start the process at all.
            let (stdout, _, stderr, _) = collected.finish();
            let reason = format!("{}{}", stdout.trim(), stderr.trim());
            if reason.contains("chdir to cwd") {
                return Err(SandboxError::MissingDirectory(dir.to_owned()));
            }
            return Err(SandboxError::NotStarted(reason));
        }
        // 137 is also the OOM killer's mark; only a command that ran its full time timed out.
        let killed = matches!(exit_code, Some(124 | 137));
        let (stdout, stdout_truncated, stderr, stderr_truncated) = collected.finish();
        Ok(ExecOutput {
            stdout,
            stderr,
            stdout_truncated,
            stderr_truncated,
            exit_code,
            timed_out: backstop_fired || (killed && ran_for >= timeout),
        })
    }

    /// Creates `dir` (below /workspace) and hands it to `owner`; an unprivileged owner's home is
    /// made afresh (root's is shared by every Candidate check, and made when missing).
    #[instrument(skip_all, fields(project.id = %project_id, exec.dir = %dir), err)]
    pub async fn prepare_dir(&self, project_id: &str, dir: &str, owner: SandboxUser) -> Result<(), SandboxError> {
        let name = container_name(project_id)?;
        check_dir(dir)?;
        let owner = owner.check()?;
        let home = match owner {
            SandboxUser::Root => String::new(),
            SandboxUser::Unprivileged(_) => owner.home(),
        };
        let owner = owner.docker_user();
        let in_use = self.begin_use(project_id, HOUSEKEEPING_DEADLINE).await?;
        let argv = [
            "sh",
            "-c",
            r#"mkdir -p -- "$1" && chown -- "$2" "$1" && chmod 0700 -- "$1" && { [ -z "$3" ] || { rm -rf -- "$3" && mkdir -m 0700 -- "$3" && chown -- "$2" "$3"; }; }"#,
            "prepare-dir",
            dir,
            &owner,
            &home,
        ];
        let out = self
            .run_checked(project_id, &name, SandboxUser::Root, &argv, "creating the directory")
            .await;
        in_use.end().await;
        out
    }

    /// Deletes `dir` (a directory below /workspace, never /workspace itself) and all it holds.
    #[instrument(skip_all, fields(project.id = %project_id, exec.dir = %dir), err)]
    pub async fn remove_dir(&self, project_id: &str, dir: &str) -> Result<(), SandboxError> {
        let name = container_name(project_id)?;
        check_dir(dir)?;
        if dir == WORKSPACE {
            return Err(SandboxError::InvalidDirectory(dir.to_owned()));
        }
        let in_use = self.begin_use(project_id, HOUSEKEEPING_DEADLINE).await?;
        let out = self
            .run_checked(
                project_id,
                &name,
                SandboxUser::Root,
                &["rm", "-rf", "--", dir],
                "removing the directory",
            )
            .await;
        in_use.end().await;
        out
    }

    /// Removes the Project's Sandbox with its disk. Whether there was one.
    #[instrument(skip_all, fields(project.id = %project_id), err)]
    pub async fn remove(&self, project_id: &str) -> Result<bool, SandboxError> {
        let name = container_name(project_id)?;
        let _lifecycle = self.lifecycle.lock().await;
        let removed = self.remove_container(&name).await?;
        self.leases.release(project_id).await.map_err(SandboxError::Leases)?;
        Ok(removed)
    }

    /// Removes, with their disks, the Sandboxes the deployment's lease book says have had
    /// nothing running for `idle` at `now`, whichever worker used them; and this deployment's
    /// containers that hold no lease (left by a removal that failed half-way) once they are a
    /// minute old. Returns the Projects whose Sandbox was removed.
    #[instrument(skip_all, err)]
    pub async fn reap_idle(&self, now: Instant, idle: Duration) -> Result<Vec<String>, SandboxError> {
        let _lifecycle = self.lifecycle.lock().await;
        let ahead = now.saturating_duration_since(Instant::now()).as_millis() as i64;
        let now_ms = wall_ms() + ahead;
        let taken = self
            .leases
            .take_idle(now_ms, idle.as_millis() as i64)
            .await
            .map_err(SandboxError::Leases)?;
        let mut removed = Vec::new();
        for project_id in taken {
            if let Ok(name) = container_name(&project_id) {
                self.remove_container(&name).await?;
            }
            self.leases.release(&project_id).await.map_err(SandboxError::Leases)?;
            removed.push(project_id);
        }
        let leased = self.leases.projects().await.map_err(SandboxError::Leases)?;
        let project_label = self.config.project_label();
        let now_secs = now_ms / 1000;
        for container in self.list_live().await? {
            let Some(project_id) = container.labels.as_ref().and_then(|l| l.get(&project_label)).cloned() else {
                continue;
            };
            if leased.contains(&project_id) || now_secs - container.created.unwrap_or(now_secs) < 60 {
                continue;
            }
            if let Ok(name) = container_name(&project_id) {
                warn!(container.name = %name, "removing a Sandbox that holds no lease");
                self.remove_container(&name).await?;
                removed.push(project_id);
            }
        }
        Ok(removed)
    }

    /// The Sandboxes that exist (running or not), by label.
    pub async fn list_live(&self) -> Result<Vec<ContainerSummary>, SandboxError> {
        let mut labels = vec![format!("{}=1", self.config.sandbox_label())];
        if let Some(d) = &self.config.deployment {
            labels.push(format!("{}={d}", self.config.deployment_label()));
        }
        let filters = HashMap::from([("label", labels)]);
        let options = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        Ok(self.docker.list_containers(Some(options)).await?)
    }

    /// The labels of every container and network this deployment makes, plus `own`.
    pub(crate) fn labels(&self, own: impl IntoIterator<Item = (String, String)>) -> HashMap<String, String> {
        let mut labels: HashMap<String, String> = self
            .config
            .extra_labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let Some(d) = &self.config.deployment {
            labels.insert(self.config.deployment_label(), d.clone());
        }
        labels.extend(own);
        labels
    }

    /// The environment every container gets: the egress proxy, when there is one.
    pub(crate) fn proxy_env(&self) -> Vec<String> {
        self.config
            .egress_proxy
            .iter()
            .flat_map(|proxy| {
                ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"].map(|k| format!("{k}={proxy}"))
            })
            .collect()
    }

    /// The limits every container belay starts runs under, a project's Sandbox and a one-off
    /// container alike: 2 CPUs, 2 GiB without swap, 512 processes, the runtime, the internal
    /// network, a read-only root with `/tmp` on a tmpfs, an init as pid 1, every capability
    /// dropped, no new privileges. Callers add their mounts (and a Sandbox its few capabilities).
    pub(crate) fn limited_host_config(&self) -> HostConfig {
        HostConfig {
            nano_cpus: Some(NANO_CPUS),
            memory: Some(MEMORY_BYTES),
            // Equal to memory: no swap.
            memory_swap: Some(MEMORY_BYTES),
            pids_limit: Some(PIDS_LIMIT),
            runtime: Some(self.config.runtime.as_str().to_owned()),
            network_mode: Some(self.config.network.clone()),
            tmpfs: Some(HashMap::from([("/tmp".to_owned(), TMP_TMPFS.to_owned())])),
            readonly_rootfs: Some(true),
            init: Some(true),
            cap_drop: Some(vec!["ALL".to_owned()]),
            security_opt: Some(vec!["no-new-privileges".to_owned()]),
            ..Default::default()
        }
    }

    fn container_body(&self, project_id: &str, name: &str) -> ContainerCreateBody {
        let labels = self.labels([
            (self.config.sandbox_label(), "1".to_owned()),
            (self.config.project_label(), project_id.to_owned()),
        ]);
        let env = self.proxy_env();
        let host_config = HostConfig {
            // An anonymous volume: it goes when the container is removed with v=true.
            mounts: Some(vec![Mount {
                target: Some(WORKSPACE.to_owned()),
                typ: Some(MountType::VOLUME),
                read_only: Some(false),
                ..Default::default()
            }]),
            cap_add: Some(["CHOWN", "DAC_OVERRIDE", "FOWNER"].map(str::to_owned).to_vec()),
            ..self.limited_host_config()
        };
        ContainerCreateBody {
            image: Some(self.config.image.clone()),
            // Explicit, so that an image's own entrypoint cannot replace the keeper process.
            entrypoint: Some(vec!["sleep".to_owned()]),
            cmd: Some(vec!["infinity".to_owned()]),
            hostname: Some(name.to_owned()),
            user: Some("0:0".to_owned()),
            working_dir: Some(WORKSPACE.to_owned()),
            labels: Some(labels),
            env: (!env.is_empty()).then_some(env),
            host_config: Some(host_config),
            ..Default::default()
        }
    }

    /// The host's address on the Sandbox network (created if missing): where a service on the
    /// host listens so that Sandboxes reach it, and nothing else does.
    pub async fn network_gateway(&self) -> Result<String, SandboxError> {
        self.ensure_network().await?;
        let network = self.docker.inspect_network(&self.config.network, None).await?;
        network
            .ipam
            .and_then(|ipam| ipam.config)
            .into_iter()
            .flatten()
            .find_map(|c| c.gateway)
            .ok_or_else(|| SandboxError::InvalidConfig(format!("network {} has no gateway", self.config.network)))
    }

    /// Two processes creating the network at the same instant can make two networks of one name
    /// (the Engine API no longer refuses duplicates); every lookup by name then fails as
    /// ambiguous. Keeps the oldest, removes the others (those with no containers), and says
    /// whether it removed any.
    async fn resolve_duplicate_networks(&self) -> Result<bool, SandboxError> {
        let filters: HashMap<&str, Vec<&str>> = HashMap::from([("name", vec![self.config.network.as_str()])]);
        let options = bollard::query_parameters::ListNetworksOptionsBuilder::default()
            .filters(&filters)
            .build();
        let mut same: Vec<_> = self
            .docker
            .list_networks(Some(options))
            .await?
            .into_iter()
            // The filter matches substrings: keep exact names only.
            .filter(|n| n.name.as_deref() == Some(self.config.network.as_str()))
            .collect();
        if same.len() < 2 {
            return Ok(false);
        }
        same.sort_by(|a, b| a.created.cmp(&b.created));
        let mut removed = false;
        for extra in &same[1..] {
            if let Some(id) = &extra.id {
                removed |= self.docker.remove_network(id).await.is_ok();
            }
        }
        Ok(removed)
    }

    pub(crate) async fn ensure_network(&self) -> Result<(), SandboxError> {
        if let Err(e) = self.docker.inspect_network(&self.config.network, None).await
            && status(&e) == Some(400)
        {
            self.resolve_duplicate_networks().await?;
        }
        match self.docker.inspect_network(&self.config.network, None).await {
            Ok(found) => {
                if found.internal != Some(true) {
                    return Err(SandboxError::InvalidConfig(format!(
                        "network {} exists but is not internal",
                        self.config.network
                    )));
                }
                return Ok(());
            }
            Err(e) if status(&e) == Some(404) => {}
            Err(e) => return Err(e.into()),
        }
        let labels = self.labels([(format!("{}.sandbox-network", self.config.label_prefix), "1".to_owned())]);
        let request = NetworkCreateRequest {
            name: self.config.network.clone(),
            driver: Some("bridge".to_owned()),
            internal: Some(true),
            labels: Some(labels),
            ..Default::default()
        };
        match self.docker.create_network(request).await {
            Ok(_) => Ok(()),
            Err(e) if status(&e) == Some(409) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Kills every process the command left: its session for root, every process of the user
    /// for an unprivileged user, with [`KILLER`] run as that user. If that does not finish in
    /// time the container is removed.
    async fn kill_leftovers(
        &self,
        project_id: &str,
        name: &str,
        user: SandboxUser,
        sid: Option<u32>,
    ) -> Result<(), SandboxError> {
        let (mode, target) = match user {
            // A session id of 1 or 0 would be the keeper's or none: never kill by it.
            SandboxUser::Root => match sid {
                Some(sid) if sid > 1 => ("session", sid.to_string()),
                _ => return Ok(()),
            },
            SandboxUser::Unprivileged(_) => ("user", "-".to_owned()),
        };
        let argv = ["sh", "-c", KILLER, "belay-kill", mode, &target];
        let attempts = async {
            loop {
                match self.run_plain(project_id, name, user, &argv).await? {
                    // The runtime could not start the killer (no pid to spare yet): try again.
                    (Some(126), _) => continue,
                    other => return Ok::<_, SandboxError>(other),
                }
            }
        };
        match tokio::time::timeout(KILL_DEADLINE, attempts).await {
            Ok(Ok((Some(0 | 1), _))) => Ok(()),
            Ok(Ok((Some(3 | 4), _))) | Err(_) => Err(self
                .give_up(project_id, name, "leftover processes survived every kill")
                .await),
            Ok(Ok((code, stderr))) => Err(SandboxError::Command {
                what: "killing leftover processes",
                code,
                stderr,
            }),
            Ok(Err(e)) => Err(e),
        }
    }

    async fn run_checked(
        &self,
        project_id: &str,
        name: &str,
        user: SandboxUser,
        argv: &[&str],
        what: &'static str,
    ) -> Result<(), SandboxError> {
        let attempts = async {
            loop {
                match self.run_plain(project_id, name, user, argv).await? {
                    // The runtime could not start the process yet (a container still starting, no
                    // pid to spare): the same exec succeeds a moment later.
                    (Some(126), _) => tokio::time::sleep(Duration::from_millis(100)).await,
                    other => return Ok::<_, SandboxError>(other),
                }
            }
        };
        let run = tokio::time::timeout(HOUSEKEEPING_DEADLINE, attempts);
        let (code, stderr) = run
            .await
            .unwrap_or_else(|_| Ok((None, "did not finish in time".to_owned())))?;
        if code != Some(0) {
            return Err(SandboxError::Command { what, code, stderr });
        }
        Ok(())
    }

    /// A short housekeeping exec without the wrapper: its exit code and stderr.
    async fn run_plain(
        &self,
        project_id: &str,
        name: &str,
        user: SandboxUser,
        argv: &[&str],
    ) -> Result<(Option<i64>, String), SandboxError> {
        let exec = self
            .docker
            .create_exec(
                name,
                CreateExecOptions {
                    cmd: Some(argv.iter().map(|s| (*s).to_owned()).collect()),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    user: Some(user.docker_user()),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| lost_or(project_id, e))?;
        let mut stderr = Tail::default();
        if let StartExecResults::Attached { mut output, .. } = self
            .docker
            .start_exec(&exec.id, None)
            .await
            .map_err(|e| lost_or(project_id, e))?
        {
            while let Some(chunk) = output.next().await {
                if let LogOutput::StdErr { message } = chunk.map_err(|e| lost_or(project_id, e))? {
                    stderr.push(&message);
                }
            }
        }
        match self.exit_code(&exec.id).await.map_err(|e| lost_or(project_id, e))? {
            Finished::Exited(code) => Ok((code, stderr.finish().0)),
            Finished::StillRunning => Err(SandboxError::Command {
                what: "a housekeeping command",
                code: None,
                stderr: "did not finish".to_owned(),
            }),
        }
    }

    async fn exit_code(&self, exec_id: &str) -> Result<Finished, DockerError> {
        let deadline = Instant::now() + EXIT_WAIT;
        loop {
            let inspected = self.docker.inspect_exec(exec_id).await?;
            if inspected.running != Some(true) {
                return Ok(Finished::Exited(inspected.exit_code));
            }
            if Instant::now() >= deadline {
                return Ok(Finished::StillRunning);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Removes a container whose commands can no longer be controlled: a Sandbox loss.
    async fn give_up(&self, project_id: &str, name: &str, why: &str) -> SandboxError {
        warn!(project.id = %project_id, container.name = %name, reason = why, "removing a Sandbox that could not be brought back under control");
        if let Err(e) = self.remove_container(name).await {
            warn!(error = %e, "removing the Sandbox failed");
        }
        if let Err(e) = self.leases.release(project_id).await {
            warn!(error = %e, "releasing the lease of a removed Sandbox failed");
        }
        SandboxError::Lost {
            project_id: project_id.to_owned(),
            reason: format!("{why}; the Sandbox was removed"),
        }
    }

    pub(crate) async fn remove_container(&self, name: &str) -> Result<bool, SandboxError> {
        let options = RemoveContainerOptionsBuilder::default().force(true).v(true).build();
        match self.docker.remove_container(name, Some(options)).await {
            Ok(()) => Ok(true),
            Err(e) if status(&e) == Some(404) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Marks a command running in the Project's Sandbox for at most `timeout` (and the grace
    /// after it). A Sandbox without a live lease (removed, or being removed) is lost.
    async fn begin_use(&self, project_id: &str, timeout: Duration) -> Result<InUse, SandboxError> {
        let exec_id = uuid::Uuid::new_v4().simple().to_string();
        let now = wall_ms();
        let live = self
            .leases
            .begin_exec(project_id, &exec_id, now, exec_expiry(now, timeout.as_millis() as i64))
            .await
            .map_err(SandboxError::Leases)?;
        if !live {
            return Err(SandboxError::Lost {
                project_id: project_id.to_owned(),
                reason: "it was removed after idling, or is being removed".to_owned(),
            });
        }
        Ok(InUse {
            leases: self.leases.clone(),
            project_id: project_id.to_owned(),
            exec_id,
            ended: false,
        })
    }
}

enum Finished {
    Exited(Option<i64>),
    StillRunning,
}

pub(crate) fn status(e: &DockerError) -> Option<u16> {
    match e {
        DockerError::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

/// A missing container (404) or one that is not running (409) is a lost Sandbox.
fn lost_or(project_id: &str, e: DockerError) -> SandboxError {
    match (status(&e), &e) {
        (Some(404 | 409), DockerError::DockerResponseServerError { message, .. }) => SandboxError::Lost {
            project_id: project_id.to_owned(),
            reason: message.clone(),
        },
        _ => SandboxError::Docker(e),
    }
}

/// The last [`OUTPUT_LIMIT`] bytes of a stream.
#[derive(Debug, Default)]
pub(crate) struct Tail {
    buf: Vec<u8>,
    truncated: bool,
}

impl Tail {
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        // Trim with slack so that many small chunks do not each move the whole buffer.
        if self.buf.len() > 2 * OUTPUT_LIMIT {
            self.cut();
        }
    }

    /// Takes `suffix` off the end; whether it was there.
    fn strip_suffix(&mut self, suffix: &[u8]) -> bool {
        let there = self.buf.ends_with(suffix);
        if there {
            self.buf.truncate(self.buf.len() - suffix.len());
        }
        there
    }

    fn cut(&mut self) {
        if self.buf.len() > OUTPUT_LIMIT {
            self.buf.drain(..self.buf.len() - OUTPUT_LIMIT);
            self.truncated = true;
        }
    }

    pub(crate) fn finish(mut self) -> (String, bool) {
        self.cut();
        (String::from_utf8_lossy(&self.buf).into_owned(), self.truncated)
    }
}

/// The output of a wrapped command: stdout, and stderr with the wrapper's first line taken off.
#[derive(Debug, Default)]
struct Collected {
    stdout: Tail,
    stderr: Tail,
    header: Vec<u8>,
    header_done: bool,
    sid: Option<u32>,
}

impl Collected {
    fn push(&mut self, chunk: LogOutput) {
        match chunk {
            LogOutput::StdOut { message } | LogOutput::Console { message } => self.stdout.push(&message),
            LogOutput::StdErr { message } => self.push_stderr(&message),
            LogOutput::StdIn { .. } => {}
        }
    }

    fn push_stderr(&mut self, bytes: &[u8]) {
        if self.header_done {
            return self.stderr.push(bytes);
        }
        self.header.extend_from_slice(bytes);
        if let Some(newline) = self.header.iter().position(|b| *b == b'\n') {
            let line = &self.header[..newline];
            self.sid = line
                .strip_prefix(SID_HEADER)
                .and_then(|n| std::str::from_utf8(n).ok())
                .and_then(|n| n.parse().ok());
            let rest = if self.sid.is_some() {
                self.header[newline + 1..].to_vec()
            } else {
                std::mem::take(&mut self.header)
            };
            self.header_done = true;
            self.header.clear();
            self.stderr.push(&rest);
        } else if self.header.len() > 64 {
            // Not the wrapper's line (the wrapper did not run): it is all the command's.
            self.header_done = true;
            let all = std::mem::take(&mut self.header);
            self.stderr.push(&all);
        }
    }

    fn sid(&self) -> Option<u32> {
        self.sid
    }

    /// Takes [`ALONE_TRAILER`] off the end of stderr (after the wrapper's header); whether it
    /// was there.
    fn take_alone(&mut self) -> bool {
        self.sid.is_some() && self.header_done && self.stderr.strip_suffix(ALONE_TRAILER)
    }

    fn finish(mut self) -> (String, bool, String, bool) {
        if !self.header_done {
            let rest = std::mem::take(&mut self.header);
            self.stderr.push(&rest);
        }
        let (stdout, stdout_truncated) = self.stdout.finish();
        let (stderr, stderr_truncated) = self.stderr.finish();
        (stdout, stdout_truncated, stderr, stderr_truncated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_id_becomes_its_container_name() {
        assert_eq!(container_name("proj_0a1b2c").unwrap(), "proj-0a1b2c");
        assert_eq!(
            container_name("proj_3f2e1c4a-1b2c-4d5e-8f90-a1b2c3d4e5f6").unwrap(),
            "proj-3f2e1c4a-1b2c-4d5e-8f90-a1b2c3d4e5f6"
        );
        for bad in ["proj_", "0a1b", "proj_A1", "proj_a/b", "run_0a1b", "proj_a b"] {
            assert!(
                matches!(container_name(bad), Err(SandboxError::InvalidProjectId(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn each_use_has_its_own_directory() {
        assert_eq!(
            run_dir("run_0123456789abcdef0123456789abcdef").unwrap(),
            "/workspace/89abcdef0123456789abcdef"
        );
        assert_eq!(run_dir("run_ab").unwrap(), "/workspace/run_ab");
        assert_eq!(candidate_dir("cand_9f").unwrap(), "/workspace/cand-9f");
        assert_eq!(candidate_dir("9f").unwrap(), "/workspace/cand-9f");
        assert_eq!(edit_dir("00ff").unwrap(), "/workspace/edit-00ff");
        assert!(run_dir("../etc").is_err());
        assert!(candidate_dir("a/b").is_err());
        assert!(edit_dir("xyz").is_err());
        assert!(edit_dir("").is_err());
    }

    #[test]
    fn commands_run_only_below_the_workspace() {
        for good in ["/workspace", "/workspace/cand-9f", "/workspace/edit-00ff/src/lib"] {
            assert!(check_dir(good).is_ok(), "{good}");
        }
        for bad in [
            "/",
            "/etc",
            "/workspace/../etc",
            "/workspacex",
            "/workspace/",
            "/workspace//a",
            "/workspace/a/./b",
            "workspace/a",
            "/workspace/a b",
        ] {
            assert!(check_dir(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_session_uids_are_unprivileged_users() {
        assert!(SandboxUser::Unprivileged(0).check().is_err());
        assert!(SandboxUser::Unprivileged(65534).check().is_err());
        assert!(SandboxUser::SANDBOX.check().is_ok());
        assert_eq!(SandboxUser::Root.docker_user(), "0:0");
        assert_eq!(SandboxUser::Unprivileged(1001).docker_user(), "1001:1001");
    }

    #[test]
    fn the_configuration_comes_from_the_environment() {
        let vars = HashMap::from([
            ("BELAY_SANDBOX_IMAGE", "registry.example/sbx:7"),
            ("BELAY_SANDBOX_RUNTIME", "runsc"),
            ("BELAY_SANDBOX_NETWORK", ""),
            ("BELAY_SANDBOX_LABELS", "belay.test=1, team=core"),
        ]);
        let config = SandboxConfig::from_lookup(|k| vars.get(k).map(|v| (*v).to_owned())).unwrap();
        assert_eq!(config.image, "registry.example/sbx:7");
        assert_eq!(
            config.extra_labels,
            BTreeMap::from([
                ("belay.test".to_owned(), "1".to_owned()),
                ("team".to_owned(), "core".to_owned())
            ])
        );
        assert!(SandboxConfig::from_lookup(|k| (k == "BELAY_SANDBOX_LABELS").then(|| "novalue".to_owned())).is_err());
        assert_eq!(config.runtime, Runtime::Runsc);
        assert_eq!(config.network, DEFAULT_NETWORK);
        assert_eq!(config.max_live, SANDBOX_MAX);
        assert!(SandboxConfig::from_lookup(|k| (k == "BELAY_SANDBOX_RUNTIME").then(|| "kata".to_owned())).is_err());
    }

    #[test]
    fn output_keeps_its_last_64_kib() {
        let mut tail = Tail::default();
        for i in 0..300_000u32 {
            tail.push(&[b'a' + u8::try_from(i % 26).unwrap()]);
        }
        tail.push(b"END");
        let (text, truncated) = tail.finish();
        assert!(truncated);
        assert_eq!(text.len(), OUTPUT_LIMIT);
        assert!(text.ends_with("END"));
        let (short, truncated) = {
            let mut t = Tail::default();
            t.push(b"hello");
            t.finish()
        };
        assert_eq!((short.as_str(), truncated), ("hello", false));
    }

    #[test]
    fn the_wrappers_session_line_is_taken_off_stderr() {
        let mut c = Collected::default();
        c.push(LogOutput::StdErr {
            message: "belay-sid".into(),
        });
        c.push(LogOutput::StdOut {
            message: "out\n".into(),
        });
        c.push(LogOutput::StdErr {
            message: "=42\nwarning: x\n".into(),
        });
        assert_eq!(c.sid(), Some(42));
        let (stdout, _, stderr, _) = c.finish();
        assert_eq!((stdout.as_str(), stderr.as_str()), ("out\n", "warning: x\n"));

        let mut c = Collected::default();
        c.push(LogOutput::StdErr {
            message: "OCI runtime exec failed\n".into(),
        });
        assert_eq!(c.sid(), None);
        assert_eq!(c.finish().2, "OCI runtime exec failed\n");
    }

    #[test]
    fn the_runners_alone_line_is_taken_off_stderr_only_at_its_end() {
        let stderr = |chunks: &[&str]| {
            let mut c = Collected::default();
            for chunk in chunks {
                c.push(LogOutput::StdErr {
                    message: chunk.to_string().into(),
                });
            }
            let alone = c.take_alone();
            (alone, c.finish().2)
        };
        assert_eq!(
            stderr(&["belay-sid=42\n", "warn", "belay-al", "one\n"]),
            (true, "warn".to_owned())
        );
        assert_eq!(stderr(&["belay-sid=42\nbelay-alone\n"]), (true, String::new()));
        // Anywhere but at the end it is the command's own output.
        assert_eq!(
            stderr(&["belay-sid=42\nbelay-alone\nlater\n"]),
            (false, "belay-alone\nlater\n".to_owned())
        );
        // Without the wrapper's session line, nothing is the runner's.
        assert_eq!(stderr(&["belay-alone\n"]), (false, "belay-alone\n".to_owned()));
    }

    /// Against the real Docker Engine and the image of scripts/build-sandbox-image.sh.
    mod engine {
        use super::*;
        use std::process::Command;
        use std::sync::OnceLock;
        use std::sync::atomic::{AtomicU32, Ordering};

        /// One Docker test at a time: they share two cores, and the measurements need quiet.
        static ENGINE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        static NEXT: AtomicU32 = AtomicU32::new(0);

        fn image() -> &'static str {
            static IMAGE: OnceLock<String> = OnceLock::new();
            IMAGE.get_or_init(|| {
                let image = belay_testkit::sandbox_image(DEFAULT_IMAGE);
                let present = |image: &str| Command::new("docker").args(["image", "inspect", image]).output().is_ok_and(|o| o.status.success());
                if present(&image) {
                    return image;
                }
                assert_eq!(image, DEFAULT_IMAGE, "the Sandbox image {image} (BELAY_SANDBOX_IMAGE) does not exist");
                let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
                let script = [manifest.join("scripts/build-sandbox-image.sh"), manifest.join("../scripts/build-sandbox-image.sh")]
                    .into_iter()
                    .find(|p| p.exists())
                    .unwrap_or_else(|| panic!("the Sandbox image {DEFAULT_IMAGE} does not exist and scripts/build-sandbox-image.sh was not found to build it"));
                let built = Command::new("bash").arg(&script).output().expect("running scripts/build-sandbox-image.sh");
                assert!(
                    built.status.success() && present(&image),
                    "the Sandbox image {DEFAULT_IMAGE} does not exist and {} could not build it:\n{}",
                    script.display(),
                    String::from_utf8_lossy(&built.stderr)
                );
                image
            })
        }

        /// A Sandboxes of its own (label prefix, network, project ids) that removes everything it
        /// made when dropped, also when the test fails.
        struct Fixture {
            sandboxes: Sandboxes,
            tag: String,
        }

        impl Fixture {
            async fn new(max_live: usize) -> Fixture {
                let image = image().to_owned();
                let tag = format!("t{}x{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
                let config = SandboxConfig {
                    image,
                    network: format!("belay-test-sbx-{tag}"),
                    max_live,
                    label_prefix: format!("belay.test.{tag}"),
                    extra_labels: BTreeMap::from([("belay.test".to_owned(), "1".to_owned())]),
                    ..SandboxConfig::default()
                };
                let sandboxes = Sandboxes::connect(config)
                    .await
                    .expect("the Docker Engine must be reachable (DOCKER_HOST or /var/run/docker.sock)");
                Fixture { sandboxes, tag }
            }

            fn project(&self, n: u32) -> String {
                format!("proj_{}p{n}", self.tag)
            }

            async fn ps(&self, project: &str) -> String {
                let out = self
                    .sandboxes
                    .exec(
                        project,
                        WORKSPACE,
                        &argv(&["ps", "-eo", "pid,sid,user,args"]),
                        SandboxUser::Root,
                        Duration::from_secs(10),
                    )
                    .await
                    .unwrap();
                assert!(out.success(), "{out:?}");
                out.stdout
            }
        }

        impl Drop for Fixture {
            fn drop(&mut self) {
                let label = format!("label={}=1", self.sandboxes.config.sandbox_label());
                if let Ok(out) = Command::new("docker").args(["ps", "-aq", "--filter", &label]).output() {
                    let ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
                        .split_whitespace()
                        .map(str::to_owned)
                        .collect();
                    if !ids.is_empty() {
                        let _ = Command::new("docker").args(["rm", "-f", "-v"]).args(&ids).output();
                    }
                }
                let _ = Command::new("docker")
                    .args(["network", "rm", &self.sandboxes.config.network])
                    .output();
            }
        }

        fn argv(args: &[&str]) -> Vec<String> {
            args.iter().map(|s| (*s).to_owned()).collect()
        }

        fn bash(script: &str) -> Vec<String> {
            argv(&["bash", "-c", script])
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn two_networks_of_one_name_made_by_a_race_are_resolved_to_one() {
            let _engine = ENGINE.lock().await;
            let f = Fixture::new(SANDBOX_MAX).await;
            let name = f.sandboxes.config.network.clone();
            // What two workers creating the network at the same instant leave behind.
            for _ in 0..2 {
                f.sandboxes
                    .docker
                    .create_network(NetworkCreateRequest {
                        name: name.clone(),
                        driver: Some("bridge".to_owned()),
                        internal: Some(true),
                        labels: Some(HashMap::from([("belay.test".to_owned(), "1".to_owned())])),
                        ..Default::default()
                    })
                    .await
                    .unwrap();
            }
            let listed = Command::new("docker")
                .args(["network", "ls", "-q", "--filter", &format!("name=^{name}$")])
                .output()
                .unwrap();
            assert_eq!(
                String::from_utf8_lossy(&listed.stdout).lines().count(),
                2,
                "the race left two networks"
            );
            let project = f.project(1);
            f.sandboxes.ensure(&project).await.unwrap();
            let listed = Command::new("docker")
                .args(["network", "ls", "-q", "--filter", &format!("name=^{name}$")])
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&listed.stdout).lines().count(), 1);
            assert!(f.sandboxes.network_gateway().await.is_ok());
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_project_gets_one_container_with_the_sandbox_limits() {
            let _engine = ENGINE.lock().await;
            let f = Fixture::new(SANDBOX_MAX).await;
            let project = f.project(1);
            let first = f.sandboxes.ensure(&project).await.unwrap();
            assert!(first.fresh);
            assert_eq!(first.name, container_name(&project).unwrap());
            let again = f.sandboxes.ensure(&project).await.unwrap();
            assert_eq!((again.id.as_str(), again.fresh), (first.id.as_str(), false));

            let docker = &f.sandboxes.docker;
            let inspected = docker.inspect_container(&first.name, None).await.unwrap();
            let host = inspected.host_config.unwrap();
            assert_eq!(host.memory, Some(2 << 30));
            assert_eq!(host.memory_swap, Some(2 << 30));
            assert_eq!(host.nano_cpus, Some(2_000_000_000));
            assert_eq!(host.pids_limit, Some(512));
            assert_eq!(host.runtime.as_deref(), Some("runc"));
            assert_eq!(host.init, Some(true));
            assert_eq!(host.readonly_rootfs, Some(true));
            assert_eq!(host.cap_drop, Some(vec!["ALL".to_owned()]));
            assert_eq!(host.security_opt, Some(vec!["no-new-privileges".to_owned()]));
            let network = docker.inspect_network(&f.sandboxes.config.network, None).await.unwrap();
            assert_eq!(network.internal, Some(true));

            let limits = f
                .sandboxes
                .exec(
                    &project,
                    WORKSPACE,
                    &argv(&[
                        "cat",
                        "/sys/fs/cgroup/pids/pids.max",
                        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
                        "/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes",
                    ]),
                    SandboxUser::Root,
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
            assert_eq!(limits.stdout, "512\n2147483648\n2147483648\n", "{limits:?}");

            let out = f
                .sandboxes
                .exec(
                    &project,
                    WORKSPACE,
                    &bash("echo out; echo err >&2; id -u; touch /usr/x 2>/dev/null || echo read-only; exit 3"),
                    SandboxUser::Root,
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
            assert_eq!(
                (out.stdout.as_str(), out.stderr.as_str(), out.exit_code, out.timed_out),
                ("out\n0\nread-only\n", "err\n", Some(3), false)
            );

            // A session directory belongs to its user, who can work in it but not outside it.
            let dir = edit_dir("00ff").unwrap();
            f.sandboxes
                .prepare_dir(&project, &dir, SandboxUser::SANDBOX)
                .await
                .unwrap();
            let out = f
                .sandboxes
                .exec(
                    &project,
                    &dir,
                    &bash("id -u; touch mine && echo wrote; touch /workspace/x 2>/dev/null || echo refused"),
                    SandboxUser::SANDBOX,
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
            assert_eq!(out.stdout, "1000\nwrote\nrefused\n", "{out:?}");
            f.sandboxes.remove_dir(&project, &dir).await.unwrap();
            let gone = f
                .sandboxes
                .exec(
                    &project,
                    WORKSPACE,
                    &argv(&["ls", "-A", WORKSPACE]),
                    SandboxUser::Root,
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
            assert_eq!(gone.stdout, "");

            let missing = f
                .sandboxes
                .exec(
                    &project,
                    "/workspace/missing",
                    &argv(&["true"]),
                    SandboxUser::Root,
                    Duration::from_secs(5),
                )
                .await;
            assert!(
                matches!(&missing, Err(SandboxError::MissingDirectory(d)) if d == "/workspace/missing"),
                "{missing:?}"
            );
            assert!(matches!(
                f.sandboxes
                    .exec(
                        &f.project(9),
                        WORKSPACE,
                        &argv(&["true"]),
                        SandboxUser::Root,
                        Duration::from_secs(5)
                    )
                    .await,
                Err(SandboxError::Lost { .. })
            ));
            assert!(f.sandboxes.remove(&project).await.unwrap());
            assert!(!f.sandboxes.remove(&project).await.unwrap());
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn each_private_directory_has_a_user_of_its_own_who_alone_can_read_it() {
            let f = Fixture::new(4).await;
            let project = f.project(0);
            f.sandboxes.ensure(&project).await.unwrap();
            let (a, b) = (run_dir("trun_aaaa").unwrap(), run_dir("trun_bbbb").unwrap());
            let ua = f.sandboxes.fresh_private_dir(&project, &a).await.unwrap();
            let ub = f.sandboxes.fresh_private_dir(&project, &b).await.unwrap();
            assert_ne!(ua, ub);
            for u in [ua, ub] {
                assert!(
                    matches!(u, SandboxUser::Unprivileged(uid) if WORKSPACE_UIDS.contains(&uid)),
                    "{u:?}"
                );
            }
            // Made again, a directory gets a uid no other directory holds.
            let again = f.sandboxes.fresh_private_dir(&project, &a).await.unwrap();
            assert_ne!(again, ub);
            let ua = again;
            let e = edit_dir("00aa").unwrap();
            f.sandboxes
                .prepare_dir(&project, &e, SandboxUser::SANDBOX)
                .await
                .unwrap();
            let uses = [(a.as_str(), ua), (b.as_str(), ub), (e.as_str(), SandboxUser::SANDBOX)];
            for (dir, user) in uses {
                let out = f
                    .sandboxes
                    .exec(
                        &project,
                        dir,
                        &bash("echo secret > s && cat s && echo \"$HOME\" && stat -c %a:%u \"$HOME\" ."),
                        user,
                        Duration::from_secs(10),
                    )
                    .await
                    .unwrap();
                let SandboxUser::Unprivileged(uid) = user else {
                    unreachable!()
                };
                assert_eq!(
                    out.stdout,
                    format!("secret\n/tmp/belay-home-{uid}\n700:{uid}\n700:{uid}\n"),
                    "{dir}: {out:?}"
                );
            }
            for (dir, user) in uses {
                for (other, _) in uses.iter().filter(|(o, _)| *o != dir) {
                    let out = f
                        .sandboxes
                        .exec(
                            &project,
                            dir,
                            &bash(&format!("cat {other}/s; ls {other}")),
                            user,
                            Duration::from_secs(10),
                        )
                        .await
                        .unwrap();
                    assert!(
                        !out.stdout.contains("secret") && out.stderr.contains("Permission denied"),
                        "{dir} read {other}: {out:?}"
                    );
                }
            }
            // The checkout's owner is whom its commands run as; no checkout, no owner.
            assert_eq!(f.sandboxes.checkout_owner(&project, &a).await.unwrap(), None);
            let init = f
                .sandboxes
                .exec(&project, &a, &argv(&["git", "init", "-q"]), ua, Duration::from_secs(10))
                .await
                .unwrap();
            assert!(init.success(), "{init:?}");
            assert_eq!(f.sandboxes.checkout_owner(&project, &a).await.unwrap(), Some(ua));
            f.sandboxes.remove(&project).await.unwrap();
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_fork_bomb_is_contained_and_the_same_container_then_runs_echo() {
            let _engine = ENGINE.lock().await;
            let f = Fixture::new(SANDBOX_MAX).await;
            let project = f.project(1);
            let container = f.sandboxes.ensure(&project).await.unwrap();
            // The bomb runs in the background while the command itself waits 3 s.
            let bomb = f
                .sandboxes
                .exec(
                    &project,
                    WORKSPACE,
                    &bash(":(){ :|:& };: ; sleep 3"),
                    SandboxUser::Root,
                    Duration::from_secs(30),
                )
                .await
                .unwrap();
            assert!(
                bomb.stderr.contains("Resource temporarily unavailable"),
                "the bomb never hit the pids limit: {bomb:?}"
            );
            let events = f
                .sandboxes
                .exec(
                    &project,
                    WORKSPACE,
                    &argv(&["cat", "/sys/fs/cgroup/pids/pids.events"]),
                    SandboxUser::Root,
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
            let refused: u64 = events
                .stdout
                .trim()
                .strip_prefix("max ")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            assert!(refused > 0, "{events:?}");

            let ok = f
                .sandboxes
                .exec(
                    &project,
                    WORKSPACE,
                    &argv(&["echo", "ok"]),
                    SandboxUser::Root,
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
            assert_eq!(ok.stdout, "ok\n", "{ok:?}");
            assert_eq!(
                f.sandboxes.ensure(&project).await.unwrap().id,
                container.id,
                "the same container"
            );
            let ps = f.ps(&project).await;
            // The header, the keeper's two processes, and nothing of the bomb: the `ps` exec's
            // own processes (its session) do not count.
            let sid = |l: &str| l.split_whitespace().nth(1).map(str::to_owned);
            let own = ps.lines().find(|l| l.contains(" ps -eo ")).and_then(sid);
            let others = ps.lines().filter(|l| sid(l) != own).count();
            assert!(own.is_some() && others <= 3, "the bomb left processes behind:\n{ps}");

            // The same from an edit session's unprivileged user.
            let dir = edit_dir("0c").unwrap();
            f.sandboxes
                .prepare_dir(&project, &dir, SandboxUser::SANDBOX)
                .await
                .unwrap();
            let bomb = f
                .sandboxes
                .exec(
                    &project,
                    &dir,
                    &bash(":(){ :|:& };: ; sleep 3"),
                    SandboxUser::SANDBOX,
                    Duration::from_secs(30),
                )
                .await
                .unwrap();
            assert!(
                bomb.stderr.contains("Resource temporarily unavailable"),
                "the bomb never hit the pids limit: {bomb:?}"
            );
            let ok = f
                .sandboxes
                .exec(
                    &project,
                    &dir,
                    &argv(&["echo", "ok"]),
                    SandboxUser::SANDBOX,
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
            assert_eq!(ok.stdout, "ok\n", "{ok:?}");
            assert_eq!(
                f.sandboxes.ensure(&project).await.unwrap().id,
                container.id,
                "the same container"
            );
            let ps = f.ps(&project).await;
            let own = ps.lines().find(|l| l.contains(" ps -eo ")).and_then(sid);
            let others = ps.lines().filter(|l| sid(l) != own).count();
            assert!(own.is_some() && others <= 3, "the bomb left processes behind:\n{ps}");
            println!("fork bomb: {refused} forks refused at the pids limit; afterwards:\n{ps}");
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn allocating_past_2_gib_is_oom_killed_and_the_container_serves_the_next_command() {
            let _engine = ENGINE.lock().await;
            let f = Fixture::new(SANDBOX_MAX).await;
            let project = f.project(1);
            let container = f.sandboxes.ensure(&project).await.unwrap();
            // tail keeps the last 10 lines of 3 GiB without a newline, that is all of it.
            let hog = f
                .sandboxes
                .exec(
                    &project,
                    WORKSPACE,
                    &bash("head -c 3G /dev/zero | tail > /dev/null"),
                    SandboxUser::Root,
                    Duration::from_secs(120),
                )
                .await
                .unwrap();
            assert_eq!((hog.exit_code, hog.timed_out), (Some(137), false), "{hog:?}");
            let oom = f
                .sandboxes
                .exec(
                    &project,
                    WORKSPACE,
                    &argv(&["grep", "oom_kill ", "/sys/fs/cgroup/memory/memory.oom_control"]),
                    SandboxUser::Root,
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
            assert_ne!(oom.stdout.trim(), "oom_kill 0", "{oom:?}");

            let ok = f
                .sandboxes
                .exec(
                    &project,
                    WORKSPACE,
                    &argv(&["echo", "ok"]),
                    SandboxUser::Root,
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
            assert_eq!(ok.stdout, "ok\n");
            assert_eq!(
                f.sandboxes.ensure(&project).await.unwrap().id,
                container.id,
                "the same container"
            );
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_command_past_its_timeout_is_killed_with_its_whole_tree() {
            let _engine = ENGINE.lock().await;
            let f = Fixture::new(SANDBOX_MAX).await;
            let project = f.project(1);
            f.sandboxes.ensure(&project).await.unwrap();
            let started = Instant::now();
            let out = f
                .sandboxes
                .exec(
                    &project,
                    WORKSPACE,
                    &argv(&["sleep", "300"]),
                    SandboxUser::Root,
                    Duration::from_secs(2),
                )
                .await
                .unwrap();
            let took = started.elapsed();
            assert!(out.timed_out, "{out:?}");
            assert!(took < Duration::from_secs(10), "took {took:?}");
            // A tree: a shell with a child in the foreground and one in the background.
            let tree = f
                .sandboxes
                .exec(
                    &project,
                    WORKSPACE,
                    &bash("sleep 301 & sleep 302; echo never"),
                    SandboxUser::Root,
                    Duration::from_secs(2),
                )
                .await
                .unwrap();
            assert!(tree.timed_out && !tree.stdout.contains("never"), "{tree:?}");
            let ps = f.ps(&project).await;
            assert!(!ps.contains("sleep 30"), "a sleep survived its timeout:\n{ps}");
            println!("sleep 300 with a 2 s timeout returned after {took:?}");
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_root_command_that_leaves_nothing_keeps_its_output_exit_code_and_messages() {
            let _engine = ENGINE.lock().await;
            let f = Fixture::new(SANDBOX_MAX).await;
            let project = f.project(1);
            f.sandboxes.ensure(&project).await.unwrap();
            let run = |argv: Vec<String>| {
                let (sandboxes, project) = (&f.sandboxes, &project);
                async move {
                    sandboxes
                        .exec(project, WORKSPACE, &argv, SandboxUser::Root, Duration::from_secs(30))
                        .await
                        .unwrap()
                }
            };
            let out = run(bash("echo out; echo err >&2; exit 3")).await;
            assert_eq!(
                (out.stdout.as_str(), out.stderr.as_str(), out.exit_code),
                ("out\n", "err\n", Some(3)),
                "{out:?}"
            );
            // `true` is the program, not the shell's builtin; a missing one is timeout's 127.
            let out = run(argv(&["true"])).await;
            assert_eq!((out.stderr.as_str(), out.exit_code), ("", Some(0)), "{out:?}");
            let out = run(argv(&["no-such-command"])).await;
            assert_eq!(out.exit_code, Some(127), "{out:?}");
            assert_eq!(
                out.stderr,
                "timeout: failed to run command 'no-such-command': No such file or directory\n"
            );
            // Killed by a signal: its code, and no line the runner's shell would add.
            let out = run(bash("kill -9 $$")).await;
            assert_eq!((out.stderr.as_str(), out.exit_code), ("", Some(137)), "{out:?}");
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_background_process_does_not_outlive_its_command() {
            let _engine = ENGINE.lock().await;
            let f = Fixture::new(SANDBOX_MAX).await;
            let project = f.project(1);
            f.sandboxes.ensure(&project).await.unwrap();
            let started = Instant::now();
            let out = f
                .sandboxes
                .exec(
                    &project,
                    WORKSPACE,
                    &bash("sleep 311 & nohup sleep 312 >/dev/null 2>&1 & echo started"),
                    SandboxUser::Root,
                    Duration::from_secs(60),
                )
                .await
                .unwrap();
            assert_eq!(
                (out.stdout.as_str(), out.exit_code, out.timed_out),
                ("started\n", Some(0), false),
                "{out:?}"
            );
            let root_took = started.elapsed();

            // An edit session's user: even a process in a new session of its own is killed.
            let dir = edit_dir("0b").unwrap();
            f.sandboxes
                .prepare_dir(&project, &dir, SandboxUser::SANDBOX)
                .await
                .unwrap();
            let out = f
                .sandboxes
                .exec(
                    &project,
                    &dir,
                    &bash("setsid sleep 313 & (sleep 314 &) ; echo started"),
                    SandboxUser::SANDBOX,
                    Duration::from_secs(60),
                )
                .await
                .unwrap();
            assert_eq!(out.stdout, "started\n", "{out:?}");
            let ps = f.ps(&project).await;
            assert!(
                !ps.contains("sleep 31"),
                "a background process outlived its command:\n{ps}"
            );
            println!("a command leaving a background sleep returned after {root_took:?}");
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn no_command_reaches_an_address_outside_the_sandbox_network() {
            let _engine = ENGINE.lock().await;
            let f = Fixture::new(SANDBOX_MAX).await;
            let project = f.project(1);
            f.sandboxes.ensure(&project).await.unwrap();
            // Opens (and would at once close) a TCP connection; sends no data.
            let started = Instant::now();
            let out = f
                .sandboxes
                .exec(
                    &project,
                    WORKSPACE,
                    &bash("timeout 3 bash -c ': > /dev/tcp/1.1.1.1/53' && echo connected || echo no-route"),
                    SandboxUser::Root,
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
            assert_eq!(out.stdout, "no-route\n", "{out:?}");
            println!(
                "connect to 1.1.1.1:53 failed after {:?}: {}",
                started.elapsed(),
                out.stderr.trim()
            );
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_fifth_container_is_refused_with_container_unavailable() {
            let _engine = ENGINE.lock().await;
            let f = Fixture::new(SANDBOX_MAX).await;
            for n in 1..=4 {
                f.sandboxes.ensure(&f.project(n)).await.unwrap();
            }
            let fifth = f.sandboxes.ensure(&f.project(5)).await;
            assert!(
                matches!(fifth, Err(SandboxError::ContainerUnavailable { live: 4, max: 4 })),
                "{fifth:?}"
            );
            assert!(fifth.unwrap_err().is_retryable());
            // The four keep working, and a freed slot can be taken.
            assert!(!f.sandboxes.ensure(&f.project(2)).await.unwrap().fresh);
            f.sandboxes.remove(&f.project(1)).await.unwrap();
            assert!(f.sandboxes.ensure(&f.project(5)).await.unwrap().fresh);
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn an_idle_container_is_removed_with_its_disk_and_the_next_ensure_starts_a_fresh_one() {
            let _engine = ENGINE.lock().await;
            let f = Fixture::new(SANDBOX_MAX).await;
            let project = f.project(1);
            let first = f.sandboxes.ensure(&project).await.unwrap();
            f.sandboxes
                .exec(
                    &project,
                    WORKSPACE,
                    &bash("echo kept > /workspace/file"),
                    SandboxUser::Root,
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
            let docker = &f.sandboxes.docker;
            let volume = docker
                .inspect_container(&first.name, None)
                .await
                .unwrap()
                .mounts
                .unwrap()
                .into_iter()
                .find(|m| m.destination.as_deref() == Some(WORKSPACE))
                .and_then(|m| m.name)
                .unwrap();

            // Not yet idle for two minutes: kept.
            assert!(
                f.sandboxes
                    .reap_idle(Instant::now() + Duration::from_secs(60), IDLE_AFTER)
                    .await
                    .unwrap()
                    .is_empty()
            );
            let reaped = f
                .sandboxes
                .reap_idle(Instant::now() + IDLE_AFTER + Duration::from_secs(1), IDLE_AFTER)
                .await
                .unwrap();
            assert_eq!(reaped, vec![project.clone()]);
            assert_eq!(
                docker
                    .inspect_container(&first.name, None)
                    .await
                    .err()
                    .as_ref()
                    .and_then(status),
                Some(404)
            );
            assert_eq!(
                docker.inspect_volume(&volume).await.err().as_ref().and_then(status),
                Some(404),
                "the workspace volume survived"
            );

            let next = f.sandboxes.ensure(&project).await.unwrap();
            assert!(next.fresh && next.id != first.id);
            let ls = f
                .sandboxes
                .exec(
                    &project,
                    WORKSPACE,
                    &argv(&["ls", "-A", WORKSPACE]),
                    SandboxUser::Root,
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
            assert_eq!(ls.stdout, "", "a fresh Sandbox starts with an empty workspace");
        }
    }
}
