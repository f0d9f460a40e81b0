//! [`PairTicket`]: first contact with a hub from anywhere.
//!
//! A ticket is the hub's `EndpointAddr` (id, relay, direct addresses), its display name
//! and a one-time secret, printed as text (`hearthpair…`, base32 of postcard). The
//! secret is single use and expires; a hub may require one for pairing.

use iroh::EndpointAddr;
use iroh_tickets::{ParseError, Ticket};
use serde::{Deserialize, Serialize};

/// Everything a node needs to ask a hub for pairing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairTicket {
    /// Where the hub is.
    pub addr: EndpointAddr,
    /// The hub's display name.
    pub name: String,
    /// One-time pairing secret.
    pub secret: [u8; 16],
}

impl Ticket for PairTicket {
    const KIND: &'static str = "hearthpair";

    fn encode_bytes(&self) -> Vec<u8> {
        // Serialising plain owned data into a Vec cannot fail.
        postcard::to_stdvec(self).unwrap_or_default()
    }

    fn decode_bytes(bytes: &[u8]) -> Result<Self, ParseError> {
        Ok(postcard::from_bytes(bytes)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iroh::SecretKey;

    #[test]
    fn round_trips_as_text_and_rejects_garbage() {
        let t = PairTicket {
            addr: EndpointAddr::new(SecretKey::generate().public())
                .with_ip_addr("192.0.2.7:7447".parse().expect("addr")),
            name: "home".into(),
            secret: [7; 16],
        };
        let text = t.encode_string();
        assert!(text.starts_with("hearthpair"));
        assert_eq!(PairTicket::decode_string(&text).expect("decode"), t);
        assert!(PairTicket::decode_string("hearthpairzzzz").is_err());
        assert!(PairTicket::decode_string("endpointabc").is_err());
    }
}
