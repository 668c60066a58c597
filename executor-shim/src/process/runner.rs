//! Spawning and supervising job processes.
//!
//! Each run is `/bin/sh -c COMMAND` in its own process group, so a timeout, a `Replace` or a
//! shutdown can stop the whole tree the command started. "Running" means a live child process
//! in the [`Supervisor`]'s table: an entry is removed the moment the child exits, whatever
//! happens to its output pipes, so a run can never stay "running" after its process is gone.

use std::collections::{BTreeMap, HashMap};
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::clock;

/// Bytes of combined output kept for the run report.
pub const OUTPUT_TAIL_BYTES: usize = 4096;
/// After SIGTERM, how long a process group gets before SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(5);
/// After the child exits, how long to keep reading output a grandchild may still be writing.
const PIPE_LINGER: Duration = Duration::from_millis(500);

/// How one run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The child's pid.
    pub pid: u32,
    /// When it was spawned.
    pub started_at: DateTime<Utc>,
    /// When it exited.
    pub finished_at: DateTime<Utc>,
    /// Its exit code, if it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// The supervisor killed it at the job's timeout.
    pub timed_out: bool,
    /// The last [`OUTPUT_TAIL_BYTES`] of its stdout and stderr.
    pub output_tail: String,
}

impl Outcome {
    /// Exit code 0 within the timeout.
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The job's name (for the table and logs).
    pub job: String,
    /// The shell command.
    pub command: String,
    /// Text for stdin, if any.
    pub stdin: Option<String>,
    /// Environment added to the shim's own.
    pub env: BTreeMap<String, String>,
    /// Kill after this long.
    pub timeout: Option<Duration>,
    /// Refuse to start while another run of the same job is alive (concurrencyPolicy Forbid).
    pub exclusive: bool,
}

/// Why a run did not start.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The job forbids overlap and a run of it is alive.
    #[error("a run of this job is still alive")]
    AlreadyRunning,
    /// The supervisor is closed: the shim is shutting down.
    #[error("the shim is shutting down")]
    ShuttingDown,
    /// `/bin/sh` could not be spawned.
    #[error(transparent)]
    Spawn(#[from] std::io::Error),
}

#[derive(Debug, Clone)]
struct Running {
    job: String,
}

/// The table of live job processes. Cheap to clone; clones share the table.
#[derive(Debug, Clone, Default)]
pub struct Supervisor {
    running: Arc<Mutex<Table>>,
}

#[derive(Debug, Default)]
struct Table {
    runs: HashMap<u32, Running>,
    /// Set at shutdown: no run starts after it, so none can outlive the shim.
    closed: bool,
}

/// A locked view of the live pids, held by the orphan reaper so that a child being spawned is
/// always in the table before the reaper can see it.
pub struct PidTable<'a>(MutexGuard<'a, Table>);

impl PidTable<'_> {
    /// True if `pid` is a job process this supervisor waits for itself.
    pub fn contains(&self, pid: u32) -> bool {
        self.0.runs.contains_key(&pid)
    }
}

impl Supervisor {
    /// An empty supervisor.
    pub fn new() -> Self {
        Self::default()
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Refuses every later launch (at shutdown).
    pub fn close(&self) {
        self.table().closed = true;
    }

    /// Locks the pid table (see [`PidTable`]).
    pub fn pids(&self) -> PidTable<'_> {
        PidTable(self.table())
    }

    /// Live runs of `job`.
    pub fn running(&self, job: &str) -> usize {
        self.table().runs.values().filter(|r| r.job == job).count()
    }

    /// Live runs of every job.
    pub fn total_running(&self) -> usize {
        self.table().runs.len()
    }

    fn groups(&self, job: Option<&str>) -> Vec<u32> {
        self.table()
            .runs
            .iter()
            .filter(|(_, r)| job.is_none_or(|j| r.job == j))
            .map(|(pid, _)| *pid)
            .collect()
    }

    /// Sends `signal` to the process group of every live run (of `job`, or of all jobs).
    pub fn signal(&self, job: Option<&str>, signal: Signal) {
        for pgid in self.groups(job) {
            // The group id is the child's pid (it was spawned as a group leader).
            let _ = killpg(Pid::from_raw(pgid as i32), signal);
        }
    }

    /// Stops every live run of `job` (or of all jobs): SIGTERM, then SIGKILL after `grace`.
    /// Returns once they are gone, or after the SIGKILL and a short wait.
    pub async fn stop(&self, job: Option<&str>, grace: Duration) {
        let groups = self.groups(job);
        if groups.is_empty() {
            return;
        }
        self.signal(job, Signal::SIGTERM);
        if !self.wait_gone(job, grace).await {
            tracing::warn!(
                job = job.unwrap_or("*"),
                "runs ignored SIGTERM; sending SIGKILL"
            );
        }
        // The whole group, not just the shell: a member that ignored SIGTERM must not outlive
        // the run. A group id cannot be reused while any member lives, so this is safe.
        for pgid in groups {
            let _ = killpg(Pid::from_raw(pgid as i32), Signal::SIGKILL);
        }
        self.wait_gone(job, Duration::from_secs(2)).await;
    }

