//! A test CA made at run time with openssl (never committed): a CA, a server certificate for
//! `localhost` and `127.0.0.1`, and a client certificate for mTLS, all under a temp dir. A second,
//! unrelated CA stands for "a CA that did not sign the server".

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct TestCa {
    pub dir: tempfile::TempDir,
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// A CA that signed nothing here.
    pub other_ca: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl TestCa {
    pub fn new() -> TestCa {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let req = |key: &str, cn: &str, out: &str| {
            openssl(
                d,
                &[
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", cn, "-keyout", key, "-out",
                    out,
                ],
            )
        };
        req("ca.key", "/CN=belay-test-ca", "ca.crt");
        req("other-ca.key", "/CN=belay-other-ca", "other-ca.crt");
        let sign = |name: &str, cn: &str, ext: Option<&str>| {
            openssl(
                d,
                &[
                    "req",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-subj",
                    cn,
                    "-keyout",
                    &format!("{name}.key"),
                    "-out",
                    &format!("{name}.csr"),
                ],
            );
            let mut args = vec![
                "x509",
                "-req",
                "-in",
                &format!("{name}.csr")[..],
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "1",
                "-out",
                &format!("{name}.crt")[..],
            ]
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>();
            if let Some(ext) = ext {
                std::fs::write(d.join(format!("{name}.ext")), ext).unwrap();
                args.push("-extfile".into());
                args.push(format!("{name}.ext"));
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            openssl(d, &args);
        };
        sign(
            "server",
            "/CN=localhost",
            Some("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
        );
        sign("client", "/CN=belay-worker", Some("extendedKeyUsage=clientAuth\n"));
        TestCa {
            ca: d.join("ca.crt"),
            server_cert: d.join("server.crt"),
            server_key: d.join("server.key"),
            client_cert: d.join("client.crt"),
            client_key: d.join("client.key"),
            other_ca: d.join("other-ca.crt"),
            dir,
        }
    }
}
