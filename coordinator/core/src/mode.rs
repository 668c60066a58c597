//! The coordinator's election mode as it tells its executors, stamped with a generation.
//!
//! An executor that cannot reach its coordinator falls back to the seed's "no manager" row:
//! Leader jobs skip. That is wrong for a coordinator without election (every node runs every
//! job), so the executor remembers the last mode it was told and, while that mode is "off",
//! keeps running its jobs through a coordinator restart. The memory is dangerous the other way:
//! an executor that still believes "off" after its node joined a cluster runs Leader jobs beside
//! the elected leader. So the mode is said explicitly, never inferred:
//!
//! - every registration answer, Watch hello and ShouldRun answer carries an [`ElectionStamp`];
//! - a coordinator that stops gracefully sends a farewell stamp, which says "off" only when the
//!   config it will start with again still has election off, and "unknown" otherwise;
//! - stamps carry a generation (the process start's Unix milliseconds, +1 at each change of mode
//!   and at the farewell), so a late answer from a process that has moved on is ignored.
//!
//! [`Stamps`] is the coordinator's side; the executor's memory lives in the shim. Pure: the
//! start time is an argument.

/// Whether the coordinator elects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ElectionMode {
    /// Not known: an older coordinator that does not say, or a stopping one that cannot vouch
    /// for the config it will start with. An executor remembers nothing.
    #[default]
    Unknown,
    /// No election: every node runs every job.
    Off,
    /// A cluster elects: only the elected node runs Leader jobs.
    On,
}

impl ElectionMode {
    /// The name used in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            ElectionMode::Unknown => "unknown",
            ElectionMode::Off => "off",
            ElectionMode::On => "on",
        }
    }
}

/// A mode and the generation it was said in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ElectionStamp {
    /// The mode.
    pub mode: ElectionMode,
    /// Grows with every coordinator start and every change of mode within one process.
    pub generation: u64,
}

/// The stamps one coordinator process hands out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamps {
    current: ElectionStamp,
    /// Set by the farewell: from then on the process says only that.
    final_stamp: bool,
}

impl Stamps {
    /// A process started at `started_ms` (Unix milliseconds) in `mode`.
    pub fn new(mode: ElectionMode, started_ms: i64) -> Self {
        Self {
            current: ElectionStamp {
                mode,
                generation: u64::try_from(started_ms).unwrap_or(0),
            },
            final_stamp: false,
        }
    }

    /// The stamp for what the process says while it is in `mode`: a change of mode is a new
    /// generation. After the farewell the farewell stamp is all it says.
    pub fn stamp(&mut self, mode: ElectionMode) -> ElectionStamp {
        if !self.final_stamp && mode != self.current.mode {
            self.current = ElectionStamp {
                mode,
                generation: self.current.generation.saturating_add(1),
            };
        }
        self.current
    }

    /// The farewell of a process in `running` mode that will start again with `next` (`None`
    /// when it does not know): the running mode when the next start keeps it, else unknown.
    /// Always a new generation, so answers given before it cannot undo it.
    pub fn farewell(&mut self, running: ElectionMode, next: Option<ElectionMode>) -> ElectionStamp {
        let mode = match next {
            Some(next) if next == running => running,
            _ => ElectionMode::Unknown,
        };
        if !self.final_stamp {
            self.current = ElectionStamp {
                mode,
                generation: self.current.generation.saturating_add(1),
            };
            self.final_stamp = true;
        }
        self.current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_keeps_its_generation_until_its_mode_changes() {
        let mut s = Stamps::new(ElectionMode::Off, 1_000);
        let first = s.stamp(ElectionMode::Off);
        assert_eq!(first.generation, 1_000);
        assert_eq!(s.stamp(ElectionMode::Off), first);
        let on = s.stamp(ElectionMode::On);
        assert_eq!((on.mode, on.generation), (ElectionMode::On, 1_001));
    }

    #[test]
    fn the_farewell_is_final_and_vouches_only_for_an_unchanged_mode() {
        let mut s = Stamps::new(ElectionMode::Off, 1_000);
        let kept = s
            .clone()
            .farewell(ElectionMode::Off, Some(ElectionMode::Off));
        assert_eq!((kept.mode, kept.generation), (ElectionMode::Off, 1_001));
        // Into a cluster, or a config that cannot be read: unknown.
        let into_cluster = s
            .clone()
            .farewell(ElectionMode::Off, Some(ElectionMode::On));
        assert_eq!(into_cluster.mode, ElectionMode::Unknown);
        let unread = s.farewell(ElectionMode::Off, None);
        assert_eq!(
            (unread.mode, unread.generation),
            (ElectionMode::Unknown, 1_001)
        );
        // Answers after the farewell repeat it, whatever the view says.
        assert_eq!(s.stamp(ElectionMode::Off), unread);
        assert_eq!(
            s.farewell(ElectionMode::Off, Some(ElectionMode::Off)),
            unread
        );
    }
}
