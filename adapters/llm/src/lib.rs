//! The model client: the Anthropic Messages API over reqwest with tool use, each call metered
//! before it is made (the monthly budget, the daily call cap, the Change budget, in the store's
//! model meters) and settled at the cost computed from the usage the API reports. Without an API
//! key every call is refused before it is made. The key is never logged: `Debug` of the
//! configuration redacts it. The prompts of the acceptance check and the Integration Judge are
//! here too; what the answers mean is decided by `belay_domain`.

use belay_domain::acceptance::{AcceptanceCriterion, AcceptanceInput, PartKind, ToolCall};
pub use belay_domain::meter::{ModelLimits, ModelReservation};
use serde::Deserialize;
use std::time::Duration;
use tracing::{info, warn};

/// The default models: the current Haiku and Sonnet.
pub const DEFAULT_HAIKU: &str = "claude-haiku-4-5";
pub const DEFAULT_SONNET: &str = "claude-sonnet-4-5";
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// What a meter's future answers: the value, or why the meters could not be read or written.
pub type MeterFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, String>> + Send + 'a>>;

/// The meters a model call is held to: reserved before it is made, released when it was never
/// sent, settled at the cost the API reported. The activities hand in the store's model meters;
/// the adapter never reaches the database itself.
pub trait ModelMeter: Send + Sync {
    /// Reserves `estimate_usd` for one call of `change_id` under `limits`: the reservation, or
    /// (inside `Ok`) why a meter refused it.
    fn reserve<'a>(
        &'a self,
        change_id: &'a str,
        estimate_usd: f64,
        limits: ModelLimits,
        now_ms: i64,
    ) -> MeterFuture<'a, Result<ModelReservation, String>>;
    /// Gives back a reservation whose call was never sent.
    fn release<'a>(&'a self, reservation: &'a ModelReservation) -> MeterFuture<'a, ()>;
    /// Settles a reservation at what the call cost.
    fn settle<'a>(&'a self, reservation: &'a ModelReservation, cost_usd: f64) -> MeterFuture<'a, ()>;
}

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

impl Price {
    pub fn cost(&self, input_tokens: u64, output_tokens: u64) -> f64 {
        (input_tokens as f64 * self.input_per_mtok + output_tokens as f64 * self.output_per_mtok) / 1_000_000.0
    }
}

/// Which of the two models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    Haiku,
    Sonnet,
}

/// The model client's configuration.
#[derive(Clone)]
pub struct LlmConfig {
    pub base_url: String,
    pub api_key: Option<String>,
    pub haiku: String,
    pub sonnet: String,
    pub haiku_price: Price,
    pub sonnet_price: Price,
    pub limits: ModelLimits,
    /// One call's deadline.
    pub timeout: Duration,
    pub max_tokens: u32,
    /// CA certificates (DER) trusted besides the platform's roots (BELAY_CA_FILE).
    pub extra_roots: Vec<Vec<u8>>,
}

