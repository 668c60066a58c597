//! The gossip round itself: [`GossipState::round`] folds one round of poll outcomes into the
//! per-peer state and derives a [`RoundView`]. The rules are in the parent module's docs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::drift::{DriftStreak, PeerStatus, RoundOutcome};
use crate::quorum::{is_quorum, quorum_size};

use super::report::{
    Distribution, LocalNode, MAX_CANDIDATES, MAX_FIELD_BYTES, MemberReport, PeerReport,
};
use super::view::{Advert, ConflictKind, Conflicts, PeerView, RoundEvent, RoundView};

/// How many consecutive rounds a duplicate seen only one hop away must persist before it counts
/// (rule 6c): a restarted peer's new `instance_id` reaches witnesses up to about two rounds late,
/// so for two rounds a witness may still list the old id while another lists the new one.
pub const ONE_HOP_DUPLICATE_ROUNDS: u32 = 3;

/// Full rounds after the leader was last confirmed directly in which [`RoundView::recheck`]
/// may ask for refreshes (rule 4b): a witness's next round is at most an interval away, and a
/// round that falls just before it must still ask.
pub const RECHECK_ROUNDS: u32 = 2;

/// How many consecutive quorate rounds before this node counts itself as a candidate (rule 4):
/// one round for its own flag to reach its peers, one more for their vouching to reach the
/// peers' peers, and the current round.
pub const SELF_CANDIDATE_ROUNDS: u32 = 3;

/// What polling one configured peer gave this round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PollOutcome {
    /// No outcome this round: the peer has no status and counts nowhere. A peer whose poll
    /// is still out when the round closes is [`PollOutcome::Unreachable`] for the round, never
    /// its previous outcome: every outcome is read as this round's news.
    NotPolled,
    /// Connection failure or timeout; also a malformed or oversize body (the reason in `error`).
    Unreachable {
        /// Why, for `peers[].last_error`.
        error: String,
    },
    /// TLS or certificate verification failed.
    Untrusted {
        /// Why, for `peers[].last_error`.
        error: String,
    },
    /// A parsed, bounded report.
    Report(Arc<PeerReport>),
}

#[derive(Debug, Clone, Default)]
struct PeerState {
    streak: DriftStreak,
    status: Option<PeerStatus>,
    ever_polled: bool,
    self_logged: bool,
    last_name: Option<String>,
    last_instance: Option<String>,
    last_job_set: Option<String>,
}

/// The per-manager gossip state carried from round to round. Build a new one whenever the
/// manager is (re)built: streaks restart at 0 and the convergence hold starts again.
#[derive(Debug, Clone)]
pub struct GossipState {
    peers: Vec<PeerState>,
    started_at_ms: u64,
    converging: bool,
    degenerate_logged: bool,
    /// Consecutive quorate rounds, this one included (rule 4: when I count as my own candidate).
    quorate_streak: u32,
    /// Consecutive rounds each one-hop-only duplicate name has been seen.
    one_hop_streaks: BTreeMap<String, u32>,
    prev_conflicts: Conflicts,
    prev_truncated: usize,
    /// This node's executor is overdue: it is no candidate (rule 4).
    standing_down: bool,
    /// This state's round count (rule 4a measures in rounds).
    round_no: u64,
    /// The round this node began to lead, while it leads (rule 4a).
    lead_start: Option<u64>,
    /// The round each current candidate was first seen as one, continuously (rule 4a).
    first_seen: BTreeMap<String, u64>,
    /// Full rounds left in which an unconfirmed leader asks for refreshes (rule 4b).
    recheck_rounds: u32,
    /// The advert of the last fold made this node a candidate for its peers (quorate, not
    /// standing down): the votes they cast since were cast for what it still is (rule 4c).
    advertised_candidate: bool,
}

fn fits(s: &str) -> bool {
    s.len() <= MAX_FIELD_BYTES
}

fn live(status: PeerStatus) -> bool {
    matches!(
        status,
        PeerStatus::Agreed | PeerStatus::Syncing | PeerStatus::Drifted
    )
}

