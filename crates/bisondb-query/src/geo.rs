//! Geospatial values and predicates: GeoJSON and legacy coordinate pairs as
//! mongod reads them, the query shapes of `$geoWithin` / `$geoIntersects` /
//! `$near`, and the geometry that decides them.
//!
//! Two geometries, as in mongod: GeoJSON shapes (`$geometry`, `$centerSphere`,
//! 2dsphere indexes) live on a sphere of radius [`EARTH_RADIUS_M`] whose edges
//! are geodesics (great-circle arcs); legacy shapes (`$box`, `$polygon`,
//! `$center`, 2d indexes) live on a flat plane. Spherical predicates work on
//! unit vectors with the usual triple-product tests, so they need no
//! projection and hold across the antimeridian. A polygon is the smaller of
//! the two regions its shell bounds (mongod's default; "big polygon" CRSs
//! are refused), its holes removed.

use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, Document};

use crate::compare::number_as_f64;

/// Radius mongod's spherical distances use (meters).
pub const EARTH_RADIUS_M: f64 = 6_378_100.0;

/// Distances below this many radians count as zero (points on an edge or a
/// vertex): about 0.6 mm on the earth.
const EPS: f64 = 1e-10;

/// A position: `x` is the longitude (or the first legacy coordinate), `y` the
/// latitude.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pt {
    pub x: f64,
    pub y: f64,
}

/// A GeoJSON geometry (coordinates checked; polygon rings closed).
#[derive(Debug, Clone, PartialEq)]
pub enum Geometry {
    Point(Pt),
    LineString(Vec<Pt>),
    Polygon(Vec<Vec<Pt>>),
    MultiPoint(Vec<Pt>),
    MultiLineString(Vec<Vec<Pt>>),
    MultiPolygon(Vec<Vec<Vec<Pt>>>),
    Collection(Vec<Geometry>),
}

/// A geospatial value stored in a document.
#[derive(Debug, Clone, PartialEq)]
pub enum Stored {
    /// A legacy coordinate pair (`[x, y]` or `{lng: x, lat: y}`).
    Legacy(Pt),
    GeoJson(Geometry),
}

impl Stored {
    /// The point this value is, if it is one.
    pub fn point(&self) -> Option<Pt> {
        match self {
            Stored::Legacy(p) | Stored::GeoJson(Geometry::Point(p)) => Some(*p),
            _ => None,
        }
    }

    /// The value as spherical geometry (a legacy pair is a point).
    fn geometry(&self) -> Geometry {
        match self {
            Stored::Legacy(p) => Geometry::Point(*p),
            Stored::GeoJson(g) => g.clone(),
        }
    }

    /// The value as BSON, for `includeLocs`.
    pub fn is_legacy(&self) -> bool {
        matches!(self, Stored::Legacy(_))
    }
}

/// A legacy coordinate pair: an array whose first two elements are numbers,
/// or a document (not GeoJSON) whose first two values are. `None` when `v`
/// has neither form; `Some(Err)` when it has the form but not numbers.
pub fn legacy_point(v: &Bson) -> Option<Result<Pt, String>> {
    let mut it: Box<dyn Iterator<Item = &Bson>> = match v {
        Bson::Array(a) => Box::new(a.iter()),
        Bson::Document(d) if !d.contains_key("type") => Box::new(d.values()),
        _ => return None,
    };
    let Some(x) = it.next() else {
        return Some(Err("Point must only contain numeric elements".into()));
    };
    let Some(y) = it.next() else {
        return Some(Err("geo field only has 1 element".into()));
    };
    Some(match (number_as_f64(x), number_as_f64(y)) {
        (Some(x), Some(y)) => Ok(Pt { x, y }),
        _ => Err("Point must only contain numeric elements".into()),
    })
}

fn position(v: &Bson) -> Result<Pt, String> {
    let Bson::Array(a) = v else {
        return Err(format!(
            "Point must be an array or object, instead got type {}",
            crate::value::type_name(v)
        ));
    };
    if a.len() < 2 {
        return Err("Point must only contain numeric elements".into());
    }
    let mut xs = a.iter().map(number_as_f64);
    match (xs.next().flatten(), xs.next().flatten()) {
        (Some(x), Some(y)) if xs.all(|z| z.is_some()) => {
            if !(-180.0..=180.0).contains(&x) || !(-90.0..=90.0).contains(&y) {
                return Err(format!(
                    "longitude/latitude is out of bounds, lng: {x} lat: {y}"
                ));
            }
            Ok(Pt { x, y })
        }
        _ => Err("Point must only contain numeric elements".into()),
    }
}

fn positions(v: &Bson, what: &str) -> Result<Vec<Pt>, String> {
    let Bson::Array(a) = v else {
        return Err(format!("{what} coordinates must be an array"));
    };
    a.iter().map(position).collect()
}

fn line(v: &Bson) -> Result<Vec<Pt>, String> {
    let mut pts = positions(v, "LineString")?;
    pts.dedup();
    if pts.len() < 2 {
        return Err("GeoJSON LineString must have at least 2 vertices".into());
    }
    Ok(pts)
}

fn polygon(v: &Bson) -> Result<Vec<Vec<Pt>>, String> {
    let Bson::Array(rings) = v else {
        return Err("Polygon coordinates must be an array".into());
    };
    if rings.is_empty() {
        return Err("Polygon has no loops.".into());
    }
    let mut out = Vec::with_capacity(rings.len());
    for ring in rings {
        let mut pts = positions(ring, "Polygon")?;
        if pts.len() < 4 {
            return Err("Loop must have at least 3 different vertices".into());
        }
        if pts.first() != pts.last() {
            return Err("Loop is not closed, first vertex does not equal last vertex".into());
        }
        pts.pop();
        pts.dedup();
        if pts.len() < 3 {
            return Err("Loop must have at least 3 different vertices".into());
        }
        if let Some((i, j)) = crossing_edges(&pts) {
            return Err(format!("Loop is not valid: Edge {i} crosses edge {j}"));
        }
        out.push(pts);
    }
    Ok(out)
}

