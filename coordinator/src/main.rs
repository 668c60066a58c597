//! `cronstable`: the coordinator binary. Parses arguments and calls the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use cronstable_coordinator::{config, demo, listeners::Listeners, run};
use cronstable_shim::cli::{hostname, init_logging};
use tokio::signal::unix::{SignalKind, signal};

/// Exit code for a configuration error (sysexits EX_USAGE).
const EX_USAGE: u8 = 64;

/// cronstable: a fault-tolerant distributed cron.
#[derive(Debug, Parser)]
#[command(name = "cronstable", version)]
struct Args {
    /// Validate a config file and exit (same as `cronstable validate-config FILE`).
    #[arg(long, value_name = "FILE", global = false)]
    validate_config: Option<PathBuf>,
    /// Log format.
    #[arg(long, default_value = "text", value_parser = ["text", "json"], global = true)]
    log_format: String,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the coordinator.
    Coordinator {
        /// The YAML config file; without one, every default applies (election off).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Check a config file at rest; list every error and warning.
    ValidateConfig {
        /// The YAML config file.
        file: PathBuf,
    },
    /// Run a local demo: a coordinator and a shim with an example crontab, on loopback.
    Demo(demo::DemoArgs),
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(file) = args.validate_config {
        return validate(&file);
    }
    match args.command {
        Some(Command::ValidateConfig { file }) => validate(&file),
        Some(Command::Coordinator { config }) => {
            init_logging(&args.log_format);
            serve(config)
        }
        Some(Command::Demo(demo_args)) => runtime().block_on(async {
            init_logging(&args.log_format);
            match demo::run(demo_args, &std::env::temp_dir(), shutdown_signal()).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("cronstable demo: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }),
        None => {
            eprintln!(
                "cronstable: a subcommand is required (coordinator, validate-config, demo); see --help"
            );
            ExitCode::from(EX_USAGE)
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("cannot start the tokio runtime")
}

fn validate(file: &std::path::Path) -> ExitCode {
    let (ok, report) = config::validate_report(file);
    print!("{report}");
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EX_USAGE)
    }
}

fn serve(path: Option<PathBuf>) -> ExitCode {
    // A mistyped --config path must not quietly run on defaults.
    if let Some(p) = path.as_deref().filter(|p| !p.exists()) {
        eprintln!("error: --config {}: no such file", p.display());
        return ExitCode::from(EX_USAGE);
    }
    let loaded = match path.as_deref().map(config::load) {
        None => config::Loaded::default(),
        Some(Ok(l)) => l,
        Some(Err(errors)) => {
            eprintln!("{errors}");
            return ExitCode::from(EX_USAGE);
        }
    };
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
    let node_name = loaded
        .config
        .cluster
        .as_ref()
        .and_then(|c| c.node_name.clone())
        .unwrap_or_else(hostname);
    runtime().block_on(async move {
        let listeners = match Listeners::bind(&loaded.config).await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!("{e}");
                return ExitCode::FAILURE;
            }
        };
        match run(loaded.config, node_name, listeners, shutdown_signal()).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!("{e}");
                ExitCode::FAILURE
            }
        }
    })
}

/// Resolves on SIGTERM (how Kubernetes stops a container) or SIGINT.
async fn shutdown_signal() {
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot install signal handlers; stop the coordinator with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
