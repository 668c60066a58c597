//! The shared stores, one folder each. A store folder implements every aspect the coordinator
//! keeps in that store (the election's lease, the `@reboot` "already ran" records, retry
//! handoffs and, on etcd, the run ledger) and owns its connection, credentials, fake and tests.
//! The aspects' traits and store-independent logic live with the aspect ([`crate::lease`] for
//! the election, its `@reboot` records and handoffs; [`crate::ledger`] for the run ledger).

pub mod etcd;
pub mod filesystem;
pub mod kubernetes;
