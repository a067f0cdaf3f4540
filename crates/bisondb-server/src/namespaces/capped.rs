//! Capped collections at the command level: the `capped`, `size` and `max`
//! options of `create` (mongod 8's IDL types and bounds, then the rules
//! between them, then `size` rounded up to a multiple of 256 as the manual
//! states) and the fields `collStats` adds for a capped collection.
//!
//! What is stored is what mongod's `listCollections` shows:
//! `{capped: true, size: N, max: M}` with `max` left out when it sets no limit
//! (0 or negative). Eviction and natural order live in
//! `bisondb_storage::store::capped`.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{Bson, Document, RawBsonRef};

use crate::fields;

/// mongod's bound on `size`: 1 PB.
const MAX_SIZE: i64 = 1 << 50;
/// mongod's bound on `max`: below 2^31.
const MAX_DOCS: i64 = 1 << 31;

/// `capped`, `size` and `max` of a `create` command as sent.
#[derive(Debug, Default)]
pub struct CappedOptions {
    capped: bool,
    size: Option<i64>,
    max: Option<i64>,
}

impl CappedOptions {
    /// Reads one of the three options; `null` counts as absent, as in mongod.
    pub fn set(&mut self, cmd: &str, key: &str, v: RawBsonRef<'_>) -> MongoResult<()> {
        if matches!(v, RawBsonRef::Null | RawBsonRef::Undefined) {
            return Ok(());
        }
        match key {
            "capped" => self.capped = fields::as_bool(cmd, key, v)?,
            "size" => {
                let n = whole(cmd, key, v)?;
                if n < 1 {
                    return Err(bound(key, ">=", 1, n));
                }
                if n > MAX_SIZE {
                    return Err(bound(key, "<=", MAX_SIZE, n));
                }
                self.size = Some(n);
            }
            "max" => self.max = Some(whole(cmd, key, v)?),
            _ => {}
        }
        Ok(())
    }

    /// Whether `capped` is true and `size` / `max` were given: a clustered
    /// collection has rules of its own for them (`clustered::check_capped`).
    pub fn given(&self) -> (bool, bool, bool) {
        (self.capped, self.size.is_some(), self.max.is_some())
    }

    /// Checks the combination and puts the options, as mongod stores them,
    /// at the front of `options`.
    pub fn finish(self, options: &mut Document) -> MongoResult<()> {
        if self.capped && self.size.is_none() {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                "the 'size' field is required when 'capped' is true",
            ));
        }
        if !self.capped && (self.size.is_some() || self.max.is_some()) {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                "the 'capped' field needs to be true when either the 'size' or 'max' fields are present",
            ));
        }
        let Some(size) = self.size else {
            return Ok(());
        };
        let max = match self.max {
            Some(m) if m >= MAX_DOCS => {
                return Err(MongoError::bad_value(
                    "max in a capped collection has to be < 2^31 or not set",
                ))
            }
            // 0 or negative: no limit on the count (mongod stores nothing).
            Some(m) if m > 0 => Some(m),
            _ => None,
        };
        let mut front = Document::new();
        front.insert("capped", true);
        front.insert("size", number(round_size(size)));
        if let Some(m) = max {
            front.insert("max", number(m));
        }
        for (k, v) in std::mem::take(options) {
            front.insert(k, v);
        }
        *options = front;
        Ok(())
    }
}

/// mongod rounds a capped collection's size up to a multiple of 256 bytes.
fn round_size(size: i64) -> i64 {
    size.saturating_add(0xff) & !0xff
}

/// An int when it fits, as mongod's `appendNumber` writes it.
fn number(n: i64) -> Bson {
    i32::try_from(n).map_or(Bson::Int64(n), Bson::Int32)
}

