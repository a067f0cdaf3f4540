//! `$geoNear`: the documents nearest a point first, each with its distance
//! (and, with `includeLocs`, the location that was nearest). Only valid as
//! the first stage. The server resolves the geo field from the collection's
//! 2d / 2dsphere indexes (`key`, or the only geo index) before the pipeline
//! runs ([`GeoNearStage::set_key`]); the stage then reads the whole
//! collection, keeps what `query` and the distance bounds allow, and sorts
//! by distance (blocking).

use crate::agg::{spec_doc, DocStream, RunCtx, Stage};
use crate::compare::number_as_f64;
use crate::geo::{parse_stored, Near};
use crate::matcher::Matcher;
use crate::path::{lookup_raw, set_path_bson};
use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, Document, RawDocumentBuf};

#[derive(Debug)]
pub struct GeoNearStage {
    near: Near,
    distance_field: String,
    include_locs: Option<String>,
    query: Option<Matcher>,
    multiplier: f64,
    key: Option<String>,
}

fn bad(msg: impl Into<String>) -> MongoError {
    MongoError::bad_value(msg)
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let spec = spec_doc(arg, 10065, |_| {
        "$geoNear stage requires an object as argument".to_string()
    })?;
    let mut near = None;
    let mut distance_field = None;
    let mut include_locs = None;
    let mut query = None;
    let mut multiplier = 1.0;
    let mut key = None;
    let (mut spherical, mut min, mut max) = (false, None, None);
    let non_negative = |name: &str, v: &Bson| -> MongoResult<f64> {
        match number_as_f64(v) {
            Some(x) if x >= 0.0 => Ok(x),
            Some(_) => Err(bad(format!("{name} must be nonnegative"))),
            None => Err(MongoError::type_mismatch(format!(
                "{name} must be a number"
            ))),
        }
    };
    for (k, v) in spec {
        match k.as_str() {
            "near" => near = Some(v.clone()),
            "distanceField" => match v {
                Bson::String(s) if !s.is_empty() => distance_field = Some(s.clone()),
                _ => {
                    return Err(MongoError::type_mismatch(
                        "$geoNear requires that 'distanceField' be a string",
                    ))
                }
            },
            "includeLocs" => match v {
                Bson::String(s) if !s.is_empty() => include_locs = Some(s.clone()),
                _ => {
                    return Err(MongoError::type_mismatch(
                        "$geoNear requires that 'includeLocs' be a string",
                    ))
                }
            },
            "spherical" => spherical = crate::value::truthy(Some(v)),
            "maxDistance" => max = Some(non_negative("maxDistance", v)?),
            "minDistance" => min = Some(non_negative("minDistance", v)?),
            "distanceMultiplier" => multiplier = non_negative("distanceMultiplier", v)?,
            "query" => {
                let Bson::Document(d) = v else {
                    return Err(MongoError::type_mismatch("query must be an object"));
                };
                let m = Matcher::parse_doc(d)?;
                if m.near().is_some() {
                    return Err(bad(
                        "$geoNear, $near, and $nearSphere are not allowed in this context",
                    ));
                }
                query = Some(m);
            }
            "key" => match v {
                Bson::String(s) if !s.is_empty() => key = Some(s.clone()),
                Bson::String(_) => {
                    return Err(bad("$geoNear parameter 'key' cannot be the empty string"))
                }
                _ => {
                    return Err(MongoError::type_mismatch(
                        "$geoNear parameter 'key' must be of type string",
                    ))
                }
            },
            other => return Err(bad(format!("Unknown argument to $geoNear: {other}"))),
        }
    }
    let Some(near) = near else {
        return Err(bad("$geoNear requires a 'near' option as an Array"));
    };
    let distance_field = distance_field
        .ok_or_else(|| bad("$geoNear requires a 'distanceField' option as a String"))?;
    let (point, geojson) = match &near {
        Bson::Document(d) if d.contains_key("type") => match parse_stored(&near) {
            Some(Ok(crate::geo::Stored::GeoJson(crate::geo::Geometry::Point(p)))) => (p, true),
            _ => return Err(bad(format!("invalid argument in geo near query: {d}"))),
        },
        other => match crate::geo::legacy_point(other) {
            Some(Ok(p)) if p.x.is_finite() && p.y.is_finite() => (p, false),
            _ => {
                return Err(bad(
                    "$geoNear requires near argument to be a GeoJSON object or a legacy coordinate pair",
                ))
            }
        },
    };
    Ok(vec![Box::new(GeoNearStage {
        near: Near {
            point,
            geojson,
            spherical: spherical || geojson,
            min,
            max,
        },
        distance_field,
        include_locs,
        query,
        multiplier,
        key,
    })])
}

impl GeoNearStage {
    /// The field given as `key`, if any.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The query point and distance bounds.
    pub fn near(&self) -> &Near {
        &self.near
    }

    /// The geo field to read, as the server resolved it from the index it
    /// chose; `sphere`: a 2dsphere index (distances on the sphere).
    pub fn set_key(&mut self, key: String, sphere: bool) {
        self.key = Some(key);
        if sphere {
            self.near.spherical = true;
        }
    }

    /// The nearest location of `doc` and its distance.
    fn nearest(&self, doc: &Document, key: &str) -> Option<(f64, Bson)> {
        let raw = RawDocumentBuf::try_from(doc).ok()?;
        let mut reached = Vec::new();
        lookup_raw(&raw, key, &mut reached);
        let mut best: Option<(f64, Bson)> = None;
        for v in reached.into_iter().filter_map(|v| Bson::try_from(v).ok()) {
            let items: Vec<Bson> = match v {
                Bson::Array(a) if crate::geo::holds_several(&a) => a,
                other => vec![other],
            };
            for item in items {
                let Some(Ok(s)) = parse_stored(&item) else {
                    continue;
                };
                if let Some(d) = self.near.distance(&s) {
                    if best.as_ref().is_none_or(|(b, _)| d < *b) {
                        best = Some((d, item));
                    }
                }
            }
        }
        best
    }
}

impl Stage for GeoNearStage {
    fn run(self: Box<Self>, input: DocStream, cx: &RunCtx) -> DocStream {
        let query = self
            .query
            .clone()
            .map(|m| m.with_collation(cx.collation.clone()));
        crate::agg::blocking(input, move |input| {
            let Some(key) = self.key.clone() else {
                return Err(MongoError::internal("$geoNear ran without its key"));
            };
            let mut out: Vec<(f64, Document)> = Vec::new();
            for d in input {
                let mut d = d?;
                if query.as_ref().is_some_and(|q| !q.matches_doc(&d)) {
                    continue;
                }
                let Some((dist, loc)) = self.nearest(&d, &key) else {
                    continue;
                };
                if !self.near.in_range(dist) {
                    continue;
                }
                set_path_bson(
                    &mut d,
                    &self.distance_field,
                    Bson::Double(dist * self.multiplier),
                )?;
                if let Some(f) = &self.include_locs {
                    set_path_bson(&mut d, f, loc)?;
                }
                out.push((dist, d));
            }
            out.sort_by(|a, b| a.0.total_cmp(&b.0));
            Ok(out.into_iter().map(|(_, d)| d).collect())
        })
    }

    fn geo_near_mut(&mut self) -> Option<&mut GeoNearStage> {
        Some(self)
    }
}
