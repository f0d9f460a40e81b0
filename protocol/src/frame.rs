//! Framing: `[u32 big-endian length][u8 version][postcard payload]`.
//!
//! The length counts the version byte plus the payload. Functions here work on byte
//! slices only; callers own sockets and buffers. A length above [`MAX_FRAME`] is refused
//! as soon as the 4-byte header is seen, before the body is buffered.

use serde::{de::DeserializeOwned, Serialize};

use crate::PROTOCOL_VERSION;

/// Bytes before the body: the 4-byte length.
pub const FRAME_HEADER_LEN: usize = 4;

/// Hard maximum of a frame body (version byte plus payload), 16 MiB: the limit of
/// `hearth/sync/1`, whose snapshots batch whole documents.
pub const MAX_FRAME: usize = 16 * 1024 * 1024;

/// Maximum frame body on `hearth/pair/1`: its messages are a device name, a code and a
/// few ids, so a peer that is not yet trusted may make the hub buffer no more than this.
pub const PAIR_MAX_FRAME: usize = 4 * 1024;

/// Why a frame could not be encoded or decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameError {
    /// The declared or encoded body is larger than [`MAX_FRAME`].
    #[error("frame of {len} bytes exceeds the maximum of {max} bytes")]
    Oversized {
        /// Declared body length.
        len: usize,
        /// The limit, [`MAX_FRAME`].
        max: usize,
    },
    /// A frame must hold at least its version byte.
    #[error("empty frame")]
    Empty,
    /// The peer speaks another protocol version.
    #[error("unsupported protocol version {found} (expected {expected})")]
    Version {
        /// Version byte found in the frame.
        found: u8,
        /// Version this build speaks.
        expected: u8,
    },
    /// The payload is not a valid message.
    #[error("malformed payload: {0}")]
    Malformed(String),
    /// The payload decoded but left bytes unread.
    #[error("{0} trailing bytes after message")]
    Trailing(usize),
}

/// Encodes `msg` as one complete frame.
pub fn encode_frame<T: Serialize>(msg: &T) -> Result<Vec<u8>, FrameError> {
    let mut out = vec![0u8; FRAME_HEADER_LEN];
    out.push(PROTOCOL_VERSION);
    let mut out =
        postcard::to_extend(msg, out).map_err(|e| FrameError::Malformed(e.to_string()))?;
    let body = out.len() - FRAME_HEADER_LEN;
    if body > MAX_FRAME {
        return Err(FrameError::Oversized {
            len: body,
            max: MAX_FRAME,
        });
    }
    let len = u32::try_from(body).map_err(|_| FrameError::Oversized {
        len: body,
        max: MAX_FRAME,
    })?;
    out[..FRAME_HEADER_LEN].copy_from_slice(&len.to_be_bytes());
    Ok(out)
}

/// Reads the body length from a frame header, refusing oversized and empty frames.
///
/// Returns `Ok(None)` while fewer than [`FRAME_HEADER_LEN`] bytes are available.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, FrameError> {
    let Some(header) = buf.get(..FRAME_HEADER_LEN) else {
        return Ok(None);
    };
    let mut len = [0u8; FRAME_HEADER_LEN];
    len.copy_from_slice(header);
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(FrameError::Oversized {
            len,
            max: MAX_FRAME,
        });
    }
    if len == 0 {
        return Err(FrameError::Empty);
    }
    Ok(Some(len))
}

