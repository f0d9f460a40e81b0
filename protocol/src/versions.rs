//! Protocol versions: which versions of `hearth/sync/N`, `hearth/pair/N` and
//! `hearth/rpc/N` a build speaks, their ALPNs, how two sides pick the highest version
//! they share, and the unversioned `hearth/versions` exchange that tells a peer sharing
//! none which side must update.
//!
//! The version is negotiated by TLS ALPN: the dialer offers every version it speaks, the
//! accepting side lists its own, highest first, and the handshake picks the first shared
//! one; the connection's ALPN says which. When none is shared the handshake fails, and
//! the dialer asks `hearth/versions` for the other side's range. That exchange's format
//! ([`VersionInfo`]) never changes: plain text, bounded, decoded without panics.
//!
//! Pure: no I/O.

use std::fmt;

/// The `hearth/sync/N` versions this build speaks, oldest first.
pub const SYNC_VERSIONS: &[u16] = &[1];
/// The `hearth/pair/N` versions this build speaks, oldest first.
/// `2` adds the hub's relay to the approval (see `PairResponse::ApprovedWithRelay`).
pub const PAIR_VERSIONS: &[u16] = &[1, 2];
/// The `hearth/rpc/N` versions this build speaks, oldest first.
pub const RPC_VERSIONS: &[u16] = &[1];

/// ALPN of the unversioned exchange of supported versions; open to any key, it reveals
/// nothing but version numbers.
pub const ALPN_VERSIONS: &[u8] = b"hearth/versions";

/// The most bytes a [`VersionInfo`] may take on the wire.
pub const MAX_VERSION_INFO: usize = 1024;
/// The most versions per protocol a [`VersionInfo`] may list.
const MAX_VERSIONS: usize = 32;

/// A versioned protocol family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Document replication, `hearth/sync/N`.
    Sync,
    /// Device pairing, `hearth/pair/N`.
    Pair,
    /// Requests a node relays to its hub's API, `hearth/rpc/N`.
    Rpc,
}

impl Family {
    fn prefix(self) -> &'static str {
        match self {
            Self::Sync => "hearth/sync/",
            Self::Pair => "hearth/pair/",
            Self::Rpc => "hearth/rpc/",
        }
    }

    /// The family's name as the versions exchange writes it (`sync`, `pair`, `rpc`).
    pub fn key(self) -> &'static str {
        match self {
            Self::Sync => "sync",
            Self::Pair => "pair",
            Self::Rpc => "rpc",
        }
    }
}

/// The ALPN of `version` of `family` (`hearth/sync/2`).
pub fn alpn(family: Family, version: u16) -> Vec<u8> {
    format!("{}{version}", family.prefix()).into_bytes()
}

/// The ALPNs of `versions`, highest first (the order an accepting side lists them in, so
/// the handshake picks the highest shared version).
pub fn alpns(family: Family, versions: &[u16]) -> Vec<Vec<u8>> {
    let mut v = versions.to_vec();
    v.sort_unstable_by(|a, b| b.cmp(a));
    v.dedup();
    v.into_iter().map(|n| alpn(family, n)).collect()
}

/// The version an ALPN of `family` names, if it is one (`hearth/sync/2` → 2).
pub fn alpn_version(family: Family, alpn: &[u8]) -> Option<u16> {
    let rest = alpn.strip_prefix(family.prefix().as_bytes())?;
    let text = std::str::from_utf8(rest).ok()?;
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) || text.starts_with('0') {
        return None;
    }
    text.parse().ok()
}

/// How two version sets relate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compat {
    /// Both speak this version (the highest they share).
    Shared(u16),
    /// Every version the peer speaks is older than ours: the peer must update.
    PeerTooOld,
    /// Every version the peer speaks is newer than ours: we must update.
    PeerTooNew,
    /// The ranges interleave without a shared version (or one side lists none).
    Disjoint,
}

/// Compares our versions with the peer's.
pub fn compare(ours: &[u16], theirs: &[u16]) -> Compat {
    if let Some(v) = ours.iter().filter(|v| theirs.contains(v)).max() {
        return Compat::Shared(*v);
    }
    match (
        ours.iter().min(),
        ours.iter().max(),
        theirs.iter().min(),
        theirs.iter().max(),
    ) {
        (Some(_), Some(our_max), Some(their_min), Some(_)) if their_min > our_max => {
            Compat::PeerTooNew
        }
        (Some(our_min), Some(_), Some(_), Some(their_max)) if their_max < our_min => {
            Compat::PeerTooOld
        }
        _ => Compat::Disjoint,
    }
}

