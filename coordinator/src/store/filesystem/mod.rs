//! The filesystem lease store (LSE-FS-01..12): a flock-guarded, fence-counted TTL lease in one
//! small JSON file on a shared POSIX mount.
//!
//! # Layout
//!
//! ```text
//! <path>/                                   cluster.filesystem.path (the shared mount)
//!   .cronstable-store                       the operator's marker (`cronstable store init`)
//!   <deploymentId or "default">/            cluster.filesystem.deploymentId
//!     leases/
//!       .lock-probe-<token>                 the lock-fidelity probe's scratch file (removed)
//!       <electionName>.json                 the lease, e.g. leases/cluster/leader.json
//!       <electionName>.json.lock            the flock every read-modify-write holds
//! ```
//!
//! The lease file is `{"holder": "<nodeName>#<12-hex token>" | null, "fence": n, "expiryMs": t}`.
//! It is replaced atomically (write a temporary file, fsync, rename) while the `.lock` file is
//! held with `flock(LOCK_EX)`, so a reader never sees half a lease and a crash mid-write leaves
//! the previous one. Lease files are never deleted (LSE-FS-08).
//!
//! # Rules
//!
//! - The holder is `<nodeName>#<token>`, the token random per process (LSE-FS-02): a second
//!   process with the same name, or this daemon restarted, cannot renew this process's lease.
//! - The holder renews every `max(1 s, ttl/3)`, writing expiry = now + ttl (LSE-FS-03); the
//!   driver demotes it 1 s before that on its monotonic clock.
//! - A challenger takes over only once the expiry is a further 1 s in the past (LSE-FS-04),
//!   and bumps the fence counter (LSE-FS-01). Both sides are read on the store's clock: the
//!   holder writes its measured offset from the store beside the expiry (`storeOffsetMs`),
//!   and the challenger subtracts its own, so two nodes up to [`MAX_CLOCK_SKEW`] off on
//!   opposite sides (3 s apart) still keep the 2 s between the holder's last moment and the
//!   takeover ([`decide_round`]).
//! - Every round first measures this node's clock against the store's: it rewrites a probe file
//!   of its own (`<path>/<deploymentId>/leases/.clock-<nodeName>`) under the lock and compares
//!   the file's modification time, which the store's side sets, with its own wall clock. Off by
//!   more than [`MAX_CLOCK_SKEW`], the node neither takes nor renews the lease (it stands down,
//!   says why in `/cluster`'s `last_error`, and logs once when the skew appears and once when it
//!   clears). A store whose clients set file times themselves hides this; run NTP regardless.
//! - A graceful release clears the holder (keeping the fence), so a challenger wins at once.
//! - Every file operation runs on a blocking thread bounded by the driver's round timeout, so an
//!   unresponsive mount cannot wedge the runtime; while one is stuck, later rounds wait for it
//!   (and time out) instead of piling up threads behind it.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::clock;
use crate::config::cluster::{FilesystemConfig, Topology};
use crate::lease::{
    LeaseError, LeaseObservation, LeaseStore, LeaseTiming, RebootRanStore, SAFETY_MARGIN,
};
use probe::ProbeError;

/// The lease file's contents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseFile {
    /// `<nodeName>#<token>`, or `None` once released.
    pub holder: Option<String>,
    /// Bumped on every takeover; never goes down.
    pub fence: u64,
    /// When the lease expires, Unix ms on the holder's clock.
    pub expiry_ms: i64,
    /// The holder's clock minus the store's when it wrote this record (ms), as its round
    /// measured it: a challenger reads the expiry on the store's clock, `expiry_ms -
    /// store_offset_ms`, so the skew between two nodes cancels out. Absent in records written
    /// before it existed (read as 0: the expiry on the holder's clock, as those nodes did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_offset_ms: Option<i64>,
}

/// How far this node's wall clock may be from the store's (its file times) before the node
/// stops leading. Two holders can overlap only past about 2 s of skew between two nodes (the
/// expiry margin); 1.5 s leaves room for stores that keep file times to the whole second.
pub const MAX_CLOCK_SKEW: Duration = Duration::from_millis(1500);

