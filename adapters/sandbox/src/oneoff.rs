//! One-off containers: a single command in a fresh container of the Sandbox image, under the same
//! limits as a project's Sandbox ([`Sandboxes::limited_host_config`]) and on the same internal
//! network, working in a directory of its own under [`ONE_OFF_ROOT`] (a volume of the container).
//! Harness adapters marked `sandbox` run this way. Nothing of the worker's filesystem is mounted:
//! the Docker Engine may be another host's (through a socket proxy), so the job's files go in
//! through the Engine's archive API before the command starts, and the directory comes back the
//! same way, unpacked under the worker's own directory, after it ends.
//!
//! The container is removed on every path: when the command ends, when it times out, and when the
//! caller stops waiting (the future is dropped), so no run leaves a container behind. A container
//! an earlier attempt of the same job left (its worker died) is removed before the next starts.

use crate::{SandboxError, Sandboxes, Tail};
use bollard::container::LogOutput;
use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{CreateContainerOptionsBuilder, LogsOptionsBuilder, WaitContainerOptionsBuilder};
use futures::{StreamExt, TryStreamExt};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tracing::{instrument, warn};

/// How long past the command's timeout the client waits before it kills the container itself.
const BACKSTOP_GRACE: Duration = Duration::from_secs(10);
/// The exit code coreutils `timeout` answers with when it killed the command.
const TIMEOUT_EXIT: i64 = 124;

/// Where a one-off container's working directories live: a volume of the container's own.
pub const ONE_OFF_ROOT: &str = "/belay-job";
/// The unprivileged user a one-off command runs as (the Sandbox image's `sandbox` user).
pub const ONE_OFF_USER: (u64, u64) = (1000, 1000);

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OneOff {
    /// The container's name (unique per run: a retried attempt gets its own).
    pub name: String,
    /// A label `<prefix>.<role>=1` marking what the container is for (e.g. `harness-job`).
    pub role: String,
    /// What the run is for (a job id), as the label `<prefix>.<role>.key`: every container of
    /// this role and key, an earlier attempt's left by a dead worker included, is removed before
    /// this one starts.
    pub key: String,
    pub argv: Vec<String>,
    /// The working directory's name: the command runs in `ONE_OFF_ROOT/<dir>`, owned by
    /// [`ONE_OFF_USER`], which holds `files` when it starts.
    pub dir: String,
    /// Files (name, contents) put in the working directory before the command starts.
    pub files: Vec<(String, Vec<u8>)>,
    /// Where the working directory comes back when the command has ended: unpacked as
    /// `<collect_into>/<dir>` (which must not exist yet). Symlinks come back as symlinks, and
    /// nothing is written outside `collect_into`.
    pub collect_into: Option<PathBuf>,
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
}