/// Two non-adjacent edges of a ring that cross (an invalid loop).
fn crossing_edges(ring: &[Pt]) -> Option<(usize, usize)> {
    let n = ring.len();
    if n > 2000 {
        // Quadratic: trust very large rings rather than stall a write.
        return None;
    }
    let v: Vec<[f64; 3]> = ring.iter().map(|p| unit(*p)).collect();
    for i in 0..n {
        for j in i + 2..n {
            if i == 0 && j == n - 1 {
                continue;
            }
            let (a, b) = (v[i], v[(i + 1) % n]);
            let (c, d) = (v[j], v[(j + 1) % n]);
            if arcs_cross(a, b, c, d) {
                return Some((i, j));
            }
        }
    }
    None
}

/// Parses a GeoJSON object (`{type, coordinates}` or a GeometryCollection).
pub fn parse_geojson(d: &Document) -> Result<Geometry, String> {
    let Some(Bson::String(t)) = d.get("type") else {
        return Err(format!("unknown GeoJSON type: {d}"));
    };
    if d.contains_key("crs") {
        check_crs(d)?;
    }
    let coords = || {
        d.get("coordinates").ok_or_else(|| {
            "GeoJSON coordinates must be an array, instead got type missing".to_string()
        })
    };
    Ok(match t.as_str() {
        "Point" => Geometry::Point(position(coords()?)?),
        "LineString" => Geometry::LineString(line(coords()?)?),
        "Polygon" => Geometry::Polygon(polygon(coords()?)?),
        "MultiPoint" => {
            let pts = positions(coords()?, "MultiPoint")?;
            if pts.is_empty() {
                return Err("MultiPoint coordinates must have at least 1 element".into());
            }
            Geometry::MultiPoint(pts)
        }
        "MultiLineString" => {
            let Bson::Array(ls) = coords()? else {
                return Err("MultiLineString coordinates must be an array".into());
            };
            if ls.is_empty() {
                return Err("MultiLineString coordinates must have at least 1 element".into());
            }
            Geometry::MultiLineString(ls.iter().map(line).collect::<Result<_, _>>()?)
        }
        "MultiPolygon" => {
            let Bson::Array(ps) = coords()? else {
                return Err("MultiPolygon coordinates must be an array".into());
            };
            if ps.is_empty() {
                return Err("MultiPolygon coordinates must have at least 1 element".into());
            }
            Geometry::MultiPolygon(ps.iter().map(polygon).collect::<Result<_, _>>()?)
        }
        "GeometryCollection" => {
            let Some(Bson::Array(gs)) = d.get("geometries") else {
                return Err("GeometryCollection geometries must be an array".into());
            };
            if gs.is_empty() {
                return Err("GeometryCollection geometries must have at least 1 element".into());
            }
            let mut out = Vec::with_capacity(gs.len());
            for g in gs {
                let Bson::Document(g) = g else {
                    return Err("Element of GeometryCollection is not an object".into());
                };
                out.push(parse_geojson(g)?);
            }
            Geometry::Collection(out)
        }
        other => return Err(format!("unknown GeoJSON type: {other}")),
    })
}

/// Only the default CRS (EPSG:4326) is supported; mongod's "big polygon"
/// CRS (strict winding) is not.
fn check_crs(d: &Document) -> Result<(), String> {
    let name = d
        .get_document("crs")
        .ok()
        .and_then(|c| c.get_document("properties").ok())
        .and_then(|p| p.get_str("name").ok())
        .unwrap_or("");
    match name {
        "EPSG:4326" | "urn:ogc:def:crs:OGC:1.3:CRS84" | "urn:ogc:def:crs:EPSG::4326" => Ok(()),
        "urn:x-mongodb:crs:strictwinding:EPSG:4326" => {
            Err("big polygons (strict-winding CRS) are not supported by BisonDB yet".into())
        }
        _ => Err("Unknown CRS name".into()),
    }
}

/// A stored value as geometry: a legacy pair, or a GeoJSON object.
/// `None`: neither form; `Some(Err)`: the form, but invalid.
pub fn parse_stored(v: &Bson) -> Option<Result<Stored, String>> {
    match v {
        Bson::Document(d) if d.contains_key("type") => Some(parse_geojson(d).map(Stored::GeoJson)),
        other => legacy_point(other).map(|r| r.map(Stored::Legacy)),
    }
}

/// Whether an array holds several locations (its first element is one)
/// rather than being a coordinate pair itself.
pub fn holds_several(a: &[Bson]) -> bool {
    a.first()
        .is_some_and(|x| matches!(x, Bson::Array(_) | Bson::Document(_)))
}

/// Every geometry a reached value holds: itself, or, for an array that is
/// not a coordinate pair, each element that is one (invalid ones skipped).
pub fn stored_values(v: &Bson) -> Vec<Stored> {
    if let Bson::Array(a) = v {
        if holds_several(a) {
            return a
                .iter()
                .filter_map(|e| parse_stored(e).and_then(Result::ok))
                .collect();
        }
    }
    parse_stored(v).and_then(Result::ok).into_iter().collect()
}

// ---------------------------------------------------------------------------
// Spherical geometry
// ---------------------------------------------------------------------------

type V3 = [f64; 3];

fn unit(p: Pt) -> V3 {
    let (lng, lat) = (p.x.to_radians(), p.y.to_radians());
    [lat.cos() * lng.cos(), lat.cos() * lng.sin(), lat.sin()]
}

