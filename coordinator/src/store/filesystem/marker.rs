//! The store's identity: a marker only an operator writes, so a node proves that the directory
//! it elects over is the shared store and not whatever stands at its path.
//!
//! A mount point is not proof: every container bind-mounts its volumes, and an empty directory
//! bind-mounted where a missing NFS mount should be passes any mount check and would lead
//! beside the real holder. So the store directory carries a file, `.cronstable-store`, that
//! names the deployments (`cluster.filesystem.deploymentId`, `default` when unset) that elect
//! there. It is written by `cronstable store init PATH [--deployment-id ID]` and never by a
//! node. A node whose `topology` is not `single-node` refuses a store without the marker, or
//! whose marker does not name its deployment, before its first round (nothing is written into
//! an unmarked store) and again at every round, so a mount that vanishes or is swapped while
//! the node runs stops it leading at its next round.
//!
//! The file is JSON: `{"cronstableStore": 1, "deployments": ["default"]}`. Parsing and the check
//! are pure; reading and writing are the two small functions at the bottom.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The marker's file name, in the store directory itself.
pub const FILE: &str = ".cronstable-store";

/// The largest marker a node reads; a bigger file is not a marker.
const MAX_BYTES: u64 = 64 * 1024;

/// The marker's contents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Marker {
    /// The format's version: 1.
    pub cronstable_store: u32,
    /// The deployments that elect over this store.
    pub deployments: Vec<String>,
}

/// Why a store is not this node's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MarkerError {
    /// No marker in the directory.
    #[error(
        "{dir} has no store marker ({FILE}): a node elects only over a directory an operator \
         marked as the shared store, so an empty directory or bind mount standing where the \
         store's mount should be is never taken for it; mark the real store once with \
         `cronstable store init {dir} --deployment-id {deployment}`, or set \
         cluster.filesystem.topology: single-node for a store on this host's disk only"
    )]
    Missing {
        /// The store directory.
        dir: String,
        /// This node's deployment.
        deployment: String,
    },
    /// A marker that does not name this node's deployment.
    #[error(
        "{dir} is the store of deployment(s) {marked:?}, not of {deployment:?} \
         (cluster.filesystem.deploymentId): this is another deployment's store, or the wrong \
         directory; add this deployment with `cronstable store init {dir} --deployment-id \
         {deployment}` only if it is meant to elect here"
    )]
    OtherDeployment {
        /// The store directory.
        dir: String,
        /// The deployments the marker names.
        marked: Vec<String>,
        /// This node's deployment.
        deployment: String,
    },
    /// A file that is not a marker.
    #[error("{path} is not a cronstable store marker: {why}")]
    Unreadable {
        /// The marker's path.
        path: String,
        /// What was wrong.
        why: String,
    },
}

/// Parses a marker's bytes; `path` names it in the error.
pub fn parse(bytes: &[u8], path: &Path) -> Result<Marker, MarkerError> {
    let unreadable = |why: String| MarkerError::Unreadable {
        path: path.display().to_string(),
        why,
    };
    let marker: Marker = serde_json::from_slice(bytes).map_err(|e| unreadable(e.to_string()))?;
    if marker.cronstable_store != 1 {
        return Err(unreadable(format!(
            "format version {} (this build reads 1)",
            marker.cronstable_store
        )));
    }
    if let Some(bad) = marker.deployments.iter().find(|d| !valid_deployment(d)) {
        return Err(unreadable(format!("{bad:?} is not a deployment id")));
    }
    Ok(marker)
}

/// A deployment id as a marker may name it: what `cluster.filesystem.deploymentId` may be in
/// the config (not blank).
pub fn valid_deployment(id: &str) -> bool {
    !id.trim().is_empty() && !id.contains('\0')
}

/// Whether `marker` (`None`: no marker file) admits `deployment` to the store at `dir`.
pub fn check(marker: Option<&Marker>, dir: &Path, deployment: &str) -> Result<(), MarkerError> {
    let dir = dir.display().to_string();
    match marker {
        None => Err(MarkerError::Missing {
            dir,
            deployment: deployment.to_owned(),
        }),
        Some(m) if m.deployments.iter().any(|d| d == deployment) => Ok(()),
        Some(m) => Err(MarkerError::OtherDeployment {
            dir,
            marked: m.deployments.clone(),
            deployment: deployment.to_owned(),
        }),
    }
}

/// `marker` with `deployment` added (unchanged when it is there already).
pub fn with_deployment(marker: Option<Marker>, deployment: &str) -> Marker {
    let mut m = marker.unwrap_or(Marker {
        cronstable_store: 1,
        deployments: Vec::new(),
    });
    if !m.deployments.iter().any(|d| d == deployment) {
        m.deployments.push(deployment.to_owned());
    }
    m
}

/// The marker's path in the store directory `dir`.
pub fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

/// Reads the marker of the store at `dir`: `Ok(None)` when there is none. Blocking I/O.
pub fn read(dir: &Path) -> Result<Option<Marker>, MarkerError> {
    use std::io::Read;
    let path = path(dir);
    let unreadable = |why: String| MarkerError::Unreadable {
        path: path.display().to_string(),
        why,
    };
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(unreadable(e.to_string())),
    };
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| unreadable(e.to_string()))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(unreadable(format!("larger than {MAX_BYTES} bytes")));
    }
    parse(&bytes, &path).map(Some)
}

