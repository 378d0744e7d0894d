//! The settings of the systems outside belay that its libraries are configured with (the Docker
//! Engine and its Sandboxes, headless Chromium, the model API, the worker's own metrics): each a
//! flag and its environment variable, read once here by `clap`, checked, and passed down as the
//! libraries' typed configurations. No library reads the environment; `belay worker --help`
//! lists every variable a pool reads.
//!
//! A library checks its own values (and names the variable in its error), so the fields here are
//! the text as given; an empty value is unset.

use belay_worker::PoolSettings;
use clap::Args;
use std::net::SocketAddr;

/// The Docker Engine's Sandboxes (the sandbox and browser pools, and harness adapters marked
/// `sandbox`).
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Sandboxes")]
pub struct SandboxSettings {
    /// The Sandbox image [default: belay-sandbox:dev].
    #[arg(long, env = "BELAY_SANDBOX_IMAGE", value_name = "IMAGE")]
    pub sandbox_image: Option<String>,
    /// The container runtime: `runc`, or `runsc` (gVisor) [default: runc].
    #[arg(long, env = "BELAY_SANDBOX_RUNTIME", value_name = "RUNTIME")]
    pub sandbox_runtime: Option<String>,
    /// The internal Docker network Sandboxes join [default: belay_sbx].
    #[arg(long, env = "BELAY_SANDBOX_NETWORK", value_name = "NETWORK")]
    pub sandbox_network: Option<String>,
    /// An egress proxy on the Sandbox network (`http://host:port`), exported to commands as
    /// HTTP(S)_PROXY; its allowlist is the proxy's own configuration.
    #[arg(long, env = "BELAY_SANDBOX_EGRESS_PROXY", value_name = "URL")]
    pub sandbox_egress_proxy: Option<String>,
    /// This deployment's name on its containers and networks (1 to 63 of `[A-Za-z0-9._-]`)
    /// [default: the name the database was given].
    #[arg(long, env = "BELAY_DEPLOYMENT", value_name = "NAME")]
    pub deployment: Option<String>,
    /// Seconds a Sandbox stays with nothing running before it is removed [default: 120].
    #[arg(long, env = "BELAY_SANDBOX_IDLE_SECONDS", value_name = "SECONDS")]
    pub sandbox_idle_seconds: Option<String>,
    /// Live Sandboxes on this Docker Engine at most [default: 4].
    #[arg(long, env = "BELAY_SANDBOX_MAX", value_name = "N")]
    pub sandbox_max: Option<String>,
    /// Labels put on every container and network belay creates: `key=value,…`.
    #[arg(long, env = "BELAY_SANDBOX_LABELS", value_name = "LABELS")]
    pub sandbox_labels: Option<String>,
}

impl SandboxSettings {
    fn get(&self, variable: &str) -> Option<String> {
        match variable {
            "BELAY_SANDBOX_IMAGE" => self.sandbox_image.clone(),
            "BELAY_SANDBOX_RUNTIME" => self.sandbox_runtime.clone(),
            "BELAY_SANDBOX_NETWORK" => self.sandbox_network.clone(),
            "BELAY_SANDBOX_EGRESS_PROXY" => self.sandbox_egress_proxy.clone(),
            "BELAY_DEPLOYMENT" => self.deployment.clone(),
            "BELAY_SANDBOX_IDLE_SECONDS" => self.sandbox_idle_seconds.clone(),
            "BELAY_SANDBOX_MAX" => self.sandbox_max.clone(),
            "BELAY_SANDBOX_LABELS" => self.sandbox_labels.clone(),
            _ => None,
        }
    }

    /// The Sandbox configuration, or the first setting it refuses, named.
    pub fn config(&self) -> Result<belay_sandbox::SandboxConfig, belay_sandbox::SandboxError> {
        belay_sandbox::SandboxConfig::from_lookup(|v| self.get(v))
    }
}

