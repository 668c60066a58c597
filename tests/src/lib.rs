//! Helpers shared by the cross-process integration tests: building and starting the real
//! `cronstable` and `cronstable-shim` binaries on free loopback ports, a minimal HTTP client,
//! and waiting on files the test jobs write.
//!
//! Polling with a deadline is used here, and only here: these tests watch real processes on a
//! real clock, which no paused tokio clock can drive.

// Real processes run on the real clock: std's Instant is the right one here.
#![allow(clippy::disallowed_types)]

pub mod deploy;
pub mod etcd;
pub mod gossip;
pub mod lease;
pub mod netns;
pub mod partition;
pub mod usage;
pub mod webdriver;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant as StdInstant};

/// How long any wait in these tests may take before the test fails. Generous, because CI
/// machines are slow; a healthy run finishes each wait far sooner.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// The path of a workspace binary, built (once per test process) with the same cargo that runs
/// the tests, so the tests never exercise a stale binary.
pub fn binary(name: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let dir = BUILT.get_or_init(|| {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_owned();
        // Tests live in target/<profile>/deps, examples in target/<profile>/examples: the
        // binaries are in target/<profile>, built with the same profile as the caller.
        let exe = std::env::current_exe().unwrap();
        let dir = exe.parent().unwrap().parent().unwrap().to_owned();
        // `--workspace --bins` plus the caller's own kind of target, so the build resolves the
        // same features as the `cargo test --workspace` or `cargo run --example` that runs
        // this (dev-dependencies on: tokio's test-util, the coordinator's testkit). Building
        // only `-p cronstable-coordinator -p cronstable-shim --bins` resolved them without, and
        // rebuilt tokio and everything above it a second time in every clean build.
        let kind = if dir.join("examples") == exe.parent().unwrap() {
            "--examples"
        } else {
            "--tests"
        };
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "--quiet", "--workspace", "--bins", kind]);
        // Not the variables cargo sets for this test process (CARGO_MANIFEST_DIR, CARGO_PKG_*,
        // …): some build scripts (ring's) rerun when one changes, and the rebuild would then
        // replace the test binaries that nextest is running at that moment.
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if [
                "CARGO_MANIFEST_",
                "CARGO_PKG_",
                "CARGO_CRATE_",
                "CARGO_BIN_",
                "CARGO_PRIMARY_",
            ]
            .iter()
            .any(|p| key.starts_with(p))
                || key == "CARGO_TARGET_TMPDIR"
            {
                cmd.env_remove(&*key);
            }
        }
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let status = cmd
            .current_dir(&workspace)
            .status()
            .expect("running cargo build for the binaries under test");
        assert!(
            status.success(),
            "cargo build of the binaries under test failed"
        );
        dir
    });
    let path = dir.join(name);
    assert!(path.exists(), "{} was not built", path.display());
    path
}

/// A free loopback port for a listener a test is about to write into a process's config.
///
/// The port is drawn from below the kernel's ephemeral range (`ip_local_port_range`), not by
/// binding port 0 and letting go: a port handed out that way is an ephemeral port, and any
/// outgoing connection made before the process binds it (the suite makes thousands) can take
/// it, which failed CI with "Address already in use". Below that range only explicit binds
/// compete. A counter per test process, started at an offset from the pid, keeps two tests of
/// one binary from drawing the same port, and a port something else holds is skipped.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOWEST: u32 = 10_000;
    static NEXT: OnceLock<(AtomicU32, u32)> = OnceLock::new();
    let (next, span) = NEXT.get_or_init(|| {
        let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
            .unwrap_or(32_768);
        let span = ephemeral_low.saturating_sub(LOWEST);
        assert!(
            span >= 1_000,
            "ip_local_port_range starts at {ephemeral_low}: the tests need ports {LOWEST}..{} \
             outside it",
            LOWEST + 1_000
        );
        (
            AtomicU32::new(std::process::id().wrapping_mul(7_919) % span),
            span,
        )
    });
    for _ in 0..*span {
        let port = (LOWEST + next.fetch_add(1, Ordering::Relaxed) % span) as u16;
        if claim_port(port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {LOWEST}..{}", LOWEST + span);
}

/// Claims `port` for this test process's life across every test process on the machine: a
/// test that stops a coordinator and starts it again on the same port (a restart) must not
/// find that another test drew the port in between (CI once failed `rbt_01_05_06` with
/// "Address already in use" that way). A claim is an exclusive `flock` on
/// `$TMPDIR/cronstable-test-ports/<port>.lock`, held by an open file kept until the process
/// exits, when the kernel lets it go (a crashed test leaves no claim behind). Where the
/// directory cannot be used, every port counts as unclaimed.
fn claim_port(port: u16) -> bool {
    use nix::fcntl::{Flock, FlockArg};
    static HELD: Mutex<Vec<Flock<std::fs::File>>> = Mutex::new(Vec::new());
    let dir = std::env::temp_dir().join("cronstable-test-ports");
    if std::fs::create_dir_all(&dir).is_err() {
        return true;
    }
    let Ok(file) = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .open(dir.join(format!("{port}.lock")))
    else {
        return true;
    };
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => {
            HELD.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(lock);
            true
        }
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => false,
        Err(_) => true,
    }
}

