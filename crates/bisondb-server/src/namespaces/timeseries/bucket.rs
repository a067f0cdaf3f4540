//! Bucket documents of a time-series collection, as mongod 8 lays them out
//! (compressed, as it writes them):
//!
//! ```text
//! {_id: ObjectId(seconds = the bucket's rounded start time),
//!  control: {version: 2, min: {field: min, ...}, max: {field: max, ...}, count: n},
//!  meta: <the measurements' shared metaField value, when they have one>,
//!  data: {field: BinData(7, <BSONColumn of the n rows, skips where a row has none>), ...}}
//! ```
//!
//! Version 2 means the rows are in time order; a bucket whose rows are not
//! (an out-of-order insert) is version 3, as mongod 8 marks it. Buckets of
//! version 1 (`data: {field: {"0": v0, "1": v1, ...}}`, uncompressed, as
//! BisonDB wrote them before) are read too and written back compressed the
//! next time they change.
//!
//! A bucket holds at most [`MAX_MEASUREMENTS`] measurements, all with the same
//! meta value and times in `[start, start + bucketMaxSpanSeconds)`, where
//! `start` is the first measurement's time rounded down to
//! `bucketRoundingSeconds`; `control.min.<timeField>` is that start, as in
//! mongod. Pure logic: the write path in `write.rs` stores what this builds.

use std::cmp::Ordering;

use bisondb_error::MongoResult;
use bisondb_query::bsoncolumn;
use bisondb_query::compare::compare_bson;
use bson::oid::ObjectId;
use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, DateTime, Document};

/// mongod's `timeseriesBucketMaxCount`.
pub const MAX_MEASUREMENTS: usize = 1000;

/// `t` (milliseconds since the epoch) rounded down to a multiple of
/// `rounding_secs` seconds (also for times before 1970).
pub fn round_down(t_ms: i64, rounding_secs: i64) -> i64 {
    let step = rounding_secs.max(1).saturating_mul(1000);
    t_ms.div_euclid(step).saturating_mul(step)
}

/// An ObjectId whose timestamp is `start_ms` in seconds (wrapped into 32 bits
/// for times outside 1970..2106, as mongod's extended range does) and whose
/// other bytes come from a fresh ObjectId, so two buckets never share an id.
pub fn bucket_id(start_ms: i64) -> ObjectId {
    let secs = start_ms.div_euclid(1000) as u32;
    let mut bytes = ObjectId::new().bytes();
    bytes[..4].copy_from_slice(&secs.to_be_bytes());
    ObjectId::from_bytes(bytes)
}

/// One bucket being built or extended.
#[derive(Debug, Clone)]
pub struct Bucket {
    pub id: ObjectId,
    /// Rounded start time, in milliseconds.
    pub start_ms: i64,
    /// The meta value shared by every measurement (`None`: they have none).
    pub meta: Option<Bson>,
    rows: usize,
    min: Document,
    max: Document,
    /// One column per field, in the order fields appeared; a column may be
    /// shorter than `rows` (the rows after its end lack the field).
    columns: Vec<(String, Vec<Option<Bson>>)>,
    /// Which column is the time field's (its order picks the version).
    time_column: Option<usize>,
}

impl Bucket {
    /// An empty bucket starting at `start_ms` (already rounded).
    pub fn new(id: ObjectId, start_ms: i64, meta: Option<Bson>) -> Bucket {
        Bucket {
            id,
            start_ms,
            meta,
            rows: 0,
            min: Document::new(),
            max: Document::new(),
            columns: Vec::new(),
            time_column: None,
        }
    }

    /// How many measurements it holds.
    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Whether a measurement at `t_ms` may join: room left and inside the span.
    pub fn fits(&self, t_ms: i64, max_span_secs: i64) -> bool {
        let end = self
            .start_ms
            .saturating_add(max_span_secs.saturating_mul(1000));
        self.rows < MAX_MEASUREMENTS && t_ms >= self.start_ms && t_ms < end
    }

