//! Messages of `hearth/rpc/1`: a node relays one request of its UI's API to its hub.
//!
//! One bidirectional QUIC stream per request:
//! 1. node → hub: one [`RpcRequest`] frame (method, path and query relative to the API
//!    root `/api/v1`, a JSON body of at most [`RPC_MAX_BODY`] bytes), then the node
//!    finishes its side;
//! 2. hub → node: one [`RpcResponse::Head`] (status, content type), then zero or more
//!    [`RpcResponse::Chunk`]s of at most [`RPC_MAX_CHUNK`] bytes each, as the hub produces
//!    them (a chat's server-sent events and the event stream flow through as they come),
//!    then the hub finishes the stream. A stream that ends before its head, or is reset,
//!    is an error, never a silent empty answer.
//!
//! Frames are the usual `[u32 len][u8 version][postcard]`; this ALPN's frames are bounded
//! by [`RPC_MAX_FRAME`] (a reader refuses a larger header before buffering the body).
//! The decoded values are checked again with [`RpcRequest::check`] and
//! [`RpcResponse::check`], for what postcard cannot bound: path length and shape, body
//! and chunk sizes, status range, content type.
//!
//! Pure: no I/O. Decoding any bytes returns a value or an error and never panics.

use serde::{Deserialize, Serialize};

use crate::{encode_frame, FrameError, FRAME_HEADER_LEN};

/// The largest request body (JSON) a node may relay.
pub const RPC_MAX_BODY: usize = 1024 * 1024;
/// The longest path and query a request may name.
pub const RPC_MAX_PATH: usize = 8 * 1024;
/// The largest body chunk of a response; the hub splits larger bodies.
pub const RPC_MAX_CHUNK: usize = 64 * 1024;
/// The longest content type a response head may carry.
pub const RPC_MAX_CONTENT_TYPE: usize = 256;
/// Frame bodies on `hearth/rpc/1` (version byte plus payload) are at most this: a request
/// with the largest body and path, with room for the encoding's own bytes.
pub const RPC_MAX_FRAME: usize = RPC_MAX_BODY + RPC_MAX_PATH + 64;

/// The HTTP method of a relayed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RpcMethod {
    /// GET.
    Get,
    /// POST.
    Post,
    /// PUT.
    Put,
    /// PATCH.
    Patch,
    /// DELETE.
    Delete,
}

impl RpcMethod {
    /// The method's name, upper case.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
            Self::Put => "PUT",
            Self::Patch => "PATCH",
            Self::Delete => "DELETE",
        }
    }

    /// The method named `name` (upper case), if it is one a request may carry.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "GET" => Self::Get,
            "POST" => Self::Post,
            "PUT" => Self::Put,
            "PATCH" => Self::Patch,
            "DELETE" => Self::Delete,
            _ => return None,
        })
    }
}

/// Node → hub: the one request of a stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpcRequest {
    /// The method.
    pub method: RpcMethod,
    /// Path and query relative to the API root: `/chat`, `/approvals?waiting=true`.
    pub path: String,
    /// The request body (JSON), empty for none.
    pub body: Vec<u8>,
}

/// Hub → node: the head, then body chunks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RpcResponse {
    /// The first frame of every answer.
    Head {
        /// HTTP status, 100–599.
        status: u16,
        /// The body's content type (`application/json`, `text/event-stream`), or empty.
        content_type: String,
    },
    /// The next bytes of the body.
    Chunk(Vec<u8>),
}

/// Why an rpc message is refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RpcError {
    /// The frame itself is bad (oversized, wrong version, not a message).
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The path is empty, does not start with `/`, is too long or holds control
    /// characters or a fragment.
    #[error("bad path: {0}")]
    Path(&'static str),
    /// A request body above [`RPC_MAX_BODY`].
    #[error("request body of {0} bytes exceeds {RPC_MAX_BODY}")]
    Body(usize),
    /// A chunk above [`RPC_MAX_CHUNK`].
    #[error("body chunk of {0} bytes exceeds {RPC_MAX_CHUNK}")]
    Chunk(usize),
    /// A status outside 100–599.
    #[error("status {0} is not an HTTP status")]
    Status(u16),
    /// A content type that is too long or not printable ASCII.
    #[error("bad content type")]
    ContentType,
}

impl RpcRequest {
    /// Checks what the encoding cannot: the path's length and shape, the body's size.
    pub fn check(&self) -> Result<(), RpcError> {
        let p = &self.path;
        if !p.starts_with('/') {
            return Err(RpcError::Path("it must start with /"));
        }
        if p.len() > RPC_MAX_PATH {
            return Err(RpcError::Path("too long"));
        }
        if p.bytes()
            .any(|b| b.is_ascii_control() || b == b'#' || b == b' ')
        {
            return Err(RpcError::Path("control characters, spaces or a fragment"));
        }
        if self.body.len() > RPC_MAX_BODY {
            return Err(RpcError::Body(self.body.len()));
        }
        Ok(())
    }