/// Headless Chromium and the browser meter (the browser pool).
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Browser checks")]
pub struct BrowserSettings {
    /// The Chromium binary [default: /usr/lib/chromium/chromium].
    #[arg(long, env = "BELAY_CHROMIUM", value_name = "PATH")]
    pub chromium: Option<String>,
    /// A browser session's deadline in milliseconds, at most the default (the spec's).
    #[arg(long, env = "BELAY_BROWSER_SESSION_MS", value_name = "MS")]
    pub browser_session_ms: Option<String>,
    /// Browser seconds per project per UTC day; a value that is not a positive whole number is
    /// the default [default: 500].
    #[arg(long, env = "BROWSER_DAILY_SECONDS", value_name = "SECONDS")]
    pub browser_daily_seconds: Option<String>,
}

impl BrowserSettings {
    fn get(&self, variable: &str) -> Option<String> {
        match variable {
            "BELAY_CHROMIUM" => self.chromium.clone(),
            "BELAY_BROWSER_SESSION_MS" => self.browser_session_ms.clone(),
            _ => None,
        }
    }

    pub fn config(&self) -> belay_browser::BrowserConfig {
        belay_browser::BrowserConfig::from_lookup(|v| self.get(v))
    }

    pub fn daily_seconds(&self) -> u64 {
        belay_domain::browser::parse_browser_daily_seconds(self.browser_daily_seconds.as_deref())
    }
}

/// The model API (the llm pool: acceptance checks and the Integration Judge).
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Model API")]
pub struct LlmSettings {
    /// The Anthropic Messages API's base URL, `https://…` [default: https://api.anthropic.com].
    #[arg(long, env = "BELAY_ANTHROPIC_BASE_URL", value_name = "URL")]
    pub anthropic_base_url: Option<String>,
    /// The API key; without it every model call is refused before it is made.
    #[arg(long, env = "BELAY_ANTHROPIC_API_KEY", value_name = "KEY", hide_env_values = true)]
    pub anthropic_api_key: Option<String>,
    /// The key under the name other tools read, which belay refuses to take for its own.
    #[arg(long, env = "ANTHROPIC_API_KEY", hide = true, hide_env_values = true)]
    pub foreign_anthropic_api_key: Option<String>,
    /// The Haiku model's name.
    #[arg(long, env = "BELAY_ANTHROPIC_HAIKU_MODEL", value_name = "MODEL")]
    pub anthropic_haiku_model: Option<String>,
    /// The Sonnet model's name.
    #[arg(long, env = "BELAY_ANTHROPIC_SONNET_MODEL", value_name = "MODEL")]
    pub anthropic_sonnet_model: Option<String>,
    /// Haiku's price per million input tokens, USD [default: 1].
    #[arg(long, env = "BELAY_ANTHROPIC_HAIKU_INPUT_USD_PER_MTOK", value_name = "USD")]
    pub anthropic_haiku_input_usd_per_mtok: Option<String>,
    /// Haiku's price per million output tokens, USD [default: 5].
    #[arg(long, env = "BELAY_ANTHROPIC_HAIKU_OUTPUT_USD_PER_MTOK", value_name = "USD")]
    pub anthropic_haiku_output_usd_per_mtok: Option<String>,
    /// Sonnet's price per million input tokens, USD [default: 3].
    #[arg(long, env = "BELAY_ANTHROPIC_SONNET_INPUT_USD_PER_MTOK", value_name = "USD")]
    pub anthropic_sonnet_input_usd_per_mtok: Option<String>,
    /// Sonnet's price per million output tokens, USD [default: 15].
    #[arg(long, env = "BELAY_ANTHROPIC_SONNET_OUTPUT_USD_PER_MTOK", value_name = "USD")]
    pub anthropic_sonnet_output_usd_per_mtok: Option<String>,
    /// The model budget per calendar month, USD [default: 100].
    #[arg(long, env = "BELAY_ANTHROPIC_MONTHLY_BUDGET_USD", value_name = "USD")]
    pub anthropic_monthly_budget_usd: Option<String>,
    /// Model calls per UTC day at most [default: 1000].
    #[arg(long, env = "BELAY_ANTHROPIC_DAILY_CALL_CAP", value_name = "N")]
    pub anthropic_daily_call_cap: Option<String>,
    /// One call's deadline in milliseconds [default: 120000].
    #[arg(long, env = "BELAY_ANTHROPIC_TIMEOUT_MS", value_name = "MS")]
    pub anthropic_timeout_ms: Option<String>,
    /// An answer's token bound [default: 4096].
    #[arg(long, env = "BELAY_ANTHROPIC_MAX_TOKENS", value_name = "N")]
    pub anthropic_max_tokens: Option<String>,
    /// The model budget of one Change, USD [default: 2].
    #[arg(long, env = "BELAY_CHANGE_MODEL_BUDGET_USD", value_name = "USD")]
    pub change_model_budget_usd: Option<String>,
}

