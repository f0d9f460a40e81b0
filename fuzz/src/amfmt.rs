//! Automerge 0.12's binary storage format, just enough to take a chunk apart, change a
//! piece and put it back together with a correct length and checksum.
//!
//! A chunk is `magic(85 6f 4a 83) ‖ checksum[4] ‖ type[1] ‖ uleb128(len) ‖ data`, the
//! checksum being the first four bytes of `SHA-256(type ‖ uleb128(len) ‖ data)`
//! (`automerge-0.12.0/src/storage/chunk.rs`, `hash`). Type 0 is a document, 1 a change,
//! 2 a deflate-compressed change whose checksum is that of the inflated change (type 1),
//! 3 a bundle. Document and change layouts follow `storage/document.rs` and
//! `storage/change.rs` (`parse_following_header`); sync messages `sync.rs`
//! (`Message::parse`) and bloom filters `sync/bloom.rs`.
//!
//! Parsers here are for the fuzzer's own inputs: they return `None` on anything they do
//! not understand, and the caller falls back to byte-level mutation.

use std::io::{Read, Write};

use sha2::{Digest, Sha256};

/// The four bytes that open every chunk.
pub const MAGIC: [u8; 4] = [0x85, 0x6f, 0x4a, 0x83];
/// Chunk type of a whole document (`AutoCommit::save`).
pub const TYPE_DOCUMENT: u8 = 0;
/// Chunk type of one change.
pub const TYPE_CHANGE: u8 = 1;
/// Chunk type of a deflate-compressed change.
pub const TYPE_COMPRESSED: u8 = 2;
/// Column spec bit saying the column's data is deflate-compressed.
pub const DEFLATE_BIT: u64 = 0b1000;
/// The parsers refuse to inflate more than this (the fuzzer's own inputs are small).
const INFLATE_CAP: u64 = 4 << 20;

/// Reads an unsigned LEB128 integer.
pub fn read_uleb(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Reads a signed LEB128 integer.
pub fn read_sleb(b: &[u8], pos: &mut usize) -> Option<i64> {
    let mut v: i64 = 0;
    let mut shift = 0;
    loop {
        let byte = *b.get(*pos)?;
        *pos += 1;
        if shift < 64 {
            v |= i64::from(byte & 0x7f) << shift;
        }
        shift += 7;
        if byte & 0x80 == 0 {
            if shift < 64 && byte & 0x40 != 0 {
                v |= -1i64 << shift;
            }
            return Some(v);
        }
        if shift > 70 {
            return None;
        }
    }
}

/// Appends an unsigned LEB128 integer.
pub fn write_uleb(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Appends a signed LEB128 integer.
pub fn write_sleb(out: &mut Vec<u8>, mut v: i64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        let done = (v == 0 && byte & 0x40 == 0) || (v == -1 && byte & 0x40 != 0);
        if done {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn take<'a>(b: &'a [u8], pos: &mut usize, n: u64) -> Option<&'a [u8]> {
    let n = usize::try_from(n).ok()?;
    let end = pos.checked_add(n)?;
    let s = b.get(*pos..end)?;
    *pos = end;
    Some(s)
}

fn hash32(b: &[u8], pos: &mut usize) -> Option<[u8; 32]> {
    let s = take(b, pos, 32)?;
    let mut h = [0u8; 32];
    h.copy_from_slice(s);
    Some(h)
}

/// A count read from the input, refused when it could not possibly fit in what is left
/// (each element takes at least `min_each` bytes).
fn count(b: &[u8], pos: &mut usize, min_each: usize) -> Option<usize> {
    let n = usize::try_from(read_uleb(b, pos)?).ok()?;
    (n.saturating_mul(min_each.max(1)) <= b.len().saturating_sub(*pos)).then_some(n)
}

/// The chunk checksum: first four bytes of `SHA-256(type ‖ uleb128(len) ‖ data)`.
pub fn checksum(ty: u8, data: &[u8]) -> [u8; 4] {
    let mut h = Sha256::new();
    let mut head = vec![ty];
    write_uleb(&mut head, data.len() as u64);
    h.update(&head);
    h.update(data);
    let d = h.finalize();
    [d[0], d[1], d[2], d[3]]
}

/// Deflates `data` (raw deflate, as Automerge uses).
pub fn deflate(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing to a Vec cannot fail.
    let _ = e.write_all(data);
    e.finish().unwrap_or_default()
}

/// Inflates at most [`INFLATE_CAP`] bytes; `None` if the stream is bad or larger.
pub fn inflate(data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    flate2::read::DeflateDecoder::new(data)
        .take(INFLATE_CAP + 1)
        .read_to_end(&mut out)
        .ok()?;
    (out.len() as u64 <= INFLATE_CAP).then_some(out)
}

/// One chunk, with a compressed change held inflated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Chunk type; a compressed change is held as [`TYPE_CHANGE`] with `compressed` set.
    pub ty: u8,
    /// The (inflated) chunk data.
    pub data: Vec<u8>,
    /// Write it back as a deflate-compressed change (type 2).
    pub compressed: bool,
}

impl Chunk {
    /// Appends the chunk with a correct length and checksum.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend(MAGIC);
        if self.compressed {
            let body = deflate(&self.data);
            out.extend(checksum(TYPE_CHANGE, &self.data));
            out.push(TYPE_COMPRESSED);
            write_uleb(out, body.len() as u64);
            out.extend(body);
        } else {
            out.extend(checksum(self.ty, &self.data));
            out.push(self.ty);
            write_uleb(out, self.data.len() as u64);
            out.extend(&self.data);
        }
    }
}

