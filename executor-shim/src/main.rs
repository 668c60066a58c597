//! `cronstable-shim`: parses arguments, installs signal handlers and runs the shim library.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use cronstable_shim::cli::{hostname, init_logging};
use cronstable_shim::schedule::source::JobSource;
use cronstable_shim::{ShimConfig, run};
use tokio::signal::unix::{SignalKind, signal};

/// A crond replacement that asks its cronstable coordinator before every firing.
#[derive(Debug, Parser)]
#[command(name = "cronstable-shim", version)]
struct Args {
    /// A crontab file (cronie/Vixie format, with `# cronstable:` annotations).
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "jobs",
        required_unless_present = "jobs"
    )]
    crontab: Option<PathBuf>,
    /// A YAML job file.
    #[arg(long, value_name = "FILE")]
    jobs: Option<PathBuf>,
    /// The coordinator: http://host:port or unix:/path.
    #[arg(
        long,
        env = "CRONSTABLE_COORDINATOR",
        default_value = "http://127.0.0.1:7400"
    )]
    coordinator: String,
    #[command(flatten)]
    token: cronstable_shim::cli::TokenArgs,
    /// This executor's id (default: derived from the job file's path, stable across restarts).
    #[arg(long)]
    executor_id: Option<String>,
    /// Deadline of each coordinator call, e.g. 1s or 500ms.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    ask_timeout: Duration,
    /// A firing later than this is reported missed instead of run.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    max_lateness: Duration,
    /// At shutdown, how long running jobs get after SIGTERM before SIGKILL.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    grace: Duration,
    /// Reap orphaned processes (default: on when running as PID 1).
    #[arg(long)]
    reap_orphans: bool,
    /// Log format.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    cronstable_core::duration::parse_duration(s)
}

// One thread is plenty for a scheduler that mostly sleeps, and keeps the shim small.
#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    init_logging(&args.log_format);
    let source = match (args.crontab, args.jobs) {
        (Some(p), _) => JobSource::Crontab(p),
        (None, Some(p)) => JobSource::JobFile(p),
        (None, None) => anyhow::bail!("one of --crontab or --jobs is required"),
    };
    let mut config = ShimConfig::new(source, args.coordinator);
    config.executor_id = match args.executor_id {
        Some(id) => id,
        // Host name and path: stable across restarts, distinct between containers.
        None => format!("{}:{}", hostname(), config.executor_id),
    };
    config.ask_timeout = args.ask_timeout;
    config.api_token = args.token.token();
    config.max_lateness = args.max_lateness;
    config.grace = args.grace;
    config.reap_orphans |= args.reap_orphans;

    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut hup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    let (reload_tx, reload_rx) = tokio::sync::mpsc::channel(4);
    cronstable_shim::spawn(async move {
        while hup.recv().await.is_some() {
            let _ = reload_tx.try_send(());
        }
    });
    // Kubernetes stops containers with SIGTERM; a terminal sends SIGINT.
    let shutdown = async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    };
    run(config, shutdown, reload_rx).await?;
    Ok(())
}
