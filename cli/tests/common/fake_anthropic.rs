//! A fake Anthropic Messages API, served over HTTP on loopback by the test itself and scripted
//! per test: a function from each request to its reply (a tool call, a wrong schema, two tool
//! calls, an HTTP 529, a slow answer). Every request is kept, so a test can count the calls.

#![allow(dead_code)]

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
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

type Script = dyn Fn(&Seen) -> Reply + Send + Sync;

#[derive(Clone)]
struct Fake {
    script: Arc<Script>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

pub struct FakeAnthropic {
    pub url: String,
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
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
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
            seen,
            stop: Some(tx),
        }
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The environment a `belay` process needs to call this fake.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("BELAY_ANTHROPIC_BASE_URL", self.url.clone()),
            ("BELAY_ANTHROPIC_API_KEY", "test-key".into()),
        ]
    }
}
