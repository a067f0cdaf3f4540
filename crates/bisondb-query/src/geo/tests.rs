use super::*;
use bson::{bson, doc};

fn stored(v: Bson) -> Stored {
    match parse_stored(&v) {
        Some(Ok(s)) => s,
        other => panic!("not a geometry: {v}: {other:?}"),
    }
}

fn square(x0: f64, y0: f64, x1: f64, y1: f64) -> Bson {
    bson!({"type": "Polygon", "coordinates": [[[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]]]})
}

#[test]
fn geojson_validation_table() {
    let cases: Vec<(Bson, Result<(), &str>)> = vec![
        (bson!({"type": "Point", "coordinates": [1, 2]}), Ok(())),
        (bson!([1, 2]), Ok(())),
        (bson!({"lng": 1.5, "lat": 2}), Ok(())),
        (
            bson!({"type": "Point", "coordinates": [200, 0]}),
            Err("out of bounds"),
        ),
        (
            bson!({"type": "Point", "coordinates": [0, 91]}),
            Err("out of bounds"),
        ),
        (
            bson!({"type": "Point", "coordinates": ["a", 1]}),
            Err("numeric"),
        ),
        (bson!({"type": "Point"}), Err("coordinates")),
        (bson!(["a", 1]), Err("numeric")),
        (bson!([1]), Err("only has 1 element")),
        (
            bson!({"type": "LineString", "coordinates": [[0, 0], [1, 1]]}),
            Ok(()),
        ),
        (
            bson!({"type": "LineString", "coordinates": [[0, 0]]}),
            Err("at least 2"),
        ),
        (square(0.0, 0.0, 1.0, 1.0), Ok(())),
        (
            bson!({"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1]]]}),
            Err("not closed"),
        ),
        (
            bson!({"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [0, 0]]]}),
            Err("at least 3"),
        ),
        (
            // A bow tie: edges 0 and 2 cross.
            bson!({"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]]}),
            Err("crosses"),
        ),
        (
            bson!({"type": "MultiPoint", "coordinates": [[0, 0], [1, 1]]}),
            Ok(()),
        ),
        (
            bson!({"type": "MultiLineString", "coordinates": [[[0, 0], [1, 1]], [[2, 2], [3, 3]]]}),
            Ok(()),
        ),
        (
            bson!({"type": "MultiPolygon", "coordinates": [[[[0, 0], [1, 0], [1, 1], [0, 0]]]]}),
            Ok(()),
        ),
        (
            bson!({"type": "GeometryCollection", "geometries": [{"type": "Point", "coordinates": [0, 0]}]}),
            Ok(()),
        ),
        (
            bson!({"type": "Circle", "coordinates": [0, 0]}),
            Err("unknown GeoJSON type"),
        ),
    ];
    for (v, want) in cases {
        let got = parse_stored(&v).unwrap_or(Err("not geo".into()));
        match (got, want) {
            (Ok(_), Ok(())) => {}
            (Err(e), Err(w)) => assert!(e.contains(w), "{v}: {e} lacks {w}"),
            (got, want) => panic!("{v}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn distances_table() {
    // (a, b, meters) on radius 6378100.
    let cases = [
        ((0.0, 0.0), (0.0, 0.0), 0.0),
        ((0.0, 0.0), (1.0, 0.0), 111_318.845),
        (
            (0.0, 0.0),
            (180.0, 0.0),
            std::f64::consts::PI * EARTH_RADIUS_M,
        ),
        (
            (0.0, 90.0),
            (0.0, -90.0),
            std::f64::consts::PI * EARTH_RADIUS_M,
        ),
        ((-73.9857, 40.7484), (-0.1276, 51.5072), 5_576_000.0),
    ];
    for ((ax, ay), (bx, by), want) in cases {
        let got = sphere_distance(Pt { x: ax, y: ay }, Pt { x: bx, y: by }) * EARTH_RADIUS_M;
        assert!(
            (got - want).abs() <= want * 1e-3 + 1e-6,
            "{ax},{ay} -> {bx},{by}: {got} vs {want}"
        );
    }
}

#[test]
fn within_table() {
    let sq = Region::parse(
        "$geoWithin",
        &bson!({"$geometry": square(40.0, 5.0, 41.0, 6.0)}),
    )
    .unwrap();
    let boxed = Region::parse("$geoWithin", &bson!({"$box": [[0, 0], [10, 10]]})).unwrap();
    let poly = Region::parse(
        "$geoWithin",
        &bson!({"$polygon": [[0, 0], [10, 0], [0, 10]]}),
    )
    .unwrap();
    let center = Region::parse("$geoWithin", &bson!({"$center": [[0, 0], 5]})).unwrap();
    // About 111 km around (0, 0).
    let sphere = Region::parse(
        "$geoWithin",
        &bson!({"$centerSphere": [[0, 0], 1.0_f64.to_radians()]}),
    )
    .unwrap();
    let cases: Vec<(&Region, Bson, bool)> = vec![
        (&sq, bson!([40.5, 5.5]), true),
        (
            &sq,
            bson!({"type": "Point", "coordinates": [40.5, 5.5]}),
            true,
        ),
        (&sq, bson!([42, 5.5]), false),
        (
            &sq,
            bson!({"type": "LineString", "coordinates": [[40.2, 5.2], [40.8, 5.8]]}),
            true,
        ),
        (
            &sq,
            bson!({"type": "LineString", "coordinates": [[40.2, 5.2], [42, 5.8]]}),
            false,
        ),
        (&sq, square(40.2, 5.2, 40.8, 5.8), true),
        (&sq, square(39.0, 5.2, 40.8, 5.8), false),
        (&boxed, bson!([5, 5]), true),
        (&boxed, bson!([10, 10]), true),
        (&boxed, bson!([11, 5]), false),
        (&boxed, square(1.0, 1.0, 2.0, 2.0), false),
        (&poly, bson!([1, 1]), true),
        (&poly, bson!([5, 5]), true),
        (&poly, bson!([6, 6]), false),
        (&center, bson!([3, 4]), true),
        (&center, bson!([4, 4]), false),
        (&sphere, bson!([0.5, 0.5]), true),
        (&sphere, bson!([1.5, 0]), false),
        (
            &sphere,
            bson!({"type": "LineString", "coordinates": [[0.1, 0.1], [0.2, 0.3]]}),
            true,
        ),
    ];
    for (r, v, want) in cases {
        assert_eq!(r.contains(&stored(v.clone())), want, "{r:?} within {v}");
    }
}

#[test]
fn within_across_antimeridian_and_holes() {
    let r = Region::parse(
        "$geoWithin",
        &bson!({"$geometry": {"type": "Polygon", "coordinates": [[[170, -10], [-170, -10], [-170, 10], [170, 10], [170, -10]]]}}),
    )
    .unwrap();
    assert!(r.contains(&stored(bson!([180, 0]))));
    assert!(r.contains(&stored(bson!([-175, 5]))));
    assert!(!r.contains(&stored(bson!([0, 0]))));
    let holed = Region::parse(
        "$geoWithin",
        &bson!({"$geometry": {"type": "Polygon", "coordinates": [
            [[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]],
            [[4, 4], [6, 4], [6, 6], [4, 6], [4, 4]],
        ]}}),
    )
    .unwrap();
    assert!(holed.contains(&stored(bson!([2, 2]))));
    assert!(!holed.contains(&stored(bson!([5, 5]))));
}

#[test]
fn intersects_table() {
    let q = |g: Bson| Intersects::parse(&bson!({"$geometry": g})).unwrap();
    let sq = q(square(0.0, 0.0, 10.0, 10.0));
    // Along the equator, a geodesic (a parallel off the equator is not).
    let ln = q(bson!({"type": "LineString", "coordinates": [[-5, 0], [15, 0]]}));
    let cases: Vec<(&Intersects, Bson, bool)> = vec![
        (&sq, bson!([5, 5]), true),
        (&sq, bson!([15, 5]), false),
        (
            &sq,
            bson!({"type": "LineString", "coordinates": [[-5, 5], [5, 5]]}),
            true,
        ),
        (
            &sq,
            bson!({"type": "LineString", "coordinates": [[-5, -5], [-5, 15]]}),
            false,
        ),
        (&sq, square(9.0, 9.0, 12.0, 12.0), true),
        (&sq, square(20.0, 20.0, 22.0, 22.0), false),
        (
            &ln,
            bson!({"type": "LineString", "coordinates": [[5, -5], [5, 15]]}),
            true,
        ),
        (
            &ln,
            bson!({"type": "LineString", "coordinates": [[20, -5], [20, 15]]}),
            false,
        ),
        (&ln, bson!({"type": "Point", "coordinates": [0, 0]}), true),
        (
            &ln,
            bson!({"type": "Point", "coordinates": [0, 0.01]}),
            false,
        ),
        (&ln, square(1.0, 1.0, 2.0, 2.0), false),
        (
            &sq,
            bson!({"type": "GeometryCollection", "geometries": [
                {"type": "Point", "coordinates": [50, 50]},
                {"type": "Point", "coordinates": [1, 1]},
            ]}),
            true,
        ),
    ];
    for (i, v, want) in cases {
        assert_eq!(i.matches(&stored(v.clone())), want, "{i:?} intersects {v}");
    }
}

#[test]
fn near_units_and_bounds() {
    let ops = doc! {"$near": {"$geometry": {"type": "Point", "coordinates": [0, 0]}, "$maxDistance": 200_000}};
    let n = Near::parse_query("$near", &ops).unwrap();
    assert!(n.geojson && n.spherical && n.max == Some(200_000.0));
    let d = n.distance(&stored(bson!([1, 0]))).unwrap();
    assert!((d - 111_318.8).abs() < 1.0, "{d}");
    assert!(n.in_range(d));
    let legacy = Near::parse_query("$near", &doc! {"$near": [0, 0], "$maxDistance": 2}).unwrap();
    assert_eq!(legacy.distance(&stored(bson!([3, 4]))), Some(5.0));
    assert!(!legacy.in_range(5.0));
    let sphere = Near::parse_query("$nearSphere", &doc! {"$nearSphere": [0, 0]}).unwrap();
    let d = sphere.distance(&stored(bson!([90, 0]))).unwrap();
    assert!((d - std::f64::consts::FRAC_PI_2).abs() < 1e-12);
    // The distance to a polygon is to its nearest point, 0 inside.
    assert_eq!(n.distance(&stored(square(-1.0, -1.0, 1.0, 1.0))), Some(0.0));
    assert!(Near::parse_query("$near", &doc! {"$near": "x"}).is_err());
    assert!(Near::parse_query("$near", &doc! {"$near": [0, 0], "$maxDistance": -1}).is_err());
}

#[test]
fn region_parse_errors() {
    for v in [
        bson!({"$geometry": {"type": "Point", "coordinates": [0, 0]}}),
        bson!({"$box": [[0, 0]]}),
        bson!({"$polygon": [[0, 0], [1, 1]]}),
        bson!({"$center": [[0, 0], -1]}),
        bson!({"$foo": 1}),
        bson!(5),
    ] {
        let e = Region::parse("$geoWithin", &v).unwrap_err();
        assert_eq!(e.code.code(), 2, "{v}");
    }
}

fn in_ranges(ranges: &[(i64, i64)], k: i64) -> bool {
    ranges.iter().any(|(a, z)| *a <= k && k <= *z)
}

#[test]
fn covering_holds_every_cell_that_meets_the_box() {
    // A deterministic spread of stored boxes (points and small shapes)
    // against query boxes: a stored box meeting the query box has its key
    // in the covering; the covering stays small.
    let grid = Grid::sphere();
    let queries = [
        BBox {
            x0: 40.0,
            y0: 5.0,
            x1: 41.0,
            y1: 6.0,
        },
        BBox {
            x0: -180.0,
            y0: -90.0,
            x1: 180.0,
            y1: 90.0,
        },
        BBox {
            x0: -0.001,
            y0: -0.001,
            x1: 0.001,
            y1: 0.001,
        },
        BBox {
            x0: 100.0,
            y0: -80.0,
            x1: 179.0,
            y1: 10.0,
        },
    ];
    let mut seed = 7u64;
    let mut next = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    for q in &queries {
        let cov = grid.covering(q);
        assert!(cov.len() <= 16 * 27, "{q:?}: {}", cov.len());
        for _ in 0..2000 {
            let x = q.x0 - 1.0 + (q.x1 - q.x0 + 2.0) * next();
            let y = q.y0 - 1.0 + (q.y1 - q.y0 + 2.0) * next();
            let w = if next() < 0.5 { 0.0 } else { 3.0 * next() };
            let b = BBox {
                x0: x,
                y0: y,
                x1: x + w,
                y1: y + w,
            };
            let meets = b.x0 <= q.x1 && b.x1 >= q.x0 && b.y0 <= q.y1 && b.y1 >= q.y0;
            if meets {
                assert!(in_ranges(&cov, grid.cell_of(&b)), "{b:?} meets {q:?}");
            }
        }
    }
    // A far point is not in a small box's covering.
    let cov = grid.covering(&queries[0]);
    assert!(!in_ranges(
        &cov,
        grid.cell_of(&BBox {
            x0: -100.0,
            y0: -40.0,
            x1: -100.0,
            y1: -40.0
        })
    ));
}

#[test]
fn sphere_boxes_follow_geodesics_poles_and_the_antimeridian() {
    let g = |v: Bson| match parse_stored(&v) {
        Some(Ok(Stored::GeoJson(g))) => g,
        other => panic!("{other:?}"),
    };
    // A geodesic between two points at 60N bulges north of 60.
    let b = sphere_bbox(&g(
        bson!({"type": "LineString", "coordinates": [[-60, 60], [60, 60]]}),
    ))
    .unwrap();
    assert!(b.y1 > 70.0 && b.x0 <= -60.0 && b.x1 >= 60.0, "{b:?}");
    // Crossing the antimeridian: every longitude.
    let b = sphere_bbox(&g(
        bson!({"type": "LineString", "coordinates": [[170, 0], [-170, 0]]}),
    ))
    .unwrap();
    assert!(b.x0 <= -180.0 && b.x1 >= 180.0, "{b:?}");
    // Around the north pole.
    let b = sphere_bbox(&g(
        bson!({"type": "Polygon", "coordinates": [[[0, 80], [120, 80], [-120, 80], [0, 80]]]}),
    ))
    .unwrap();
    assert!(b.y1 >= 90.0 && b.x0 <= -180.0, "{b:?}");
    let cap = Region::CenterSphere(Pt { x: 0.0, y: 0.0 }, 1.0_f64.to_radians())
        .bbox()
        .unwrap();
    assert!(
        (cap.x1 - 1.0).abs() < 1e-6 && (cap.y0 + 1.0).abs() < 1e-6,
        "{cap:?}"
    );
}

#[test]
fn cells_of_odd_boxes_do_not_panic() {
    let odd = [
        BBox {
            x0: 10.0,
            y0: 10.0,
            x1: -10.0,
            y1: -10.0,
        },
        BBox {
            x0: f64::NAN,
            y0: 0.0,
            x1: f64::NAN,
            y1: 0.0,
        },
        BBox {
            x0: f64::NEG_INFINITY,
            y0: -1e300,
            x1: f64::INFINITY,
            y1: 1e300,
        },
    ];
    for g in [Grid::sphere(), Grid::flat(-1.0, 1.0)] {
        for b in &odd {
            let _ = g.cell_of(b);
            let _ = g.covering(b);
        }
    }
}

/// mongod takes a bare GeoJSON point as `$near`'s / `$nearSphere`'s operand
/// (`GeoNearExpression::parseLegacyQuery` accepts any query point) and
/// measures from it in meters, as from `$geometry` (manual, `$near`: "If the
/// specified point is GeoJSON, specify the distance in meters"), with
/// `$maxDistance`/`$minDistance` beside it.
#[test]
fn near_bare_geojson_point() {
    for op in ["$near", "$nearSphere"] {
        let ops = doc! {op: {"type": "Point", "coordinates": [-179, 0]}, "$maxDistance": 200_000};
        let n = Near::parse_query(op, &ops).unwrap();
        assert!(n.geojson && n.spherical && n.max == Some(200_000.0), "{op}");
        assert_eq!(n.point, Pt { x: -179.0, y: 0.0 });
        // Across the antimeridian: 2 degrees of longitude at the equator.
        let d = n.distance(&stored(bson!([179, 0]))).unwrap();
        assert!((d - 222_637.6).abs() < 1.0, "{d}");
        assert!(!n.in_range(d));
    }
    assert!(Near::parse_query(
        "$near",
        &doc! {"$near": {"type": "Point", "coordinates": [0, 100]}}
    )
    .is_err());
    assert!(Near::parse_query(
        "$near",
        &doc! {"$near": {"type": "LineString", "coordinates": [[0, 0], [1, 1]]}}
    )
    .is_err());
}
