//! Geo indexes in the planner. Their geo component is a cell id
//! (`bisondb_query::geo::Grid`): a `$geoWithin` / `$geoIntersects` bounds it
//! by the cells covering its region's box (never exact: the fetch checks the
//! predicate), see [`field_bounds`].
//!
//! `$near` / `$nearSphere`: mongod needs a geospatial index on the queried
//! field to order by distance (291 NoQueryExecutionPlans without one). With
//! a `$maxDistance` and the geo field first in the index, the plan scans the
//! cells covering the distance's box; otherwise the whole collection; then
//! the matches (the filter, distance bounds included, checked on each) are
//! ordered by distance. explain shows GEO_NEAR_2D / GEO_NEAR_2DSPHERE naming
//! the index, over the FETCH + IXSCAN or the COLLSCAN that ran.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_query::geo::{BBox, Grid, Near, Stored};
use bisondb_query::matcher::bounds::{geo_bbox, FieldBounds, Interval};
use bisondb_query::matcher::Matcher;
use bisondb_query::path::lookup_raw;
use bisondb_storage::{GeoKind, IndexInfo};
use bson::{Bson, Document, RawDocumentBuf};

use super::explain::{Ran, Stage};
use super::Stats;
use crate::cursor::DocSource;

/// A geo-near query's plan: its index, field and point.
#[derive(Debug, Clone)]
pub struct GeoNear {
    pub index: Box<IndexInfo>,
    pub kind: GeoKind,
    pub path: String,
    pub near: Near,
}

/// mongod's error when no index can answer a geo-near query.
pub fn no_index() -> MongoError {
    MongoError::new(
        ErrorCode::NoQueryExecutionPlans,
        "error processing query: planner returned error :: caused by :: unable to find index for $geoNear query",
    )
}

/// The index a geo-near query on `path` may use: a 2dsphere index on the
/// field for a GeoJSON point; for a legacy pair, a 2d index (planar
/// distances; the only kind plain `$near` may use) else, for a spherical
/// query, a 2dsphere one.
pub fn find_index<'a>(
    indexes: &'a [IndexInfo],
    path: &str,
    near: &Near,
) -> Option<(&'a IndexInfo, GeoKind)> {
    let on = |kind: GeoKind| {
        indexes.iter().find_map(|ix| {
            let (i, k) = ix.spec.geo_field()?;
            let f = ix.fields.get(i)?;
            (k == kind && f.path == path && !ix.spec.hidden).then_some((ix, k))
        })
    };
    if near.geojson {
        on(GeoKind::Sphere)
    } else if near.spherical {
        on(GeoKind::Flat).or_else(|| on(GeoKind::Sphere))
    } else {
        on(GeoKind::Flat)
    }
}

/// The grid of a geo index's cells.
fn grid(index: &IndexInfo) -> Grid {
    match index.spec.geo_field() {
        Some((_, GeoKind::Flat)) => {
            let (min, max) = index.spec.geo_bounds();
            Grid::flat(min, max)
        }
        _ => Grid::sphere(),
    }
}

/// Bounds on the cells of a geo index for a value meeting `b`.
fn cell_bounds(index: &IndexInfo, b: &BBox) -> FieldBounds {
    FieldBounds {
        intervals: grid(index)
            .covering(b)
            .into_iter()
            .map(|(lo, hi)| Interval {
                lo: Bson::Int64(lo),
                lo_inclusive: true,
                hi: Bson::Int64(hi),
                hi_inclusive: true,
            })
            .collect(),
        exact: false,
    }
}

/// The bounds the filter puts on the geo field (`path`) of `index`: the
/// cells covering the box of its `$geoWithin` / `$geoIntersects`, else none.
pub fn field_bounds(index: &IndexInfo, m: &Matcher, path: &str) -> FieldBounds {
    match geo_bbox(m, path) {
        Some(b) => cell_bounds(index, &b),
        None => FieldBounds::full(),
    }
}

/// Bounds for a `$near` with a `$maxDistance` on `index` whose geo field is
/// first (the others unbounded); `None` when the scan must read everything.
pub fn near_bounds(g: &GeoNear) -> Option<Vec<FieldBounds>> {
    let (0, _) = g.index.spec.geo_field()? else {
        return None;
    };
    let b = g.near.bbox()?;
    let mut bounds = vec![cell_bounds(&g.index, &b)];
    bounds.extend(g.index.fields.iter().skip(1).map(|_| FieldBounds::full()));
    Some(bounds)
}

/// The geo-near part of a query's plan (`None`: the filter has no `$near`).
pub fn choose(indexes: &[IndexInfo], m: &Matcher) -> MongoResult<Option<GeoNear>> {
    let Some((path, near)) = m.near() else {
        return Ok(None);
    };
    let (ix, kind) = find_index(indexes, path, near).ok_or_else(no_index)?;
    Ok(Some(GeoNear {
        index: Box::new(ix.clone()),
        kind,
        path: path.to_string(),
        near: near.clone(),
    }))
}