impl LlmSettings {
    fn get(&self, variable: &str) -> Option<String> {
        match variable {
            "BELAY_ANTHROPIC_BASE_URL" => self.anthropic_base_url.clone(),
            "BELAY_ANTHROPIC_API_KEY" => self.anthropic_api_key.clone(),
            "ANTHROPIC_API_KEY" => self.foreign_anthropic_api_key.clone(),
            "BELAY_ANTHROPIC_HAIKU_MODEL" => self.anthropic_haiku_model.clone(),
            "BELAY_ANTHROPIC_SONNET_MODEL" => self.anthropic_sonnet_model.clone(),
            "BELAY_ANTHROPIC_HAIKU_INPUT_USD_PER_MTOK" => self.anthropic_haiku_input_usd_per_mtok.clone(),
            "BELAY_ANTHROPIC_HAIKU_OUTPUT_USD_PER_MTOK" => self.anthropic_haiku_output_usd_per_mtok.clone(),
            "BELAY_ANTHROPIC_SONNET_INPUT_USD_PER_MTOK" => self.anthropic_sonnet_input_usd_per_mtok.clone(),
            "BELAY_ANTHROPIC_SONNET_OUTPUT_USD_PER_MTOK" => self.anthropic_sonnet_output_usd_per_mtok.clone(),
            "BELAY_ANTHROPIC_MONTHLY_BUDGET_USD" => self.anthropic_monthly_budget_usd.clone(),
            "BELAY_ANTHROPIC_DAILY_CALL_CAP" => self.anthropic_daily_call_cap.clone(),
            "BELAY_ANTHROPIC_TIMEOUT_MS" => self.anthropic_timeout_ms.clone(),
            "BELAY_ANTHROPIC_MAX_TOKENS" => self.anthropic_max_tokens.clone(),
            "BELAY_CHANGE_MODEL_BUDGET_USD" => self.change_model_budget_usd.clone(),
            _ => None,
        }
    }

    /// The model client's configuration, or the first setting it refuses, named.
    pub fn config(&self) -> anyhow::Result<belay_llm::LlmConfig> {
        belay_llm::LlmConfig::from_lookup(|v| self.get(v))
    }
}

/// The outside systems' settings every pool may use: `belay worker`'s, `belay dev`'s and
/// `belay doctor`'s.
#[derive(Debug, Clone, Default, Args)]
pub struct Outside {
    #[command(flatten)]
    pub sandbox: SandboxSettings,
    #[command(flatten)]
    pub browser: BrowserSettings,
    #[command(flatten)]
    pub llm: LlmSettings,
}

impl Outside {
    /// The pools' settings, checked. The model client's only when `llm` (this process runs the
    /// llm pool): a worker without it is not refused for settings it never uses.
    pub fn pools(&self, llm: bool, temporal_metrics_addr: Option<SocketAddr>) -> anyhow::Result<PoolSettings> {
        Ok(PoolSettings {
            llm: if llm { Some(self.llm.config()?) } else { None },
            browser: self.browser.config(),
            browser_daily_seconds: self.browser.daily_seconds(),
            temporal_metrics_addr,
            // The worker's own PATH, HOME, LANG and TMPDIR: what an adapter inherits from it.
            adapter_env: belay_harness::InheritedEnv::from_lookup(|v| std::env::var_os(v)),
        })
    }
}

