//! The cronstable executor shim: a small crond replacement that asks its coordinator before
//! every firing.
//!
//! It reads a crontab or a YAML job file, registers the jobs with the coordinator, sleeps until
//! each due instant, asks `ShouldRun`, spawns `/bin/sh -c` for a RUN and reports the run. It
//! depends on the pure core and the proto only, never on the coordinator or a backend: it is
//! the small program that lives inside the cron container.
//!
//! # Layout
//!
//! - [`schedule`]: reading the crontab or job file, and pure planning of due and missed
//!   instants.
//! - [`firing`]: one firing end to end (gate, run, report, retries), with the hand-over of a
//!   retry sequence to the new owner and its resumption here, the `@reboot` one-shots held
//!   until the coordinator may decide them, and the election mode last stated for when the
//!   coordinator is away.
//! - [`coordinator`]: the gRPC client, every call with a deadline; the batching of questions;
//!   why a call got no answer; the API token; the routing of `RunDeferred` pushes.
//! - [`session`]: registration and the Watch stream, reconnected with backoff; it starts the
//!   firings the coordinator pushes.
//! - [`process`]: spawning and supervising processes, and reaping orphans as PID 1.
//! - [`clock`]: the shim's clock.
//! - [`gate`]: `cronstable-gate`, one gated firing started by an existing crond.
//! - [`cli`]: logging setup and the host name, for the binaries.

pub mod cli;
pub mod clock;
pub mod coordinator;
pub mod firing;
pub mod gate;
pub mod process;
pub mod schedule;
pub mod session;

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use cronstable_core::fingerprint::job_set_id;
use cronstable_core::{FiringKind, Reason};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::coordinator::client::Coordinator;
use crate::firing::{FiringContext, fire};
use crate::process::runner::Supervisor;
use crate::schedule::source::{JobSource, LoadedJob};

/// `tokio::spawn` that carries the caller's tracing span into the task. tokio does not: without
/// it, a task's log lines lose the context they were started in. It matters where several nodes
/// share one process (`cronstable demo`, in-process tests): each node's tasks run under a
/// `node` span, and every line they log names its node.
pub fn spawn<F>(future: F) -> tokio::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::spawn(tracing::Instrument::in_current_span(future))
}

/// Everything the shim needs to run, as the binary parsed it.
#[derive(Debug, Clone)]
pub struct ShimConfig {
    /// Where the jobs come from.
    pub source: JobSource,
    /// The coordinator: `http://host:port` or `unix:/path`.
    pub coordinator: String,
    /// This executor's id, stable across restarts of the shim.
    pub executor_id: String,
    /// The deadline of each coordinator call; past it the no-manager rule applies.
    pub ask_timeout: Duration,
    /// A firing later than this after its due instant is reported missed, not run.
    pub max_lateness: Duration,
    /// At shutdown, how long running jobs get after SIGTERM before SIGKILL.
    pub grace: Duration,
    /// How often the job file is checked for changes.
    pub reload_interval: Duration,
    /// Reap orphaned processes (on by default when running as PID 1).
    pub reap_orphans: bool,
    /// The token sent with every call (the coordinator's `api.authToken`).
    pub api_token: Option<coordinator::token::ApiToken>,
}

impl ShimConfig {
    /// Defaults for everything but the source and the coordinator address.
    /// The executor id defaults to `shim:PATH`; binaries prefix the host name so two
    /// containers with the same path never share one id.
    pub fn new(source: JobSource, coordinator: impl Into<String>) -> Self {
        let executor_id = format!("shim:{}", source.path().display());
        Self {
            source,
            coordinator: coordinator.into(),
            executor_id,
            ask_timeout: Duration::from_secs(1),
            max_lateness: Duration::from_secs(60),
            grace: Duration::from_secs(10),
            reload_interval: Duration::from_secs(2),
            reap_orphans: std::process::id() == 1,
            api_token: None,
        }
    }
}