/// How far back within [`MAX_CLOCK_SKEW`] a node that stood down for skew must come before it
/// may lead again. Without it a clock that hovers at the bound (NTP slewing it back, a store
/// that rounds file times; a node at +1.5 s measures 1,501 to 1,503 ms) could flip the node
/// between standing down and not from round to round, a log line each time.
pub const SKEW_HYSTERESIS: Duration = Duration::from_millis(500);

/// Why this node must not lead when its clock reads `local_ms` and the store's `store_ms`.
/// `standing_down`: it already stands down for skew, so it must come back within
/// [`MAX_CLOCK_SKEW`] − [`SKEW_HYSTERESIS`] first.
pub fn skew_refusal(
    local_ms: i64,
    store_ms: i64,
    probe: &Path,
    standing_down: bool,
) -> Option<String> {
    let skew_ms = local_ms.saturating_sub(store_ms);
    let bound = if standing_down {
        MAX_CLOCK_SKEW.saturating_sub(SKEW_HYSTERESIS)
    } else {
        MAX_CLOCK_SKEW
    };
    if skew_ms.unsigned_abs() <= bound.as_millis() as u64 {
        return None;
    }
    let way = if skew_ms > 0 { "ahead of" } else { "behind" };
    Some(format!(
        "clock skew: this node's clock is {:.1} s {way} the store's (the modification time of \
         {}); past {:.1} s two holders could overlap, so this node does not lead until its clock \
         is back within {:.1} s: check NTP",
        skew_ms.unsigned_abs() as f64 / 1000.0,
        probe.display(),
        MAX_CLOCK_SKEW.as_secs_f64(),
        MAX_CLOCK_SKEW.saturating_sub(SKEW_HYSTERESIS).as_secs_f64()
    ))
}

