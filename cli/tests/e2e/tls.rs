//! belay over real TLS, with a test CA made at run time (nothing checked in): PostgreSQL started
//! with `ssl=on` under `sslmode=verify-full`; a job run end to end through nginx terminating TLS
//! in front of the Temporal dev server, requiring a client certificate and the API key; `belay
//! doctor` against a healthy deployment and against each broken setting; configuration belay
//! cannot use stopping `belay worker` in one line before it serves.

use crate::common::fake_anthropic::test_ca::TestCa;
use crate::common::fake_anthropic::{FakeAnthropic, Seen, acceptance};
use crate::common::{BELAY, Belay, free_port, poll_until, wait_until};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const OK_SCRIPT: &str = r#"printf '{"status":"completed","loaded":true}' > "$BELAY_MANIFEST""#;
const API_KEY: &str = "test-temporal-key";

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts")
}

/// A PostgreSQL cluster of the test's own with `ssl=on`, serving the test CA's server
/// certificate; stopped and removed on drop.
struct TlsPostgres {
    dir: PathBuf,
    port: u16,
}

impl TlsPostgres {
    fn start(ca: &TestCa) -> TlsPostgres {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("belay-test-pg-tls-{}-{port}", std::process::id()));
        let out = Command::new("bash")
            .arg(scripts().join("pg-start.sh"))
            .env("BELAY_PG_DIR", &dir)
            .env("BELAY_PG_PORT", port.to_string())
            .env("BELAY_PG_SSL_CERT", &ca.server_cert)
            .env("BELAY_PG_SSL_KEY", &ca.server_key)
            .output()
            .unwrap();
        let pg = TlsPostgres { dir, port };
        assert!(
            out.status.success(),
            "pg-start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        pg
    }

    fn url(&self, query: &str) -> String {
        format!("postgres://postgres@localhost:{}/postgres?{query}", self.port)
    }
}