/// Polls `check` until it returns `Ok`, or panics with `what` and the last `Err` (the state
/// the check saw) after [`PATIENCE`].
pub fn wait_for_state<T>(what: &str, mut check: impl FnMut() -> Result<T, String>) -> T {
    let start = StdInstant::now();
    loop {
        match check() {
            Ok(v) => return v,
            Err(state) => assert!(
                start.elapsed() < PATIENCE,
                "timed out waiting for {what}; last seen: {state}"
            ),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls `check` until it returns `Some`, or panics with `what` after [`PATIENCE`].
pub fn wait_for<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let start = StdInstant::now();
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A live process's resident memory (`VmRSS` from `/proc`), in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS")
}

/// One `kB` line of `/proc/PID/status` (`VmRSS`, `RssAnon`, `RssFile`, ...).
pub fn status_kib(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// One `ShouldRun` of a scheduled firing of `job` at `at_ms` on the coordinator at `api`, asked
/// as executor `late-asker`: a client that is not the job's shim (a gate, a retrying client).
pub fn ask_scheduled(api: &str, job: &str, at_ms: i64) -> cronstable_proto::v1::ShouldRunResponse {
    use cronstable_proto::v1 as pb;
    with_executor_client(api, |mut client| async move {
        client
            .should_run(pb::ShouldRunRequest {
                executor_id: "late-asker".into(),
                job: job.into(),
                scheduled_at_ms: at_ms,
                kind: pb::FiringKind::Scheduled as i32,
                attempt: 1,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
    })
}

/// Reports, as [`ask_scheduled`]'s executor, that it launched nothing for the scheduled firing
/// of `job` at `at_ms` (`not_launched`: it stopped between the RUN answer and the instant).
pub fn report_not_launched(api: &str, job: &str, at_ms: i64) -> Result<(), tonic::Status> {
    use cronstable_proto::v1 as pb;
    with_executor_client(api, |mut client| async move {
        client
            .report_run(pb::ReportRunRequest {
                executor_id: "late-asker".into(),
                job: job.into(),
                scheduled_at_ms: at_ms,
                attempt: 1,
                kind: pb::FiringKind::Scheduled as i32,
                event: Some(pb::report_run_request::Event::Skipped(pb::RunSkipped {
                    reason: pb::Reason::NotLaunched as i32,
                    message: "stopped before the instant".into(),
                })),
            })
            .await
            .map(|_| ())
    })
}

/// Runs `call` with an executor client of the coordinator at `api`, on a runtime of its own.
fn with_executor_client<T, F>(
    api: &str,
    call: impl FnOnce(
        cronstable_proto::v1::executor_client::ExecutorClient<tonic::transport::Channel>,
    ) -> F,
) -> T
where
    F: std::future::Future<Output = T>,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = cronstable_proto::v1::executor_client::ExecutorClient::connect(api.to_owned())
            .await
            .unwrap();
        call(client).await
    })
}

/// A crontab in `dir` with one per-second Leader job, `tick`, that appends `NODE NOMINAL_INSTANT
/// WALL_NS CATCH_UP` to a file: returns (the crontab, the file). The benchmarks judge from that
/// file, never from the system under test.
pub fn per_second_leader_job(dir: &Path) -> (PathBuf, PathBuf) {
    per_second_leader_job_with(dir, "")
}

/// [`per_second_leader_job`] with more annotation words for the job (`catchUp=all ...`).
pub fn per_second_leader_job_with(dir: &Path, annotations: &str) -> (PathBuf, PathBuf) {
    let (recorder, out) = recorder(
        dir,
        "$CRONSTABLE_NODE $CRONSTABLE_SCHEDULED_AT $(date +%s%N) ${CRONSTABLE_CATCH_UP:-0}",
    );
    let crontab = dir.join("crontab");
    std::fs::write(
        &crontab,
        format!(
            "# cronstable: name=tick clusterPolicy=Leader seconds=true {annotations}\n\
             * * * * * * {}\n",
            recorder.display()
        ),
    )
    .unwrap();
    (crontab, out)
}

/// An executable script in `dir` that appends one line, `fields` as the shell expands them, to
/// a file in `dir`: returns (the script, the file). A script, not an inline command: `%` is a
/// line break in a crontab's command field.
pub fn recorder(dir: &Path, fields: &str) -> (PathBuf, PathBuf) {
    let out = dir.join("runs");
    let script = dir.join("record.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho \"{fields}\" >> {}\n", out.display()),
    )
    .unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(&script)
        .status()
        .unwrap();
    (script, out)
}

/// What [`per_second_leader_job`]'s file says: nominal instant (Unix s) → (runs, of which
/// catch-ups).
pub fn per_second_runs(path: &Path) -> std::collections::BTreeMap<i64, (usize, usize)> {
    let mut seen = std::collections::BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap_or_default().lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let Some(Ok(t)) = fields
            .get(1)
            .map(|f| chrono::DateTime::parse_from_rfc3339(f))
        else {
            continue;
        };
        let entry: &mut (usize, usize) = seen.entry(t.timestamp()).or_default();
        entry.0 += 1;
        if fields.get(3) == Some(&"1") {
            entry.1 += 1;
        }
    }
    seen
}

