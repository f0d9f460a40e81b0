//! Bounds on Automerge bytes from peers, checked before Automerge sees them.
//!
//! Automerge inflates deflated chunks and columns, and expands run-length encoded
//! columns, with no limit: a few kilobytes can announce gigabytes or billions of
//! operations. [`check_automerge`] walks the chunk structure of a saved document, an
//! incremental save or a change (the format of `AutoCommit::save`, `save_after` and
//! sync-message changes), inflates every compressed part into a counting sink that stops
//! at the limit, and sums the run lengths of every column, so that a document that would
//! exceed [`Limits`] is refused without allocating what it announces.
//!
//! This module is pure: bytes in, a verdict out. It never panics on any input and never
//! allocates more than the inflated-size limit. It is a guard, not a parser Automerge
//! relies on: bytes it accepts may still fail to load, which the caller handles.

use std::io::Read;

/// The four bytes every Automerge chunk starts with.
const MAGIC: [u8; 4] = [0x85, 0x6f, 0x4a, 0x83];

/// How much a document from a peer may cost once loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes as received.
    pub max_bytes: usize,
    /// Bytes after inflating every compressed chunk and column, summed.
    pub max_inflated: usize,
    /// Items in any one column after run-length expansion (about one per operation).
    pub max_items: u64,
}

impl Limits {
    /// What a replica accepts: far above any note a person writes (notes are capped at
    /// 1 MiB of text), far below what would hurt a laptop.
    pub const PEER: Self = Self {
        max_bytes: 16 * 1024 * 1024,
        max_inflated: 64 * 1024 * 1024,
        max_items: 8 * 1024 * 1024,
    };
}

/// Why bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BoundsError {
    /// The input itself is too large.
    #[error("{len} bytes exceed the limit of {max}")]
    TooLarge {
        /// Bytes received.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Compressed parts inflate beyond the limit.
    #[error("compressed data inflates beyond {max} bytes")]
    InflatesTooMuch {
        /// The limit.
        max: usize,
    },
    /// A column expands to more items than the limit.
    #[error("a column expands to more than {max} items")]
    TooManyItems {
        /// The limit.
        max: u64,
    },
    /// The bytes are not a well-formed sequence of Automerge chunks.
    #[error("malformed automerge data: {0}")]
    Malformed(&'static str),
}

/// What the checked bytes will cost, for metrics and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Chunks seen.
    pub chunks: usize,
    /// Bytes after inflation, summed over all chunks.
    pub inflated: usize,
    /// The largest item count of any column.
    pub max_items: u64,
}

/// Checks that `bytes` (one or more concatenated Automerge chunks) stay within `limits`.
pub fn check_automerge(bytes: &[u8], limits: &Limits) -> Result<Usage, BoundsError> {
    if bytes.len() > limits.max_bytes {
        return Err(BoundsError::TooLarge {
            len: bytes.len(),
            max: limits.max_bytes,
        });
    }
    let mut usage = Usage::default();
    let mut input = Input(bytes);
    while !input.0.is_empty() {
        if input.take(4)? != MAGIC {
            return Err(BoundsError::Malformed("bad magic bytes"));
        }
        input.take(4)?; // checksum: Automerge verifies it
        let kind = input.take(1)?[0];
        let len = input.uleb_usize()?;
        let body = input.take(len)?;
        usage.chunks += 1;
        match kind {
            0 => check_document(body, limits, &mut usage)?,
            1 => check_change(body, limits, &mut usage)?,
            2 => {
                let inflated = inflate(body, limits, &mut usage)?;
                check_change(&inflated, limits, &mut usage)?;
            }
            // Bundles are never produced by saves or by the sync protocol.
            3 => return Err(BoundsError::Malformed("bundle chunks are not accepted")),
            _ => return Err(BoundsError::Malformed("unknown chunk type")),
        }
    }
    Ok(usage)
}

/// Bloom filters a peer may send: the probes and bits Automerge will compute for every
/// change it considers sending back are allocated from these numbers.
const MAX_BLOOM_PROBES: u64 = 64;
const MAX_BLOOM_BITS_PER_ENTRY: u64 = 64;

