//! `belay bench objects`: the object store on S3 (moto's S3 server over HTTPS, a CA made for the
//! run) and on the filesystem. Artifacts of 1 KiB, 1 MiB and 50 MiB written as the harness keeps
//! them and read back as the API serves them, each against the same bytes written and read by
//! the store's own client in the same run (boto3 for S3, the filesystem itself for the directory
//! store); and a promotion's source sync (blobs, code manifest, file index) of a 50,000-file tree
//! on S3 against the filesystem store.

use super::support::{commit_files, grow, median, ms, ratio};
use crate::moto::{Moto, default_moto_server};
use crate::objects::{ObjectStoreArgs, S3Args, dir_store};
use anyhow::Context;
use belay_git::GitService;
use belay_git::source_objects::SourceObjects;
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PROJECT: &str = "proj_bench";
const BUCKET: &str = "belay-bench";

/// Deterministic bytes that do not compress.
fn payload(size: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn secs(v: &serde_json::Value) -> Vec<Duration> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_f64())
        .map(Duration::from_secs_f64)
        .collect()
}

/// `n` artifact writes of `file` (as the harness keeps one) and `n` reads (as the API serves one).
async fn belay_rounds(
    objects: &dyn ObjectStore,
    file: &Path,
    prefix: &str,
    n: usize,
) -> anyhow::Result<(Duration, Duration)> {
    let (mut w, mut r) = (Vec::new(), Vec::new());
    for i in 0..n {
        let t = Instant::now();
        belay_harness::store_file(objects, &format!("{prefix}/{i}"), file).await?;
        w.push(t.elapsed());
    }
    for i in 0..n {
        let t = Instant::now();
        let got = objects
            .get(&ObjectPath::from(format!("{prefix}/{i}")))
            .await?
            .bytes()
            .await?;
        r.push(t.elapsed());
        std::hint::black_box(got);
    }
    Ok((median(w), median(r)))
}

/// The same bytes through the filesystem alone: the file read and written to another, then that
/// one read.
fn fs_rounds(file: &Path, dir: &Path, n: usize) -> anyhow::Result<(Duration, Duration)> {
    std::fs::create_dir_all(dir)?;
    let (mut w, mut r) = (Vec::new(), Vec::new());
    for i in 0..n {
        let t = Instant::now();
        std::fs::write(dir.join(i.to_string()), std::fs::read(file)?)?;
        w.push(t.elapsed());
    }
    for i in 0..n {
        let t = Instant::now();
        std::hint::black_box(std::fs::read(dir.join(i.to_string()))?);
        r.push(t.elapsed());
    }
    Ok((median(w), median(r)))
}

fn line(what: &str, ours: Duration, floor: Duration, floor_name: &str) {
    println!(
        "  {what}: belay {:.2} ms vs {floor_name} {:.2} ms (ratio {:.2})",
        ms(ours),
        ms(floor),
        ratio(ours, floor)
    );
}

pub(super) async fn objects(
    samples: usize,
    files: usize,
    first_sync: bool,
    moto_server: Option<PathBuf>,
) -> anyhow::Result<()> {
    let samples = samples.max(3);
    let server = moto_server.unwrap_or_else(default_moto_server);
    anyhow::ensure!(
        server.is_file(),
        "no moto_server at {}: run scripts/setup.sh or pass --moto-server",
        server.display()
    );
    let dir = tempfile::tempdir()?;
    let moto = Moto::start(dir.path(), &server, BUCKET)?;
    let args = ObjectStoreArgs {
        object_store: Some(format!("s3://{BUCKET}/belay")),
        s3: S3Args {
            endpoint: Some(moto.endpoint.clone()),
            region: Some("us-east-1".into()),
            access_key_id: Some("bench".into()),
            secret_access_key: Some("bench".into()),
            ca_bundle: Some(moto.ca.clone()),
            ..Default::default()
        },
    };
    let s3 = args.open(dir.path(), &[])?;
    let fs = dir_store(&dir.path().join("objects"))?;
    println!(
        "object store: moto_server over HTTPS (a CA made for the run) and the filesystem store, {samples} samples (50 MiB: {})",
        (samples / 4).max(3)
    );

    for (name, size) in [("1 KiB", 1usize << 10), ("1 MiB", 1 << 20), ("50 MiB", 50 << 20)] {
        let n = if size >= 50 << 20 {
            (samples / 4).max(3)
        } else {
            samples
        };
        let file = dir.path().join(format!("payload-{size}"));
        std::fs::write(&file, payload(size))?;
        let (s3_w, s3_r) = belay_rounds(s3.as_ref(), &file, &format!("artifacts/{size}"), n).await?;
        let boto: serde_json::Value = serde_json::from_str(&moto.boto3(&[
            "rounds",
            file.to_str().context("path")?,
            &n.to_string(),
            &format!("boto3/{size}"),
        ])?)?;
        let (b_w, b_r) = (median(secs(&boto["write"])), median(secs(&boto["read"])));
        let (fs_w, fs_r) = belay_rounds(fs.as_ref(), &file, &format!("artifacts/{size}"), n).await?;
        let (f_w, f_r) = fs_rounds(&file, &dir.path().join(format!("plain-{size}")), n)?;
        println!("{name} artifact:");
        line("S3 write", s3_w, b_w, "boto3");
        line("S3 read", s3_r, b_r, "boto3");
        line("filesystem write", fs_w, f_w, "read + write");
        line("filesystem read", fs_r, f_r, "a file read");
    }

    source_sync(dir.path(), files, first_sync, s3, fs).await
}