/// Rewrites `probe` and returns its modification time (Unix ms): the store's clock now.
fn store_clock(probe: &Path) -> Result<i64, LeaseError> {
    let mut f = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(probe)
        .map_err(|e| store_err("cannot write the clock probe", probe, e))?;
    f.write_all(b"clock probe\n")
        .map_err(|e| store_err("cannot write the clock probe", probe, e))?;
    let modified = f
        .metadata()
        .and_then(|m| m.modified())
        .map_err(|e| store_err("cannot read the clock probe's time", probe, e))?;
    let since = modified
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Ok(i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
}

/// A filesystem lease contender.
#[derive(Debug)]
pub struct FilesystemStore {
    root: PathBuf,
    leases: PathBuf,
    file: PathBuf,
    /// This node's clock probe (see the module docs).
    clock_probe: PathBuf,
    /// The skew refusal of the last round, to log only its changes.
    skewed: Option<String>,
    /// This node's clock minus the store's at the last round that measured it (ms).
    skew_ms: Option<i64>,
    election_name: String,
    node_name: String,
    holder: String,
    ttl: Duration,
    topology: Topology,
    /// The deployment (`deploymentId`, `default` when unset) the store's marker must name,
    /// when this store must carry one (see [`marker`]); `None` under `topology: single-node`.
    marked_for: Option<String>,
    /// Why the store's marker refused this node at the last check, to log only its changes
    /// and to publish on `/cluster`.
    unmarked: Option<String>,
    timing: LeaseTiming,
    /// Held by the blocking file operation in flight, until it returns (even when the round
    /// that started it was cancelled): the next operation waits for it rather than piling up
    /// threads behind an unresponsive mount, and the driver's timeout bounds that wait.
    inflight: Arc<tokio::sync::Mutex<()>>,
}

/// A per-process holder token: 12 hex digits.
fn token() -> String {
    let mut b = [0u8; 6];
    if getrandom::fill(&mut b).is_err() {
        // No OS randomness: fall back to the pid and the time, still distinct per process.
        let seed = (u64::from(std::process::id()) << 32) ^ clock::now_ms().unsigned_abs();
        b.copy_from_slice(&seed.to_be_bytes()[2..]);
    }
    hex::encode(b)
}

/// Whether a store under `topology` must carry the operator's marker: wherever it may be
/// shared, that is everywhere but `single-node` (and `auto` where it means single-node).
fn needs_marker(topology: Topology) -> bool {
    match topology {
        Topology::SingleNode => false,
        Topology::Shared => true,
        Topology::Auto => cfg!(target_os = "linux"),
    }
}

/// The cadence for a ttl: renew every max(1 s, ttl/3); a round may take at most that long.
pub fn timing(ttl_secs: u64) -> LeaseTiming {
    let ttl = Duration::from_secs(ttl_secs);
    let every = (ttl / 3).max(Duration::from_secs(1));
    LeaseTiming {
        round_every: every,
        round_timeout: every,
        duration: ttl,
    }
}

impl FilesystemStore {
    /// A contender for `node_name` configured by `config`.
    pub fn new(config: &FilesystemConfig, node_name: &str) -> Self {
        let deployment = config.deployment_id.as_deref().unwrap_or("default");
        let leases = config.path.join(deployment).join("leases");
        let file = leases.join(format!("{}.json", config.election_name));
        Self {
            root: config.path.clone(),
            clock_probe: leases.join(format!(".clock-{node_name}")),
            skewed: None,
            skew_ms: None,
            leases,
            file,
            election_name: config.election_name.clone(),
            node_name: node_name.to_owned(),
            holder: format!("{node_name}#{}", token()),
            ttl: Duration::from_secs(config.ttl),
            topology: config.topology,
            marked_for: needs_marker(config.topology).then(|| deployment.to_owned()),
            unmarked: None,
            timing: timing(config.ttl),
            inflight: Arc::default(),
        }
    }

    /// The lease file's path.
    pub fn lease_path(&self) -> &Path {
        &self.file
    }

    /// This process's holder string, `<nodeName>#<token>`.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Runs `op` on a blocking thread, after any earlier one has returned.
    async fn blocking<T: Send + 'static>(
        &self,
        op: impl FnOnce() -> Result<T, LeaseError> + Send + 'static,
    ) -> Result<T, LeaseError> {
        let turn = self.inflight.clone().lock_owned().await;
        let task = tokio::task::spawn_blocking(move || {
            let r = op();
            drop(turn);
            r
        });
        task.await
            .map_err(|e| LeaseError::Store(format!("file operation panicked: {e}")))?
    }

    /// The marker check a round runs first, on its blocking thread: always `Ok` where the
    /// store needs no marker.
    fn marker_check(&self) -> impl FnOnce() -> Result<(), marker::MarkerError> + Send + 'static {
        let check = self.marked_for.clone().map(|d| (self.root.clone(), d));
        move || {
            check.map_or(Ok(()), |(root, deployment)| {
                marker::verify(&root, &deployment)
            })
        }
    }

    /// A round's outcome after its marker check: a refusal is a store error (this node cannot
    /// see the shared store, so its quorum and leadership lapse), logged once per change.
    fn marked<T>(&mut self, round: Result<T, marker::MarkerError>) -> Result<T, LeaseError> {
        match round {
            Ok(r) => {
                if self.unmarked.take().is_some() {
                    tracing::info!(
                        "cluster: the filesystem store at {} carries its marker again; this node \
                         elects there again",
                        self.root.display()
                    );
                }
                Ok(r)
            }
            Err(e) => {
                let why = format!("not this node's store: {e}");
                if self.unmarked.as_deref() != Some(why.as_str()) {
                    tracing::error!(
                        "cluster: {why}; this node stops leading at once and elects again when \
                         the marker is back"
                    );
                }
                self.unmarked = Some(why.clone());
                Err(LeaseError::Store(why))
            }
        }
    }

    fn observation(&self, lease: &LeaseFile, held_by_me: bool) -> LeaseObservation {
        let holder = lease.holder.as_deref().map(|h| strip_token(h).to_owned());
        let mut block = Map::new();
        block.insert(
            "path".into(),
            Value::String(self.root.display().to_string()),
        );
        block.insert(
            "electionName".into(),
            Value::String(self.election_name.clone()),
        );
        block.insert("identity".into(), Value::String(self.node_name.clone()));
        block.insert(
            "holder".into(),
            holder.clone().map_or(Value::Null, Value::String),
        );
        block.insert("fence".into(), Value::from(lease.fence));
        block.insert(
            "expiry".into(),
            lease
                .holder
                .as_ref()
                .and_then(|_| chrono::DateTime::from_timestamp_millis(lease.expiry_ms))
                .map_or(Value::Null, |t| Value::String(t.to_rfc3339())),
        );
        LeaseObservation {
            held_by_me,
            holder,
            fence: held_by_me.then(|| format!("fence:{}", lease.fence)),
            expiry_ms: lease.holder.as_ref().map(|_| lease.expiry_ms),
            // The holder rewrites the expiry at every renewal.
            renewal: lease.holder.as_ref().map(|_| lease.expiry_ms),
            block,
            valid_for: None,
        }
    }
}

