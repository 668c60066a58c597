//! `cronstable`: the coordinator binary. Parses arguments and calls the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use cronstable_coordinator::reload::Reload;
use cronstable_coordinator::{config, demo, listeners::Listeners, run};
use cronstable_shim::cli::{hostname, init_logging, init_logging_with_default};
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
    /// Run a local demo: a gossip cluster (or one node) with an example crontab, on loopback.
    Demo(demo::DemoArgs),
    /// Manage a filesystem lease store (cluster.backend: filesystem).
    Store {
        #[command(subcommand)]
        command: StoreCommand,
    },
    /// Check run logs against a job set: was every target met, did anything run twice?
    /// Prints the JSON report; exit 0 valid, 1 invalid, 2 unknown, 64 unreadable input.
    Verify {
        /// The jobs file (JSON: {"jobs": [...], optional "exempt", "nemesis", "finalHeal"}).
        #[arg(long, value_name = "FILE")]
        jobs: PathBuf,
        /// A run log in JSON Lines ({"ev":"start"|"end","job","node","runId","t"}, a start
        /// optionally with "scheduledAt", the nominal instant); repeatable.
        #[arg(long = "runs", value_name = "FILE", required = true)]
        runs: Vec<PathBuf>,
        /// The read time in Unix ms (default: now). Targets that could not have finished by
        /// then are not judged.
        #[arg(long, value_name = "MS")]
        read_time: Option<i64>,
        /// Also write the timeline plot here.
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum StoreCommand {
    /// Mark a directory as the shared store of a deployment: run it once, by hand, on the
    /// mounted store. A node (topology auto or shared) refuses a store without the marker, or
    /// with another deployment's, at start and at every round; nodes never write it.
    Init {
        /// The store directory, as cluster.filesystem.path names it (mounted).
        path: PathBuf,
        /// The deployment that elects there: cluster.filesystem.deploymentId.
        #[arg(long, value_name = "ID", default_value = "default")]
        deployment_id: String,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(file) = args.validate_config {
        return validate(&file);
    }
    match args.command {
        Some(Command::ValidateConfig { file }) => validate(&file),
        Some(Command::Verify {
            jobs,
            runs,
            read_time,
            svg,
        }) => verify(&jobs, &runs, read_time, svg.as_deref()),
        Some(Command::Store {
            command:
                StoreCommand::Init {
                    path,
                    deployment_id,
                },
        }) => store_init(&path, &deployment_id),
        Some(Command::Coordinator { config }) => {
            init_logging(&args.log_format);
            serve(config)
        }
        Some(Command::Demo(demo_args)) => runtime().block_on(async {
            // The demo prints its own view and events; the nodes' routine INFO lines come back
            // with --verbose or RUST_LOG.
            let default = if demo_args.verbose || demo_args.nodes == 1 {
                "info"
            } else {
                "warn"
            };
            init_logging_with_default(&args.log_format, default);
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
                "cronstable: a subcommand is required (coordinator, validate-config, demo, verify, \
                 store); see --help"
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

fn store_init(path: &std::path::Path, deployment: &str) -> ExitCode {
    use cronstable_coordinator::store::filesystem::{marker, probe};
    match marker::init(path, deployment) {
        Ok(m) => {
            println!(
                "marked {} as the cronstable store of deployment(s) {:?} ({})",
                path.display(),
                m.deployments,
                marker::path(path).display()
            );
            // The marker is the proof nodes check; a directory that is no mount of its own is
            // worth a word, since every node must see this very directory.
            if cfg!(target_os = "linux")
                && let Ok(mounts) = std::fs::read_to_string("/proc/mounts")
                && let Err(e) = probe::own_mount(path, &mounts)
            {
                eprintln!("warning: {e}");
            }
            ExitCode::SUCCESS
        }
        Err(e @ (marker::InitError::NotADirectory(_) | marker::InitError::BadDeployment(_))) => {
            eprintln!("cronstable store init: {e}");
            ExitCode::from(EX_USAGE)
        }
        Err(e) => {
            eprintln!("cronstable store init: {e}");
            ExitCode::FAILURE
        }
    }
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
        // Installed before anything listens, so a SIGHUP that comes as soon as the
        // coordinator answers is a reload, never the default action (which ends the process).
        let hangups = match signal(SignalKind::hangup()) {
            Ok(h) => Some(h),
            Err(e) => {
                tracing::error!("cannot install the SIGHUP handler ({e}); config reload is off");
                None
            }
        };
        let (reload_tx, reload_rx) = tokio::sync::mpsc::channel(1);
        if let Some(hangups) = hangups {
            cronstable_coordinator::spawn(reload_on_hangup(hangups, path.clone(), reload_tx));
        }
        let listeners = match Listeners::bind(&loaded.config).await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!("{e}");
                return ExitCode::FAILURE;
            }
        };
        // The binary is the one place that reads the environment.
        #[allow(clippy::disallowed_methods)]
        let env = cronstable_coordinator::Environment::from_vars(std::env::vars());
        match run(
            loaded.config,
            node_name,
            env,
            listeners,
            stop_signal(path.clone()),
            reload_rx,
        )
        .await
        {
            Ok(()) => ExitCode::SUCCESS,
            // A secret that does not resolve is a configuration error, like a bad key.
            Err(
                e @ (cronstable_coordinator::RunError::AuthToken(_)
                | cronstable_coordinator::RunError::ApiToken(_)),
            ) => {
                tracing::error!("{e}");
                ExitCode::from(EX_USAGE)
            }
            Err(e) => {
                tracing::error!("{e}");
                ExitCode::FAILURE
            }
        }
    })
}

fn verify(
    jobs: &std::path::Path,
    runs: &[PathBuf],
    read_time: Option<i64>,
    svg: Option<&std::path::Path>,
) -> ExitCode {
    use cronstable_core::checker::{self, Validity};
    let read_time = read_time.unwrap_or_else(cronstable_coordinator::clock::now_ms);
    let input = match cronstable_coordinator::verify::load(jobs, runs, read_time) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EX_USAGE);
        }
    };
    let report = checker::check(&input);
    if let Some(path) = svg {
        let plot = checker::svg::timeline(&report, &input.nemesis, &jobs.display().to_string());
        if let Err(e) = std::fs::write(path, plot) {
            eprintln!("error: writing {}: {e}", path.display());
            return ExitCode::from(EX_USAGE);
        }
    }
    match serde_json::to_string_pretty(&report) {
        Ok(json) => println!("{json}"),
        Err(e) => {
            eprintln!("error: encoding the report: {e}");
            return ExitCode::FAILURE;
        }
    }
    match report.valid {
        Validity::Valid => ExitCode::SUCCESS,
        Validity::Invalid => ExitCode::from(1),
        Validity::Unknown => ExitCode::from(2),
    }
}