/// mongod's `safeInt64`: any number, truncated toward zero.
fn whole(cmd: &str, key: &str, v: RawBsonRef<'_>) -> MongoResult<i64> {
    match v {
        RawBsonRef::Double(d) if d.is_finite() => Ok(d.trunc() as i64),
        RawBsonRef::Decimal128(d) => {
            let s = d.to_string();
            let whole_part = s.split('.').next().unwrap_or_default();
            whole_part.parse::<i64>().map_err(|_| {
                MongoError::bad_value(format!("BSON field '{cmd}.{key}' is out of range: {s}"))
            })
        }
        other => fields::as_i64(cmd, key, other),
    }
}

/// mongod's IDL validator error (a location code, 51024).
fn bound(key: &str, op: &str, limit: i64, actual: i64) -> MongoError {
    MongoError::location(
        51024,
        format!("BSON field '{key}' value must be {op} {limit}, actual value '{actual}'"),
    )
}

/// The `collStats` fields of a capped collection (`capped`, `max`, `maxSize`
/// scaled), or `capped: false`.
pub fn stats_fields(coll: &bisondb_storage::Collection, scale: u64) -> Document {
    let mut d = Document::new();
    match coll.capped_limits() {
        Some((size, max)) => {
            d.insert("capped", true);
            d.insert("max", max.map_or(0, |m| m as i64));
            d.insert("maxSize", (size / scale.max(1)) as i64);
        }
        None => {
            d.insert("capped", false);
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, rawdoc};

    fn parse(body: &bson::RawDocument) -> MongoResult<Document> {
        let mut c = CappedOptions::default();
        for el in body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            c.set("create", k.as_str(), v)?;
        }
        let mut options = doc! {"other": 1};
        c.finish(&mut options)?;
        Ok(options)
    }

    fn code(body: &bson::RawDocument) -> i32 {
        parse(body).map_or_else(|e| e.code.code(), |_| 0)
    }

    #[test]
    fn stores_what_mongod_shows() {
        let got = parse(&rawdoc! {"capped": true, "size": 4096}).ok();
        assert_eq!(got, Some(doc! {"capped": true, "size": 4096, "other": 1}));
        let got = parse(&rawdoc! {"capped": true, "size": 1000, "max": 5_i64}).ok();
        assert_eq!(
            got,
            Some(doc! {"capped": true, "size": 1024, "max": 5, "other": 1})
        );
        let got = parse(&rawdoc! {"capped": 1, "size": 1.5, "max": 0}).ok();
        assert_eq!(got, Some(doc! {"capped": true, "size": 256, "other": 1}));
        let got = parse(&rawdoc! {"capped": false}).ok();
        assert_eq!(got, Some(doc! {"other": 1}));
        let got = parse(&rawdoc! {"capped": true, "size": 1_i64 << 40}).ok();
        assert_eq!(
            got,
            Some(doc! {"capped": true, "size": 1_i64 << 40, "other": 1})
        );
    }

    #[test]
    fn refuses_what_mongod_refuses() {
        assert_eq!(code(&rawdoc! {"capped": true}), 72);
        assert_eq!(code(&rawdoc! {"capped": true, "size": null, "max": 3}), 72);
        assert_eq!(code(&rawdoc! {"size": 4096}), 72);
        assert_eq!(code(&rawdoc! {"capped": false, "max": 3}), 72);
        assert_eq!(code(&rawdoc! {"capped": true, "size": 0}), 51024);
        assert_eq!(code(&rawdoc! {"capped": true, "size": -500}), 51024);
        assert_eq!(
            code(&rawdoc! {"capped": true, "size": (1_i64 << 50) + 1}),
            51024
        );
        assert_eq!(code(&rawdoc! {"capped": true, "size": "x"}), 14);
        assert_eq!(code(&rawdoc! {"capped": "x"}), 14);
        assert_eq!(
            code(&rawdoc! {"capped": true, "size": 4096, "max": 1_i64 << 31}),
            2
        );
        let e = parse(&rawdoc! {"capped": true, "size": -500}).err();
        assert_eq!(
            e.map(|e| e.message),
            Some("BSON field 'size' value must be >= 1, actual value '-500'".to_string())
        );
    }
}
