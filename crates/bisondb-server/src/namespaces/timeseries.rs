//! Time-series collections, laid out as mongod lays them out.
//!
//! `create X` with `timeseries` makes two catalog entries: `X`, whose options
//! hold `timeseries` (mongod's defaults filled in) and `expireAfterSeconds`,
//! and which has no documents; and `system.buckets.X`, an ordinary collection
//! holding the measurements grouped into bucket documents (`bucket.rs`).
//! Reads of `X` resolve it as a view over its buckets whose pipeline starts
//! with `$_internalUnpackBucket` (`views::definition`), so `find`, `count`,
//! `distinct`, `aggregate` and `$lookup` see measurements. Writes to `X`
//! (routed by `on_view/timeseries.rs`) store measurements into buckets
//! (`write.rs`); index keys on `X` translate to bucket keys (`indexes.rs`).
//! `drop X` drops both entries; the TTL monitor deletes whole buckets whose
//! newest measurement is older than `expireAfterSeconds` ([`expire`]);
//! `collMod` changes `expireAfterSeconds` and `granularity` ([`coll_mod`]).

pub mod bucket;
pub mod indexes;
pub mod write;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_storage::Storage;
use bson::{doc, Bson, Document, RawBsonRef, RawDocument};

use crate::fields;

/// Bucket collections are named `system.buckets.<name>`.
pub const BUCKETS_PREFIX: &str = "system.buckets.";

/// mongod's upper bound for `bucketMaxSpanSeconds` and `bucketRoundingSeconds`
/// (one year).
const MAX_BUCKET_SECONDS: i64 = 31_536_000;

/// Options `create` accepts beside `timeseries` (mongod's list).
const ALLOWED_WITH: &[&str] = &[
    "collation",
    "comment",
    "expireAfterSeconds",
    "indexOptionDefaults",
    "storageEngine",
    "timeseries",
    "writeConcern",
];

/// The bucket collection of `name`.
pub fn buckets_name(name: &str) -> String {
    format!("{BUCKETS_PREFIX}{name}")
}

/// A time-series collection's options, with mongod's defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub struct TsOptions {
    pub time_field: String,
    pub meta_field: Option<String>,
    /// `None` when custom bucketing parameters were given instead.
    pub granularity: Option<String>,
    pub max_span: i64,
    pub rounding: i64,
}

/// `bucketMaxSpanSeconds` of a granularity.
fn span_of(granularity: &str) -> i64 {
    match granularity {
        "minutes" => 86_400,
        "hours" => 2_592_000,
        _ => 3_600,
    }
}

/// `bucketRoundingSeconds` of a granularity.
fn rounding_of(granularity: &str) -> i64 {
    match granularity {
        "minutes" => 3_600,
        "hours" => 86_400,
        _ => 60,
    }
}

impl TsOptions {
    /// The options of a time-series collection `X` from its catalog options
    /// (`None` for anything else, including its bucket collection).
    pub fn of(name: &str, options: &Document) -> Option<TsOptions> {
        if name.starts_with(BUCKETS_PREFIX) {
            return None;
        }
        let ts = options.get_document("timeseries").ok()?;
        let time_field = ts.get_str("timeField").ok()?.to_string();
        let meta_field = ts.get_str("metaField").ok().map(str::to_string);
        let granularity = ts.get_str("granularity").ok().map(str::to_string);
        let int = |k: &str| match ts.get(k) {
            Some(Bson::Int32(i)) => Some(i64::from(*i)),
            Some(Bson::Int64(i)) => Some(*i),
            _ => None,
        };
        let g = granularity.as_deref().unwrap_or("seconds");
        let max_span = int("bucketMaxSpanSeconds").unwrap_or_else(|| span_of(g));
        let rounding = int("bucketRoundingSeconds").unwrap_or_else(|| rounding_of(g));
        Some(TsOptions {
            time_field,
            meta_field,
            granularity,
            max_span,
            rounding,
        })
    }

