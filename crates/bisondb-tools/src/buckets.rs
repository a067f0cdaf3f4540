//! Time-series buckets turned back into measurements, for restoring into a
//! server that refuses writes to `system.buckets.*` (BisonDB refuses them, as
//! any system collection; mongod takes them, and there `restore` inserts the
//! buckets as they are). Version 1 buckets (columns as plain documents
//! `{"0": v0, "1": v1, ...}`) and compressed ones (versions 2 and 3, columns
//! as BSONColumn binaries) are read; other versions are refused with a
//! message.
//!
//! A measurement is laid out as mongod's unpacking lays it out, by the same
//! function the server's `$_internalUnpackBucket` uses (bisondb-query, a
//! library of document logic, not a server crate): the time field, then the
//! meta field (the bucket's `meta`), then the other fields in the order of
//! the bucket's `data`.

use bson::{Bson, Document, RawDocumentBuf};

use crate::{Result, ToolError};

/// The measurements of one bucket document.
pub fn unpack(
    bucket: &RawDocumentBuf,
    time_field: &str,
    meta_field: Option<&str>,
) -> Result<Vec<Document>> {
    let bucket = Document::try_from(bucket.as_ref())?;
    let version = bucket
        .get_document("control")
        .ok()
        .and_then(|c| c.get("version"))
        .and_then(|v| match *v {
            Bson::Int32(n) => Some(i64::from(n)),
            Bson::Int64(n) => Some(n),
            Bson::Double(d) => Some(d as i64),
            _ => None,
        });
    if !matches!(version, Some(1..=3)) {
        return Err(ToolError::new(format!(
            "a bucket of version {version:?} cannot be unpacked here; \
             restore into a server that accepts writes to system.buckets collections"
        )));
    }
    let has_times = bucket
        .get_document("data")
        .ok()
        .and_then(|d| d.get(time_field))
        .is_some_and(|t| matches!(t, Bson::Document(_) | Bson::Binary(_)));
    if !has_times {
        return Err(ToolError::new(format!(
            "a bucket has no {time_field} column: {}",
            bucket.get("_id").map(|i| i.to_string()).unwrap_or_default()
        )));
    }
    bisondb_query::agg::try_unpack_bucket(&bucket, time_field, meta_field).map_err(|e| {
        ToolError::new(format!(
            "a compressed bucket does not decode: {}",
            e.message
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, rawdoc};

    #[test]
    fn rows_come_back_time_then_meta_then_data_order() {
        let b = rawdoc! {
            "_id": 1,
            "control": {"version": 1, "min": {}, "max": {}},
            "meta": {"s": 1},
            "data": {"_id": {"0": 10, "1": 11}, "t": {"0": 5, "1": 6}, "v": {"1": "x"}},
        };
        let rows = unpack(&b, "t", Some("m")).unwrap();
        assert_eq!(
            rows,
            vec![
                doc! {"t": 5, "m": {"s": 1}, "_id": 10},
                doc! {"t": 6, "m": {"s": 1}, "_id": 11, "v": "x"},
            ]
        );
        let v2 = rawdoc! {"control": {"version": 2}, "data": {}};
        assert!(unpack(&v2, "t", None).is_err());
        let v4 = rawdoc! {"control": {"version": 4}, "data": {"t": {"0": 5}}};
        assert!(unpack(&v4, "t", None).is_err());
    }

    #[test]
    fn compressed_buckets_unpack() {
        let times = [Bson::Int32(5), Bson::Int32(6)];
        let col = |vals: &[Option<&Bson>]| {
            Bson::Binary(bson::Binary {
                subtype: bson::spec::BinarySubtype::Column,
                bytes: bisondb_query::bsoncolumn::encode(vals.iter().copied()).unwrap(),
            })
        };
        let x = Bson::String("x".into());
        let b = doc! {
            "control": {"version": 2, "min": {}, "max": {}, "count": 2},
            "data": {"t": col(&[Some(&times[0]), Some(&times[1])]), "v": col(&[None, Some(&x)])},
        };
        let b = RawDocumentBuf::try_from(&b).unwrap();
        assert_eq!(
            unpack(&b, "t", None).unwrap(),
            vec![doc! {"t": 5}, doc! {"t": 6, "v": "x"}]
        );
        let bad = doc! {"control": {"version": 2}, "data": {"t": Bson::Binary(bson::Binary {
        subtype: bson::spec::BinarySubtype::Column, bytes: vec![0x80] })}};
        assert!(unpack(&RawDocumentBuf::try_from(&bad).unwrap(), "t", None).is_err());
    }
}
