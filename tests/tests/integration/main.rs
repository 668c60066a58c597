//! The integration tier in one binary: real `cronstable` and `cronstable-shim` processes on
//! loopback sockets, a real etcd, real mTLS, Debian's cron and a headless Chromium. Each module
//! is one feature seen from outside; the shared launchers are in the `cronstable-tests` library
//! (`tests/src`). Needs what `tests/run.sh` installs, not root: root-only tests (network
//! namespaces, mount namespaces, `chattr`) are in the `lab` binary.

mod api_auth;
mod catch_up;
mod clock_skew;
mod dashboard_browser;
mod deploy_artifacts;
mod etcd_credentials;
mod etcd_handoff;
mod etcd_ledger;
mod etcd_store;
mod expectations;
mod filesystem_store;
mod firing_claims;
mod gate;
mod gate_cron;
mod gate_signals;
mod gossip_cluster;
mod gossip_rules;
mod grpc_batch;
mod lease_failover;
mod lease_observability;
mod lease_pause;
mod lease_rules;
mod lifecycle;
mod monitoring;
mod observability;
mod one_executor;
mod peer_flood;
mod prefer_leader_lease;
mod reboot_gossip;
mod reboot_lease;
mod reboot_reload;
mod reload;
mod reload_table;
mod resilience;
mod retry_handoff;
mod retry_handoff_abandon;
mod single_node;
mod skew_pair;
mod start_deadline;
mod statsd;
mod verify;
mod web_api;
mod wedged_shim;