    /// The `timeseries` document as stored and as `listCollections` shows it:
    /// `bucketRoundingSeconds` only when there is no granularity.
    pub fn to_document(&self) -> Document {
        let mut d = doc! {"timeField": self.time_field.clone()};
        if let Some(m) = &self.meta_field {
            d.insert("metaField", m.clone());
        }
        match &self.granularity {
            Some(g) => {
                d.insert("granularity", g.clone());
            }
            None => {
                d.insert("bucketRoundingSeconds", to_int(self.rounding));
            }
        }
        d.insert("bucketMaxSpanSeconds", to_int(self.max_span));
        d
    }

    /// `$_internalUnpackBucket`'s specification.
    pub fn unpack_spec(&self) -> Document {
        let mut d = doc! {"timeField": self.time_field.clone()};
        if let Some(m) = &self.meta_field {
            d.insert("metaField", m.clone());
        }
        d.insert("bucketMaxSpanSeconds", to_int(self.max_span));
        d
    }
}

fn to_int(v: i64) -> Bson {
    i32::try_from(v).map_or(Bson::Int64(v), Bson::Int32)
}

/// Parses `create`'s `timeseries` argument as mongod's IDL does (types,
/// required `timeField`, unknown fields, granularity names, ranges); the
/// checks between fields come in [`check_create`].
pub fn parse_create(cmd: &str, v: RawBsonRef<'_>) -> MongoResult<Document> {
    let ts = fields::as_doc(cmd, "timeseries", v)?;
    let mut out = Document::new();
    for el in ts.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        let path = format!("timeseries.{}", k.as_str());
        match k.as_str() {
            "timeField" | "metaField" => {
                out.insert(k.as_str(), fields::as_str(cmd, &path, v)?);
            }
            "granularity" => {
                let g = fields::as_str(cmd, &path, v)?;
                if !matches!(g, "seconds" | "minutes" | "hours") {
                    return Err(MongoError::bad_value(format!(
                        "Enumeration value '{g}' for field '{cmd}.{path}' is not a valid value."
                    )));
                }
                out.insert(k.as_str(), g);
            }
            "bucketMaxSpanSeconds" | "bucketRoundingSeconds" => {
                let n = fields::as_i64(cmd, &path, v)?;
                if n < 1 {
                    return Err(MongoError::location(
                        51024,
                        format!("BSON field '{cmd}.{path}' value must be >= 1, actual value '{n}'"),
                    ));
                }
                if n > MAX_BUCKET_SECONDS {
                    return Err(MongoError::location(
                        51024,
                        format!(
                            "BSON field '{cmd}.{path}' value must be <= {MAX_BUCKET_SECONDS}, actual value '{n}'"
                        ),
                    ));
                }
                out.insert(k.as_str(), n);
            }
            other => return Err(fields::unknown_field(cmd, &format!("timeseries.{other}"))),
        }
    }
    if !out.contains_key("timeField") {
        return Err(fields::missing_field(cmd, "timeseries.timeField"));
    }
    Ok(out)
}

/// `expireAfterSeconds` of `create` and `collMod` (a number; mongod stores a long).
pub fn parse_expire_after(cmd: &str, v: RawBsonRef<'_>) -> MongoResult<i64> {
    let secs = fields::as_i64(cmd, "expireAfterSeconds", v)?;
    if secs < 0 {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "TTL index 'expireAfterSeconds' option cannot be less than 0",
        ));
    }
    if secs > i64::from(i32::MAX) {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number",
        ));
    }
    Ok(secs)
}

fn invalid(message: impl Into<String>) -> MongoError {
    MongoError::new(ErrorCode::InvalidOptions, message)
}

