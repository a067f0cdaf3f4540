//! BSONColumn: the compressed column format of mongod's time-series buckets
//! (BinData subtype 7, "Column"), as its documentation describes it.
//!
//! A column is a sequence of control bytes, each followed by what it names:
//! - a *literal*: a control byte that is a BSON type (`& 0xE0 == 0`, or
//!   MinKey/MaxKey) starts a whole element with an empty field name; it is the
//!   next value and the base for the deltas after it;
//! - *Simple-8b blocks*: a control byte `0x80..=0xDF` is followed by
//!   `(control & 0x0F) + 1` words ([`simple8b`]); its high nibble picks the
//!   scale of doubles (`0x9`-`0xD`: times 1, 10, 100, 10^4, 10^8; `0x8`: the
//!   double's bits as an integer, the only scale other types use). Each slot
//!   is a zigzag delta from the previous value (a missing slot is a skip):
//!   plain deltas for int32, int64, bool and doubles (scaled), deltas of deltas
//!   for dates, timestamps and ObjectIds (timestamp and counter bytes, the
//!   process-unique bytes kept from the literal), 128-bit deltas for strings
//!   and code (up to 16 bytes, reversed), short BinData and decimals, and only
//!   zero deltas (repeats) for every other type;
//! - *interleaved* mode (`0xF0` legacy, `0xF1` object, `0xF2` array root): a
//!   reference document follows; each scalar leaf is a stream of its own, the
//!   next control byte always belonging to the first stream (in reference
//!   order) that has run out of slots; each value is the reference rebuilt from
//!   one slot per stream (missing leaves left out); an `0x00` where a stream
//!   would read a control byte ends the mode;
//! - `0x00` (EOO) ends the column.
//!
//! The decoder reads all of that. The encoder writes literals, delta and
//! delta-of-delta runs with scaled doubles, skips, runs (RLE) and the plain
//! Simple-8b selectors, and writes sub-documents as literals (repeats as zero
//! deltas) rather than in interleaved mode: a valid column any reader decodes,
//! though mongod's own encoder packs sub-documents tighter.

pub mod simple8b;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::oid::ObjectId;
use bson::{Bson, Decimal128, Document, RawDocument, Timestamp};

use simple8b::MAX_SLOT;

/// `kScaleMultiplier`: the scales of doubles, by scale index (5: raw bits).
const SCALES: [f64; 5] = [1.0, 10.0, 100.0, 10_000.0, 100_000_000.0];
const RAW_BITS: u8 = 5;
/// Control byte (high nibble) for each scale index.
const SCALE_CONTROL: [u8; 6] = [0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0x80];
/// 2^53: past it a double no longer holds every integer.
const SAFE: f64 = 9_007_199_254_740_992.0;

fn invalid(what: &str) -> MongoError {
    MongoError::new(
        ErrorCode::InvalidBSON,
        format!("Invalid BSONColumn encoding: {what}"),
    )
}

fn zigzag(v: i64) -> u128 {
    u128::from(((v << 1) ^ (v >> 63)) as u64)
}

fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

fn zigzag128(v: i128) -> u128 {
    ((v << 1) ^ (v >> 127)) as u128
}

fn unzigzag128(u: u128) -> i128 {
    ((u >> 1) as i128) ^ -((u & 1) as i128)
}

/// The smallest scale index at which `v` is an exact integer, if any.
fn double_scale(v: f64) -> Option<u8> {
    if !v.is_finite() {
        return None;
    }
    (0..SCALES.len() as u8).find(|&i| encode_double(v, i).is_some())
}

fn encode_double(v: f64, scale: u8) -> Option<i64> {
    if scale == RAW_BITS {
        return Some(v.to_bits() as i64);
    }
    let m = *SCALES.get(usize::from(scale))?;
    let x = v * m;
    if !(-SAFE..=SAFE).contains(&x) {
        return None;
    }
    let n = x.round() as i64;
    ((n as f64 / m).to_bits() == v.to_bits()).then_some(n)
}

fn decode_double(n: i64, scale: u8) -> f64 {
    match SCALES.get(usize::from(scale)) {
        Some(m) => n as f64 / m,
        None => f64::from_bits(n as u64),
    }
}

/// ObjectId timestamp and counter bytes, rearranged so the changing bytes
/// sit low (the process-unique bytes are not part of it).
fn encode_oid(o: &ObjectId) -> i64 {
    let b = o.bytes();
    let e = [b[11], b[3], b[10], b[2], b[9], b[1], b[0], 0];
    i64::from_le_bytes(e)
}