/// Checks a decoded sync message before it is applied: every change it carries within
/// `limits`, and every bloom filter with sane parameters (Automerge allocates
/// `num_probes` entries, and divides by the filter's size, when it answers).
pub fn check_sync_message(
    message: &automerge::sync::Message,
    limits: &Limits,
) -> Result<(), BoundsError> {
    for change in message.changes.iter() {
        check_automerge(change, limits)?;
    }
    for have in &message.have {
        let bytes = have.bloom.to_bytes();
        if bytes.is_empty() {
            continue;
        }
        let mut i = Input(&bytes);
        let entries = i.uleb()?;
        let bits_per_entry = i.uleb()?;
        let probes = i.uleb()?;
        if entries == 0
            || !(1..=MAX_BLOOM_BITS_PER_ENTRY).contains(&bits_per_entry)
            || !(1..=MAX_BLOOM_PROBES).contains(&probes)
            || i.0.is_empty()
        {
            return Err(BoundsError::Malformed("bloom filter out of range"));
        }
    }
    Ok(())
}

/// A document chunk: actors, heads, change and op column metadata, their data, head
/// indices.
fn check_document(body: &[u8], limits: &Limits, usage: &mut Usage) -> Result<(), BoundsError> {
    let mut i = Input(body);
    let actors = i.uleb()?;
    for _ in 0..actors {
        let n = i.uleb_usize()?;
        i.take(n)?;
    }
    let heads = i.uleb_usize()?;
    i.take(
        heads
            .checked_mul(32)
            .ok_or(BoundsError::Malformed("too many heads"))?,
    )?;
    let change_cols = i.columns()?;
    let op_cols = i.columns()?;
    for cols in [change_cols, op_cols] {
        for (spec, len) in cols {
            let data = i.take(len)?;
            check_column(spec, data, limits, usage)?;
        }
    }
    Ok(())
}

/// A change chunk: dependencies, actor, counters, message, other actors, op columns
/// (never compressed inside a change), extra bytes.
fn check_change(body: &[u8], limits: &Limits, usage: &mut Usage) -> Result<(), BoundsError> {
    let mut i = Input(body);
    let deps = i.uleb_usize()?;
    i.take(
        deps.checked_mul(32)
            .ok_or(BoundsError::Malformed("too many deps"))?,
    )?;
    let actor = i.uleb_usize()?;
    i.take(actor)?;
    i.uleb()?; // seq
    i.uleb()?; // start op
    i.uleb()?; // time (signed; its bytes are what matter here)
    let message = i.uleb_usize()?;
    i.take(message)?;
    let others = i.uleb()?;
    for _ in 0..others {
        let n = i.uleb_usize()?;
        i.take(n)?;
    }
    for (spec, len) in i.columns()? {
        let data = i.take(len)?;
        check_column(spec, data, limits, usage)?;
    }
    Ok(())
}

/// Inflates a column if it is deflated, then counts its items by its type.
fn check_column(
    spec: u32,
    data: &[u8],
    limits: &Limits,
    usage: &mut Usage,
) -> Result<(), BoundsError> {
    let inflated;
    let data = if spec & 0b1000 != 0 {
        inflated = inflate(data, limits, usage)?;
        &inflated[..]
    } else {
        usage.inflated = usage.inflated.saturating_add(data.len());
        data
    };
    let items = match spec & 0b111 {
        // Group cardinality, actor, unsigned integer, value metadata: unsigned RLE.
        0 | 1 | 2 | 6 => count_rle(data, Value::Uleb, limits.max_items)?,
        // Delta: signed RLE.
        3 => count_rle(data, Value::Sleb, limits.max_items)?,
        // Boolean: alternating run lengths.
        4 => count_bool(data, limits.max_items)?,
        // String: RLE of length-prefixed strings.
        5 => count_rle(data, Value::Str, limits.max_items)?,
        // Raw values: plain bytes, already bounded by their length.
        _ => 0,
    };
    usage.max_items = usage.max_items.max(items);
    Ok(())
}