impl OneOff {
    /// The working directory inside the container.
    pub fn container_dir(&self) -> String {
        format!("{ONE_OFF_ROOT}/{}", self.dir)
    }
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
        if job.dir.is_empty() || job.dir.contains('/') || job.dir.starts_with('.') {
            return Err(SandboxError::InvalidDirectory(job.dir.clone()));
        }
        self.ensure_network().await?;
        // A container of this name, or of an earlier attempt of the same job, left by a worker
        // that died: the job never runs beside it.
        self.remove_container(&job.name).await?;
        self.remove_superseded(job).await?;
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
        let role = format!("{}.{}", self.config.label_prefix, job.role);
        let body = ContainerCreateBody {
            image: Some(self.config.image.clone()),
            entrypoint: Some(vec![]),
            cmd: Some(cmd),
            user: Some(format!("{}:{}", ONE_OFF_USER.0, ONE_OFF_USER.1)),
            working_dir: Some(job.container_dir()),
            env: Some(env),
            labels: Some(self.labels([(role.clone(), "1".to_owned()), (format!("{role}.key"), job.key.clone())])),
            host_config: Some(bollard::models::HostConfig {
                // An anonymous volume, removed with the container (v=true): writable under the
                // read-only root, and readable through the archive API once the command ended.
                mounts: Some(vec![bollard::models::Mount {
                    target: Some(ONE_OFF_ROOT.to_owned()),
                    typ: Some(bollard::models::MountType::VOLUME),
                    read_only: Some(false),
                    ..Default::default()
                }]),
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
        let upload = bollard::query_parameters::UploadToContainerOptionsBuilder::default()
            .path(ONE_OFF_ROOT)
            .build();
        self.docker
            .upload_to_container(&created.id, Some(upload), bollard::body_full(job_archive(job)?.into()))
            .await?;
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
        if let Some(into) = &job.collect_into {
            self.collect(&created.id, job, into.clone()).await?;
        }
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

impl Sandboxes {
    /// Removes every container of `job`'s role and key (this deployment's): an earlier attempt's.
    async fn remove_superseded(&self, job: &OneOff) -> Result<(), SandboxError> {
        let role = format!("{}.{}", self.config.label_prefix, job.role);
        let mut labels = vec![format!("{role}=1"), format!("{role}.key={}", job.key)];
        if let Some(d) = &self.config.deployment {
            labels.push(format!("{}={d}", self.config.deployment_label()));
        }
        let filters = HashMap::from([("label", labels)]);
        let options = bollard::query_parameters::ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        for c in self.docker.list_containers(Some(options)).await? {
            if let Some(id) = c.id {
                warn!(container.id = %id, job.key = %job.key, "removing a container an earlier attempt left running");
                self.remove_container(&id).await?;
            }
        }
        Ok(())
    }

    /// Unpacks the container's working directory as `into/<dir>`, streaming.
    async fn collect(&self, container: &str, job: &OneOff, into: PathBuf) -> Result<(), SandboxError> {
        let options = bollard::query_parameters::DownloadFromContainerOptionsBuilder::default()
            .path(&job.container_dir())
            .build();
        let stream = self
            .docker
            .download_from_container(container, Some(options))
            .map_err(std::io::Error::other);
        let reader = tokio_util::io::StreamReader::new(stream);
        let bridge = tokio_util::io::SyncIoBridge::new(reader);
        let dir = job.dir.clone();
        tokio::task::spawn_blocking(move || unpack(bridge, &into, &dir))
            .await
            .map_err(|e| SandboxError::Collect(format!("the unpacking task failed: {e}")))?
    }
}

/// The tar of the working directory as the command finds it: the directory, owned by
/// [`ONE_OFF_USER`], holding `job.files`.
fn job_archive(job: &OneOff) -> Result<Vec<u8>, SandboxError> {
    let mut tar = tar::Builder::new(Vec::new());
    let entry = |kind: tar::EntryType, mode: u32, size: u64| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_uid(ONE_OFF_USER.0);
        h.set_gid(ONE_OFF_USER.1);
        h.set_size(size);
        h.set_mtime(0);
        h
    };
    let io = |e: std::io::Error| SandboxError::Collect(format!("packing the job's files: {e}"));
    let mut dir = entry(tar::EntryType::Directory, 0o700, 0);
    tar.append_data(&mut dir, format!("{}/", job.dir), std::io::empty())
        .map_err(io)?;
    for (name, contents) in &job.files {
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return Err(SandboxError::InvalidDirectory(format!("{}/{name}", job.dir)));
        }
        let mut file = entry(tar::EntryType::Regular, 0o600, contents.len() as u64);
        tar.append_data(&mut file, format!("{}/{name}", job.dir), contents.as_slice())
            .map_err(io)?;
    }
    tar.into_inner().map_err(io)
}

/// Unpacks an archive whose entries all sit under `dir/` into `into`, refusing anything else
/// (the tar crate keeps every write inside `into`, symlinked parents included).
fn unpack(reader: impl std::io::Read, into: &std::path::Path, dir: &str) -> Result<(), SandboxError> {
    let fail = |e: std::io::Error| SandboxError::Collect(format!("unpacking the working directory: {e}"));
    std::fs::create_dir_all(into).map_err(fail)?;
    let mut archive = tar::Archive::new(reader);
    archive.set_preserve_permissions(false);
    archive.set_preserve_mtime(false);
    archive.set_overwrite(false);
    for entry in archive.entries().map_err(fail)? {
        let mut entry = entry.map_err(fail)?;
        let path = entry.path().map_err(fail)?.into_owned();
        if path.components().next().map(|c| c.as_os_str()) != Some(std::ffi::OsStr::new(dir)) {
            return Err(SandboxError::Collect(format!(
                "the working directory's archive holds {} outside {dir}",
                path.display()
            )));
        }
        if !entry.unpack_in(into).map_err(fail)? {
            return Err(SandboxError::Collect(format!(
                "the working directory's archive holds {}, which would land outside it",
                path.display()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(files: Vec<(String, Vec<u8>)>) -> OneOff {
        OneOff {
            name: "n".into(),
            role: "harness-job".into(),
            key: "job_1".into(),
            argv: vec!["true".into()],
            dir: "job_1-a1".into(),
            files,
            collect_into: None,
            env: vec![],
            timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn the_job_archive_holds_the_directory_and_its_files_owned_by_the_sandbox_user() {
        let bytes = job_archive(&job(vec![("job.json".into(), b"{}".to_vec())])).unwrap();
        let mut archive = tar::Archive::new(bytes.as_slice());
        let entries: Vec<(String, u64, u32)> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let h = e.header();
                (
                    e.path().unwrap().display().to_string(),
                    h.uid().unwrap(),
                    h.mode().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            entries,
            vec![
                ("job_1-a1/".into(), 1000, 0o700),
                ("job_1-a1/job.json".into(), 1000, 0o600)
            ]
        );
        assert!(job_archive(&job(vec![("../x".into(), vec![])])).is_err());
    }

    #[test]
    fn unpacking_keeps_symlinks_as_links_and_writes_nothing_outside() {
        let mut tar = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        h.set_mode(0o777);
        tar.append_link(&mut h, "job_1-a1/link", "/etc").unwrap();
        let mut f = tar::Header::new_gnu();
        f.set_size(1);
        f.set_mode(0o644);
        tar.append_data(&mut f, "job_1-a1/out.txt", b"x".as_slice()).unwrap();
        let mut through = tar::Header::new_gnu();
        through.set_size(1);
        through.set_mode(0o644);
        tar.append_data(&mut through, "job_1-a1/link/escaped", b"x".as_slice())
            .unwrap();
        let bytes = tar.into_inner().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let e = unpack(bytes.as_slice(), dir.path(), "job_1-a1");
        assert!(e.is_err(), "a write through the symlink must be refused");
        assert!(
            std::fs::symlink_metadata(dir.path().join("job_1-a1/link"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read(dir.path().join("job_1-a1/out.txt")).unwrap(), b"x");
        assert!(!std::path::Path::new("/etc/escaped").exists());

        let mut other = tar::Builder::new(Vec::new());
        let mut f = tar::Header::new_gnu();
        f.set_size(1);
        f.set_mode(0o644);
        other.append_data(&mut f, "elsewhere/x", b"x".as_slice()).unwrap();
        let bytes = other.into_inner().unwrap();
        assert!(unpack(bytes.as_slice(), dir.path(), "job_1-a1").is_err());
    }
}