/// Decodes one frame from the start of `buf`.
///
/// Returns `Ok(None)` if `buf` does not yet hold a whole frame, or the message and the
/// number of bytes it used.
pub fn decode_frame<T: DeserializeOwned>(buf: &[u8]) -> Result<Option<(T, usize)>, FrameError> {
    let Some(len) = frame_len(buf)? else {
        return Ok(None);
    };
    let Some(body) = buf.get(FRAME_HEADER_LEN..FRAME_HEADER_LEN + len) else {
        return Ok(None);
    };
    let (&version, payload) = body.split_first().ok_or(FrameError::Empty)?;
    if version != PROTOCOL_VERSION {
        return Err(FrameError::Version {
            found: version,
            expected: PROTOCOL_VERSION,
        });
    }
    let (msg, rest) =
        postcard::take_from_bytes(payload).map_err(|e| FrameError::Malformed(e.to_string()))?;
    if !rest.is_empty() {
        return Err(FrameError::Trailing(rest.len()));
    }
    Ok(Some((msg, FRAME_HEADER_LEN + len)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::{DocEntry, DocIndex, DocSnapshot, SyncMessage};
    use proptest::prelude::*;

    fn hello() -> SyncMessage {
        SyncMessage::Hello {
            root: [7; 16],
            docs: 3,
        }
    }

    #[test]
    fn golden_hello_bytes() {
        let bytes = encode_frame(&hello()).expect("encode");
        // len = 1 (version) + 1 (variant) + 16 (root) + 1 (varint 3)
        let mut expected = vec![0, 0, 0, 19, PROTOCOL_VERSION, 0];
        expected.extend([7u8; 16]);
        expected.push(3);
        assert_eq!(bytes, expected);
    }

    #[test]
    fn incomplete_then_complete() {
        let bytes = encode_frame(&hello()).expect("encode");
        for cut in 0..bytes.len() {
            assert_eq!(
                decode_frame::<SyncMessage>(&bytes[..cut]),
                Ok(None),
                "cut at {cut}"
            );
        }
        let (msg, used) = decode_frame::<SyncMessage>(&bytes)
            .expect("decode")
            .expect("whole");
        assert_eq!(msg, hello());
        assert_eq!(used, bytes.len());
    }

    #[test]
    fn oversized_header_is_refused_before_body() {
        let len = (MAX_FRAME as u32 + 1).to_be_bytes();
        assert!(matches!(
            decode_frame::<SyncMessage>(&len),
            Err(FrameError::Oversized { .. })
        ));
    }

    #[test]
    fn wrong_version_is_refused() {
        let mut bytes = encode_frame(&hello()).expect("encode");
        bytes[FRAME_HEADER_LEN] = 99;
        assert_eq!(
            decode_frame::<SyncMessage>(&bytes),
            Err(FrameError::Version {
                found: 99,
                expected: PROTOCOL_VERSION
            })
        );
    }

    #[test]
    fn regression_trailing_bytes_are_an_error() {
        let mut bytes = encode_frame(&hello()).expect("encode");
        bytes.push(0);
        let len = (bytes.len() - FRAME_HEADER_LEN) as u32;
        bytes[..4].copy_from_slice(&len.to_be_bytes());
        assert_eq!(
            decode_frame::<SyncMessage>(&bytes),
            Err(FrameError::Trailing(1))
        );
    }

    fn arb_index() -> impl Strategy<Value = DocIndex> {
        (
            any::<String>(),
            any::<String>(),
            any::<bool>(),
            any::<i64>(),
        )
            .prop_map(|(kind, title, deleted, updated_at)| DocIndex {
                kind,
                project: None,
                title,
                status: None,
                due: None,
                parent: None,
                deleted,
                updated_at,
            })
    }

    fn arb_message() -> impl Strategy<Value = SyncMessage> {
        prop_oneof![
            (any::<[u8; 16]>(), any::<u64>())
                .prop_map(|(root, docs)| SyncMessage::Hello { root, docs }),
            proptest::collection::vec(any::<[u8; 16]>(), 0..300)
                .prop_map(|digests| SyncMessage::Buckets { digests }),
            (
                proptest::collection::vec(any::<u8>(), 0..10),
                proptest::collection::vec((any::<[u8; 16]>(), any::<[u8; 16]>()), 0..50),
            )
                .prop_map(|(buckets, v)| SyncMessage::Entries {
                    buckets,
                    entries: v
                        .into_iter()
                        .map(|(id, digest)| DocEntry { id, digest })
                        .collect(),
                }),
            (
                any::<[u8; 16]>(),
                proptest::collection::vec(any::<[u8; 32]>(), 0..3),
                proptest::collection::vec(any::<u8>(), 0..512),
                arb_index()
            )
                .prop_map(|(id, heads, bytes, index)| SyncMessage::Snapshots {
                    docs: vec![DocSnapshot {
                        id,
                        heads,
                        bytes,
                        index
                    }],
                }),
            (
                any::<[u8; 16]>(),
                proptest::collection::vec(any::<u8>(), 0..512)
            )
                .prop_map(|(doc, message)| SyncMessage::Sync { doc, message }),
            Just(SyncMessage::CatchUpDone),
        ]
    }

    proptest! {
        #[test]
        fn any_bytes_decode_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let _ = decode_frame::<SyncMessage>(&bytes);
        }

        #[test]
        fn any_body_after_valid_header_decodes_without_panic(body in proptest::collection::vec(any::<u8>(), 1..2048)) {
            let mut bytes = (body.len() as u32).to_be_bytes().to_vec();
            bytes.extend(&body);
            let _ = decode_frame::<SyncMessage>(&bytes);
        }

        #[test]
        fn every_frame_round_trips(msg in arb_message()) {
            let bytes = encode_frame(&msg).expect("encode");
            let (back, used) = decode_frame::<SyncMessage>(&bytes).expect("decode").expect("complete");
            prop_assert_eq!(used, bytes.len());
            prop_assert_eq!(back, msg);
        }
    }
}