impl std::fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("haiku", &self.haiku)
            .field("sonnet", &self.sonnet)
            .field("limits", &self.limits)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl LlmConfig {
    /// The defaults, overridden by the settings `lookup` answers by their variable names:
    /// BELAY_ANTHROPIC_* (base URL, API key, the two model names, prices per million tokens, the
    /// monthly budget, the daily call cap, the per-call timeout, the answer's token bound) and
    /// BELAY_CHANGE_MODEL_BUDGET_USD; blank is unset. Refuses a key under the name other tools
    /// read (ANTHROPIC_API_KEY) when BELAY_ANTHROPIC_API_KEY is unset, and a base URL that is not
    /// `https://` (or `http://`). The `belay` command reads them once, as flags or environment
    /// variables.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        let env = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        fn num<T: std::str::FromStr>(name: &str, value: Option<String>, default: T) -> anyhow::Result<T> {
            match value {
                None => Ok(default),
                Some(v) => v
                    .trim()
                    .parse()
                    .map_err(|_| anyhow::anyhow!("{name} must be a number, not {v:?}")),
            }
        }
        let env_num = |name: &str, default| num(name, env(name), default);
        let env_int = |name: &str, default| num(name, env(name), default);
        if env("BELAY_ANTHROPIC_API_KEY").is_none() && env("ANTHROPIC_API_KEY").is_some() {
            anyhow::bail!(
                "ANTHROPIC_API_KEY is set but BELAY_ANTHROPIC_API_KEY is not: belay reads the model API key from BELAY_ANTHROPIC_API_KEY only"
            );
        }
        let base_url = env("BELAY_ANTHROPIC_BASE_URL").unwrap_or_else(|| DEFAULT_BASE_URL.into());
        let scheme = base_url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        if !matches!(scheme.as_deref(), Some("https" | "http")) {
            anyhow::bail!("BELAY_ANTHROPIC_BASE_URL {base_url:?}: the model API is an https:// (or http://) URL");
        }
        Ok(LlmConfig {
            base_url,
            api_key: env("BELAY_ANTHROPIC_API_KEY"),
            haiku: env("BELAY_ANTHROPIC_HAIKU_MODEL").unwrap_or_else(|| DEFAULT_HAIKU.into()),
            sonnet: env("BELAY_ANTHROPIC_SONNET_MODEL").unwrap_or_else(|| DEFAULT_SONNET.into()),
            haiku_price: Price {
                input_per_mtok: env_num("BELAY_ANTHROPIC_HAIKU_INPUT_USD_PER_MTOK", 1.0)?,
                output_per_mtok: env_num("BELAY_ANTHROPIC_HAIKU_OUTPUT_USD_PER_MTOK", 5.0)?,
            },
            sonnet_price: Price {
                input_per_mtok: env_num("BELAY_ANTHROPIC_SONNET_INPUT_USD_PER_MTOK", 3.0)?,
                output_per_mtok: env_num("BELAY_ANTHROPIC_SONNET_OUTPUT_USD_PER_MTOK", 15.0)?,
            },
            limits: ModelLimits {
                monthly_budget_usd: env_num("BELAY_ANTHROPIC_MONTHLY_BUDGET_USD", 100.0)?,
                daily_call_cap: num(
                    "BELAY_ANTHROPIC_DAILY_CALL_CAP",
                    env("BELAY_ANTHROPIC_DAILY_CALL_CAP"),
                    1000,
                )?,
                change_budget_usd: env_num("BELAY_CHANGE_MODEL_BUDGET_USD", 2.0)?,
            },
            timeout: Duration::from_millis(env_int("BELAY_ANTHROPIC_TIMEOUT_MS", 120_000u64)?),
            max_tokens: num("BELAY_ANTHROPIC_MAX_TOKENS", env("BELAY_ANTHROPIC_MAX_TOKENS"), 4096u32)?,
            extra_roots: Vec::new(),
        })
    }

    fn name(&self, m: Model) -> &str {
        match m {
            Model::Haiku => &self.haiku,
            Model::Sonnet => &self.sonnet,
        }
    }

    fn price(&self, m: Model) -> Price {
        match m {
            Model::Haiku => self.haiku_price,
            Model::Sonnet => self.sonnet_price,
        }
    }
}

/// Why a model call gave no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    /// A meter (or a missing key) refused it before it was made.
    #[error("{0}")]
    Refused(String),
    #[error("the Messages API answered HTTP {status}: {body}")]
    Http { status: u16, body: String },
    #[error("the Messages API could not be reached: {0}")]
    Transport(String),
    #[error("the Messages API's answer is not a message: {0}")]
    Decode(String),
}

/// One answer: its tool calls and what it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub calls: Vec<ToolCall>,
    pub cost_usd: f64,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    content: Vec<Block>,
    usage: Usage,
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    input: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}

/// A tool the model is given.
pub struct Tool<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub schema: serde_json::Value,
}

/// The Anthropic Messages API client.
#[derive(Clone)]
pub struct AnthropicClient {
    http: reqwest::Client,
    pub config: LlmConfig,
}

