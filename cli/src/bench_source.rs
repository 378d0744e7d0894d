//! `belay bench source` and `belay bench sandbox`: the git service and the Sandbox against the
//! tools they replace, on this machine, in one run.

use anyhow::{Context, bail};
use belay_domain::repo_token::{self, Scope, TOKEN_TTL_SECS};
use belay_git::{GitService, MergeOutcome};
use belay_sandbox::{SandboxConfig, SandboxUser, Sandboxes, WORKSPACE};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PROJECT: &str = "proj_bench";

pub(crate) fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output()?;
    if !out.status.success() {
        bail!("git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// `git clone --bare` of `from` to `to`.
pub(crate) fn clone_bare(from: &Path, to: &Path) -> anyhow::Result<()> {
    let parent = to.parent().context("a clone target without a parent")?;
    git(
        parent,
        &[
            "clone",
            "--bare",
            "--quiet",
            from.to_str().context("path")?,
            to.to_str().context("path")?,
        ],
    )
    .map(drop)
}

/// Adds `files` small source files to canonical `main` in one commit (git fast-import).
pub(crate) fn grow(repo: &Path, files: usize) -> anyhow::Result<String> {
    commit_files(
        repo,
        "grow",
        (0..files).map(|i| {
            (
                format!("src/m{}/f{i}.rs", i / 500),
                format!("// file {i}\npub fn f{i}() -> usize {{ {i} }}\n"),
            )
        }),
    )
}

/// Commits `files` (path, contents) on top of `main` in one commit (git fast-import); the new
/// `main`.
pub(crate) fn commit_files(
    repo: &Path,
    message: &str,
    files: impl IntoIterator<Item = (String, String)>,
) -> anyhow::Result<String> {
    let mut script = Vec::new();
    writeln!(
        script,
        "commit refs/heads/main\ncommitter b <b@b> 1700000000 +0000\ndata {}\n{message}\nfrom refs/heads/main^0",
        message.len()
    )?;
    for (path, body) in files {
        write!(script, "M 100644 inline {path}\ndata {}\n{body}\n", body.len())?;
    }
    let mut child = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()?;
    child.stdin.take().context("stdin")?.write_all(&script)?;
    if !child.wait()?.success() {
        bail!("git fast-import failed");
    }
    Ok(git(repo, &["rev-parse", "refs/heads/main"])?.trim().to_owned())
}

pub(crate) fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Fork time for a small and a large repository against `git clone --bare`; composing three
/// ChangeSets against `git merge-tree --write-tree`; a smart-HTTP clone through belay against a
/// `git clone` of the bare path.
pub async fn source(files: usize, runs: usize) -> anyhow::Result<()> {
    let runs = runs.max(1);
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("git");
    std::fs::create_dir_all(&root)?;

    for size in [10, files] {
        let svc = GitService::new(root.join(format!("n{size}")));
        std::fs::create_dir_all(svc.root())?;
        svc.provision(PROJECT).await?;
        let canonical = svc.repo_path(PROJECT)?;
        grow(&canonical, size)?;
        let (mut fork, mut clone) = (Vec::new(), Vec::new());
        for r in 0..runs {
            let name = format!("ws-{r}");
            let started = Instant::now();
            svc.fork(PROJECT, &name).await?;
            fork.push(started.elapsed());
            let target = svc.root().join(format!("clone-{r}.git"));
            let started = Instant::now();
            clone_bare(&canonical, &target)?;
            clone.push(started.elapsed());
        }
        let (fork, clone) = (median(fork), median(clone));
        println!(
            "fork, {size} files: {:.1} ms; git clone --bare: {:.1} ms; ratio {:.2}",
            ms(fork),
            ms(clone),
            fork.as_secs_f64() / clone.as_secs_f64()
        );
    }

    let svc = GitService::new(root.join(format!("n{files}")));
    let canonical = svc.repo_path(PROJECT)?;
    let base = git(&canonical, &["rev-parse", "main"])?.trim().to_owned();
    let mut tips = Vec::new();
    for t in 0..3 {
        let changed = vec![
            (
                format!("src/m{}/f{}.rs", t * 10, (t * 5000) % files.max(1)),
                Some(format!("// changed by t{t}\n").into_bytes()),
            ),
            (format!("src/new/t{t}.rs"), Some(b"pub fn new() {}\n".to_vec())),
        ];
        tips.push((
            format!("t{t}"),
            svc.commit_files(PROJECT, &base, changed, "change").await?,
        ));
    }
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let started = Instant::now();
        let merged = match svc.merge_into(PROJECT, &base, &tips).await? {
            MergeOutcome::Merged(m) => m,
            MergeOutcome::Conflict(c) => bail!("the bench's ChangeSets conflict: {c:?}"),
        };
        ours.push(started.elapsed());
        let started = Instant::now();
        let mut current = base.clone();
        for (_, tip) in &tips {
            let tree = git(&canonical, &["merge-tree", "--write-tree", &current, tip])?
                .trim()
                .to_owned();
            current = git(
                &canonical,
                &["commit-tree", &tree, "-p", &current, "-p", tip, "-m", "merge"],
            )?
            .trim()
            .to_owned();
        }
        theirs.push(started.elapsed());
        let tree = git(&canonical, &["rev-parse", &format!("{current}^{{tree}}")])?;
        if tree.trim() != merged.tree {
            bail!("merge_into and git merge-tree disagree on the composed tree");
        }
    }
    let (ours, theirs) = (median(ours), median(theirs));
    println!(
        "compose 3 ChangeSets on {files} files: {:.1} ms; git merge-tree --write-tree x3: {:.1} ms; ratio {:.2}",
        ms(ours),
        ms(theirs),
        ours.as_secs_f64() / theirs.as_secs_f64()
    );

    // Smart HTTP through belay's git endpoint, served in this process.
    let secret = b"a bench secret of at least thirty-two bytes".to_vec();
    let router = belay_api::git_http::git_router(belay_api::git_http::GitHttpState {
        root: svc.root().to_path_buf(),
        secret: secret.clone(),
        revoked: Arc::new(|_: String| Box::pin(async { false })),
        max_body: 512 << 20,
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    let (mut http, mut path) = (Vec::new(), Vec::new());
    for r in 0..runs {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs() as i64;
        let token_id = repo_token::new_token_id(&uuid::Uuid::new_v4().simple().to_string());
        let token = repo_token::issue(&secret, &token_id, PROJECT, Scope::Read, now, TOKEN_TTL_SECS)?;
        let target = dir.path().join(format!("http-{r}.git"));
        let started = Instant::now();
        let header = format!("http.extraHeader=Authorization: Bearer {token}");
        let url = format!("http://{addr}/git/{PROJECT}.git");
        let status = tokio::process::Command::new("git")
            .args(["-c", &header, "clone", "--bare", "--quiet", &url])
            .arg(&target)
            .status()
            .await?;
        http.push(started.elapsed());
        if !status.success() {
            bail!("the smart-HTTP clone failed");
        }
        let target = dir.path().join(format!("path-{r}.git"));
        let started = Instant::now();
        let status = tokio::process::Command::new("git")
            .args(["clone", "--bare", "--quiet", "--no-local"])
            .arg(&canonical)
            .arg(&target)
            .status()
            .await?;
        path.push(started.elapsed());
        if !status.success() {
            bail!("the path clone failed");
        }
    }
    server.abort();
    let (http, path) = (median(http), median(path));
    println!(
        "clone of {files} files: smart HTTP through belay {:.0} ms; git clone --bare --no-local of the path {:.0} ms; ratio {:.2}",
        ms(http),
        ms(path),
        http.as_secs_f64() / path.as_secs_f64()
    );
    Ok(())
}

/// A trivial command in a warm project Sandbox against `docker run --rm` of the same command,
/// and the cold start of a Sandbox. Uses its own network and labels, removed at the end.
pub async fn sandbox(runs: usize) -> anyhow::Result<()> {
    let runs = runs.max(1);
    let tag = format!("belay-bench-{}", std::process::id());
    let config = SandboxConfig {
        network: tag.clone(),
        extra_labels: [("belay.bench".to_owned(), tag.clone())].into(),
        ..SandboxConfig::from_env()?
    };
    let image = config.image.clone();
    let sandboxes = Sandboxes::connect(config).await?;
    let project = format!("proj_bench-{}", std::process::id());
    let result = async {
        let started = Instant::now();
        sandboxes.ensure(&project).await?;
        let cold = started.elapsed();
        let mut warm = Vec::new();
        for _ in 0..runs {
            let started = Instant::now();
            let out = sandboxes
                .exec(&project, WORKSPACE, &["true".to_owned()], SandboxUser::Root, Duration::from_secs(10))
                .await?;
            warm.push(started.elapsed());
            if !out.success() {
                bail!("`true` failed in the Sandbox: {out:?}");
            }
        }
        let mut run = Vec::new();
        for _ in 0..runs {
            let started = Instant::now();
            let status = tokio::process::Command::new("docker")
                .args(["run", "--rm", "--label", &format!("belay.bench={tag}"), "--network", "none", &image, "true"])
                .status()
                .await?;
            run.push(started.elapsed());
            if !status.success() {
                bail!("docker run failed");
            }
        }
        let (warm, run) = (median(warm), median(run));
        println!(
            "warm Sandbox exec of `true`: {:.0} ms; docker run --rm {image} true: {:.0} ms; ratio {:.2}; cold Sandbox start {:.2} s",
            ms(warm),
            ms(run),
            warm.as_secs_f64() / run.as_secs_f64(),
            cold.as_secs_f64()
        );
        Ok(())
    }
    .await;
    let _ = sandboxes.remove(&project).await;
    let _ = Command::new("docker").args(["network", "rm", &tag]).output();
    result
}
