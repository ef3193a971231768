//! The command line: `tidings-server [--config FILE]` serves; `workspace create`,
//! `workspace list` and `key create` are the operator's commands (they open the store: on sled run them while the
//! server is stopped, as sled allows one process per store; on PostgreSQL any time);
//! `migrate` prepares a PostgreSQL database before the nodes start; `secret-key rotate` moves
//! the store's secrets to a new sealing key (on sled with the server stopped).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use tidings_core::model::KeyScope;

use crate::config::{Config, ConfigError, Settings, Sources};
use crate::sites_command::SitesAction;
use crate::{ServerError, bootstrap};

/// Tidings: a transactional email service over HTTPS.
///
/// Every setting below is read from its command-line flag, else its TIDINGS_ environment
/// variable, else its key in the --config file, else its default. A bad value stops the server
/// at start (exit code 2) with a message naming the variable.
#[derive(Debug, Parser)]
#[command(name = "tidings-server", version)]
pub struct Cli {
    /// TOML file of settings: the variables' names lower-case without TIDINGS_ (listen =
    /// "127.0.0.1:8443"; a retry schedule may be an array of strings). Flags and the environment
    /// win over it.
    #[arg(long, global = true, value_name = "FILE", env = "TIDINGS_CONFIG")]
    pub config: Option<PathBuf>,
    /// The settings.
    #[command(flatten)]
    pub settings: Settings,
    /// What to do; serving is the default.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the API over HTTPS (the default).
    Serve,
    /// Manage workspaces.
    #[command(subcommand)]
    Workspace(WorkspaceCommand),
    /// Manage API keys.
    #[command(subcommand)]
    Key(KeyCommand),
    /// The key that seals the store's secrets.
    #[command(subcommand)]
    SecretKey(SecretKeyCommand),
    /// Apply the PostgreSQL migrations to TIDINGS_DATABASE_URL, then exit (nodes also apply
    /// them at start; run this once before starting several).
    Migrate,
    /// The direct-delivery sites of the running server (TIDINGS_DELIVERY=mx): list them,
    /// suspend or resume one. Calls the server's operator API with TIDINGS_OPERATOR_TOKEN, so
    /// it works while the server runs, on sled too.
    Sites {
        /// The server's address (default: https:// the listen address).
        #[arg(long, value_name = "URL")]
        url: Option<String>,
        /// What to do.
        #[command(subcommand)]
        action: SitesCommand,
    },
}

/// `sites …`.
#[derive(Debug, Subcommand)]
pub enum SitesCommand {
    /// List the sites with something to show: leases, mail waiting or in flight, the last
    /// minute's deliveries, suspensions, throttles, the last reply.
    List,
    /// Suspend a site: no delivery to it until the time is up (mail waits, no retry used).
    Suspend {
        /// The site: a shaping suffix such as .google.com, or its MX hosts as listed.
        site: String,
        /// How long: 30s, 10m, 2h, 1d (at most 7d).
        #[arg(long = "for", value_name = "DURATION")]
        duration: String,
        /// Why, shown with the site.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Lift a site's suspension or throttle now.
    Resume {
        /// The site.
        site: String,
    },
}

/// `secret-key …`.
#[derive(Debug, Subcommand)]
pub enum SecretKeyCommand {
    /// Seal every secret of the store (DKIM keys, webhook secrets, the tracking key) with
    /// TIDINGS_SECRET_KEY that is still sealed with TIDINGS_PREVIOUS_SECRET_KEY, then make
    /// the new key the only one the store opens with. Run it again if it was interrupted:
    /// what is done is skipped. On sled, stop the server first; on PostgreSQL, run it while
    /// every node runs with both keys. See the README, "Rotating the secret key".
    Rotate {
        /// Records re-sealed per lock or transaction.
        #[arg(long, value_name = "N", default_value_t = tidings_core::sealing::rotation::DEFAULT_BATCH)]
        batch_size: usize,
        /// Tests only: once this many records were re-sealed, wait to be killed.
        #[arg(long, value_name = "N", hide = true)]
        pause_after: Option<usize>,
    },
}

/// `workspace …`.
#[derive(Debug, Subcommand)]
pub enum WorkspaceCommand {
    /// Create a workspace; prints its id and its first full key (shown only this once).
    Create {
        /// The workspace's name.
        name: String,
    },
    /// List every workspace, oldest first: id, creation time, name (one per line under a
    /// header). The id is what `key create --workspace` takes, e.g. when a key is lost.
    List,
}

/// `key …`.
#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Create an API key in a workspace; prints the key (shown only this once).
    Create {
        /// The workspace's id.
        #[arg(long, value_name = "ID")]
        workspace: String,
        /// The key's name (default `default`).
        #[arg(long)]
        name: Option<String>,
        /// What the key may do.
        #[arg(long, value_enum, default_value_t = Scope::Full)]
        scope: Scope,
    },
}

/// A key's scope on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scope {
    /// Everything.
    Full,
    /// Send, and read what it sent.
    Send,
}