fn decode_oid(n: i64, like: &ObjectId) -> ObjectId {
    let e = n.to_le_bytes();
    let mut b = like.bytes();
    b[0] = e[6];
    b[1] = e[5];
    b[2] = e[3];
    b[3] = e[1];
    b[9] = e[4];
    b[10] = e[2];
    b[11] = e[0];
    ObjectId::from_bytes(b)
}

/// Strings of at most 16 bytes not starting with NUL, reversed into an integer.
fn encode_str(s: &str) -> Option<i128> {
    let b = s.as_bytes();
    if b.len() > 16 || b.first() == Some(&0) {
        return None;
    }
    let mut a = [0u8; 16];
    for (i, c) in b.iter().rev().enumerate() {
        a[i] = *c;
    }
    Some(i128::from_le_bytes(a))
}

fn decode_str(n: i128) -> MongoResult<String> {
    let a = n.to_le_bytes();
    let len = a.iter().rposition(|c| *c != 0).map_or(0, |p| p + 1);
    let mut b = a[..len].to_vec();
    b.reverse();
    String::from_utf8(b).map_err(|_| invalid("string delta is not UTF-8"))
}

fn encode_bin(b: &[u8]) -> Option<i128> {
    if b.len() > 16 {
        return None;
    }
    let mut a = [0u8; 16];
    a[..b.len()].copy_from_slice(b);
    Some(i128::from_le_bytes(a))
}

/// How a type's values turn into integers for deltas.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    /// 64-bit plain deltas (doubles scaled).
    Delta,
    /// 64-bit deltas of deltas.
    DeltaOfDelta,
    /// 128-bit plain deltas.
    Wide,
    /// Repeats only.
    ZeroOnly,
}

fn kind(v: &Bson) -> Kind {
    match v {
        Bson::DateTime(_) | Bson::Timestamp(_) | Bson::ObjectId(_) => Kind::DeltaOfDelta,
        Bson::Double(_) | Bson::Int32(_) | Bson::Int64(_) | Bson::Boolean(_) => Kind::Delta,
        Bson::String(_) | Bson::JavaScriptCode(_) | Bson::Binary(_) | Bson::Decimal128(_) => {
            Kind::Wide
        }
        _ => Kind::ZeroOnly,
    }
}

/// The integer a 64-bit value stands for at `scale` (doubles only use it).
fn int64_of(v: &Bson, scale: u8) -> Option<i64> {
    Some(match v {
        Bson::Double(d) => encode_double(*d, scale)?,
        Bson::Int32(i) => i64::from(*i),
        Bson::Int64(i) => *i,
        Bson::Boolean(b) => i64::from(*b),
        Bson::DateTime(d) => d.timestamp_millis(),
        Bson::Timestamp(t) => ((u64::from(t.time) << 32) | u64::from(t.increment)) as i64,
        Bson::ObjectId(o) => encode_oid(o),
        _ => return None,
    })
}

fn int128_of(v: &Bson) -> Option<i128> {
    match v {
        Bson::String(s) | Bson::JavaScriptCode(s) => encode_str(s),
        Bson::Binary(b) => encode_bin(&b.bytes),
        Bson::Decimal128(d) => Some(i128::from_le_bytes(d.bytes())),
        _ => None,
    }
}

/// The value of the type of `like` that the integer `n` stands for.
fn materialize64(like: &Bson, n: i64, scale: u8) -> MongoResult<Bson> {
    Ok(match like {
        Bson::Double(_) => Bson::Double(decode_double(n, scale)),
        Bson::Int32(_) => Bson::Int32(n as i32),
        Bson::Int64(_) => Bson::Int64(n),
        Bson::Boolean(_) => Bson::Boolean(n != 0),
        Bson::DateTime(_) => Bson::DateTime(bson::DateTime::from_millis(n)),
        Bson::Timestamp(_) => Bson::Timestamp(Timestamp {
            time: ((n as u64) >> 32) as u32,
            increment: n as u32,
        }),
        Bson::ObjectId(o) => Bson::ObjectId(decode_oid(n, o)),
        _ => return Err(invalid("non-zero delta for a type without deltas")),
    })
}