    /// Appends one measurement (its fields without the meta field), as the
    /// next row; `time_field` keeps the rounded start as its minimum.
    pub fn push(&mut self, time_field: &str, measurement: &Document) {
        let row = self.rows;
        for (field, v) in measurement {
            let at = match self.columns.iter().position(|(f, _)| f == field) {
                Some(at) => at,
                None => {
                    self.columns.push((field.clone(), Vec::new()));
                    self.columns.len() - 1
                }
            };
            let column = &mut self.columns[at].1;
            column.resize(row, None);
            column.push(Some(v.clone()));
            if field == time_field {
                self.time_column = Some(at);
                self.min.insert(
                    field.clone(),
                    Bson::DateTime(DateTime::from_millis(self.start_ms)),
                );
            } else {
                widen(&mut self.min, field, v, Ordering::Less);
            }
            widen(&mut self.max, field, v, Ordering::Greater);
        }
        self.rows += 1;
    }

    /// The bucket document to store: compressed columns, version 2 when the
    /// rows are in time order, else 3.
    pub fn to_document(&self) -> MongoResult<Document> {
        let mut data = Document::new();
        let mut sorted = true;
        for (at, (field, column)) in self.columns.iter().enumerate() {
            let values = column
                .iter()
                .map(Option::as_ref)
                .chain(std::iter::repeat_n(None, self.rows - column.len()));
            let bytes = bsoncolumn::encode(values)?;
            if Some(at) == self.time_column {
                sorted = column
                    .windows(2)
                    .all(|w| compare_bson_opt(&w[0], &w[1]) != Ordering::Greater);
            }
            data.insert(
                field.clone(),
                Bson::Binary(Binary {
                    subtype: BinarySubtype::Column,
                    bytes,
                }),
            );
        }
        let version = if sorted { 2 } else { 3 };
        let mut d = doc! {
            "_id": self.id,
            "control": {
                "version": version,
                "min": self.min.clone(),
                "max": self.max.clone(),
                "count": i32::try_from(self.rows).unwrap_or(i32::MAX),
            },
        };
        if let Some(m) = &self.meta {
            d.insert("meta", m.clone());
        }
        d.insert("data", data);
        Ok(d)
    }

    /// A stored bucket (any version), ready to take more measurements;
    /// `None` when the document is not a bucket of this layout.
    pub fn from_document(d: &Document, time_field: &str) -> Option<Bucket> {
        let id = d.get_object_id("_id").ok()?;
        let control = d.get_document("control").ok()?;
        let min = control.get_document("min").ok()?.clone();
        let max = control.get_document("max").ok()?.clone();
        let start_ms = min.get_datetime(time_field).ok()?.timestamp_millis();
        let data = d.get_document("data").ok()?;
        let (rows, columns) = bisondb_query::agg::bucket_columns(data, time_field).ok()??;
        let time_column = columns.iter().position(|(f, _)| f == time_field);
        Some(Bucket {
            id,
            start_ms,
            meta: d.get("meta").cloned(),
            rows,
            min,
            max,
            columns,
            time_column,
        })
    }
}

fn compare_bson_opt(a: &Option<Bson>, b: &Option<Bson>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => compare_bson(a, b),
        _ => Ordering::Equal,
    }
}

