//! Files and small scripts in a Sandbox directory, over exec: a Sandbox's disk is reachable only
//! through its container, and only with the tools the image carries (`sh`, `stat`, `dd`,
//! `base64`, `git`). Reads and writes go in chunks that fit an exec's argument and output limits.

use crate::{ExecOutput, PRIVATE_DIR, SandboxError, SandboxUser, Sandboxes, WORKSPACE, WORKSPACE_UIDS, check_dir};
use base64::Engine;
use std::time::Duration;

const CHUNK_READ: usize = 45 * 1024;
const CHUNK_WRITE: usize = 90 * 1024;
const STEP: Duration = Duration::from_secs(30);

/// Before a build: the working tree's files (tracked and untracked, not ignored) as a tree in a
/// side index, and the list of ignored paths.
const SNAPSHOT: &str = r#"set -e
export GIT_INDEX_FILE=.git/belay-build-index
rm -f "$GIT_INDEX_FILE"
git add -A
git write-tree > .git/belay-build-tree
git ls-files -o -i --exclude-standard --directory | sort > .git/belay-build-ignored"#;

/// After a build: puts back every file the snapshot holds, removes files it does not, and removes
/// ignored paths that were not there before. Prints what it discarded.
const RESTORE: &str = r#"set -e
export GIT_INDEX_FILE=.git/belay-build-index
tree=$(cat .git/belay-build-tree)
git add -A
git diff --cached --name-only "$tree"
git ls-files -o -i --exclude-standard --directory | sort > .git/belay-build-ignored-after
comm -13 .git/belay-build-ignored .git/belay-build-ignored-after
git read-tree "$tree"
git checkout-index -a -f
git clean -fdq
comm -13 .git/belay-build-ignored .git/belay-build-ignored-after | while IFS= read -r p; do rm -rf -- "$p"; done
rm -f "$GIT_INDEX_FILE" .git/belay-build-tree .git/belay-build-ignored .git/belay-build-ignored-after"#;

impl Sandboxes {
    /// Runs `sh -c script` with `args` as `$1 …` in `dir`.
    pub async fn sh(
        &self,
        project: &str,
        dir: &str,
        user: SandboxUser,
        script: &str,
        args: &[&str],
        timeout: Duration,
    ) -> Result<ExecOutput, SandboxError> {
        let mut argv = vec!["sh".to_owned(), "-c".to_owned(), script.to_owned(), "belay".to_owned()];
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        self.exec(project, dir, &argv, user, timeout).await
    }

    /// Makes `dir` an empty directory owned by `owner`, removing whatever an earlier use (a lost
    /// or half-done checkout) left there.
    pub async fn fresh_dir(&self, project: &str, dir: &str, owner: SandboxUser) -> Result<(), SandboxError> {
        self.remove_dir(project, dir).await?;
        self.prepare_dir(project, dir, owner).await
    }

    /// Makes `dir` an empty directory of a user of its own, removing whatever an earlier use left
    /// there: a uid of [`WORKSPACE_UIDS`] that owns no other directory of the Sandbox (so no
    /// command of another directory's user can read it, nor it theirs), with a fresh home.
    /// Answers the user, who is also the directory's owner from then on
    /// ([`Sandboxes::checkout_owner`]).
    pub async fn fresh_private_dir(&self, project: &str, dir: &str) -> Result<SandboxUser, SandboxError> {
        check_dir(dir)?;
        if dir == WORKSPACE {
            return Err(SandboxError::InvalidDirectory(dir.to_owned()));
        }
        // The search starts at a place of the directory's own, so uids are seldom reused.
        let span = WORKSPACE_UIDS.end - WORKSPACE_UIDS.start;
        let start = WORKSPACE_UIDS.start + fnv1a(dir.as_bytes()) % span;
        let out = self
            .sh(
                project,
                WORKSPACE,
                SandboxUser::Root,
                PRIVATE_DIR,
                &[
                    dir,
                    &WORKSPACE_UIDS.start.to_string(),
                    &WORKSPACE_UIDS.end.to_string(),
                    &start.to_string(),
                ],
                STEP,
            )
            .await?;
        let uid = out.stdout.trim().parse::<u32>().ok().filter(|_| out.success());
        match uid {
            Some(uid) if WORKSPACE_UIDS.contains(&uid) => Ok(SandboxUser::Unprivileged(uid)),
            _ => Err(SandboxError::NotStarted(format!(
                "making {dir} a directory of its own user failed ({}): {}{}",
                belay_domain::check::exit_words(out.exit_code),
                out.stdout.trim(),
                out.stderr.trim()
            ))),
        }
    }

    /// Ensures the project's Sandbox and says whether `dir` still holds a checkout: `false` when
    /// the Sandbox was replaced (a fresh one starts empty) or the directory is gone.
    pub async fn checkout_present(&self, project: &str, dir: &str) -> Result<bool, SandboxError> {
        Ok(self.checkout_owner(project, dir).await?.is_some())
    }