/// The lines of a file, or none if it does not exist yet.
pub fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|s| s.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// A child process whose stderr is captured, killed when dropped.
pub struct Proc {
    child: Child,
    log: Arc<Mutex<String>>,
    /// What it is, for messages.
    pub name: String,
}

impl Proc {
    /// Starts `cmd`, capturing stderr (where both binaries log).
    pub fn spawn(name: &str, mut cmd: Command) -> Proc {
        cmd.stdout(Stdio::null());
        Self::spawn_logging(name, cmd)
    }

    /// [`Self::spawn`] for an interactive program (the demo): its stdout goes into the log
    /// beside stderr, and its stdin is a pipe ([`Self::take_stdin`]).
    pub fn spawn_interactive(name: &str, mut cmd: Command) -> Proc {
        cmd.stdout(Stdio::piped()).stdin(Stdio::piped());
        Self::spawn_logging(name, cmd)
    }

    fn spawn_logging(name: &str, mut cmd: Command) -> Proc {
        cmd.stderr(Stdio::piped()).env("RUST_LOG", "info");
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        let log = Arc::new(Mutex::new(String::new()));
        let stderr = child.stderr.take().unwrap();
        let drain = |stream: Box<dyn std::io::Read + Send>, sink: Arc<Mutex<String>>| {
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let mut l = sink.lock().unwrap();
                    l.push_str(&line);
                    l.push('\n');
                }
            });
        };
        drain(Box::new(stderr), log.clone());
        if let Some(stdout) = child.stdout.take() {
            drain(Box::new(stdout), log.clone());
        }
        Proc {
            child,
            log,
            name: name.into(),
        }
    }

    /// Its stdin, once, when it was started by [`Self::spawn_interactive`].
    pub fn take_stdin(&mut self) -> Option<std::process::ChildStdin> {
        self.child.stdin.take()
    }

    /// Everything it logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits until its log contains `needle`; on timeout, fails showing the log as it is then.
    pub fn wait_log(&self, needle: &str) {
        let start = StdInstant::now();
        while !self.log().contains(needle) {
            assert!(
                start.elapsed() < PATIENCE,
                "timed out waiting for {} to log {needle:?}; its log:\n{}",
                self.name,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends a signal.
    pub fn signal(&self, sig: i32) {
        assert!(
            send_signal(self.child.id(), sig),
            "kill -{sig} {} failed",
            self.child.id()
        );
    }

    /// Waits for it to exit and returns its status code.
    pub fn wait_exit(&mut self) -> Option<i32> {
        let start = StdInstant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                start.elapsed() < PATIENCE,
                "{} did not exit; log:\n{}",
                self.name,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// Sends `sig` to `pid` with kill(1): the workspace forbids unsafe code, which libc::kill needs.
pub fn send_signal(pid: u32, sig: i32) -> bool {
    Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A coordinator on free ports.
pub struct Coordinator {
    /// The process.
    pub proc: Proc,
    /// Its gRPC address, `http://127.0.0.1:PORT`.
    pub api: String,
    /// Its HTTP address.
    pub web: SocketAddr,
    /// The config file.
    pub config: PathBuf,
}

impl Coordinator {
    /// Starts a coordinator with election off on free ports, in `dir`.
    pub fn start(dir: &Path) -> Coordinator {
        Self::start_named(dir, "coordinator", "")
    }

    /// [`Self::start`] with `extra` YAML appended to the config: keys under `web:` when
    /// indented two spaces, top-level sections (`notify:`, `jobs:`) when not.
    pub fn start_extra(dir: &Path, extra: &str) -> Coordinator {
        Self::start_named(dir, "coordinator", extra)
    }

    /// Starts a coordinator on free ports from `dir/NAME.yaml`, which holds the listeners and
    /// then `extra` (further top-level config sections, e.g. `jobs:`).
    pub fn start_named(dir: &Path, name: &str, extra: &str) -> Coordinator {
        Self::start_named_in(Command::new(binary("cronstable")), dir, name, extra)
    }

    /// [`Self::start_named`] with `program` (to set its environment, say).
    pub fn start_named_in(program: Command, dir: &Path, name: &str, extra: &str) -> Coordinator {
        let (api_port, web_port) = (free_port(), free_port());
        let config = dir.join(format!("{name}.yaml"));
        std::fs::write(
            &config,
            format!(
                "api:\n  listen: 127.0.0.1:{api_port}\nweb:\n  listen: 127.0.0.1:{web_port}\n{extra}"
            ),
        )
        .unwrap();
        Self::start_in(
            program,
            config,
            format!("http://127.0.0.1:{api_port}"),
            ([127, 0, 0, 1], web_port).into(),
        )
    }

    /// Starts a coordinator from an existing config file.
    pub fn start_with(config: PathBuf, api: String, web: SocketAddr) -> Coordinator {
        Self::start_in(Command::new(binary("cronstable")), config, api, web)
    }

    /// Starts a coordinator with `program` (the `cronstable` binary, possibly behind a wrapper
    /// such as `ip netns exec`) and an existing config file.
    pub fn start_in(
        mut cmd: Command,
        config: PathBuf,
        api: String,
        web: SocketAddr,
    ) -> Coordinator {
        cmd.arg("coordinator").arg("--config").arg(&config);
        // Webhooks honour the proxy variables; a proxy set for the machine (to reach a
        // package registry, say) must not carry the tests' loopback deliveries.
        if std::env::var_os("NO_PROXY").is_none() && std::env::var_os("no_proxy").is_none() {
            cmd.env("NO_PROXY", "127.0.0.1,localhost,::1");
        }
        let proc = Proc::spawn("coordinator", cmd);
        proc.wait_log("coordinator listening");
        wait_for("the coordinator's HTTP API", || {
            http(web, "GET", "/healthz").ok()
        });
        Coordinator {
            proc,
            api,
            web,
            config,
        }
    }
    /// Sends SIGHUP and waits until the coordinator logs that this reload is over, applied or
    /// refused. Returns the log lines of this reload; panics if the coordinator stops
    /// answering.
    pub fn reload(&self) -> String {
        /// What the coordinator logs when a reload is over, applied or refused.
        const DONE: [&str; 2] = ["config reloaded", "the running config stays"];
        let before = self.proc.log();
        let seen = |log: &str| DONE.iter().map(|d| log.matches(d).count()).sum::<usize>();
        let base = seen(&before);
        self.proc.signal(1);
        wait_for_state("the reload to finish", || {
            let log = self.proc.log();
            if seen(&log) > base {
                Ok(log[before.len()..].to_owned())
            } else if !http(self.web, "GET", "/healthz").is_ok_and(|r| r.status == 200) {
                Err(format!(
                    "the coordinator stopped answering after SIGHUP; its log:\n{log}"
                ))
            } else {
                Err(log[before.len()..].to_owned())
            }
        })
    }
}

/// The wall clock in Unix milliseconds, as a shim names a firing's instant.
#[allow(clippy::disallowed_methods)] // a test names real instants for a real coordinator
pub fn now_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970");
    i64::try_from(since.as_millis()).expect("a clock before the year 292 million")
}

/// A `RegisterJobs` call of `jobs` under `executor_id` to the coordinator at `api`, with
/// `token` as its bearer token (none: no `authorization` metadata). A connection that fails is
/// `UNAVAILABLE`.
pub async fn register_jobs(
    api: &str,
    executor_id: &str,
    jobs: Vec<cronstable_proto::v1::JobDefinition>,
    token: Option<&str>,
) -> Result<(), tonic::Status> {
    use cronstable_proto::v1 as pb;
    let mut client = pb::executor_client::ExecutorClient::connect(api.to_owned())
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let mut request = tonic::Request::new(pb::RegisterJobsRequest {
        executor_id: executor_id.into(),
        jobs,
        instance_id: format!("{executor_id}-1"),
        pid: 4101,
    });
    if let Some(token) = token {
        let value = format!("Bearer {token}")
            .parse()
            .map_err(|_| tonic::Status::invalid_argument("a token that is no header value"))?;
        request.metadata_mut().insert("authorization", value);
    }
    client.register_jobs(request).await.map(|_| ())
}

/// `POST /jobs/<job>/start` on `web`, asked again while the answer is 503: a shim registers its
/// jobs before it opens the Watch stream that carries manual starts, so a start asked right
/// after the registration can find no executor connected yet. Any other answer is returned.
pub fn start_job(web: SocketAddr, job: &str) -> Response {
    wait_for(&format!("the executor of {job} to be connected"), || {
        http(web, "POST", &format!("/jobs/{job}/start"))
            .ok()
            .filter(|r| r.status != 503)
    })
}

/// Waits until every node's coordinator holds a registration of `jobs` jobs and all hold the
/// same job-set ID. Until then an "all agreed" view can still be the agreement on the empty set
/// from before the shims registered, and the rolling change that follows may elect another
/// node for a moment (GSP-20).
pub fn wait_same_job_set(nodes: &[Coordinator], jobs: usize) {
    wait_for_state("every shim registered the same job set", || {
        let mut ids = std::collections::BTreeSet::new();
        for node in nodes {
            let r = http(node.web, "GET", "/job-set-id").map_err(|e| e.to_string())?;
            let v = r.json();
            if v["jobs"] != jobs {
                return Err(format!("{:?} holds {v}", node.web));
            }
            ids.insert(v["job_set_id"].to_string());
        }
        (ids.len() == 1)
            .then_some(())
            .ok_or(format!("job sets {ids:?}"))
    })
}

/// Starts a shim for `crontab` against `coordinator`.
pub fn start_shim(crontab: &Path, coordinator: &str, extra: &[&str]) -> Proc {
    let mut cmd = Command::new(binary("cronstable-shim"));
    cmd.arg("--crontab")
        .arg(crontab)
        .arg("--coordinator")
        .arg(coordinator)
        .args(extra);
    Proc::spawn("shim", cmd)
}

/// An HTTP response.
#[derive(Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The status line and headers, as received.
    pub head: String,
    /// The body.
    pub body: String,
}

impl Response {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// A minimal HTTP/1.1 request (no dependencies, `Connection: close`).
pub fn http(addr: SocketAddr, method: &str, path: &str) -> std::io::Result<Response> {
    http_with(addr, method, path, &[])
}

/// [`http`] with extra request headers.
pub fn http_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<Response> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    // A `Host` among `headers` stands in for the address (a browser's view of a name).
    let host = if headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        String::new()
    } else {
        format!("Host: {addr}\r\n")
    };
    write!(
        s,
        "{method} {path} HTTP/1.1\r\n{host}{extra}Content-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad response: {raw:?}")))?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Ok(Response {
        status,
        head: head.to_owned(),
        body,
    })
}