fn materialize128(like: &Bson, n: i128) -> MongoResult<Bson> {
    Ok(match like {
        Bson::String(_) => Bson::String(decode_str(n)?),
        Bson::JavaScriptCode(_) => Bson::JavaScriptCode(decode_str(n)?),
        Bson::Binary(b) => {
            let len = b.bytes.len();
            if len > 16 {
                return Err(invalid("BinData delta longer than 16 bytes"));
            }
            Bson::Binary(bson::Binary {
                subtype: b.subtype,
                bytes: n.to_le_bytes()[..len].to_vec(),
            })
        }
        Bson::Decimal128(_) => Bson::Decimal128(Decimal128::from_bytes(n.to_le_bytes())),
        _ => return Err(invalid("128-bit delta for a 64-bit type")),
    })
}

/// The length of the value of BSON type `t` starting at `v` (the bytes after
/// an element's name), if it fits in `v`; `None` for an unknown type. The
/// server's raw command readers use it too.
pub fn value_len(t: u8, v: &[u8]) -> Option<usize> {
    let i32_at = |at: usize| -> Option<usize> {
        let b = v.get(at..at + 4)?;
        usize::try_from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])).ok()
    };
    let cstr =
        |from: usize| -> Option<usize> { Some(v.get(from..)?.iter().position(|&b| b == 0)? + 1) };
    let n = match t {
        0x01 | 0x09 | 0x11 | 0x12 => 8,
        0x02 | 0x0D | 0x0E => 4 + i32_at(0)?,
        0x03 | 0x04 | 0x0F => i32_at(0)?,
        0x05 => 5 + i32_at(0)?,
        0x06 | 0x0A | 0x7F | 0xFF => 0,
        0x07 => 12,
        0x08 => 1,
        0x0B => {
            let a = cstr(0)?;
            a + cstr(a)?
        }
        0x0C => 4 + i32_at(0)? + 12,
        0x10 => 4,
        0x13 => 16,
        _ => return None,
    };
    (n <= v.len()).then_some(n)
}

/// Reads the literal at `buf[0]`: its value and its size in bytes.
fn read_literal(buf: &[u8]) -> MongoResult<(Bson, usize)> {
    let ty = buf[0];
    if buf.get(1) != Some(&0) {
        return Err(invalid("literal with a field name"));
    }
    let len = value_len(ty, &buf[2..]).ok_or_else(|| invalid("bad literal"))?;
    let end = 2 + len;
    let element = buf.get(..end).ok_or_else(|| invalid("truncated literal"))?;
    let mut doc = Vec::with_capacity(end + 5);
    doc.extend_from_slice(&((end + 5) as i32).to_le_bytes());
    doc.extend_from_slice(element);
    doc.push(0);
    let raw = RawDocument::from_bytes(&doc).map_err(|_| invalid("bad literal"))?;
    let v = raw
        .iter()
        .next()
        .and_then(|e| e.ok())
        .and_then(|(_, v)| Bson::try_from(v).ok())
        .ok_or_else(|| invalid("bad literal"))?;
    Ok((v, end))
}

fn write_literal(v: &Bson, out: &mut Vec<u8>) -> MongoResult<()> {
    let mut d = Document::new();
    d.insert("", v.clone());
    let bytes = d
        .to_vec()
        .map_err(|e| MongoError::internal(e.to_string()))?;
    // The document minus its length and final NUL is the one element.
    out.extend_from_slice(&bytes[4..bytes.len() - 1]);
    Ok(())
}

fn is_literal(control: u8) -> bool {
    control & 0xE0 == 0 || control == 0xFF || control == 0x7F
}

/// One stream's decoding state: the last value and what deltas apply to.
#[derive(Default)]
struct Stream {
    last: Option<Bson>,
    /// Last encoded value (for deltas of deltas: the last delta).
    enc: i64,
    /// Deltas of deltas: the last encoded value.
    enc_dod: i64,
    enc128: i128,
    scale: u8,
    /// The last slot read, what a run repeats.
    prev: Option<u128>,
    /// Slots of the control block being read, not yet used.
    pending: std::collections::VecDeque<Option<u128>>,
}

impl Stream {
    fn new() -> Stream {
        Stream {
            scale: RAW_BITS,
            prev: Some(0),
            ..Stream::default()
        }
    }

    fn load_literal(&mut self, v: Bson) {
        self.enc = 0;
        self.enc_dod = 0;
        self.enc128 = 0;
        match kind(&v) {
            Kind::DeltaOfDelta => self.enc_dod = int64_of(&v, RAW_BITS).unwrap_or(0),
            Kind::Delta => self.enc = int64_of(&v, RAW_BITS).unwrap_or(0),
            Kind::Wide => self.enc128 = int128_of(&v).unwrap_or(0),
            Kind::ZeroOnly => {}
        }
        self.prev = Some(0);
        self.pending.clear();
        self.last = Some(v);
    }

