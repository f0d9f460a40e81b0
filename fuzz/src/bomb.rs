//! Deflate streams that inflate to a chosen, large number of zero bytes, built without
//! compressing gigabytes.
//!
//! Deflate's best ratio is about 1032:1 (a 258-byte match costs two bits), so a stream
//! inflating to 1 GiB is about 1 MiB: a 16 MiB sync frame can carry ~16 GiB. One
//! encoder's sync-flushed output for each further MiB of zeros is byte-identical once the
//! window is all zeros, so a stream is `first ‖ step × (n-1) ‖ final empty block`, and a
//! prefix made by another encoder (e.g. a real change) may precede it: every block is
//! byte-aligned and the zeros' back-references never reach before their first literal.

use std::io::Write;
use std::sync::OnceLock;

/// Zeros per repeated segment.
const SEGMENT: usize = 1 << 20;
/// A stored block with BFINAL set and no data: ends a stream at a byte boundary.
const FINAL_EMPTY: [u8; 5] = [0x01, 0x00, 0x00, 0xff, 0xff];

struct Pieces {
    first: Vec<u8>,
    step: Vec<u8>,
}

fn pieces() -> &'static Pieces {
    static P: OnceLock<Pieces> = OnceLock::new();
    P.get_or_init(|| {
        let zeros = vec![0u8; SEGMENT];
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
        let mut cuts = vec![0];
        for _ in 0..3 {
            let _ = e.write_all(&zeros);
            let _ = e.flush();
            cuts.push(e.get_ref().len());
        }
        let out = e.get_ref();
        let first = out[cuts[0]..cuts[1]].to_vec();
        let step = out[cuts[1]..cuts[2]].to_vec();
        // The steady state must repeat exactly, or the construction is wrong.
        assert_eq!(step, out[cuts[2]..cuts[3]], "zero segments differ");
        Pieces { first, step }
    })
}

/// Non-final deflate blocks for `data` (to put before [`zeros`]).
pub fn prefix_blocks(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    let _ = e.write_all(data);
    let _ = e.flush();
    e.get_ref().clone()
}

/// A complete raw-deflate stream: `prefix` (from [`prefix_blocks`], may be empty), then
/// `mib` MiB of zeros.
pub fn zeros(prefix: &[u8], mib: usize) -> Vec<u8> {
    let p = pieces();
    let mut out = prefix.to_vec();
    if mib > 0 {
        out.extend(&p.first);
        for _ in 1..mib {
            out.extend(&p.step);
        }
    }
    out.extend(FINAL_EMPTY);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn bombs_inflate_to_what_they_say() {
        let prefix = prefix_blocks(b"hello");
        let stream = zeros(&prefix, 8);
        let mut d = flate2::read::DeflateDecoder::new(&stream[..]);
        let mut out = Vec::new();
        d.read_to_end(&mut out).expect("inflate");
        assert_eq!(out.len(), 5 + 8 * SEGMENT);
        assert_eq!(&out[..5], b"hello");
        assert!(out[5..].iter().all(|&b| b == 0));
        assert!(stream.len() < 8 * SEGMENT / 500, "{} bytes", stream.len());
    }
}