pub(crate) fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// A local webhook receiver: every POST body, in order, on a channel. It answers the first
/// `fail_first` requests with 503 to exercise the retries.
pub fn webhook_receiver(
    fail_first: usize,
) -> (String, std::sync::mpsc::Receiver<serde_json::Value>) {
    let (url, raw) = webhook_deliveries(fail_first);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for d in raw {
            if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&d.body)
                && tx.send(v).is_err()
            {
                return;
            }
        }
    });
    (url, rx)
}

/// One webhook delivery as it arrived: its headers (names lowercased) and its exact body.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// `(name, value)`, names lowercased, in order.
    pub headers: Vec<(String, String)>,
    /// The body bytes.
    pub body: Vec<u8>,
}

impl Delivery {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// [`webhook_receiver`] that hands over each accepted delivery whole, headers included.
pub fn webhook_deliveries(fail_first: usize) -> (String, std::sync::mpsc::Receiver<Delivery>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = 0;
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut headers = Vec::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
                }
            }
            let length = headers
                .iter()
                .find(|(n, _)| n == "content-length")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            seen += 1;
            let status = if seen <= fail_first {
                "503 Service Unavailable"
            } else {
                "204 No Content"
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            if seen > fail_first && tx.send(Delivery { headers, body }).is_err() {
                return;
            }
        }
    });
    (url, rx)
}