/// mongod's checks of a `create` command once every field is parsed: which
/// options may come with `timeseries`, the field names, the bucketing
/// parameters (defaults filled in), and `expireAfterSeconds` only on a
/// time-series or clustered collection. Replaces `options.timeseries` with
/// its complete form.
pub fn check_create(
    db: &str,
    name: &str,
    body: &RawDocument,
    options: &mut Document,
) -> MongoResult<()> {
    let Ok(given) = options.get_document("timeseries").cloned() else {
        if options.contains_key("expireAfterSeconds") && !options.contains_key("clusteredIndex") {
            return Err(invalid(
                "'expireAfterSeconds' is only supported on time-series collections or when the 'clusteredIndex' option is specified",
            ));
        }
        return Ok(());
    };
    for el in body.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        let k = k.as_str();
        if k == "create" || ALLOWED_WITH.contains(&k) || fields::is_generic_arg(k) {
            continue;
        }
        // `capped` is accepted unless it is true.
        if k == "capped" && !fields::as_bool("create", k, v)? {
            continue;
        }
        return Err(invalid(format!(
            "{db}.{name}: 'timeseries' is not allowed with '{k}'"
        )));
    }
    let top_level = |field: &str| {
        invalid(format!(
            "{db}.{name}: '{field}' must be a top-level field and not contain a '.'"
        ))
    };
    let time_field = given.get_str("timeField").unwrap_or_default().to_string();
    if time_field.contains('.') {
        return Err(top_level("timeField"));
    }
    let meta_field = given.get_str("metaField").ok().map(str::to_string);
    if let Some(m) = &meta_field {
        if m == "_id" {
            return Err(invalid("'metaField' cannot be \"_id\""));
        }
        if *m == time_field {
            return Err(invalid("'metaField' cannot be the same as 'timeField'"));
        }
        if m.contains('.') {
            return Err(top_level("metaField"));
        }
    }
    let granularity = given.get_str("granularity").ok().map(str::to_string);
    let max_span = given.get_i64("bucketMaxSpanSeconds").ok();
    let rounding = given.get_i64("bucketRoundingSeconds").ok();
    let (granularity, max_span, rounding) = match granularity {
        Some(g) => {
            if max_span.is_some_and(|s| s != span_of(&g)) {
                return Err(invalid(format!(
                    "Timeseries 'bucketMaxSpanSeconds' is not configurable to a value other than the default of {} for the provided granularity",
                    span_of(&g)
                )));
            }
            if rounding.is_some_and(|r| r != rounding_of(&g)) {
                return Err(invalid(format!(
                    "Timeseries 'bucketRoundingSeconds' is not configurable to a value other than the default of {} for the provided granularity",
                    rounding_of(&g)
                )));
            }
            let (span, round) = (span_of(&g), rounding_of(&g));
            (Some(g), span, round)
        }
        None => match (max_span, rounding) {
            (None, None) => (Some("seconds".to_string()), 3_600, 60),
            (Some(s), Some(r)) if s == r => (None, s, r),
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "Timeseries 'bucketRoundingSeconds' needs to be equal to 'bucketMaxSpanSeconds'",
                ))
            }
            _ => {
                return Err(invalid(
                    "Timeseries 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' need to be set alongside each other",
                ))
            }
        },
    };
    let ts = TsOptions {
        time_field,
        meta_field,
        granularity,
        max_span,
        rounding,
    };
    options.insert("timeseries", ts.to_document());
    Ok(())
}

/// Creates `db.name` (options checked by [`check_create`]) and its bucket
/// collection.
pub fn create(storage: &Storage, db: &str, name: &str, options: Document) -> MongoResult<()> {
    let exists = || {
        MongoError::new(
            ErrorCode::NamespaceExists,
            format!("Collection {db}.{name} already exists."),
        )
    };
    let buckets = buckets_name(name);
    if storage.collection(db, &buckets).is_some() {
        return Err(exists());
    }
    let ts = options
        .get_document("timeseries")
        .cloned()
        .unwrap_or_default();
    let bucket_options = doc! {"clusteredIndex": true, "timeseries": ts};
    match storage.create_collection(db, &buckets, bucket_options) {
        Ok(_) => {}
        Err(bisondb_storage::StorageError::NamespaceExists(_)) => return Err(exists()),
        Err(e) => return Err(e.into()),
    }
    let ts_options = TsOptions::of(name, &options);
    match storage.create_collection(db, name, options) {
        Ok(_) => match ts_options {
            Some(ts) => indexes::create_default_index(storage, db, name, &ts),
            None => Ok(()),
        },
        Err(e) => {
            // Leave no bucket collection without its time-series collection.
            let _ = storage.drop_collection(db, &buckets);
            match e {
                bisondb_storage::StorageError::NamespaceExists(_) => Err(exists()),
                other => Err(other.into()),
            }
        }
    }
}