/// A promotion's source sync of a `files`-file tree: the first (every blob stored) and one of a
/// commit that changed 10 files on top of it (the base's index known), on both stores.
async fn source_sync(
    dir: &Path,
    files: usize,
    first_sync: bool,
    s3: Arc<dyn ObjectStore>,
    fs: Arc<dyn ObjectStore>,
) -> anyhow::Result<()> {
    let svc = GitService::new(dir.join("git"));
    std::fs::create_dir_all(svc.root())?;
    svc.provision(PROJECT).await?;
    let canonical = svc.repo_path(PROJECT)?;
    let started = Instant::now();
    let base = grow(&canonical, files)?;
    let base_files = svc.file_index(PROJECT, &base).await?;
    let base_tree = svc.tree_of(PROJECT, &base).await?;
    println!(
        "source sync: {files} files, grown in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // Five promotions' worth of commits, each changing 10 files of the one before.
    let mut chain = Vec::new();
    for k in 0..5 {
        let commit = commit_files(
            &canonical,
            "change",
            (0..10).map(|i| {
                (
                    format!("src/m0/f{i}.rs"),
                    format!("// file {i}, change {k}\npub fn f{i}() -> usize {{ {} }}\n", i + k),
                )
            }),
        )?;
        chain.push((
            svc.tree_of(PROJECT, &commit).await?,
            svc.file_index(PROJECT, &commit).await?,
        ));
    }
    for (name, store) in [("S3", s3), ("filesystem", fs)] {
        let sources = SourceObjects::new(store);
        let t = Instant::now();
        let first = if first_sync {
            sources
                .write_tree(&svc, PROJECT, PROJECT, &base_tree, &base_files, None)
                .await?
        } else {
            // The base as an earlier promotion left it (its blobs stored, its index and manifest
            // written): only the index and manifest are written here.
            let stored = belay_git::source_objects::FileIndex {
                tree: "stored".into(),
                files: base_files.clone(),
            };
            sources
                .write_tree_over(&svc, PROJECT, PROJECT, &base_tree, &base_files, Some(&stored))
                .await?
        };
        let first_time = t.elapsed();
        let (mut times, mut stored) = (Vec::new(), 0);
        let mut before = base_tree.clone();
        for (tree, files) in &chain {
            let t = Instant::now();
            let then = sources
                .write_tree(&svc, PROJECT, PROJECT, tree, files, Some(&before))
                .await?;
            times.push(t.elapsed());
            stored += then.blobs_stored;
            before = tree.clone();
        }
        let first_what = if first_sync {
            "first sync"
        } else {
            "the base's index and manifest"
        };
        println!(
            "  {name}: {first_what} {:.0} ms ({} blobs stored); a promotion's sync (10 changed files, the base's index known) median {:.1} ms of {} ({} blobs stored in all)",
            ms(first_time),
            first.blobs_stored,
            ms(median(times)),
            chain.len(),
            stored
        );
    }
    Ok(())
}
