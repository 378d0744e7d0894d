//! `belay bench source`: the git service against the git commands it replaces, on this machine,
//! in one run: fork against `git clone --bare`, the Candidate compose step against
//! `git merge-tree`, and a smart-HTTP clone through belay against a path clone.

use super::support::{clone_bare, compose, grow, median, ms, ratio};
use anyhow::bail;
use belay_domain::repo_token::{self, Scope, TOKEN_TTL_SECS};
use belay_git::GitService;
use std::sync::Arc;
use std::time::Instant;

const PROJECT: &str = "proj_bench";

/// Fork time for a small and a large repository against `git clone --bare`; the compose step
/// (see [`compose`]); a smart-HTTP clone through belay against a
/// `git clone` of the bare path.
pub(super) async fn source(files: usize, runs: usize) -> anyhow::Result<()> {
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
            ratio(fork, clone)
        );
    }

    compose(files, runs).await?;

    let svc = GitService::new(root.join(format!("n{files}")));
    let canonical = svc.repo_path(PROJECT)?;

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
    let server = tokio::spawn(async move { axum::serve(belay_api::without_delay(listener), router).await });
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
        ratio(http, path)
    );
    Ok(())
}
