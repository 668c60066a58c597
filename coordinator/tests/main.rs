//! The coordinator crate's integration tests in one binary: config fixtures and rules (files
//! on disk, errors naming key, file and line), the jobs file, and the gossip transport over
//! real mTLS on loopback sockets. No etcd, no root: part of the fast tier (README, Development).
//! The store tests that need a real etcd or root are in `tests/` (the integration tier).

mod config_fixtures;
mod config_jobs;
mod config_rules;
mod gossip_stop;
mod gossip_transport;
mod node_sim;
mod node_stats_header;
mod peer_harness;
