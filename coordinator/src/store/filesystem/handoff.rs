//! Handoff records on the filesystem store: one small JSON file per handed-off firing.
//!
//! ```text
//! <path>/<deploymentId or "default">/cluster/handoff/<job>@<scheduledAtMs>.json
//! ```
//!
//! A record is written atomically (a uniquely named temporary file in the same directory,
//! fsync, rename over the final name), so a reader never sees half of one. A claim renames the
//! file to `<job>@<scheduledAtMs>.json.claimed-<token>`: `rename(2)` of one source succeeds for
//! exactly one caller, so two lease holders (before and after a takeover) cannot both resume the
//! same sequence, and the claimed name says whose claim it is, so a claimer whose rename timed
//! out can look for its own name. The claimed file is deleted once the executor acted on it, or
//! renamed back to the record's name when the claim is released. Removal renames to a hidden
//! unique name first, so exactly one remover wins there too. Job names are letters, digits,
//! `.`, `_` and `-`, and tokens are made of the same, so both are safe as file names. Every file
//! operation runs on a blocking thread; the caller bounds it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::config::cluster::FilesystemConfig;
use crate::handoff::{HandoffError, HandoffRecord, HandoffStore, Handoffs, Pending};

/// What separates a record's file name from the claim token in a claimed file's name.
const CLAIMED: &str = ".claimed-";

/// Makes temporary and removal names unique within this process.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// The handoff directory of one deployment.
#[derive(Debug)]
pub struct FilesystemHandoffs {
    /// `cluster.filesystem.path`: never created here (see [`super::probe`]).
    root: PathBuf,
    dir: PathBuf,
}

fn fail(what: &str, path: &Path, e: impl std::fmt::Display) -> HandoffError {
    HandoffError::Store(format!("{what} {}: {e}", path.display()))
}

/// A hidden name in `dir` unique to this call (listings skip names that start with `.`).
fn unique(dir: &Path, what: &str) -> PathBuf {
    let n = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".{what}-{}-{n}", std::process::id()))
}

/// The name of `record`'s file once `token` claimed it.
fn claimed_path(record: &Path, token: &str) -> PathBuf {
    PathBuf::from(format!("{}{CLAIMED}{token}", record.display()))
}

/// A listed file's claim token: `Some(None)` for an unclaimed record, `Some(Some(token))` for
/// a claimed one, `None` for anything else.
fn claim_of(name: &str) -> Option<Option<String>> {
    if name.starts_with('.') {
        return None;
    }
    if name.ends_with(".json") {
        return Some(None);
    }
    let (record, token) = name.split_once(CLAIMED)?;
    (record.ends_with(".json") && !token.is_empty()).then(|| Some(token.to_owned()))
}

fn read_record(path: &Path) -> Result<Option<HandoffRecord>, HandoffError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| fail("cannot decode the handoff record", path, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(fail("cannot read", path, e)),
    }
}

async fn blocking<T: Send + 'static>(
    op: impl FnOnce() -> Result<T, HandoffError> + Send + 'static,
) -> Result<T, HandoffError> {
    tokio::task::spawn_blocking(op)
        .await
        .map_err(|e| HandoffError::Store(format!("handoff file operation panicked: {e}")))?
}

impl FilesystemHandoffs {
    /// The records under `config.path`/`deploymentId`/cluster/handoff.
    pub(crate) fn new(config: &FilesystemConfig) -> Self {
        let deployment = config.deployment_id.as_deref().unwrap_or("default");
        Self {
            root: config.path.clone(),
            dir: config.path.join(deployment).join("cluster").join("handoff"),
        }
    }

    /// The file of one firing's record.
    pub(crate) fn record_path(&self, job: &str, scheduled_at_ms: i64) -> PathBuf {
        self.dir.join(format!("{job}@{scheduled_at_ms}.json"))
    }