    fn wide(&self) -> bool {
        self.last.as_ref().is_some_and(|v| kind(v) == Kind::Wide)
    }

    /// Reads the Simple-8b control block at `buf[0]` into `pending`; returns
    /// its size.
    fn load_blocks(&mut self, buf: &[u8]) -> MongoResult<usize> {
        let control = buf[0];
        let scale = match control >> 4 {
            0x8 => RAW_BITS,
            n @ 0x9..=0xD => n - 0x9,
            _ => return Err(invalid("bad control byte")),
        };
        let blocks = usize::from(control & 0x0F) + 1;
        let size = 1 + 8 * blocks;
        let words = buf
            .get(1..size)
            .ok_or_else(|| invalid("truncated blocks"))?;
        if !self.wide() {
            if let Some(Bson::Double(d)) = &self.last {
                self.enc = encode_double(*d, scale)
                    .ok_or_else(|| invalid("double not representable at this scale"))?;
            }
            self.scale = scale;
        }
        let wide = self.wide();
        let mut slots = Vec::new();
        for w in words.chunks_exact(8) {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            simple8b::decode_word(u64::from_le_bytes(b), wide, &mut self.prev, &mut slots)?;
        }
        self.pending.extend(slots);
        Ok(size)
    }

    /// The value one slot stands for.
    fn apply(&mut self, slot: Option<u128>) -> MongoResult<Option<Bson>> {
        let (Some(slot), Some(last)) = (slot, self.last.as_ref()) else {
            return Ok(None);
        };
        let k = kind(last);
        if k == Kind::Wide {
            if slot == 0 {
                return Ok(Some(last.clone()));
            }
            self.enc128 = self.enc128.wrapping_add(unzigzag128(slot));
            let v = materialize128(last, self.enc128)?;
            self.last = Some(v.clone());
            return Ok(Some(v));
        }
        let delta = unzigzag(slot as u64);
        if k != Kind::DeltaOfDelta && delta == 0 {
            return Ok(Some(last.clone()));
        }
        self.enc = self.enc.wrapping_add(delta);
        let n = if k == Kind::DeltaOfDelta {
            self.enc_dod = self.enc_dod.wrapping_add(self.enc);
            self.enc_dod
        } else {
            self.enc
        };
        let v = materialize64(last, n, self.scale)?;
        self.last = Some(v.clone());
        Ok(Some(v))
    }
}

/// Where a reference document's leaves sit, and whether arrays are walked into.
#[derive(Debug)]
enum Shape {
    Leaf(String),
    Object(String, Vec<Shape>),
    Array(String, Vec<Shape>),
}

fn shape_of(d: &Document, arrays: bool, leaves: &mut Vec<Bson>) -> Vec<Shape> {
    d.iter()
        .map(|(k, v)| match v {
            Bson::Document(sub) => Shape::Object(k.clone(), shape_of(sub, arrays, leaves)),
            Bson::Array(a) if arrays => {
                let sub: Document = a
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (i.to_string(), v.clone()))
                    .collect();
                Shape::Array(k.clone(), shape_of(&sub, arrays, leaves))
            }
            other => {
                leaves.push(other.clone());
                Shape::Leaf(k.clone())
            }
        })
        .collect()
}

/// Rebuilds one document from the next value of each leaf, leaving out
/// missing leaves and sub-documents that end up empty.
fn rebuild(shape: &[Shape], values: &mut std::vec::IntoIter<Option<Bson>>) -> Document {
    let mut d = Document::new();
    for s in shape {
        match s {
            Shape::Leaf(k) => {
                if let Some(Some(v)) = values.next() {
                    d.insert(k.clone(), v);
                }
            }
            Shape::Object(k, sub) => {
                let inner = rebuild(sub, values);
                if !inner.is_empty() {
                    d.insert(k.clone(), inner);
                }
            }
            Shape::Array(k, sub) => {
                let inner = rebuild(sub, values);
                if !inner.is_empty() {
                    d.insert(
                        k.clone(),
                        Bson::Array(inner.into_iter().map(|(_, v)| v).collect()),
                    );
                }
            }
        }
    }
    d
}

