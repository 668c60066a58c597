//! Process-level helpers both binaries share (`cronstable-shim`, and `cronstable`, which links
//! this crate for its demo): logging setup and the host name. Only binaries call these.

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
