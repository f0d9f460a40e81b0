//! Structure-aware mutation: takes a fuzz input apart (hearth frames → `SyncMessage` →
//! Automerge sync message → chunks → document/change columns), changes one piece, and
//! writes everything back with correct lengths and chunk checksums, so the mutated input
//! gets past postcard, the sync-message parser and Automerge's checksum check and reaches
//! the code that applies it. Byte-level changes inside a piece are delegated to
//! libFuzzer's own mutator (`bytes`), so coverage feedback still steers them.
//!
//! Compression bombs: a document column switched to deflate whose stream inflates to up
//! to ~1.3 GiB of zeros, and a compressed change chunk (type 2) whose stream is a real
//! change followed by as many zeros; also RLE run lengths and counts set to huge values.

use hearth_protocol::{
    decode_frame, encode_frame, DocEntry, DocSnapshot, PairRequest, PairResponse, SyncMessage,
};

use crate::amfmt::{
    self, parse_chunks, write_sleb, write_uleb, ChangeChunk, Chunk, Column, DocChunk, SyncMsg,
    DEFLATE_BIT, TYPE_CHANGE, TYPE_DOCUMENT,
};
use crate::bomb;

/// Values that tend to sit on a boundary somewhere.
const INTERESTING: [u64; 16] = [
    0,
    1,
    2,
    7,
    0x7f,
    0x80,
    0xff,
    0x100,
    0xffff,
    0x10000,
    0x7fff_ffff,
    0xffff_ffff,
    1 << 32,
    1 << 40,
    i64::MAX as u64,
    u64::MAX,
];

const KINDS: [&str; 7] = ["note", "task", "project", "contact", "skill", "", "Note"];

/// A small xorshift generator seeded by libFuzzer.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeds it (zero is replaced).
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    /// Next 64 random bits.
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    /// True once in `n` times.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.next() % n.max(1) == 0
    }
}

/// The mutator for one call of `LLVMFuzzerCustomMutator`.
pub struct Mutator<'a> {
    /// Random choices.
    pub rng: Rng,
    /// libFuzzer's byte mutator on one piece (`fuzzer_mutate`), growing it a little.
    pub bytes: &'a mut dyn FnMut(&mut Vec<u8>),
    /// Document ids the fuzzing store holds (to aim snapshots and sync messages at them).
    pub known_ids: &'a [[u8; 16]],
    /// How many MiB the largest bomb inflates to (0: no bombs).
    pub max_bomb_mib: usize,
}