/// `belay worker`'s own: its metrics, and a test build's failpoint.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Metrics")]
pub struct WorkerExtras {
    /// Serve this process's `GET /metrics` (Prometheus; the same figures as the API's) on
    /// `host:port`.
    #[arg(long, env = "BELAY_METRICS_ADDR", value_name = "ADDR")]
    pub metrics_addr: Option<String>,
    /// Serve the Temporal SDK's worker metrics (task slots, poll latencies, sticky cache) on
    /// `host:port`.
    #[arg(long, env = "BELAY_TEMPORAL_METRICS_ADDR", value_name = "ADDR")]
    pub temporal_metrics_addr: Option<String>,
    /// A test build's failpoint (the release build has none).
    #[arg(long, env = belay_activities::FAILPOINT_ENV, hide = true)]
    pub failpoint: Option<String>,
}

impl WorkerExtras {
    pub fn metrics_addr(&self) -> Option<&str> {
        self.metrics_addr.as_deref().map(str::trim).filter(|a| !a.is_empty())
    }

    pub fn temporal_metrics_addr(&self) -> anyhow::Result<Option<SocketAddr>> {
        match self
            .temporal_metrics_addr
            .as_deref()
            .map(str::trim)
            .filter(|a| !a.is_empty())
        {
            None => Ok(None),
            Some(a) => a
                .parse()
                .map(Some)
                .map_err(|_| anyhow::anyhow!("BELAY_TEMPORAL_METRICS_ADDR must be host:port, not {a:?}")),
        }
    }
}

/// The API's bound on failed authentication (decision 0042). The API fuzz raises it, so that its
/// requests with bad credentials test the answers rather than the bound (which a test of its own
/// covers).
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Authentication")]
pub struct AuthSettings {
    /// Failed authentications from one address answered at once in a window, before the slowed
    /// ones and the 429s [default: 10].
    #[arg(long, env = "BELAY_AUTH_FAILURES_FREE", value_name = "N")]
    pub auth_failures_free: Option<String>,
}

impl AuthSettings {
    pub fn guard(&self) -> anyhow::Result<belay_api::auth::AuthGuard> {
        let mut bound = belay_domain::api_token::FailureBound::default();
        if let Some(v) = self.auth_failures_free.as_deref().filter(|v| !v.is_empty()) {
            bound.free = v
                .parse()
                .map_err(|_| anyhow::anyhow!("BELAY_AUTH_FAILURES_FREE {v:?} is not a whole number"))?;
        }
        Ok(belay_api::auth::AuthGuard::new(bound, true))
    }
}