fn dot(a: V3, b: V3) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

fn cross(a: V3, b: V3) -> V3 {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

fn norm(a: V3) -> f64 {
    dot(a, a).sqrt()
}

fn normalize(a: V3) -> Option<V3> {
    let n = norm(a);
    (n > 1e-300).then(|| [a[0] / n, a[1] / n, a[2] / n])
}

/// The angle between two unit vectors (radians), stable for small angles.
fn angle(a: V3, b: V3) -> f64 {
    norm(cross(a, b)).atan2(dot(a, b))
}

/// Great-circle distance between two positions, in radians.
pub fn sphere_distance(a: Pt, b: Pt) -> f64 {
    angle(unit(a), unit(b))
}

/// Whether arcs `ab` and `cd` cross at a point interior to both.
fn arcs_cross(a: V3, b: V3, c: V3, d: V3) -> bool {
    let ab = cross(a, b);
    let acb = -dot(ab, c);
    let bda = dot(ab, d);
    if acb * bda <= 0.0 {
        return false;
    }
    let cd = cross(c, d);
    let cbd = -dot(cd, b);
    let dac = dot(cd, a);
    acb * cbd > 0.0 && acb * dac > 0.0
}

/// Distance (radians) from `p` to the arc `ab`.
fn arc_distance(p: V3, a: V3, b: V3) -> f64 {
    let ends = angle(p, a).min(angle(p, b));
    let Some(n) = normalize(cross(a, b)) else {
        return ends;
    };
    // The foot of `p` on the great circle lies on the arc when it is on the
    // inner side of both ends.
    let foot = [
        p[0] - n[0] * dot(p, n),
        p[1] - n[1] * dot(p, n),
        p[2] - n[2] * dot(p, n),
    ];
    let Some(foot) = normalize(foot) else {
        return ends;
    };
    if dot(cross(a, foot), n) >= 0.0 && dot(cross(foot, b), n) >= 0.0 {
        dot(p, n).abs().clamp(0.0, 1.0).asin().min(ends)
    } else {
        ends
    }
}

/// A polygon on the sphere, ready for containment tests.
struct SpherePoly {
    rings: Vec<Vec<V3>>,
    /// A point known to lie outside (the antipode of the vertex centroid: a
    /// polygon smaller than a hemisphere never holds it).
    outside: V3,
}

impl SpherePoly {
    fn new(rings: &[Vec<Pt>]) -> SpherePoly {
        let rings: Vec<Vec<V3>> = rings
            .iter()
            .map(|r| r.iter().map(|p| unit(*p)).collect())
            .collect();
        let mut sum = [0.0; 3];
        for v in rings.first().into_iter().flatten() {
            sum = [sum[0] + v[0], sum[1] + v[1], sum[2] + v[2]];
        }
        let outside = normalize([-sum[0], -sum[1], -sum[2]]).unwrap_or([0.0, 0.0, -1.0]);
        SpherePoly { rings, outside }
    }

    fn edges(&self) -> impl Iterator<Item = (V3, V3)> + '_ {
        self.rings.iter().flat_map(|r| {
            r.iter()
                .zip(r.iter().cycle().skip(1))
                .map(|(a, b)| (*a, *b))
        })
    }

    fn on_boundary(&self, p: V3) -> bool {
        self.edges().any(|(a, b)| arc_distance(p, a, b) < EPS)
    }

    /// Inside or on the boundary.
    fn contains(&self, p: V3) -> bool {
        if self.on_boundary(p) {
            return true;
        }
        self.contains_strictly(p)
    }

    fn contains_strictly(&self, p: V3) -> bool {
        // Crossing parity along the arc from `p` to the outside point; an arc
        // through a vertex is nudged to a slightly different outside point.
        let mut out = self.outside;
        for attempt in 0..4 {
            let through_vertex = self
                .rings
                .iter()
                .flatten()
                .any(|v| arc_distance(*v, p, out) < 1e-12);
            if !through_vertex || attempt == 3 {
                break;
            }
            let nudge = [1e-6 * (attempt as f64 + 1.0), -3e-7, 7e-7];
            out =
                normalize([out[0] + nudge[0], out[1] + nudge[1], out[2] + nudge[2]]).unwrap_or(out);
        }
        // Near the antipode of `out` the arc is ill-defined: go through a
        // point a quarter turn away from `p` instead.
        let path: Vec<(V3, V3)> = if dot(p, out) < -0.5 {
            let axis = if p[0].abs() < 0.5 {
                [1.0, 0.0, 0.0]
            } else {
                [0.0, 1.0, 0.0]
            };
            match normalize(cross(p, axis)) {
                Some(m) => vec![(p, m), (m, out)],
                None => vec![(p, out)],
            }
        } else {
            vec![(p, out)]
        };
        let n: usize = path
            .iter()
            .map(|(s, t)| {
                self.edges()
                    .filter(|(a, b)| arcs_cross(*s, *t, *a, *b))
                    .count()
            })
            .sum();
        n % 2 == 1
    }

    fn distance(&self, p: V3) -> f64 {
        if self.contains(p) {
            return 0.0;
        }
        self.edges()
            .map(|(a, b)| arc_distance(p, a, b))
            .fold(f64::INFINITY, f64::min)
    }
}

/// The parts of a geometry: points, polylines, polygons.
#[derive(Default)]
struct Parts {
    points: Vec<V3>,
    lines: Vec<Vec<V3>>,
    polys: Vec<SpherePoly>,
}

impl Parts {
    fn of(g: &Geometry) -> Parts {
        let mut p = Parts::default();
        p.add(g);
        p
    }

