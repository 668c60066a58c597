//! The pure decision core of cronstable.
//!
//! Everything here is plain data and functions: no async runtime, no sockets, no filesystem, no
//! clock reads. Time is always an argument. Both binaries (the coordinator and the executor
//! shim) depend on this crate; it depends on nothing that does I/O, and a test
//! (`tests/purity.rs`) keeps it that way.
//!
//! # Layout
//!
//! - [`checker`]: the schedule checker (targets, exact run matching, verdicts, SVG timeline).
//! - [`job`]: the job model (`JobSpec`, `ClusterPolicy`, retry and concurrency policies).
//! - [`decision`]: the per-firing decision table (`decide`).
//! - [`catch_up`]: bounded catch-up of missed Leader instants (settings, the owner's tracker).
//! - [`quorum`]: quorum math (`quorum_size`).
//! - [`election`]: the leader-election rule (`elect_leader`).
//! - [`rendezvous`]: highest-random-weight ownership of a job among members.
//! - [`mode`]: the election mode a coordinator tells its executors, with its generation.
//! - [`fingerprint`]: the job-set ID (`v1:` + SHA-256) and the cluster-wide firing ID.
//! - [`drift`]: the per-peer drift streak behind `driftAfter`.
//! - [`gossip`]: the gossip round: agreement, quorum, candidates, leader, conflicts, hold.
//! - [`schedule`]: crontab schedule semantics, with time zones and DST.
//! - [`crontab`]: the crontab file parser (cronie/Vixie compatible, with annotations).
//! - [`jobfile`]: the YAML job file parser.
//! - [`yaml`]: YAML deserialization with file, line and key path in every error.
//! - [`duration`]: the duration syntax of config and job files (`90s`, `1h30m`, `10`).

pub mod catch_up;
pub mod checker;
pub mod crontab;
pub mod decision;
pub mod drift;
pub mod duration;
pub mod election;
pub mod expect;
pub mod fingerprint;
pub mod gossip;
pub mod job;
pub mod jobfile;
pub mod mode;
pub mod quorum;
pub mod rendezvous;
pub mod schedule;
pub mod seeded;
pub mod yaml;

pub use decision::{Decision, Firing, FiringKind, Gate, ManagerView, Reason, Verdict, decide};
pub use job::{ClusterPolicy, ConcurrencyPolicy, JobSpec, RetryPolicy};
