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
//! Before both, unless `topology: single-node` says every node runs on this host, the configured
//! directory must exist (it is never created) and be a store of its own ([`own_mount`]): a
//! mount point, or on a network filesystem. A node whose shared mount is not there yet sees an
//! empty directory on its own disk, and a lease there would make it a second leader.
//!
//! Every failure is a refusal, reported with the seed's wording
//! `cluster.backend filesystem: refusing to elect over <path>: …`, and retried.

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
    /// The configured directory does not exist.
    #[error(
        "{0} does not exist (is the shared mount not there yet?); cronstable never creates the \
         store directory, so a node whose mount is missing cannot elect over its own disk"
    )]
    Missing(String),
    /// The configured directory is neither a mount point nor on a network filesystem.
    #[error(
        "{path} is not a mount point and lies on {mount} ({fstype}), a filesystem of this host: \
         a lease there excludes only this host's processes and cannot fence other nodes (is the \
         shared mount not there yet?). Mount the shared store at {path}, or set \
         cluster.filesystem.topology: single-node if every node of this cluster runs on this host"
    )]
    NotOwnMount {
        /// The directory.
        path: String,
        /// The mount it lies on.
        mount: String,
        /// That mount's filesystem type.
        fstype: String,
    },
    /// The store carries no marker naming this node's deployment (see [`super::marker`]).
    #[error(transparent)]
    Unmarked(#[from] super::marker::MarkerError),
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

/// One line of `/proc/mounts`.
struct Mount<'a> {
    /// The mount point, with `\040` unescaped.
    point: String,
    fstype: &'a str,
    opts: &'a str,
}

fn parse_mounts(mounts: &str) -> impl Iterator<Item = Mount<'_>> {
    mounts.lines().filter_map(|line| {
        let mut f = line.split_whitespace();
        let (Some(_dev), Some(point), Some(fstype), Some(opts)) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            return None;
        };
        // /proc/mounts escapes spaces in mount points as \040.
        Some(Mount {
            point: point.replace("\\040", " "),
            fstype,
            opts,
        })
    })
}

/// The mount `dir` lives on: the longest mount point that contains it (the last one listed
/// wins a tie, as the kernel stacks mounts).
fn containing<'a>(dir: &Path, mounts: &'a str) -> Option<Mount<'a>> {
    let mut best: Option<Mount<'a>> = None;
    for m in parse_mounts(mounts) {
        if dir.starts_with(&m.point) && best.as_ref().is_none_or(|b| b.point.len() <= m.point.len())
        {
            best = Some(m);
        }
    }
    best
}

/// Filesystem types whose locks are shared between the hosts that mount them.
const NETWORK_FILESYSTEMS: &[&str] = &[
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "ceph",
    "fuse.ceph",
    "glusterfs",
    "fuse.glusterfs",
    "lustre",
    "gpfs",
    "beegfs",
    "ocfs2",
    "gfs2",
];

/// Refuses a store directory that is not a store of its own: it must be a mount point, or lie
/// on a network filesystem. A directory on the host's own disk is what a node sees when its
/// shared mount is missing (the empty mount-point directory) or when the path is a mistake.
pub fn own_mount(dir: &Path, mounts: &str) -> Result<(), ProbeError> {
    let dir: PathBuf = dir.canonicalize().map_err(|e| ProbeError::Io {
        path: dir.display().to_string(),
        why: e.to_string(),
    })?;
    let Some(m) = containing(&dir, mounts) else {
        return Err(ProbeError::Io {
            path: dir.display().to_string(),
            why: "no mount in /proc/mounts contains it, so whether it is shared cannot be told"
                .into(),
        });
    };
    if Path::new(&m.point) == dir || NETWORK_FILESYSTEMS.contains(&m.fstype) {
        return Ok(());
    }
    Err(ProbeError::NotOwnMount {
        path: dir.display().to_string(),
        mount: m.point,
        fstype: m.fstype.to_owned(),
    })
}

/// Refuses NFS mounts whose locks are host-local.
fn mount_options(dir: &Path, mounts: &str) -> Result<(), ProbeError> {
    let dir: PathBuf = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    let Some(m) = containing(&dir, mounts) else {
        return Ok(());
    };
    if !m.fstype.starts_with("nfs") {
        return Ok(());
    }
    let bad = m
        .opts
        .split(',')
        .find(|o| matches!(*o, "nolock" | "local_lock=flock" | "local_lock=all"));
    match bad {
        Some(option) => Err(ProbeError::HostLocalNfsLocks {
            path: dir.display().to_string(),
            mount: m.point,
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

    #[test]
    fn a_store_must_be_a_mount_point_or_on_a_network_filesystem() {
        let dir = tempfile::tempdir().unwrap();
        let point = dir.path().canonicalize().unwrap();
        let inner = point.join("cronstable");
        std::fs::create_dir(&inner).unwrap();
        let root_only = "/dev/vda / ext4 rw 0 0\n";
        let err = own_mount(&inner, root_only).unwrap_err();
        assert!(
            matches!(&err, ProbeError::NotOwnMount { mount, fstype, .. } if mount == "/" && fstype == "ext4"),
            "{err}"
        );
        assert!(err.to_string().contains("topology: single-node"), "{err}");
        // The directory itself is a mount point (any type): its own store.
        let mounted = format!("{root_only}tmpfs {} tmpfs rw 0 0\n", inner.display());
        own_mount(&inner, &mounted).unwrap();
        // A directory inside an NFS mount is shared.
        let nfs = format!("{root_only}srv:/x {} nfs4 rw 0 0\n", point.display());
        own_mount(&inner, &nfs).unwrap();
        // Inside a local mount that is not the directory itself: refused.
        let local = format!("{root_only}/dev/vdb {} xfs rw 0 0\n", point.display());
        assert!(matches!(
            own_mount(&inner, &local),
            Err(ProbeError::NotOwnMount { .. })
        ));
        // Unknown: refused rather than guessed.
        assert!(matches!(own_mount(&inner, ""), Err(ProbeError::Io { .. })));
    }

    #[test]
    fn mount_points_with_spaces_are_unescaped() {
        let dir = tempfile::tempdir().unwrap();
        let spaced = dir.path().canonicalize().unwrap().join("shared store");
        std::fs::create_dir(&spaced).unwrap();
        let escaped = spaced.display().to_string().replace(' ', "\\040");
        let mounts = format!("/dev/vda / ext4 rw 0 0\nsrv:/x {escaped} nfs4 rw 0 0\n");
        own_mount(&spaced, &mounts).unwrap();
    }
}
