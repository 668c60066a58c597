//! The filesystem backend's lock-fidelity probe (LSE-FS-05): before electing over a directory,
//! prove that its `flock` locks actually exclude.
//!
//! Two same-host checks:
//!
//! 1. functional: two descriptors of one file (two separate `open`s, so two open file
//!    descriptions) must contend on a non-blocking exclusive lock. A mount whose locks are
//!    no-ops grants both;
//! 2. on Linux, the mount options in `/proc/mounts`: an NFS mount with `nolock`,
//!    `local_lock=flock` or `local_lock=all` keeps its locks on this host, where they cannot
//!    fence another node, although the functional probe (same host) passes.
//!
//! Either failure is a refusal, reported with the seed's wording
//! `cluster.backend filesystem: refusing to elect over <path>: …`.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// Why the probe refused a directory (the text after `refusing to elect over <path>: `).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    /// Both descriptors got the exclusive lock.
    #[error("{0} grants two exclusive locks on one file (its locks are no-ops)")]
    NoOpLocks(String),
    /// The mount keeps NFS locks host-local.
    #[error(
        "{path} is on an NFS mount ({mount}) with {option}: its locks are local to this host and \
         cannot fence other nodes; remount with working NFS locks (no nolock, no local_lock)"
    )]
    HostLocalNfsLocks {
        /// The directory probed.
        path: String,
        /// The mount point.
        mount: String,
        /// The offending option.
        option: String,
    },
    /// The probe itself could not run.
    #[error("cannot probe {path}: {why}")]
    Io {
        /// The file or directory.
        path: String,
        /// Why.
        why: String,
    },
}

/// Runs the functional probe on a scratch file in `dir` named after `token` (per process, so
/// contenders starting together do not trip over each other's probe), then, when given, the
/// mount-option check against `mounts` (the text of `/proc/mounts`).
pub fn probe(dir: &Path, token: &str, mounts: Option<&str>) -> Result<(), ProbeError> {
    let file = dir.join(format!(".lock-probe-{token}"));
    let result = functional(dir, &file);
    // Best effort: a leftover scratch file is harmless, it only costs a directory entry.
    let _ = std::fs::remove_file(&file);
    result?;
    if let Some(mounts) = mounts {
        mount_options(dir, mounts)?;
    }
    Ok(())
}

fn functional(dir: &Path, file: &Path) -> Result<(), ProbeError> {
    let io = |e: &dyn std::fmt::Display| ProbeError::Io {
        path: file.display().to_string(),
        why: e.to_string(),
    };
    let open = || -> Result<File, ProbeError> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(file)
            .map_err(|e| io(&e))
    };
    let first = Flock::lock(open()?, FlockArg::LockExclusiveNonblock)
        .map_err(|(_, e)| io(&format!("the first exclusive lock failed: {e}")))?;
    let second = Flock::lock(open()?, FlockArg::LockExclusiveNonblock);
    drop(first);
    match second {
        Err((_, Errno::EWOULDBLOCK)) => Ok(()),
        Err((_, e)) => Err(io(&format!("the contending lock failed oddly: {e}"))),
        Ok(_) => Err(ProbeError::NoOpLocks(dir.display().to_string())),
    }
}

/// Finds the mount `dir` lives on (the longest matching mount point) and refuses NFS mounts
/// whose locks are host-local.
fn mount_options(dir: &Path, mounts: &str) -> Result<(), ProbeError> {
    let dir: PathBuf = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    let mut best: Option<(&str, &str, &str)> = None;
    for line in mounts.lines() {
        let mut f = line.split_whitespace();
        let (Some(_dev), Some(point), Some(fstype), Some(opts)) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        // /proc/mounts escapes spaces in mount points as \040.
        let unescaped = point.replace("\\040", " ");
        if dir.starts_with(&unescaped)
            && best.is_none_or(|(p, _, _)| p.replace("\\040", " ").len() <= unescaped.len())
        {
            best = Some((point, fstype, opts));
        }
    }
    let Some((point, fstype, opts)) = best else {
        return Ok(());
    };
    if !fstype.starts_with("nfs") {
        return Ok(());
    }
    let bad = opts
        .split(',')
        .find(|o| matches!(*o, "nolock" | "local_lock=flock" | "local_lock=all"));
    match bad {
        Some(option) => Err(ProbeError::HostLocalNfsLocks {
            path: dir.display().to_string(),
            mount: point.to_owned(),
            option: option.to_owned(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_directory_passes_the_functional_probe() {
        let dir = tempfile::tempdir().unwrap();
        probe(dir.path(), "t", None).unwrap();
    }

    #[test]
    fn tmpfs_passes_the_whole_probe() {
        // /dev/shm is tmpfs on Linux: real locks, not NFS.
        let shm = Path::new("/dev/shm");
        if !shm.is_dir() {
            return;
        }
        let dir = tempfile::tempdir_in(shm).unwrap();
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
        probe(dir.path(), "t", Some(&mounts)).unwrap();
    }

    #[test]
    fn nfs_with_host_local_locks_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let point = dir.path().canonicalize().unwrap();
        for option in ["nolock", "local_lock=flock", "local_lock=all"] {
            let mounts = format!(
                "/dev/root / ext4 rw 0 0\nsrv:/x {} nfs4 rw,vers=4.1,{option},proto=tcp 0 0\n",
                point.display()
            );
            let err = probe(dir.path(), "t", Some(&mounts)).unwrap_err();
            assert!(
                matches!(&err, ProbeError::HostLocalNfsLocks { option: o, .. } if o == option),
                "{err}"
            );
            assert!(err.to_string().contains("cannot fence other nodes"));
        }
    }

    #[test]
    fn nfs_with_real_locks_and_the_deepest_mount_win() {
        let dir = tempfile::tempdir().unwrap();
        let point = dir.path().canonicalize().unwrap();
        // The outer mount has nolock, but the directory is on an inner mount with real locks.
        let mounts = format!(
            "srv:/ / nfs rw,nolock 0 0\nsrv:/x {} nfs4 rw,local_lock=none 0 0\n",
            point.display()
        );
        probe(dir.path(), "t", Some(&mounts)).unwrap();
    }
}
