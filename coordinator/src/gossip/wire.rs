//! The `/peer` body on the wire: JSON, bounded, parsed defensively (GSP-07/08, GSP-111).
//!
//! A body is the core's [`PeerReport`] plus display-only parts (the per-job run summary). The
//! report half is checked field by field before it can reach a decision: any string over
//! [`MAX_FIELD_BYTES`], a candidate list over [`MAX_CANDIDATES`], any other list over
//! [`MAX_LIST`] or a body over [`MAX_BODY_BYTES`] rejects the whole body, and the poll counts as
//! "no data for that node". The display half is parsed separately and may fail on its own: a
//! hostile summary costs that node its fleet row, never its place in the quorum.
//!
//! The ETag is the SHA-256 of the exact body bytes, so a conditional request is answered 304
//! exactly when a poller already holds this body.

use std::sync::Arc;

use bytes::Bytes;
use cronstable_core::gossip::{MAX_CANDIDATES, MAX_FIELD_BYTES, PeerReport};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The largest `/peer` body a poller accepts, and the budget a server fills.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The per-job summary's share of the body: entries past it are left out when serving.
pub const MAX_SUMMARY_BYTES: usize = MAX_BODY_BYTES / 2;

/// The most entries `members`, `mutual_agreeing` or `ran_reboot_jobs` may carry.
pub const MAX_LIST: usize = 4096;

/// One job in the display-only run summary (GSP-110).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSummary {
    /// The job's name.
    pub name: String,
    /// `Leader`, `PreferLeader` or `EveryNode`.
    pub cluster_policy: String,
    /// The schedule as written.
    pub schedule: String,
    /// A run is going on this node.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub running: bool,
    /// The next due instant (RFC 3339), when the schedule has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_fire: Option<String>,
    /// The newest finished run on this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<LastRun>,
    /// The nominal instant (Unix ms) of the newest firing this node answered RUN for or
    /// started: catch-up on gossip does not offer it or anything before it. Absent from an
    /// older peer, and while this node ran none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_scheduled_at_ms: Option<i64>,
    /// For a job with `expect:` only: this node's own runs of its recent firings, newest last,
    /// at most [`MAX_RECENT_RUNS`], for the node that judges the job
    /// ([`crate::observe::expectations`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent_runs: Vec<RecentRun>,
}

/// The most runs one job's summary names in `recent_runs`.
pub const MAX_RECENT_RUNS: usize = 64;

/// One run of a recent firing on the serving node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentRun {
    /// The firing's nominal instant (Unix ms).
    pub scheduled_at_ms: i64,
    /// Its attempt number (1 for the first).
    pub attempt: u32,
    /// When it started (Unix ms).
    pub started_at_ms: i64,
    /// When it ended (Unix ms); absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at_ms: Option<i64>,
    /// How long it ran; absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Exit 0 within its timeout; absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded: Option<bool>,
}

/// The newest finished run of one job on the serving node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastRun {
    /// When it ended (RFC 3339).
    pub finished_at: String,
    /// Its exit code, when it exited.
    pub exit_code: Option<i32>,
    /// Exit 0 within its timeout.
    pub succeeded: bool,
    /// How long it ran.
    pub duration_ms: u64,
}

/// Why a body was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Larger than [`MAX_BODY_BYTES`].
    #[error("the /peer body exceeds the {MAX_BODY_BYTES}-byte gossip limit")]
    TooLarge,
    /// Not JSON, or not the report's shape.
    #[error("malformed /peer body: {0}")]
    Malformed(String),
    /// A field broke one of the bounds.
    #[error("/peer field {field} {problem}")]
    OutOfBounds {
        /// The field, as `members[3].name`.
        field: String,
        /// What was wrong.
        problem: String,
    },
}

/// A body as served: the bytes and their ETag, computed once per change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedBody {
    /// The JSON bytes.
    pub bytes: Bytes,
    /// `"<hex sha-256>"`, quoted as HTTP wants.
    pub etag: String,
}

#[derive(Serialize)]
struct OutBody<'a> {
    #[serde(flatten)]
    report: &'a PeerReport,
    jobs: &'a [JobSummary],
}