/// Runs `cmd`'s program under libfaketime with its wall clock `offset` from the real one
/// (`+5s`, `+0.5s`), by preloading the library rather than through the `faketime` wrapper: the
/// wrapper forks the program and does not pass signals on, so stopping it would leave the
/// program running. NO_FAKE_STAT keeps file times the store's, as on a host whose clock is
/// really off. Panics when libfaketime is not installed (`apt-get install faketime`).
pub fn with_faketime(cmd: &mut Command, offset: &str) {
    const CANDIDATES: [&str; 3] = [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1",
    ];
    let lib = CANDIDATES
        .iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap_or_else(|| {
            panic!("libfaketime not found in {CANDIDATES:?}: apt-get install faketime")
        });
    cmd.env("LD_PRELOAD", lib)
        .env("FAKETIME", offset)
        .env("NO_FAKE_STAT", "1");
}

/// The `cronstable` binary under libfaketime at `offset` (`+5s`, `-1.4s`), file times the
/// store's ([`with_faketime`]).
pub fn skewed_cronstable(offset: &str) -> Command {
    let mut cmd = Command::new(binary("cronstable"));
    with_faketime(&mut cmd, offset);
    cmd
}

#[cfg(test)]
mod port_tests {
    use std::os::unix::process::CommandExt;

