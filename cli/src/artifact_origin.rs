//! The artifact origin's settings: where run builds are served to be played, as `belay api`
//! and `belay dev` read them. The origin is a listener of its own (decision 0051), so its URL, the
//! console's origin that may frame it, its signing secret and its URLs' lifetime are read once
//! here and refused in one line when belay cannot use them.

use anyhow::Context;
use belay_api::artifact_origin::ArtifactOrigin;
use belay_domain::artifact_url::{DEFAULT_TTL_SECS, MAX_TTL_SECS};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;

/// How long a minted artifact URL lives: shared by `belay api` and `belay dev`.
#[derive(Debug, Clone, clap::Args)]
pub struct ArtifactTtl {
    /// Seconds a minted artifact URL (`POST /v1/runs/{id}/artifact-url`) works.
    #[arg(
        long = "artifact-url-ttl-seconds",
        env = "BELAY_ARTIFACT_URL_TTL_SECONDS",
        default_value_t = DEFAULT_TTL_SECS,
        value_parser = clap::value_parser!(i64).range(1..=MAX_TTL_SECS)
    )]
    pub seconds: i64,
}

/// `belay api`'s artifact origin.
#[derive(Debug, Clone, clap::Args)]
pub struct ArtifactArgs {
    /// Also listen here (`host:port`) serving run artifacts only, to be played in the console:
    /// an origin of their own. Without it the API mints no artifact URLs.
    #[arg(long, env = "BELAY_API_ARTIFACT_LISTEN")]
    pub artifact_listen: Option<String>,
    /// The artifact listener as browsers reach it (`https://artifacts.example.com`); default
    /// `http://` and the listen address.
    #[arg(long, env = "BELAY_API_ARTIFACT_URL")]
    pub artifact_url: Option<String>,
    /// The console's origin as browsers reach it, the only page that may frame a build; default
    /// `http://` and the API's host and port.
    #[arg(long, env = "BELAY_CONSOLE_ORIGIN")]
    pub console_origin: Option<String>,
    /// Signs artifact URLs; every API process of a deployment shares it (at least 32 bytes).
    #[arg(long, env = "BELAY_ARTIFACT_SECRET", hide_env_values = true)]
    pub artifact_secret: Option<String>,
    #[command(flatten)]
    pub ttl: ArtifactTtl,
}

/// `value` as an origin (`http(s)://host[:port]`, nothing after), or why not, naming `name`.
pub fn origin(name: &str, value: &str) -> anyhow::Result<String> {
    let v = value.trim().trim_end_matches('/');
    let rest = v
        .strip_prefix("http://")
        .or_else(|| v.strip_prefix("https://"))
        .with_context(|| format!("{name} {value:?}: an origin is http:// or https:// and a host"))?;
    anyhow::ensure!(
        !rest.is_empty()
            && rest
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']')),
        "{name} {value:?}: an origin is a scheme, a host and a port only (no path, query or spaces)"
    );
    Ok(v.to_owned())
}

/// The console origins of an API on `host:port`: that address, and `localhost` beside a loopback
/// address (a browser may use either). An unspecified host (`0.0.0.0`) names no origin.
pub fn default_console_origins(host: &str, port: u16) -> anyhow::Result<String> {
    anyhow::ensure!(
        !matches!(host, "0.0.0.0" | "::" | "[::]"),
        "BELAY_CONSOLE_ORIGIN is unset and the API listens on {host}: name the console's origin as browsers reach it (e.g. https://belay.example.com), the only page that may frame a build"
    );
    let mut origins = format!("http://{host}:{port}");
    if host == "127.0.0.1" {
        origins.push_str(&format!(" http://localhost:{port}"));
    }
    Ok(origins)
}

/// The artifact origin served on `bound`, checked.
pub fn artifact_origin(
    bound: SocketAddr,
    public_url: Option<&str>,
    console_origins: &str,
    secret: Vec<u8>,
    ttl: &ArtifactTtl,
) -> anyhow::Result<ArtifactOrigin> {
    let public_url = match public_url {
        Some(u) => origin("BELAY_API_ARTIFACT_URL", u)?,
        None => format!("http://{bound}"),
    };
    anyhow::ensure!(
        secret.len() >= 32,
        "BELAY_ARTIFACT_SECRET is {} bytes: it signs artifact URLs and must be at least 32",
        secret.len()
    );
    Ok(ArtifactOrigin {
        public_url,
        frame_ancestors: console_origins.to_owned(),
        secret: Arc::new(secret),
        ttl_secs: ttl.seconds,
    })
}

impl ArtifactArgs {
    /// The listener and origin `belay api` serves, when `--artifact-listen` is set; the API
    /// listens on `api_host:api_port`.
    pub async fn open(&self, api_host: &str, api_port: u16) -> anyhow::Result<Option<(TcpListener, ArtifactOrigin)>> {
        let Some(addr) = self.artifact_listen.as_deref() else {
            return Ok(None);
        };
        let Some(secret) = self.artifact_secret.as_deref().filter(|s| !s.is_empty()) else {
            anyhow::bail!(
                "BELAY_ARTIFACT_SECRET is unset: BELAY_API_ARTIFACT_LISTEN serves run builds under URLs it signs"
            );
        };
        let console = match self.console_origin.as_deref() {
            Some(c) => c
                .split_whitespace()
                .map(|o| origin("BELAY_CONSOLE_ORIGIN", o))
                .collect::<anyhow::Result<Vec<_>>>()?
                .join(" "),
            None => default_console_origins(api_host, api_port)?,
        };
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding {addr} (BELAY_API_ARTIFACT_LISTEN)"))?;
        let origin = artifact_origin(
            listener.local_addr()?,
            self.artifact_url.as_deref(),
            &console,
            secret.as_bytes().to_vec(),
            &self.ttl,
        )?;
        Ok(Some((listener, origin)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_is_a_scheme_and_a_host_only() {
        assert_eq!(origin("X", "https://a.example.com/").unwrap(), "https://a.example.com");
        assert_eq!(origin("X", "http://127.0.0.1:8081").unwrap(), "http://127.0.0.1:8081");
        for bad in [
            "a.example.com",
            "http://",
            "https://a.example.com/r",
            "http://a b",
            "http://a;b",
        ] {
            let e = origin("BELAY_API_ARTIFACT_URL", bad).unwrap_err().to_string();
            assert!(e.starts_with("BELAY_API_ARTIFACT_URL"), "{e}");
        }
    }

    #[test]
    fn an_api_on_every_address_must_name_its_console() {
        assert_eq!(
            default_console_origins("127.0.0.1", 8080).unwrap(),
            "http://127.0.0.1:8080 http://localhost:8080"
        );
        assert!(
            default_console_origins("0.0.0.0", 8080)
                .unwrap_err()
                .to_string()
                .contains("BELAY_CONSOLE_ORIGIN")
        );
    }

    #[test]
    fn a_short_secret_is_refused() {
        let ttl = ArtifactTtl { seconds: 900 };
        let e = artifact_origin(
            "127.0.0.1:1".parse().unwrap(),
            None,
            "http://x",
            b"short".to_vec(),
            &ttl,
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(e.contains("BELAY_ARTIFACT_SECRET"), "{e}");
    }
}
