//! `$_internalUnpackBucket`: turns the bucket documents of a time-series
//! collection (`system.buckets.X`) back into the measurements they hold.
//!
//! A time-series collection `X` reads as a view over its buckets whose first
//! stage is this one, as in mongod. A bucket is
//! `{_id, control: {version, min, max, count?}, meta?, data: {field: column}}`:
//! one column per measurement field, either a document keyed by the row
//! number (`{"0": v0, "1": v1, ...}`, version 1) or a BSONColumn (BinData
//! subtype 7, versions 2 and 3: [`crate::bsoncolumn`]) with a skip where a
//! row lacks the field.
//! Each row becomes one document: the time field first, then the meta field
//! (the bucket's `meta`, shared by all its rows), then the other fields in the
//! bucket's column order, leaving out a field the row has no value for. That is
//! the order mongod returns measurements in.

use crate::agg::{DocStream, RunCtx, Stage};
use crate::value::type_name;
use bisondb_error::{MongoError, MongoResult};
use bson::spec::BinarySubtype;
use bson::{doc, Bson, Document};

#[derive(Debug)]
pub(crate) struct UnpackBucketStage {
    time_field: String,
    meta_field: Option<String>,
}

fn bad_spec(message: impl Into<String>) -> MongoError {
    MongoError::location(5346500, message)
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let Bson::Document(spec) = arg else {
        return Err(bad_spec(format!(
            "$_internalUnpackBucket specification must be an object, got {}",
            type_name(arg)
        )));
    };
    let mut time_field = None;
    let mut meta_field = None;
    for (k, v) in spec {
        match (k.as_str(), v) {
            ("timeField", Bson::String(s)) => time_field = Some(s.clone()),
            ("metaField", Bson::String(s)) => meta_field = Some(s.clone()),
            ("timeField" | "metaField", other) => {
                return Err(bad_spec(format!(
                    "{k} field must be a single-element field path string, got {}",
                    type_name(other)
                )))
            }
            // Only a query-rewrite hint in mongod; every row is unpacked here.
            ("bucketMaxSpanSeconds", Bson::Int32(_) | Bson::Int64(_)) => {}
            ("bucketMaxSpanSeconds", other) => {
                return Err(bad_spec(format!(
                    "bucketMaxSpanSeconds field must be an integer, got {}",
                    type_name(other)
                )))
            }
            // Hints mongod's optimizer adds; they do not change the output.
            (
                "assumeNoMixedSchemaData" | "usesExtendedRange" | "fixedBuckets",
                Bson::Boolean(_),
            ) => {}
            (other, _) => {
                return Err(bad_spec(format!(
                    "unrecognized option to $_internalUnpackBucket: {other}"
                )))
            }
        }
    }
    let time_field = time_field.ok_or_else(|| {
        bad_spec("The $_internalUnpackBucket stage requires a timeField parameter")
    })?;
    Ok(vec![Box::new(UnpackBucketStage {
        time_field,
        meta_field,
    })])
}

/// The columns of a bucket's `data`, each as one entry per row (`None`: the
/// row lacks the field), and the number of rows (the time column's). Reads
/// both layouts; `None` when there is no time column, an error when a
/// compressed column does not decode.
#[allow(clippy::type_complexity)]
pub fn bucket_columns(
    data: &Document,
    time_field: &str,
) -> MongoResult<Option<(usize, Vec<(String, Vec<Option<Bson>>)>)>> {
    match data.get(time_field) {
        Some(Bson::Binary(_)) => {
            let mut columns = Vec::with_capacity(data.len());
            for (field, column) in data {
                let values = match column {
                    Bson::Binary(b) if b.subtype == BinarySubtype::Column => {
                        crate::bsoncolumn::decode(&b.bytes)?
                    }
                    _ => {
                        return Err(MongoError::new(
                            bisondb_error::ErrorCode::InvalidBSON,
                            format!(
                                "the column {field} of a compressed bucket is not a BSONColumn"
                            ),
                        ))
                    }
                };
                columns.push((field.clone(), values));
            }
            let rows = columns
                .iter()
                .find(|(f, _)| f == time_field)
                .map_or(0, |(_, c)| c.len());
            Ok(Some((rows, columns)))
        }
        Some(Bson::Document(times)) => {
            let keys: Vec<&String> = times.keys().collect();
            let columns = data
                .iter()
                .map(|(field, column)| {
                    let column = column.as_document();
                    let values = keys
                        .iter()
                        .map(|k| column.and_then(|c| c.get(k.as_str())).cloned())
                        .collect();
                    (field.clone(), values)
                })
                .collect();
            Ok(Some((keys.len(), columns)))
        }
        _ => Ok(None),
    }
}

