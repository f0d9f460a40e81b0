//! [`fingerprint`]: the short, human-comparable fingerprint of a device key.
//!
//! `hearth pair` prints the hub's fingerprint and its own; `hearth-hub devices approve`
//! and the pending list print the requesting device's. Both sides compute it here, from
//! the 32 bytes of the ed25519 public key (the iroh endpoint id), so the owner can check
//! that the device being approved is the one in front of them. This module must never
//! decide anything on a fingerprint: 40 bits are for people to compare, not for trust.

use sha2::{Digest, Sha256};

/// Domain separation: the fingerprint is a hash of the key under this label.
const FINGERPRINT_DOMAIN: &[u8] = b"hearth fingerprint v1\0";
/// RFC 4648 base32 alphabet (upper case, digits 2-7).
const BASE32: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// The short fingerprint of a public key: the first 40 bits of
/// SHA-256(`"hearth fingerprint v1\0"` ‖ key) in base32, grouped as `XXXX-XXXX`.
pub fn fingerprint(key: &[u8; 32]) -> String {
    let mut h = Sha256::new();
    h.update(FINGERPRINT_DOMAIN);
    h.update(key);
    let digest = h.finalize();
    let bits = digest
        .iter()
        .take(5)
        .fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
    let mut out = String::with_capacity(9);
    for i in 0..8 {
        if i == 4 {
            out.push('-');
        }
        let idx = ((bits >> (35 - 5 * i)) & 31) as usize;
        out.push(BASE32[idx] as char);
    }
    out
}

/// The fingerprint of a textual node id (as stored in `hub.db`), or `None` if the text is
/// not a node id.
pub fn fingerprint_of_id(node_id: &str) -> Option<String> {
    node_id
        .parse::<iroh::EndpointId>()
        .ok()
        .map(|id| fingerprint(id.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_and_shape() {
        let fp = fingerprint(&[0u8; 32]);
        assert_eq!(fp.len(), 9);
        assert_eq!(&fp[4..5], "-");
        assert!(fp
            .chars()
            .filter(|c| *c != '-')
            .all(|c| BASE32.contains(&(c as u8))));
        // Pinned (computed independently with Python's hashlib): both sides of every
        // release must agree on these characters.
        assert_eq!(fp, "7GQF-W5OA");
        assert_ne!(fingerprint(&[0u8; 32]), fingerprint(&[1u8; 32]));
    }

    #[test]
    fn id_text_and_bytes_agree() {
        let id = iroh::SecretKey::generate().public();
        assert_eq!(
            fingerprint_of_id(&id.to_string()),
            Some(fingerprint(id.as_bytes()))
        );
        assert_eq!(fingerprint_of_id("not a key"), None);
    }
}