    /// As [`Sandboxes::checkout_present`], answering the user who owns the checkout (whom its
    /// commands run as), or `None` when there is none.
    pub async fn checkout_owner(&self, project: &str, dir: &str) -> Result<Option<SandboxUser>, SandboxError> {
        let container = self.ensure(project).await?;
        if container.fresh {
            return Ok(None);
        }
        let out = self
            .sh(
                project,
                WORKSPACE,
                SandboxUser::Root,
                r#"if [ -d "$1/.git" ]; then stat -c %u -- "$1"; fi"#,
                &[dir],
                STEP,
            )
            .await?;
        Ok(out
            .stdout
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|_| out.success())
            .map(SandboxUser::of_uid))
    }

    /// A file's bytes, read as `user`, or why it cannot be read (not a file, over `max_bytes`).
    pub async fn read_file(
        &self,
        project: &str,
        dir: &str,
        user: SandboxUser,
        path: &str,
        max_bytes: usize,
    ) -> Result<Result<Vec<u8>, String>, SandboxError> {
        let head = self
            .sh(
                project,
                dir,
                user,
                r#"if [ ! -f "$1" ]; then echo missing; exit 0; fi; stat -c %s -- "$1""#,
                &[path],
                STEP,
            )
            .await?;
        let text = head.stdout.trim();
        if text == "missing" {
            return Ok(Err(format!("{path} is not a file in the workspace")));
        }
        let size: usize = text
            .parse()
            .map_err(|_| SandboxError::NotStarted(format!("stat answered {text:?}: {}", head.stderr)))?;
        if size > max_bytes {
            return Ok(Err(format!("{path} has {size} bytes; at most {max_bytes} can be read")));
        }
        let mut bytes = Vec::with_capacity(size);
        let mut chunk = 0usize;
        while bytes.len() < size {
            let out = self
                .sh(
                    project,
                    dir,
                    user,
                    r#"dd if="$1" bs="$2" skip="$3" count=1 status=none | base64 -w0"#,
                    &[path, &CHUNK_READ.to_string(), &chunk.to_string()],
                    STEP,
                )
                .await?;
            let part = base64::engine::general_purpose::STANDARD
                .decode(out.stdout.trim())
                .map_err(|e| SandboxError::NotStarted(format!("reading {path}: {e}")))?;
            if part.is_empty() {
                break;
            }
            bytes.extend_from_slice(&part);
            chunk += 1;
        }
        Ok(Ok(bytes))
    }

    /// Writes `bytes` to `path` as `user` (creating parent directories) through a temporary file,
    /// so a reader never sees half a file; or says why it cannot (a directory is in the way).
    pub async fn write_file(
        &self,
        project: &str,
        dir: &str,
        user: SandboxUser,
        path: &str,
        bytes: &[u8],
    ) -> Result<Result<(), String>, SandboxError> {
        let tmp = format!(".belay-write-{}", std::process::id());
        let prep = self
            .sh(
                project,
                dir,
                user,
                r#"if [ -d "$1" ]; then echo directory; exit 0; fi; mkdir -p -- "$(dirname -- "$1")" && : > "$2""#,
                &[path, &tmp],
                STEP,
            )
            .await?;
        if prep.stdout.trim() == "directory" {
            return Ok(Err(format!("{path} is a directory")));
        }
        if !prep.success() {
            return Ok(Err(format!("cannot write {path}: {}", prep.stderr.trim())));
        }
        for part in bytes.chunks(CHUNK_WRITE) {
            let b64 = base64::engine::general_purpose::STANDARD.encode(part);
            let out = self
                .sh(
                    project,
                    dir,
                    user,
                    r#"printf %s "$1" | base64 -d >> "$2""#,
                    &[&b64, &tmp],
                    STEP,
                )
                .await?;
            if !out.success() {
                return Ok(Err(format!("cannot write {path}: {}", out.stderr.trim())));
            }
        }
        let out = self
            .sh(project, dir, user, r#"mv -f -- "$2" "$1""#, &[path, &tmp], STEP)
            .await?;
        if !out.success() {
            return Ok(Err(format!("cannot write {path}: {}", out.stderr.trim())));
        }
        Ok(Ok(()))
    }

    /// Runs a build command as `user` in a git checkout and then puts the working tree back as it
    /// was: whatever the build wrote is discarded (composition builds it again). Returns the
    /// command's output and the paths discarded.
    pub async fn run_discarding_writes(
        &self,
        project: &str,
        dir: &str,
        user: SandboxUser,
        argv: &[String],
        timeout: Duration,
    ) -> Result<(ExecOutput, Vec<String>), SandboxError> {
        self.sh(project, dir, user, SNAPSHOT, &[], Duration::from_secs(60))
            .await?;
        let exec = self.exec(project, dir, argv, user, timeout).await?;
        let restored = self
            .sh(project, dir, user, RESTORE, &[], Duration::from_secs(60))
            .await?;
        let discarded = restored
            .stdout
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        Ok((exec, discarded))
    }
}

/// 32-bit FNV-1a: a stable spread of a directory name over the workspace uids.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes
        .iter()
        .fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(*b)).wrapping_mul(0x0100_0193))
}