/// What a node tells its owner when it shares no `family` version with its hub: which
/// side to update, naming both sides' versions.
pub fn mismatch_message(family: Family, node: &[u16], hub: &[u16]) -> Option<String> {
    let what = family.key();
    let both = format!(
        "the hub speaks {what} {}, this node {what} {}",
        list(hub),
        list(node)
    );
    match compare(node, hub) {
        Compat::Shared(_) => None,
        Compat::PeerTooOld => Some(format!("the hub is too old: update the hub ({both})")),
        Compat::PeerTooNew => Some(format!(
            "this node is too old for its hub: update this node ({both})"
        )),
        Compat::Disjoint => Some(format!(
            "the hub and this node share no protocol version: update both to the same release ({both})"
        )),
    }
}

fn list(versions: &[u16]) -> String {
    if versions.is_empty() {
        return "none".into();
    }
    let v: Vec<String> = versions.iter().map(u16::to_string).collect();
    v.join(",")
}

/// The versions one side speaks, as exchanged on [`ALPN_VERSIONS`].
///
/// Wire format (fixed forever): UTF-8 lines `hearth-versions`, `sync <v> <v>…`,
/// `pair <v> <v>…`, and `rpc <v> <v>…` when the side speaks rpc at all; unknown lines
/// are ignored, so later releases may add protocols.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionInfo {
    /// `hearth/sync/N` versions.
    pub sync: Vec<u16>,
    /// `hearth/pair/N` versions.
    pub pair: Vec<u16>,
    /// `hearth/rpc/N` versions (empty from a side that predates rpc).
    pub rpc: Vec<u16>,
}

/// Why a [`VersionInfo`] could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VersionInfoError {
    /// More than [`MAX_VERSION_INFO`] bytes.
    #[error("version info of {0} bytes exceeds {MAX_VERSION_INFO}")]
    TooLong(usize),
    /// Not the format above.
    #[error("malformed version info: {0}")]
    Malformed(&'static str),
}

impl VersionInfo {
    /// What this build speaks.
    pub fn current() -> Self {
        Self {
            sync: SYNC_VERSIONS.to_vec(),
            pair: PAIR_VERSIONS.to_vec(),
            rpc: RPC_VERSIONS.to_vec(),
        }
    }

    /// The versions of `family`.
    pub fn of(&self, family: Family) -> &[u16] {
        match family {
            Family::Sync => &self.sync,
            Family::Pair => &self.pair,
            Family::Rpc => &self.rpc,
        }
    }

    /// Encodes as the wire format.
    pub fn encode(&self) -> Vec<u8> {
        self.to_string().into_bytes()
    }

    /// Decodes the wire format.
    pub fn decode(bytes: &[u8]) -> Result<Self, VersionInfoError> {
        if bytes.len() > MAX_VERSION_INFO {
            return Err(VersionInfoError::TooLong(bytes.len()));
        }
        let text =
            std::str::from_utf8(bytes).map_err(|_| VersionInfoError::Malformed("not UTF-8"))?;
        let mut lines = text.lines();
        if lines.next() != Some("hearth-versions") {
            return Err(VersionInfoError::Malformed("no hearth-versions header"));
        }
        let mut out = Self::default();
        for line in lines {
            let mut words = line.split_ascii_whitespace();
            let target = match words.next() {
                Some("sync") => &mut out.sync,
                Some("pair") => &mut out.pair,
                Some("rpc") => &mut out.rpc,
                _ => continue,
            };
            for w in words {
                if target.len() >= MAX_VERSIONS {
                    return Err(VersionInfoError::Malformed("too many versions"));
                }
                let v = w
                    .parse::<u16>()
                    .map_err(|_| VersionInfoError::Malformed("a version is not a number"))?;
                target.push(v);
            }
        }
        Ok(out)
    }
}