impl Drop for TlsPostgres {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(scripts().join("pg-stop.sh"))
            .env("BELAY_PG_DIR", &self.dir)
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn belay(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(BELAY)
        .args(args)
        .envs(env.iter().copied())
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The one `error:` line a failed command printed.
fn error_line(out: &Output) -> String {
    let text = stderr(out);
    let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "one error line: {text}");
    errors[0].to_owned()
}

#[tokio::test]
async fn postgres_over_tls_verify_full_with_the_ca_migrates_and_stores_and_require_against_plain_text_fails() {
    let ca = TestCa::new();
    let pg = TlsPostgres::start(&ca);
    let root = ca.ca.display().to_string();
    let verified = pg.url(&format!("sslmode=verify-full&sslrootcert={root}"));

    let out = belay(&["migrate", "--database-url", &verified], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("applied"));

    // A store test over the verified connection: it is encrypted, and rows go in and come out.
    let store = belay_store::Store::connect(&verified).await.unwrap();
    let described = store.describe().await.unwrap();
    assert!(described.contains("over TLS (TLSv1."), "{described}");
    assert!(described.contains("every migration applied"), "{described}");
    let (account, token) = store
        .create_account_with_role("tls-tester", belay_domain::access::Role::Member)
        .await
        .unwrap();
    assert!(!token.is_empty());
    let again = belay_store::Store::connect(&verified).await.unwrap();
    assert_eq!(
        again.authenticate(&token).await.unwrap().map(|a| a.id),
        Some(account.id)
    );
    store.close().await;
    again.close().await;

    // verify-full without the CA: the platform's roots do not vouch for the test CA.
    let out = belay(&["migrate", "--database-url", &pg.url("sslmode=verify-full")], &[]);
    assert!(!out.status.success());
    let line = error_line(&out);
    assert!(
        line.contains("DATABASE_URL: cannot connect") && line.contains("UnknownIssuer"),
        "{line}"
    );
    // verify-full against a CA that did not sign the server.
    let other = ca.other_ca.display().to_string();
    let out = belay(
        &[
            "migrate",
            "--database-url",
            &pg.url(&format!("sslmode=verify-full&sslrootcert={other}")),
        ],
        &[],
    );
    assert!(!out.status.success(), "{}", stderr(&out));
    // disable is plain text even where the server offers TLS.
    let plain = belay_store::Store::connect(&pg.url("sslmode=disable")).await.unwrap();
    let described = plain.describe().await.unwrap();
    assert!(described.contains("in plain text"), "{described}");
    plain.close().await;

    // require against a server without TLS (the suite's own PostgreSQL) fails.
    let base = std::env::var("BELAY_TEST_POSTGRES_URL").expect("BELAY_TEST_POSTGRES_URL");
    let sep = if base.contains('?') { '&' } else { '?' };
    let out = belay(
        &["migrate", "--database-url", &format!("{base}{sep}sslmode=require")],
        &[],
    );
    assert!(!out.status.success());
    let line = error_line(&out);
    assert!(line.contains("server does not support TLS"), "{line}");

    // A root certificate that cannot be read stops migrate before it connects, naming it.
    let out = belay(
        &[
            "migrate",
            "--database-url",
            &pg.url("sslmode=verify-full&sslrootcert=/nonexistent/ca.pem"),
        ],
        &[],
    );
    assert!(!out.status.success());
    let line = error_line(&out);
    assert!(
        line.starts_with("error: DATABASE_URL sslrootcert /nonexistent/ca.pem: cannot be read"),
        "{line}"
    );
}

/// nginx (Debian's nginx-light) terminating TLS in front of a gRPC upstream: it requires a client
/// certificate signed by the test CA and passes only `Authorization: Bearer API_KEY` on (any other
/// request is answered gRPC's UNAUTHENTICATED).
struct Nginx {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Nginx {
    async fn start(ca: &TestCa, upstream: &str) -> Nginx {
        let dir = ca.dir.path().join("nginx");
        std::fs::create_dir_all(dir.join("body")).unwrap();
        let port = free_port();
        let d = dir.display();
        let conf = format!(
            r#"daemon off;
user root;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{}}
http {{
  access_log {d}/access.log;
  client_body_temp_path {d}/body;
  server {{
    listen 127.0.0.1:{port} ssl http2;
    ssl_certificate {cert};
    ssl_certificate_key {key};
    ssl_client_certificate {ca};
    ssl_verify_client on;
    grpc_read_timeout 300s;
    grpc_send_timeout 300s;
    location / {{
      # A wrong or missing key: gRPC's UNAUTHENTICATED (16), as Temporal Cloud answers it.
      if ($http_authorization != "Bearer {API_KEY}") {{
        add_header grpc-status 16 always;
        add_header grpc-message "Request unauthorized" always;
        add_header content-type application/grpc always;
        return 200;
      }}
      grpc_pass grpc://{upstream};
    }}
  }}
}}
"#,
            cert = ca.server_cert.display(),
            key = ca.server_key.display(),
            ca = ca.ca.display(),
        );
        std::fs::write(dir.join("nginx.conf"), conf).unwrap();
        let bin = ["/usr/sbin/nginx", "nginx"]
            .into_iter()
            .find(|b| Path::new(b).exists() || *b == "nginx")
            .unwrap();
        let child = Command::new(bin)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx (scripts/setup.sh installs nginx-light)");
        wait_until("nginx to listen", Duration::from_secs(10), async || {
            std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())
        })
        .await;
        Nginx { child, port, dir }
    }

    fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("access.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGQUIT: the master stops its workers, then itself.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGQUIT,
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `belay doctor` line of check `name`.
fn doctor_line(out: &Output, name: &str) -> String {
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.get(6..).is_some_and(|rest| rest.starts_with(&format!("{name} "))))
        .collect();
    assert_eq!(lines.len(), 1, "one {name} line in:\n{text}\n{}", stderr(out));
    lines[0].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_runs_end_to_end_through_nginx_terminating_tls_with_mtls_and_an_api_key() {
    let ca = TestCa::new();
    let (dir, temporal) = Belay::temporal_first();
    let nginx = Nginx::start(&ca, &temporal.address).await;
    let address = format!("localhost:{}", nginx.port);
    let (ca_file, cert, key) = (
        ca.ca.display().to_string(),
        ca.client_cert.display().to_string(),
        ca.client_key.display().to_string(),
    );
    let tls_env: Vec<(&str, &str)> = vec![
        ("BELAY_TEMPORAL_ADDRESS", &address),
        ("BELAY_TEMPORAL_CA_FILE", &ca_file),
        ("BELAY_TEMPORAL_CERT_FILE", &cert),
        ("BELAY_TEMPORAL_KEY_FILE", &key),
        ("BELAY_TEMPORAL_API_KEY", API_KEY),
    ];
    let b = Belay::start_on_temporal(dir, temporal, &tls_env).await;
    b.catalogue().await;
    b.harness("tls", 1, OK_SCRIPT).await;
    let job = b.launch("tls").await;
    let id = job["id"].as_str().unwrap();
    b.wait_status(id, &["completed"], Duration::from_secs(120)).await;
    // The worker's and the API's calls went through the proxy, accepted.
    let log = nginx.access_log();
    assert!(
        log.lines()
            .any(|l| l.contains("PollActivityTaskQueue") && l.contains("\" 200 ")),
        "{log}"
    );
    assert!(
        log.lines()
            .any(|l| l.contains("StartWorkflowExecution") || l.contains("SignalWorkflowExecution")),
        "{log}"
    );

    let doctor = |env: &[(&str, &str)]| {
        belay(
            &[
                "doctor",
                "--pools",
                "workflows,db,git,harness",
                "--timeout-seconds",
                "10",
            ],
            &[
                [("DATABASE_URL", b.database_url.as_str())].as_slice(),
                &[("BELAY_DATA_DIR", b.dir.path().join("data").to_str().unwrap())],
                env,
            ]
            .concat(),
        )
    };
    // Through the proxy as configured: every queue of the named pools has its poller.
    let out = doctor(&tls_env);
    let line = doctor_line(&out, "temporal");
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        stderr(&out)
    );
    assert!(
        line.starts_with("ok") && line.contains("over TLS with a client certificate and an API key"),
        "{line}"
    );
    for q in ["belay.workflows 1", "belay.db 1", "belay.git 1", "belay.harness 1"] {
        assert!(line.contains(q), "{q}: {line}");
    }
    // Each setting broken in turn.
    let without = |name: &str| -> Vec<(&str, &str)> { tls_env.iter().copied().filter(|(k, _)| *k != name).collect() };
    let with = |name: &'static str, value: &'static str| -> Vec<(&str, &str)> {
        let mut env = without(name);
        env.push((name, value));
        env
    };
    for (env, expect) in [
        (without("BELAY_TEMPORAL_API_KEY"), "nauthenticated"),
        (with("BELAY_TEMPORAL_API_KEY", "wrong-key"), "nauthenticated"),
        (without("BELAY_TEMPORAL_CA_FILE"), "UnknownIssuer"),
        (
            {
                let mut env = without("BELAY_TEMPORAL_CERT_FILE");
                env.retain(|(k, _)| *k != "BELAY_TEMPORAL_KEY_FILE");
                env
            },
            "temporal",
        ),
        (
            with("BELAY_TEMPORAL_CA_FILE", "/nonexistent/ca.pem"),
            "BELAY_TEMPORAL_CA_FILE /nonexistent/ca.pem: cannot be read",
        ),
        (without("BELAY_TEMPORAL_KEY_FILE"), "BELAY_TEMPORAL_KEY_FILE is unset"),
        (with("BELAY_TEMPORAL_TLS", "false"), "BELAY_TEMPORAL_TLS is false but"),
    ] {
        let out = doctor(&env);
        assert!(!out.status.success(), "{env:?}");
        let line = doctor_line(&out, "temporal");
        assert!(
            line.starts_with("FAIL") && line.contains(expect),
            "{env:?}: {expect:?} in {line}"
        );
        assert!(doctor_line(&out, "database").starts_with("ok"));
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains(API_KEY),
            "the key is never printed"
        );
        assert!(!stderr(&out).contains(API_KEY));
    }
    // Configuration a worker cannot use stops it before it serves, in one line naming it.
    let unreadable = with("BELAY_TEMPORAL_CERT_FILE", "/nonexistent/client.pem");
    let out = belay(
        &["worker", "--pools", "db"],
        &[[("DATABASE_URL", b.database_url.as_str())].as_slice(), &unreadable].concat(),
    );
    assert!(!out.status.success());
    assert_eq!(
        error_line(&out),
        "error: BELAY_TEMPORAL_CERT_FILE /nonexistent/client.pem: cannot be read (No such file or directory (os error 2))"
    );
    let out = belay(
        &["worker", "--pools", "db"],
        &[
            [("DATABASE_URL", b.database_url.as_str())].as_slice(),
            &with("BELAY_TEMPORAL_ADDRESS", "grpc://localhost:7233"),
        ]
        .concat(),
    );
    assert!(error_line(&out).contains("BELAY_TEMPORAL_ADDRESS \"grpc://localhost:7233\": unknown scheme"));
}

