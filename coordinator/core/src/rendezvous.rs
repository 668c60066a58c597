//! Rendezvous (highest-random-weight) ownership of a job among cluster members, the rule behind
//! `distribution: spread` (seed 000, "Distribution"; inventory DST-01 to DST-04).
//!
//! Each (job, member) pair gets a pseudo-random [`weight`]; a job's [`owner`] is the member with
//! the highest weight. Unlike `hash % n`, removing a member moves only the jobs it owned (each
//! to its next-highest member) and adding one moves jobs only onto the newcomer, so a
//! membership change is minimally disruptive.
//!
//! Every coordinator, of every version, must compute the same owner from the same member set,
//! or two nodes may both believe they own a job. So the weight is a *specified* function with
//! checked-in golden vectors (`testdata/rendezvous/hrw_vectors.txt`), never `std`'s
//! `DefaultHasher`, whose algorithm may change between Rust releases.
//!
//! # The weight, exactly (scheme `hrw-v1`)
//!
//! ```text
//! input  = b"cronstable-hrw-v1\0"
//!          || u64_be(len(job))    || job     (UTF-8 bytes)
//!          || u64_be(len(member)) || member  (UTF-8 bytes)
//! weight = u64_be(SHA-256(input)[0..8])
//! ```
//!
//! The domain prefix keeps these digests apart from any other SHA-256 use in cronstable (the
//! job-set ID, the firing ID). The length prefixes make the encoding injective: `("ab", "c")`
//! and `("a", "bc")` hash different inputs. Changing any of this changes owners across a
//! mixed-version cluster, so it would need a new scheme name and a coordinated rollout.
//!
//! Which members to pass (agreeing members for Leader jobs, reachable agreeing ones for
//! PreferLeader, plus vouched-for unconfirmed peers for the thin-bridge deferral) is the
//! backend's decision (inventory DST-04, DST-10).

use sha2::{Digest, Sha256};

/// Domain-separation prefix of the `hrw-v1` weight. Part of the wire contract between
/// coordinators; see the module docs.
const DOMAIN: &[u8] = b"cronstable-hrw-v1\0";

/// The rendezvous weight of `member` for `job` under scheme `hrw-v1` (see the module docs for
/// the exact encoding). Pure and stable across platforms, processes and releases.
///
/// # Examples
///
/// ```
/// use cronstable_core::rendezvous::weight;
/// assert_eq!(weight("backup", "node-a"), weight("backup", "node-a"));
/// assert_ne!(weight("ab", "c"), weight("a", "bc")); // length-prefixed, so no collision
/// ```
pub fn weight(job: &str, member: &str) -> u64 {
    let mut hasher = Sha256::new();
    hasher.update(DOMAIN);
    // `usize` fits in `u64` on every platform Rust supports, so the prefix is lossless.
    hasher.update((job.len() as u64).to_be_bytes());
    hasher.update(job.as_bytes());
    hasher.update((member.len() as u64).to_be_bytes());
    hasher.update(member.as_bytes());
    let digest = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// The member that owns `job`: the one with the highest [`weight`], or `None` for no members.
///
/// Two different members tying on a 64-bit weight is astronomically unlikely, but the answer
/// must still be the same on every node, so a tie goes to the lower member name (byte-wise, as
/// in [`crate::election::elect_leader`]). Duplicate names are harmless: they carry the same
/// weight. The input order never matters.
///
/// # Examples
///
/// ```
/// use cronstable_core::rendezvous::owner;
/// let members = ["node-a", "node-b", "node-c"];
/// let o = owner("backup", members).unwrap();
/// assert!(members.contains(&o));
/// assert_eq!(owner("backup", ["node-c", "node-a", "node-b"]), Some(o));
/// assert_eq!(owner("backup", []), None);
/// ```
pub fn owner<'a>(job: &str, members: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    highest(
        members
            .into_iter()
            .map(|member| (weight(job, member), member)),
    )
}

/// The member with the highest weight, the lower name winning ties. Separate from [`owner`] so
/// the tie rule can be tested with made-up weights: real SHA-256 weights never tie.
fn highest<'a>(weighted: impl IntoIterator<Item = (u64, &'a str)>) -> Option<&'a str> {
    let mut best: Option<(u64, &'a str)> = None;
    for (w, member) in weighted {
        best = match best {
            // Keep the current best on a higher weight, or on an equal weight and a name that
            // is not higher (so the lower name wins ties, whatever order the names came in).
            Some((bw, bm)) if bw > w || (bw == w && bm <= member) => Some((bw, bm)),
            _ => Some((w, member)),
        };
    }
    best.map(|(_, member)| member)
}

#[cfg(test)]
mod tests {
    use super::highest;

    #[test]
    fn ties_go_to_the_lower_name_in_any_order() {
        assert_eq!(highest([(7, "b"), (7, "a"), (3, "0")]), Some("a"));
        assert_eq!(highest([(7, "a"), (7, "b"), (3, "0")]), Some("a"));
        assert_eq!(highest([(3, "0"), (7, "b"), (7, "a")]), Some("a"));
    }

    #[test]
    fn the_highest_weight_wins_over_a_lower_name() {
        assert_eq!(highest([(1, "a"), (9, "z")]), Some("z"));
        assert_eq!(highest([(9, "z"), (1, "a")]), Some("z"));
        assert_eq!(highest([]), None);
    }
}