/// The binary's whole `main`: parse, configure logging, run the command, map errors to
/// exit codes (2: configuration, 1: anything else).
pub fn main() -> ExitCode {
    // Before anything is created: what sled and the rest write later is the user's only.
    crate::data_dir::restrict_new_files();
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let config = match load_config(&cli, &matches) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("tidings-server: configuration error: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(&config.log);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("tidings-server: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(execute(cli.command.unwrap_or(Command::Serve), config));
    if let Err(e @ ServerError::StoreFailed(_)) = &result {
        // A failed sled store can block for good in anything that flushes, dropping it
        // included: exit without running destructors. Nothing is lost that was acknowledged.
        eprintln!("tidings-server: {e}");
        std::process::exit(i32::from(e.exit_code()));
    }
    // Dropping the runtime drops any task still holding the store, which flushes it.
    drop(runtime);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("tidings-server: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// The configuration from the command line's flags, the environment and the `--config` file.
fn load_config(cli: &Cli, matches: &clap::ArgMatches) -> Result<Config, ConfigError> {
    // Only values typed on the command line: the environment and the file are read by
    // `Sources`, which knows where each value came from.
    let flag = |id: &str| match matches.value_source(id) {
        Some(ValueSource::CommandLine) => matches.get_one::<String>(id).cloned(),
        _ => None,
    };
    Config::from_sources(&Sources::load(cli.config.as_deref(), |k| std::env::var(k).ok(), flag)?)
}

async fn execute(command: Command, config: Config) -> Result<(), ServerError> {
    match command {
        Command::Serve => {
            let shutdown = crate::shutdown_signal()
                .map_err(|e| ServerError::Operator(format!("cannot listen for SIGTERM/SIGINT: {e}")))?;
            crate::run(config, shutdown).await
        }
        Command::Workspace(WorkspaceCommand::Create { name }) => {
            let core = bootstrap::operator_core(&config).await?;
            let (id, key) = bootstrap::create_workspace(&core, &name).await?;
            println!("workspace: {id}");
            println!("key: {}", key.expose());
            Ok(())
        }
        Command::Workspace(WorkspaceCommand::List) => {
            let core = bootstrap::operator_core(&config).await?;
            print!("{}", workspace_table(&core.workspaces().list().await?));
            Ok(())
        }
        Command::Key(KeyCommand::Create { workspace, name, scope }) => {
            let core = bootstrap::operator_core(&config).await?;
            let scope = match scope {
                Scope::Full => KeyScope::Full,
                Scope::Send => KeyScope::Send,
            };
            let created = bootstrap::create_key(&core, &workspace, name, scope).await?;
            println!("key id: {}", created.key.id);
            println!("key: {}", created.plaintext.expose());
            Ok(())
        }
        Command::Sites { url, action } => {
            let action = match action {
                SitesCommand::List => SitesAction::List,
                SitesCommand::Suspend { site, duration, reason } => SitesAction::Suspend { site, duration, reason },
                SitesCommand::Resume { site } => SitesAction::Resume { site },
            };
            crate::sites_command::run(&config, url, action).await
        }
        Command::SecretKey(SecretKeyCommand::Rotate { batch_size, pause_after }) => {
            let options = crate::secret_key_command::RotateOptions { batch: batch_size, pause_after };
            crate::secret_key_command::rotate(&config, options).await
        }
        Command::Migrate => {
            bootstrap::migrate(&config).await?;
            // Stderr: stdout carries only what an operator must copy.
            if let Some(url) = &config.database_url {
                eprintln!("migrations applied to {}", url.redacted());
            }
            Ok(())
        }
    }
}

/// `workspace list`'s output: a header, then id, creation time (RFC 3339, seconds, UTC)
/// and name, aligned; names last since they may hold spaces (never control characters).
fn workspace_table(workspaces: &[tidings_core::model::Workspace]) -> String {
    let mut out = format!("{:<26}  {:<20}  name\n", "workspace", "created");
    for w in workspaces {
        let created = w.created_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        out.push_str(&format!("{:<26}  {created:<20}  {}\n", w.id, w.name));
    }
    out
}

/// Logs to stderr, filtered by `TIDINGS_LOG` (already validated), with
/// [`without_statement_parameters`] applied.
fn init_logging(filter: &str) {
    let filter = without_statement_parameters(filter);
    let filter = tracing_subscriber::EnvFilter::try_new(&filter).unwrap_or_else(|_| "info".into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

/// `filter` with `tokio_postgres` held at `info` unless it names that target itself:
/// tokio-postgres logs every statement's parameters at debug, and those are webhook signing
/// secrets, recipients and message bodies. `TIDINGS_LOG=debug` is what an operator sets to
/// look into a problem, and must not put secrets in the log; one who names
/// `tokio_postgres=debug` asked for exactly that output.
fn without_statement_parameters(filter: &str) -> String {
    if filter.contains("tokio_postgres") {
        filter.to_owned()
    } else if filter.trim().is_empty() {
        "tokio_postgres=info".to_owned()
    } else {
        format!("{filter},tokio_postgres=info")
    }
}

#[cfg(test)]
mod log_filter_tests {
    use super::{without_statement_parameters, workspace_table};

    #[test]
    fn workspaces_are_listed_id_created_name() {
        let at = chrono::DateTime::parse_from_rfc3339("2026-12-04T21:35:10.123Z").unwrap().to_utc();
        let id = tidings_core::ids::WorkspaceId::parse("01ARZ3NDEKTSV4RRFFQ69G5FAV").unwrap();
        let table = workspace_table(&[tidings_core::model::Workspace { id, name: "Acme Inc".into(), created_at: at }]);
        assert_eq!(
            table,
            "workspace                   created               name\n\
             01ARZ3NDEKTSV4RRFFQ69G5FAV  2026-12-04T21:35:10Z  Acme Inc\n"
        );
    }

    #[test]
    fn statement_parameters_stay_out_of_debug_logs_unless_named() {
        assert_eq!(without_statement_parameters("debug"), "debug,tokio_postgres=info");
        assert_eq!(
            without_statement_parameters("info,tidings_http=debug"),
            "info,tidings_http=debug,tokio_postgres=info"
        );
        assert_eq!(without_statement_parameters(""), "tokio_postgres=info");
        assert_eq!(without_statement_parameters("info,tokio_postgres=debug"), "info,tokio_postgres=debug");
    }
}