/// Decodes a whole column: one entry per row, `None` where it is missing.
pub fn decode(buf: &[u8]) -> MongoResult<Vec<Option<Bson>>> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    let mut s = Stream::new();
    loop {
        while let Some(slot) = s.pending.pop_front() {
            let v = s.apply(slot)?;
            out.push(v);
        }
        let control = *buf.get(pos).ok_or_else(|| invalid("no EOO at the end"))?;
        if control == 0 {
            if pos + 1 != buf.len() {
                return Err(invalid("bytes after EOO"));
            }
            return Ok(out);
        }
        if is_literal(control) {
            let (v, size) = read_literal(&buf[pos..])?;
            s.load_literal(v.clone());
            out.push(Some(v));
            pos += size;
        } else if (0xF0..=0xF2).contains(&control) {
            let (last, used) = decode_interleaved(&buf[pos..], &mut out)?;
            pos += used;
            s = Stream::new();
            // After the mode a zero delta repeats the last object.
            s.last = last;
        } else {
            pos += s.load_blocks(&buf[pos..])?;
        }
    }
}

/// Decodes interleaved values starting at the control byte `buf[0]` into
/// `out`; returns the last value and the bytes used (through its EOO).
fn decode_interleaved(
    buf: &[u8],
    out: &mut Vec<Option<Bson>>,
) -> MongoResult<(Option<Bson>, usize)> {
    let control = buf[0];
    let len_bytes = buf
        .get(1..5)
        .ok_or_else(|| invalid("truncated reference"))?;
    let len = i32::from_le_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]);
    let len = usize::try_from(len).map_err(|_| invalid("bad reference length"))?;
    let raw = buf
        .get(1..1 + len)
        .ok_or_else(|| invalid("truncated reference"))?;
    let reference: Document = RawDocument::from_bytes(raw)
        .ok()
        .and_then(|r| r.try_into().ok())
        .ok_or_else(|| invalid("bad reference object"))?;
    let arrays = control != 0xF0;
    let array_root = control == 0xF2;
    let mut leaves = Vec::new();
    let shape = shape_of(&reference, arrays, &mut leaves);
    if leaves.is_empty() {
        return Err(invalid("reference object without scalars"));
    }
    let mut streams: Vec<Stream> = leaves
        .into_iter()
        .map(|v| {
            let mut s = Stream::new();
            s.load_literal(v);
            s
        })
        .collect();
    let mut pos = 1 + len;
    let mut last = None;
    loop {
        let mut values = Vec::with_capacity(streams.len());
        for (i, s) in streams.iter_mut().enumerate() {
            if s.pending.is_empty() {
                let control = *buf
                    .get(pos)
                    .ok_or_else(|| invalid("no end of interleaving"))?;
                if control == 0 {
                    if i != 0 {
                        return Err(invalid("interleaving ended inside an object"));
                    }
                    return Ok((last, pos + 1));
                }
                if is_literal(control) {
                    let (v, size) = read_literal(&buf[pos..])?;
                    s.load_literal(v.clone());
                    pos += size;
                    values.push(Some(v));
                    continue;
                }
                if (0xF0..=0xF2).contains(&control) {
                    return Err(invalid("interleaving inside interleaving"));
                }
                pos += s.load_blocks(&buf[pos..])?;
            }
            let slot = s.pending.pop_front().flatten();
            values.push(s.apply(slot)?);
        }
        let d = rebuild(&shape, &mut values.into_iter());
        let v = if d.is_empty() {
            None
        } else if array_root {
            Some(Bson::Array(d.into_iter().map(|(_, v)| v).collect()))
        } else {
            Some(Bson::Document(d))
        };
        if v.is_some() {
            last = v.clone();
        }
        out.push(v);
    }
}

/// Builds a column from values in row order (`None`: the row has none).
#[derive(Default)]
pub struct Encoder {
    out: Vec<u8>,
    last: Option<Bson>,
    /// Encoded last value (64-bit; for deltas of deltas, the last value).
    enc: i64,
    /// Deltas of deltas: the last delta.
    delta: i64,
    enc128: i128,
    /// Scale of the doubles in `slots`.
    scale: u8,
    slots: Vec<Option<u128>>,
    prev: Option<u128>,
}

impl Encoder {
    pub fn new() -> Encoder {
        Encoder {
            scale: RAW_BITS,
            prev: Some(0),
            ..Encoder::default()
        }
    }

    /// Appends a missing value.
    pub fn skip(&mut self) {
        self.slots.push(None);
    }