/// The time-series options of `db.name`, if it is a time-series collection.
pub fn options_of(storage: &Storage, db: &str, name: &str) -> Option<TsOptions> {
    let coll = storage.collection(db, name)?;
    TsOptions::of(name, &coll.options())
}

/// How many measurements the time-series collection `c` holds (`None` for
/// any other collection): the rows of every bucket.
pub fn measurement_count(
    storage: &Storage,
    c: &bisondb_storage::Collection,
) -> MongoResult<Option<u64>> {
    let Some(ts) = TsOptions::of(c.name(), &c.options()) else {
        return Ok(None);
    };
    let Some(b) = storage.collection(c.db(), &buckets_name(c.name())) else {
        return Ok(Some(0));
    };
    let mut n = 0u64;
    for bucket in b.scan(false) {
        let bucket = bucket?;
        // Compressed buckets keep their row count; version 1 ones have a
        // time column with one entry per row.
        let count = bucket
            .get_document("control")
            .ok()
            .and_then(|c| c.get_i32("count").ok());
        let rows = match count {
            Some(n) => usize::try_from(n).unwrap_or(0),
            None => bucket
                .get_document("data")
                .ok()
                .and_then(|d| d.get_document(&ts.time_field).ok())
                .map_or(0, |t| t.iter().count()),
        };
        n = n.saturating_add(rows as u64);
    }
    Ok(Some(n))
}

/// Drops the bucket collection of `db.name` (after `name` itself was dropped).
pub fn drop_buckets(storage: &Storage, db: &str, name: &str) -> MongoResult<()> {
    storage.drop_collection(db, &buckets_name(name))?;
    Ok(())
}

/// One TTL pass over a time-series collection: deletes the buckets whose
/// newest measurement is older than `now_ms - expireAfterSeconds`. Returns
/// how many buckets it deleted.
pub fn expire(
    storage: &Storage,
    db: &str,
    name: &str,
    options: &Document,
    now_ms: i64,
) -> MongoResult<u64> {
    let Some(ts) = TsOptions::of(name, options) else {
        return Ok(0);
    };
    let secs = match options.get("expireAfterSeconds") {
        Some(Bson::Int32(i)) => i64::from(*i),
        Some(Bson::Int64(i)) => *i,
        _ => return Ok(0),
    };
    let Some(buckets) = storage.collection(db, &buckets_name(name)) else {
        return Ok(0);
    };
    let cutoff = now_ms.saturating_sub(secs.saturating_mul(1000));
    write::delete_buckets_older_than(&buckets, &ts, cutoff)
}