impl AnthropicClient {
    pub fn new(config: LlmConfig) -> anyhow::Result<Self> {
        let mut builder = reqwest::Client::builder().timeout(config.timeout);
        for der in &config.extra_roots {
            builder = builder.add_root_certificate(
                reqwest::Certificate::from_der(der).map_err(|e| anyhow::anyhow!("BELAY_CA_FILE: {e}"))?,
            );
        }
        Ok(AnthropicClient {
            http: builder.build()?,
            config,
        })
    }

    /// The reachability and authentication probe `belay doctor` makes: `GET /v1/models`, which
    /// needs the key and spends no tokens. `Ok` names what answered.
    pub async fn probe(&self) -> Result<String, CallError> {
        let Some(key) = self.config.api_key.as_deref() else {
            return Err(CallError::Refused("BELAY_ANTHROPIC_API_KEY is unset".into()));
        };
        let url = format!("{}/v1/models", self.config.base_url.trim_end_matches('/'));
        let resp = self
            .http
            .get(&url)
            .header("x-api-key", key)
            .header("anthropic-version", ANTHROPIC_VERSION)
            .send()
            .await
            .map_err(|e| CallError::Transport(transport_cause(&e)))?;
        let status = resp.status().as_u16();
        if !resp.status().is_success() {
            let text = resp.text().await.unwrap_or_default();
            return Err(CallError::Http {
                status,
                body: text.chars().take(200).collect(),
            });
        }
        Ok(format!("GET /v1/models answered {status}, the key accepted"))
    }

    /// One metered call: refused before it is made when there is no key or a meter would pass
    /// its limit; settled at the reported usage.
    pub async fn call(
        &self,
        meter: &dyn ModelMeter,
        change_id: &str,
        model: Model,
        system: &str,
        user: &str,
        tool: &Tool<'_>,
    ) -> Result<Answer, CallError> {
        let Some(key) = self.config.api_key.as_deref() else {
            warn!(
                model = self.config.name(model),
                "model call refused: no Anthropic API key is configured"
            );
            return Err(CallError::Refused("no Anthropic API key is configured".into()));
        };
        let price = self.config.price(model);
        // At most this: the input at one token per 3 characters, and every output token.
        let estimate_tokens = ((system.len() + user.len() + tool.schema.to_string().len()) / 3 + 64) as u64;
        let estimate = price.cost(estimate_tokens, u64::from(self.config.max_tokens));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let reservation = match meter.reserve(change_id, estimate, self.config.limits, now).await {
            Ok(Ok(r)) => r,
            Ok(Err(why)) => {
                warn!(model = self.config.name(model), reason = %why, "model call refused by a meter");
                return Err(CallError::Refused(why));
            }
            Err(e) => {
                warn!(model = self.config.name(model), error = %e, "model call failed: the meters could not be read");
                return Err(CallError::Transport(format!("the meters could not be read: {e}")));
            }
        };
        let body = serde_json::json!({
            "model": self.config.name(model),
            "max_tokens": self.config.max_tokens,
            "system": system,
            "messages": [{"role": "user", "content": user}],
            "tools": [{"name": tool.name, "description": tool.description, "input_schema": tool.schema}],
            "tool_choice": {"type": "tool", "name": tool.name},
        });
        let url = format!("{}/v1/messages", self.config.base_url.trim_end_matches('/'));
        let sent = self
            .http
            .post(&url)
            .header("x-api-key", key)
            .header("anthropic-version", ANTHROPIC_VERSION)
            .json(&body)
            .send()
            .await;
        let result = match sent {
            // Never sent (no connection, the TLS handshake refused): the call counts nothing.
            Err(e) if e.is_connect() || e.is_builder() => {
                let cause = transport_cause(&e);
                warn!(model = self.config.name(model), error = %cause, "model call failed before it was sent; not counted");
                if let Err(e) = meter.release(&reservation).await {
                    warn!(error = %e, "releasing an unsent model call failed; its reservation stays counted");
                }
                return Err(CallError::Transport(cause));
            }
            Err(e) => Err(CallError::Transport(transport_cause(&e))),
            Ok(resp) if !resp.status().is_success() => {
                let status = resp.status().as_u16();
                let text = resp.text().await.unwrap_or_default();
                Err(CallError::Http {
                    status,
                    body: text.chars().take(500).collect(),
                })
            }
            Ok(resp) => match resp.json::<Message>().await {
                Err(e) => Err(CallError::Decode(e.without_url().to_string())),
                Ok(m) => Ok(m),
            },
        };
        let cost = match &result {
            Ok(m) => price.cost(m.usage.input_tokens, m.usage.output_tokens),
            Err(_) => 0.0,
        };
        if let Err(e) = meter.settle(&reservation, cost).await {
            warn!(error = %e, "settling a model call failed; its reservation stays counted");
        }
        if let Err(e) = &result {
            warn!(model = self.config.name(model), error = %e, "model call failed");
        }
        let m = result?;
        info!(model = self.config.name(model), cost_usd = cost, "model call");
        Ok(Answer {
            calls: m
                .content
                .into_iter()
                .filter(|b| b.kind == "tool_use")
                .map(|b| ToolCall {
                    name: b.name.unwrap_or_default(),
                    input: b.input.unwrap_or(serde_json::Value::Null),
                })
                .collect(),
            cost_usd: cost,
        })
    }
}