/// Splits a byte string made only of chunks (a saved document, `save_after` output, one
/// change of a sync message). The checksums are not checked: the writer recomputes them.
pub fn parse_chunks(b: &[u8]) -> Option<Vec<Chunk>> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < b.len() {
        if take(b, &mut pos, 4)? != MAGIC {
            return None;
        }
        take(b, &mut pos, 4)?;
        let ty = *b.get(pos)?;
        pos += 1;
        let len = read_uleb(b, &mut pos)?;
        let data = take(b, &mut pos, len)?;
        out.push(match ty {
            TYPE_COMPRESSED => Chunk {
                ty: TYPE_CHANGE,
                data: inflate(data)?,
                compressed: true,
            },
            _ => Chunk {
                ty,
                data: data.to_vec(),
                compressed: false,
            },
        });
    }
    (!out.is_empty()).then_some(out)
}

/// Writes chunks back.
pub fn write_chunks(chunks: &[Chunk]) -> Vec<u8> {
    let mut out = Vec::new();
    for c in chunks {
        c.write(&mut out);
    }
    out
}

/// One column: its spec (id, type, deflate bit) and its data as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// `id << 4 | deflate << 3 | type`.
    pub spec: u64,
    /// The column's bytes (compressed if the deflate bit is set).
    pub data: Vec<u8>,
}

fn parse_meta(b: &[u8], pos: &mut usize) -> Option<Vec<(u64, u64)>> {
    let n = count(b, pos, 2)?;
    let mut meta = Vec::with_capacity(n);
    for _ in 0..n {
        let spec = read_uleb(b, pos)?;
        let len = read_uleb(b, pos)?;
        meta.push((spec, len));
    }
    Some(meta)
}

fn take_columns(b: &[u8], pos: &mut usize, meta: Vec<(u64, u64)>) -> Option<Vec<Column>> {
    meta.into_iter()
        .map(|(spec, len)| {
            Some(Column {
                spec,
                data: take(b, pos, len)?.to_vec(),
            })
        })
        .collect()
}

fn write_columns(out: &mut Vec<u8>, cols: &[Column]) {
    write_uleb(out, cols.len() as u64);
    for c in cols {
        write_uleb(out, c.spec);
        write_uleb(out, c.data.len() as u64);
    }
}

fn parse_actor(b: &[u8], pos: &mut usize) -> Option<Vec<u8>> {
    let n = read_uleb(b, pos)?;
    Some(take(b, pos, n)?.to_vec())
}

fn write_actor(out: &mut Vec<u8>, a: &[u8]) {
    write_uleb(out, a.len() as u64);
    out.extend(a);
}

