//! Reaping orphans when the shim runs as PID 1 in a container.
//!
//! A job's background processes outlive it and are re-parented to PID 1; under crond-less
//! containers nobody else would collect them, and zombies pile up. The shim cannot simply call
//! `waitpid(-1)`: that would steal the exit status of its own job processes from the tokio
//! child handles that wait for them. So on every SIGCHLD (and every few seconds) it scans
//! `/proc` for zombie children that are not in the supervisor's table and reaps only those.

use std::time::Duration;

use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;
use tokio::signal::unix::{SignalKind, signal};

use crate::process::runner::Supervisor;

/// Reaps orphaned zombies until the task is dropped.
pub async fn reap_orphans(supervisor: Supervisor) {
    let mut sigchld = match signal(SignalKind::child()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot watch SIGCHLD; orphans will not be reaped");
            return;
        }
    };
    loop {
        tokio::select! {
            _ = sigchld.recv() => {}
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
        let reaped = reap_once(&supervisor);
        if reaped > 0 {
            tracing::debug!(reaped, "reaped orphaned processes");
        }
    }
}

/// One scan: reaps every zombie child of this process that the supervisor does not own.
pub fn reap_once(supervisor: &Supervisor) -> usize {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let table = supervisor.pids();
    let mut reaped = 0;
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if table.contains(pid) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some((state, ppid)) = parse_stat(&stat)
            && state == 'Z'
            && ppid == me
            && waitpid(Pid::from_raw(pid as i32), Some(WaitPidFlag::WNOHANG)).is_ok()
        {
            reaped += 1;
        }
    }
    reaped
}

/// The state and parent pid from a `/proc/PID/stat` line. The command name is in parentheses
/// and may itself contain spaces and parentheses, so parse from the last `)`.
fn parse_stat(stat: &str) -> Option<(char, u32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_state_and_parent_even_with_odd_command_names() {
        assert_eq!(parse_stat("42 (sleep) S 1 42 42 0 -1"), Some(('S', 1)));
        assert_eq!(parse_stat("43 (a b) (c)) Z 7 43"), Some(('Z', 7)));
        assert_eq!(parse_stat("garbage"), None);
    }
}