/// `collMod`'s `timeseries` on a time-series collection: `granularity` only
/// coarser (seconds to minutes or hours, minutes to hours), custom
/// `bucketMaxSpanSeconds`/`bucketRoundingSeconds` only equal and larger.
/// (`expireAfterSeconds` is `coll_mod.rs`'s, as for clustered collections.)
/// Returns the new options.
pub fn coll_mod(
    name: &str,
    old: &Document,
    timeseries: Option<&Document>,
) -> MongoResult<Document> {
    let mut options = old.clone();
    let Some(mut ts) = TsOptions::of(name, old) else {
        return Err(invalid(
            "option only supported on a time-series collection: timeseries",
        ));
    };
    if let Some(mods) = timeseries {
        let mut span = None;
        let mut rounding = None;
        for (k, v) in mods {
            match (k.as_str(), v) {
                ("granularity", Bson::String(g)) => {
                    if !matches!(g.as_str(), "seconds" | "minutes" | "hours") {
                        return Err(MongoError::bad_value(format!(
                            "Enumeration value '{g}' for field 'collMod.timeseries.granularity' is not a valid value."
                        )));
                    }
                    let current = ts.granularity.clone();
                    let rank = |g: &str| match g {
                        "seconds" => 0,
                        "minutes" => 1,
                        _ => 2,
                    };
                    match current {
                        Some(c) if rank(g) < rank(&c) => {
                            return Err(invalid(
                                "Invalid transition for timeseries.granularity. Can only transition from 'seconds' to 'minutes' or 'minutes' to 'hours'.",
                            ))
                        }
                        Some(_) => {}
                        None if rounding_of(g) < ts.rounding || span_of(g) < ts.max_span => {
                            return Err(invalid(
                                "Timeseries 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' cannot be decreased",
                            ))
                        }
                        None => {}
                    }
                    ts.granularity = Some(g.clone());
                    ts.max_span = span_of(g);
                    ts.rounding = rounding_of(g);
                }
                ("bucketMaxSpanSeconds", Bson::Int32(_) | Bson::Int64(_)) => {
                    span = bson_i64(v);
                }
                ("bucketRoundingSeconds", Bson::Int32(_) | Bson::Int64(_)) => {
                    rounding = bson_i64(v);
                }
                ("granularity", other) => {
                    let raw = crate::reply::to_raw(&doc! {"v": other.clone()})?;
                    let v = raw
                        .get("v")
                        .map_err(crate::request::invalid_bson)?
                        .ok_or_else(|| MongoError::internal("granularity"))?;
                    return Err(fields::wrong_type(
                        "collMod",
                        "timeseries.granularity",
                        v,
                        "string",
                    ));
                }
                (other, _) => {
                    return Err(fields::unknown_field(
                        "collMod",
                        &format!("timeseries.{other}"),
                    ))
                }
            }
        }
        match (span, rounding) {
            (None, None) => {}
            (Some(s), Some(r)) => {
                if s != r {
                    return Err(invalid(
                        "Timeseries 'bucketRoundingSeconds' needs to be equal to 'bucketMaxSpanSeconds'",
                    ));
                }
                if s < ts.max_span || r < ts.rounding {
                    return Err(invalid(
                        "Timeseries 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' cannot be decreased",
                    ));
                }
                if !(1..=MAX_BUCKET_SECONDS).contains(&s) {
                    return Err(invalid(format!(
                        "Timeseries 'bucketMaxSpanSeconds' must be between 1 and {MAX_BUCKET_SECONDS}"
                    )));
                }
                ts.granularity = None;
                ts.max_span = s;
                ts.rounding = r;
            }
            _ => {
                return Err(invalid(
                    "Timeseries 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' need to be set alongside each other",
                ))
            }
        }
        options.insert("timeseries", ts.to_document());
    }
    Ok(options)
}