/// The contents of a document chunk (type 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocChunk {
    /// Actor ids.
    pub actors: Vec<Vec<u8>>,
    /// Heads.
    pub heads: Vec<[u8; 32]>,
    /// Change metadata columns.
    pub change_cols: Vec<Column>,
    /// Operation columns.
    pub op_cols: Vec<Column>,
    /// Head indices and anything after them.
    pub suffix: Vec<u8>,
}

impl DocChunk {
    /// Parses the data of a document chunk.
    pub fn parse(b: &[u8]) -> Option<Self> {
        let mut pos = 0;
        let n = count(b, &mut pos, 1)?;
        let actors = (0..n)
            .map(|_| parse_actor(b, &mut pos))
            .collect::<Option<Vec<_>>>()?;
        let n = count(b, &mut pos, 32)?;
        let heads = (0..n)
            .map(|_| hash32(b, &mut pos))
            .collect::<Option<Vec<_>>>()?;
        let change_meta = parse_meta(b, &mut pos)?;
        let op_meta = parse_meta(b, &mut pos)?;
        let change_cols = take_columns(b, &mut pos, change_meta)?;
        let op_cols = take_columns(b, &mut pos, op_meta)?;
        Some(Self {
            actors,
            heads,
            change_cols,
            op_cols,
            suffix: b[pos..].to_vec(),
        })
    }

    /// The chunk data again.
    pub fn write(&self) -> Vec<u8> {
        let mut out = Vec::new();
        write_uleb(&mut out, self.actors.len() as u64);
        for a in &self.actors {
            write_actor(&mut out, a);
        }
        write_uleb(&mut out, self.heads.len() as u64);
        for h in &self.heads {
            out.extend(h);
        }
        write_columns(&mut out, &self.change_cols);
        write_columns(&mut out, &self.op_cols);
        for c in self.change_cols.iter().chain(&self.op_cols) {
            out.extend(&c.data);
        }
        out.extend(&self.suffix);
        out
    }
}

/// The contents of a change chunk (type 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeChunk {
    /// Dependencies.
    pub deps: Vec<[u8; 32]>,
    /// Author.
    pub actor: Vec<u8>,
    /// Sequence number.
    pub seq: u64,
    /// First op counter (non-zero in valid changes).
    pub start_op: u64,
    /// Milliseconds since the epoch.
    pub time: i64,
    /// Commit message (UTF-8 in valid changes).
    pub message: Vec<u8>,
    /// Other actors referenced by the ops.
    pub other_actors: Vec<Vec<u8>>,
    /// Operation columns (never compressed inside a change).
    pub cols: Vec<Column>,
    /// Trailing bytes Automerge keeps as they are.
    pub extra: Vec<u8>,
}

impl ChangeChunk {
    /// Parses the data of a change chunk.
    pub fn parse(b: &[u8]) -> Option<Self> {
        let mut pos = 0;
        let n = count(b, &mut pos, 32)?;
        let deps = (0..n)
            .map(|_| hash32(b, &mut pos))
            .collect::<Option<Vec<_>>>()?;
        let actor = parse_actor(b, &mut pos)?;
        let seq = read_uleb(b, &mut pos)?;
        let start_op = read_uleb(b, &mut pos)?;
        let time = read_sleb(b, &mut pos)?;
        let mlen = read_uleb(b, &mut pos)?;
        let message = take(b, &mut pos, mlen)?.to_vec();
        let n = count(b, &mut pos, 1)?;
        let other_actors = (0..n)
            .map(|_| parse_actor(b, &mut pos))
            .collect::<Option<Vec<_>>>()?;
        let meta = parse_meta(b, &mut pos)?;
        let cols = take_columns(b, &mut pos, meta)?;
        Some(Self {
            deps,
            actor,
            seq,
            start_op,
            time,
            message,
            other_actors,
            cols,
            extra: b[pos..].to_vec(),
        })
    }

