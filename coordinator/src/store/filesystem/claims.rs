//! Per-firing claims on the filesystem store ([`crate::lease::claims`]): one small JSON file per
//! claimed firing.
//!
//! ```text
//! <path>/<deploymentId or "default">/cluster/claims/<scheduledAtMs>@<job>.json
//! ```
//!
//! A claim is written whole to a hidden temporary file in the same directory, synced, then
//! hard-linked onto its final name: `link(2)` fails when the name exists, so exactly one of two
//! claimers creates it, and a reader never sees half of one (NFS performs the link on the
//! server, atomically, as it does the lease's renames). Bytes of a job name other than
//! letters, digits, `.`, `_` and `-` are written `%XX`, so any name is one safe file name. The
//! name starts with the instant, so pruning reads names only. Every file operation runs on the
//! store's blocking slot; the records' client bounds the call.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::{FilesystemStore, store_err};
use crate::lease::LeaseError;
use crate::lease::claims::{ClaimWrite, FiringClaim, FiringClaimStore};

/// Makes temporary names unique within this process.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// Temporary files older than this are left over from a claimer that died mid-claim.
const STALE_TEMPORARY: std::time::Duration = std::time::Duration::from_secs(3600);

/// The claims directory under the deployment directory (`<path>/<deploymentId>`).
pub fn claims_dir(deployment_dir: &Path) -> PathBuf {
    deployment_dir.join("cluster").join("claims")
}

/// `job` as one file-name-safe string.
pub(super) fn encode(job: &str) -> String {
    let mut out = String::with_capacity(job.len());
    for b in job.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The file name of a claim.
pub fn file_name(job: &str, scheduled_at_ms: i64) -> String {
    format!("{scheduled_at_ms}@{}.json", encode(job))
}

/// The instant a claim's file name starts with; `None` for anything else.
fn instant_of(name: &str) -> Option<i64> {
    name.split_once('@')?.0.parse().ok()
}

/// The job and instant a claim's file name holds; `None` for anything else.
fn parse_name(name: &str) -> Option<(String, i64)> {
    let (at, rest) = name.split_once('@')?;
    let encoded = rest.strip_suffix(".json")?;
    let mut bytes = Vec::with_capacity(encoded.len());
    let mut it = encoded.bytes();
    while let Some(b) = it.next() {
        if b == b'%' {
            let hex = [it.next()?, it.next()?];
            bytes.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
        } else {
            bytes.push(b);
        }
    }
    Some((String::from_utf8(bytes).ok()?, at.parse().ok()?))
}

/// The (job, instant) of every claim in `dir` whose instant is in `from_ms..=to_ms`.
fn between(dir: &Path, from_ms: i64, to_ms: i64) -> Result<Vec<(String, i64)>, LeaseError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(store_err("cannot list", dir, e)),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| store_err("cannot list", dir, e))?;
        let name = entry.file_name();
        if let Some((job, at)) = name.to_str().and_then(parse_name)
            && (from_ms..=to_ms).contains(&at)
        {
            found.push((job, at));
        }
    }
    Ok(found)
}

fn read_existing(path: &Path) -> Result<Option<FiringClaim>, LeaseError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(serde_json::from_slice(&bytes).ok()),
        Err(e) => Err(store_err("cannot read the claim", path, e)),
    }
}

/// Creates `dir` below the store directory `root`, which must exist: a missing mount must
/// not become a local store.
pub(super) fn dir_below(root: &Path, dir: &Path) -> Result<(), LeaseError> {
    if !root.is_dir() {
        return Err(store_err(
            "the store directory is missing (cronstable never creates it):",
            root,
            "not found",
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| store_err("cannot create", dir, e))
}

/// Creates `claim` in `dir` unless its file exists (see the module docs).
fn create(root: &Path, dir: &Path, claim: &FiringClaim) -> Result<ClaimWrite, LeaseError> {
    dir_below(root, dir)?;
    let target = dir.join(file_name(&claim.job, claim.scheduled_at_ms));
    if target.exists() {
        return read_existing(&target).map(ClaimWrite::Exists);
    }
    let n = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let temporary = dir.join(format!(".claim-{}-{n}", std::process::id()));
    let body = serde_json::to_vec(claim).expect("a claim serialises");
    let written = File::create(&temporary)
        .and_then(|mut f| f.write_all(&body).and_then(|()| f.sync_all()))
        .map_err(|e| store_err("cannot write", &temporary, e));
    let linked = written.and_then(|()| match std::fs::hard_link(&temporary, &target) {
        Ok(()) => {
            // The new name is durable once its directory is.
            let _ = File::open(dir).and_then(|d| d.sync_all());
            Ok(ClaimWrite::Created)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            read_existing(&target).map(ClaimWrite::Exists)
        }
        Err(e) => Err(store_err("cannot create the claim", &target, e)),
    });
    let _ = std::fs::remove_file(&temporary);
    linked
}

/// Removes `claim`'s file if it is still this node's under this fence (see
/// [`FiringClaimStore::release_claim`]).
fn release(dir: &Path, claim: &FiringClaim) -> Result<bool, LeaseError> {
    let target = dir.join(file_name(&claim.job, claim.scheduled_at_ms));
    let stored = match std::fs::read(&target) {
        Ok(bytes) => serde_json::from_slice::<FiringClaim>(&bytes).ok(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(store_err("cannot read the claim", &target, e)),
    };
    if !stored.is_some_and(|c| crate::lease::claims::is_mine(&c, claim)) {
        return Ok(false);
    }
    match std::fs::remove_file(&target) {
        Ok(()) => {
            let _ = File::open(dir).and_then(|d| d.sync_all());
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(store_err("cannot remove the claim", &target, e)),
    }
}

/// Removes the claims of instants before `before_ms`, and temporary files a dead claimer left.
fn prune(dir: &Path, before_ms: i64) -> Result<usize, LeaseError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(store_err("cannot list", dir, e)),
    };
    let mut removed = 0;
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let old = if name.starts_with('.') {
            entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > STALE_TEMPORARY)
        } else {
            instant_of(&name).is_some_and(|at| at < before_ms)
        };
        if old && std::fs::remove_file(entry.path()).is_ok() && !name.starts_with('.') {
            removed += 1;
        }
    }
    Ok(removed)
}