impl GossipState {
    /// A fresh state for `peer_count` configured peers, built at `started_at_ms`.
    pub fn new(peer_count: usize, started_at_ms: u64) -> Self {
        Self {
            peers: vec![PeerState::default(); peer_count],
            started_at_ms,
            converging: true,
            degenerate_logged: false,
            quorate_streak: 0,
            one_hop_streaks: BTreeMap::new(),
            prev_conflicts: Conflicts::default(),
            prev_truncated: 0,
            standing_down: false,
            round_no: 0,
            advertised_candidate: false,
            lead_start: None,
            first_seen: BTreeMap::new(),
            recheck_rounds: 0,
        }
    }

    /// Whether this node stands down from the next round on: an executor here let a Leader
    /// firing pass unasked, so another node must lead (rule 4). Standing down restarts the
    /// self-candidacy count, so a node that returns waits [`SELF_CANDIDATE_ROUNDS`] rounds,
    /// as after a boot (and then follows the node that took over, rule 4a).
    pub fn set_standing_down(&mut self, standing_down: bool) {
        self.standing_down = standing_down;
    }

    /// One poll round: `polls[i]` is the outcome for configured peer `i` (same order every
    /// round). Missing entries count as [`PollOutcome::NotPolled`]; extra ones are ignored.
    pub fn round(&mut self, local: &LocalNode, polls: &[PollOutcome], now_ms: u64) -> RoundView {
        self.fold(local, polls, now_ms, false)
    }

    /// An extra round between two [`Self::round`]s, taken when [`RoundView::recheck`] asks
    /// for one (rule 4b): the same rules on fresher reports, but it counts as no round. Every
    /// count measured in rounds (the drift streak, rule 4's quorate rounds, rule 4a's rounds
    /// of leadership, the one-hop duplicate debounce) stays as the last full round left it;
    /// only a loss (of quorum, of a candidate) takes effect at once, as it would in a round.
    pub fn refresh(&mut self, local: &LocalNode, polls: &[PollOutcome], now_ms: u64) -> RoundView {
        self.fold(local, polls, now_ms, true)
    }