/// On each SIGHUP, loads and validates the config file again and hands a good one to the
/// library. A bad file keeps the running config: every error gets its own ERROR line (file,
/// line and key, as `validate-config` prints them) and a summary line follows.
async fn reload_on_hangup(
    mut hangups: tokio::signal::unix::Signal,
    path: Option<PathBuf>,
    reloads: tokio::sync::mpsc::Sender<Reload>,
) {
    while hangups.recv().await.is_some() {
        let Some(path) = path.as_deref() else {
            tracing::warn!(
                "SIGHUP: the coordinator was started without --config; there is no file to reload"
            );
            continue;
        };
        tracing::info!(file = %path.display(), "SIGHUP: reloading the config");
        if reloads.send(read_for_reload(path).await).await.is_err() {
            // The coordinator is stopping.
            return;
        }
    }
}

/// Loads `path` for a reload, logging why when it cannot be used: a missing file, a failed
/// load task, or a file with errors (each on its own ERROR line, then a summary).
async fn read_for_reload(path: &std::path::Path) -> Reload {
    match read_again(path).await {
        ReadAgain::Missing => {
            tracing::error!(
                "config reload: {}: no such file; the running config stays",
                path.display()
            );
            Reload::Unusable
        }
        ReadAgain::TaskFailed(e) => {
            tracing::error!("config reload: the load task failed ({e}); the running config stays");
            Reload::Unusable
        }
        ReadAgain::Loaded(loaded) => {
            for w in &loaded.warnings {
                tracing::warn!("{w}");
            }
            Reload::Config(Box::new(loaded.config))
        }
        ReadAgain::Invalid(errors) => {
            for e in &errors.0 {
                tracing::error!("{e}");
            }
            tracing::error!(
                "config reload: {} has {} error(s); the running config stays",
                path.display(),
                errors.0.len()
            );
            Reload::Unusable
        }
    }
}

/// The config file read again while the coordinator runs: for a reload, or at a stop, for
/// what the next start will read. Each caller says in its own words why a file is unusable.
enum ReadAgain {
    Loaded(Box<config::Loaded>),
    Missing,
    TaskFailed(String),
    Invalid(config::ConfigErrors),
}

async fn read_again(path: &std::path::Path) -> ReadAgain {
    // load() reads a missing file as the defaults, which is right at a first start and wrong
    // here: a file moved away must not switch a running node's election off, and the next
    // start refuses it.
    if !path.exists() {
        return ReadAgain::Missing;
    }
    let owned = path.to_owned();
    // load_for_reload also refuses an empty document, which load() reads as the defaults.
    match tokio::task::spawn_blocking(move || config::load_for_reload(&owned)).await {
        Err(e) => ReadAgain::TaskFailed(e.to_string()),
        Ok(Ok(loaded)) => ReadAgain::Loaded(Box::new(loaded)),
        Ok(Err(errors)) => ReadAgain::Invalid(errors),
    }
}

/// Resolves on SIGTERM or SIGINT with what the config file says about the next start: its
/// election mode, read again now (an edit made for the next start is on disk by the time the
/// process is stopped to apply it). Unknown without a file, or when the file cannot be used.
async fn stop_signal(path: Option<PathBuf>) -> cronstable_coordinator::Stop {
    shutdown_signal().await;
    let Some(path) = path else {
        // Without --config every start is election off.
        let next_mode = Some(config::Config::default().election_mode());
        return cronstable_coordinator::Stop { next_mode };
    };
    let next_mode = match read_again(&path).await {
        ReadAgain::Loaded(loaded) => Some(loaded.config.election_mode()),
        ReadAgain::Missing => {
            tracing::warn!(
                file = %path.display(),
                "stopping: the config file is gone; executors are told the election mode is unknown"
            );
            None
        }
        ReadAgain::Invalid(errors) => {
            tracing::warn!(
                file = %path.display(),
                errors = errors.0.len(),
                "stopping: the config file the next start would read has errors; executors are \
                 told the election mode is unknown"
            );
            None
        }
        ReadAgain::TaskFailed(e) => {
            tracing::warn!(
                "stopping: could not read the config file again ({e}); executors are told the \
                 election mode is unknown"
            );
            None
        }
    };
    cronstable_coordinator::Stop { next_mode }
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
