//! `belay account token create|list|revoke`: an account's tokens through the API, as any
//! client makes them, with the caller's own token (`BELAY_URL`, `BELAY_TOKEN`).

use anyhow::Context;
use serde_json::{Value, json};

/// Where the API is and whose token speaks to it.
#[derive(Debug, clap::Args)]
pub struct ApiArgs {
    /// The API's base URL.
    #[arg(long, env = "BELAY_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The caller's token.
    #[arg(long, env = "BELAY_TOKEN", hide_env_values = true)]
    pub token: String,
}

#[derive(Debug, clap::Subcommand)]
pub enum TokenCommand {
    /// Make a token for your account; prints its secret (shown this once) on stdout.
    Create {
        /// What it is for (`ci`, `second laptop`).
        #[arg(long)]
        name: String,
        /// It expires after this long: `90s`, `30m`, `12h`, `30d` (at most `365d`). Absent: never.
        #[arg(long, value_parser = parse_duration)]
        expires_in: Option<i64>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// List your account's tokens (an operator: any account's, with `--account`).
    List {
        #[arg(long)]
        account: Option<String>,
        /// The API's JSON instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Revoke a token by its id (`tok_…`): refused from the next request on.
    Revoke {
        id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
}

/// `90s`, `30m`, `12h`, `30d` or a number of seconds, as seconds.
fn parse_duration(s: &str) -> Result<i64, String> {
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => s.split_at(i),
        None => (s, "s"),
    };
    let n: i64 = digits
        .parse()
        .map_err(|_| format!("{s:?}: a number and a unit (s, m, h, d), e.g. 30d"))?;
    let unit = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{s:?}: the unit is one of s, m, h, d")),
    };
    n.checked_mul(unit).ok_or_else(|| format!("{s:?}: too long"))
}

async fn call(api: &ApiArgs, method: reqwest::Method, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
    let url = format!("{}{path}", api.url.trim_end_matches('/'));
    let mut req = reqwest::Client::new().request(method, &url).bearer_auth(&api.token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.with_context(|| format!("reaching {url}"))?;
    let status = resp.status();
    let text = resp.text().await?;
    let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    if !status.is_success() {
        let code = value["error"]["code"].as_str().unwrap_or("");
        let message = value["error"]["message"].as_str().unwrap_or("");
        anyhow::bail!("{} {code}: {message}", status.as_u16());
    }
    Ok(value)
}

/// Milliseconds since the epoch as `YYYY-MM-DD HH:MMZ`, or `-`.
fn time(ms: &Value) -> String {
    let Some(ms) = ms.as_i64() else { return "-".to_owned() };
    belay_domain::calendar::utc_minute(ms.div_euclid(1000))
}

fn expiry(t: &Value) -> String {
    if t["expiresAt"].is_null() {
        "never".to_owned()
    } else {
        time(&t["expiresAt"])
    }
}

pub async fn run(command: TokenCommand) -> anyhow::Result<()> {
    match command {
        TokenCommand::Create { name, expires_in, api } => {
            let body = json!({ "name": name, "expiresInSeconds": expires_in });
            let created = call(&api, reqwest::Method::POST, "/v1/account/tokens", Some(body)).await?;
            let t = &created["token"];
            eprintln!(
                "created token {} ({}, {}), expires {}; its secret is shown this once:",
                t["name"].as_str().unwrap_or(""),
                t["id"].as_str().unwrap_or(""),
                t["prefix"].as_str().unwrap_or(""),
                expiry(t),
            );
            println!("{}", created["secret"].as_str().unwrap_or(""));
        }
        TokenCommand::List { account, json, api } => {
            let path = match &account {
                Some(a) => format!("/v1/account/tokens?account={a}"),
                None => "/v1/account/tokens".to_owned(),
            };
            let tokens = call(&api, reqwest::Method::GET, &path, None).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&tokens)?);
                return Ok(());
            }
            println!(
                "{:<28} {:<24} {:<14} {:<18} {:<18} {:<18} STATE",
                "ID", "NAME", "PREFIX", "CREATED", "EXPIRES", "LAST USED"
            );
            for t in tokens.as_array().into_iter().flatten() {
                let state = if !t["revokedAt"].is_null() {
                    "revoked"
                } else if t["expiresAt"].as_i64().is_some_and(|e| e <= belay_store::now_ms()) {
                    "expired"
                } else {
                    "active"
                };
                println!(
                    "{:<28} {:<24} {:<14} {:<18} {:<18} {:<18} {state}",
                    t["id"].as_str().unwrap_or(""),
                    t["name"].as_str().unwrap_or(""),
                    t["prefix"].as_str().unwrap_or("-"),
                    time(&t["createdAt"]),
                    expiry(t),
                    time(&t["lastUsedAt"]),
                );
            }
        }
        TokenCommand::Revoke { id, api } => {
            let t = call(&api, reqwest::Method::DELETE, &format!("/v1/account/tokens/{id}"), None).await?;
            println!(
                "revoked token {} ({})",
                t["name"].as_str().unwrap_or(""),
                t["id"].as_str().unwrap_or("")
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_duration;

    #[test]
    fn a_duration_is_a_number_and_a_unit() {
        assert_eq!(parse_duration("90s"), Ok(90));
        assert_eq!(parse_duration("30d"), Ok(30 * 86_400));
        assert_eq!(parse_duration("2h"), Ok(7200));
        assert_eq!(parse_duration("45"), Ok(45));
        assert!(parse_duration("3w").is_err());
        assert!(parse_duration("d").is_err());
    }

    #[test]
    fn a_time_reads_as_a_utc_date_and_minute() {
        assert_eq!(super::time(&serde_json::json!(0)), "1970-01-01 00:00Z");
        assert_eq!(
            super::time(&serde_json::json!(1_796_000_000_000i64)),
            "2026-11-30 00:53Z"
        );
        assert_eq!(super::time(&serde_json::Value::Null), "-");
    }
}
