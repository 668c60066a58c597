//! Exact matching of target windows to run start times (partition-checker.md §6).
//!
//! Each target is a closed window `[start, end]` and each run a point; a run serves at most one
//! target. [`greedy_by_deadline`] is exact for this convex bipartite graph: targets in order of
//! window end each take the earliest unused run at or after their start. [`merge`] is Jepsen's
//! linear fast path, exact (and identical to the greedy) whenever no window strictly contains
//! another; it refuses nested input rather than answer wrongly.

use std::collections::BTreeSet;

/// A closed window `[start, end]` in Unix ms.
pub type Window = (i64, i64);

/// True when some window strictly contains another, after sorting by (start, end): the ends are
/// then not non-decreasing and the merge is not exact.
pub fn nested(windows: &[Window]) -> bool {
    let mut sorted = windows.to_vec();
    sorted.sort_unstable();
    sorted.windows(2).any(|p| p[1].1 < p[0].1)
}

/// For each window, the index into `runs` (start times, sorted ascending) it is matched to.
/// Ties break deterministically: by window end, then start, then index; the earliest run wins.
pub fn greedy_by_deadline(windows: &[Window], runs: &[i64]) -> Vec<Option<usize>> {
    debug_assert!(runs.windows(2).all(|p| p[0] <= p[1]), "runs must be sorted");
    let mut order: Vec<usize> = (0..windows.len()).collect();
    order.sort_by_key(|&i| (windows[i].1, windows[i].0, i));
    let mut unused: BTreeSet<(i64, usize)> = runs.iter().copied().zip(0..).collect();
    let mut out = vec![None; windows.len()];
    for i in order {
        let (start, end) = windows[i];
        let first = unused.range((start, 0)..).next().copied();
        if let Some(run) = first.filter(|&(t, _)| t <= end) {
            unused.remove(&run);
            out[i] = Some(run.1);
        }
    }
    out
}

/// Jepsen's merge over windows and runs both sorted by start; `None` when windows are nested
/// (use [`greedy_by_deadline`] then).
pub fn merge(windows: &[Window], runs: &[i64]) -> Option<Vec<Option<usize>>> {
    if nested(windows) {
        return None;
    }
    let mut order: Vec<usize> = (0..windows.len()).collect();
    order.sort_by_key(|&i| (windows[i].0, windows[i].1, i));
    let mut out = vec![None; windows.len()];
    let mut r = 0;
    for i in order {
        let (start, end) = windows[i];
        while r < runs.len() && runs[r] < start {
            r += 1;
        }
        if r < runs.len() && runs[r] <= end {
            out[i] = Some(r);
            r += 1;
        }
    }
    Some(out)
}

/// The size of a matching.
pub fn size(m: &[Option<usize>]) -> usize {
    m.iter().flatten().count()
}