    use super::*;

    #[test]
    fn a_port_claimed_by_another_process_or_drawn_already_is_not_handed_out() {
        // Ports below the range free_port draws from, so no real test is holding them.
        let (held, drawn) = (9_011u16, 9_012u16);
        let lock = std::env::temp_dir()
            .join("cronstable-test-ports")
            .join(format!("{held}.lock"));
        std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
        std::fs::write(&lock, "").unwrap();
        // Another process holds the claim (util-linux flock(1) takes the same kind of lock)
        // and says so once it has it.
        let ready = lock.with_extension(format!("ready-{}", std::process::id()));
        let _ = std::fs::remove_file(&ready);
        // `--close`: only flock(1) itself holds the lock, so it goes when flock is killed.
        let mut other = Command::new("flock")
            .arg("--close")
            .arg(&lock)
            .args(["sh", "-c", &format!("touch {}; sleep 30", ready.display())])
            .process_group(0)
            .spawn()
            .expect("flock(1) from util-linux");
        wait_for("the other process's claim", || ready.exists().then_some(()));
        let _ = std::fs::remove_file(&ready);
        assert!(!claim_port(held), "another process holds it");
        // The whole group, so the sleep does not outlive the test.
        Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", other.id())])
            .status()
            .unwrap();
        other.wait().unwrap();
        wait_for("the claim to go with its process", || {
            claim_port(held).then_some(())
        });
        assert!(claim_port(drawn));
        assert!(!claim_port(drawn), "a port drawn once is not drawn again");
    }
}
