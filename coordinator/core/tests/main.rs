//! The core's tests in one binary (one link, one process): table, property, data-driven and
//! simulation tests of the pure decision core. Each module is one concern; the shared input
//! space of `decide` is in `common`. No I/O beyond reading `testdata/`, no network, no root:
//! part of the fast tier (README, Development).

mod common;

mod checker;
mod crontab_fixture;
mod crontab_parse;
mod crontab_props;
mod decide_exhaustive;
mod decide_table;
mod drift;
mod election;
mod fingerprint;
mod gossip_props;
mod gossip_sim;
mod gossip_table;
mod gossip_timed;
mod jobfile_parse;
mod purity;
mod quorum;
mod rendezvous;
mod schedule_datadriven;
mod schedule_props;
mod schedule_semantics;
mod yaml_props;
