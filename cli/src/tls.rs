//! TLS configuration read once by each command: the extra CA bundle every outbound HTTPS client
//! trusts besides the platform's roots (BELAY_CA_FILE), and how to reach a Temporal frontend over
//! TLS, mTLS and with an API key (BELAY_TEMPORAL_*). A value belay cannot use stops the command
//! with one line naming the variable and the rule, before it connects to anything.

use anyhow::anyhow;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};

/// The CA bundle of every outbound HTTPS client (the model API, the S3 store, the browser pool's
/// fetches).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct HttpTlsArgs {
    /// A PEM bundle of further CA certificates to trust, besides the platform's roots, for every
    /// outbound HTTPS connection (the model API, the S3 object store, the browser pool's fetches).
    #[arg(long = "ca-file", env = "BELAY_CA_FILE", num_args = 0..=1)]
    pub ca_file: Option<PathBuf>,
}

impl HttpTlsArgs {
    /// The extra roots (DER), none when BELAY_CA_FILE is unset.
    pub fn extra_roots(&self) -> anyhow::Result<Vec<Vec<u8>>> {
        match self.ca_file.as_deref().filter(|p| !p.as_os_str().is_empty()) {
            None => Ok(Vec::new()),
            Some(path) => Ok(certificates("BELAY_CA_FILE", path)?
                .into_iter()
                .map(|c| c.as_ref().to_vec())
                .collect()),
        }
    }
}

/// How to reach Temporal over TLS. Any of the CA, the client certificate, the server name or the
/// API key turns TLS on (an API key is never sent in plain text), as does an `https://` address;
/// BELAY_TEMPORAL_TLS=true turns it on with the platform's roots alone.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TemporalTlsArgs {
    /// `true` to connect over TLS (implied by any option below or an https:// address), `false`
    /// for plain text (the dev server).
    #[arg(id = "temporal_tls", long = "temporal-tls", env = "BELAY_TEMPORAL_TLS", num_args = 0..=1)]
    pub tls: Option<String>,
    /// The CA certificate(s) (PEM) the frontend's certificate is checked against, in place of
    /// the platform's roots.
    #[arg(id = "temporal_ca_file", long = "temporal-ca-file", env = "BELAY_TEMPORAL_CA_FILE", num_args = 0..=1)]
    pub ca_file: Option<PathBuf>,
    /// The client certificate (PEM) for mTLS; needs BELAY_TEMPORAL_KEY_FILE.
    #[arg(id = "temporal_cert_file", long = "temporal-cert-file", env = "BELAY_TEMPORAL_CERT_FILE", num_args = 0..=1)]
    pub cert_file: Option<PathBuf>,
    /// The client certificate's private key (PEM) for mTLS; needs BELAY_TEMPORAL_CERT_FILE.
    #[arg(id = "temporal_key_file", long = "temporal-key-file", env = "BELAY_TEMPORAL_KEY_FILE", num_args = 0..=1)]
    pub key_file: Option<PathBuf>,
    /// The name the frontend's certificate is checked against, when it is not the address's host.
    #[arg(id = "temporal_server_name", long = "temporal-server-name", env = "BELAY_TEMPORAL_SERVER_NAME", num_args = 0..=1)]
    pub server_name: Option<String>,
    /// An API key, sent as `Authorization: Bearer` over TLS (Temporal Cloud).
    #[arg(
        id = "temporal_api_key",
        long = "temporal-api-key",
        env = "BELAY_TEMPORAL_API_KEY",
        hide_env_values = true,
        num_args = 0..=1
    )]
    pub api_key: Option<String>,
}

