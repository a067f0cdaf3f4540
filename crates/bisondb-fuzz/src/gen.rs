//! Bytes → BSON: every fuzz input decodes into a valid document, so random or
//! mutated bytes reach the parsers' semantics instead of stopping at "invalid
//! BSON". The decoder reads the input as a stream of choices (which kind of
//! value, which key from a vocabulary, how many elements); an exhausted input
//! reads as zeros, so every input is some document. Vocabularies (operator
//! names, field paths, strings) are per target, so choices land on names the
//! parser knows.

use bson::raw::CString;
use bson::spec::BinarySubtype;
use bson::{Binary, Bson, DateTime, Decimal128, Document, Regex, Timestamp};

/// The names a target's values are built from.
pub struct Vocab {
    /// Operator keys (`$gt`, `$add`, `$set`, stage names...).
    pub ops: &'static [&'static str],
    /// Plain field names and paths.
    pub fields: &'static [&'static str],
    /// String values (field references, formats, units...).
    pub strings: &'static [&'static str],
}

/// Strings every vocabulary shares.
pub const COMMON_STRINGS: &[&str] = &[
    "",
    "a",
    "b",
    "$a",
    "$b",
    "$a.b",
    "$$ROOT",
    "$$CURRENT",
    "$$NOW",
    "$$this",
    "$$value",
    "$$REMOVE",
    "$$KEEP",
    "$$PRUNE",
    "$$DESCEND",
    "x",
    "day",
    "hour",
    "month",
    "year",
    "week",
    "%Y-%m-%d",
    "%H:%M:%S",
    "UTC",
    "Europe/Paris",
    "+01:00",
    "a.b",
    "^a",
    "a*",
    "(a+)+$",
    "i",
    "\u{e9}",
    "\u{1F600}",
    "\0",
    "$",
    "$$",
    "1",
    "-1",
    "asc",
    "desc",
    "text",
    "2dsphere",
    "hashed",
    "Point",
    "Polygon",
    "LineString",
    "int",
    "long",
    "double",
    "decimal",
    "string",
    "object",
    "array",
    "bool",
    "date",
    "null",
    "number",
    "objectId",
    "regex",
    "binData",
];

/// Field names every vocabulary shares.
pub const COMMON_FIELDS: &[&str] = &[
    "a", "b", "c", "_id", "a.b", "a.0", "a.b.c", "b.1", "x", "y", "z", "arr", "tags", "n", "",
    "a.", ".a", "0", "1",
];

/// A reader of choices from fuzz input.
pub struct Gen<'a> {
    data: &'a [u8],
    pos: usize,
    /// Values still allowed (bounds the size of what one input builds).
    budget: u32,
}

impl<'a> Gen<'a> {
    pub fn new(data: &'a [u8]) -> Gen<'a> {
        Gen {
            data,
            pos: 0,
            budget: 256,
        }
    }

    pub fn exhausted(&self) -> bool {
        self.pos >= self.data.len()
    }

    pub fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        for b in &mut out {
            *b = self.byte();
        }
        out
    }