fn bson_i64(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(ts: Document, extra: Document) -> MongoResult<Document> {
        let mut body = doc! {"create": "c", "timeseries": ts.clone()};
        body.extend(extra.clone());
        let raw = crate::reply::to_raw(&body)?;
        let ts_raw = crate::reply::to_raw(&doc! {"v": ts})?;
        let v = ts_raw
            .get("v")
            .ok()
            .flatten()
            .ok_or_else(|| MongoError::internal("v"))?;
        let mut options = doc! {"timeseries": parse_create("create", v)?};
        options.extend(extra);
        check_create("db", "c", &raw, &mut options)?;
        Ok(options)
    }

    fn code(r: MongoResult<Document>) -> i32 {
        r.err().map_or(0, |e| e.code.code())
    }

    #[test]
    fn defaults_are_filled_in_as_mongod_shows_them() -> MongoResult<()> {
        assert_eq!(
            check(doc! {"timeField": "t"}, doc! {})?,
            doc! {"timeseries": {"timeField": "t", "granularity": "seconds", "bucketMaxSpanSeconds": 3600}}
        );
        assert_eq!(
            check(
                doc! {"timeField": "t", "metaField": "m", "granularity": "minutes"},
                doc! {"expireAfterSeconds": 5i64}
            )?,
            doc! {"timeseries": {"timeField": "t", "metaField": "m", "granularity": "minutes", "bucketMaxSpanSeconds": 86400}, "expireAfterSeconds": 5i64}
        );
        assert_eq!(
            check(
                doc! {"timeField": "t", "bucketMaxSpanSeconds": 100, "bucketRoundingSeconds": 100},
                doc! {}
            )?,
            doc! {"timeseries": {"timeField": "t", "bucketRoundingSeconds": 100, "bucketMaxSpanSeconds": 100}}
        );
        Ok(())
    }

    #[test]
    fn invalid_options_fail_with_mongods_codes() {
        assert_eq!(code(check(doc! {}, doc! {})), 40414);
        assert_eq!(code(check(doc! {"timeField": 1}, doc! {})), 14);
        assert_eq!(code(check(doc! {"timeField": "t", "x": 1}, doc! {})), 40415);
        assert_eq!(
            code(check(
                doc! {"timeField": "t", "granularity": "days"},
                doc! {}
            )),
            2
        );
        assert_eq!(code(check(doc! {"timeField": "a.b"}, doc! {})), 72);
        assert_eq!(
            code(check(doc! {"timeField": "t", "metaField": "t"}, doc! {})),
            72
        );
        assert_eq!(
            code(check(doc! {"timeField": "t", "metaField": "_id"}, doc! {})),
            72
        );
        assert_eq!(
            code(check(doc! {"timeField": "t", "metaField": "m.x"}, doc! {})),
            72
        );
        assert_eq!(
            code(check(
                doc! {"timeField": "t", "bucketMaxSpanSeconds": 10},
                doc! {}
            )),
            72
        );
        assert_eq!(
            code(check(
                doc! {"timeField": "t", "bucketMaxSpanSeconds": 10, "bucketRoundingSeconds": 20},
                doc! {}
            )),
            72
        );
        assert_eq!(
            code(check(
                doc! {"timeField": "t", "bucketMaxSpanSeconds": 0, "bucketRoundingSeconds": 0},
                doc! {}
            )),
            51024
        );
        assert_eq!(
            code(check(
                doc! {"timeField": "t", "bucketMaxSpanSeconds": 31536001, "bucketRoundingSeconds": 31536001},
                doc! {}
            )),
            51024
        );
        assert_eq!(
            code(check(
                doc! {"timeField": "t", "granularity": "hours", "bucketMaxSpanSeconds": 10, "bucketRoundingSeconds": 10},
                doc! {}
            )),
            72
        );
        assert_eq!(
            code(check(doc! {"timeField": "t"}, doc! {"capped": true})),
            72
        );
        assert_eq!(
            code(check(doc! {"timeField": "t"}, doc! {"viewOn": "x"})),
            72
        );
        assert_eq!(
            code(check(doc! {"timeField": "t"}, doc! {"validator": {}})),
            72
        );
        assert!(check(doc! {"timeField": "t"}, doc! {"capped": false}).is_ok());
    }

    #[test]
    fn coll_mod_allows_only_coarser_granularity() -> MongoResult<()> {
        let old = check(doc! {"timeField": "t"}, doc! {})?;
        let new = coll_mod("c", &old, Some(&doc! {"granularity": "hours"}))?;
        assert_eq!(
            new.get_document("timeseries").ok(),
            Some(&doc! {"timeField": "t", "granularity": "hours", "bucketMaxSpanSeconds": 2592000})
        );
        assert_eq!(
            code(coll_mod("c", &new, Some(&doc! {"granularity": "minutes"}))),
            72
        );
        assert_eq!(
            code(coll_mod(
                "c",
                &doc! {},
                Some(&doc! {"granularity": "hours"})
            )),
            72
        );
        Ok(())
    }
}