fn set(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

fn set_path(value: &Option<PathBuf>) -> Option<&Path> {
    value.as_deref().filter(|p| !p.as_os_str().is_empty())
}

impl TemporalTlsArgs {
    /// The connection's TLS settings for `address`, every file read and checked.
    pub fn resolve(&self, address: &str) -> anyhow::Result<belay_client::TemporalTls> {
        let explicit = match set(&self.tls).map(str::to_ascii_lowercase).as_deref() {
            None => None,
            Some("true" | "1" | "yes" | "on") => Some(true),
            Some("false" | "0" | "no" | "off") => Some(false),
            Some(other) => anyhow::bail!("BELAY_TEMPORAL_TLS {other:?}: expected true or false"),
        };
        let scheme = address.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        let https = match scheme.as_deref() {
            None => false,
            Some("https") => true,
            Some("http") => false,
            Some(other) => anyhow::bail!(
                "BELAY_TEMPORAL_ADDRESS {address:?}: unknown scheme {other:?}; expected HOST:PORT, http://HOST:PORT or https://HOST:PORT"
            ),
        };
        let options: Vec<&str> = [
            set_path(&self.ca_file).map(|_| "BELAY_TEMPORAL_CA_FILE"),
            set_path(&self.cert_file).map(|_| "BELAY_TEMPORAL_CERT_FILE"),
            set_path(&self.key_file).map(|_| "BELAY_TEMPORAL_KEY_FILE"),
            set(&self.server_name).map(|_| "BELAY_TEMPORAL_SERVER_NAME"),
            set(&self.api_key).map(|_| "BELAY_TEMPORAL_API_KEY"),
        ]
        .into_iter()
        .flatten()
        .collect();
        let enabled = match explicit {
            Some(false) => {
                if let Some(first) = options.first() {
                    anyhow::bail!("BELAY_TEMPORAL_TLS is false but {first} is set: that option needs TLS");
                }
                anyhow::ensure!(
                    !https,
                    "BELAY_TEMPORAL_TLS is false but BELAY_TEMPORAL_ADDRESS {address:?} is https://"
                );
                false
            }
            Some(true) => true,
            None => https || !options.is_empty(),
        };
        anyhow::ensure!(
            !(enabled && scheme.as_deref() == Some("http")),
            "BELAY_TEMPORAL_ADDRESS {address:?} is http:// but TLS is on ({}): write HOST:PORT or https://HOST:PORT",
            options.first().copied().unwrap_or("BELAY_TEMPORAL_TLS")
        );
        let server_ca_pem = match set_path(&self.ca_file) {
            None => None,
            Some(path) => {
                certificates("BELAY_TEMPORAL_CA_FILE", path)?;
                Some(read("BELAY_TEMPORAL_CA_FILE", path)?)
            }
        };
        let client_identity_pem = match (set_path(&self.cert_file), set_path(&self.key_file)) {
            (None, None) => None,
            (Some(_), None) => anyhow::bail!(
                "BELAY_TEMPORAL_KEY_FILE is unset: the client certificate in BELAY_TEMPORAL_CERT_FILE needs its private key"
            ),
            (None, Some(_)) => anyhow::bail!(
                "BELAY_TEMPORAL_CERT_FILE is unset: the private key in BELAY_TEMPORAL_KEY_FILE needs its client certificate"
            ),
            (Some(cert), Some(key)) => {
                certificates("BELAY_TEMPORAL_CERT_FILE", cert)?;
                private_key("BELAY_TEMPORAL_KEY_FILE", key)?;
                Some((
                    read("BELAY_TEMPORAL_CERT_FILE", cert)?,
                    read("BELAY_TEMPORAL_KEY_FILE", key)?,
                ))
            }
        };
        Ok(belay_client::TemporalTls {
            enabled,
            server_ca_pem,
            client_identity_pem,
            server_name: set(&self.server_name).map(str::to_owned),
            api_key: set(&self.api_key).map(str::to_owned),
        })
    }
}

/// The PostgreSQL `sslmode`s (libpq's, which sqlx follows).
const SSLMODES: [&str; 6] = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"];

/// Checks DATABASE_URL before anything connects: `sqlite:…` or `postgres://…`, and for
/// PostgreSQL a known `sslmode` and readable `sslrootcert`, `sslcert` and `sslkey` files, the
/// certificate and its key given together.
pub fn check_database_url(url: &str) -> anyhow::Result<()> {
    if url.starts_with("sqlite:") {
        return Ok(());
    }
    let scheme = url.split_once(':').map(|(s, _)| s).unwrap_or_default();
    anyhow::ensure!(
        matches!(scheme, "postgres" | "postgresql") && url[scheme.len()..].starts_with("://"),
        "DATABASE_URL: unknown scheme {scheme:?}; expected sqlite:PATH or postgres://USER@HOST:PORT/DB"
    );
    let parsed = reqwest::Url::parse(url).map_err(|e| anyhow!("DATABASE_URL: not a postgres:// URL ({e})"))?;
    let mut cert = None;
    let mut key = None;
    for (name, value) in parsed.query_pairs() {
        match name.as_ref() {
            "sslmode" => anyhow::ensure!(
                SSLMODES.contains(&value.as_ref()),
                "DATABASE_URL: sslmode={value:?} is not one of {}",
                SSLMODES.join(", ")
            ),
            "sslrootcert" => {
                certificates("DATABASE_URL sslrootcert", Path::new(value.as_ref()))?;
            }
            "sslcert" => cert = Some(value.into_owned()),
            "sslkey" => key = Some(value.into_owned()),
            _ => {}
        }
    }
    match (cert, key) {
        (None, None) => {}
        (Some(_), None) => anyhow::bail!("DATABASE_URL: sslcert needs sslkey, the client certificate's private key"),
        (None, Some(_)) => anyhow::bail!("DATABASE_URL: sslkey needs sslcert, the client certificate"),
        (Some(cert), Some(key)) => {
            certificates("DATABASE_URL sslcert", Path::new(&cert))?;
            private_key("DATABASE_URL sslkey", Path::new(&key))?;
        }
    }
    Ok(())
}

fn read(var: &str, path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| anyhow!("{var} {}: cannot be read ({e})", path.display()))
}