    /// A round, or with `refreshing` a [`Self::refresh`].
    fn fold(
        &mut self,
        local: &LocalNode,
        polls: &[PollOutcome],
        now_ms: u64,
        refreshing: bool,
    ) -> RoundView {
        let mut events = Vec::new();
        let not_polled = PollOutcome::NotPolled;
        // This round's report per peer, `None` unless the outcome was a usable report.
        let mut reports: Vec<Option<&PeerReport>> = Vec::with_capacity(self.peers.len());
        let mut errors: Vec<Option<String>> = Vec::with_capacity(self.peers.len());

        for (i, peer) in self.peers.iter_mut().enumerate() {
            let poll = polls.get(i).unwrap_or(&not_polled);
            let mut scratch = peer.streak;
            let streak = if refreshing {
                &mut scratch
            } else {
                &mut peer.streak
            };
            let (mut status, report, error) = classify(local, poll, streak);
            if refreshing && matches!(status, Some(PeerStatus::Syncing | PeerStatus::Drifted)) {
                // A refresh counts no mismatched round: syncing or drifted as the streak stands.
                status = Some(peer.streak.mismatch_status(local.drift_after));
            }
            if !matches!(poll, PollOutcome::NotPolled) {
                peer.ever_polled = true;
            }
            if let Some(r) = report {
                peer.last_name = Some(r.node_name.clone());
                peer.last_instance = Some(r.instance_id.clone());
                peer.last_job_set = Some(r.job_set_id.clone());
            }
            if let Some(s) = status
                && peer.status != Some(s)
            {
                events.push(RoundEvent::PeerBecame { peer: i, status: s });
            }
            if status == Some(PeerStatus::SelfListing) && !peer.self_logged {
                peer.self_logged = true;
                events.push(RoundEvent::SelfListingRecognised { peer: i });
            }
            peer.status = status;
            reports.push(report);
            errors.push(error);
        }

        let self_count = self
            .peers
            .iter()
            .filter(|p| p.status == Some(PeerStatus::SelfListing))
            .count();
        // The node always counts itself, so N never drops below 1 whatever the input.
        let effective_size = local.configured_size.saturating_sub(self_count).max(1);
        let quorum = quorum_size(effective_size);
        if local.elect_leader && self_count > 0 && effective_size == 2 && !self.degenerate_logged {
            self.degenerate_logged = true;
            events.push(RoundEvent::DegenerateTwoOfTwo);
        }

        // Rule 3: direct and mutual agreement.
        let mut agreeing = BTreeSet::from([local.name.clone()]);
        let mut mutual = BTreeSet::new();
        let mut agreed_reports: Vec<&PeerReport> = Vec::new();
        for (peer, report) in self.peers.iter().zip(&reports) {
            if let (Some(PeerStatus::Agreed), Some(r)) = (peer.status, report) {
                agreeing.insert(r.node_name.clone());
                agreed_reports.push(r);
                if attests_me(local, r) {
                    mutual.insert(r.node_name.clone());
                }
            }
        }
        let quorate = is_quorum(1 + mutual.len(), effective_size);

        // Rule 4: candidates. `direct` is what this node may vouch for (rule 8). A node that
        // stands down is nobody's candidate, and a direct report saying so overrides a
        // witness's older vouching below.
        let mut standing: BTreeSet<String> = agreed_reports
            .iter()
            .filter(|r| r.standing_down)
            .map(|r| r.node_name.clone())
            .collect();
        if self.standing_down {
            standing.insert(local.name.clone());
        }
        let mut direct = BTreeSet::new();
        if quorate && !self.standing_down {
            direct.insert(local.name.clone());
        }
        for r in &agreed_reports {
            if r.quorate && !r.standing_down {
                direct.insert(r.node_name.clone());
            }
        }
        // My quorate flag reaches my peers one round late and their neighbours (through
        // vouching) two rounds late, so I count myself only once every node that can learn of
        // me has had the chance to (rule 4).
        self.quorate_streak = if !quorate || self.standing_down {
            0
        } else if refreshing {
            self.quorate_streak
        } else {
            self.quorate_streak.saturating_add(1)
        };
        // Rule 4c: every configured peer (two at least) agrees with me, attests me, elects me,
        // and has a higher name, and my last advert already made me their candidate. None of
        // them leads (each defers to me), none can outrank me by name, and each keeps
        // deferring at its next fold (it reads an advert of mine that still makes me a
        // candidate), so rule 4's wait buys nothing: I count myself now, for good. Only
        // first-hand votes count: the voter's own fold saw this incarnation quorate (its
        // `quorate_vouched` holds its direct sightings only, from the same fold whose members
        // attest my current instance). A vote cast on a witness's relay of my previous life's
        // claim would otherwise count, and that voter may stop deferring to me at its next
        // fold (the seven steps in `gossip_table.rs`).
        let peers_total = effective_size.saturating_sub(1);
        let elected_by_all = quorate
            && !self.standing_down
            && self.advertised_candidate
            && peers_total >= 2
            && agreed_reports.len() == peers_total
            && mutual.len() == peers_total
            && agreed_reports.iter().all(|r| {
                r.node_name > local.name
                    && r.elects.as_deref() == Some(local.name.as_str())
                    && attests_me(local, r)
                    && r.quorate_vouched.contains(&local.name)
            });
        if elected_by_all {
            self.quorate_streak = self.quorate_streak.max(SELF_CANDIDATE_ROUNDS);
        }
        let mut candidates = direct.clone();
        if self.quorate_streak < SELF_CANDIDATE_ROUNDS {
            candidates.remove(&local.name);
        }
        let mut vouched_unconfirmed = BTreeSet::new();
        for r in &agreed_reports {
            for name in &r.quorate_vouched {
                if name == &local.name
                    || !fits(name)
                    || direct.contains(name)
                    || standing.contains(name)
                {
                    continue;
                }
                candidates.insert(name.clone());
                vouched_unconfirmed.insert(name.clone());
            }
        }
        // Rule 4a: leadership is sticky (see the module docs for why this is safe).
        if !refreshing {
            self.round_no = self.round_no.saturating_add(1);
        }
        let round_no = self.round_no;
        self.first_seen.retain(|name, _| candidates.contains(name));
        for name in &candidates {
            self.first_seen.entry(name.clone()).or_insert(round_no);
        }
        let legacy = agreed_reports.iter().any(|r| r.leading.is_none());
        // A peer's own report from this round is fresher than any witness's relay of it: a
        // peer that does not list itself in `leading` does not lead now, whatever a witness
        // saw it do before (a leader restarted at once must not be followed for a round on an
        // old instance's claim).
        let denies: BTreeSet<&str> = self
            .peers
            .iter()
            .zip(&reports)
            .filter(|(p, _)| {
                matches!(
                    p.status,
                    Some(PeerStatus::Agreed | PeerStatus::Syncing | PeerStatus::Drifted)
                )
            })
            .filter_map(|(_, r)| *r)
            .filter(|r| {
                r.leading
                    .as_deref()
                    .is_some_and(|l| !l.contains(&r.node_name))
            })
            .map(|r| r.node_name.as_str())
            .collect();
        let mut seen_leading = BTreeSet::new();
        let mut claims = BTreeSet::new();
        for r in &agreed_reports {
            for name in r.leading.as_deref().unwrap_or_default() {
                if name == &local.name || !fits(name) || !candidates.contains(name) {
                    continue;
                }
                if name == &r.node_name {
                    seen_leading.insert(name.clone());
                } else if denies.contains(name.as_str()) {
                    continue;
                }
                claims.insert(name.clone());
            }
        }
        let me = &local.name;
        let incumbent_since = self.lead_start.filter(|_| candidates.contains(me));
        let leader = if !quorate
            || !local.elect_leader
            || local.distribution != Distribution::SingleLeader
        {
            None
        } else if legacy {
            candidates.first().cloned()
        } else if let Some(since) = incumbent_since {
            // I lead: a lower claimant wins; a lower candidate I saw appear within two rounds
            // of my first lead may not have seen my claim in time, so it wins too (the plain
            // rule); any other lower candidate joined a cluster that already had me leading.
            let lower_claim = claims.iter().find(|c| *c < me).cloned();
            // A lower candidate whose own report lists me as leading has seen my claim.
            let knows_my_claim = |c: &String| {
                agreed_reports.iter().any(|r| {
                    &r.node_name == c && r.leading.as_deref().is_some_and(|l| l.contains(me))
                })
            };
            let young = candidates.iter().take_while(|c| *c < me).any(|c| {
                self.first_seen.get(c).is_some_and(|&f| f < since + 2) && !knows_my_claim(c)
            });
            match lower_claim {
                Some(c) => Some(c),
                None if young => candidates.first().cloned(),
                None => Some(me.clone()),
            }
        } else {
            claims.first().or(candidates.first()).cloned()
        };
        let leads = leader.as_deref() == Some(me.as_str());
        // A lead begun in a refresh counts from the next full round: rule 4a's "two rounds"
        // must not shrink.
        self.lead_start = match (leads, self.lead_start) {
            (true, Some(since)) => Some(since),
            (true, None) => Some(round_no + u64::from(refreshing)),
            (false, _) => None,
        };
        // Rule 4b: the leader this node followed was confirmed directly and is now known only
        // through a witness (whose report may predate its going): ask for refreshes, since the
        // witness's next round, at most an interval away, will say. For the two full rounds
        // after the leader was last seen directly; a leader known only through a witness for
        // longer (a bridge) asks no more.
        let leader_direct = leader
            .as_ref()
            .is_some_and(|l| l == me || agreeing.contains(l));
        let unconfirmed = quorate && leader.is_some() && !leader_direct;
        let recheck = unconfirmed && self.recheck_rounds > 0;
        if !refreshing {
            self.recheck_rounds = if leader_direct {
                RECHECK_ROUNDS
            } else if unconfirmed {
                self.recheck_rounds.saturating_sub(1)
            } else {
                0
            };
        }
        if leads {
            seen_leading.insert(me.clone());
        }
        let mut incumbents = claims;
        if leads {
            incumbents.insert(me.clone());
        }

        let conflicts = self.conflicts(local, &reports, effective_size, refreshing);
        for kind in [
            ConflictKind::Names,
            ConflictKind::Size,
            ConflictKind::Policy,
        ] {
            match (self.prev_conflicts.has(kind), conflicts.has(kind)) {
                (false, true) => events.push(RoundEvent::ConflictOnset {
                    kind,
                    detail: conflicts.detail(kind),
                }),
                (true, false) => events.push(RoundEvent::ConflictCleared { kind }),
                _ => {}
            }
        }
        self.prev_conflicts = conflicts.clone();

        // Rule 7: the convergence hold, which once ended stays ended.
        if self.converging {
            let all_polled = self.peers.iter().all(|p| p.ever_polled);
            let all_attest = agreed_reports.iter().all(|r| attests_me(local, r));
            let deadline = self
                .started_at_ms
                .saturating_add(local.interval_ms.saturating_mul(2));
            if (all_polled && all_attest) || now_ms >= deadline {
                self.converging = false;
            }
        }

        // Rule 8: the advert.
        let members: Vec<MemberReport> = self
            .peers
            .iter()
            .zip(&reports)
            .filter_map(|(peer, report)| match (peer.status, report) {
                (Some(status), Some(r)) if status != PeerStatus::SelfListing => {
                    Some(MemberReport {
                        name: r.node_name.clone(),
                        instance_id: r.instance_id.clone(),
                        status,
                    })
                }
                _ => None,
            })
            .collect();
        let (quorate_vouched, candidates_truncated) = Advert::cap_vouched(&direct);
        if candidates_truncated != 0 && candidates_truncated != self.prev_truncated {
            events.push(RoundEvent::CandidatesTruncated {
                count: candidates_truncated,
            });
        }
        self.prev_truncated = candidates_truncated;
        self.advertised_candidate = quorate && !self.standing_down;
        let advert = Advert {
            members,
            mutual_agreeing: mutual.iter().cloned().collect(),
            // Standing down: no candidate for any peer, old or new (rule 4).
            quorate: quorate && !self.standing_down,
            quorate_vouched,
            candidates_truncated,
            cluster_size: effective_size,
            distribution: local.distribution,
            elect_leader: local.elect_leader,
            standing_down: self.standing_down,
            leading: seen_leading.iter().take(MAX_CANDIDATES).cloned().collect(),
            elects: leader.clone(),
        };

        let peers = self
            .peers
            .iter()
            .zip(errors)
            .map(|(p, last_error)| PeerView {
                status: p.status,
                mismatch_streak: p.streak.streak(),
                reported_name: p.last_name.clone(),
                reported_instance_id: p.last_instance.clone(),
                reported_job_set_id: p.last_job_set.clone(),
                last_error,
            })
            .collect();

        RoundView {
            peers,
            effective_size,
            quorum,
            reachable_agreeing: agreeing.clone(),
            agreeing,
            mutual_agreeing: mutual,
            quorate,
            self_candidate: candidates.contains(&local.name),
            candidates,
            vouched_unconfirmed,
            incumbents,
            recheck,
            leader,
            standing_down: standing,
            conflicts,
            converging: self.converging,
            advert,
            events,
        }
    }