impl ServedBody {
    /// Serialises `report` with as much of `jobs` as fits in [`MAX_SUMMARY_BYTES`].
    pub fn encode(report: &PeerReport, jobs: &[JobSummary]) -> Self {
        // Job names are bounded by the job-file parser, so a summary entry is small; counting
        // bytes as we go keeps the body under budget without serialising twice.
        let mut budget = MAX_SUMMARY_BYTES;
        let mut kept = 0;
        for j in jobs {
            let cost = j.name.len() + j.cluster_policy.len() + j.schedule.len() + 256;
            if cost > budget {
                break;
            }
            budget -= cost;
            kept += 1;
        }
        let bytes = serde_json::to_vec(&OutBody {
            report,
            jobs: &jobs[..kept],
        })
        .unwrap_or_default();
        let etag = format!("\"{}\"", hex::encode(Sha256::digest(&bytes)));
        Self {
            bytes: Bytes::from(bytes),
            etag,
        }
    }
}

/// A parsed, bounded body.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerBody {
    /// The election-relevant part.
    pub report: Arc<PeerReport>,
    /// The display part; `None` when it was missing or malformed ("no data for that node").
    pub jobs: Option<Arc<Vec<JobSummary>>>,
}

/// Parses and bounds a body.
pub fn decode(bytes: &[u8]) -> Result<PeerBody, WireError> {
    if bytes.len() > MAX_BODY_BYTES {
        return Err(WireError::TooLarge);
    }
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| WireError::Malformed(e.to_string()))?;
    let jobs = value
        .get("jobs")
        .cloned()
        .and_then(|j| serde_json::from_value::<Vec<JobSummary>>(j).ok())
        .filter(|jobs| {
            jobs.len() <= MAX_LIST
                && jobs.iter().all(|j| {
                    fits(&j.name)
                        && fits(&j.schedule)
                        && fits(&j.cluster_policy)
                        && j.next_fire.as_deref().is_none_or(fits)
                        && j.last_run.as_ref().is_none_or(|r| fits(&r.finished_at))
                })
        })
        .map(Arc::new);
    let report: PeerReport =
        serde_json::from_value(value).map_err(|e| WireError::Malformed(e.to_string()))?;
    check(&report)?;
    Ok(PeerBody {
        report: Arc::new(report),
        jobs,
    })
}

fn fits(s: &str) -> bool {
    s.len() <= MAX_FIELD_BYTES
}

fn field(field: impl Into<String>, problem: impl Into<String>) -> WireError {
    WireError::OutOfBounds {
        field: field.into(),
        problem: problem.into(),
    }
}

fn string(name: &str, s: &str) -> Result<(), WireError> {
    if fits(s) {
        Ok(())
    } else {
        Err(field(
            name,
            format!("is {} bytes; the limit is {MAX_FIELD_BYTES}", s.len()),
        ))
    }
}

fn list(name: &str, items: &[String], max: usize) -> Result<(), WireError> {
    if items.len() > max {
        return Err(field(
            name,
            format!("has {} entries; the limit is {max}", items.len()),
        ));
    }
    for (i, s) in items.iter().enumerate() {
        string(&format!("{name}[{i}]"), s)?;
    }
    Ok(())
}