/// The PEM certificates in `path`; refuses a file that cannot be read or holds none.
pub fn certificates(var: &str, path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let pem = read(var, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("{var} {}: not a PEM certificate file ({e})", path.display()))?;
    anyhow::ensure!(
        !certs.is_empty(),
        "{var} {}: holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
        path.display()
    );
    Ok(certs)
}

/// Refuses a private key file that cannot be read or holds no PEM private key.
fn private_key(var: &str, path: &Path) -> anyhow::Result<()> {
    let pem = read(var, path)?;
    PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|e| anyhow!("{var} {}: holds no PEM private key ({e})", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> TemporalTlsArgs {
        TemporalTlsArgs::default()
    }

    #[test]
    fn plain_text_unless_an_option_asks_for_tls() {
        assert!(!args().resolve("127.0.0.1:7233").unwrap().enabled);
        assert!(args().resolve("https://temporal.example:7233").unwrap().enabled);
        let key = TemporalTlsArgs {
            api_key: Some("k".into()),
            ..args()
        };
        let tls = key.resolve("ns.acct.tmprl.cloud:7233").unwrap();
        assert!(tls.enabled);
        assert_eq!(tls.api_key.as_deref(), Some("k"));
        let on = TemporalTlsArgs {
            tls: Some("true".into()),
            ..args()
        };
        assert!(on.resolve("127.0.0.1:7233").unwrap().enabled);
    }

    #[test]
    fn database_urls_are_checked_before_connecting() {
        check_database_url("sqlite:/tmp/x.db").unwrap();
        check_database_url("postgres://u@h:5432/db?sslmode=verify-full").unwrap();
        let e = check_database_url("mysql://u@h/db").unwrap_err().to_string();
        assert!(e.starts_with("DATABASE_URL: unknown scheme \"mysql\""), "{e}");
        let e = check_database_url("postgres://u@h/db?sslmode=strict")
            .unwrap_err()
            .to_string();
        assert!(e.contains("sslmode=\"strict\" is not one of"), "{e}");
        let e = check_database_url("postgres://u@h/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("DATABASE_URL sslrootcert /nonexistent/ca.pem: cannot be read"),
            "{e}"
        );
        let e = check_database_url("postgres://u@h/db?sslcert=/x.pem")
            .unwrap_err()
            .to_string();
        assert!(e.contains("sslcert needs sslkey"), "{e}");
    }

    #[test]
    fn contradictions_and_half_pairs_are_refused_naming_the_variable() {
        let key_off = TemporalTlsArgs {
            tls: Some("false".into()),
            api_key: Some("k".into()),
            ..args()
        };
        let e = key_off.resolve("127.0.0.1:7233").unwrap_err().to_string();
        assert!(e.contains("BELAY_TEMPORAL_API_KEY"), "{e}");
        let e = TemporalTlsArgs {
            tls: Some("maybe".into()),
            ..args()
        }
        .resolve("127.0.0.1:7233")
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("BELAY_TEMPORAL_TLS"), "{e}");
        let e = args().resolve("grpc://127.0.0.1:7233").unwrap_err().to_string();
        assert!(e.contains("unknown scheme"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("c.pem");
        std::fs::write(&cert, "not a certificate").unwrap();
        let e = TemporalTlsArgs {
            cert_file: Some(cert.clone()),
            ..args()
        }
        .resolve("127.0.0.1:7233")
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("BELAY_TEMPORAL_KEY_FILE is unset"), "{e}");
        let e = TemporalTlsArgs {
            ca_file: Some(cert),
            ..args()
        }
        .resolve("127.0.0.1:7233")
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("BELAY_TEMPORAL_CA_FILE") && e.contains("holds no PEM certificate"),
            "{e}"
        );
        let e = HttpTlsArgs {
            ca_file: Some(dir.path().join("missing.pem")),
        }
        .extra_roots()
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("BELAY_CA_FILE") && e.contains("cannot be read"), "{e}");
    }
}