/// Inflates raw deflate data, refusing to produce more than the remaining budget.
fn inflate(data: &[u8], limits: &Limits, usage: &mut Usage) -> Result<Vec<u8>, BoundsError> {
    let budget = limits.max_inflated.saturating_sub(usage.inflated);
    let mut out = Vec::new();
    flate2::read::DeflateDecoder::new(data)
        .take(budget as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|_| BoundsError::Malformed("bad deflate data"))?;
    if out.len() > budget {
        return Err(BoundsError::InflatesTooMuch {
            max: limits.max_inflated,
        });
    }
    usage.inflated += out.len();
    Ok(out)
}

#[derive(Clone, Copy)]
enum Value {
    Uleb,
    Sleb,
    Str,
}

/// Sums the run lengths of an RLE column: a positive count is a run of one value, a
/// negative count that many literal values, zero a run of nulls whose length follows.
fn count_rle(data: &[u8], value: Value, max: u64) -> Result<u64, BoundsError> {
    let mut i = Input(data);
    let mut total: u64 = 0;
    while !i.0.is_empty() {
        let count = i.sleb()?;
        let (run, values) = match count {
            0 => (i.uleb()?, 0),
            c if c > 0 => (c.unsigned_abs(), 1),
            c => (c.unsigned_abs(), c.unsigned_abs()),
        };
        for _ in 0..values {
            match value {
                Value::Uleb | Value::Sleb => {
                    i.uleb()?;
                }
                Value::Str => {
                    let n = i.uleb_usize()?;
                    i.take(n)?;
                }
            }
        }
        total = total.saturating_add(run);
        if total > max {
            return Err(BoundsError::TooManyItems { max });
        }
    }
    Ok(total)
}

/// Sums the alternating run lengths of a boolean column.
fn count_bool(data: &[u8], max: u64) -> Result<u64, BoundsError> {
    let mut i = Input(data);
    let mut total: u64 = 0;
    while !i.0.is_empty() {
        total = total.saturating_add(i.uleb()?);
        if total > max {
            return Err(BoundsError::TooManyItems { max });
        }
    }
    Ok(total)
}

