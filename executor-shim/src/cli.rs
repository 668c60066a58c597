//! Process-level helpers the binaries share (`cronstable-shim`, `cronstable-gate`, and
//! `cronstable`, which links this crate for its demo): logging setup, the host name, and the
//! API token's flags. Only binaries call these.

/// Installs the global tracing subscriber: `text` (coloured only on a terminal) or `json`, on
/// stderr, filtered by `RUST_LOG` (default `info`).
pub fn init_logging(format: &str) {
    init_logging_with_default(format, "info");
}

/// [`init_logging`] with another filter when `RUST_LOG` is not set: the demo's is `warn`, so
/// its own view and events are not buried under every node's routine lines.
pub fn init_logging_with_default(format: &str, default_filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    // Colour only for a person at a terminal; log collectors get plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// This machine's host name, or `localhost` if it cannot be read.
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into())
}

/// The flags that give the coordinator's `api.authToken`, the same in every binary.
#[derive(Debug, Clone, clap::Args)]
pub struct TokenArgs {
    /// A file holding the coordinator's api.authToken, sent with every call (read again
    /// every few seconds, so a renewed token needs no restart).
    #[arg(long, env = "CRONSTABLE_API_TOKEN_FILE", value_name = "FILE")]
    pub api_token_file: Option<std::path::PathBuf>,
    /// The token itself, when no file is given. Prefer the variable to the flag: a command
    /// line is visible to every user of the host.
    #[arg(
        long,
        env = "CRONSTABLE_API_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub api_token: Option<String>,
}

impl TokenArgs {
    /// The token to send: the file first, else the value; none when neither is given.
    pub fn token(self) -> Option<crate::coordinator::token::ApiToken> {
        crate::coordinator::token::from_args(self.api_token_file, self.api_token)
    }
}