    fn add(&mut self, g: &Geometry) {
        let vs = |pts: &[Pt]| pts.iter().map(|p| unit(*p)).collect::<Vec<_>>();
        match g {
            Geometry::Point(x) => self.points.push(unit(*x)),
            Geometry::MultiPoint(xs) => self.points.extend(vs(xs)),
            Geometry::LineString(l) => self.lines.push(vs(l)),
            Geometry::MultiLineString(ls) => self.lines.extend(ls.iter().map(|l| vs(l))),
            Geometry::Polygon(r) => self.polys.push(SpherePoly::new(r)),
            Geometry::MultiPolygon(ps) => self.polys.extend(ps.iter().map(|r| SpherePoly::new(r))),
            Geometry::Collection(gs) => gs.iter().for_each(|g| self.add(g)),
        }
    }

    /// Every vertex.
    fn vertices(&self) -> impl Iterator<Item = V3> + '_ {
        self.points
            .iter()
            .copied()
            .chain(self.lines.iter().flatten().copied())
            .chain(
                self.polys
                    .iter()
                    .flat_map(|p| p.rings.iter().flatten().copied()),
            )
    }

    /// Every edge (polylines and polygon rings).
    fn edges(&self) -> Vec<(V3, V3)> {
        let mut out: Vec<(V3, V3)> = self
            .lines
            .iter()
            .flat_map(|l| l.windows(2).filter_map(|w| Some((*w.first()?, *w.get(1)?))))
            .collect();
        for p in &self.polys {
            out.extend(p.edges());
        }
        out
    }
}

fn edges_cross(a: &[(V3, V3)], b: &[(V3, V3)]) -> bool {
    a.iter()
        .any(|(p, q)| b.iter().any(|(r, s)| arcs_cross(*p, *q, *r, *s)))
}

/// Whether `g` lies inside the (multi)polygon `region` (boundary included).
fn sphere_within(region: &Parts, g: &Geometry) -> bool {
    let parts = Parts::of(g);
    let in_region = |v: V3| region.polys.iter().any(|p| p.contains(v));
    if !parts.vertices().all(in_region) {
        return false;
    }
    // An edge leaving the region crosses its boundary; a region's hole
    // vertex strictly inside one of `g`'s polygons is a hole in `g`.
    let edges = parts.edges();
    !edges_cross(&edges, &region.edges())
        && !region
            .polys
            .iter()
            .flat_map(|p| p.rings.iter().skip(1).flatten())
            .any(|v| parts.polys.iter().any(|p| p.contains_strictly(*v)))
}

/// Whether two geometries share a point.
fn sphere_intersects(a: &Parts, b: &Parts) -> bool {
    let near_point = |v: V3, parts: &Parts| {
        parts.points.iter().any(|p| angle(*p, v) < EPS)
            || parts.lines.iter().any(|l| {
                l.windows(2)
                    .any(|w| matches!(w, [x, y] if arc_distance(v, *x, *y) < EPS))
            })
            || parts.polys.iter().any(|p| p.contains(v))
    };
    a.vertices().any(|v| near_point(v, b))
        || b.vertices().any(|v| near_point(v, a))
        || edges_cross(&a.edges(), &b.edges())
}

/// Distance (radians) from `p` to the nearest point of `g`.
fn sphere_distance_to(p: Pt, g: &Geometry) -> f64 {
    let v = unit(p);
    let parts = Parts::of(g);
    let mut d = f64::INFINITY;
    for q in &parts.points {
        d = d.min(angle(v, *q));
    }
    for l in &parts.lines {
        for w in l.windows(2) {
            if let [a, b] = w {
                d = d.min(arc_distance(v, *a, *b));
            }
        }
    }
    for poly in &parts.polys {
        d = d.min(poly.distance(v));
    }
    d
}

// ---------------------------------------------------------------------------
// Planar geometry (2d)
// ---------------------------------------------------------------------------

/// Whether `p` is inside the planar polygon `ring` or on its boundary.
fn planar_in_polygon(p: Pt, ring: &[Pt]) -> bool {
    let n = ring.len();
    let mut inside = false;
    for i in 0..n {
        let (Some(a), Some(b)) = (ring.get(i), ring.get((i + 1) % n)) else {
            continue;
        };
        // On the edge?
        let cr = (b.x - a.x) * (p.y - a.y) - (b.y - a.y) * (p.x - a.x);
        if cr.abs() <= 1e-12 * (1.0 + a.x.abs() + a.y.abs() + b.x.abs() + b.y.abs())
            && p.x >= a.x.min(b.x)
            && p.x <= a.x.max(b.x)
            && p.y >= a.y.min(b.y)
            && p.y <= a.y.max(b.y)
        {
            return true;
        }
        if (a.y > p.y) != (b.y > p.y) {
            let x = a.x + (p.y - a.y) * (b.x - a.x) / (b.y - a.y);
            if p.x < x {
                inside = !inside;
            }
        }
    }
    inside
}

fn planar_distance(a: Pt, b: Pt) -> f64 {
    (a.x - b.x).hypot(a.y - b.y)
}

// ---------------------------------------------------------------------------
// Query shapes
// ---------------------------------------------------------------------------

/// The region of a `$geoWithin` / `$within`.
#[derive(Debug, Clone)]
pub enum Region {
    /// `$geometry`: a Polygon or MultiPolygon on the sphere.
    Sphere(Geometry),
    /// `$box`: bottom-left and top-right corners (planar, inclusive).
    Box(Pt, Pt),
    /// `$polygon` (planar, boundary included).
    Polygon(Vec<Pt>),
    /// `$center`: center and radius (planar).
    Center(Pt, f64),
    /// `$centerSphere`: center and radius in radians (spherical).
    CenterSphere(Pt, f64),
}

