//! What runs when: reading the crontab or job file ([`source`]) and the pure planning of due
//! and missed instants ([`plan`]).

pub mod plan;
pub mod source;