    /// Rule 6: the three conflict gates, updating the one-hop debounce counters.
    fn conflicts(
        &mut self,
        local: &LocalNode,
        reports: &[Option<&PeerReport>],
        effective_size: usize,
        refreshing: bool,
    ) -> Conflicts {
        let mut names = BTreeSet::new();
        // Direct sightings this round: name -> instance ids (self-listings excluded).
        let mut direct: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        let mut sizes = BTreeSet::new();
        let mut policies = BTreeSet::new();
        for (peer, report) in self.peers.iter().zip(reports) {
            let (Some(status), Some(r)) = (peer.status, report) else {
                continue;
            };
            if status == PeerStatus::SelfListing {
                continue;
            }
            if status == PeerStatus::Conflict {
                names.insert(local.name.clone()); // 6a
            }
            direct
                .entry(r.node_name.as_str())
                .or_default()
                .insert(r.instance_id.as_str());
            if r.cluster_size != effective_size {
                sizes.insert(r.cluster_size);
            }
            if (r.distribution, r.elect_leader) != (local.distribution, local.elect_leader) {
                policies.insert(format!(
                    "{}: distribution={}, elect_leader={}",
                    r.node_name,
                    r.distribution.as_str(),
                    r.elect_leader
                ));
            }
        }
        for (name, ids) in &direct {
            if ids.len() > 1 {
                names.insert((*name).to_string()); // 6b
            }
        }

        // 6c: one hop, through the member lists of live peers.
        let mut hop: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for (peer, report) in self.peers.iter().zip(reports) {
            let (Some(status), Some(r)) = (peer.status, report) else {
                continue;
            };
            if !live(status) {
                continue;
            }
            for m in &r.members {
                if !live(m.status) || !fits(&m.name) || !fits(&m.instance_id) {
                    continue;
                }
                if m.name != local.name && direct.contains_key(m.name.as_str()) {
                    continue; // my direct observation is fresher
                }
                hop.entry(m.name.as_str())
                    .or_default()
                    .insert(m.instance_id.as_str());
            }
        }
        let suspects: BTreeSet<String> = hop
            .iter()
            .filter(|(name, ids)| {
                if **name == local.name {
                    ids.iter().any(|id| *id != local.instance_id)
                } else {
                    ids.len() > 1
                }
            })
            .map(|(name, _)| (*name).to_string())
            .collect();
        let mut streaks = std::mem::take(&mut self.one_hop_streaks);
        streaks.retain(|name, _| suspects.contains(name));
        for name in suspects {
            let n = streaks.entry(name.clone()).or_insert(0);
            // A refresh sees the suspect again but does not count a round (rule 4b).
            let seen = if refreshing { *n } else { n.saturating_add(1) };
            *n = seen;
            if seen >= ONE_HOP_DUPLICATE_ROUNDS {
                names.insert(name);
            }
        }
        self.one_hop_streaks = streaks;

        let sizes: Vec<usize> = if sizes.is_empty() {
            Vec::new()
        } else {
            sizes.insert(effective_size);
            sizes.into_iter().collect()
        };
        Conflicts {
            names: names.into_iter().collect(),
            sizes,
            policies: policies.into_iter().collect(),
        }
    }
}