/// A transport error with its causes (the TLS handshake's reason is a few levels down), never
/// the URL's query nor any header.
fn transport_cause(e: &reqwest::Error) -> String {
    let mut out = String::from(if e.is_connect() { "connecting" } else { "sending" });
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let text = s.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    if e.is_timeout() {
        out.push_str(": timed out");
    }
    out
}

/// The acceptance check's system prompt.
pub const ACCEPTANCE_SYSTEM: &str = "You check whether a code change does what a person asked for. You are given \
acceptance criteria and the source you may rely on: the change's patch and the full text of composed files. \
Judge each criterion met, not_met or unclear, with the tool record_acceptance, exactly once. A met needs a \
citation: the path of a text you were given and a quote of at least 8 characters copied from it (in a patch, \
from added or context lines; a removed line only with removed: true). Use nothing you were not given.";

/// The acceptance prompt: the criteria, then every part of the input under its path.
pub fn acceptance_prompt(criteria: &[AcceptanceCriterion], input: &AcceptanceInput) -> String {
    let mut out = String::from("Acceptance criteria:\n");
    for c in criteria {
        out.push_str(&format!("- {}: {}\n", c.id, c.text));
    }
    for part in &input.parts {
        let kind = match part.kind {
            PartKind::Patch => "patch",
            PartKind::File => "file",
        };
        let cut = if part.truncated { ", truncated" } else { "" };
        out.push_str(&format!("\n=== {} ({kind}{cut}) ===\n{}\n", part.path, part.text));
    }
    out
}

/// The Integration Judge's system prompt.
pub const JUDGE_SYSTEM: &str = "You are the Integration Judge. Sibling candidates of one change rank equal. You read \
only their Evidence snapshot (check summaries and acceptance results). Answer with the tool record_verdict \
exactly once: prefer_candidate with the candidateId and the evidenceIds your preference rests on, or \
reject_candidate, needs_more_evidence, or escalate_to_human.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_never_in_debug_output() {
        let mut c = LlmConfig::from_lookup(|_| None).unwrap();
        c.api_key = Some("sk-secret-value".into());
        let shown = format!("{c:?}");
        assert!(!shown.contains("sk-secret-value"), "{shown}");
        assert!(shown.contains("<redacted>"));
    }

    #[test]
    fn cost_follows_the_reported_usage() {
        let p = Price {
            input_per_mtok: 1.0,
            output_per_mtok: 5.0,
        };
        assert!((p.cost(1_000_000, 200_000) - 2.0).abs() < 1e-9);
    }
}