/// Checks that the store at `dir` is marked for `deployment`. Blocking I/O.
pub fn verify(dir: &Path, deployment: &str) -> Result<(), MarkerError> {
    check(read(dir)?.as_ref(), dir, deployment)
}

/// Why `cronstable store init` could not mark a directory.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// The directory is missing or not a directory.
    #[error("{0} is not a directory; mount the shared store there first")]
    NotADirectory(String),
    /// The deployment id is not one.
    #[error("{0:?} is not a deployment id (it must not be blank)")]
    BadDeployment(String),
    /// An existing marker that cannot be read is left alone.
    #[error(transparent)]
    Marker(#[from] MarkerError),
    /// Writing the marker failed.
    #[error("writing {path}: {why}")]
    Write {
        /// The marker's path.
        path: String,
        /// The I/O error.
        why: String,
    },
}

/// Marks `dir` as the store of `deployment` (adding it to an existing marker); returns the
/// marker as written. Written to a temporary file and renamed into place, so a node never
/// reads half a marker. Blocking I/O.
pub fn init(dir: &Path, deployment: &str) -> Result<Marker, InitError> {
    if !valid_deployment(deployment) {
        return Err(InitError::BadDeployment(deployment.to_owned()));
    }
    if !std::fs::metadata(dir).is_ok_and(|m| m.is_dir()) {
        return Err(InitError::NotADirectory(dir.display().to_string()));
    }
    let marker = with_deployment(read(dir)?, deployment);
    let target = path(dir);
    let write_error = |e: std::io::Error| InitError::Write {
        path: target.display().to_string(),
        why: e.to_string(),
    };
    let tmp = dir.join(format!("{FILE}.tmp-{}", std::process::id()));
    let mut body = serde_json::to_vec_pretty(&marker).expect("a marker serializes");
    body.push(b'\n');
    std::fs::write(&tmp, &body).map_err(write_error)?;
    std::fs::File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(write_error)?;
    std::fs::rename(&tmp, &target).map_err(write_error)?;
    Ok(marker)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marker(deployments: &[&str]) -> Marker {
        Marker {
            cronstable_store: 1,
            deployments: deployments.iter().map(|d| (*d).to_owned()).collect(),
        }
    }

    #[test]
    fn only_a_marker_naming_the_deployment_admits_it() {
        let dir = Path::new("/mnt/cronstable");
        assert!(matches!(
            check(None, dir, "default"),
            Err(MarkerError::Missing { .. })
        ));
        assert_eq!(check(Some(&marker(&["default"])), dir, "default"), Ok(()));
        assert_eq!(check(Some(&marker(&["a", "b"])), dir, "b"), Ok(()));
        let other = check(Some(&marker(&["billing"])), dir, "default").unwrap_err();
        assert!(matches!(other, MarkerError::OtherDeployment { .. }));
        let why = other.to_string();
        assert!(
            why.contains("billing") && why.contains("deploymentId"),
            "{why}"
        );
        let missing = check(None, dir, "x").unwrap_err().to_string();
        assert!(
            missing.contains("cronstable store init /mnt/cronstable --deployment-id x")
                && missing.contains("single-node"),
            "{missing}"
        );
    }

    #[test]
    fn anything_but_a_version_one_marker_is_no_marker() {
        let p = Path::new("/s/.cronstable-store");
        let ok = br#"{"cronstableStore": 1, "deployments": ["default"]}"#;
        assert_eq!(parse(ok, p), Ok(marker(&["default"])));
        for bad in [
            &b""[..],
            b"{}",
            b"not json",
            br#"{"cronstableStore": 2, "deployments": ["default"]}"#,
            br#"{"cronstableStore": 1, "deployments": [""]}"#,
            br#"{"cronstableStore": 1, "deployments": [], "extra": true}"#,
        ] {
            let e = parse(bad, p).unwrap_err();
            assert!(
                matches!(e, MarkerError::Unreadable { .. }),
                "{bad:?}: {e:?}"
            );
        }
    }

    #[test]
    fn init_marks_a_directory_adds_deployments_and_leaves_a_bad_marker_alone() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            init(&dir.path().join("missing"), "default"),
            Err(InitError::NotADirectory(_))
        ));
        assert!(matches!(
            init(dir.path(), " "),
            Err(InitError::BadDeployment(_))
        ));
        assert!(verify(dir.path(), "default").is_err());
        assert_eq!(init(dir.path(), "default").unwrap(), marker(&["default"]));
        assert_eq!(verify(dir.path(), "default"), Ok(()));
        assert_eq!(init(dir.path(), "default").unwrap(), marker(&["default"]));
        assert_eq!(
            init(dir.path(), "billing").unwrap(),
            marker(&["default", "billing"])
        );
        assert_eq!(verify(dir.path(), "billing"), Ok(()));
        // No temporary file is left behind.
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, [FILE]);
        std::fs::write(path(dir.path()), "garbage").unwrap();
        assert!(matches!(
            init(dir.path(), "default"),
            Err(InitError::Marker(MarkerError::Unreadable { .. }))
        ));
        assert_eq!(
            std::fs::read_to_string(path(dir.path())).unwrap(),
            "garbage"
        );
    }
}