fn bad(msg: impl Into<String>) -> MongoError {
    MongoError::bad_value(msg)
}

fn query_point(v: &Bson, what: &str) -> MongoResult<Pt> {
    match legacy_point(v) {
        Some(Ok(p)) if p.x.is_finite() && p.y.is_finite() => Ok(p),
        _ => Err(bad(format!(
            "Point must only contain numeric elements: {what}"
        ))),
    }
}

fn query_radius(v: Option<&Bson>, op: &str) -> MongoResult<f64> {
    match v.and_then(number_as_f64) {
        Some(r) if r >= 0.0 && r.is_finite() => Ok(r),
        _ => Err(bad(format!("radius must be a non-negative number in {op}"))),
    }
}

/// A `$geometry` operand as GeoJSON (BadValue when it is not valid).
pub fn query_geometry(v: &Bson) -> MongoResult<Geometry> {
    match v {
        Bson::Document(d) => parse_geojson(d).map_err(|e| bad(format!("{e}, {d}"))),
        other => Err(bad(format!("geometry must be an object, got {other}"))),
    }
}

impl Region {
    /// Parses the operand of `$geoWithin` (`{$geometry | $box | $polygon |
    /// $center | $centerSphere: ...}`).
    pub fn parse(op: &str, v: &Bson) -> MongoResult<Region> {
        let Bson::Document(d) = v else {
            return Err(bad(format!("{op} argument must be an object")));
        };
        let mut it = d.iter();
        let (Some((k, arg)), None) = (it.next(), it.next()) else {
            return Err(bad(format!("{op} must have exactly one shape: {d}")));
        };
        let arr = |what: &str| -> MongoResult<&Vec<Bson>> {
            match arg {
                Bson::Array(a) => Ok(a),
                _ => Err(bad(format!("{what} must be an array: {d}"))),
            }
        };
        Ok(match k.as_str() {
            "$geometry" => {
                let g = query_geometry(arg)?;
                if !matches!(g, Geometry::Polygon(_) | Geometry::MultiPolygon(_)) {
                    return Err(bad(format!(
                        "$geoWithin not supported with provided geometry: {d}"
                    )));
                }
                Region::Sphere(g)
            }
            "$box" => {
                let a = arr("$box")?;
                let [lo, hi] = a.as_slice() else {
                    return Err(bad(format!("Box must have exactly two points: {d}")));
                };
                let (lo, hi) = (query_point(lo, "$box")?, query_point(hi, "$box")?);
                Region::Box(
                    Pt {
                        x: lo.x.min(hi.x),
                        y: lo.y.min(hi.y),
                    },
                    Pt {
                        x: lo.x.max(hi.x),
                        y: lo.y.max(hi.y),
                    },
                )
            }
            "$polygon" => {
                let a = arr("$polygon")?;
                let pts = a
                    .iter()
                    .map(|p| query_point(p, "$polygon"))
                    .collect::<MongoResult<Vec<_>>>()?;
                if pts.len() < 3 {
                    return Err(bad(format!("Polygon must have at least 3 points: {d}")));
                }
                Region::Polygon(pts)
            }
            "$center" | "$centerSphere" => {
                let a = arr(k)?;
                let [c, r] = a.as_slice() else {
                    return Err(bad(format!("{k} must have a center and a radius: {d}")));
                };
                let c = query_point(c, k)?;
                let r = query_radius(Some(r), k)?;
                if k == "$center" {
                    Region::Center(c, r)
                } else {
                    if !(-180.0..=180.0).contains(&c.x) || !(-90.0..=90.0).contains(&c.y) {
                        return Err(bad(format!("coordinates out of bounds in {k}: {d}")));
                    }
                    Region::CenterSphere(c, r)
                }
            }
            other => {
                return Err(bad(format!("unknown geo specifier: {other}: {arg}")));
            }
        })
    }

    /// Whether the stored value lies within the region.
    pub fn contains(&self, s: &Stored) -> bool {
        match self {
            Region::Sphere(g) => sphere_within(&Parts::of(g), &s.geometry()),
            Region::Box(lo, hi) => s
                .point()
                .is_some_and(|p| p.x >= lo.x && p.x <= hi.x && p.y >= lo.y && p.y <= hi.y),
            Region::Polygon(ring) => s.point().is_some_and(|p| planar_in_polygon(p, ring)),
            Region::Center(c, r) => s.point().is_some_and(|p| planar_distance(*c, p) <= *r),
            Region::CenterSphere(c, r) => {
                let g = s.geometry();
                let parts = Parts::of(&g);
                let cv = unit(*c);
                let mut all = parts.vertices().peekable();
                all.peek().is_some() && all.all(|v| angle(cv, v) <= *r + EPS)
            }
        }
    }
}

/// The operand of `$geoIntersects`: a GeoJSON geometry on the sphere.
#[derive(Debug, Clone)]
pub struct Intersects(pub Geometry);

impl Intersects {
    pub fn parse(v: &Bson) -> MongoResult<Intersects> {
        let Bson::Document(d) = v else {
            return Err(bad("$geoIntersects argument must be an object"));
        };
        match d.get("$geometry") {
            Some(g) if d.len() == 1 => Ok(Intersects(query_geometry(g)?)),
            _ => Err(bad(format!("$geoIntersects requires a $geometry: {d}"))),
        }
    }

    pub fn matches(&self, s: &Stored) -> bool {
        sphere_intersects(&Parts::of(&self.0), &Parts::of(&s.geometry()))
    }
}

