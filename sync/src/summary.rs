//! Set digests that let two replicas skip unchanged documents wholesale.
//!
//! Every document has a digest over its id and sorted heads. A bucket (the first byte of
//! the id) digest is the XOR of its documents' digests, kept up to date in SQLite on every
//! write, so a summary never loads a document. The root digest hashes the 256 bucket
//! digests. Comparing roots costs one small message; comparing buckets one of 4 KiB; only
//! buckets that differ list their documents.
//!
//! Everything here is a pure function: no I/O, no clock.

use std::collections::{BTreeMap, BTreeSet};

use hearth_protocol::{Digest, DocEntry};
use sha2::{Digest as _, Sha256};

use crate::entity::DocId;

/// The digest of an empty bucket or an empty set.
pub const EMPTY: Digest = [0; 16];

/// Number of buckets.
pub const BUCKETS: usize = 256;

fn truncate(full: &[u8]) -> Digest {
    let mut out = [0u8; 16];
    out.copy_from_slice(&full[..16]);
    out
}

/// Digest of one document: SHA-256 over its id and sorted heads, truncated to 16 bytes.
pub fn doc_digest(id: &DocId, heads: &[[u8; 32]]) -> Digest {
    let mut sorted = heads.to_vec();
    sorted.sort_unstable();
    let mut h = Sha256::new();
    h.update(id.0);
    for head in &sorted {
        h.update(head);
    }
    truncate(&h.finalize())
}

/// XORs `b` into `a`: adding and removing a document digest are the same operation.
pub fn xor_into(a: &mut Digest, b: &Digest) {
    for (x, y) in a.iter_mut().zip(b) {
        *x ^= y;
    }
}

/// The root digest over all bucket digests; [`EMPTY`] for an empty set.
pub fn root_digest(buckets: &[Digest]) -> Digest {
    if buckets.iter().all(|b| *b == EMPTY) {
        return EMPTY;
    }
    let mut h = Sha256::new();
    for b in buckets {
        h.update(b);
    }
    truncate(&h.finalize())
}

/// What to do about each bucket after both sides exchanged bucket digests.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct BucketPlan {
    /// Buckets the peer has nothing in: send every document of ours whole.
    pub send_whole: Vec<u8>,
    /// Buckets both sides fill differently: list their entries.
    pub list: Vec<u8>,
}

/// Compares bucket digests. Both sides compute the same partition from the same pair.
pub fn plan_buckets(mine: &[Digest], theirs: &[Digest]) -> BucketPlan {
    let mut plan = BucketPlan::default();
    for (i, (m, t)) in mine.iter().zip(theirs).enumerate() {
        let bucket = i as u8;
        if m == t || *m == EMPTY {
            continue;
        }
        if *t == EMPTY {
            plan.send_whole.push(bucket);
        } else {
            plan.list.push(bucket);
        }
    }
    plan
}

/// What to do about each document of the listed buckets.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct EntryPlan {
    /// Documents the peer lacks: send whole.
    pub send_whole: Vec<DocId>,
    /// Documents both hold with different heads: run Automerge sync.
    pub sync: Vec<DocId>,
    /// Documents only the peer holds: expect them whole.
    pub expect: Vec<DocId>,
}

/// Compares the entries of the listed buckets.
pub fn plan_entries(mine: &[DocEntry], theirs: &[DocEntry]) -> EntryPlan {
    let theirs: BTreeMap<[u8; 16], Digest> = theirs.iter().map(|e| (e.id, e.digest)).collect();
    let mut plan = EntryPlan::default();
    let mut seen = BTreeSet::new();
    for e in mine {
        seen.insert(e.id);
        match theirs.get(&e.id) {
            None => plan.send_whole.push(DocId(e.id)),
            Some(d) if *d != e.digest => plan.sync.push(DocId(e.id)),
            Some(_) => {}
        }
    }
    plan.expect = theirs
        .keys()
        .filter(|id| !seen.contains(*id))
        .map(|id| DocId(*id))
        .collect();
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: u8, digest: u8) -> DocEntry {
        DocEntry {
            id: [id; 16],
            digest: [digest; 16],
        }
    }

    #[test]
    fn xor_is_order_free_and_self_inverse() {
        let a = doc_digest(&DocId([1; 16]), &[[5; 32]]);
        let b = doc_digest(&DocId([2; 16]), &[[6; 32], [7; 32]]);
        let mut x = EMPTY;
        xor_into(&mut x, &a);
        xor_into(&mut x, &b);
        let mut y = EMPTY;
        xor_into(&mut y, &b);
        xor_into(&mut y, &a);
        assert_eq!(x, y);
        xor_into(&mut x, &a);
        xor_into(&mut x, &b);
        assert_eq!(x, EMPTY);
    }

    #[test]
    fn heads_order_does_not_matter() {
        let id = DocId([3; 16]);
        assert_eq!(
            doc_digest(&id, &[[1; 32], [2; 32]]),
            doc_digest(&id, &[[2; 32], [1; 32]])
        );
        assert_ne!(
            doc_digest(&id, &[[1; 32]]),
            doc_digest(&DocId([4; 16]), &[[1; 32]])
        );
    }

    #[test]
    fn bucket_plan_partitions() {
        let mut mine = vec![EMPTY; 4];
        let mut theirs = vec![EMPTY; 4];
        mine[0] = [1; 16]; // only mine: send whole
        theirs[1] = [2; 16]; // only theirs: nothing to do here
        mine[2] = [3; 16];
        theirs[2] = [4; 16]; // both, differ: list
        mine[3] = [5; 16];
        theirs[3] = [5; 16]; // equal
        assert_eq!(
            plan_buckets(&mine, &theirs),
            BucketPlan {
                send_whole: vec![0],
                list: vec![2]
            }
        );
        assert_eq!(
            plan_buckets(&theirs, &mine),
            BucketPlan {
                send_whole: vec![1],
                list: vec![2]
            }
        );
        assert_eq!(root_digest(&[EMPTY; 3]), EMPTY);
    }

    #[test]
    fn entry_plan_finds_missing_and_changed() {
        let mine = [entry(1, 1), entry(2, 2), entry(3, 3)];
        let theirs = [entry(2, 2), entry(3, 9), entry(4, 4)];
        let plan = plan_entries(&mine, &theirs);
        assert_eq!(plan.send_whole, vec![DocId([1; 16])]);
        assert_eq!(plan.sync, vec![DocId([3; 16])]);
        assert_eq!(plan.expect, vec![DocId([4; 16])]);
    }
}