    /// The path without its query.
    pub fn path_only(&self) -> &str {
        self.path.split_once('?').map_or(&self.path, |(p, _)| p)
    }

    /// The query (after `?`), if any.
    pub fn query(&self) -> Option<&str> {
        self.path.split_once('?').map(|(_, q)| q)
    }
}

impl RpcResponse {
    /// Checks what the encoding cannot: status range, content type, chunk size.
    pub fn check(&self) -> Result<(), RpcError> {
        match self {
            Self::Head {
                status,
                content_type,
            } => {
                if !(100..=599).contains(status) {
                    return Err(RpcError::Status(*status));
                }
                if content_type.len() > RPC_MAX_CONTENT_TYPE
                    || !content_type.bytes().all(|b| (0x20..0x7f).contains(&b))
                {
                    return Err(RpcError::ContentType);
                }
                Ok(())
            }
            Self::Chunk(bytes) if bytes.len() > RPC_MAX_CHUNK => Err(RpcError::Chunk(bytes.len())),
            Self::Chunk(_) => Ok(()),
        }
    }
}

/// Encodes a request as one frame, refusing one that breaks the limits.
pub fn encode_request(req: &RpcRequest) -> Result<Vec<u8>, RpcError> {
    req.check()?;
    bounded(encode_frame(req)?)
}

/// Encodes a response frame, refusing one that breaks the limits.
pub fn encode_response(resp: &RpcResponse) -> Result<Vec<u8>, RpcError> {
    resp.check()?;
    bounded(encode_frame(resp)?)
}

fn bounded(frame: Vec<u8>) -> Result<Vec<u8>, RpcError> {
    let body = frame.len() - FRAME_HEADER_LEN;
    if body > RPC_MAX_FRAME {
        return Err(FrameError::Oversized {
            len: body,
            max: RPC_MAX_FRAME,
        }
        .into());
    }
    Ok(frame)
}

/// Decodes one request frame from the start of `buf` (`Ok(None)`: not whole yet) and
/// checks it; a header announcing more than [`RPC_MAX_FRAME`] is refused at once.
pub fn decode_request(buf: &[u8]) -> Result<Option<(RpcRequest, usize)>, RpcError> {
    let Some((req, used)) = decode_bounded::<RpcRequest>(buf)? else {
        return Ok(None);
    };
    req.check()?;
    Ok(Some((req, used)))
}

/// Decodes one response frame from the start of `buf` (`Ok(None)`: not whole yet) and
/// checks it.
pub fn decode_response(buf: &[u8]) -> Result<Option<(RpcResponse, usize)>, RpcError> {
    let Some((resp, used)) = decode_bounded::<RpcResponse>(buf)? else {
        return Ok(None);
    };
    resp.check()?;
    Ok(Some((resp, used)))
}