#[tokio::test]
async fn the_llm_pool_refuses_a_key_under_the_wrong_name_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("belay.db").display());
    let out = belay(
        &["worker", "--pools", "llm"],
        &[
            ("DATABASE_URL", &db),
            ("ANTHROPIC_API_KEY", "sk-ant-test"),
            ("BELAY_ANTHROPIC_API_KEY", ""),
        ],
    );
    assert!(!out.status.success());
    let line = error_line(&out);
    assert!(
        line.contains("ANTHROPIC_API_KEY is set but BELAY_ANTHROPIC_API_KEY is not"),
        "{line}"
    );
    assert!(!line.contains("sk-ant-test"), "{line}");
    let out = belay(
        &["worker", "--pools", "llm"],
        &[("DATABASE_URL", &db), ("BELAY_ANTHROPIC_BASE_URL", "ftp://api.example")],
    );
    assert!(error_line(&out).contains("BELAY_ANTHROPIC_BASE_URL \"ftp://api.example\""));
    let out = belay(&["worker", "--pools", "db"], &[("DATABASE_URL", "mysql://x@y/z")]);
    assert!(error_line(&out).starts_with("error: DATABASE_URL: unknown scheme \"mysql\""));
    let out = belay(
        &["worker", "--pools", "db"],
        &[("DATABASE_URL", &db), ("BELAY_CA_FILE", dir.path().to_str().unwrap())],
    );
    assert!(
        error_line(&out).starts_with("error: BELAY_CA_FILE "),
        "{}",
        stderr(&out)
    );
}

/// A `belay dev` on ports of its own, with the fake model API's environment.
struct Dev {
    child: Child,
    data: PathBuf,
    temporal_port: u16,
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
    }
}

