//! git inside a Sandbox: clones and pushes over belay's smart-HTTP endpoint, never a bare
//! repository on the Sandbox's disk. Each operation gets a repository token of its own (one
//! repository, read or write, 600 s) that is revoked the moment the command that used it
//! returns, whatever it answered: issue → use → revoke, written once, here.

use crate::{SandboxError, SandboxUser, Sandboxes};
use belay_domain::repo_token::{self, Scope, TOKEN_TTL_SECS, TokenError};
use std::future::Future;
use std::time::Duration;
use tracing::warn;

/// Where the Sandbox reaches git and how its tokens are signed.
#[derive(Clone)]
pub struct SandboxGit {
    /// The git service's base URL as a Sandbox sees it (`http://<bridge address>:<port>`).
    pub url: String,
    /// The HMAC key of repository tokens (the API's BELAY_GIT_TOKEN_SECRET).
    pub token_secret: Vec<u8>,
}

impl std::fmt::Debug for SandboxGit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret is never printed.
        f.debug_struct("SandboxGit")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// Where revocations are recorded, so that every process serving `/git` refuses the token.
pub trait Revocations: Send + Sync {
    fn revoke(&self, token_id: &str) -> impl Future<Output = Result<(), String>> + Send;
}

/// A checkout of `repo` at `dir` in `project`'s Sandbox.
#[derive(Debug, Clone, Copy)]
pub struct Checkout<'a> {
    pub project: &'a str,
    pub dir: &'a str,
    pub repo: &'a str,
}

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pushed {
    /// Nothing to commit and HEAD is still the start commit.
    Nothing,
    /// The commit now on the fork's `main`.
    Commit(String),
    /// git refused (the output says why).
    Failed(String),
}

#[derive(Debug, thiserror::Error)]
pub enum GitInSandboxError {
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error("issuing a repository token: {0}")]
    Token(#[from] TokenError),
}

impl SandboxGit {
    fn repo_url(&self, repo: &str) -> String {
        format!("{}/git/{repo}.git", self.url.trim_end_matches('/'))
    }

    /// Issues a token for `repo`, hands it to `f`, and revokes it when `f` is done.
    async fn with_token<T>(
        &self,
        revocations: &impl Revocations,
        repo: &str,
        scope: Scope,
        f: impl AsyncFnOnce(String) -> T,
    ) -> Result<T, TokenError> {
        let token_id = repo_token::new_token_id(&uuid::Uuid::new_v4().simple().to_string());
        let token = repo_token::issue(&self.token_secret, &token_id, repo, scope, now_secs(), TOKEN_TTL_SECS)?;
        let out = f(token).await;
        if let Err(e) = revocations.revoke(&token_id).await {
            warn!(error = %e, "revoking a repository token failed; it expires within 600 s");
        }
        Ok(out)
    }

    /// Clones `repo` into the empty directory `dir` as `user`, with belay's commit identity, and
    /// answers HEAD; or git's own words when the clone failed.
    pub async fn clone_repo(
        &self,
        sandboxes: &Sandboxes,
        revocations: &impl Revocations,
        at: Checkout<'_>,
        user: SandboxUser,
    ) -> Result<Result<String, String>, GitInSandboxError> {
        let Checkout { project, dir, repo } = at;
        let url = self.repo_url(repo);
        let out = self
            .with_token(revocations, repo, Scope::Read, async |token| {
                sandboxes
                    .sh(
                        project,
                        dir,
                        user,
                        r#"git -c http.extraHeader="Authorization: Bearer $1" clone --quiet "$2" . 2>&1 && git config user.name belay && git config user.email agent@belay.invalid && git rev-parse HEAD"#,
                        &[&token, &url],
                        Duration::from_secs(300),
                    )
                    .await
            })
            .await??;
        if !out.success() {
            return Ok(Err(format!("cloning {repo} failed: {}", out.stdout.trim())));
        }
        Ok(Ok(out.stdout.lines().last().unwrap_or_default().trim().to_owned()))
    }

    /// Commits everything in the checkout at `dir` (when anything changed) with `message` and
    /// pushes HEAD to `repo`'s `main`, as `user` (the checkout's owner); nothing is pushed when
    /// HEAD is still `start`.
    pub async fn commit_and_push(
        &self,
        sandboxes: &Sandboxes,
        revocations: &impl Revocations,
        at: Checkout<'_>,
        user: SandboxUser,
        message: &str,
        start: &str,
    ) -> Result<Pushed, GitInSandboxError> {
        let Checkout { project, dir, repo } = at;
        let url = self.repo_url(repo);
        let out = self
            .with_token(revocations, repo, Scope::Write, async |token| {
                sandboxes
                    .sh(
                        project,
                        dir,
                        user,
                        r#"set -e
git add -A
if ! git diff --cached --quiet; then git commit -q -m "$1"; fi
head=$(git rev-parse HEAD)
if [ "$head" = "$2" ]; then echo NOTHING; exit 0; fi
git -c http.extraHeader="Authorization: Bearer $3" push -q "$4" HEAD:refs/heads/main 2>&1
echo "PUSHED $head""#,
                        &[message, start, &token, &url],
                        Duration::from_secs(600),
                    )
                    .await
            })
            .await??;
        let last = out.stdout.lines().last().unwrap_or_default().trim().to_owned();
        if last == "NOTHING" {
            return Ok(Pushed::Nothing);
        }
        Ok(match last.strip_prefix("PUSHED ") {
            Some(commit) if out.success() => Pushed::Commit(commit.to_owned()),
            _ => Pushed::Failed(format!(
                "pushing the workspace failed ({}): {}{}",
                belay_domain::check::exit_words(out.exit_code),
                out.stdout.trim(),
                out.stderr.trim()
            )),
        })
    }
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
