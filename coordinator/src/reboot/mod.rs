//! This node's side of `@reboot` one-shots: which ones its executors ran ([`ran`], shared with
//! the cluster by the backend) and which are deferred until the cluster converges, with the
//! push that wakes their executor ([`deferred`]).
//!
//! The records kept in a shared store (RBT-20..23) are the lease backends' business: the
//! [`crate::lease::RebootRanStore`] seam, its client [`crate::lease::records_store`] and the
//! driver's side [`crate::lease::reboot_records`] live with the lease election, whose driver
//! reads and writes them on its rounds.

pub mod deferred;
pub mod ran;