/// A setting of a library's, read from this process's environment through the same flags: for
/// the benches, which have no flags of their own for the systems they measure.
pub fn from_environment<T: Args>() -> T {
    #[derive(clap::Parser)]
    struct Only<T: Args> {
        #[command(flatten)]
        settings: T,
    }
    <Only<T> as clap::Parser>::parse_from(["belay"]).settings
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// The variables a library's `from_lookup` asks for, in order.
    fn asked<E>(config: impl FnOnce(&dyn Fn(&str) -> Option<String>) -> E) -> Vec<String> {
        let names = Mutex::new(Vec::new());
        let _ = config(&|v: &str| {
            names.lock().unwrap().push(v.to_owned());
            None
        });
        names.into_inner().unwrap()
    }

    /// The environment variables of a subcommand's flags.
    fn flags_of(subcommand: &str) -> Vec<String> {
        use clap::CommandFactory;
        let cli = crate::Cli::command();
        let cmd = cli.find_subcommand(subcommand).unwrap();
        cmd.get_arguments()
            .filter_map(|a| a.get_env())
            .map(|e| e.to_string_lossy().into_owned())
            .collect()
    }

    /// Every variable a library reads is a flag of `belay worker` (and so in its `--help`), and
    /// every such flag reaches the library: the value given is the value the library sees.
    #[test]
    fn every_variable_a_library_reads_is_a_worker_flag_that_reaches_it() {
        let worker = flags_of("worker");
        let sandbox = asked(|l| belay_sandbox::SandboxConfig::from_lookup(l));
        let browser = asked(|l| belay_browser::BrowserConfig::from_lookup(l));
        let llm = asked(|l| belay_llm::LlmConfig::from_lookup(l));
        assert!(
            sandbox.len() >= 8 && browser.len() >= 2 && llm.len() >= 14,
            "{sandbox:?} {browser:?} {llm:?}"
        );
        for v in sandbox.iter().chain(&browser).chain(&llm) {
            assert!(
                worker.contains(v),
                "{v} is read by a library but is not a flag of belay worker"
            );
        }
        for v in [
            "BROWSER_DAILY_SECONDS",
            "BELAY_TEMPORAL_METRICS_ADDR",
            "BELAY_METRICS_ADDR",
        ] {
            assert!(worker.contains(&v.to_owned()), "{v}");
        }

        let s = SandboxSettings {
            sandbox_image: Some("img:1".into()),
            sandbox_runtime: Some("runsc".into()),
            sandbox_network: Some("net".into()),
            sandbox_egress_proxy: Some("http://proxy:3128".into()),
            deployment: Some("prod-1".into()),
            sandbox_idle_seconds: Some("90".into()),
            sandbox_max: Some("3".into()),
            sandbox_labels: Some("team=eval".into()),
        }
        .config()
        .unwrap();
        assert_eq!(s.image, "img:1");
        assert_eq!(s.network, "net");
        assert_eq!(s.egress_proxy.as_deref(), Some("http://proxy:3128"));
        assert_eq!(s.deployment.as_deref(), Some("prod-1"));
        assert_eq!(s.idle_after, std::time::Duration::from_secs(90));
        assert_eq!(s.max_live, 3);
        assert_eq!(s.extra_labels.get("team").map(String::as_str), Some("eval"));

        let b = BrowserSettings {
            chromium: Some("/opt/chrome".into()),
            browser_session_ms: Some("1000".into()),
            browser_daily_seconds: Some("60".into()),
        };
        assert_eq!(b.config().chromium, std::path::PathBuf::from("/opt/chrome"));
        assert_eq!(b.config().session, std::time::Duration::from_millis(1000));
        assert_eq!(b.daily_seconds(), 60);

        let l = LlmSettings {
            anthropic_base_url: Some("https://models.example".into()),
            anthropic_api_key: Some("k".into()),
            anthropic_daily_call_cap: Some("7".into()),
            change_model_budget_usd: Some("0.5".into()),
            anthropic_max_tokens: Some("100".into()),
            ..Default::default()
        }
        .config()
        .unwrap();
        assert_eq!(l.base_url, "https://models.example");
        assert_eq!(l.api_key.as_deref(), Some("k"));
        assert_eq!(l.limits.daily_call_cap, 7);
        assert_eq!(l.limits.change_budget_usd, 0.5);
        assert_eq!(l.max_tokens, 100);
    }

    /// A refused value is named by its variable, as it was when the libraries read it themselves.
    #[test]
    fn a_refused_setting_names_its_variable() {
        let e = SandboxSettings {
            sandbox_max: Some("0".into()),
            ..Default::default()
        }
        .config()
        .unwrap_err();
        assert!(e.to_string().contains("BELAY_SANDBOX_MAX"), "{e}");
        let e = LlmSettings {
            foreign_anthropic_api_key: Some("k".into()),
            ..Default::default()
        }
        .config()
        .unwrap_err();
        assert!(e.to_string().contains("BELAY_ANTHROPIC_API_KEY"), "{e}");
        let e = LlmSettings {
            anthropic_timeout_ms: Some("soon".into()),
            ..Default::default()
        }
        .config()
        .unwrap_err();
        assert!(e.to_string().contains("BELAY_ANTHROPIC_TIMEOUT_MS"), "{e}");
    }
}
