//! Handoff records on the filesystem store: one small JSON file per handed-off firing.
//!
//! ```text
//! <path>/<deploymentId or "default">/cluster/handoff/<job>@<scheduledAtMs>.json
//! ```
//!
//! A record is written atomically (a uniquely named temporary file in the same directory,
//! fsync, rename over the final name), so a reader never sees half of one. A claim renames the
//! file to a name unique to the claimer and then deletes it: `rename(2)` of one source succeeds
//! for exactly one caller, so two lease holders (before and after a takeover) cannot both
//! resume the same sequence. Job names are letters, digits, `.`, `_` and `-`, so they are safe
//! as file names. Every file operation runs on a blocking thread; the caller bounds it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::handoff::{HandoffError, HandoffRecord, Pending};
use crate::config::cluster::FilesystemConfig;

/// Makes temporary and claimed names unique within this process.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// The handoff directory of one deployment.
#[derive(Debug)]
pub(super) struct FilesystemHandoffs {
    dir: PathBuf,
}

fn fail(what: &str, path: &Path, e: impl std::fmt::Display) -> HandoffError {
    HandoffError::Store(format!("{what} {}: {e}", path.display()))
}

fn unique(base: &Path, suffix: &str) -> PathBuf {
    let n = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    PathBuf::from(format!(
        "{}.{suffix}-{}-{n}",
        base.display(),
        std::process::id()
    ))
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
    pub(super) fn new(config: &FilesystemConfig) -> Self {
        let deployment = config.deployment_id.as_deref().unwrap_or("default");
        Self {
            dir: config.path.join(deployment).join("cluster").join("handoff"),
        }
    }

    /// The file of one firing's record.
    pub(super) fn record_path(&self, job: &str, scheduled_at_ms: i64) -> PathBuf {
        self.dir.join(format!("{job}@{scheduled_at_ms}.json"))
    }

    pub(super) async fn write(&self, record: &HandoffRecord) -> Result<(), HandoffError> {
        let dir = self.dir.clone();
        let file = self.record_path(&record.job, record.scheduled_at_ms);
        let body = serde_json::to_vec(record)
            .map_err(|e| fail("cannot encode the handoff record", &file, e))?;
        blocking(move || {
            std::fs::create_dir_all(&dir).map_err(|e| fail("cannot create", &dir, e))?;
            let tmp = unique(&dir.join(".record"), "tmp");
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

    pub(super) async fn pending(&self) -> Result<Vec<Pending>, HandoffError> {
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
                if name.starts_with('.') || !name.ends_with(".json") {
                    continue;
                }
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
                        record,
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

    pub(super) async fn claim(&self, p: &Pending) -> Result<bool, HandoffError> {
        let path = PathBuf::from(&p.name);
        blocking(move || {
            let claimed = unique(&path, "claimed");
            match std::fs::rename(&path, &claimed) {
                Ok(()) => {
                    std::fs::remove_file(&claimed)
                        .map_err(|e| fail("cannot remove the claimed record", &claimed, e))?;
                    Ok(true)
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(fail("cannot claim", &path, e)),
            }
        })
        .await
    }
}