impl FilesystemStore {
    fn claims_dir(&self) -> PathBuf {
        claims_dir(self.leases.parent().unwrap_or(&self.root))
    }
}

#[tonic::async_trait]
impl FiringClaimStore for FilesystemStore {
    async fn create_claim(&mut self, claim: &FiringClaim) -> Result<ClaimWrite, LeaseError> {
        let (root, dir, claim) = (self.root.clone(), self.claims_dir(), claim.clone());
        self.blocking(move || create(&root, &dir, &claim)).await
    }

    async fn release_claim(&mut self, claim: &FiringClaim) -> Result<bool, LeaseError> {
        let (dir, claim) = (self.claims_dir(), claim.clone());
        self.blocking(move || release(&dir, &claim)).await
    }

    async fn prune_claims(&mut self, before_ms: i64) -> Result<usize, LeaseError> {
        let dir = self.claims_dir();
        self.blocking(move || prune(&dir, before_ms)).await
    }

    async fn claimed_between(
        &mut self,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<(String, i64)>, LeaseError> {
        let dir = self.claims_dir();
        self.blocking(move || between(&dir, from_ms, to_ms)).await
    }

    async fn claims_of(
        &mut self,
        job: &str,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<FiringClaim>, LeaseError> {
        let (dir, job) = (self.claims_dir(), job.to_owned());
        self.blocking(move || {
            let found = between(&dir, from_ms, to_ms)?;
            Ok(found
                .into_iter()
                .filter(|(j, _)| *j == job)
                .filter_map(|(j, at)| read_existing(&dir.join(file_name(&j, at))).ok().flatten())
                .collect())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claims_file_name_reads_back_as_its_job_and_instant() {
        for job in ["report", "nightly report/eu", "ünïcode-job", "%41"] {
            let name = file_name(job, 1_772_409_600_000);
            assert_eq!(
                parse_name(&name),
                Some((job.to_owned(), 1_772_409_600_000)),
                "{name}"
            );
        }
        for other in [".claim-1-2", "x@y.json", "12@bad%zz.json", "12@job.txt"] {
            assert_eq!(parse_name(other), None, "{other}");
        }
    }

    fn claim(node: &str, at: i64) -> FiringClaim {
        FiringClaim {
            job: "nightly report/eu".into(),
            scheduled_at_ms: at,
            node: node.into(),
            fence: "1".into(),
            catch_up: false,
            claimed_at_ms: at + 5,
        }
    }

    #[test]
    fn the_first_claim_is_created_and_every_later_one_finds_it() {
        let store = tempfile::tempdir().unwrap();
        let dir = claims_dir(&store.path().join("default"));
        assert_eq!(
            create(store.path(), &dir, &claim("a", 60_000)).unwrap(),
            ClaimWrite::Created
        );
        assert_eq!(
            create(store.path(), &dir, &claim("b", 60_000)).unwrap(),
            ClaimWrite::Exists(Some(claim("a", 60_000)))
        );
        assert!(dir.join("60000@nightly%20report%2Feu.json").is_file());
        // A torn or foreign file still holds the firing.
        std::fs::write(dir.join(file_name("nightly report/eu", 120_000)), b"{").unwrap();
        assert_eq!(
            create(store.path(), &dir, &claim("b", 120_000)).unwrap(),
            ClaimWrite::Exists(None)
        );
        // No temporary file is left behind.
        let hidden = std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with('.')
            })
            .count();
        assert_eq!(hidden, 0);
    }

    #[test]
    fn a_missing_store_is_an_error_not_a_local_directory() {
        let store = tempfile::tempdir().unwrap();
        let root = store.path().join("not-mounted");
        let dir = claims_dir(&root.join("default"));
        assert!(create(&root, &dir, &claim("a", 1)).is_err());
        assert!(!root.exists());
    }

    #[test]
    fn pruning_removes_only_claims_before_the_bound() {
        let store = tempfile::tempdir().unwrap();
        let dir = claims_dir(&store.path().join("default"));
        for at in [1_000, 2_000, 3_000] {
            create(store.path(), &dir, &claim("a", at)).unwrap();
        }
        assert_eq!(prune(&dir, 2_500).unwrap(), 2);
        assert_eq!(
            create(store.path(), &dir, &claim("b", 3_000)).unwrap(),
            ClaimWrite::Exists(Some(claim("a", 3_000)))
        );
        assert_eq!(prune(&store.path().join("none"), 1).unwrap(), 0);
    }
}