/// Why the shim could not start.
#[derive(Debug, thiserror::Error)]
pub enum ShimError {
    /// The job file could not be read at start.
    #[error(transparent)]
    Read(#[from] schedule::source::ReadError),
    /// The coordinator address is malformed.
    #[error(transparent)]
    Address(#[from] coordinator::client::AddressError),
}

/// One scheduled job and its next due instant.
struct Entry {
    loaded: LoadedJob,
    next: Option<DateTime<Utc>>,
}

/// Runs the shim until `shutdown` resolves. Each message on `reload` (SIGHUP) re-reads the job
/// file at once; it is also re-read whenever it changes.
pub async fn run(
    config: ShimConfig,
    shutdown: impl Future<Output = ()>,
    mut reload: mpsc::Receiver<()>,
) -> Result<(), ShimError> {
    let loaded = schedule::source::load(&config.source)?;
    report_errors(&loaded.errors);
    report_warnings(&loaded.warnings);
    let coordinator = Coordinator::new(
        &config.coordinator,
        config.executor_id.clone(),
        config.ask_timeout,
        config.api_token.clone(),
    )?;
    let supervisor = Supervisor::new();
    let (stop_tx, stop_rx) = watch::channel(false);
    let (id_tx, id_rx) = watch::channel(id_of(&loaded.jobs));
    let (jobs_tx, jobs_rx) = watch::channel(Arc::new(loaded.jobs.clone()));
    let ctx = FiringContext::new(
        coordinator,
        supervisor.clone(),
        id_rx,
        stop_rx,
        jobs_rx.clone(),
    );
    log_started(&config, loaded.jobs.len());
    let session = crate::spawn(session::maintain(ctx.clone(), jobs_rx));
    let reaper = config
        .reap_orphans
        .then(|| crate::spawn(process::reaper::reap_orphans(supervisor.clone())));

    let started = clock::now();
    let mut firings = JoinSet::new();
    let mut table: HashMap<String, Entry> = HashMap::new();
    let mut file = schedule::source::FileWatch::new(loaded.content);
    apply(&mut table, loaded.jobs, started);
    start_one_shots(&table, started, &ctx, &mut firings);

    let lateness = TimeDelta::from_std(config.max_lateness).unwrap_or(TimeDelta::seconds(60));
    let mut reload_tick = tokio::time::interval(config.reload_interval);
    reload_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    let mut last_now = started;
    loop {
        let now = clock::now();
        replan_if_stepped_back(&mut table, last_now, now);
        last_now = now;
        start_due(&mut table, now, lateness, &ctx, &mut firings);
        // Reap finished firing tasks so the set does not grow.
        while firings.try_join_next().is_some() {}
        let nap = nap(&table);
        tokio::select! {
            _ = tokio::time::sleep(nap) => {}
            _ = reload_tick.tick() => {
                if let Some(loaded) = file.poll(&config.source, false) {
                    apply_reload(loaded, &mut table, &jobs_tx, &id_tx);
                }
            }
            Some(()) = reload.recv() => {
                if let Some(loaded) = file.poll(&config.source, true) {
                    apply_reload(loaded, &mut table, &jobs_tx, &id_tx);
                }
            }
            _ = &mut shutdown => break,
        }
    }

    let _ = stop_tx.send(true);
    stop_all(&supervisor, config.grace, firings).await;
    session.abort();
    if let Some(r) = reaper {
        r.abort();
    }
    tracing::info!("shim stopped");
    Ok(())
}

/// The shim's first line: what it reads, how many jobs, which coordinator, as which executor.
fn log_started(config: &ShimConfig, jobs: usize) {
    tracing::info!(
        source = %config.source.path().display(),
        jobs,
        coordinator = config.coordinator,
        executor = config.executor_id,
        "shim started"
    );
}

/// The wall clock stepped back from `before` to `now`: keeping the old due instants would
/// silence every job for the length of the step, so every job is planned again from `now`.
fn replan_if_stepped_back(
    table: &mut HashMap<String, Entry>,
    before: DateTime<Utc>,
    now: DateTime<Utc>,
) {
    if now >= before - TimeDelta::seconds(1) {
        return;
    }
    tracing::warn!(from = %before, to = %now, "wall clock stepped back; re-planning");
    for entry in table.values_mut() {
        entry.next = entry.loaded.schedule.next_after(now);
    }
}

/// Starts the `@reboot` one-shots of `table`, as of the shim's start at `started`.
fn start_one_shots(
    table: &HashMap<String, Entry>,
    started: DateTime<Utc>,
    ctx: &FiringContext,
    firings: &mut JoinSet<()>,
) {
    for e in table.values().filter(|e| e.loaded.spec.is_reboot()) {
        firings.spawn(tracing::Instrument::in_current_span(fire(
            ctx.clone(),
            e.loaded.spec.clone(),
            started,
            FiringKind::Reboot,
        )));
    }
}

/// Starts every firing of `table` due by `now` (planned [`firing::LEAD`] ahead: a firing asks
/// its gate a moment early and then launches exactly on its instant, so the timer's wake-up and
/// the round trip are off the path), and reports the ones that came too late.
fn start_due(
    table: &mut HashMap<String, Entry>,
    now: DateTime<Utc>,
    lateness: TimeDelta,
    ctx: &FiringContext,
    firings: &mut JoinSet<()>,
) {
    for entry in table.values_mut() {
        let plan = schedule::plan::plan(
            &entry.loaded.schedule,
            entry.next,
            now + firing::LEAD,
            lateness,
        );
        entry.next = plan.next;
        if let Some(t) = plan.fire {
            firings.spawn(tracing::Instrument::in_current_span(fire(
                ctx.clone(),
                entry.loaded.spec.clone(),
                t,
                FiringKind::Scheduled,
            )));
        }
        report_missed(
            ctx,
            &entry.loaded.spec.name,
            &plan.missed,
            plan.missed_total,
        );
    }
}

/// How long the scheduler sleeps: until the earliest due instant, but at most 5 s, to notice
/// wall-clock jumps (a suspend, an NTP step) that a monotonic sleep would not see.
fn nap(table: &HashMap<String, Entry>) -> Duration {
    let most = Duration::from_secs(5);
    match table.values().filter_map(|e| e.next).min() {
        Some(wake) => (wake - firing::LEAD - clock::now())
            .to_std()
            .unwrap_or(Duration::ZERO)
            .min(most),
        None => most,
    }
}

/// At shutdown: no new runs, the running ones stopped within `grace`, and the firing tasks
/// given up to 3 s to send their final reports.
async fn stop_all(supervisor: &Supervisor, grace: Duration, mut firings: JoinSet<()>) {
    tracing::info!(
        running = supervisor.total_running(),
        "shim stopping; stopping running jobs"
    );
    supervisor.close();
    supervisor.stop(None, grace).await;
    let _ = tokio::time::timeout(Duration::from_secs(3), async {
        while firings.join_next().await.is_some() {}
    })
    .await;
}

/// The job-set ID of the shim's own jobs.
fn id_of(jobs: &[LoadedJob]) -> cronstable_core::fingerprint::JobSetId {
    job_set_id(jobs.iter().map(|j| &*j.spec))
}

fn report_errors(errors: &[String]) {
    for e in errors {
        tracing::error!("{e}");
    }
}

fn report_warnings(warnings: &[String]) {
    for w in warnings {
        tracing::warn!("{w}");
    }
}

fn report_missed(ctx: &FiringContext, job: &str, missed: &[DateTime<Utc>], total: u64) {
    if total == 0 {
        return;
    }
    tracing::warn!(job, missed = total, first = %missed[0], "firings missed: they came later than the lateness bound");
    let (ctx, job) = (ctx.clone(), job.to_owned());
    let instants: Vec<i64> = missed.iter().map(DateTime::timestamp_millis).collect();
    crate::spawn(async move {
        let msg = Reason::TooLate.describe().to_owned();
        for at in instants {
            let kind = FiringKind::Scheduled;
            let sent = ctx
                .coordinator
                .report_skip(&job, at, kind, 1, Reason::TooLate, msg.clone());
            if sent.await.is_err() {
                break; // the coordinator is away; the WARNING above already counted them
            }
        }
    });
}

/// Replaces the table with `jobs`, keeping the next due instant of every unchanged job so a
/// reload never re-fires or skips one.
fn apply(table: &mut HashMap<String, Entry>, jobs: Vec<LoadedJob>, now: DateTime<Utc>) {
    let mut next = HashMap::with_capacity(jobs.len());
    for loaded in jobs {
        let name = loaded.spec.name.clone();
        let due = match table.remove(&name) {
            Some(old) if old.loaded.spec == loaded.spec => old.next,
            _ => loaded.schedule.next_after(now),
        };
        next.insert(name, Entry { loaded, next: due });
    }
    *table = next;
}

/// Puts a reloaded job file into effect: the schedule table, the job-set ID and the job list
/// the session registers.
fn apply_reload(
    loaded: schedule::source::Loaded,
    table: &mut HashMap<String, Entry>,
    jobs_tx: &watch::Sender<Arc<Vec<LoadedJob>>>,
    id_tx: &watch::Sender<cronstable_core::fingerprint::JobSetId>,
) {
    report_errors(&loaded.errors);
    report_warnings(&loaded.warnings);
    let added: Vec<&str> = loaded
        .jobs
        .iter()
        .filter(|j| j.spec.is_reboot() && !table.contains_key(&j.spec.name))
        .map(|j| j.spec.name.as_str())
        .collect();
    if !added.is_empty() {
        tracing::info!(
            jobs = ?added,
            "@reboot jobs added by a reload run at the next shim start, as under cron"
        );
    }
    tracing::info!(
        jobs = loaded.jobs.len(),
        errors = loaded.errors.len(),
        "job file reloaded"
    );
    apply(table, loaded.jobs.clone(), clock::now());
    id_tx.send_replace(id_of(&loaded.jobs));
    jobs_tx.send_replace(Arc::new(loaded.jobs));
}