/// A cursor over bytes; every read checks the length first.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], BoundsError> {
        if n > self.0.len() {
            return Err(BoundsError::Malformed("length beyond the end of the data"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn uleb(&mut self) -> Result<u64, BoundsError> {
        let mut value: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = self.take(1)?[0];
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(BoundsError::Malformed("LEB128 number too long"))
    }

    fn uleb_usize(&mut self) -> Result<usize, BoundsError> {
        usize::try_from(self.uleb()?).map_err(|_| BoundsError::Malformed("length too large"))
    }

    fn sleb(&mut self) -> Result<i64, BoundsError> {
        let mut value: i64 = 0;
        let mut shift = 0;
        loop {
            let byte = self.take(1)?[0];
            if shift >= 64 {
                return Err(BoundsError::Malformed("LEB128 number too long"));
            }
            value |= i64::from(byte & 0x7f) << shift;
            shift += 7;
            if byte & 0x80 == 0 {
                if shift < 64 && byte & 0x40 != 0 {
                    value |= -1i64 << shift;
                }
                return Ok(value);
            }
        }
    }

    /// Column metadata: a count, then (spec, length) pairs.
    fn columns(&mut self) -> Result<Vec<(u32, usize)>, BoundsError> {
        let n = self.uleb_usize()?;
        // Each pair takes at least two bytes, so `n` cannot exceed what is left.
        if n > self.0.len() / 2 {
            return Err(BoundsError::Malformed("more columns than bytes"));
        }
        let mut cols = Vec::with_capacity(n);
        for _ in 0..n {
            let spec = u32::try_from(self.uleb()?)
                .map_err(|_| BoundsError::Malformed("column spec too large"))?;
            cols.push((spec, self.uleb_usize()?));
        }
        Ok(cols)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use automerge::{transaction::Transactable, AutoCommit, ObjType, ReadDoc, ROOT};
    use std::io::Write;

    fn note(text: &str) -> AutoCommit {
        let mut doc = AutoCommit::new();
        doc.put(ROOT, "kind", "note").expect("test data");
        let t = doc
            .put_object(ROOT, "content", ObjType::Text)
            .expect("test data");
        doc.splice_text(&t, 0, 0, text).expect("test data");
        doc.commit();
        doc
    }

    #[test]
    fn real_documents_and_changes_pass() {
        let mut doc = note(&"lorem ipsum ".repeat(2000));
        let saved = doc.save();
        let usage = check_automerge(&saved, &Limits::PEER).expect("test data");
        assert!(usage.max_items > 0 && usage.chunks == 1);
        let heads = doc.get_heads();
        let t = doc
            .get(ROOT, "content")
            .expect("test data")
            .expect("test data")
            .1;
        doc.splice_text(&t, 0, 0, "more").expect("test data");
        doc.commit();
        let incremental = doc.save_after(&heads);
        check_automerge(&incremental, &Limits::PEER).expect("test data");
        let mut both = saved.clone();
        both.extend_from_slice(&incremental);
        assert_eq!(
            check_automerge(&both, &Limits::PEER)
                .expect("test data")
                .chunks,
            2
        );
        // And what passes still loads.
        AutoCommit::load(&both).expect("test data");
    }

    #[test]
    fn compressed_bomb_is_refused_before_inflating() {
        // A compressed change chunk (type 2) whose deflate stream inflates to 80 MiB.
        let mut enc = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        let zeros = vec![0u8; 1024 * 1024];
        for _ in 0..80 {
            enc.write_all(&zeros).expect("test data");
        }
        let body = enc.finish().expect("test data");
        assert!(body.len() < 2 * 1024 * 1024);
        let mut chunk = MAGIC.to_vec();
        chunk.extend([0, 0, 0, 0, 2]);
        leb(&mut chunk, body.len() as u64);
        chunk.extend(&body);
        assert_eq!(
            check_automerge(&chunk, &Limits::PEER),
            Err(BoundsError::InflatesTooMuch {
                max: Limits::PEER.max_inflated
            })
        );
    }

    #[test]
    fn run_length_bomb_is_refused() {
        // A change chunk whose one column announces a run of 2^40 equal values.
        let mut col = Vec::new();
        leb(&mut col, 1 << 40); // positive count as sleb (small enough to stay positive)
        col.push(1);
        let mut body = vec![0]; // no deps
        body.extend([1, 0xaa]); // actor of one byte
        body.extend([1, 1, 0, 0]); // seq, start op, time, empty message
        body.push(0); // no other actors
        body.push(1); // one column
        leb(&mut body, 2 << 4 | 2); // id 2, unsigned RLE
        leb(&mut body, col.len() as u64);
        body.extend(&col);
        let mut chunk = MAGIC.to_vec();
        chunk.extend([0, 0, 0, 0, 1]);
        leb(&mut chunk, body.len() as u64);
        chunk.extend(&body);
        assert_eq!(
            check_automerge(&chunk, &Limits::PEER),
            Err(BoundsError::TooManyItems {
                max: Limits::PEER.max_items
            })
        );
    }

    #[test]
    fn truncations_and_garbage_are_errors_not_panics() {
        let saved = note("hello").save();
        for n in 0..saved.len() {
            let _ = check_automerge(&saved[..n], &Limits::PEER);
        }
        assert!(check_automerge(&[0xff; 64], &Limits::PEER).is_err());
        assert!(check_automerge(&saved[..saved.len() - 1], &Limits::PEER).is_err());
    }

    /// Writes `v` as a signed LEB128 (the tests only use non-negative values) — the same
    /// bytes as unsigned when bit 6 of the last byte is clear, which `leb` guarantees by
    /// emitting an extra byte when needed.
    fn leb(out: &mut Vec<u8>, mut v: u64) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 && byte & 0x40 == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
}
