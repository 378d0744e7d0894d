//! A fake Anthropic Messages API, served over HTTPS on loopback by the test itself (its
//! certificate signed by a test CA made at run time) and scripted per test: a function from each
//! request to its reply (a tool call, a wrong schema, two tool calls, an HTTP 529, a slow answer).
//! Every request is kept, so a test can count the calls. `GET /v1/models` answers 200 to the key
//! `test-key` and 401 to any other, as the real API's does.

#![allow(dead_code)]

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request as the fake received it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub model: String,
    pub tool: String,
    pub user: String,
    pub api_key: Option<String>,
}

/// What the script answers.
pub enum Reply {
    /// A message whose content is these tool calls `(name, input)`.
    Tools(Vec<(String, Value)>),
    /// An HTTP error status with a body.
    Status(u16),
    /// Waits, then answers.
    Slow(Duration, Box<Reply>),
}

/// A tool call of `record_acceptance`.
pub fn acceptance(criteria: Value) -> Reply {
    Reply::Tools(vec![("record_acceptance".into(), json!({ "criteria": criteria }))])
}

/// A tool call of `record_verdict`.
pub fn verdict(v: Value) -> Reply {
    Reply::Tools(vec![("record_verdict".into(), v)])
}

#[path = "test_ca.rs"]
pub mod test_ca;

/// A TLS listener for `axum::serve`: each accepted connection's handshake done before it is
/// handed on; a failed handshake (a client that does not trust the CA) is dropped.
pub struct TlsListener {
    tcp: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl TlsListener {
    /// Binds a free loopback port serving `cert` and `key` (PEM files).
    pub async fn bind(cert: &std::path::Path, key: &std::path::Path) -> TlsListener {
        use rustls_pki_types::pem::PemObject;
        use rustls_pki_types::{CertificateDer, PrivateKeyDer};
        let certs = CertificateDer::pem_file_iter(cert)
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_file(key).unwrap();
        let provider = std::sync::Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        TlsListener {
            tcp: tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            let handshake = tokio::time::timeout(Duration::from_secs(5), self.acceptor.accept(tcp));
            if let Ok(Ok(tls)) = handshake.await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

async fn models(headers: HeaderMap) -> axum::response::Response {
    let key = headers.get("x-api-key").and_then(|v| v.to_str().ok());
    if key == Some("test-key") {
        axum::Json(json!({"data": [{"type": "model", "id": "claude-haiku-4-5"}], "has_more": false})).into_response()
    } else {
        (
            StatusCode::UNAUTHORIZED,
            axum::Json(
                json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
            ),
        )
            .into_response()
    }
}

type Script = dyn Fn(&Seen) -> Reply + Send + Sync;

#[derive(Clone)]
struct Fake {
    script: Arc<Script>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

pub struct FakeAnthropic {
    /// `https://localhost:PORT`.
    pub url: String,
    /// The CA that signed the fake's certificate.
    pub ca: test_ca::TestCa,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for FakeAnthropic {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

async fn messages(State(f): State<Fake>, headers: HeaderMap, body: axum::Json<Value>) -> axum::response::Response {
    let b = body.0;
    let seen = Seen {
        model: b["model"].as_str().unwrap_or_default().to_owned(),
        tool: b["tools"][0]["name"].as_str().unwrap_or_default().to_owned(),
        user: b["messages"][0]["content"].as_str().unwrap_or_default().to_owned(),
        api_key: headers
            .get("x-api-key")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    };
    f.seen.lock().unwrap().push(seen.clone());
    let mut reply = (f.script)(&seen);
    loop {
        match reply {
            Reply::Slow(d, next) => {
                tokio::time::sleep(d).await;
                reply = *next;
            }
            Reply::Status(s) => {
                return (
                    StatusCode::from_u16(s).unwrap(),
                    axum::Json(
                        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
                    ),
                )
                    .into_response();
            }
            Reply::Tools(calls) => {
                let content: Vec<Value> = calls
                    .into_iter()
                    .enumerate()
                    .map(|(i, (name, input))| json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": name, "input": input}))
                    .collect();
                return axum::Json(json!({
                    "id": "msg_fake",
                    "type": "message",
                    "role": "assistant",
                    "model": seen.model,
                    "content": content,
                    "stop_reason": "tool_use",
                    "usage": {"input_tokens": 1000, "output_tokens": 200},
                }))
                .into_response();
            }
        }
    }
}

impl FakeAnthropic {
    /// Serves the script on a free loopback port.
    pub async fn start(script: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> FakeAnthropic {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let state = Fake {
            script: Arc::new(script),
            seen: seen.clone(),
        };
        let app = axum::Router::new()
            .route("/v1/messages", post(messages))
            .route("/v1/models", get(models))
            .with_state(state);
        let ca = test_ca::TestCa::new();
        let listener = TlsListener::bind(&ca.server_cert, &ca.server_key).await;
        let url = format!(
            "https://localhost:{}",
            axum::serve::Listener::local_addr(&listener).unwrap().port()
        );
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        FakeAnthropic {
            url,
            ca,
            seen,
            stop: Some(tx),
        }
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The environment a `belay` process needs to call this fake: its URL, the key and the CA.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("BELAY_ANTHROPIC_BASE_URL", self.url.clone()),
            ("BELAY_ANTHROPIC_API_KEY", "test-key".into()),
            ("BELAY_CA_FILE", self.ca.ca.display().to_string()),
        ]
    }

    /// The CA (DER) a model client given directly must trust.
    pub fn roots(&self) -> Vec<Vec<u8>> {
        use rustls_pki_types::CertificateDer;
        use rustls_pki_types::pem::PemObject;
        CertificateDer::pem_file_iter(&self.ca.ca)
            .unwrap()
            .map(|c| c.unwrap().as_ref().to_vec())
            .collect()
    }
}
