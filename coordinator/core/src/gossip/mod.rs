//! The gossip backend's pure logic: what a node derives, each poll round, from the reports of
//! its peers (statuses, agreement, quorum, the confirmed-quorate candidates, the leader, spread
//! rings, conflicts, the convergence hold), and what it advertises in return.
//!
//! The coordinator's gossip manager polls every configured peer once per interval, turns each
//! result into a [`PollOutcome`], and calls [`GossipState::round`] with the outcomes in
//! configured order and a monotonic `now_ms`. The returned [`RoundView`] drives the gates, and
//! [`RoundView::report`] is what the node then serves on `/peer`. Before its first round a node
//! serves [`fresh_report`].
//!
//! # The rules (this is the spec; `tests/gossip_*.rs` check it)
//!
//! 1. **Per-peer status**, from this round's outcome only. A `Report` carrying my name *and* my
//!    `instance_id` is `self` (GSP-32): excluded from N and agreement, streak reset. My name
//!    with another `instance_id` is `conflict` (GSP-71); the streak is left alone, since such a
//!    report says nothing about the configured peer's job set. My job-set ID is `agreed`
//!    (streak reset). Any other job set is `syncing`, or `drifted` once the [`DriftStreak`]
//!    reaches `driftAfter` (GSP-20..23). `Unreachable`/`Untrusted` keep the streak as it was.
//!    `NotPolled` gives no status and the peer counts nowhere this round. A report with a name,
//!    instance id or job-set ID over [`MAX_FIELD_BYTES`] is treated as a malformed body
//!    (`unreachable`), which the transport should have caught already.
//! 2. **N** = configured size − peers currently `self` (never below 1); quorum = ⌊N/2⌋ + 1.
//!    `SelfListingRecognised` is emitted once per peer index (GSP-33), and
//!    `DegenerateTwoOfTwo` once per state when `electLeader` is on and self-listings leave N = 2
//!    (GSP-34).
//! 3. **Agreement.** `agreeing` = me ∪ names of `agreed` peers (each name once). An agreed peer
//!    P is **mutual** when P's `members` lists my name with my *current* `instance_id` as
//!    `agreed`; that is also P re-attesting this incarnation (GSP-105). **Quorate** =
//!    |{me} ∪ mutual| ≥ quorum.
//!
//!    Why mutual and not one-directional: take two quorate nodes A and B. Their mutual sets
//!    (each with its owner) are majorities of the same N, so they share a member W. W being
//!    mutual with A means A polled W *and* W polled A, so W holds A's report directly and, A
//!    being quorate, lists A in its `quorate_vouched`; likewise for B. A polls W, so A learns
//!    of B; B polls W, so B learns of A. With one-directional agreement the shared member
//!    might have been polled by both without polling either, and could vouch for neither.
//!    (If W is A or B itself, the same reasoning applies with the direct report.)
//! 4. **Candidates** (GSP-42, GSP-50, GSP-53): me once quorate for
//!    [`SELF_CANDIDATE_ROUNDS`] (3) rounds running (see below); every agreed peer whose report
//!    says `quorate: true`; and, one hop, every name in the `quorate_vouched` of an agreed peer
//!    (whatever that peer's own flag), my own name and over-long names excepted. Names known
//!    only the last way are `vouched_unconfirmed`. **Decision:** one agreed witness suffices
//!    to confirm a candidate. This is stronger than the seed's thin-bridge residual (a bridge
//!    thinner than quorum − 1 no longer leaves a double-run window once views converge), at
//!    the price of the GSP-52 stale-vouching skip. The single leader (single-leader
//!    distribution, `electLeader`, quorate) is the byte-wise lowest candidate; not quorate, no
//!    leader. By the argument in rule 3, two quorate nodes in a converged view each see the
//!    other as a candidate, so at most one of them is the lowest.
//!
//!    **Decision (delayed self-candidacy):** a peer's `quorate` flag is one round old when I
//!    read it directly, and two rounds old when it reaches me through a witness's
//!    `quorate_vouched`. So I count myself only once I have been quorate for three rounds in a
//!    row: by then every node that can learn of me (directly or one hop away) has. Without
//!    this, a cluster booting together goes quorate everywhere in the same round, before anyone
//!    has seen another's flag, and every node elects itself for an interval or two (the
//!    simulator found it: a 3-node bridge n1–n3–n2 had n1 and n2 both leading on round 3).
//!    The cost is two extra rounds before a node first leads after gaining quorum; losing
//!    quorum still stands it down at once. The advert's `quorate_vouched` (rule 8) still lists
//!    me as soon as I am quorate, so the others learn of me without that delay.
//!
//!    **Standing down** ([`GossipState::set_standing_down`]): a node whose executor let a
//!    Leader firing pass unasked (wedged or gone) is no candidate. It drops itself from its
//!    candidates and from its `quorate_vouched`, advertises `standing_down: true`, and its
//!    peers drop it from theirs as soon as they read that report, whatever a witness still
//!    vouches. It keeps counting toward every quorum (an executor's trouble says nothing
//!    about reachability), but advertises `quorate: false`, so a peer from before this rule,
//!    which reads only that flag, does not elect it either (otherwise such a peer and this
//!    node could each defer to the other and nobody would lead). Its self-candidacy count
//!    restarts, so when it stops standing down it counts itself only three rounds later, as
//!    after a boot; by then the node that took over leads, and rule 4a keeps the lead there.
//!    The names are in [`RoundView::standing_down`].
//!
//!    **4a. Sticky leadership** (the gossip-convergence issue). Each report lists in `leading`
//!    the nodes its reporter saw lead: itself when it leads, and agreed peers whose own report
//!    listed themselves (one hop, as `quorate_vouched`). A candidate listed there is a
//!    *claimant* ([`RoundView::incumbents`]). A node that does not lead elects the lowest
//!    claimant, and only with none the lowest candidate (GSP-40's rule). A node that leads
//!    keeps the lead against a lower candidate unless that candidate also claims (then the
//!    lowest claimant wins) or this node first saw it as a candidate within two rounds of its
//!    own first lead. So a node that returns to a cluster with a leader follows it, and a
//!    rejoin costs no Leader firing (before, the peers deferred to the returning lower name as
//!    soon as it reported quorate, while it waited out rule 4's three rounds).
//!
//!    Why two rounds: a claim reaches a node one hop away two rounds after it is made, and a
//!    node's quorate flag reaches the claimant as fast. A lower candidate L counts itself three
//!    rounds after it turns quorate (rule 4). If the claimant first saw L two or more rounds
//!    after its first lead, its claim is older than L's quorum, so L sees the claim before it
//!    would lead, and defers. If it saw L sooner, L may lead before the claim reaches it; the
//!    claimant then yields to L, as rule 4 always had it, and does so no later than L counts
//!    itself (rule 4's argument). The timed simulator (`tests/gossip_timed.rs`) checks this
//!    with independent clocks; the lockstep one with nodes standing down and returning.
//!
//!    A lower candidate whose own report already lists this node in `leading` has seen the
//!    claim, so it does not count as appearing too soon: a leader restarted at once (a deploy)
//!    comes back as a follower instead of pulling the lead back with a gap.
//!
//!    A peer's own report this round outranks a witness's relay of its claim: a claimant
//!    whose report (agreed, syncing or drifted) does not list itself in `leading` is no
//!    claimant, whatever a witness saw it do a round ago. A leader restarted at once comes
//!    back not leading while a witness still relays its old claim; following that relay
//!    leaves nobody leading until the witness's next round (the timed simulator lost three
//!    firings that way when the new instance's job set was published early).
//!
//!    A peer whose report has no `leading` at all predates this rule: while one is agreed, this
//!    node elects the plain lowest candidate, as that peer does. Only the old node's direct
//!    peers switch: across a bridge (a new node that sees the old one only through a witness)
//!    the two rules can disagree during a rolling upgrade, which README says to avoid.
//!
//!    **4c. Elected by all** (the gossip-convergence issue, cold start). Each report names in
//!    `elects` whom its reporter elects (its leader; itself when it leads). A quorate node
//!    that is byte-wise lower than every configured peer, with every one of them (two at
//!    least) agreed, mutual and electing it this round, and whose previous advert already
//!    made it their candidate (quorate, not standing down), counts itself at once instead of
//!    after rule 4's three rounds. Why it is safe: each voter defers to it, so none leads;
//!    none is lower, so none can outrank it by name when it counts itself; and each voter's
//!    next fold reads an advert of it that still makes it a candidate, so none starts to lead
//!    meanwhile. Without the previous-advert condition the lockstep simulator found two
//!    leaders: a node back from standing down used the votes its peers had cast before they
//!    saw it stand down. Only first-hand votes count: a voter's own report must attest this
//!    incarnation and list it in `quorate_vouched` (its direct sightings of quorate nodes,
//!    from the same fold), or a vote cast on a witness's relay of the node's previous life
//!    could elect its restarted self beside another leader (a seven-step sequence worked out
//!    on paper and pinned in `gossip_table.rs`; the seeded searches never isolated it). A peer without the field never votes, so a cluster with an older
//!    node keeps rule 4's wait. It covers the common cases, a joint boot and a restart of the
//!    lowest node with every node up; the timed simulator's cold start went from median 4.13
//!    to 3.12 intervals (1.08 with the boot refreshes of rule 4b's manager, below).
//!
//!    **4b. Rechecks** ([`GossipState::refresh`], [`RoundView::recheck`]). When the leader
//!    this node follows stops answering, a witness's report from before that still vouches for
//!    it (and lists its claim) until the witness's own next round, up to an interval later;
//!    waiting for this node's next round then costs up to another interval. So for the
//!    [`RECHECK_ROUNDS`] full rounds after the leader was last confirmed directly, a view
//!    whose leader is known only through a witness asks for a refresh: the same rules on
//!    fresher reports, taken a quarter interval later (the manager allows three between two
//!    rounds), which counts as no round for anything measured in rounds (the drift streak,
//!    rule 4's quorate rounds, rule 4a's two rounds, the one-hop debounce); a lead begun in a
//!    refresh counts from the next full round. Losses take effect at once, as in a round. A
//!    leader known only through a witness for longer (a bridge) asks no more.
//!
//!    The manager also takes refreshes (same budget) while it boots, for its first five
//!    intervals until it counts itself a candidate, and once, a quarter interval after its
//!    last fold at the earliest, when its own job set changes (a shim registered), so its
//!    peers read the new job set without waiting for its next round. With rule 4c this is
//!    what makes a cold start short: the attestation and the votes travel in quarter
//!    intervals (the timed simulator: median 1.08 intervals from the last start to the first
//!    leader, 3.12 with rule 4c alone). Rule 4's three rounds still count whole rounds.