    async fn wait_gone(&self, job: Option<&str>, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if self.groups(job).is_empty() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Runs one process to completion. `on_started` is called with the pid right after spawn.
    pub async fn run(
        &self,
        launch: Launch,
        on_started: impl FnOnce(u32, DateTime<Utc>),
    ) -> Result<Outcome, LaunchError> {
        let mut cmd = shell(&launch);
        // fork/exec is synchronous and, on a loaded machine, takes milliseconds: done on the
        // runtime's one thread, a minute in which hundreds of jobs start would stall every
        // other firing's ShouldRun answer behind it until its deadline passed. So it runs on a
        // blocking thread, under the table lock there, so the orphan reaper never mistakes the
        // new child for an orphan before it is recorded.
        let supervisor = self.clone();
        let (job, exclusive) = (launch.job.clone(), launch.exclusive);
        let spawned = tokio::task::spawn_blocking(move || {
            let mut table = supervisor.table();
            if table.closed {
                return Err(LaunchError::ShuttingDown);
            }
            if exclusive && table.runs.values().any(|r| r.job == job) {
                return Err(LaunchError::AlreadyRunning);
            }
            let child = cmd.spawn()?;
            // A pid of 0 would make killpg signal the shim's own group: refuse it outright.
            let pid = child
                .id()
                .filter(|p| *p > 0)
                .ok_or_else(|| std::io::Error::other("the spawned shell has no pid"))?;
            table.runs.insert(pid, Running { job });
            Ok((child, pid, clock::now()))
        })
        .await;
        let (mut child, pid, started_at) = match spawned {
            Ok(r) => r?,
            // The blocking pool is gone only while the runtime shuts down; a panic in the
            // spawn is a failed start, which may have started something.
            Err(e) if e.is_cancelled() => return Err(LaunchError::ShuttingDown),
            Err(e) => return Err(LaunchError::Spawn(std::io::Error::other(e.to_string()))),
        };
        on_started(pid, started_at);
        if let (Some(text), Some(mut stdin)) = (launch.stdin, child.stdin.take()) {
            crate::spawn(async move {
                let _ = stdin.write_all(text.as_bytes()).await;
            });
        }
        let tail = Arc::new(Mutex::new(Tail::default()));
        let readers = [
            child
                .stdout
                .take()
                .map(|o| spawn_reader(o, tail.clone(), false)),
            child
                .stderr
                .take()
                .map(|e| spawn_reader(e, tail.clone(), true)),
        ];

        let (status, timed_out) = wait_within(&mut child, pid, launch.timeout, &launch.job).await;
        let finished_at = clock::now();
        self.table().runs.remove(&pid);
        for reader in readers.into_iter().flatten() {
            let _ = tokio::time::timeout(PIPE_LINGER, reader).await;
        }
        let status = status.map_err(LaunchError::Spawn)?;
        use std::os::unix::process::ExitStatusExt;
        let output_tail = tail.lock().unwrap_or_else(PoisonError::into_inner).text();
        Ok(Outcome {
            pid,
            started_at,
            finished_at,
            exit_code: status.code(),
            signal: status.signal(),
            timed_out,
            output_tail,
        })
    }
}

/// `/bin/sh -c` with the launch's command and environment, in a process group of its own (so
/// a timeout stops everything it started), its output piped for the tail.
fn shell(launch: &Launch) -> Command {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(&launch.command)
        .envs(&launch.env)
        .process_group(0)
        .stdin(if launch.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(false);
    cmd
}

/// Waits for `child` (pid `pid`), at most `timeout`: past it, SIGTERM to its process group,
/// SIGKILL after [`KILL_GRACE`], and whatever the shell did, no member of its group survives.
/// Returns the exit status and whether the timeout ended it.
async fn wait_within(
    child: &mut tokio::process::Child,
    pid: u32,
    timeout: Option<Duration>,
    job: &str,
) -> (std::io::Result<std::process::ExitStatus>, bool) {
    let Some(limit) = timeout else {
        return (child.wait().await, false);
    };
    if let Ok(status) = tokio::time::timeout(limit, child.wait()).await {
        return (status, false);
    }
    tracing::warn!(job, pid, "run timed out; stopping its process group");
    let group = Pid::from_raw(pid as i32);
    let _ = killpg(group, Signal::SIGTERM);
    let status = match tokio::time::timeout(KILL_GRACE, child.wait()).await {
        Ok(status) => status,
        Err(_) => {
            let _ = killpg(group, Signal::SIGKILL);
            child.wait().await
        }
    };
    let _ = killpg(group, Signal::SIGKILL);
    (status, true)
}

/// The last [`OUTPUT_TAIL_BYTES`] of a run's output.
#[derive(Debug, Default)]
struct Tail {
    bytes: Vec<u8>,
}

impl Tail {
    fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend_from_slice(chunk);
        if self.bytes.len() > OUTPUT_TAIL_BYTES {
            let cut = self.bytes.len() - OUTPUT_TAIL_BYTES;
            self.bytes.drain(..cut);
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// Copies a pipe to the shim's own stdout or stderr (so job output reaches the container log,
/// as under crond) and into the tail.
fn spawn_reader(
    mut pipe: impl AsyncRead + Unpin + Send + 'static,
    tail: Arc<Mutex<Tail>>,
    is_stderr: bool,
) -> tokio::task::JoinHandle<()> {
    crate::spawn(async move {
        let mut buf = vec![0u8; 8192];
        loop {
            match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    tail.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(&buf[..n]);
                    let _ = if is_stderr {
                        tokio::io::stderr().write_all(&buf[..n]).await
                    } else {
                        tokio::io::stdout().write_all(&buf[..n]).await
                    };
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(command: &str) -> Launch {
        Launch {
            job: "t".into(),
            command: command.into(),
            stdin: None,
            env: BTreeMap::new(),
            timeout: None,
            exclusive: false,
        }
    }

    #[tokio::test]
    async fn reports_exit_code_output_and_environment() {
        let s = Supervisor::new();
        let mut l = launch("echo \"$GREETING\"; echo oops >&2; exit 3");
        l.env.insert("GREETING".into(), "hello".into());
        let out = s.run(l, |_, _| {}).await.unwrap();
        assert_eq!(out.exit_code, Some(3));
        assert!(!out.succeeded());
        assert!(out.output_tail.contains("hello"), "{:?}", out.output_tail);
        assert!(out.output_tail.contains("oops"), "{:?}", out.output_tail);
        assert_eq!(s.total_running(), 0);
    }

    #[tokio::test]
    async fn feeds_stdin() {
        let mut l = launch("cat");
        l.stdin = Some("line one\nline two\n".into());
        let out = Supervisor::new().run(l, |_, _| {}).await.unwrap();
        assert_eq!(out.output_tail, "line one\nline two\n");
    }

    #[tokio::test]
    async fn a_timeout_kills_the_whole_process_group() {
        let s = Supervisor::new();
        let mut l = launch("sleep 30 & sleep 30; echo never");
        l.timeout = Some(Duration::from_millis(200));
        let out = s.run(l, |_, _| {}).await.unwrap();
        assert!(out.timed_out);
        assert_eq!(out.signal, Some(libc::SIGTERM));
        assert!(!out.output_tail.contains("never"));
        assert_eq!(s.total_running(), 0);
    }

    #[tokio::test]
    async fn running_means_a_live_process() {
        let s = Supervisor::new();
        let s2 = s.clone();
        let task = tokio::spawn(async move { s2.run(launch("sleep 30"), |_, _| {}).await });
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while s.running("t") == 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the run never started"
            );
            tokio::task::yield_now().await;
        }
        s.stop(Some("t"), Duration::from_secs(2)).await;
        let out = task.await.unwrap().unwrap();
        assert_eq!(out.signal, Some(libc::SIGTERM));
        assert_eq!(s.running("t"), 0);
    }

    #[test]
    fn the_tail_keeps_only_the_last_bytes() {
        let mut t = Tail::default();
        t.push(&vec![b'a'; OUTPUT_TAIL_BYTES]);
        t.push(b"end");
        let text = t.text();
        assert_eq!(text.len(), OUTPUT_TAIL_BYTES);
        assert!(text.ends_with("end"));
    }
}

#[cfg(test)]
mod exclusive_tests {
    use super::*;

    fn launch(command: &str, exclusive: bool) -> Launch {
        Launch {
            job: "x".into(),
            command: command.into(),
            stdin: None,
            env: BTreeMap::new(),
            timeout: None,
            exclusive,
        }
    }

    #[tokio::test]
    async fn an_exclusive_launch_is_refused_while_a_run_is_alive_and_nothing_starts_after_close() {
        let s = Supervisor::new();
        let s2 = s.clone();
        let first = tokio::spawn(async move { s2.run(launch("sleep 30", true), |_, _| {}).await });
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while s.running("x") == 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the run never started"
            );
            tokio::task::yield_now().await;
        }
        let second = s.run(launch("true", true), |_, _| {}).await;
        assert!(
            matches!(second, Err(LaunchError::AlreadyRunning)),
            "{second:?}"
        );
        s.close();
        let third = s.run(launch("true", false), |_, _| {}).await;
        assert!(matches!(third, Err(LaunchError::ShuttingDown)), "{third:?}");
        s.stop(None, Duration::from_secs(2)).await;
        first.await.unwrap().unwrap();
    }
}
