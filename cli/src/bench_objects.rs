//! `belay bench objects`: the object store on S3 (moto's S3 server over HTTPS, a CA made for the
//! run) and on the filesystem. Artifacts of 1 KiB, 1 MiB and 50 MiB written as the harness keeps
//! them and read back as the API serves them, each against the same bytes written and read by
//! the store's own client in the same run (boto3 for S3, the filesystem itself for the directory
//! store); and a promotion's source sync (blobs, code manifest, file index) of a 50,000-file tree
//! on S3 against the filesystem store.

use crate::bench_source::{grow, median, ms};
use crate::objects::{ObjectStoreArgs, S3Args, dir_store};
use anyhow::{Context, bail};
use belay_git::GitService;
use belay_git::source_objects::SourceObjects;
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PROJECT: &str = "proj_bench";
pub(crate) const BUCKET: &str = "belay-bench";

/// boto3 against the same server: `n` managed uploads of the file, then `n` reads into memory;
/// prints each one's seconds.
const BOTO3: &str = r#"
import boto3, sys, time, json
endpoint, ca, bucket, path, n, prefix = sys.argv[1:7]
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench", aws_secret_access_key="bench",
                  region_name="us-east-1", verify=ca)
if n == "create":
    s3.create_bucket(Bucket=bucket)
    sys.exit(0)
w, r = [], []
for i in range(int(n)):
    t = time.perf_counter(); s3.upload_file(path, bucket, f"{prefix}/{i}"); w.append(time.perf_counter() - t)
for i in range(int(n)):
    t = time.perf_counter(); s3.get_object(Bucket=bucket, Key=f"{prefix}/{i}")["Body"].read(); r.append(time.perf_counter() - t)
print(json.dumps({"write": w, "read": r}))
"#;

/// moto's S3 server over HTTPS (its certificate signed by a CA made for the run, bucket
/// [`BUCKET`] created), stopped when dropped.
pub(crate) struct Moto {
    child: Child,
    pub(crate) endpoint: String,
    pub(crate) ca: PathBuf,
    python: PathBuf,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8(out.stdout)?)
}

impl Moto {
    pub(crate) fn start(dir: &Path, server: &Path) -> anyhow::Result<Moto> {
        let openssl = |args: &[&str]| run(Command::new("openssl").current_dir(dir).args(args));
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=belay-bench-ca",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
        ])?;
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ])?;
        std::fs::write(dir.join("ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n")?;
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            "ext",
            "-out",
            "server.crt",
        ])?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let log = std::fs::File::create(dir.join("moto.log"))?;
        let child = Command::new(server)
            .args([
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-c",
                "server.crt",
                "-k",
                "server.key",
            ])
            .current_dir(dir)
            .stdout(log.try_clone()?)
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", server.display()))?;
        let moto = Moto {
            child,
            endpoint: format!("https://127.0.0.1:{port}"),
            ca: dir.join("ca.crt"),
            python: server.with_file_name("python"),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            anyhow::ensure!(Instant::now() < deadline, "moto_server did not listen within 30 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        moto.boto3(&["-", "create", "-"])?;
        Ok(moto)
    }

    fn boto3(&self, rest: &[&str]) -> anyhow::Result<String> {
        run(Command::new(&self.python)
            .args(["-c", BOTO3, &self.endpoint])
            .arg(&self.ca)
            .arg(BUCKET)
            .args(rest))
    }
}

/// The moto_server scripts/setup.sh installs (BELAY_TOOLS_DIR, else ~/.cache/belay/tools).
pub fn default_moto_server() -> PathBuf {
    let tools = std::env::var_os("BELAY_TOOLS_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/belay/tools")))
        .unwrap_or_default();
    tools.join("moto-venv/bin/moto_server")
}

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
        ours.as_secs_f64() / floor.as_secs_f64()
    );
}

pub async fn objects(
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
    let moto = Moto::start(dir.path(), &server)?;
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

/// A commit on `main` changing files 0..n of the grown tree (round `k` of changes).
fn change_files(repo: &Path, k: usize, n: usize) -> anyhow::Result<String> {
    use std::io::Write;
    let mut script = Vec::new();
    writeln!(
        script,
        "commit refs/heads/main\ncommitter b <b@b> 1700000000 +0000\ndata 6\nchange\nfrom refs/heads/main^0"
    )?;
    for i in 0..n {
        let body = format!("// file {i}, change {k}\npub fn f{i}() -> usize {{ {} }}\n", i + k);
        write!(script, "M 100644 inline src/m0/f{i}.rs\ndata {}\n{body}\n", body.len())?;
    }
    let mut child = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()?;
    child.stdin.take().context("stdin")?.write_all(&script)?;
    anyhow::ensure!(child.wait()?.success(), "git fast-import failed");
    Ok(run(Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["rev-parse", "refs/heads/main"]))?
    .trim()
    .to_owned())
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
        let commit = change_files(&canonical, k, 10)?;
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