fn start_dev(data: &Path, env: &[(&'static str, String)]) -> Dev {
    use std::io::{BufRead, BufReader};
    let (api, temporal_port, ui) = (free_port(), free_port(), free_port());
    let tag = format!("belay-test-doctor-{}", std::process::id());
    let mut child = Command::new(BELAY)
        .args(["dev", "--demo", "--port", &api.to_string()])
        .args([
            "--temporal-port",
            &temporal_port.to_string(),
            "--ui-port",
            &ui.to_string(),
        ])
        .arg("--data-dir")
        .arg(data)
        .env("BELAY_TEMPORAL_BIN", crate::common::temporal_bin())
        .env("BELAY_SANDBOX_NETWORK", &tag)
        .env("BELAY_SANDBOX_LABELS", format!("belay.test=1,belay.test.run={tag}"))
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(data.with_extension("stderr.log")).unwrap())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        let line = lines.next().expect("belay dev exited before it served").unwrap();
        if line.trim().starts_with("Sandboxes:") {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    Dev {
        child,
        data: data.to_owned(),
        temporal_port,
    }
}

/// One broken setting: the variables changed, the ones removed, the check that fails and what its
/// line says.
type Broken<'a> = (Vec<(&'a str, &'a str)>, Vec<&'a str>, &'a str, &'a str);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_finds_a_healthy_dev_healthy_and_names_each_broken_setting() {
    let fake = FakeAnthropic::start(|_: &Seen| acceptance(json!([]))).await;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let dev = start_dev(&data, &fake.env());
    let database_url = format!("sqlite:{}", dev.data.join("belay.db").display());
    let address = format!("127.0.0.1:{}", dev.temporal_port);
    let data_dir = dev.data.display().to_string();
    let healthy: Vec<(&str, String)> = [
        ("DATABASE_URL", database_url.clone()),
        ("BELAY_TEMPORAL_ADDRESS", address.clone()),
        ("BELAY_DATA_DIR", data_dir.clone()),
        ("BELAY_SANDBOX_GIT_URL", "http://172.17.0.1:1".to_string()),
        (
            "BELAY_GIT_TOKEN_SECRET",
            "a-test-secret-of-at-least-thirty-two-bytes".to_string(),
        ),
    ]
    .into_iter()
    .chain(fake.env())
    .collect();
    // The pools belay dev runs here: every one, when the Docker Engine and its Sandbox network
    // are there.
    let doctor = |change: &[(&str, &str)], remove: &[&str]| {
        let mut env: Vec<(&str, &str)> = healthy
            .iter()
            .filter(|(k, _)| !remove.contains(k) && !change.iter().any(|(c, _)| c == k))
            .map(|(k, v)| (*k, v.as_str()))
            .collect();
        env.extend_from_slice(change);
        let mut cmd = Command::new(BELAY);
        cmd.args(["doctor", "--timeout-seconds", "15"])
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("DOCKER_HOST")
            .envs(env)
            .env("RUST_LOG", "warn");
        cmd.output().unwrap()
    };
    // Polled for a while: a just-started worker's first polls may not be listed yet.
    let polled = poll_until(Duration::from_secs(60), Duration::from_millis(500), async || {
        let out = doctor(&[], &[]);
        if out.status.success() { Ok(out) } else { Err(out) }
    })
    .await;
    let (Ok(out) | Err(out)) = polled;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    assert_eq!(text.lines().count(), 7, "{text}");
    let line = |name: &str| doctor_line(&out, name);
    assert!(
        line("database").starts_with("ok")
            && line("database").contains("SQLite")
            && line("database").contains("every migration applied"),
        "{text}"
    );
    assert!(
        line("temporal").contains("in plain text; pollers: belay.workflows "),
        "{text}"
    );
    assert!(
        line("object store").contains(&format!("directory {}/objects: wrote, read back and deleted", data_dir)),
        "{text}"
    );
    assert!(
        line("docker").starts_with("ok") && line("docker").contains("Docker Engine"),
        "{text}"
    );
    assert!(
        line("model api").contains(&format!("{}: GET /v1/models answered 200", fake.url)),
        "{text}"
    );
    assert!(
        line("chromium").starts_with("ok") && line("chromium").contains("Chromium"),
        "{text}"
    );
    assert!(fake.seen().is_empty(), "the probe sent no message");

    // Each broken setting: a FAIL on its line naming what is wrong, the rest still checked.
    let stopped_port = format!("127.0.0.1:{}", free_port());
    let cases: Vec<Broken> = vec![
        (
            vec![("DATABASE_URL", "postgres://postgres@127.0.0.1:1/x?sslmode=sometimes")],
            vec![],
            "database",
            "sslmode=\"sometimes\" is not one of",
        ),
        (
            vec![("DATABASE_URL", "mysql://x@y/z")],
            vec![],
            "database",
            "DATABASE_URL: unknown scheme \"mysql\"",
        ),
        (
            vec![("BELAY_TEMPORAL_ADDRESS", stopped_port.as_str())],
            vec![],
            "temporal",
            "connecting to Temporal",
        ),
        (vec![("BELAY_TEMPORAL_TLS", "true")], vec![], "temporal", "FAIL"),
        (
            vec![("BELAY_OBJECT_STORE", "gs://bucket/x")],
            vec![],
            "object store",
            "unknown scheme \"gs\"",
        ),
        (
            vec![("DOCKER_HOST", "unix:///nonexistent/docker.sock")],
            vec![],
            "docker",
            "FAIL",
        ),
        (
            vec![("BELAY_ANTHROPIC_API_KEY", "wrong-key")],
            vec![],
            "model api",
            "answered 401: BELAY_ANTHROPIC_API_KEY was not accepted",
        ),
        (
            vec![("ANTHROPIC_API_KEY", "test-key")],
            vec!["BELAY_ANTHROPIC_API_KEY"],
            "model api",
            "ANTHROPIC_API_KEY is set but BELAY_ANTHROPIC_API_KEY is not",
        ),
        (vec![], vec!["BELAY_CA_FILE"], "model api", "certificate"),
        (
            vec![("BELAY_CA_FILE", "/nonexistent/ca.pem")],
            vec![],
            "model api",
            "BELAY_CA_FILE /nonexistent/ca.pem: cannot be read",
        ),
        (
            vec![("BELAY_CHROMIUM", "/nonexistent/chromium")],
            vec![],
            "chromium",
            "/nonexistent/chromium cannot be run",
        ),
        (
            vec![],
            vec!["BELAY_SANDBOX_GIT_URL"],
            "sandbox git",
            "BELAY_SANDBOX_GIT_URL is unset",
        ),
    ];
    for (change, remove, check, expect) in cases {
        let out = doctor(&change, &remove);
        assert!(!out.status.success(), "{change:?} {remove:?}");
        let l = doctor_line(&out, check);
        assert!(
            l.starts_with("FAIL") && l.contains(expect),
            "{change:?} {remove:?}: {expect:?} in {l}"
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text.lines().count(), 7, "{text}");
        assert_eq!(
            text.lines().filter(|l| l.starts_with("FAIL")).count(),
            1,
            "only {check} fails: {text}"
        );
        assert!(error_line(&out).contains("1 check(s) failed"));
        assert!(
            !text.contains("test-key") && !stderr(&out).contains("test-key"),
            "a key was printed"
        );
    }
    drop(dev);
}