    pub(crate) async fn write(&self, record: &HandoffRecord) -> Result<(), HandoffError> {
        let (root, dir) = (self.root.clone(), self.dir.clone());
        let file = self.record_path(&record.job, record.scheduled_at_ms);
        let body = serde_json::to_vec(record)
            .map_err(|e| fail("cannot encode the handoff record", &file, e))?;
        blocking(move || {
            // Only below the store directory: a missing mount must not become a local store.
            if !root.is_dir() {
                return Err(fail(
                    "the store directory is missing:",
                    &root,
                    "cronstable never creates it",
                ));
            }
            std::fs::create_dir_all(&dir).map_err(|e| fail("cannot create", &dir, e))?;
            let tmp = unique(&dir, "record-tmp");
            let written = std::fs::File::create(&tmp).and_then(|mut f| {
                f.write_all(&body)?;
                f.sync_all()
            });
            if let Err(e) = written {
                let _ = std::fs::remove_file(&tmp);
                return Err(fail("cannot write", &tmp, e));
            }
            std::fs::rename(&tmp, &file).map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                fail("cannot rename the handoff record to", &file, e)
            })?;
            // Make the new name itself durable, not just the bytes.
            if let Ok(d) = std::fs::File::open(&dir) {
                let _ = d.sync_all();
            }
            Ok(())
        })
        .await
    }

    pub(crate) async fn pending(&self) -> Result<Vec<Pending>, HandoffError> {
        let dir = self.dir.clone();
        blocking(move || {
            let entries = match std::fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(fail("cannot list", &dir, e)),
            };
            let mut found = Vec::new();
            for entry in entries.flatten() {
                let path = entry.path();
                let name = entry.file_name().to_string_lossy().into_owned();
                let Some(claimed_by) = claim_of(&name) else {
                    continue;
                };
                let bytes = match std::fs::read(&path) {
                    Ok(b) => b,
                    // Claimed by another node between the listing and the read.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    // One unreadable file must not stop every other handoff.
                    Err(e) => {
                        tracing::warn!(
                            file = %path.display(),
                            "ignoring a handoff record that cannot be read: {e}"
                        );
                        continue;
                    }
                };
                match serde_json::from_slice::<HandoffRecord>(&bytes) {
                    Ok(record) => found.push(Pending {
                        record: HandoffRecord {
                            claimed_by,
                            ..record
                        },
                        name: path.display().to_string(),
                        revision: 0,
                    }),
                    Err(e) => tracing::warn!(
                        file = %path.display(),
                        "ignoring an unreadable handoff record: {e}"
                    ),
                }
            }
            found.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(found)
        })
        .await
    }

    pub(crate) async fn claim(
        &self,
        p: &Pending,
        token: &str,
    ) -> Result<Option<Pending>, HandoffError> {
        let path = PathBuf::from(&p.name);
        let claimed = claimed_path(&path, token);
        let record = HandoffRecord {
            claimed_by: Some(token.to_owned()),
            ..p.record.clone()
        };
        blocking(move || match std::fs::rename(&path, &claimed) {
            Ok(()) => Ok(Some(Pending {
                record,
                name: claimed.display().to_string(),
                revision: 0,
            })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(fail("cannot claim", &path, e)),
        })
        .await
    }

    pub(crate) async fn find_claim(
        &self,
        p: &Pending,
        token: &str,
    ) -> Result<Option<Pending>, HandoffError> {
        let claimed = claimed_path(Path::new(&p.name), token);
        let token = token.to_owned();
        blocking(move || {
            Ok(read_record(&claimed)?.map(|record| Pending {
                record: HandoffRecord {
                    claimed_by: Some(token),
                    ..record
                },
                name: claimed.display().to_string(),
                revision: 0,
            }))
        })
        .await
    }

    pub(crate) async fn remove(&self, p: &Pending) -> Result<bool, HandoffError> {
        let path = PathBuf::from(&p.name);
        let dir = self.dir.clone();
        blocking(move || {
            let doomed = unique(&dir, "removing");
            match std::fs::rename(&path, &doomed) {
                Ok(()) => {
                    std::fs::remove_file(&doomed)
                        .map_err(|e| fail("cannot remove the handoff record", &doomed, e))?;
                    Ok(true)
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(fail("cannot remove", &path, e)),
            }
        })
        .await
    }

    pub(crate) async fn release(&self, claimed: &Pending) -> Result<(), HandoffError> {
        let from = PathBuf::from(&claimed.name);
        let to = self.record_path(&claimed.record.job, claimed.record.scheduled_at_ms);
        // A link, not a rename: a newer record of the same firing written meanwhile (the
        // sequence was handed off again) must win over this older one.
        blocking(move || {
            match std::fs::hard_link(&from, &to) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                // Already released or removed.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(fail("cannot release the claim on", &from, e)),
            }
            match std::fs::remove_file(&from) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(fail("cannot remove the released claim", &from, e)),
            }
        })
        .await
    }
}

#[tonic::async_trait]
impl HandoffStore for FilesystemHandoffs {
    fn store_name(&self) -> &'static str {
        "filesystem"
    }
    async fn write(&self, record: &HandoffRecord) -> Result<(), HandoffError> {
        FilesystemHandoffs::write(self, record).await
    }
    async fn pending(&self) -> Result<Vec<Pending>, HandoffError> {
        FilesystemHandoffs::pending(self).await
    }
    async fn claim(
        &self,
        p: &Pending,
        token: &str,
        _now_ms: i64,
    ) -> Result<Option<Pending>, HandoffError> {
        FilesystemHandoffs::claim(self, p, token).await
    }
    async fn find_claim(&self, p: &Pending, token: &str) -> Result<Option<Pending>, HandoffError> {
        FilesystemHandoffs::find_claim(self, p, token).await
    }
    async fn remove(&self, p: &Pending) -> Result<bool, HandoffError> {
        FilesystemHandoffs::remove(self, p).await
    }
    async fn release(&self, claimed: &Pending) -> Result<(), HandoffError> {
        FilesystemHandoffs::release(self, claimed).await
    }
}

impl FilesystemHandoffs {
    /// The bounded handoffs of the shared directory `config` names.
    pub fn handoffs(config: &FilesystemConfig) -> Handoffs {
        Handoffs::new(Self::new(config))
    }
}
