//! moto's S3 server (PyPI `moto[server]`, installed by scripts/setup.sh) as the S3-compatible
//! store of `belay bench objects` and the tests: over HTTPS, its certificate signed by a CA made
//! for the run with openssl (never one checked in), one bucket created, boto3 beside it as the
//! store's own client. Only std and anyhow, so the integration tests include this file as it is.

use anyhow::{Context, bail};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// boto3 against the server. `create`: the bucket. `list`: every key, one a line. `rounds PATH N
/// PREFIX`: N managed uploads of the file, then N reads into memory, each one's seconds as JSON.
const BOTO3: &str = r#"
import boto3, sys, time, json
endpoint, ca, bucket, mode = sys.argv[1:5]
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test",
                  region_name="us-east-1", verify=ca)
if mode == "create":
    s3.create_bucket(Bucket=bucket)
elif mode == "list":
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for o in page.get("Contents", []):
            print(o["Key"])
else:
    path, n, prefix = sys.argv[5:8]
    w, r = [], []
    for i in range(int(n)):
        t = time.perf_counter(); s3.upload_file(path, bucket, f"{prefix}/{i}"); w.append(time.perf_counter() - t)
    for i in range(int(n)):
        t = time.perf_counter(); s3.get_object(Bucket=bucket, Key=f"{prefix}/{i}")["Body"].read(); r.append(time.perf_counter() - t)
    print(json.dumps({"write": w, "read": r}))
"#;

/// A running moto server; stopped (by pid) when dropped.
pub struct Moto {
    child: Child,
    /// `https://127.0.0.1:PORT`.
    pub endpoint: String,
    /// The CA that signed the server's certificate (PEM).
    pub ca: PathBuf,
    pub bucket: String,
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

/// The moto_server scripts/setup.sh installs (BELAY_TOOLS_DIR, else ~/.cache/belay/tools).
pub fn default_moto_server() -> PathBuf {
    let tools = std::env::var_os("BELAY_TOOLS_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/belay/tools")))
        .unwrap_or_default();
    tools.join("moto-venv/bin/moto_server")
}

impl Moto {
    /// Makes a CA and a server certificate in `dir`, starts `server` there on a free port and
    /// creates `bucket`.
    pub fn start(dir: &Path, server: &Path, bucket: &str) -> anyhow::Result<Moto> {
        anyhow::ensure!(
            server.is_file(),
            "no moto_server at {}: run scripts/setup.sh (it installs moto[server])",
            server.display()
        );
        let openssl = |args: &str| run(Command::new("openssl").current_dir(dir).args(args.split(' ')));
        openssl("req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=belay-test-ca -keyout ca.key -out ca.crt")?;
        openssl("req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout server.key -out server.csr")?;
        std::fs::write(dir.join("ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n")?;
        openssl(
            "x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 -extfile ext -out server.crt",
        )?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let log = std::fs::File::create(dir.join("moto.log"))?;
        let child = Command::new(server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .args(["-c", "server.crt", "-k", "server.key"])
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
            bucket: bucket.to_owned(),
            python: server.with_file_name("python"),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            anyhow::ensure!(Instant::now() < deadline, "moto_server did not listen within 30 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        moto.boto3(&["create"])?;
        Ok(moto)
    }

    /// Runs the boto3 script in `args`' mode (see [`BOTO3`]); its output.
    pub fn boto3(&self, args: &[&str]) -> anyhow::Result<String> {
        run(Command::new(&self.python)
            .args(["-c", BOTO3, &self.endpoint])
            .arg(&self.ca)
            .arg(&self.bucket)
            .args(args))
    }

    /// Every key in the bucket (what the tests check belay wrote).
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn keys(&self) -> anyhow::Result<Vec<String>> {
        Ok(self.boto3(&["list"])?.lines().map(str::to_owned).collect())
    }
}
