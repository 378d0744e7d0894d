//! `belay`: the one binary. `belay dev` runs everything on one machine; `belay api`,
//! `belay worker` and `belay migrate` are the production processes; `belay bench` measures.

mod account_token;
mod artifact_origin;
mod bench;
mod demo;
mod dev;
mod doctor;
mod moto;
mod objects;
mod serve;
mod settings;
mod temporal;
mod tls;

use anyhow::Context;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "belay",
    version,
    about = "Durable evaluation coverage and source verification on Temporal"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Where the database and Temporal are.
#[derive(Debug, Clone, clap::Args)]
pub struct Conn {
    /// `sqlite:PATH` or `postgres://…`.
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: String,
    /// Temporal frontend, `host:port`.
    #[arg(long, env = "BELAY_TEMPORAL_ADDRESS", default_value = "127.0.0.1:7233")]
    pub temporal_address: String,
    #[arg(long, env = "BELAY_TEMPORAL_NAMESPACE", default_value = "default")]
    pub namespace: String,
    /// Temporal's Web UI (`http://host:port`): the console links each page to its workflows there.
    #[arg(long, env = "BELAY_TEMPORAL_UI_URL")]
    pub temporal_ui_url: Option<String>,
    #[command(flatten)]
    pub temporal_tls: tls::TemporalTlsArgs,
    #[command(flatten)]
    pub http_tls: tls::HttpTlsArgs,
}

impl Conn {
    /// Every connection setting read and checked (the URLs' schemes, the database's TLS files,
    /// the Temporal TLS files, the CA bundle), before anything connects.
    pub fn check(&self) -> anyhow::Result<Checked> {
        tls::check_database_url(&self.database_url)?;
        if let Some(ui) = self.temporal_ui_url.as_deref().filter(|u| !u.trim().is_empty())
            && !(ui.starts_with("http://") || ui.starts_with("https://"))
        {
            anyhow::bail!("BELAY_TEMPORAL_UI_URL {ui:?}: expected http://HOST:PORT or https://HOST:PORT");
        }
        Ok(Checked {
            temporal_tls: self.temporal_tls.resolve(&self.temporal_address)?,
            http_roots: self.http_tls.extra_roots()?,
        })
    }

    /// The Web UI's pages of belay's namespace, when a Web UI is configured.
    pub fn temporal_ui(&self) -> Option<String> {
        let url = self
            .temporal_ui_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())?;
        Some(belay_api::console::temporal_ui_for(url, &self.namespace))
    }

    /// A Temporal client over the checked settings.
    pub async fn temporal(&self, checked: &Checked, identity: &str) -> anyhow::Result<temporalio_client::Client> {
        Ok(
            belay_client::connect_with(&self.temporal_address, &self.namespace, identity, &checked.temporal_tls)
                .await?,
        )
    }
}

/// What [`Conn::check`] read.
pub struct Checked {
    pub temporal_tls: belay_client::TemporalTls,
    /// CA certificates (DER) every outbound HTTPS client trusts besides the platform's roots.
    pub http_roots: Vec<Vec<u8>>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct Storage {
    /// Where belay keeps its files (the git pool's repositories, the default object store,
    /// scratch space).
    #[arg(long, env = "BELAY_DATA_DIR", default_value = ".belay")]
    pub data_dir: PathBuf,
    #[command(flatten)]
    pub objects: objects::ObjectStoreArgs,
    /// Bare repositories live under DATA_DIR/git/<namespace>.
    #[arg(long, env = "BELAY_GIT_NAMESPACE", default_value = "belay")]
    pub git_namespace: String,
}

/// How the sandbox and browser pools give Sandboxes their repositories: over the API's smart-HTTP
/// endpoint, with repository tokens signed by the API's secret. Both pools refuse to start without
/// either.
#[derive(Debug, Clone, clap::Args)]
pub struct SandboxGitArgs {
    /// The API's `/git/` listener as a Sandbox sees it, e.g. `http://belay-git:8080`.
    #[arg(long, env = "BELAY_SANDBOX_GIT_URL", num_args = 0..=1)]
    pub sandbox_git_url: Option<String>,
    /// Signs repository tokens; the same secret as the API's.
    #[arg(
        long = "git-token-secret",
        env = "BELAY_GIT_TOKEN_SECRET",
        hide_env_values = true,
        num_args = 0..=1
    )]
    pub git_token_secret: Option<String>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run everything on this machine: Temporal dev server, SQLite, every worker pool, the API.
    Dev(dev::DevArgs),
    /// Serve the HTTP API.
    Api {
        #[command(flatten)]
        conn: Conn,
        #[command(flatten)]
        storage: Storage,
        /// Signs repository tokens; without it the API serves no `/git/` endpoint.
        #[arg(long, env = "BELAY_GIT_TOKEN_SECRET", hide_env_values = true)]
        git_token_secret: Option<String>,
        #[arg(long, env = "BELAY_API_HOST", default_value = "127.0.0.1")]
        host: String,
        #[arg(long, env = "BELAY_API_PORT", default_value_t = 8080)]
        port: u16,
        /// Also listen here (`host:port`, the Sandbox network's host address) serving `/git/…`
        /// only: what Sandboxes reach (BELAY_SANDBOX_GIT_URL names it). Every other path is 404.
        #[arg(long, env = "BELAY_API_GIT_LISTEN")]
        git_listen: Option<String>,
        #[command(flatten)]
        artifacts: artifact_origin::ArtifactArgs,
        #[command(flatten)]
        auth: settings::AuthSettings,
    },
    /// Run worker pools.
    Worker {
        #[command(flatten)]
        conn: Conn,
        #[command(flatten)]
        storage: Storage,
        /// Comma-separated pools: workflows,db,git,sandbox,llm,browser,harness.
        #[arg(
            long,
            env = "BELAY_POOLS",
            default_value = "workflows,db,git,sandbox,llm,browser,harness"
        )]
        pools: String,
        /// Claims per dispatcher run before it continues as new (default 400), when this worker
        /// starts the dispatcher.
        #[arg(long, env = "BELAY_DISPATCHER_CLAIMS_PER_RUN")]
        dispatcher_claims_per_run: Option<u64>,
        /// How long a top-up's claim holds its plan or ladder when the top-up never releases it
        /// (its workflow ended without the release), in seconds.
        #[arg(long, env = "BELAY_TOP_UP_LEASE_SECONDS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=86_400))]
        top_up_lease_seconds: u64,
        #[command(flatten)]
        sandbox_git: SandboxGitArgs,
        #[command(flatten)]
        outside: settings::Outside,
        #[command(flatten)]
        extras: settings::WorkerExtras,
    },
    /// Check what this deployment's processes need, one line per check: the database, Temporal
    /// (and the pollers on belay's task queues), the object store, the Docker Engine, the model
    /// API and Chromium. Exits non-zero when a check fails.
    Doctor(doctor::DoctorArgs),
    /// Apply database migrations.
    Migrate {
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
    },
    /// Accounts.
    Account {
        #[command(subcommand)]
        command: AccountCommand,
    },
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        command: bench::BenchCommand,
    },
}

