//! `cronstable-gate`: parses arguments, runs one gated firing and exits with its code.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use cronstable_core::ClusterPolicy;
use cronstable_core::schedule::Schedule;
use cronstable_shim::cli::hostname;
use cronstable_shim::gate::{self, EXIT_INTERNAL, EXIT_USAGE, GateConfig, GateOutcome};

const EXIT_CODES: &str = "\
Exit codes:
  COMMAND's status  COMMAND ran (killed by signal N: 128+N)
  0                 the coordinator said skip (another node runs it, no quorum, ...)
  64                bad arguments
  69                no usable answer from the coordinator and --policy says skip
  70                internal error
  78                the coordinator has no job named JOB
  126               COMMAND could not be started
  127               COMMAND was not found

Example crontab line (cron.d format, with its user field):
  0 * * * * app cronstable-gate charge-cards -- /opt/app/charge.sh";

/// Asks the cronstable coordinator whether this node runs JOB now, and runs COMMAND if so.
#[derive(Debug, Parser)]
#[command(name = "cronstable-gate", version, after_help = EXIT_CODES)]
struct Args {
    /// The job's name in the coordinator's job set.
    job: String,
    /// The program to run and its arguments (run directly, not through a shell).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
    /// The coordinator: http://host:port or unix:/path.
    #[arg(
        long,
        env = "CRONSTABLE_COORDINATOR",
        default_value = "http://127.0.0.1:7400"
    )]
    coordinator: String,
    #[command(flatten)]
    token: cronstable_shim::cli::TokenArgs,
    /// The job's schedule: the firing is then its most recent due instant, not the current
    /// minute (use it when crond may start the gate late, or the schedule has seconds).
    #[arg(long, value_name = "EXPR")]
    schedule: Option<String>,
    /// The IANA time zone of --schedule (default UTC).
    #[arg(long, value_name = "ZONE", requires = "schedule")]
    timezone: Option<String>,
    /// The job's cluster policy, applied when the coordinator does not answer:
    /// Leader skips (fails closed), PreferLeader and EveryNode run.
    #[arg(long, default_value = "Leader", value_parser = parse_policy)]
    policy: ClusterPolicy,
    /// Deadline of each coordinator call, e.g. 1s or 500ms.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    ask_timeout: Duration,
    /// The executor id reported to the coordinator (default gate:HOSTNAME).
    #[arg(long)]
    executor_id: Option<String>,
    /// Say on stderr why a firing was skipped.
    #[arg(short, long)]
    verbose: bool,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    cronstable_core::duration::parse_duration(s)
}

fn parse_policy(s: &str) -> Result<ClusterPolicy, String> {
    s.parse().map_err(|e| format!("{e}"))
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::SUCCESS // --help, --version
            };
        }
    };
    let schedule = match &args.schedule {
        None => None,
        Some(expr) => match Schedule::parse(expr, args.timezone.as_deref()) {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("cronstable-gate: --schedule: {e}");
                return ExitCode::from(EXIT_USAGE);
            }
        },
    };
    let config = GateConfig {
        job: args.job,
        command: args.command,
        coordinator: args.coordinator,
        executor_id: args
            .executor_id
            .unwrap_or_else(|| format!("gate:{}", hostname())),
        ask_timeout: args.ask_timeout,
        schedule,
        policy: args.policy,
        api_token: args.token.token(),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cronstable-gate: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_INTERNAL);
        }
    };
    let outcome = match runtime.block_on(gate::run(&config)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("cronstable-gate: --coordinator: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    match &outcome {
        // A firing past its start deadline is always said: crond (or the host) started the
        // gate that late, which an operator wants to see in crond's mail or log.
        GateOutcome::Skipped { reason, message }
            if args.verbose || reason.as_str() == "starting_deadline" =>
        {
            eprintln!(
                "cronstable-gate: {} skipped ({reason}): {message}",
                config.job
            );
        }
        GateOutcome::Unavailable(m) | GateOutcome::UnknownJob(m) => {
            eprintln!("cronstable-gate: {m}");
        }
        GateOutcome::SpawnFailed { message, .. } => eprintln!("cronstable-gate: {message}"),
        _ => {}
    }
    ExitCode::from(gate::exit_code(&outcome))
}