    pub fn bool(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        let v = if n <= 256 {
            usize::from(self.byte())
        } else {
            usize::from(u16::from_le_bytes(self.bytes::<2>()))
        };
        v % n
    }

    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }

    /// Up to `max` raw bytes.
    pub fn raw(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max + 1);
        (0..n).map(|_| self.byte()).collect()
    }

    fn small_int(&mut self) -> i32 {
        const INTERESTING: &[i32] = &[
            0,
            1,
            -1,
            2,
            3,
            5,
            10,
            100,
            255,
            256,
            1000,
            65536,
            i32::MAX,
            i32::MIN,
            i32::MAX - 1,
            i32::MIN + 1,
            -2,
            1 << 24,
        ];
        if self.bool() {
            self.pick(INTERESTING)
        } else {
            i32::from(self.byte() as i8)
        }
    }

    fn double(&mut self) -> f64 {
        const INTERESTING: &[f64] = &[
            0.0,
            -0.0,
            0.5,
            1.5,
            -2.5,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            f64::EPSILON,
            1e15,
            9007199254740993.0,
            2147483648.0,
            -9.223372036854776e18,
            9.223372036854776e18,
            1e300,
            1e-300,
        ];
        match self.below(3) {
            0 => self.pick(INTERESTING),
            1 => f64::from(self.small_int()) / 4.0,
            _ => f64::from_le_bytes(self.bytes::<8>()),
        }
    }

    fn long(&mut self) -> i64 {
        const INTERESTING: &[i64] = &[
            0,
            1,
            -1,
            i64::MAX,
            i64::MIN,
            i64::MAX - 1,
            i64::MIN + 1,
            1 << 53,
            (1 << 53) + 1,
            4_102_444_800_000,
            -62_135_596_800_000,
            253_402_300_799_999,
        ];
        if self.bool() {
            self.pick(INTERESTING)
        } else {
            i64::from_le_bytes(self.bytes::<8>())
        }
    }

    pub fn string(&mut self, v: &Vocab) -> String {
        match self.below(8) {
            0 => String::from_utf8_lossy(&self.raw(12)).into_owned(),
            1 => {
                let s = self.pick(v.fields);
                format!("${s}")
            }
            2 | 3 => self.pick(COMMON_STRINGS).to_string(),
            _ if !v.strings.is_empty() => self.pick(v.strings).to_string(),
            _ => self.pick(COMMON_STRINGS).to_string(),
        }
    }

    pub fn key(&mut self, v: &Vocab) -> String {
        match self.below(16) {
            0 => String::from_utf8_lossy(&self.raw(6))
                .replace('\0', "")
                .to_string(),
            1..=4 => self.pick(COMMON_FIELDS).to_string(),
            _ => self.pick(v.fields).to_string(),
        }
    }

    /// A scalar (never a document or an array).
    pub fn scalar(&mut self, v: &Vocab) -> Bson {
        match self.below(20) {
            0..=3 => Bson::Int32(self.small_int()),
            4 => Bson::Int64(self.long()),
            5 | 6 => Bson::Double(self.double()),
            7..=10 => Bson::String(self.string(v)),
            11 => Bson::Boolean(self.bool()),
            12 => Bson::Null,
            13 => Bson::DateTime(DateTime::from_millis(self.long())),
            14 => Bson::ObjectId(bson::oid::ObjectId::from_bytes(self.bytes::<12>())),
            15 => {
                let d = match self.below(4) {
                    0 => "0",
                    1 => "-0",
                    2 => "NaN",
                    _ => "",
                };
                if d.is_empty() {
                    Bson::Decimal128(Decimal128::from_bytes(self.bytes::<16>()))
                } else {
                    d.parse::<Decimal128>()
                        .map(Bson::Decimal128)
                        .unwrap_or(Bson::Null)
                }
            }
            16 => {
                let pattern = self.string(v).replace('\0', "");
                let options = match self.below(5) {
                    0 => "",
                    1 => "i",
                    2 => "imsx",
                    3 => "u",
                    _ => "s",
                };
                regex(&pattern, options)
            }
            17 => Bson::Binary(Binary {
                subtype: match self.below(4) {
                    0 => BinarySubtype::Generic,
                    1 => BinarySubtype::Uuid,
                    2 => BinarySubtype::Vector,
                    _ => BinarySubtype::UserDefined(0x80),
                },
                bytes: self.raw(18),
            }),
            18 => Bson::Timestamp(Timestamp {
                time: u32::from(self.byte()),
                increment: u32::from(self.byte()),
            }),
            _ => match self.below(3) {
                0 => Bson::MinKey,
                1 => Bson::MaxKey,
                _ => Bson::Undefined,
            },
        }
    }

    /// Any value: scalars, arrays, plain documents and `{op: arg}` documents.
    pub fn value(&mut self, v: &Vocab, depth: u32) -> Bson {
        if self.budget == 0 || depth == 0 || self.exhausted() {
            return self.scalar(v);
        }
        self.budget -= 1;
        match self.below(10) {
            0..=3 => self.scalar(v),
            4 | 5 => {
                let n = self.below(5);
                Bson::Array((0..n).map(|_| self.value(v, depth - 1)).collect())
            }
            6 | 7 => Bson::Document(self.op_doc(v, depth)),
            _ => Bson::Document(self.doc(v, depth - 1)),
        }
    }

    /// `{op: arg}` (sometimes with a second key, which most parsers refuse).
    pub fn op_doc(&mut self, v: &Vocab, depth: u32) -> Document {
        let mut d = Document::new();
        let op = if v.ops.is_empty() {
            "$eq"
        } else {
            self.pick(v.ops)
        };
        d.insert(op, self.value(v, depth.saturating_sub(1)));
        if self.below(6) == 0 {
            let k = if self.bool() {
                self.pick(v.ops).to_string()
            } else {
                self.key(v)
            };
            d.insert(k, self.value(v, depth.saturating_sub(1)));
        }
        d
    }

    /// A document of up to four fields named from the vocabulary.
    pub fn doc(&mut self, v: &Vocab, depth: u32) -> Document {
        let mut d = Document::new();
        let n = self.below(5);
        for _ in 0..n {
            let k = if self.below(5) == 0 && !v.ops.is_empty() {
                self.pick(v.ops).to_string()
            } else {
                self.key(v)
            };
            let val = self.value(v, depth);
            d.insert(k, val);
        }
        d
    }

    /// A stored document: plain data, no operators.
    pub fn data_doc(&mut self) -> Document {
        const DATA: Vocab = Vocab {
            ops: &[],
            fields: COMMON_FIELDS,
            strings: &[],
        };
        let mut d = Document::new();
        if self.bool() {
            d.insert("_id", self.scalar(&DATA));
        }
        let n = self.below(5);
        for _ in 0..n {
            let k = self.pick(&["a", "b", "c", "arr", "tags", "x", "n"]);
            let val = self.data_value(3);
            d.insert(k, val);
        }
        d
    }

    fn data_value(&mut self, depth: u32) -> Bson {
        const DATA: Vocab = Vocab {
            ops: &[],
            fields: COMMON_FIELDS,
            strings: &[],
        };
        if depth == 0 || self.budget == 0 {
            return self.scalar(&DATA);
        }
        self.budget -= 1;
        match self.below(6) {
            0 => {
                let n = self.below(4);
                Bson::Array((0..n).map(|_| self.data_value(depth - 1)).collect())
            }
            1 => {
                let mut d = Document::new();
                for _ in 0..self.below(3) {
                    let k = self.pick(&["a", "b", "c", "0", "1"]);
                    d.insert(k, self.data_value(depth - 1));
                }
                Bson::Document(d)
            }
            _ => self.scalar(&DATA),
        }
    }

    /// Up to `max` stored documents.
    pub fn data_docs(&mut self, max: usize) -> Vec<Document> {
        let n = self.below(max + 1);
        (0..n).map(|_| self.data_doc()).collect()
    }
}

/// A regular expression value (`Bson::Null` when a part holds a NUL).
pub fn regex(pattern: &str, options: &str) -> Bson {
    match (CString::try_from(pattern), CString::try_from(options)) {
        (Ok(pattern), Ok(options)) => Bson::RegularExpression(Regex { pattern, options }),
        _ => Bson::Null,
    }
}
