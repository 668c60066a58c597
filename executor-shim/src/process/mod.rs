//! Processes: spawning and supervising a firing's command (process groups, timeouts, the
//! output tail; [`runner`]) and reaping orphans as PID 1 ([`reaper`]).

pub mod reaper;
pub mod runner;