/// A `$near` / `$nearSphere` / `$geoNear` point with its distance bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct Near {
    pub point: Pt,
    /// Given as a GeoJSON point: distances in meters on the sphere.
    pub geojson: bool,
    /// Spherical distances (GeoJSON, `$nearSphere`, `spherical: true`).
    pub spherical: bool,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl Near {
    /// Parses `$near` / `$nearSphere`'s operand with their sibling
    /// `$maxDistance` / `$minDistance` (`ops`, the whole operator document).
    pub fn parse_query(op: &str, ops: &Document) -> MongoResult<Near> {
        let v = ops.get(op).unwrap_or(&Bson::Null);
        let spherical = op == "$nearSphere";
        let (mut near, mut inner_max, mut inner_min) = (None, None, None);
        if let Bson::Document(d) = v {
            if let Some(g) = d.get("$geometry") {
                let Geometry::Point(p) = query_geometry(g)? else {
                    return Err(bad(format!(
                        "invalid point in geo near query $geometry argument: {d}"
                    )));
                };
                near = Some((p, true));
                inner_max = d.get("$maxDistance");
                inner_min = d.get("$minDistance");
            } else if d.contains_key("type") {
                // A bare GeoJSON point (`$near: {type: "Point", coordinates}`)
                // is mongod's legacy-syntax form with a GeoJSON point
                // (`GeoNearExpression::parseLegacyQuery` takes any query
                // point): distances are meters on the sphere, as with
                // `$geometry`, and `$maxDistance`/`$minDistance` are its
                // siblings (manual, `$near`: "If the specified point is
                // GeoJSON, specify the distance in meters").
                if let Ok(Geometry::Point(p)) = query_geometry(v) {
                    near = Some((p, true));
                }
            }
        }
        let (point, geojson) = match near {
            Some(n) => n,
            None => (
                query_point(v, op)
                    .map_err(|_| bad(format!("invalid argument in geo near query: {op}: {v}")))?,
                false,
            ),
        };
        let dist = |name: &str, inner: Option<&Bson>| -> MongoResult<Option<f64>> {
            match inner.or_else(|| ops.get(name)) {
                None => Ok(None),
                Some(x) => match number_as_f64(x) {
                    Some(d) if d >= 0.0 && !d.is_nan() => Ok(Some(d)),
                    Some(_) => Err(bad(format!("{name} must be non-negative"))),
                    None => Err(bad(format!("{name} must be a number"))),
                },
            }
        };
        let max = dist("$maxDistance", inner_max)?;
        let min = dist("$minDistance", inner_min)?;
        Ok(Near {
            point,
            geojson,
            spherical: spherical || geojson,
            min,
            max,
        })
    }

    /// Distance from the near point to the stored value, in the query's units
    /// (meters for a GeoJSON point, radians for a legacy point on the sphere,
    /// coordinate units on the plane). `None`: not comparable (a GeoJSON
    /// shape other than a point under planar distance).
    pub fn distance(&self, s: &Stored) -> Option<f64> {
        if !self.spherical {
            return s.point().map(|p| planar_distance(self.point, p));
        }
        let rad = sphere_distance_to(self.point, &s.geometry());
        Some(if self.geojson {
            rad * EARTH_RADIUS_M
        } else {
            rad
        })
    }

    /// Whether a distance is inside `[min, max]`.
    pub fn in_range(&self, d: f64) -> bool {
        self.min.is_none_or(|m| d >= m) && self.max.is_none_or(|m| d <= m)
    }

    /// The nearest of the values a path reached (each array element that is
    /// a geometry counts), with its distance.
    pub fn nearest(&self, vals: &[Bson]) -> Option<(f64, Stored)> {
        let mut best: Option<(f64, Stored)> = None;
        for v in vals {
            for s in stored_values(v) {
                if let Some(d) = self.distance(&s) {
                    if best.as_ref().is_none_or(|(b, _)| d < *b) {
                        best = Some((d, s));
                    }
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests;

// ---------------------------------------------------------------------------
// Bounding boxes and index cells
// ---------------------------------------------------------------------------

/// An axis-aligned box of coordinates (`x`: longitude, `y`: latitude).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BBox {
    pub x0: f64,
    pub y0: f64,
    pub x1: f64,
    pub y1: f64,
}

/// Widens every box a little, so a value on a box's edge stays inside
/// whatever rounding the two computations met.
const BOX_MARGIN: f64 = 1e-9;

impl BBox {
    fn of_point(p: Pt) -> BBox {
        BBox {
            x0: p.x,
            y0: p.y,
            x1: p.x,
            y1: p.y,
        }
    }

    fn add(&mut self, p: Pt) {
        self.x0 = self.x0.min(p.x);
        self.y0 = self.y0.min(p.y);
        self.x1 = self.x1.max(p.x);
        self.y1 = self.y1.max(p.y);
    }

    fn widened(self, by: f64) -> BBox {
        BBox {
            x0: self.x0 - by,
            y0: self.y0 - by,
            x1: self.x1 + by,
            y1: self.y1 + by,
        }
    }

    fn of_points<'a>(pts: impl IntoIterator<Item = &'a Pt>) -> Option<BBox> {
        let mut it = pts.into_iter();
        let mut b = BBox::of_point(*it.next()?);
        it.for_each(|p| b.add(*p));
        Some(b)
    }
}

fn lat_of(v: V3) -> f64 {
    v[2].clamp(-1.0, 1.0).asin().to_degrees()
}

fn vertices_of(g: &Geometry, out: &mut Vec<Pt>) {
    match g {
        Geometry::Point(p) => out.push(*p),
        Geometry::LineString(ps) | Geometry::MultiPoint(ps) => out.extend(ps),
        Geometry::Polygon(rs) | Geometry::MultiLineString(rs) => {
            rs.iter().for_each(|r| out.extend(r))
        }
        Geometry::MultiPolygon(ps) => ps.iter().flatten().for_each(|r| out.extend(r)),
        Geometry::Collection(gs) => gs.iter().for_each(|g| vertices_of(g, out)),
    }
}

/// The box of a geometry on the sphere: its vertices, the latitudes its
/// geodesic edges bulge to, the whole longitude range when an edge crosses
/// the antimeridian or a polygon holds a pole.
pub fn sphere_bbox(g: &Geometry) -> Option<BBox> {
    let mut pts = Vec::new();
    vertices_of(g, &mut pts);
    let mut b = BBox::of_points(&pts)?;
    let parts = Parts::of(g);
    let mut edges = parts.edges();
    // Consecutive vertices of polylines and rings, in degrees, to see
    // antimeridian crossings.
    let mut wraps = false;
    let mut check_line = |ps: &[Pt]| {
        for w in ps.windows(2) {
            if let [a, c] = w {
                wraps |= (a.x - c.x).abs() > 180.0;
            }
        }
    };
    match g {
        Geometry::LineString(l) => check_line(l),
        Geometry::MultiLineString(ls) => ls.iter().for_each(|l| check_line(l)),
        _ => {}
    }
    let mut ring_check = |r: &[Pt]| {
        let closed: Vec<Pt> = r.iter().chain(r.first()).copied().collect();
        check_line(&closed);
    };
    fn rings_of<'a>(g: &'a Geometry, out: &mut Vec<&'a [Pt]>) {
        match g {
            Geometry::Polygon(rs) => out.extend(rs.iter().map(Vec::as_slice)),
            Geometry::MultiPolygon(ps) => ps.iter().flatten().for_each(|r| out.push(r)),
            Geometry::Collection(gs) => gs.iter().for_each(|g| rings_of(g, out)),
            Geometry::LineString(_) | Geometry::MultiLineString(_) => {}
            Geometry::Point(_) | Geometry::MultiPoint(_) => {}
        }
    }
    let mut rings = Vec::new();
    rings_of(g, &mut rings);
    rings.iter().for_each(|r| ring_check(r));
    if let Geometry::Collection(gs) = g {
        for sub in gs {
            if let Some(sb) = sphere_bbox(sub) {
                if sb.x1 - sb.x0 >= 360.0 {
                    wraps = true;
                }
            }
        }
    }
    // Latitude extremes inside edges: where the edge's great circle is
    // highest (or lowest), if that point lies on the edge.
    for (a, c) in edges.drain(..) {
        let Some(n) = normalize(cross(a, c)) else {
            continue;
        };
        let top = normalize([-n[0] * n[2], -n[1] * n[2], 1.0 - n[2] * n[2]]);
        if let Some(top) = top {
            for p in [top, [-top[0], -top[1], -top[2]]] {
                if dot(cross(a, p), n) >= 0.0 && dot(cross(p, c), n) >= 0.0 {
                    let lat = lat_of(p);
                    b.y0 = b.y0.min(lat);
                    b.y1 = b.y1.max(lat);
                }
            }
        }
    }
    for p in &parts.polys {
        if p.contains([0.0, 0.0, 1.0]) {
            b.y1 = 90.0;
            wraps = true;
        }
        if p.contains([0.0, 0.0, -1.0]) {
            b.y0 = -90.0;
            wraps = true;
        }
    }
    if wraps {
        b.x0 = -180.0;
        b.x1 = 180.0;
    }
    Some(b.widened(BOX_MARGIN))
}

/// The box of a spherical cap of `r` radians around `c`.
fn cap_bbox(c: Pt, r: f64) -> BBox {
    let dlat = r.to_degrees();
    let (y0, y1) = (c.y - dlat, c.y + dlat);
    if r >= std::f64::consts::FRAC_PI_2 || y0 <= -90.0 || y1 >= 90.0 {
        return BBox {
            x0: -180.0,
            y0: y0.max(-90.0),
            x1: 180.0,
            y1: y1.min(90.0),
        };
    }
    let s = r.sin() / c.y.to_radians().cos();
    let dlng = if s >= 1.0 {
        180.0
    } else {
        s.asin().to_degrees()
    };
    let (x0, x1) = (c.x - dlng, c.x + dlng);
    let (x0, x1) = if x0 < -180.0 || x1 > 180.0 {
        (-180.0, 180.0)
    } else {
        (x0, x1)
    };
    BBox { x0, y0, x1, y1 }.widened(BOX_MARGIN)
}

impl Stored {
    /// The box of the value on the sphere (a 2dsphere index's view).
    pub fn sphere_bbox(&self) -> Option<BBox> {
        match self {
            Stored::Legacy(p) => Some(BBox::of_point(*p)),
            Stored::GeoJson(g) => sphere_bbox(g),
        }
    }
}

impl Region {
    /// A box holding every value the region contains (`None`: no useful box).
    pub fn bbox(&self) -> Option<BBox> {
        Some(match self {
            Region::Sphere(g) => sphere_bbox(g)?,
            Region::Box(lo, hi) => BBox {
                x0: lo.x,
                y0: lo.y,
                x1: hi.x,
                y1: hi.y,
            }
            .widened(BOX_MARGIN),
            Region::Polygon(pts) => BBox::of_points(pts)?.widened(BOX_MARGIN),
            Region::Center(c, r) => BBox {
                x0: c.x - r,
                y0: c.y - r,
                x1: c.x + r,
                y1: c.y + r,
            }
            .widened(BOX_MARGIN),
            Region::CenterSphere(c, r) => cap_bbox(*c, *r),
        })
    }
}

impl Intersects {
    /// A box holding every value that meets the operand.
    pub fn bbox(&self) -> Option<BBox> {
        sphere_bbox(&self.0)
    }
}

impl Near {
    /// A box holding every value within `$maxDistance` (`None` without one).
    pub fn bbox(&self) -> Option<BBox> {
        let max = self.max?;
        Some(if !self.spherical {
            BBox {
                x0: self.point.x - max,
                y0: self.point.y - max,
                x1: self.point.x + max,
                y1: self.point.y + max,
            }
            .widened(BOX_MARGIN)
        } else {
            let r = if self.geojson {
                max / EARTH_RADIUS_M
            } else {
                max
            };
            cap_bbox(self.point, r)
        })
    }
}

/// Levels of the cell hierarchy a geo index keys by: level `l` divides each
/// axis of the index's space into `2^l` parts.
pub const CELL_LEVELS: u32 = 26;

/// The space a geo index divides into cells: longitude x latitude for a
/// 2dsphere index, `[min, max)` on both axes for a 2d index.
///
/// A value's key is the id of the smallest cell holding its box. Ids are
/// ordered so a cell's descendants are one contiguous range around it (the
/// Morton order of its path, then a marker bit): a query scans, for each
/// cell covering its box, that range plus the cell's ancestors.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grid {
    min_x: f64,
    max_x: f64,
    min_y: f64,
    max_y: f64,
    /// Longitude wraps and the poles are points: see [`Grid::on_sphere`].
    sphere: bool,
}

fn interleave(i: u64, j: u64, level: u32) -> u64 {
    let mut m = 0u64;
    for b in (0..level).rev() {
        m = (m << 2) | (((i >> b) & 1) << 1) | ((j >> b) & 1);
    }
    m
}

impl Grid {
    /// A 2dsphere index's grid.
    pub fn sphere() -> Grid {
        Grid {
            min_x: -180.0,
            max_x: 180.0,
            min_y: -90.0,
            max_y: 90.0,
            sphere: true,
        }
    }

    /// A 2d index's grid over `[min, max)`.
    pub fn flat(min: f64, max: f64) -> Grid {
        Grid {
            min_x: min,
            max_x: max,
            min_y: min,
            max_y: max,
            sphere: false,
        }
    }

    /// On the sphere, longitude 180 is longitude -180 and every longitude
    /// at a pole is the same point: a point is keyed at its canonical
    /// position (-180 for 180, longitude 0 at a pole), and a box that
    /// reaches longitude 180 or a pole spans every longitude.
    fn on_sphere(&self, b: &BBox) -> BBox {
        if !self.sphere {
            return *b;
        }
        let mut b = *b;
        if b.x0 == b.x1 && b.y0 == b.y1 {
            if b.y0.abs() >= 90.0 {
                b.x0 = 0.0;
                b.x1 = 0.0;
            } else if b.x0 >= 180.0 {
                b.x0 = -180.0;
                b.x1 = -180.0;
            }
            return b;
        }
        if b.x1 >= 180.0 || b.y1 >= 90.0 || b.y0 <= -90.0 {
            b.x0 = -180.0;
            b.x1 = 180.0;
        }
        b
    }

    fn index(v: f64, lo: f64, hi: f64, level: u32) -> u64 {
        let n = 1u64 << level;
        let u = ((v - lo) / (hi - lo)).clamp(0.0, 1.0);
        if u.is_nan() {
            return 0;
        }
        ((u * n as f64) as u64).min(n - 1)
    }

    fn ij(&self, x: f64, y: f64, level: u32) -> (u64, u64) {
        (
            Grid::index(x, self.min_x, self.max_x, level),
            Grid::index(y, self.min_y, self.max_y, level),
        )
    }

    fn id(i: u64, j: u64, level: u32) -> i64 {
        let m = interleave(i, j, level);
        (((m << 1) | 1) << (2 * (CELL_LEVELS - level))) as i64
    }

    /// The key of a value whose box is `b`: the smallest cell holding it.
    pub fn cell_of(&self, b: &BBox) -> i64 {
        let b = self.on_sphere(b);
        for level in (0..=CELL_LEVELS).rev() {
            let lo = self.ij(b.x0, b.y0, level);
            let hi = self.ij(b.x1, b.y1, level);
            if lo == hi {
                return Grid::id(lo.0, lo.1, level);
            }
        }
        Grid::id(0, 0, 0)
    }

    /// Sorted, disjoint, inclusive ranges of keys a value meeting box `b`
    /// may have: at most 16 covering cells' descendants and their ancestors.
    pub fn covering(&self, b: &BBox) -> Vec<(i64, i64)> {
        let b = &self.on_sphere(b);
        let mut level = 0;
        for l in (0..=CELL_LEVELS).rev() {
            let lo = self.ij(b.x0, b.y0, l);
            let hi = self.ij(b.x1, b.y1, l);
            if hi.0.saturating_sub(lo.0) < 4 && hi.1.saturating_sub(lo.1) < 4 {
                level = l;
                break;
            }
        }
        let (lo, hi) = (self.ij(b.x0, b.y0, level), self.ij(b.x1, b.y1, level));
        let mut ranges: Vec<(i64, i64)> = Vec::new();
        for i in lo.0..=hi.0 {
            for j in lo.1..=hi.1 {
                let id = Grid::id(i, j, level);
                let half = (1i64 << (2 * (CELL_LEVELS - level))) - 1;
                ranges.push((id - half, id + half));
                for k in 0..level {
                    let a = Grid::id(i >> (level - k), j >> (level - k), k);
                    ranges.push((a, a));
                }
            }
        }
        ranges.sort_unstable();
        let mut out: Vec<(i64, i64)> = Vec::with_capacity(ranges.len());
        for (a, z) in ranges {
            match out.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(z),
                _ => out.push((a, z)),
            }
        }
        out
    }
}