/// Rule 1: status, usable report and error for one peer's outcome, folding it into the streak.
fn classify<'a>(
    local: &LocalNode,
    poll: &'a PollOutcome,
    streak: &mut DriftStreak,
) -> (Option<PeerStatus>, Option<&'a PeerReport>, Option<String>) {
    match poll {
        PollOutcome::NotPolled => (None, None, None),
        PollOutcome::Unreachable { error } => {
            streak.observe(RoundOutcome::Failed);
            (Some(PeerStatus::Unreachable), None, Some(error.clone()))
        }
        PollOutcome::Untrusted { error } => {
            streak.observe(RoundOutcome::Failed);
            (Some(PeerStatus::Untrusted), None, Some(error.clone()))
        }
        PollOutcome::Report(r) => {
            if !fits(&r.node_name) || !fits(&r.instance_id) || !fits(&r.job_set_id) {
                // The transport should have rejected it; treat it as the malformed body it is.
                streak.observe(RoundOutcome::Failed);
                let error = format!("report field longer than {MAX_FIELD_BYTES} bytes");
                return (Some(PeerStatus::Unreachable), None, Some(error));
            }
            let status = if r.node_name == local.name && r.instance_id == local.instance_id {
                streak.observe(RoundOutcome::SelfListing);
                PeerStatus::SelfListing
            } else if r.node_name == local.name {
                // A duplicate of me says nothing about a configured peer's job set.
                streak.observe(RoundOutcome::Failed);
                PeerStatus::Conflict
            } else if r.job_set_id == local.job_set_id {
                streak.observe(RoundOutcome::Agreed);
                PeerStatus::Agreed
            } else {
                streak.observe(RoundOutcome::Mismatched);
                streak.mismatch_status(local.drift_after)
            };
            (Some(status), Some(r.as_ref()), None)
        }
    }
}

/// True when `r` lists this incarnation (my name, my current instance id) as agreed (GSP-105).
fn attests_me(local: &LocalNode, r: &PeerReport) -> bool {
    r.members.iter().any(|m| {
        m.name == local.name && m.instance_id == local.instance_id && m.status == PeerStatus::Agreed
    })
}