#[derive(Debug, Subcommand)]
enum AccountCommand {
    /// Create an account and print its API token.
    Create {
        name: String,
        /// The data dir of a `belay dev` (its database is DATA_DIR/belay.db); takes precedence
        /// over DATABASE_URL.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// `sqlite:PATH` or `postgres://…`, when the account is for another deployment.
        #[arg(long, env = "DATABASE_URL", required_unless_present = "data_dir")]
        database_url: Option<String>,
        /// An operator: may write the catalogue and cancel every account's jobs at once (every
        /// other account is a member).
        #[arg(long)]
        operator: bool,
    },
    /// Your account's tokens, through the API: make, list and revoke them.
    Token {
        #[command(subcommand)]
        command: account_token::TokenCommand,
    },
}

fn init_tracing() {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("RUST_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,temporalio_sdk_core=warn,tower_http=info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour_logs(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR").is_some(),
        ))
        .with_writer(std::io::stderr)
        .init();
}

/// Colour codes only for a person's terminal: a log written to a file or a pipe (a service
/// manager's journal, `belay dev > dev.log`) carries plain text, and `NO_COLOR` turns them off.
fn colour_logs(terminal: bool, no_color: bool) -> bool {
    terminal && !no_color
}

/// A command that fails says why in one line (its causes joined with `: `) and exits non-zero.
#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run(Cli::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// An error and its causes on one line, joined with `: `, a cause already said (errors that print
/// their source inline) said once.
fn one_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string().replace('\n', " ");
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    init_tracing();
    match cli.command {
        Command::Dev(args) => dev::run(args).await,
        Command::Api {
            conn,
            storage,
            git_token_secret,
            host,
            port,
            git_listen,
            artifacts,
            auth,
        } => {
            serve::api(
                &conn,
                &storage,
                git_token_secret,
                &host,
                port,
                serve::SideListeners {
                    git: git_listen.as_deref(),
                    artifacts: &artifacts,
                },
                &auth,
            )
            .await
        }
        Command::Worker {
            conn,
            storage,
            pools,
            dispatcher_claims_per_run,
            top_up_lease_seconds,
            sandbox_git,
            outside,
            extras,
        } => {
            if let Some(name) = extras.failpoint.as_deref().filter(|n| !n.is_empty()) {
                belay_activities::set_failpoint(name);
            }
            let settings = serve::WorkerSettings {
                pools: &pools,
                claims_per_run: dispatcher_claims_per_run,
                top_up_lease: std::time::Duration::from_secs(top_up_lease_seconds),
                sandbox_git: &sandbox_git,
                outside: &outside,
                extras: &extras,
            };
            serve::worker(&conn, &storage, settings).await
        }
        Command::Doctor(args) => doctor::run(args).await,
        Command::Migrate { database_url } => {
            tls::check_database_url(&database_url)?;
            let store = belay_store::Store::connect(&database_url)
                .await
                .context("DATABASE_URL: cannot connect")?;
            let n = store.migrate().await?;
            println!("applied {n} migration(s)");
            Ok(())
        }
        Command::Account {
            command:
                AccountCommand::Create {
                    name,
                    data_dir,
                    database_url,
                    operator,
                },
        } => {
            let database_url = match (data_dir, database_url) {
                (Some(dir), _) => dev::existing_database_url(&dir)?,
                (None, Some(url)) => url,
                (None, None) => anyhow::bail!("give --data-dir (a `belay dev` data dir) or --database-url"),
            };
            let store = belay_store::Store::connect(&database_url).await?;
            let role = if operator {
                belay_domain::access::Role::Operator
            } else {
                belay_domain::access::Role::Member
            };
            let (account, token) = store
                .create_account_with_role(&name, role)
                .await
                .context("creating the account")?;
            eprintln!("created account {} ({}, {})", account.name, account.id, account.role);
            println!("{token}");
            Ok(())
        }
        Command::Account {
            command: AccountCommand::Token { command },
        } => account_token::run(command).await,
        Command::Bench { command } => bench::run(command).await,
    }
}

#[cfg(test)]
mod tests {
    /// Every command's arguments are well formed (unique names, valid defaults).
    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