/// The geometries `doc` holds at `path`.
pub fn values_at(doc: &RawDocumentBuf, path: &str) -> Vec<Bson> {
    let mut reached = Vec::new();
    lookup_raw(doc, path, &mut reached);
    reached
        .into_iter()
        .filter_map(|v| Bson::try_from(v).ok())
        .collect()
}

/// Nearest geometry of a document and its distance.
pub fn nearest(doc: &RawDocumentBuf, path: &str, near: &Near) -> Option<(f64, Stored)> {
    near.nearest(&values_at(doc, path))
}

/// `src` (documents that match the whole filter) ordered by distance, the
/// nearest first; ties keep scan order.
pub fn sorted(src: DocSource, g: &GeoNear) -> MongoResult<DocSource> {
    let mut all: Vec<(f64, RawDocumentBuf)> = Vec::new();
    for d in src {
        let d = d?;
        // The filter checked the distance bounds, so there is a distance.
        let dist = nearest(&d, &g.path, &g.near).map_or(f64::INFINITY, |(x, _)| x);
        all.push((dist, d));
    }
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(Box::new(all.into_iter().map(|(_, d)| Ok(d))))
}

/// explain's GEO_NEAR_2D / GEO_NEAR_2DSPHERE: the scan's matches ordered by
/// distance, naming the index that chose them.
pub(super) struct GeoNearStage<'a>(pub &'a GeoNear);

impl Stage for GeoNearStage<'_> {
    fn name(&self) -> &'static str {
        match self.0.kind {
            GeoKind::Flat => "GEO_NEAR_2D",
            GeoKind::Sphere => "GEO_NEAR_2DSPHERE",
        }
    }
    fn describe(&self, out: &mut Document) {
        out.insert("keyPattern", self.0.index.spec.key.clone());
        out.insert("indexName", self.0.index.spec.name.clone());
        out.insert("indexVersion", 2);
    }
    fn ran(&self, s: &Stats, input: Option<&Ran>) -> Ran {
        Ran::as_input(input, s)
    }
}

/// Resolves the geo field of a leading `$geoNear` stage from the
/// collection's indexes, as mongod picks its index: the one on `key` when
/// given, else the only 2d index (for a legacy point), else the only
/// 2dsphere index. Returns the scan that feeds the stage when the index can
/// narrow it (a `maxDistance`, the geo field first): the cells of that
/// distance; `None`: the whole collection.
pub fn resolve_stage(
    indexes: &[IndexInfo],
    stage: &mut bisondb_query::agg::GeoNearStage,
) -> MongoResult<Option<super::Plan>> {
    let geo: Vec<(&IndexInfo, GeoKind, String)> = indexes
        .iter()
        .filter(|ix| !ix.spec.hidden)
        .filter_map(|ix| {
            let (i, k) = ix.spec.geo_field()?;
            Some((ix, k, ix.fields.get(i)?.path.clone()))
        })
        .collect();
    let not_found = |msg: String| MongoError::new(ErrorCode::IndexNotFound, msg);
    let (path, kind, ix) = match stage.key() {
        Some(key) => {
            let (ix, kind) = find_index(indexes, key, stage.near())
                .or_else(|| {
                    // A legacy point on a 2dsphere index is measured on the sphere.
                    geo.iter()
                        .find(|(_, k, p)| p == key && *k == GeoKind::Sphere)
                        .map(|(ix, k, _)| (*ix, *k))
                })
                .ok_or_else(|| {
                    not_found(format!(
                        "There is no index to use for $geoNear with key '{key}'"
                    ))
                })?;
            (key.to_string(), kind, ix)
        }
        None => {
            if geo.is_empty() {
                return Err(not_found(
                    "$geoNear requires a 2d or 2dsphere index, but none were found".into(),
                ));
            }
            let flat: Vec<_> = geo.iter().filter(|g| g.1 == GeoKind::Flat).collect();
            let sphere: Vec<_> = geo.iter().filter(|g| g.1 == GeoKind::Sphere).collect();
            if flat.len() > 1 {
                return Err(not_found(
                    "more than one 2d index, not sure which to run geoNear on".into(),
                ));
            }
            match (flat.first(), sphere.as_slice()) {
                (Some(f), _) if !stage.near().geojson => (f.2.clone(), GeoKind::Flat, f.0),
                (_, [s]) => (s.2.clone(), GeoKind::Sphere, s.0),
                (_, []) => return Err(no_index()),
                _ => {
                    return Err(not_found(
                        "more than one 2dsphere index, not sure which to run geoNear on".into(),
                    ))
                }
            }
        }
    };
    stage.set_key(path.clone(), kind == GeoKind::Sphere);
    let g = GeoNear {
        index: Box::new(ix.clone()),
        kind,
        path,
        near: stage.near().clone(),
    };
    Ok(near_bounds(&g).map(|bounds| super::Plan {
        access: super::Access::Ixscan {
            index: g.index,
            bounds,
            reverse: false,
        },
        provides_sort: false,
        count_exact: false,
        geo_near: None,
    }))
}