impl Mutator<'_> {
    fn interesting(&mut self) -> u64 {
        let v = INTERESTING[self.rng.below(INTERESTING.len())];
        match self.rng.below(4) {
            0 => v.wrapping_add(1),
            1 => v.wrapping_sub(1),
            _ => v,
        }
    }

    fn bomb_mib(&mut self) -> usize {
        let mib = match self.rng.below(100) {
            0..=69 => 1 + self.rng.below(16),
            70..=96 => 64 + self.rng.below(256),
            _ => 1100 + self.rng.below(200),
        };
        mib.min(self.max_bomb_mib)
    }

    fn doc_id(&mut self, current: [u8; 16]) -> [u8; 16] {
        match self.rng.below(4) {
            0 | 1 if !self.known_ids.is_empty() => {
                self.known_ids[self.rng.below(self.known_ids.len())]
            }
            2 => {
                let mut id = current;
                id[self.rng.below(16)] ^= 1 << self.rng.below(8);
                id
            }
            _ => {
                let mut id = [0u8; 16];
                for b in id.iter_mut() {
                    *b = self.rng.next() as u8;
                }
                id
            }
        }
    }

    fn hash_list(&mut self, list: &mut Vec<[u8; 32]>) {
        match self.rng.below(5) {
            0 => list.clear(),
            1 if !list.is_empty() => {
                let h = list[self.rng.below(list.len())];
                list.push(h);
            }
            2 if !list.is_empty() => {
                let i = self.rng.below(list.len());
                list.remove(i);
            }
            3 if !list.is_empty() => {
                let i = self.rng.below(list.len());
                list[i][self.rng.below(32)] ^= 1 << self.rng.below(8);
            }
            _ => {
                let mut h = [0u8; 32];
                for b in h.iter_mut() {
                    *b = self.rng.next() as u8;
                }
                list.push(h);
            }
        }
    }

    fn leb_bytes(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.rng.one_in(2) {
            write_uleb(&mut out, self.interesting());
        } else {
            write_sleb(&mut out, self.interesting() as i64);
        }
        out
    }

    /// Changes one column: its bytes, its RLE run or count, its compression, or bombs it.
    fn column(&mut self, c: &mut Column, may_deflate: bool) {
        let deflated = c.spec & DEFLATE_BIT != 0;
        match self.rng.below(12) {
            0..=4 => {
                if deflated {
                    if let Some(mut raw) = amfmt::inflate(&c.data) {
                        (self.bytes)(&mut raw);
                        c.data = amfmt::deflate(&raw);
                        return;
                    }
                }
                (self.bytes)(&mut c.data);
            }
            5 | 6 => {
                // A run length or count at the head of the column: RLE, delta and boolean
                // columns start with one.
                let mut pos = 0;
                let _ = amfmt::read_sleb(&c.data, &mut pos);
                let mut v = self.leb_bytes();
                v.extend(c.data.get(pos..).unwrap_or_default());
                c.data = v;
            }
            7 if may_deflate && !deflated => {
                c.spec |= DEFLATE_BIT;
                c.data = amfmt::deflate(&c.data);
            }
            7 if deflated => {
                if let Some(raw) = amfmt::inflate(&c.data) {
                    c.spec &= !DEFLATE_BIT;
                    c.data = raw;
                }
            }
            8 if self.max_bomb_mib > 0 => {
                c.spec |= DEFLATE_BIT;
                let prefix = bomb::prefix_blocks(&c.data);
                let mib = self.bomb_mib();
                c.data = bomb::zeros(&prefix, mib);
            }
            9 => c.spec = self.interesting() & 0xffff_ffff,
            10 => c.spec ^= 1 << self.rng.below(8),
            _ => {
                let mut pos = self.rng.below(c.data.len() + 1);
                let v = self.leb_bytes();
                pos = pos.min(c.data.len());
                c.data.splice(pos..pos, v);
            }
        }
    }

    fn columns(&mut self, cols: &mut Vec<Column>, may_deflate: bool) {
        if cols.is_empty() {
            cols.push(Column {
                spec: self.interesting() & 0xffff_ffff,
                data: self.leb_bytes(),
            });
            return;
        }
        let i = self.rng.below(cols.len());
        match self.rng.below(10) {
            0 => {
                cols.remove(i);
            }
            1 => {
                let c = cols[i].clone();
                cols.insert(i, c);
            }
            _ => self.column(&mut cols[i], may_deflate),
        }
    }

    fn actors(&mut self, actors: &mut Vec<Vec<u8>>) {
        match self.rng.below(4) {
            0 if !actors.is_empty() => {
                let i = self.rng.below(actors.len());
                actors.remove(i);
            }
            1 if !actors.is_empty() => {
                let a = actors[self.rng.below(actors.len())].clone();
                actors.push(a);
            }
            _ if !actors.is_empty() => {
                let i = self.rng.below(actors.len());
                (self.bytes)(&mut actors[i]);
            }
            _ => actors.push(vec![0; 16]),
        }
    }

    fn document(&mut self, d: &mut DocChunk) {
        match self.rng.below(10) {
            0..=2 => self.columns(&mut d.op_cols, true),
            3..=4 => self.columns(&mut d.change_cols, true),
            5 => self.actors(&mut d.actors),
            6 => self.hash_list(&mut d.heads),
            7 => {
                let v = self.leb_bytes();
                d.suffix = v;
            }
            8 => (self.bytes)(&mut d.suffix),
            _ => {
                // Two mutations at once.
                self.columns(&mut d.op_cols, true);
                self.columns(&mut d.change_cols, true);
            }
        }
    }

    fn change(&mut self, c: &mut ChangeChunk) {
        match self.rng.below(12) {
            0..=4 => self.columns(&mut c.cols, false),
            5 => self.hash_list(&mut c.deps),
            6 => c.seq = self.interesting(),
            7 => c.start_op = self.interesting(),
            8 => c.time = self.interesting() as i64,
            9 => (self.bytes)(&mut c.message),
            10 => self.actors(&mut c.other_actors),
            _ => match self.rng.below(2) {
                0 => (self.bytes)(&mut c.actor),
                _ => (self.bytes)(&mut c.extra),
            },
        }
    }

    /// Mutates Automerge storage bytes (a saved document or a run of chunks); `None` if
    /// they are not chunks.
    pub fn automerge(&mut self, b: &[u8]) -> Option<Vec<u8>> {
        let mut chunks = parse_chunks(b)?;
        let i = self.rng.below(chunks.len());
        match self.rng.below(16) {
            0 => {
                let c = chunks[i].clone();
                chunks.insert(i, c);
            }
            1 if chunks.len() > 1 => {
                chunks.remove(i);
            }
            2 => {
                let j = self.rng.below(chunks.len());
                chunks.swap(i, j);
            }
            3 if chunks[i].ty == TYPE_CHANGE => chunks[i].compressed ^= true,
            4 => (self.bytes)(&mut chunks[i].data),
            5 => chunks[i].ty = self.rng.below(5) as u8,
            6 if self.max_bomb_mib > 0 && chunks[i].ty == TYPE_CHANGE => {
                // Compressed-change bomb: the real change, then zeros. Automerge inflates
                // everything before it parses or checks anything.
                let mib = self.bomb_mib();
                let stream = bomb::zeros(&bomb::prefix_blocks(&chunks[i].data), mib);
                let mut out = amfmt::write_chunks(&chunks[..i]);
                out.extend(amfmt::MAGIC);
                out.extend(amfmt::checksum(TYPE_CHANGE, &chunks[i].data));
                out.push(amfmt::TYPE_COMPRESSED);
                write_uleb(&mut out, stream.len() as u64);
                out.extend(stream);
                out.extend(amfmt::write_chunks(&chunks[i + 1..]));
                return Some(out);
            }
            _ => {
                let c: &mut Chunk = &mut chunks[i];
                match c.ty {
                    TYPE_DOCUMENT => {
                        let mut d = DocChunk::parse(&c.data)?;
                        self.document(&mut d);
                        c.data = d.write();
                    }
                    TYPE_CHANGE => {
                        let mut ch = ChangeChunk::parse(&c.data)?;
                        self.change(&mut ch);
                        c.data = ch.write();
                    }
                    _ => (self.bytes)(&mut c.data),
                }
            }
        }
        Some(amfmt::write_chunks(&chunks))
    }

    fn bloom(&mut self, bloom: &mut Vec<u8>) {
        let mut pos = 0;
        let mut vals = [0u64; 3];
        for v in vals.iter_mut() {
            *v = amfmt::read_uleb(bloom, &mut pos).unwrap_or(0);
        }
        let which = self.rng.below(3);
        vals[which] = self.interesting() & 0xffff_ffff;
        let mut out = Vec::new();
        for v in vals {
            write_uleb(&mut out, v);
        }
        // Keep the bit array as long as the header says (up to 64 KiB), so the parser
        // accepts it and the probing code runs.
        let want = ((vals[0] as f64 * vals[1] as f64) / 8.0).ceil() as usize;
        let bits = bloom.get(pos..).unwrap_or_default();
        if want <= 1 << 16 {
            out.extend(
                bits.iter()
                    .copied()
                    .chain(std::iter::repeat(0xff))
                    .take(want),
            );
        } else {
            out.extend(bits);
        }
        *bloom = out;
    }

    /// Mutates an encoded `automerge::sync::Message`; `None` if it does not parse.
    pub fn sync_message(&mut self, b: &[u8]) -> Option<Vec<u8>> {
        let mut m = SyncMsg::parse(b)?;
        match self.rng.below(16) {
            0..=7 if !m.changes.is_empty() => {
                let i = self.rng.below(m.changes.len());
                m.changes[i] = self.automerge(&m.changes[i])?;
            }
            8 if !m.changes.is_empty() => {
                let i = self.rng.below(m.changes.len());
                match self.rng.below(3) {
                    0 => {
                        m.changes.remove(i);
                    }
                    1 => {
                        let c = m.changes[i].clone();
                        m.changes.push(c);
                    }
                    _ => (self.bytes)(&mut m.changes[i]),
                }
            }
            9 | 10 => {
                if m.have.is_empty() {
                    m.have.push(amfmt::Have {
                        last_sync: Vec::new(),
                        bloom: Vec::new(),
                    });
                }
                let i = self.rng.below(m.have.len());
                if self.rng.one_in(3) {
                    self.hash_list(&mut m.have[i].last_sync);
                } else {
                    self.bloom(&mut m.have[i].bloom);
                }
            }
            11 => self.hash_list(&mut m.heads),
            12 => self.hash_list(&mut m.need),
            13 => m.version ^= 1,
            14 => {
                let mut f = m.flags.take().unwrap_or_default();
                (self.bytes)(&mut f);
                m.flags = Some(f);
            }
            _ => {
                // Move the heads of one message's change list into `need` or `heads`.
                let mut h = [0u8; 32];
                if let Some(c) = m.changes.first() {
                    use sha2::Digest;
                    let hash = sha2::Sha256::digest(c.get(8..).unwrap_or_default());
                    h.copy_from_slice(&hash);
                }
                m.need.push(h);
            }
        }
        Some(m.write())
    }

    fn string(&mut self, s: &mut String) {
        let mut b = std::mem::take(s).into_bytes();
        (self.bytes)(&mut b);
        *s = String::from_utf8_lossy(&b).into_owned();
    }

    fn opt_id_string(&mut self, s: &mut Option<String>) {
        *s = match self.rng.below(4) {
            0 => None,
            1 | 2 if !self.known_ids.is_empty() => {
                let id = self.known_ids[self.rng.below(self.known_ids.len())];
                Some(id.iter().map(|b| format!("{b:02x}")).collect())
            }
            _ => {
                let mut v = s.take().unwrap_or_default();
                self.string(&mut v);
                Some(v)
            }
        };
    }

    fn snapshot(&mut self, d: &mut DocSnapshot) {
        match self.rng.below(20) {
            0..=11 => {
                if let Some(b) = self.automerge(&d.bytes) {
                    d.bytes = b;
                } else {
                    (self.bytes)(&mut d.bytes);
                }
            }
            12 => (self.bytes)(&mut d.bytes),
            13 => self.hash_list(&mut d.heads),
            14 => d.id = self.doc_id(d.id),
            15 => d.index.kind = KINDS[self.rng.below(KINDS.len())].to_string(),
            16 => self.opt_id_string(&mut d.index.project),
            17 => self.opt_id_string(&mut d.index.parent),
            18 => self.string(&mut d.index.title),
            _ => {
                d.index.deleted ^= true;
                d.index.updated_at = self.interesting() as i64;
            }
        }
    }

    /// Mutates one `SyncMessage` in place.
    pub fn sync_frame_message(&mut self, msg: &mut SyncMessage) {
        match msg {
            SyncMessage::Sync { doc, message } => match self.rng.below(10) {
                0 => *doc = self.doc_id(*doc),
                1 => (self.bytes)(message),
                _ => {
                    if let Some(m) = self.sync_message(message) {
                        *message = m;
                    } else {
                        (self.bytes)(message);
                    }
                }
            },
            SyncMessage::Snapshots { docs } => {
                if docs.is_empty() {
                    return;
                }
                let i = self.rng.below(docs.len());
                match self.rng.below(12) {
                    0 => {
                        let mut d = docs[i].clone();
                        d.id = self.doc_id(d.id);
                        docs.push(d);
                    }
                    1 if docs.len() > 1 => {
                        docs.remove(i);
                    }
                    _ => self.snapshot(&mut docs[i]),
                }
            }
            SyncMessage::Hello { root, docs } => {
                root[self.rng.below(16)] ^= 1 << self.rng.below(8);
                *docs = self.interesting();
            }
            SyncMessage::Buckets { digests } => match self.rng.below(3) {
                0 => {
                    digests.pop();
                }
                1 => digests.push([0xff; 16]),
                _ if !digests.is_empty() => {
                    let i = self.rng.below(digests.len());
                    digests[i][0] ^= 1;
                }
                _ => {}
            },
            SyncMessage::Entries { buckets, entries } => match self.rng.below(3) {
                0 => (self.bytes)(buckets),
                1 => entries.push(DocEntry {
                    id: self.doc_id([0; 16]),
                    digest: [1; 16],
                }),
                _ => {
                    entries.pop();
                }
            },
            SyncMessage::CatchUpDone => {}
        }
    }

    /// Changes the header or body of an encoded frame so that it is wrong in one way
    /// (length, version, trailing or missing bytes).
    fn break_frame(&mut self, f: &mut Vec<u8>) {
        if f.len() < 5 {
            (self.bytes)(f);
            return;
        }
        match self.rng.below(5) {
            0 => {
                let len = (self.interesting() & 0xffff_ffff) as u32;
                f[..4].copy_from_slice(&len.to_be_bytes());
            }
            1 => f[4] = self.rng.next() as u8,
            2 => {
                f.push(self.rng.next() as u8);
                let len = (f.len() - 4) as u32;
                f[..4].copy_from_slice(&len.to_be_bytes());
            }
            3 => {
                let cut = self.rng.below(f.len());
                f.truncate(cut);
            }
            _ => {
                let mut body = f.split_off(4);
                (self.bytes)(&mut body);
                let len = body.len() as u32;
                f.clear();
                f.extend(len.to_be_bytes());
                f.extend(body);
            }
        }
    }

    /// Mutates a run of encoded `SyncMessage` frames; `None` if the first does not decode.
    pub fn sync_frames(&mut self, b: &[u8]) -> Option<Vec<u8>> {
        let mut frames = split_frames::<SyncMessage>(b);
        if frames.is_empty() {
            return None;
        }
        let i = self.rng.below(frames.len());
        match self.rng.below(24) {
            0 => {
                let f = frames[i].clone();
                frames.insert(i, f);
            }
            1 if frames.len() > 1 => {
                frames.remove(i);
            }
            2 => {
                let j = self.rng.below(frames.len());
                frames.swap(i, j);
            }
            _ => {
                if let Frame::Decoded(m) = &mut frames[i] {
                    self.sync_frame_message(m);
                }
            }
        }
        let mut out = Vec::new();
        for f in frames {
            match f {
                Frame::Decoded(m) => out.extend(encode_frame(&m).ok()?),
                Frame::Raw(r) => out.extend(r),
            }
        }
        Some(out)
    }

    /// Mutates the input of `frame_sync`: structured most of the time, a broken frame or
    /// plain bytes otherwise.
    pub fn frame_sync_input(&mut self, b: &[u8]) -> Vec<u8> {
        if !self.rng.one_in(8) {
            if let Some(out) = self.sync_frames(b) {
                return out;
            }
        }
        let mut v = b.to_vec();
        self.break_frame(&mut v);
        v
    }

    /// Mutates the input of `frame_pair`: `[0 = PairRequest | 1 = PairResponse] ‖ frame`.
    pub fn frame_pair_input(&mut self, b: &[u8]) -> Vec<u8> {
        let (&which, frame) = b.split_first().unwrap_or((&0, &[]));
        let which = which & 1;
        let mut body = if self.rng.one_in(6) {
            None
        } else if which == 0 {
            decode_frame::<PairRequest>(frame)
                .ok()
                .flatten()
                .and_then(|(mut m, _)| {
                    self.pair_request(&mut m);
                    encode_frame(&m).ok()
                })
        } else {
            decode_frame::<PairResponse>(frame)
                .ok()
                .flatten()
                .and_then(|(mut m, _)| {
                    self.pair_response(&mut m);
                    encode_frame(&m).ok()
                })
        }
        .unwrap_or_else(|| {
            let mut v = frame.to_vec();
            self.break_frame(&mut v);
            v
        });
        let mut out = vec![if self.rng.one_in(16) {
            which ^ 1
        } else {
            which
        }];
        out.append(&mut body);
        out
    }

    fn pair_request(&mut self, m: &mut PairRequest) {
        match m {
            PairRequest::Start {
                device_name,
                ticket_secret,
            } => match self.rng.below(4) {
                0 => *ticket_secret = None,
                1 => *ticket_secret = Some([self.rng.next() as u8; 16]),
                2 => *m = PairRequest::Poll,
                _ => self.string(device_name),
            },
            PairRequest::Poll => {
                *m = PairRequest::Start {
                    device_name: "laptop".into(),
                    ticket_secret: None,
                }
            }
        }
    }

    fn pair_response(&mut self, m: &mut PairResponse) {
        let n = self.interesting() as u32;
        match m {
            PairResponse::Code {
                user_code,
                expires_in_secs,
            } => {
                if self.rng.one_in(2) {
                    self.string(user_code)
                } else {
                    *expires_in_secs = n
                }
            }
            PairResponse::Approved { hub_name, scope } => {
                if self.rng.one_in(2) {
                    self.string(hub_name)
                } else {
                    let mut s = scope.take();
                    self.opt_id_string(&mut s);
                    *scope = s;
                }
            }
            PairResponse::Throttled { retry_after_secs } => *retry_after_secs = n,
            PairResponse::Refused { reason } => self.string(reason),
            _ => {
                *m = match self.rng.below(4) {
                    0 => PairResponse::Pending,
                    1 => PairResponse::Denied,
                    2 => PairResponse::Expired,
                    _ => PairResponse::Approved {
                        hub_name: "hub".into(),
                        scope: None,
                    },
                }
            }
        }
    }

    /// Mutates the input of the store targets: `flags ‖ frames`.
    pub fn store_input(&mut self, b: &[u8]) -> Vec<u8> {
        let (&flags, frames) = b.split_first().unwrap_or((&0, &[]));
        if self.rng.one_in(24) {
            let mut out = vec![flags ^ (1 << self.rng.below(2))];
            out.extend(frames);
            return out;
        }
        if !self.rng.one_in(24) {
            if let Some(mut f) = self.sync_frames(frames) {
                let mut out = vec![flags];
                out.append(&mut f);
                return out;
            }
        }
        let mut v = b.to_vec();
        (self.bytes)(&mut v);
        v
    }
}

/// One frame of an input: decoded, or bytes that do not decode (kept as they are).
#[derive(Debug, Clone)]
enum Frame<T> {
    Decoded(T),
    Raw(Vec<u8>),
}

/// Splits `b` into frames; whatever follows the first undecodable frame stays raw.
fn split_frames<T: serde::de::DeserializeOwned>(mut b: &[u8]) -> Vec<Frame<T>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        match decode_frame::<T>(b) {
            Ok(Some((m, used))) => {
                out.push(Frame::Decoded(m));
                b = &b[used..];
            }
            _ => {
                out.push(Frame::Raw(b.to_vec()));
                break;
            }
        }
    }
    if !out.iter().any(|f| matches!(f, Frame::Decoded(_))) {
        out.clear();
    }
    out
}