/// The display name of a holder: the token stripped (LSE-FS-02).
pub fn strip_token(holder: &str) -> &str {
    holder.rsplit_once('#').map_or(holder, |(name, _)| name)
}

/// One round's decision on the lease read under the lock, at wall-clock `now_ms`, this node's
/// clock being `offset_ms` ahead of the store's (as this round measured it). Returns the lease
/// to write (if any) and whether `me` holds it afterwards.
///
/// Times are compared on the store's clock, so the skew between two nodes cancels out: the
/// holder stops leading [`SAFETY_MARGIN`] before its expiry (on its monotonic clock), and a
/// challenger takes over only a margin after it, 2 s apart on the store's clock whatever the
/// two nodes' clocks say, less the error of the two offsets' measurements (the store's file
/// time against a wall clock read under the lock). Each node's own offset stays within
/// [`MAX_CLOCK_SKEW`] or it does not lead.
pub fn decide_round(
    current: Option<&LeaseFile>,
    me: &str,
    now_ms: i64,
    offset_ms: i64,
    ttl: Duration,
) -> (Option<LeaseFile>, bool) {
    let expiry_ms = now_ms.saturating_add(millis(ttl));
    let margin = millis(SAFETY_MARGIN);
    let mine = |fence| LeaseFile {
        holder: Some(me.to_owned()),
        fence,
        expiry_ms,
        store_offset_ms: Some(offset_ms),
    };
    match current {
        Some(l) if l.holder.as_deref() == Some(me) => (Some(mine(l.fence)), true),
        // Held by someone else and not yet a margin past its expiry, both on the store's clock:
        // this node's reading less its offset, the holder's expiry less the holder's.
        Some(l)
            if l.holder.is_some()
                && now_ms.saturating_sub(offset_ms)
                    < l.expiry_ms
                        .saturating_sub(l.store_offset_ms.unwrap_or(0))
                        .saturating_add(margin) =>
        {
            (None, false)
        }
        other => (Some(mine(other.map_or(0, |l| l.fence) + 1)), true),
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

pub(super) fn store_err(what: &str, path: &Path, e: impl std::fmt::Display) -> LeaseError {
    LeaseError::Store(format!("{what} {}: {e}", path.display()))
}

/// Opens (creating) `file`'s lock file, `<file>.lock`; returns it with its path.
pub(super) fn open_lock_file(file: &Path) -> Result<(File, PathBuf), LeaseError> {
    let lock_path = PathBuf::from(format!("{}.lock", file.display()));
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(|e| store_err("cannot open", &lock_path, e))?;
    Ok((f, lock_path))
}

/// Takes the lease's lock (blocking: the holder keeps it only for one read-modify-write).
pub(super) fn lock(file: &Path) -> Result<Flock<File>, LeaseError> {
    let (f, lock_path) = open_lock_file(file)?;
    Flock::lock(f, FlockArg::LockExclusive)
        .map_err(|(_, e)| store_err("cannot lock", &lock_path, e))
}

fn read(file: &Path) -> Result<Option<LeaseFile>, LeaseError> {
    match std::fs::read(file) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| store_err("unreadable lease file", file, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(store_err("cannot read", file, e)),
    }
}

fn write(file: &Path, lease: &LeaseFile) -> Result<(), LeaseError> {
    let tmp = PathBuf::from(format!("{}.tmp", file.display()));
    let body = serde_json::to_vec(lease).map_err(|e| store_err("cannot encode", file, e))?;
    let mut f = File::create(&tmp).map_err(|e| store_err("cannot write", &tmp, e))?;
    f.write_all(&body)
        .and_then(|()| f.sync_all())
        .map_err(|e| store_err("cannot write", &tmp, e))?;
    std::fs::rename(&tmp, file).map_err(|e| store_err("cannot replace", file, e))
}

impl LeaseStore for FilesystemStore {
    fn backend_name(&self) -> &'static str {
        "filesystem"
    }

    fn timing(&self) -> LeaseTiming {
        self.timing
    }

    async fn prepare(&mut self) -> Result<(), String> {
        let (root, leases, file) = (self.root.clone(), self.leases.clone(), self.file.clone());
        let token = self
            .holder
            .rsplit('#')
            .next()
            .unwrap_or_default()
            .to_owned();
        let sniff_mounts = cfg!(target_os = "linux") && self.topology != Topology::SingleNode;
        let marked_for = self.marked_for.clone();
        let probed = self
            .blocking(move || {
                let dir = file.parent().unwrap_or(&leases).to_owned();
                let io = |path: &Path, e: std::io::Error| ProbeError::Io {
                    path: path.display().to_string(),
                    why: e.to_string(),
                };
                let result = (|| {
                    // The store directory is the operator's (a mount point, usually): never
                    // created, so a missing mount is a refusal, not a lease on local disk.
                    match std::fs::metadata(&root) {
                        Ok(m) if m.is_dir() => {}
                        Ok(_) => {
                            return Err(ProbeError::Io {
                                path: root.display().to_string(),
                                why: "not a directory".into(),
                            });
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                            return Err(ProbeError::Missing(root.display().to_string()));
                        }
                        Err(e) => return Err(io(&root, e)),
                    }
                    let mounts = if sniff_mounts {
                        let path = Path::new("/proc/mounts");
                        let mounts = std::fs::read_to_string(path).map_err(|e| io(path, e))?;
                        probe::own_mount(&root, &mounts)?;
                        Some(mounts)
                    } else {
                        None
                    };
                    // Before anything is written: an unmarked store stays untouched.
                    if let Some(deployment) = &marked_for {
                        marker::verify(&root, deployment)?;
                    }
                    std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
                    probe::probe(&dir, &token, mounts.as_deref())
                })();
                Ok(result)
            })
            .await
            .map_err(|e| {
                format!(
                    "cluster.backend filesystem: refusing to elect over {}: {e}",
                    self.root.display()
                )
            })?;
        probed.map_err(|e| {
            format!(
                "cluster.backend filesystem: refusing to elect over {}: {e}",
                self.root.display()
            )
        })?;
        tracing::info!(
            "cluster: filesystem election ready at {} (election={}, identity={}, ttl={}s)",
            self.root.display(),
            self.election_name,
            self.holder,
            self.ttl.as_secs()
        );
        Ok(())
    }

    async fn campaign(&mut self) -> Result<LeaseObservation, LeaseError> {
        let (file, me, ttl) = (self.file.clone(), self.holder.clone(), self.ttl);
        let probe = self.clock_probe.clone();
        let standing_down = self.skewed.is_some();
        let marker = self.marker_check();
        let round = self
            .blocking(move || {
                if let Err(refused) = marker() {
                    return Ok(Err(refused));
                }
                let _guard = lock(&file)?;
                let store_ms = store_clock(&probe)?;
                // The wall clock is read under the lock, right before the decision it feeds.
                let now_ms = clock::now_ms();
                let skew_ms = now_ms.saturating_sub(store_ms);
                if let Some(why) = skew_refusal(now_ms, store_ms, &probe, standing_down) {
                    return Ok(Ok((skew_ms, Err(why))));
                }
                let current = read(&file)?;
                let (next, held) = decide_round(current.as_ref(), &me, now_ms, skew_ms, ttl);
                if let Some(next) = &next {
                    write(&file, next)?;
                }
                Ok(Ok((
                    skew_ms,
                    Ok((next.or(current).unwrap_or_default(), held)),
                )))
            })
            .await?;
        let (skew_ms, round) = self.marked(round)?;
        self.skew_ms = Some(skew_ms);
        match round {
            Ok((lease, held)) => {
                if self.skewed.take().is_some() {
                    tracing::info!(
                        "cluster: this node's clock is back within {:?} of the filesystem store's; it may lead again",
                        MAX_CLOCK_SKEW
                    );
                }
                Ok(self.observation(&lease, held))
            }
            Err(why) => {
                if self.skewed.is_none() {
                    tracing::error!("cluster: {why}");
                }
                self.skewed = Some(why.clone());
                Err(LeaseError::StandDown(why))
            }
        }
    }

    fn clock_skew_ms(&self) -> Option<i64> {
        self.skew_ms
    }

    async fn follow(&mut self) -> Result<LeaseObservation, LeaseError> {
        let file = self.file.clone();
        let marker = self.marker_check();
        let lease = self
            .blocking(move || {
                if let Err(refused) = marker() {
                    return Ok(Err(refused));
                }
                let _guard = lock(&file)?;
                read(&file).map(Ok)
            })
            .await?;
        let lease = self.marked(lease)?;
        Ok(self.observation(&lease.unwrap_or_default(), false))
    }

    fn store_verified(&self) -> Option<bool> {
        self.marked_for.as_ref().map(|_| self.unmarked.is_none())
    }

    async fn release(&mut self) -> Result<(), LeaseError> {
        let (file, me) = (self.file.clone(), self.holder.clone());
        self.blocking(move || {
            let _guard = lock(&file)?;
            match read(&file)? {
                Some(l) if l.holder.as_deref() == Some(me.as_str()) => write(
                    &file,
                    &LeaseFile {
                        holder: None,
                        fence: l.fence,
                        expiry_ms: 0,
                        store_offset_ms: None,
                    },
                ),
                _ => Ok(()),
            }
        })
        .await
    }
}

#[tonic::async_trait]
impl RebootRanStore for FilesystemStore {
    async fn read_reboot_ran(
        &mut self,
        job_set_id: &str,
    ) -> Result<std::collections::BTreeSet<String>, LeaseError> {
        let stream = reboot::stream_path(self.leases.parent().unwrap_or(&self.root));
        let id = job_set_id.to_owned();
        self.blocking(move || reboot::read_jobs(&stream, &id)).await
    }

    async fn record_reboot_ran(
        &mut self,
        job_set_id: &str,
        jobs: &std::collections::BTreeSet<String>,
    ) -> Result<(), LeaseError> {
        let stream = reboot::stream_path(self.leases.parent().unwrap_or(&self.root));
        let (id, jobs, root) = (job_set_id.to_owned(), jobs.clone(), self.root.clone());
        self.blocking(move || {
            // Only below the store directory: a missing mount must not become a local store.
            if !root.is_dir() {
                return Err(store_err(
                    "the store directory is missing (cronstable never creates it):",
                    &root,
                    "not found",
                ));
            }
            reboot::append_jobs(&stream, &id, &jobs)
        })
        .await
    }
}

#[cfg(test)]
mod tests;

// Per-firing claims in the shared directory.
pub mod claims;
// Retry handoffs in the shared directory (RTY-04).
pub mod handoff;
pub mod marker;
// Whether the shared directory is what it claims to be (mounted, shared, writable).
pub mod probe;
// The `@reboot` "already ran" records in the shared directory.
pub mod reboot;
// The run records of jobs with `expect:` in the shared directory.
pub mod runs;