impl fmt::Display for VersionInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "hearth-versions")?;
        for (key, v) in [
            ("sync", &self.sync),
            ("pair", &self.pair),
            ("rpc", &self.rpc),
        ] {
            // A side that speaks no rpc says nothing about it (as releases before it did).
            if key == "rpc" && v.is_empty() {
                continue;
            }
            write!(f, "{key}")?;
            for n in v.iter().take(MAX_VERSIONS) {
                write!(f, " {n}")?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn alpns_round_trip_and_list_highest_first() {
        assert_eq!(alpn(Family::Sync, 1), b"hearth/sync/1");
        assert_eq!(alpn(Family::Sync, 1), crate::ALPN_SYNC);
        assert_eq!(alpn(Family::Pair, 1), crate::ALPN_PAIR);
        assert_eq!(alpn(Family::Rpc, 1), crate::ALPN_RPC);
        assert_eq!(alpn_version(Family::Rpc, b"hearth/rpc/3"), Some(3));
        assert_eq!(
            alpns(Family::Sync, &[1, 3, 2, 3]),
            [
                b"hearth/sync/3".to_vec(),
                b"hearth/sync/2".to_vec(),
                b"hearth/sync/1".to_vec()
            ]
        );
        assert_eq!(alpn_version(Family::Sync, b"hearth/sync/12"), Some(12));
        assert_eq!(alpn_version(Family::Pair, b"hearth/sync/1"), None);
        for bad in [
            &b"hearth/sync/"[..],
            b"hearth/sync/01",
            b"hearth/sync/x",
            b"hearth/sync/99999",
        ] {
            assert_eq!(alpn_version(Family::Sync, bad), None, "{bad:?}");
        }
    }

    #[test]
    fn compare_picks_the_highest_shared_or_says_who_is_behind() {
        assert_eq!(compare(&[1, 2], &[1]), Compat::Shared(1));
        assert_eq!(compare(&[1, 2], &[1, 2, 3]), Compat::Shared(2));
        assert_eq!(compare(&[2], &[1]), Compat::PeerTooOld);
        assert_eq!(compare(&[1], &[2, 3]), Compat::PeerTooNew);
        assert_eq!(compare(&[1, 3], &[2]), Compat::Disjoint);
        assert_eq!(compare(&[1], &[]), Compat::Disjoint);
    }

    #[test]
    fn mismatch_messages_name_the_side_to_update_and_both_versions() {
        assert_eq!(mismatch_message(Family::Sync, &[1, 2], &[1]), None);
        assert_eq!(
            mismatch_message(Family::Sync, &[2], &[1]).as_deref(),
            Some("the hub is too old: update the hub (the hub speaks sync 1, this node sync 2)")
        );
        let m = mismatch_message(Family::Sync, &[1], &[2, 3]).unwrap_or_default();
        assert!(
            m.starts_with("this node is too old for its hub: update this node"),
            "{m}"
        );
    }

    #[test]
    fn version_info_golden_bytes_and_round_trip() {
        let info = VersionInfo {
            sync: vec![1, 2],
            pair: vec![1],
            rpc: Vec::new(),
        };
        assert_eq!(info.encode(), b"hearth-versions\nsync 1 2\npair 1\n");
        assert_eq!(VersionInfo::decode(&info.encode()), Ok(info));
        let with_rpc = VersionInfo::current();
        assert_eq!(
            with_rpc.encode(),
            b"hearth-versions\nsync 1\npair 1 2\nrpc 1\n"
        );
        assert_eq!(VersionInfo::decode(&with_rpc.encode()), Ok(with_rpc));
        // Later releases may add lines; this one ignores them.
        let later = b"hearth-versions\nsync 3\nrpc 1 2\nchat 7\npair 2\n";
        assert_eq!(
            VersionInfo::decode(later),
            Ok(VersionInfo {
                sync: vec![3],
                pair: vec![2],
                rpc: vec![1, 2],
            })
        );
        assert!(VersionInfo::decode(b"hello").is_err());
        assert!(VersionInfo::decode(&[b'x'; MAX_VERSION_INFO + 1]).is_err());
        assert!(VersionInfo::decode(b"hearth-versions\nsync 1 x\n").is_err());
    }

    proptest! {
        #[test]
        fn decoding_any_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let _ = VersionInfo::decode(&bytes);
        }

        #[test]
        fn decoding_versionish_text_never_panics(text in "hearth-versions\n(sync|pair|rpc|x)( [0-9]{1,6}){0,40}\n") {
            let _ = VersionInfo::decode(text.as_bytes());
        }
    }
}
