//! Rust bindings for the cronstable executor API, package `cronstable.v1`.
//!
//! The `.proto` file beside this crate (`proto/cronstable/v1/cronstable.proto`) is the contract
//! for every executor: the shim, the gate, and clients in other languages. [`v1`] re-exports
//! what `tonic-prost-build` generates from it; [`convert`] maps wire types to the core's domain
//! types, so nothing past the gRPC adapters of the coordinator and the shim sees prost types.

/// Generated messages, enums, the `Executor` client and the `Executor` server trait.
#[allow(missing_docs, unreachable_pub, clippy::all)]
pub mod v1 {
    tonic::include_proto!("cronstable.v1");
}

pub mod convert;

/// A random id for this process start, as the `instance_id` fields carry it (an executor's in
/// `RegisterJobs`, a gossip node's in its `/peer` report): 32 hex digits. `RandomState` is
/// seeded from the OS's randomness, so two processes (or two starts of one) never share one.
pub fn new_instance_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let word = || {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.finish()
    };
    format!("{:016x}{:016x}", word(), word())
}
