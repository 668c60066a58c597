//! What this node shows the operator about itself, beside the decisions: the Prometheus series
//! ([`metrics`]), leadership and quorum edges ([`events`]) sent to the `notify:` webhook
//! ([`notify`]), and the per-job run summary ([`summary`]) with its next fire ([`next_fire`])
//! that `GET /jobs`, the gossip `/peer` body and `GET /fleet` show, and this process's start,
//! instance and restart count ([`process`]), the machine's CPU and memory ([`host`]), and when
//! the configured TLS certificates expire ([`certificates`]). The per-job figures also go to statsd
//! ([`statsd`]). The expectation judge ([`expectations`]) reports the firings of jobs with
//! `expect:` that were missed, ran twice or ran too long. Everything here reads the view, the
//! ledger and the job set; nothing here feeds a decision.

pub mod breaches;
pub mod certificates;
pub mod events;
pub mod expectations;
pub mod host;
pub mod metrics;
pub mod next_fire;
pub mod notify;
pub mod process;
pub mod repeats;
pub mod signing;
pub mod statsd;
pub mod summary;