/// Keeps in `bound[field]` the smaller (`Less`) or larger (`Greater`) of it and `v`.
fn widen(bound: &mut Document, field: &str, v: &Bson, keep: Ordering) {
    let replace = match bound.get(field) {
        Some(cur) => compare_bson(v, cur) == keep,
        None => true,
    };
    if replace {
        bound.insert(field.to_string(), v.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> Bson {
        Bson::DateTime(DateTime::from_millis(ms))
    }

    #[test]
    fn rounding_goes_down_also_before_1970() {
        assert_eq!(round_down(61_500, 60), 60_000);
        assert_eq!(round_down(60_000, 60), 60_000);
        assert_eq!(round_down(-1, 60), -60_000);
        assert_eq!(round_down(3_599_999, 3600), 0);
    }

    #[test]
    fn bucket_id_carries_the_start_second() {
        let id = bucket_id(1_552_949_580_000);
        assert_eq!(id.timestamp().timestamp_millis(), 1_552_949_580_000);
        assert_ne!(bucket_id(0), bucket_id(0));
    }

    #[test]
    fn push_builds_columns_and_control_bounds() {
        let start = round_down(1_000_500, 60);
        let mut b = Bucket::new(bucket_id(start), start, Some(Bson::String("a".into())));
        b.push("t", &doc! {"t": at(1_000_500), "_id": 1, "x": 5});
        b.push("t", &doc! {"t": at(1_010_000), "_id": 2, "y": "s"});
        assert_eq!(b.len(), 2);
        let d = b.to_document().unwrap();
        // Each column is a BSONColumn with a skip where a row lacks the field.
        let data = d.get_document("data").unwrap();
        assert_eq!(data.keys().collect::<Vec<_>>(), ["t", "_id", "x", "y"]);
        let column = |f: &str| match data.get(f) {
            Some(Bson::Binary(b)) if b.subtype == BinarySubtype::Column => {
                bsoncolumn::decode(&b.bytes).unwrap()
            }
            other => panic!("{f}: {other:?}"),
        };
        assert_eq!(column("t"), [Some(at(1_000_500)), Some(at(1_010_000))]);
        assert_eq!(column("_id"), [Some(Bson::Int32(1)), Some(Bson::Int32(2))]);
        assert_eq!(column("x"), [Some(Bson::Int32(5)), None]);
        assert_eq!(column("y"), [None, Some(Bson::String("s".into()))]);
        let control = d.get_document("control").ok().cloned().unwrap_or_default();
        assert_eq!(control.get_i32("version").ok(), Some(2));
        assert_eq!(control.get_i32("count").ok(), Some(2));
        assert_eq!(
            control.get_document("min").ok(),
            Some(&doc! {"t": at(start), "_id": 1, "x": 5, "y": "s"})
        );
        assert_eq!(
            control.get_document("max").ok(),
            Some(&doc! {"t": at(1_010_000), "_id": 2, "x": 5, "y": "s"})
        );
        assert_eq!(d.get_str("meta").ok(), Some("a"));
        // The stored form reopens with the same rows and bounds.
        let again = Bucket::from_document(&d, "t").map(|b| b.to_document().unwrap());
        assert_eq!(again, Some(d));
    }

    #[test]
    fn out_of_order_rows_make_version_3_and_version_1_buckets_reopen() {
        let mut b = Bucket::new(bucket_id(0), 0, None);
        b.push("t", &doc! {"t": at(5000), "v": 1.5});
        b.push("t", &doc! {"t": at(1000), "v": 2.5});
        let d = b.to_document().unwrap();
        assert_eq!(
            d.get_document("control").unwrap().get_i32("version").ok(),
            Some(3)
        );
        // A version 1 bucket as BisonDB wrote it before reopens with its rows
        // and is written back compressed.
        let v1 = doc! {
            "_id": bucket_id(0),
            "control": {"version": 1, "min": {"t": at(0), "v": 1}, "max": {"t": at(2000), "v": 1}},
            "data": {"t": {"0": at(1000), "1": at(2000)}, "v": {"1": 1}},
        };
        let mut b = Bucket::from_document(&v1, "t").unwrap();
        assert_eq!(b.len(), 2);
        b.push("t", &doc! {"t": at(3000), "v": 2});
        let d = b.to_document().unwrap();
        let rows = bisondb_query::agg::unpack_bucket(&d, "t", None);
        assert_eq!(
            rows,
            [
                doc! {"t": at(1000)},
                doc! {"t": at(2000), "v": 1},
                doc! {"t": at(3000), "v": 2}
            ]
        );
    }

    #[test]
    fn fits_checks_span_and_count() {
        let mut b = Bucket::new(bucket_id(0), 0, None);
        assert!(b.fits(0, 3600));
        assert!(b.fits(3_599_999, 3600));
        assert!(!b.fits(3_600_000, 3600));
        assert!(!b.fits(-1, 3600));
        for i in 0..MAX_MEASUREMENTS {
            b.push("t", &doc! {"t": at(i as i64)});
        }
        assert!(!b.fits(5, 3600));
    }
}
