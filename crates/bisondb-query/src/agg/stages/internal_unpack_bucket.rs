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
    /// mongod's `include`: the top-level fields the rest of the pipeline
    /// reads. Only their columns are decoded and only they are output (the
    /// time column is always decoded, it gives the row count). `None`: all.
    include: Option<Vec<String>>,
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
    let mut include = None;
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
            ("include", Bson::Array(fields)) => {
                let mut names = Vec::with_capacity(fields.len());
                for f in fields {
                    match f {
                        Bson::String(s) => names.push(s.clone()),
                        other => {
                            return Err(bad_spec(format!(
                                "include field must be a string, got {}",
                                type_name(other)
                            )))
                        }
                    }
                }
                include = Some(names);
            }
            ("include", other) => {
                return Err(bad_spec(format!(
                    "include field must be an array, got {}",
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
        include,
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
    bucket_columns_of(data, time_field, None)
}

/// [`bucket_columns`] limited to the time column and the columns `include`
/// names (all when `None`): the others are not decoded at all.
#[allow(clippy::type_complexity)]
fn bucket_columns_of(
    data: &Document,
    time_field: &str,
    include: Option<&[String]>,
) -> MongoResult<Option<(usize, Vec<(String, Vec<Option<Bson>>)>)>> {
    let wanted =
        |field: &str| field == time_field || include.is_none_or(|i| i.iter().any(|f| f == field));
    match data.get(time_field) {
        Some(Bson::Binary(_)) => {
            let mut columns = Vec::with_capacity(data.len());
            for (field, column) in data.iter().filter(|(f, _)| wanted(f)) {
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
                .filter(|(f, _)| wanted(f))
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
    unpack_included(bucket, time_field, meta_field, None)
}

/// [`try_unpack_bucket`] keeping only the top-level fields `include` names
/// (all when `None`).
fn unpack_included(
    bucket: &Document,
    time_field: &str,
    meta_field: Option<&str>,
    include: Option<&[String]>,
) -> MongoResult<Vec<Document>> {
    let Ok(data) = bucket.get_document("data") else {
        return Ok(Vec::new());
    };
    let Some((rows, mut columns)) = bucket_columns_of(data, time_field, include)? else {
        return Ok(Vec::new());
    };
    let included = |f: &str| include.is_none_or(|i| i.iter().any(|n| n == f));
    let meta = meta_field
        .filter(|name| included(name))
        .and_then(|name| bucket.get("meta").map(|m| (name, m)));
    let keep_time = included(time_field);
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
        if let Some(time) = time.filter(|_| keep_time) {
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

/// The pipeline with an `include` added to its `$_internalUnpackBucket`
/// (first or second stage, after the pushed-down bucket `$match`) when what
/// follows provably reads only some top-level fields: `$match`es on plain
/// field paths, then a `$group` or `$count` (after which no measurement field
/// is read). Buckets then decode only the columns the pipeline needs, as
/// mongod's dependency analysis does. `None`: leave the pipeline as it is.
pub(crate) fn with_include(stages: &[Document]) -> Option<Vec<Document>> {
    let pos = stages
        .iter()
        .take(2)
        .position(|s| s.contains_key("$_internalUnpackBucket"))?;
    let spec = stages
        .get(pos)?
        .get_document("$_internalUnpackBucket")
        .ok()?;
    if spec.contains_key("include") {
        return None;
    }
    let time_field = spec.get_str("timeField").ok()?;
    let mut fields = vec![time_field.to_string()];
    let mut ended = false;
    for stage in stages.get(pos + 1..)? {
        let (name, arg) = single(stage)?;
        match (name, arg) {
            ("$match", Bson::Document(filter)) => match_fields(filter, &mut fields)?,
            ("$group", Bson::Document(group)) => {
                for (k, v) in group {
                    if k != "_id" && k.starts_with('$') {
                        return None;
                    }
                    expr_fields(v, &mut fields)?;
                }
                ended = true;
                break;
            }
            ("$count", Bson::String(_)) => {
                ended = true;
                break;
            }
            _ => return None,
        }
    }
    if !ended {
        return None;
    }
    let mut spec = spec.clone();
    spec.insert(
        "include",
        fields.into_iter().map(Bson::String).collect::<Vec<_>>(),
    );
    let mut out = stages.to_vec();
    *out.get_mut(pos)? = doc! {"$_internalUnpackBucket": spec};
    Some(out)
}

fn single(stage: &Document) -> Option<(&str, &Bson)> {
    let mut it = stage.iter();
    match (it.next(), it.next()) {
        (Some((k, v)), None) => Some((k.as_str(), v)),
        _ => None,
    }
}

fn add_path(path: &str, fields: &mut Vec<String>) -> Option<()> {
    let top = path.split('.').next().filter(|t| !t.is_empty())?;
    if top.starts_with('$') {
        return None;
    }
    if !fields.iter().any(|f| f == top) {
        fields.push(top.to_string());
    }
    Some(())
}

/// The top-level fields a query filter reads; `None` for anything whose
/// reads are not spelled as keys (`$expr`, `$where`, `$text`, ...).
fn match_fields(filter: &Document, fields: &mut Vec<String>) -> Option<()> {
    for (k, v) in filter {
        match k.as_str() {
            "$and" | "$or" | "$nor" => {
                let Bson::Array(items) = v else { return None };
                for item in items {
                    match_fields(item.as_document()?, fields)?;
                }
            }
            "$comment" => {}
            k if k.starts_with('$') => return None,
            k => {
                if mentions_escape(v) {
                    return None;
                }
                add_path(k, fields)?;
            }
        }
    }
    Some(())
}

fn mentions_escape(v: &Bson) -> bool {
    match v {
        Bson::Document(d) => d
            .iter()
            .any(|(k, v)| matches!(k.as_str(), "$expr" | "$where") || mentions_escape(v)),
        Bson::Array(a) => a.iter().any(mentions_escape),
        _ => false,
    }
}

/// The top-level fields an aggregation expression (or accumulator) reads:
/// its `"$path"` strings. `None` for variables (`$$ROOT`, `$$CURRENT`, a
/// `$let` variable may hold either) and for operators that name fields
/// otherwise (`$literal` hides a path-like string, `$getField` takes a
/// plain name, `$top`/`$bottom` sort by field names, `$function` and
/// `$accumulator` run code).
fn expr_fields(v: &Bson, fields: &mut Vec<String>) -> Option<()> {
    match v {
        Bson::String(s) if s.starts_with("$$") => None,
        Bson::String(s) => match s.strip_prefix('$') {
            Some(path) => add_path(path, fields),
            None => Some(()),
        },
        Bson::Array(items) => items.iter().try_for_each(|i| expr_fields(i, fields)),
        Bson::Document(d) => d.iter().try_for_each(|(k, v)| {
            if matches!(
                k.as_str(),
                "$literal"
                    | "$getField"
                    | "$setField"
                    | "$unsetField"
                    | "$function"
                    | "$accumulator"
                    | "sortBy"
                    | "$let"
            ) {
                return None;
            }
            expr_fields(v, fields)
        }),
        _ => Some(()),
    }
}

impl UnpackBucketStage {
    #[cfg(test)]
    pub(crate) fn unpack(&self, bucket: &Document) -> Vec<Document> {
        unpack_bucket(bucket, &self.time_field, self.meta_field.as_deref())
    }

    fn try_unpack(&self, bucket: &Document) -> MongoResult<Vec<Document>> {
        unpack_included(
            bucket,
            &self.time_field,
            self.meta_field.as_deref(),
            self.include.as_deref(),
        )
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
            include: None,
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
    /// A small deterministic generator, so a failing case replays.
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n.max(1)
        }
    }

    fn random_bucket(r: &mut Lcg, compressed: bool) -> Document {
        let rows = 1 + r.next(40) as usize;
        let base = 1_700_000_000_000 + r.next(10) as i64 * 3_600_000;
        let mut max_t = base;
        let mut cols: Vec<(&str, Vec<Option<Bson>>)> = vec![
            ("t", Vec::new()),
            ("_id", Vec::new()),
            ("x", Vec::new()),
            ("y", Vec::new()),
            ("s", Vec::new()),
        ];
        for i in 0..rows {
            // Out of order times (version 3 buckets) as well as sorted ones.
            let t = base + r.next(3_600_000) as i64;
            max_t = max_t.max(t);
            let x = match r.next(6) {
                0 => None,
                1 => Some(Bson::Int32(r.next(1000) as i32 - 500)),
                2 => Some(Bson::Int64(r.next(1 << 40) as i64)),
                3 => Some(Bson::Double(r.next(10_000) as f64 / 7.0)),
                4 => Some(Bson::Int32(i32::MAX - r.next(3) as i32)),
                _ => Some(Bson::String(format!("v{}", r.next(3)))),
            };
            let y = (r.next(3) > 0).then(|| Bson::Int32(r.next(50) as i32));
            let s = (r.next(4) == 0).then(|| Bson::String(format!("s{}", r.next(2))));
            let row = [
                Some(Bson::DateTime(bson::DateTime::from_millis(t))),
                Some(Bson::Int32(i as i32)),
                x,
                y,
                s,
            ];
            for ((_, col), v) in cols.iter_mut().zip(row) {
                col.push(v);
            }
        }
        let mut data = Document::new();
        for (name, col) in &cols {
            if compressed {
                let bytes =
                    crate::bsoncolumn::encode(col.iter().map(Option::as_ref)).unwrap_or_default();
                data.insert(
                    *name,
                    bson::Binary {
                        subtype: BinarySubtype::Column,
                        bytes,
                    },
                );
            } else {
                let mut d = Document::new();
                for (i, v) in col.iter().enumerate() {
                    if let Some(v) = v {
                        d.insert(i.to_string(), v.clone());
                    }
                }
                data.insert(*name, d);
            }
        }
        let mut bucket = doc! {
            "_id": bson::oid::ObjectId::new(),
            // The pushed-down bucket filter reads the time bounds.
            "control": {
                "version": if compressed { 3 } else { 1 },
                "min": {"t": bson::DateTime::from_millis(base)},
                "max": {"t": bson::DateTime::from_millis(max_t)},
            },
            "data": data,
        };
        if r.next(5) > 0 {
            bucket.insert("meta", doc! {"k": r.next(3) as i32, "z": "m"});
        }
        bucket
    }

    fn random_pipeline(r: &mut Lcg) -> Vec<Document> {
        let spec = doc! {"timeField": "t", "metaField": "m", "bucketMaxSpanSeconds": 3600};
        let mut p = vec![doc! {"$_internalUnpackBucket": spec}];
        let lo = bson::DateTime::from_millis(1_700_000_000_000 + r.next(36) as i64 * 1_000_000);
        match r.next(4) {
            0 => p.push(doc! {"$match": {"t": {"$gte": lo}}}),
            1 => p.push(doc! {"$match": {"m.k": r.next(3) as i32, "t": {"$lt": lo}}}),
            2 => p.push(doc! {"$match": {"$or": [{"m": null}, {"y": {"$gt": 10}}]}}),
            _ => {}
        }
        if r.next(5) == 0 {
            p.push(doc! {"$count": "n"});
            return p;
        }
        let key = match r.next(6) {
            0 => Bson::from("$m.k"),
            1 => Bson::Null,
            2 => Bson::from(doc! {"$dateToString": {"format": "%Y-%m-%dT%H", "date": "$t"}}),
            3 => Bson::from(doc! {"$dateTrunc": {"date": "$t", "unit": "hour"}}),
            4 => Bson::from(doc! {"y": {"$year": "$t"}, "mo": {"$month": "$t"},
            "d": {"$dayOfMonth": "$t"}, "h": {"$hour": "$t"}}),
            _ => Bson::from("$m"),
        };
        let field = ["$x", "$y", "$s", "$m.k"][r.next(4) as usize];
        let mut group = doc! {"_id": key};
        for (name, op) in [
            ("a", "$avg"),
            ("lo", "$min"),
            ("hi", "$max"),
            ("sum", "$sum"),
        ] {
            if r.next(3) > 0 {
                group.insert(name, doc! {op: field});
            }
        }
        group.insert("n", doc! {"$count": {}});
        p.push(doc! {"$group": group});
        p.push(doc! {"$sort": {"_id": 1}});
        p
    }

    /// Decoding only the columns a `$match`/`$group`/`$count` pipeline reads
    /// gives what unpacking every field and then running the same stages
    /// gives: random buckets (both layouts, out-of-order times, missing
    /// fields, mixed numeric types, buckets without meta) and random
    /// pipelines of the shapes the rewrite accepts.
    #[test]
    fn column_subset_matches_full_unpacking() {
        let mut r = Lcg(19);
        let mut rewritten = 0;
        for round in 0..300 {
            let buckets: Vec<Document> = (0..1 + r.next(8))
                .map(|_| {
                    let compressed = r.next(3) > 0;
                    random_bucket(&mut r, compressed)
                })
                .collect();
            let stages = random_pipeline(&mut r);
            if with_include(&stages).is_some() {
                rewritten += 1;
            }
            let run = |p: crate::agg::Pipeline, input: Vec<Document>| {
                p.run(Box::new(input.into_iter().map(Ok)))
                    .collect::<MongoResult<Vec<Document>>>()
            };
            let parse = |s: &[Document]| {
                crate::agg::Pipeline::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
            };
            let got = run(parse(&stages), buckets.clone());
            let rows = run(parse(&stages[..1]), buckets).unwrap_or_default();
            let want = run(parse(&stages[1..]), rows);
            assert_eq!(
                got.map_err(|e| e.to_string()),
                want.map_err(|e| e.to_string()),
                "round {round}: {stages:?}"
            );
        }
        assert_eq!(rewritten, 300);
    }

    #[test]
    fn include_only_for_pipelines_that_read_named_fields() {
        let unpack = doc! {"$_internalUnpackBucket": {"timeField": "t", "metaField": "m"}};
        let included = |rest: Vec<Document>| {
            let mut p = vec![unpack.clone()];
            p.extend(rest);
            with_include(&p).map(|p| p[0].clone())
        };
        assert_eq!(
            included(vec![
                doc! {"$match": {"m.k": 1}},
                doc! {"$group": {"_id": {"$hour": "$t"}, "a": {"$avg": "$x.v"}}},
                doc! {"$project": {"anything": "$$ROOT"}},
            ]),
            Some(doc! {"$_internalUnpackBucket":
            {"timeField": "t", "metaField": "m", "include": ["t", "m", "x"]}})
        );
        assert!(included(vec![doc! {"$count": "n"}]).is_some());
        for rest in [
            vec![doc! {"$group": {"_id": "$$ROOT"}}],
            vec![
                doc! {"$group": {"_id": null, "f": {"$top": {"sortBy": {"q": 1}, "output": "$x"}}}},
            ],
            vec![doc! {"$group": {"_id": {"$getField": "q"}}}],
            vec![doc! {"$group": {"_id": {"$literal": "$q"}}}],
            vec![
                doc! {"$match": {"$expr": {"$eq": ["$q", 1]}}},
                doc! {"$count": "n"},
            ],
            vec![doc! {"$project": {"x": 1}}, doc! {"$count": "n"}],
            vec![doc! {"$match": {"x": 1}}],
            vec![],
        ] {
            assert_eq!(included(rest.clone()), None, "{rest:?}");
        }
    }
}