    pub fn push(&mut self, v: &Bson) -> MongoResult<()> {
        if let Some(slot) = self.delta_slot(v) {
            self.slots.push(Some(slot));
            return Ok(());
        }
        self.flush();
        write_literal(v, &mut self.out)?;
        self.last = Some(v.clone());
        self.prev = Some(0);
        self.scale = RAW_BITS;
        self.enc = 0;
        self.delta = 0;
        self.enc128 = 0;
        match kind(v) {
            Kind::Delta | Kind::DeltaOfDelta => {
                self.enc = int64_of(v, RAW_BITS).unwrap_or(0);
                if let Bson::Double(d) = v {
                    // The run's scale is chosen with its first delta.
                    self.enc = d.to_bits() as i64;
                }
            }
            Kind::Wide => self.enc128 = int128_of(v).unwrap_or(0),
            Kind::ZeroOnly => {}
        }
        Ok(())
    }

    /// The slot carrying `v` after the last value, updating the state; `None`
    /// when `v` must be a literal.
    fn delta_slot(&mut self, v: &Bson) -> Option<u128> {
        let last = self.last.as_ref()?;
        if std::mem::discriminant(last) != std::mem::discriminant(v) {
            return None;
        }
        match kind(v) {
            Kind::ZeroOnly => (last == v).then_some(0),
            Kind::Wide => {
                let same_shape = match (last, v) {
                    (Bson::Binary(a), Bson::Binary(b)) => {
                        a.subtype == b.subtype && a.bytes.len() == b.bytes.len()
                    }
                    _ => true,
                };
                if last == v {
                    return Some(0);
                }
                if !same_shape {
                    return None;
                }
                let n = int128_of(v)?;
                let slot = zigzag128(n.wrapping_sub(self.enc128));
                if slot > MAX_SLOT || self.enc128 != int128_of(last)? {
                    return None;
                }
                self.enc128 = n;
                self.last = Some(v.clone());
                Some(slot)
            }
            Kind::Delta => {
                if let (Bson::Double(l), Bson::Double(d)) = (last, v) {
                    let (l, d) = (*l, *d);
                    let need = double_scale(d).unwrap_or(RAW_BITS);
                    if self.slots.is_empty() || need > self.scale {
                        // A new control block: its scale must hold both.
                        let scale = need.max(double_scale(l).unwrap_or(RAW_BITS));
                        self.flush();
                        self.scale = scale;
                        self.enc = encode_double(l, scale)?;
                    }
                    let n = encode_double(d, self.scale)?;
                    let slot = zigzag(n.wrapping_sub(self.enc));
                    if slot > MAX_SLOT {
                        return None;
                    }
                    self.enc = n;
                    self.last = Some(v.clone());
                    return Some(slot);
                }
                let n = int64_of(v, RAW_BITS)?;
                let slot = zigzag(n.wrapping_sub(self.enc));
                if slot > MAX_SLOT {
                    return None;
                }
                self.enc = n;
                self.last = Some(v.clone());
                Some(slot)
            }
            Kind::DeltaOfDelta => {
                if let (Bson::ObjectId(a), Bson::ObjectId(b)) = (last, v) {
                    if a.bytes()[4..9] != b.bytes()[4..9] {
                        return None;
                    }
                }
                let n = int64_of(v, RAW_BITS)?;
                let delta = n.wrapping_sub(self.enc);
                let slot = zigzag(delta.wrapping_sub(self.delta));
                if slot > MAX_SLOT {
                    return None;
                }
                self.enc = n;
                self.delta = delta;
                self.last = Some(v.clone());
                Some(slot)
            }
        }
    }

    /// Writes the pending slots as control blocks of at most 16 words.
    fn flush(&mut self) {
        if self.slots.is_empty() {
            return;
        }
        let mut words = Vec::new();
        simple8b::encode_slots(&self.slots, &mut self.prev, &mut words);
        self.slots.clear();
        let control = SCALE_CONTROL[usize::from(self.scale.min(RAW_BITS))];
        for chunk in words.chunks(16) {
            self.out.push(control | (chunk.len() as u8 - 1));
            for w in chunk {
                self.out.extend_from_slice(&w.to_le_bytes());
            }
        }
    }

    /// The finished column.
    pub fn finish(mut self) -> Vec<u8> {
        self.flush();
        self.out.push(0);
        self.out
    }
}

/// Encodes a column from values in row order (`None`: missing).
pub fn encode<'a>(values: impl IntoIterator<Item = Option<&'a Bson>>) -> MongoResult<Vec<u8>> {
    let mut e = Encoder::new();
    for v in values {
        match v {
            Some(v) => e.push(v)?,
            None => e.skip(),
        }
    }
    Ok(e.finish())
}

#[cfg(test)]
mod tests;
