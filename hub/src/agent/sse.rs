//! Server-sent events: a byte-level decoder, pure (no I/O).
//!
//! Implements the parts of the WHATWG event-stream format that model providers use:
//! `event:` and `data:` fields (multi-line data joined with `\n`), comments, CRLF or LF
//! line ends, an event per blank line. Bytes may arrive split anywhere, even inside a
//! UTF-8 sequence.

/// One event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, `message` when absent.
    pub event: String,
    /// The `data:` lines joined with newlines.
    pub data: String,
}

/// Incremental decoder: feed bytes, take whole events.
#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    event: Option<String>,
    data: Option<String>,
}

/// The longest line accepted (a guard against a peer that never sends a newline).
pub const MAX_LINE: usize = 8 * 1024 * 1024;

/// Why a stream of events could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SseError {
    /// A line grew past [`MAX_LINE`].
    #[error("event stream line longer than {MAX_LINE} bytes")]
    LineTooLong,
}

impl SseDecoder {
    /// Feeds bytes; returns the events they completed.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(nl) = self.buf.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.buf.drain(..=nl).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8_lossy(&line).into_owned();
            if line.is_empty() {
                if let Some(data) = self.data.take() {
                    out.push(SseEvent {
                        event: self.event.take().unwrap_or_else(|| "message".into()),
                        data,
                    });
                }
                self.event = None;
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (line.as_str(), ""),
            };
            match field {
                "event" => self.event = Some(value.to_string()),
                "data" => match &mut self.data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(value);
                    }
                    None => self.data = Some(value.to_string()),
                },
                _ => {}
            }
        }
        if self.buf.len() > MAX_LINE {
            return Err(SseError::LineTooLong);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_anywhere_decode_the_same() {
        let text = "event: message_start\r\ndata: {\"a\":\"é\"}\r\n\r\n: ping\n\ndata: one\ndata: two\n\nevent: x\ndata\n\n";
        let whole = SseDecoder::default().feed(text.as_bytes()).expect("decode");
        assert_eq!(
            whole,
            vec![
                SseEvent {
                    event: "message_start".into(),
                    data: "{\"a\":\"é\"}".into()
                },
                SseEvent {
                    event: "message".into(),
                    data: "one\ntwo".into()
                },
                SseEvent {
                    event: "x".into(),
                    data: String::new()
                },
            ]
        );
        for cut in 1..text.len() {
            let mut d = SseDecoder::default();
            let mut got = d.feed(&text.as_bytes()[..cut]).expect("first");
            got.extend(d.feed(&text.as_bytes()[cut..]).expect("second"));
            assert_eq!(got, whole, "cut at {cut}");
        }
    }
}