/// The measurements of one bucket, in row order (see the module docs); the
/// time-series write path uses it to rewrite a bucket it deletes rows from.
/// A compressed column that does not decode yields no rows here; the
/// pipeline stage reports it as an error.
pub fn unpack_bucket(
    bucket: &Document,
    time_field: &str,
    meta_field: Option<&str>,
) -> Vec<Document> {
    try_unpack_bucket(bucket, time_field, meta_field).unwrap_or_default()
}

/// [`unpack_bucket`], with a column that does not decode as an error.
pub fn try_unpack_bucket(
    bucket: &Document,
    time_field: &str,
    meta_field: Option<&str>,
) -> MongoResult<Vec<Document>> {
    let Ok(data) = bucket.get_document("data") else {
        return Ok(Vec::new());
    };
    let Some((rows, mut columns)) = bucket_columns(data, time_field)? else {
        return Ok(Vec::new());
    };
    let meta = meta_field.and_then(|name| bucket.get("meta").map(|m| (name, m)));
    let Some(t) = columns.iter().position(|(f, _)| f == time_field) else {
        return Ok(Vec::new());
    };
    let (_, times) = columns.remove(t);
    let mut iters: Vec<(String, std::vec::IntoIter<Option<Bson>>)> = columns
        .into_iter()
        .map(|(f, c)| (f, c.into_iter()))
        .collect();
    let mut out = Vec::with_capacity(rows);
    for time in times {
        let mut d = Document::new();
        if let Some(time) = time {
            d.insert(time_field, time);
        }
        if let Some((name, m)) = meta {
            d.insert(name, m.clone());
        }
        for (field, column) in iters.iter_mut() {
            if let Some(Some(v)) = column.next() {
                d.insert(field.clone(), v);
            }
        }
        out.push(d);
    }
    Ok(out)
}

