//! Clock skew bounded between nodes, not only against the store (issue 43, item 3), with real
//! processes on a filesystem store: a holder whose clock is 1.4 s behind and a challenger 1.4 s
//! ahead (each within the 1.5 s the store allows, 2.8 s apart) under libfaketime, the holder
//! then cut off the store. The challenger takes over only after the holder has stopped, so no
//! instant of a per-second Leader job runs twice, and it does take over.
//!
//! The holder is cut off through its own path to the store: each node names the store by a
//! symbolic link of its own, and the holder's is swung to an empty directory, where every open
//! fails (a shared mount lost), while the challenger's still leads to the store. The pure rule
//! is table-tested in `store::filesystem::tests` (red there first: on its own clock the
//! challenger took over 0.8 s before the holder stopped).

use std::path::Path;

use cronstable_tests::lease::{Store, is_leader, start_lease_node_in, tick_shim, ticks};
use cronstable_tests::{Coordinator, skewed_cronstable, wait_for};

/// Points the link `link` at `target`, atomically (a new link renamed over the old one).
fn point(link: &Path, target: &Path) {
    let tmp = link.with_extension("new");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp).unwrap();
    std::fs::rename(&tmp, link).unwrap();
}

/// One cut: returns the instants the challenger ran after taking over.
fn cut_the_holder_behind_with_the_challenger_ahead(dir: &Path) -> usize {
    let store = dir.join("store");
    let nowhere = dir.join("nowhere");
    std::fs::create_dir_all(&store).unwrap();
    std::fs::create_dir_all(&nowhere).unwrap();
    let (a_link, b_link) = (dir.join("a-store"), dir.join("b-store"));
    point(&a_link, &store);
    point(&b_link, &store);
    let out = dir.join("ticks");

    let a = start_lease_node_in(
        skewed_cronstable("-1.4s"),
        dir,
        "a",
        &Store::Filesystem(a_link.clone()),
        3,
    );
    wait_for("a leads", || is_leader(a.web).filter(|l| *l));
    let b = start_lease_node_in(
        skewed_cronstable("+1.4s"),
        dir,
        "b",
        &Store::Filesystem(b_link),
        3,
    );
    wait_for("b follows", || is_leader(b.web).filter(|l| !*l));
    let _shims = (tick_shim(dir, &a, "a", &out), tick_shim(dir, &b, "b", &out));
    wait_for("a few ticks on a", || {
        (ticks(&out).values().filter(|n| n == &&["a"]).count() >= 3).then_some(())
    });
    point(&a_link, &nowhere);
    wait_for("b to take over", || is_leader(b.web).filter(|l| *l));
    let after = ticks(&out).len();
    wait_for("b's runs after the takeover", || {
        (ticks(&out).len() >= after + 3).then_some(())
    });
    let all = ticks(&out);
    let twice: Vec<_> = all.iter().filter(|(_, nodes)| nodes.len() > 1).collect();
    assert!(
        twice.is_empty(),
        "instants run on two nodes: {twice:?}\na:\n{}\nb:\n{}",
        a.proc.log(),
        b.proc.log()
    );
    drop((a, b) as (Coordinator, Coordinator));
    all.values().filter(|n| n == &&["b"]).count()
}

#[test]
fn a_challenger_ahead_takes_over_from_a_holder_behind_only_after_it_stopped() {
    // Two cuts, each with fresh processes in the same roles: every one is a chance for an
    // instant to fall inside an overlap.
    for round in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let ran = cut_the_holder_behind_with_the_challenger_ahead(dir.path());
        assert!(
            ran >= 3,
            "round {round}: the challenger never ran a Leader firing"
        );
    }
}