/// Applies every bound to a report. Public so the tests can check hand-built reports.
pub fn check(r: &PeerReport) -> Result<(), WireError> {
    if r.node_name.is_empty() {
        return Err(field("node_name", "is empty"));
    }
    string("node_name", &r.node_name)?;
    string("job_set_id", &r.job_set_id)?;
    string("instance_id", &r.instance_id)?;
    if r.members.len() > MAX_LIST {
        return Err(field(
            "members",
            format!("has {} entries; the limit is {MAX_LIST}", r.members.len()),
        ));
    }
    for (i, m) in r.members.iter().enumerate() {
        string(&format!("members[{i}].name"), &m.name)?;
        string(&format!("members[{i}].instance_id"), &m.instance_id)?;
    }
    list("mutual_agreeing", &r.mutual_agreeing, MAX_LIST)?;
    list("quorate_vouched", &r.quorate_vouched, MAX_CANDIDATES)?;
    list("ran_reboot_jobs", &r.ran_reboot_jobs, MAX_LIST)?;
    if let Some(leading) = &r.leading {
        list("leading", leading, MAX_CANDIDATES)?;
    }
    if let Some(elects) = &r.elects {
        string("elects", elects)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use cronstable_core::drift::PeerStatus;
    use cronstable_core::gossip::{Distribution, MemberReport};

    use super::*;

    fn report() -> PeerReport {
        PeerReport {
            node_name: "a".into(),
            job_set_id: "v1:abc".into(),
            instance_id: "i-1".into(),
            cluster_size: 3,
            distribution: Distribution::SingleLeader,
            elect_leader: true,
            quorate: true,
            members: vec![MemberReport {
                name: "b".into(),
                instance_id: "i-2".into(),
                status: PeerStatus::Agreed,
            }],
            mutual_agreeing: vec!["b".into()],
            quorate_vouched: vec!["a".into(), "b".into()],
            candidates_truncated: 0,
            ran_reboot_jobs: vec![],
            standing_down: false,
            leading: Some(vec![]),
            elects: None,
        }
    }

    fn job(name: &str) -> JobSummary {
        JobSummary {
            name: name.into(),
            cluster_policy: "Leader".into(),
            schedule: "* * * * *".into(),
            running: false,
            next_fire: None,
            last_run: None,
            last_run_scheduled_at_ms: None,
            recent_runs: Vec::new(),
        }
    }

    #[test]
    fn a_body_round_trips_and_its_etag_is_stable() {
        let a = ServedBody::encode(&report(), &[job("x")]);
        let b = ServedBody::encode(&report(), &[job("x")]);
        assert_eq!(a.etag, b.etag);
        let body = decode(&a.bytes).unwrap();
        assert_eq!(*body.report, report());
        assert_eq!(body.jobs.unwrap().as_slice(), &[job("x")]);
        assert_ne!(a.etag, ServedBody::encode(&report(), &[job("y")]).etag);
    }

    #[test]
    fn gsp_08_an_over_long_field_rejects_the_whole_body() {
        let mut r = report();
        r.members[0].name = "x".repeat(MAX_FIELD_BYTES + 1);
        let e = decode(&ServedBody::encode(&r, &[]).bytes).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/peer field members[0].name is 257 bytes; the limit is 256"
        );
        let mut r = report();
        r.node_name = "n".repeat(MAX_FIELD_BYTES);
        assert!(
            decode(&ServedBody::encode(&r, &[]).bytes).is_ok(),
            "256 bytes is allowed"
        );
    }

    #[test]
    fn gsp_60_more_than_512_vouched_names_is_refused() {
        let mut r = report();
        r.quorate_vouched = (0..=MAX_CANDIDATES).map(|i| format!("n{i}")).collect();
        assert!(matches!(
            decode(&ServedBody::encode(&r, &[]).bytes),
            Err(WireError::OutOfBounds { .. })
        ));
    }

    #[test]
    fn gsp_07_an_oversize_body_is_refused_before_parsing() {
        let big = vec![b' '; MAX_BODY_BYTES + 1];
        assert_eq!(decode(&big), Err(WireError::TooLarge));
    }

    #[test]
    fn gsp_111_a_hostile_summary_costs_only_the_summary() {
        let mut v = serde_json::to_value(report()).unwrap();
        v["jobs"] = serde_json::json!([{ "name": 7 }]);
        let body = decode(&serde_json::to_vec(&v).unwrap()).unwrap();
        assert!(body.jobs.is_none());
        assert_eq!(*body.report, report());
    }

    #[test]
    fn malformed_and_wrongly_typed_bodies_are_errors_not_panics() {
        for bad in [
            &b"not json"[..],
            b"[]",
            b"{}",
            br#"{"node_name": 5}"#,
            b"\xff\xfe",
        ] {
            assert!(
                matches!(decode(bad), Err(WireError::Malformed(_))),
                "{bad:?}"
            );
        }
        let mut r = report();
        r.node_name.clear();
        assert!(decode(&ServedBody::encode(&r, &[]).bytes).is_err());
    }

    #[test]
    fn the_summary_is_trimmed_to_its_budget() {
        let jobs: Vec<JobSummary> = (0..20_000).map(|i| job(&format!("job-{i:05}"))).collect();
        let body = ServedBody::encode(&report(), &jobs);
        assert!(body.bytes.len() <= MAX_BODY_BYTES);
        let parsed = decode(&body.bytes).unwrap().jobs.unwrap();
        assert!(parsed.len() < jobs.len() && !parsed.is_empty());
    }
}
