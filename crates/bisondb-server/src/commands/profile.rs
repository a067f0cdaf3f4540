//! `profile`: reads and sets the database profiler's settings (mongod 8).
//!
//! `{profile: <level>, slowms?, sampleRate?, filter?}`. The level (0 off, 1
//! slow operations or those the filter selects, 2 all) and the filter belong
//! to the database; `slowms` and `sampleRate` are server-wide. A level outside
//! 0..=2 (`-1` by convention) only reads the settings. The reply gives the
//! settings as they were before the command: `{was, slowms, sampleRate,
//! filter?, note?, ok}`. Turning profiling on creates `system.profile`
//! (capped, 1 MiB); see `crate::profiler` for what is recorded.

use std::sync::Arc;

use bisondb_error::{MongoError, MongoResult};
use bson::{doc, Document, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::profiler::{self, DbSettings, Filter};
use crate::reply;
use crate::request::CommandRequest;

const NOTE: &str = "When a filter expression is set, slowms and sampleRate are not used for profiling and slow-query log lines.";

/// `filter`: a new match expression, or `"unset"`.
#[derive(Debug)]
enum FilterChange {
    Set(Arc<Filter>),
    Unset,
}

#[derive(Debug)]
pub struct Profile {
    db: String,
    level: i64,
    slowms: Option<i32>,
    sample_rate: Option<f64>,
    filter: Option<FilterChange>,
}

impl Command for Profile {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut p = Profile {
            db: req.db.clone(),
            level: 0,
            slowms: None,
            sample_rate: None,
            filter: None,
        };
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "profile" => p.level = fields::as_i64(n, "profile", v)?,
                "slowms" => {
                    let ms = fields::as_i64(n, "slowms", v)?;
                    // mongod keeps slowms in an int.
                    p.slowms = Some(ms.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32);
                }
                "sampleRate" => {
                    let rate = match v {
                        RawBsonRef::Double(d) => d,
                        RawBsonRef::Int32(i) => f64::from(i),
                        RawBsonRef::Int64(i) => i as f64,
                        RawBsonRef::Decimal128(d) => {
                            d.to_string().parse::<f64>().unwrap_or(f64::NAN)
                        }
                        other => {
                            return Err(fields::wrong_type(
                                n,
                                "sampleRate",
                                other,
                                "[double, long, int, decimal]",
                            ))
                        }
                    };
                    p.sample_rate = Some(rate);
                }
                "filter" => {
                    p.filter = Some(match v {
                        RawBsonRef::Document(d) => {
                            FilterChange::Set(Arc::new(Filter::parse(fields::to_document(d)?)?))
                        }
                        RawBsonRef::String("unset") => FilterChange::Unset,
                        _ => {
                            return Err(MongoError::bad_value(
                                "Expected an object, or the string 'unset'.",
                            ))
                        }
                    })
                }
                other => fields::check_known(n, other, &[])?,
            }
        }
        Ok(p)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        if let Some(rate) = self.sample_rate {
            // NaN fails both comparisons, as in mongod.
            if !(0.0..=1.0).contains(&rate) {
                return Err(MongoError::bad_value(
                    "'sampleRate' must be between 0.0 and 1.0 inclusive",
                ));
            }
        }
        let profiler = &ctx.state.profiler;
        let in_range = (0..=2).contains(&self.level);
        let old = profiler.settings(&self.db);
        if in_range || self.filter.is_some() {
            let mut new = old.clone();
            if in_range {
                new.level = self.level as i32;
            }
            match &self.filter {
                Some(FilterChange::Set(f)) => new.filter = Some(f.clone()),
                Some(FilterChange::Unset) => new.filter = None,
                None => {}
            }
            if new.level > 0 {
                profiler::ensure_collection(ctx.state, &self.db)?;
            }
            profiler.set(&self.db, new);
        }
        let mut r = reply_fields(&old, profiler.slowms(), profiler.sample_rate());
        if old.filter.is_some() || matches!(self.filter, Some(FilterChange::Set(_))) {
            r.insert("note", NOTE);
        }
        if let Some(ms) = self.slowms {
            profiler.set_slowms(ms);
        }
        if let Some(rate) = self.sample_rate {
            profiler.set_sample_rate(rate);
        }
        reply::ok(r)
    }
}

/// `was`, `slowms`, `sampleRate` and the filter of the settings before.
fn reply_fields(old: &DbSettings, slowms: i32, sample_rate: f64) -> Document {
    let mut r = doc! {
        "was": old.level,
        "slowms": slowms,
        "sampleRate": sample_rate,
    };
    if let Some(f) = &old.filter {
        r.insert("filter", f.doc.clone());
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    fn parse(body: &bson::RawDocument) -> MongoResult<Profile> {
        let req = CommandRequest::from_body(body, "test")?;
        Profile::parse(&req)
    }

    #[test]
    fn parses_settings_and_refuses_bad_values() {
        let p = parse(
            &rawdoc! {"profile": 1, "slowms": 20, "sampleRate": 0.5, "filter": {"op": "query"}},
        )
        .unwrap();
        assert_eq!(p.level, 1);
        assert_eq!(p.slowms, Some(20));
        assert_eq!(p.sample_rate, Some(0.5));
        assert!(matches!(p.filter, Some(FilterChange::Set(_))));
        let p = parse(&rawdoc! {"profile": -1, "filter": "unset"}).unwrap();
        assert!(matches!(p.filter, Some(FilterChange::Unset)));
        let e = parse(&rawdoc! {"profile": 0, "filter": bson::RawBson::Null}).unwrap_err();
        assert_eq!(e.code.code(), 2);
        let e = parse(&rawdoc! {"profile": 0, "filter": "x"}).unwrap_err();
        assert_eq!(e.code.code(), 2);
        let e = parse(&rawdoc! {"profile": "on"}).unwrap_err();
        assert_eq!(e.code.code(), 14);
        let e = parse(&rawdoc! {"profile": 0, "sampleRate": "x"}).unwrap_err();
        assert_eq!(e.code.code(), 14);
        let e = parse(&rawdoc! {"profile": 0, "bogus": 1}).unwrap_err();
        assert_eq!(e.code.code(), 40415);
        let e = parse(&rawdoc! {"profile": 0, "filter": {"$bogus": 1}}).unwrap_err();
        assert_ne!(e.code.code(), 0);
    }

    #[test]
    fn reply_shows_the_filter_when_set() {
        let r = reply_fields(&DbSettings::default(), 100, 1.0);
        assert_eq!(r, doc! {"was": 0, "slowms": 100, "sampleRate": 1.0});
        let f = Arc::new(Filter::parse(doc! {"millis": {"$gt": 1}}).unwrap());
        let r = reply_fields(
            &DbSettings {
                level: 1,
                filter: Some(f),
            },
            5,
            0.5,
        );
        assert_eq!(
            r.get_document("filter").unwrap(),
            &doc! {"millis": {"$gt": 1}}
        );
    }
}