fn decode_bounded<T: serde::de::DeserializeOwned>(
    buf: &[u8],
) -> Result<Option<(T, usize)>, RpcError> {
    if let Some(len) = crate::frame_len(buf)? {
        if len > RPC_MAX_FRAME {
            return Err(FrameError::Oversized {
                len,
                max: RPC_MAX_FRAME,
            }
            .into());
        }
    }
    Ok(crate::decode_frame(buf)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn chat() -> RpcRequest {
        RpcRequest {
            method: RpcMethod::Post,
            path: "/chat".into(),
            body: br#"{"message":"hi"}"#.to_vec(),
        }
    }

    #[test]
    fn golden_request_bytes() {
        let req = RpcRequest {
            method: RpcMethod::Get,
            path: "/usage".into(),
            body: Vec::new(),
        };
        let bytes = encode_request(&req).expect("encode");
        // version, variant 0 (GET), path length 6, "/usage", body length 0
        let mut expected = vec![0, 0, 0, 10, crate::PROTOCOL_VERSION, 0, 6];
        expected.extend(b"/usage");
        expected.push(0);
        assert_eq!(bytes, expected);
    }

    #[test]
    fn requests_and_responses_round_trip_and_report_partial_frames() {
        let bytes = encode_request(&chat()).expect("encode");
        for cut in 0..bytes.len() {
            assert_eq!(decode_request(&bytes[..cut]), Ok(None), "cut at {cut}");
        }
        assert_eq!(
            decode_request(&bytes).expect("decode"),
            Some((chat(), bytes.len()))
        );
        for resp in [
            RpcResponse::Head {
                status: 200,
                content_type: "text/event-stream".into(),
            },
            RpcResponse::Chunk(b"data: {}\n\n".to_vec()),
            RpcResponse::Chunk(vec![7; RPC_MAX_CHUNK]),
        ] {
            let bytes = encode_response(&resp).expect("encode");
            assert_eq!(
                decode_response(&bytes).expect("decode"),
                Some((resp, bytes.len()))
            );
        }
        let req = RpcRequest {
            path: "/approvals?waiting=true".into(),
            ..chat()
        };
        assert_eq!(req.path_only(), "/approvals");
        assert_eq!(req.query(), Some("waiting=true"));
    }

    #[test]
    fn limits_are_refused_on_both_sides() {
        let big = RpcRequest {
            body: vec![b'x'; RPC_MAX_BODY + 1],
            ..chat()
        };
        assert_eq!(encode_request(&big), Err(RpcError::Body(RPC_MAX_BODY + 1)));
        // The largest request fits its frame limit.
        let largest = RpcRequest {
            body: vec![b'x'; RPC_MAX_BODY],
            path: format!("/{}", "p".repeat(RPC_MAX_PATH - 1)),
            ..chat()
        };
        let bytes = encode_request(&largest).expect("largest");
        assert!(decode_request(&bytes).expect("decode").is_some());
        // A peer that encodes past the checks is refused when decoded.
        let raw = encode_frame(&big).expect("raw");
        assert_eq!(decode_request(&raw), Err(RpcError::Body(RPC_MAX_BODY + 1)));
        for (path, why) in [
            ("chat", "relative"),
            ("", "empty"),
            ("/a b", "space"),
            ("/a#b", "fragment"),
            ("/a\nb", "newline"),
        ] {
            let r = RpcRequest {
                path: path.into(),
                ..chat()
            };
            assert!(
                matches!(encode_request(&r), Err(RpcError::Path(_))),
                "{why}"
            );
        }
        let long = RpcRequest {
            path: format!("/{}", "p".repeat(RPC_MAX_PATH)),
            ..chat()
        };
        assert!(matches!(encode_request(&long), Err(RpcError::Path(_))));
        let chunk = RpcResponse::Chunk(vec![0; RPC_MAX_CHUNK + 1]);
        assert_eq!(
            encode_response(&chunk),
            Err(RpcError::Chunk(RPC_MAX_CHUNK + 1))
        );
        for status in [0, 99, 600, u16::MAX] {
            let head = RpcResponse::Head {
                status,
                content_type: String::new(),
            };
            assert_eq!(encode_response(&head), Err(RpcError::Status(status)));
            let raw = encode_frame(&head).expect("raw");
            assert_eq!(decode_response(&raw), Err(RpcError::Status(status)));
        }
        for ct in [
            "a\r\nx-evil: 1".to_string(),
            "t".repeat(RPC_MAX_CONTENT_TYPE + 1),
        ] {
            let head = RpcResponse::Head {
                status: 200,
                content_type: ct,
            };
            assert_eq!(encode_response(&head), Err(RpcError::ContentType));
        }
    }

    #[test]
    fn an_oversized_header_is_refused_before_its_body() {
        let header = ((RPC_MAX_FRAME + 1) as u32).to_be_bytes();
        assert!(matches!(
            decode_request(&header),
            Err(RpcError::Frame(FrameError::Oversized { .. }))
        ));
        assert!(matches!(
            decode_response(&header),
            Err(RpcError::Frame(FrameError::Oversized { .. }))
        ));
    }

    #[test]
    fn an_unknown_method_or_variant_is_malformed() {
        // Variant 5 is no method; variant 2 is no response.
        let mut req = encode_request(&chat()).expect("encode");
        req[FRAME_HEADER_LEN + 1] = 5;
        assert!(matches!(
            decode_request(&req),
            Err(RpcError::Frame(FrameError::Malformed(_)))
        ));
        let frame = [0, 0, 0, 2, crate::PROTOCOL_VERSION, 2];
        assert!(matches!(
            decode_response(&frame),
            Err(RpcError::Frame(FrameError::Malformed(_)))
        ));
        assert_eq!(RpcMethod::parse("PATCH"), Some(RpcMethod::Patch));
        assert_eq!(RpcMethod::parse("patch"), None);
        for m in [
            RpcMethod::Get,
            RpcMethod::Post,
            RpcMethod::Put,
            RpcMethod::Patch,
            RpcMethod::Delete,
        ] {
            assert_eq!(RpcMethod::parse(m.as_str()), Some(m));
        }
    }

    proptest! {
        #[test]
        fn any_bytes_decode_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let _ = decode_request(&bytes);
            let _ = decode_response(&bytes);
        }

        #[test]
        fn any_body_after_a_valid_header_decodes_without_panic(body in proptest::collection::vec(any::<u8>(), 1..2048)) {
            let mut bytes = (body.len() as u32).to_be_bytes().to_vec();
            bytes.extend(&body);
            let _ = decode_request(&bytes);
            let _ = decode_response(&bytes);
        }

        #[test]
        fn every_valid_request_round_trips(
            method in 0usize..5,
            path in "/[a-z0-9/?=&%._-]{0,200}",
            body in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            let method = [RpcMethod::Get, RpcMethod::Post, RpcMethod::Put, RpcMethod::Patch, RpcMethod::Delete][method];
            let req = RpcRequest { method, path, body };
            let bytes = encode_request(&req).expect("encode");
            prop_assert_eq!(decode_request(&bytes).expect("decode"), Some((req, bytes.len())));
        }
    }
}
