//! Leadership and quorum edges of this node, for the transition counters and `notify:`.
//!
//! One task watches the cluster view. A view can change role without a new snapshot (a lease
//! holder's local deadline passing), so the task also re-reads the view every second and
//! judges it at that moment with the same `*_at(now)` accessors the gate uses. Every edge
//! counts in `cronstable_cluster_{leader,quorum}_transitions_total`; a leadership edge either
//! way is a `leader_change` event and a lost quorum a `quorum_loss` event (regaining quorum is
//! counted, not paged: the matching `leader_change` says the node is back at work).

use std::time::Duration;

use serde_json::json;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::clock::now_ms;
use crate::cluster::{ClusterView, Election};
use crate::config::NotifyEvent;
use crate::observe::metrics::Metrics;
use crate::observe::notify::Notifier;

/// How often the view is judged even when no new snapshot arrives.
const RECHECK: Duration = Duration::from_secs(1);

/// This node's role at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Role {
    /// Whether a quorum (or a fresh store read) is visible.
    pub quorate: bool,
    /// Whether this node is the quorum-gated leader.
    pub leader: bool,
    /// The leader this node sees, if any.
    pub leader_name: Option<String>,
}

/// The role `view` gives this node at `now`; `None` with election off (no roles to change).
pub fn role_at(view: &ClusterView, now: Instant) -> Option<Role> {
    match &view.election {
        Election::Off => None,
        Election::NoManager { .. } | Election::Starting => Some(Role::default()),
        Election::Managed(m) => {
            let leader_name = m.leader_at(&view.node_name, now).map(str::to_owned);
            Some(Role {
                quorate: m.quorate_at(now),
                leader: leader_name.as_deref() == Some(view.node_name.as_str()),
                leader_name,
            })
        }
    }
}

/// Counts and reports edges between two roles.
fn on_edge(node: &str, old: &Role, new: &Role, metrics: &Metrics, notifier: Option<&Notifier>) {
    let at = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(now_ms())
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    if old.leader != new.leader {
        metrics.leader_transition();
        if let Some(n) = notifier {
            let what = if new.leader { "acquired" } else { "lost" };
            n.send(
                NotifyEvent::LeaderChange,
                json!({
                    "event": "leader_change", "node": node, "at": at,
                    "is_leader": new.leader, "leader": new.leader_name, "quorate": new.quorate,
                    "message": format!("{node} {what} scheduled-job leadership"),
                }),
            );
        }
    }
    if old.quorate != new.quorate {
        metrics.quorum_transition();
        if !new.quorate
            && let Some(n) = notifier
        {
            n.send(
                NotifyEvent::QuorumLoss,
                json!({
                    "event": "quorum_loss", "node": node, "at": at, "quorate": false,
                    "message": format!("{node} lost its quorum; its Leader jobs stand down"),
                }),
            );
        }
    }
}

/// Watches `view` until `stop` resolves or the view's writer is gone. `notifier` is asked at
/// each edge, so an edge after a config reload goes to the webhook the reload configured.
pub async fn watch_roles(
    mut view: watch::Receiver<ClusterView>,
    metrics: Metrics,
    notifier: impl Fn() -> Option<Notifier>,
    stop: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(stop);
    // A node starts with no role: gaining leadership at boot is an edge like any other.
    let mut last = Role::default();
    loop {
        let (node, role) = {
            let v = view.borrow_and_update();
            (v.node_name.clone(), role_at(&v, Instant::now()))
        };
        if let Some(role) = role {
            on_edge(&node, &last, &role, &metrics, notifier().as_ref());
            last = role;
        }
        tokio::select! {
            () = &mut stop => return,
            changed = view.changed() => if changed.is_err() { return },
            () = tokio::time::sleep(RECHECK) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ManagedView;

    fn managed(quorate: bool, leader: Option<&str>) -> ClusterView {
        let mut v = ClusterView::election_off("a");
        v.election = Election::Managed(ManagedView {
            quorate,
            leader: leader.map(str::to_owned),
            ..ManagedView::default()
        });
        v
    }

    #[test]
    fn role_follows_the_view_and_its_deadlines() {
        let now = Instant::now();
        assert_eq!(role_at(&ClusterView::election_off("a"), now), None);
        let r = role_at(&managed(true, Some("a")), now).unwrap();
        assert!(r.leader && r.quorate);
        let r = role_at(&managed(true, Some("b")), now).unwrap();
        assert!(!r.leader && r.quorate);
        assert_eq!(r.leader_name.as_deref(), Some("b"));
        let mut v = managed(true, Some("a"));
        if let Election::Managed(m) = &mut v.election {
            m.lead_until = Some(now);
        }
        assert!(
            !role_at(&v, now).unwrap().leader,
            "past its deadline a node leads nothing"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn edges_are_counted_once_each() {
        let metrics = Metrics::new();
        let (tx, rx) = watch::channel(managed(false, None));
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(watch_roles(rx, metrics.clone(), || None, async {
            let _ = stop_rx.await;
        }));
        let settle = || tokio::time::sleep(Duration::from_millis(10));
        settle().await;
        tx.send(managed(true, Some("a"))).unwrap();
        settle().await;
        // The periodic re-check sees the same role: no new edge.
        tokio::time::sleep(RECHECK * 3).await;
        tx.send(managed(false, None)).unwrap();
        settle().await;
        let _ = stop_tx.send(());
        task.await.unwrap();
        let text = metrics.render(&json!({"enabled": true}));
        assert!(
            text.contains("cronstable_cluster_leader_transitions_total 2"),
            "{text}"
        );
        assert!(
            text.contains("cronstable_cluster_quorum_transitions_total 2"),
            "{text}"
        );
    }
}
