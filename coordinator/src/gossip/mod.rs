//! The gossip backend (inventory §2): peers attest each other over mTLS and elect a
//! quorum-gated leader with no shared state.
//!
//! The decision rules live in the pure core (`cronstable_core::gossip`); this module is the
//! transport and the task around them:
//!
//! - [`tls`]: the mesh's rustls contexts from `cluster.tls`, and rotation fingerprints;
//! - [`wire`]: the bounded JSON `/peer` body and its ETag;
//! - [`server`]: the dedicated `/peer` listener;
//! - [`poller`]: polling one peer, with SAN pinning and one deadline per poll;
//! - [`node_stats`]: the display-only `X-Cronstable-Node-Stats` header (observability);
//! - [`manager`]: the [`manager::GossipBackend`] that runs rounds and publishes the view;
//! - [`observability`]: the election-inert mesh a lease backend runs for `/fleet` (GSP-113);
//! - [`certgen`]: a throwaway CA for the local demo and the tests.

pub mod certgen;
pub mod manager;
pub mod node_stats;
pub mod observability;
pub mod poller;
pub mod server;
pub mod tls;
pub mod wire;

pub use manager::{GossipBackend, GossipSettings};
