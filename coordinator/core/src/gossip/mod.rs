//! The gossip backend's pure logic: what a node derives, each poll round, from the reports of
//! its peers (statuses, agreement, quorum, the confirmed-quorate candidates, the leader, spread
//! rings, conflicts, the convergence hold), and what it advertises in return.

pub mod report;

pub use report::{Distribution, MemberReport, PeerReport};