//! 5. **Spread**: the coordinator places each Leader job by rendezvous over
//!    `agreeing ∪ vouched_unconfirmed`, and this node owns a job only when it is the owner
//!    *and* [`RoundView::self_candidate`] holds (rule 4's delay; `quorate` alone lets two
//!    bridged nodes own one job for a round or two after a joint boot). Rule 3's argument puts
//!    every other quorate node in that ring, so two owners compare the same pair of weights. `reachable_agreeing` (equal
//!    to `agreeing`) is the PreferLeader ring (GSP-43).
//! 6. **Conflicts**, each failing Leader jobs closed upstream, each with an onset and a clear
//!    event on the round it appears or goes:
//!    - *names*: (a) a direct peer in `conflict` puts my name in the list; (b) two direct
//!      reports this round with one name and different instance ids; (c) one hop: over the
//!      `members` entries (status agreed/syncing/drifted) of my agreed/syncing/drifted peers, a
//!      name with two or more instance ids, or my name with an id other than mine. Entries for
//!      names I see directly this round are ignored (my own observation is fresher), and a
//!      one-hop-only duplicate counts only once seen [`ONE_HOP_DUPLICATE_ROUNDS`] (3) rounds
//!      in a row: a restarted node's new id reaches the witnesses up to about two rounds late,
//!      so for a while one witness may still list the old id and another the new one.
//!    - *size* (GSP-80..85): a peer with a report (any status but `self`, whatever its job
//!      set) declaring a `cluster_size` other than my N. `sizes` lists every distinct size, mine
//!      included.
//!    - *policy* (GSP-90): such a peer with a different `(distribution, elect_leader)`.
//!    - the umbrella [`Conflicts::any`] is any of the three (GSP-92).
//! 7. **Convergence hold** (GSP-100..105): `converging` holds from [`GossipState::new`] until
//!    every configured peer has had an outcome other than `NotPolled` *and* every currently
//!    agreed peer is mutual, or until `now_ms ≥ started_at_ms + 2 × interval_ms`, whichever is
//!    first. Once ended it stays ended for that state.
//! 8. **Advert**: `members` has one entry per peer that sent a report this round (self-listings
//!    excluded); `mutual_agreeing` the mutual peers; `quorate_vouched` the *directly* confirmed
//!    candidates (me if quorate, agreed peers reporting quorate; neither while standing down),
//!    never one-hop names, so
//!    vouching travels one hop only. It is sorted and capped at [`MAX_CANDIDATES`], dropping
//!    the highest names; `candidates_truncated` is then the full directly-confirmed count.
//!    `leading` (rule 4a) lists me when I lead and the agreed peers whose own report lists
//!    themselves, capped the same way.
//! 9. No input panics; names over [`MAX_FIELD_BYTES`] in member or vouched lists are ignored.
//!
//! [`DriftStreak`]: crate::drift::DriftStreak

pub mod report;
mod round;
mod view;

pub use report::{
    Distribution, LocalNode, MAX_CANDIDATES, MAX_FIELD_BYTES, MemberReport, PeerReport,
};
pub use round::{
    GossipState, ONE_HOP_DUPLICATE_ROUNDS, PollOutcome, RECHECK_ROUNDS, SELF_CANDIDATE_ROUNDS,
};
pub use view::{Advert, ConflictKind, Conflicts, PeerView, RoundEvent, RoundView, fresh_report};