/// A filter on buckets that every bucket holding a measurement `filter`
/// matches also matches, so it can run before the unpacking (and through the
/// planner, on the bucket indexes): conditions on the meta field (or inside
/// it) hold for the bucket's `meta` exactly; bounds on the time field become
/// bounds on `control.min`/`control.max` (`control.min` is the rounded start,
/// never above the earliest time). Everything else is left to the `$match`
/// after the unpacking, which always runs. Empty when nothing carries over.
pub(crate) fn bucket_filter(spec: &Document, filter: &Document) -> Document {
    let time_field = spec.get_str("timeField").unwrap_or_default();
    let meta_field = spec.get_str("metaField").ok();
    let mut out = Document::new();
    let bound = |out: &mut Document, side: &str, op: &str, v: &Bson| {
        let key = format!("control.{side}.{time_field}");
        match out.get_mut(&key) {
            Some(Bson::Document(ops)) if !ops.contains_key(op) => {
                ops.insert(op, v.clone());
            }
            Some(_) => {}
            None => {
                out.insert(key, doc! {op: v.clone()});
            }
        }
    };
    for (k, v) in filter {
        if k == "$and" {
            if let Bson::Array(items) = v {
                let parts: Vec<Bson> = items
                    .iter()
                    .filter_map(|i| i.as_document())
                    .map(|d| bucket_filter(spec, d))
                    .filter(|d| !d.is_empty())
                    .map(Bson::Document)
                    .collect();
                if !parts.is_empty() {
                    out.insert("$and", parts);
                }
            }
            continue;
        }
        if let Some(m) = meta_field {
            if k == m {
                out.insert("meta", v.clone());
                continue;
            }
            if let Some(rest) = k.strip_prefix(m).and_then(|r| r.strip_prefix('.')) {
                out.insert(format!("meta.{rest}"), v.clone());
                continue;
            }
        }
        if k != time_field || time_field.is_empty() {
            continue;
        }
        match v {
            Bson::DateTime(_) => {
                bound(&mut out, "min", "$lte", v);
                bound(&mut out, "max", "$gte", v);
            }
            Bson::Document(ops) if ops.keys().all(|o| o.starts_with('$')) => {
                for (op, d) in ops {
                    if !matches!(d, Bson::DateTime(_)) {
                        continue;
                    }
                    match op.as_str() {
                        "$gt" | "$gte" => bound(&mut out, "max", op, d),
                        "$lt" | "$lte" => bound(&mut out, "min", op, d),
                        "$eq" => {
                            bound(&mut out, "min", "$lte", d);
                            bound(&mut out, "max", "$gte", d);
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    out
}

impl UnpackBucketStage {
    #[cfg(test)]
    pub(crate) fn unpack(&self, bucket: &Document) -> Vec<Document> {
        unpack_bucket(bucket, &self.time_field, self.meta_field.as_deref())
    }

    fn try_unpack(&self, bucket: &Document) -> MongoResult<Vec<Document>> {
        try_unpack_bucket(bucket, &self.time_field, self.meta_field.as_deref())
    }
}

impl Stage for UnpackBucketStage {
    fn run(self: Box<Self>, input: DocStream, _cx: &RunCtx) -> DocStream {
        Box::new(input.flat_map(move |r| match r {
            Ok(bucket) => match self.try_unpack(&bucket) {
                Ok(rows) => rows.into_iter().map(Ok).collect(),
                Err(e) => vec![Err(e)],
            },
            Err(e) => vec![Err(e)],
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn stage(spec: Document) -> UnpackBucketStage {
        let mut time_field = String::new();
        let mut meta_field = None;
        if let Ok(t) = spec.get_str("timeField") {
            time_field = t.to_string();
        }
        if let Ok(m) = spec.get_str("metaField") {
            meta_field = Some(m.to_string());
        }
        UnpackBucketStage {
            time_field,
            meta_field,
        }
    }

    #[test]
    fn unpacks_rows_in_mongod_field_order() {
        let t0 = bson::DateTime::from_millis(1000);
        let t1 = bson::DateTime::from_millis(2000);
        let bucket = doc! {
            "_id": bson::oid::ObjectId::new(),
            "control": {"version": 1, "min": {"t": t0}, "max": {"t": t1}},
            "meta": {"sensor": 5},
            "data": {
                "_id": {"0": 1, "1": 2},
                "t": {"0": t0, "1": t1},
                "x": {"1": "only in row 1"},
            },
        };
        let s = stage(doc! {"timeField": "t", "metaField": "m"});
        let rows = s.unpack(&bucket);
        assert_eq!(
            rows,
            vec![
                doc! {"t": t0, "m": {"sensor": 5}, "_id": 1},
                doc! {"t": t1, "m": {"sensor": 5}, "_id": 2, "x": "only in row 1"},
            ]
        );
        // Keys and values match, and the time field comes first.
        assert_eq!(rows[0].keys().next().map(String::as_str), Some("t"));
    }

    #[test]
    fn bucket_without_meta_or_data_yields_rows_without_meta_or_nothing() {
        let t0 = bson::DateTime::from_millis(1000);
        let s = stage(doc! {"timeField": "t", "metaField": "m"});
        let rows = s.unpack(&doc! {"data": {"t": {"0": t0}}});
        assert_eq!(rows, vec![doc! {"t": t0}]);
        assert!(s.unpack(&doc! {"control": {}}).is_empty());
    }

    #[test]
    fn bucket_filters_keep_meta_conditions_and_bound_the_time() {
        let spec = doc! {"timeField": "t", "metaField": "m", "bucketMaxSpanSeconds": 3600};
        let d1 = bson::DateTime::from_millis(1000);
        let d2 = bson::DateTime::from_millis(9000);
        assert_eq!(
            bucket_filter(
                &spec,
                &doc! {"m.a": {"$in": [1, 2]}, "t": {"$gte": d1, "$lt": d2}, "x": 5}
            ),
            doc! {"meta.a": {"$in": [1, 2]}, "control.max.t": {"$gte": d1}, "control.min.t": {"$lt": d2}}
        );
        assert_eq!(
            bucket_filter(&spec, &doc! {"t": d1, "m": null}),
            doc! {"control.min.t": {"$lte": d1}, "control.max.t": {"$gte": d1}, "meta": null}
        );
        assert_eq!(
            bucket_filter(
                &spec,
                &doc! {"$and": [{"m": 1}, {"x": 2}], "$or": [{"m": 2}]}
            ),
            doc! {"$and": [{"meta": 1}]}
        );
        // Nothing to carry over: other fields, non-date bounds, $not.
        assert!(bucket_filter(&spec, &doc! {"x": 1, "t": {"$gt": 5}, "mm": 1}).is_empty());
        assert!(bucket_filter(&spec, &doc! {"t": {"$not": {"$gt": d1}}}).is_empty());
    }

    #[test]
    fn parse_checks_the_spec() {
        assert!(parse(&Bson::Document(
            doc! {"timeField": "t", "bucketMaxSpanSeconds": 3600}
        ))
        .is_ok());
        let err = |b: Bson| parse(&b).err().map(|e| e.code.code());
        assert_eq!(err(Bson::Int32(1)), Some(5346500));
        assert_eq!(err(Bson::Document(doc! {})), Some(5346500));
        assert_eq!(err(Bson::Document(doc! {"timeField": 1})), Some(5346500));
        assert_eq!(
            err(Bson::Document(doc! {"timeField": "t", "bogus": 1})),
            Some(5346500)
        );
    }
}
