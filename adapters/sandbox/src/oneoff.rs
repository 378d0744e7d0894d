//! One-off containers: a single command in a fresh container of the Sandbox image, under the same
//! limits as a project's Sandbox ([`Sandboxes::limited_host_config`]) and on the same internal
//! network, with one host directory mounted at its own path. Harness adapters marked `sandbox`
//! run this way: their output directory is that mount, so the artifacts they write stay on the
//! worker's disk when the container goes.
//!
//! The container is removed on every path: when the command ends, when it times out, and when the
//! caller stops waiting (the future is dropped), so no run leaves a container behind.

use crate::{SandboxError, Sandboxes, Tail};
use bollard::container::LogOutput;
use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{CreateContainerOptionsBuilder, LogsOptionsBuilder, WaitContainerOptionsBuilder};
use futures::StreamExt;
use std::time::{Duration, Instant};
use tracing::{instrument, warn};

/// How long past the command's timeout the client waits before it kills the container itself.
const BACKSTOP_GRACE: Duration = Duration::from_secs(10);
/// The exit code coreutils `timeout` answers with when it killed the command.
const TIMEOUT_EXIT: i64 = 124;

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OneOff {
    /// The container's name (unique per run: a retried attempt gets its own).
    pub name: String,
    /// A label `<prefix>.<role>=1` marking what the container is for (e.g. `harness-job`).
    pub role: String,
    pub argv: Vec<String>,
    /// A host directory, mounted read-write at the same path and used as the working directory.
    pub dir: String,
    /// `uid:gid` the command runs as (the owner of `dir`, so its files stay the worker's).
    pub user: String,
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
}

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OneOffEnd {
    Exited(i64),
    TimedOut,
}

/// What the command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OneOffRun {
    pub end: OneOffEnd,
    /// The last [`crate::OUTPUT_LIMIT`] bytes of each stream.
    pub stdout_tail: String,
    pub stderr_tail: String,
    pub duration: Duration,
}

/// Removes the container when dropped, whatever path the run took.
struct Removal<'a> {
    sandboxes: &'a Sandboxes,
    name: String,
    done: bool,
}

impl Drop for Removal<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let docker = self.sandboxes.docker.clone();
        let name = std::mem::take(&mut self.name);
        // The caller stopped waiting (a cancelled activity): remove it in the background.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let options = bollard::query_parameters::RemoveContainerOptionsBuilder::default()
                    .force(true)
                    .v(true)
                    .build();
                let _ = docker.remove_container(&name, Some(options)).await;
            });
        }
    }
}

impl Sandboxes {
    /// Runs `job` in a fresh container and removes it afterwards. The command is wrapped in
    /// coreutils `timeout -s KILL`, and a client-side deadline backs that up.
    #[instrument(skip_all, fields(container.name = %job.name), err)]
    pub async fn run_one_off(&self, job: &OneOff) -> Result<OneOffRun, SandboxError> {
        if job.argv.is_empty() {
            return Err(SandboxError::EmptyCommand);
        }
        if job.timeout.is_zero() {
            return Err(SandboxError::InvalidTimeout);
        }
        self.ensure_network().await?;
        // A container of this name left by a crashed earlier attempt would refuse the create.
        self.remove_container(&job.name).await?;
        let mut env = self.proxy_env();
        env.extend(job.env.iter().map(|(k, v)| format!("{k}={v}")));
        env.push("HOME=/tmp".to_owned());
        let mut cmd = vec![
            "timeout".to_owned(),
            "-s".to_owned(),
            "KILL".to_owned(),
            job.timeout.as_secs().max(1).to_string(),
        ];
        cmd.extend(job.argv.iter().cloned());
        let body = ContainerCreateBody {
            image: Some(self.config.image.clone()),
            entrypoint: Some(vec![]),
            cmd: Some(cmd),
            user: Some(job.user.clone()),
            working_dir: Some(job.dir.clone()),
            env: Some(env),
            labels: Some(self.labels([(format!("{}.{}", self.config.label_prefix, job.role), "1".to_owned())])),
            host_config: Some(bollard::models::HostConfig {
                binds: Some(vec![format!("{0}:{0}", job.dir)]),
                ..self.limited_host_config()
            }),
            ..Default::default()
        };
        let options = CreateContainerOptionsBuilder::default().name(&job.name).build();
        let created = match self.docker.create_container(Some(options), body).await {
            Ok(c) => c,
            Err(e) if crate::status(&e) == Some(404) => {
                return Err(SandboxError::ImageMissing(self.config.image.clone()));
            }
            Err(e) => return Err(e.into()),
        };
        let mut removal = Removal {
            sandboxes: self,
            name: job.name.clone(),
            done: false,
        };
        let started = Instant::now();
        self.docker.start_container(&created.id, None).await?;

        let logs = LogsOptionsBuilder::default()
            .follow(true)
            .stdout(true)
            .stderr(true)
            .build();
        let mut stream = self.docker.logs(&created.id, Some(logs));
        let mut stdout = Tail::default();
        let mut stderr = Tail::default();
        let collect = async {
            while let Some(chunk) = stream.next().await {
                match chunk {
                    Ok(LogOutput::StdOut { message }) | Ok(LogOutput::Console { message }) => stdout.push(&message),
                    Ok(LogOutput::StdErr { message }) => stderr.push(&message),
                    Ok(LogOutput::StdIn { .. }) => {}
                    Err(e) => {
                        warn!(error = %e, "reading a one-off container's output failed");
                        break;
                    }
                }
            }
        };
        let deadline = tokio::time::sleep(job.timeout + BACKSTOP_GRACE);
        let mut backstop = false;
        tokio::select! {
            () = collect => {}
            () = deadline => backstop = true,
        }
        let exit = if backstop {
            None
        } else {
            let wait = WaitContainerOptionsBuilder::default().condition("not-running").build();
            let mut waits = self.docker.wait_container(&created.id, Some(wait));
            match waits.next().await {
                Some(Ok(w)) => Some(w.status_code),
                // A non-zero exit comes back as an error carrying the code.
                Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => Some(code),
                Some(Err(e)) => return Err(e.into()),
                None => None,
            }
        };
        let duration = started.elapsed();
        self.remove_container(&job.name).await?;
        removal.done = true;
        let end = match exit {
            Some(code) if !(code == TIMEOUT_EXIT && duration >= job.timeout) => OneOffEnd::Exited(code),
            _ => OneOffEnd::TimedOut,
        };
        let (stdout_tail, _) = stdout.finish();
        let (stderr_tail, _) = stderr.finish();
        Ok(OneOffRun {
            end,
            stdout_tail,
            stderr_tail,
            duration,
        })
    }
}