    /// The chunk data again.
    pub fn write(&self) -> Vec<u8> {
        let mut out = Vec::new();
        write_uleb(&mut out, self.deps.len() as u64);
        for d in &self.deps {
            out.extend(d);
        }
        write_actor(&mut out, &self.actor);
        write_uleb(&mut out, self.seq);
        write_uleb(&mut out, self.start_op);
        write_sleb(&mut out, self.time);
        write_uleb(&mut out, self.message.len() as u64);
        out.extend(&self.message);
        write_uleb(&mut out, self.other_actors.len() as u64);
        for a in &self.other_actors {
            write_actor(&mut out, a);
        }
        write_columns(&mut out, &self.cols);
        for c in &self.cols {
            out.extend(&c.data);
        }
        out.extend(&self.extra);
        out
    }
}

/// One `have` entry of a sync message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Have {
    /// Heads at the last sync.
    pub last_sync: Vec<[u8; 32]>,
    /// Raw bloom filter: `uleb(entries) uleb(bits_per_entry) uleb(probes) bits`, or empty.
    pub bloom: Vec<u8>,
}

/// An `automerge::sync::Message` taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncMsg {
    /// `0x42` (v1) or `0x43` (v2).
    pub version: u8,
    /// Sender's heads.
    pub heads: Vec<[u8; 32]>,
    /// Hashes the sender needs.
    pub need: Vec<[u8; 32]>,
    /// What the sender has.
    pub have: Vec<Have>,
    /// Change (or, in v2, document) chunks.
    pub changes: Vec<Vec<u8>>,
    /// Flag bytes, when present.
    pub flags: Option<Vec<u8>>,
}

fn hashes(b: &[u8], pos: &mut usize) -> Option<Vec<[u8; 32]>> {
    let n = count(b, pos, 32)?;
    (0..n).map(|_| hash32(b, pos)).collect()
}

fn write_hashes(out: &mut Vec<u8>, h: &[[u8; 32]]) {
    write_uleb(out, h.len() as u64);
    for x in h {
        out.extend(x);
    }
}

fn bytes(b: &[u8], pos: &mut usize) -> Option<Vec<u8>> {
    let n = read_uleb(b, pos)?;
    Some(take(b, pos, n)?.to_vec())
}

impl SyncMsg {
    /// Parses an encoded sync message.
    pub fn parse(b: &[u8]) -> Option<Self> {
        let mut pos = 0;
        let version = *b.first()?;
        pos += 1;
        let heads = hashes(b, &mut pos)?;
        let need = hashes(b, &mut pos)?;
        let n = count(b, &mut pos, 2)?;
        let have = (0..n)
            .map(|_| {
                Some(Have {
                    last_sync: hashes(b, &mut pos)?,
                    bloom: bytes(b, &mut pos)?,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        let n = count(b, &mut pos, 1)?;
        let changes = (0..n)
            .map(|_| bytes(b, &mut pos))
            .collect::<Option<Vec<_>>>()?;
        let flags = if pos < b.len() {
            Some(bytes(b, &mut pos)?)
        } else {
            None
        };
        (pos == b.len()).then_some(Self {
            version,
            heads,
            need,
            have,
            changes,
            flags,
        })
    }

    /// Encodes it again.
    pub fn write(&self) -> Vec<u8> {
        let mut out = vec![self.version];
        write_hashes(&mut out, &self.heads);
        write_hashes(&mut out, &self.need);
        write_uleb(&mut out, self.have.len() as u64);
        for h in &self.have {
            write_hashes(&mut out, &h.last_sync);
            write_uleb(&mut out, h.bloom.len() as u64);
            out.extend(&h.bloom);
        }
        write_uleb(&mut out, self.changes.len() as u64);
        for c in &self.changes {
            write_uleb(&mut out, c.len() as u64);
            out.extend(c);
        }
        if let Some(f) = &self.flags {
            write_uleb(&mut out, f.len() as u64);
            out.extend(f);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leb_round_trips() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            write_uleb(&mut b, v);
            assert_eq!(read_uleb(&b, &mut 0), Some(v));
        }
        for v in [0i64, 1, -1, 63, 64, -64, -65, i64::MAX, i64::MIN] {
            let mut b = Vec::new();
            write_sleb(&mut b, v);
            assert_eq!(read_sleb(&b, &mut 0), Some(v), "{v}");
        }
    }
}
