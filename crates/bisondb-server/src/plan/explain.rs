//! explain's plan trees: the `winningPlan` of a [`Plan`] and, from the
//! [`Stats`] of running it, each stage's `executionStats`.

use std::sync::atomic::Ordering;

use bisondb_query::matcher::bounds::FieldBounds;
use bisondb_storage::IndexInfo;
use bson::{doc, Bson, Document};

use super::{geo_near, min_max, text, Access, Plan, Stats, SORT_MEMORY_LIMIT};

/// The access part of explain's `winningPlan`.
pub fn describe(plan: &Plan, filter: &Document, count_scan: bool) -> Document {
    if let Some(g) = &plan.geo_near {
        let scan = Plan {
            geo_near: None,
            ..plan.clone()
        };
        return geo_near::describe(g, describe(&scan, filter, count_scan));
    }
    let filter_field = |d: &mut Document| {
        if !filter.is_empty() {
            d.insert("filter", filter.clone());
        }
    };
    match &plan.access {
        Access::Empty => doc! {"stage": "EOF"},
        Access::KeyRange { index, start, end } => {
            let mut fetch = doc! {"stage": "FETCH"};
            filter_field(&mut fetch);
            fetch.insert(
                "inputStage",
                min_max::describe(index.as_deref(), start, end),
            );
            fetch
        }
        Access::IdLookup(_) => doc! {"stage": "IDHACK"},
        Access::Collscan {
            reverse,
            id_index: true,
        } => {
            let full = if *reverse {
                "[MaxKey, MinKey]"
            } else {
                "[MinKey, MaxKey]"
            };
            let scan = doc! {
                "stage": "IXSCAN",
                "keyPattern": {"_id": 1},
                "indexName": "_id_",
                "isMultiKey": false,
                "multiKeyPaths": {"_id": []},
                "isUnique": true,
                "isSparse": false,
                "isPartial": false,
                "indexVersion": 2,
                "direction": if *reverse { "backward" } else { "forward" },
                "indexBounds": {"_id": [full]},
            };
            let mut fetch = doc! {"stage": "FETCH"};
            filter_field(&mut fetch);
            fetch.insert("inputStage", scan);
            fetch
        }
        Access::Collscan { reverse, .. } => {
            let mut d = doc! {"stage": "COLLSCAN"};
            filter_field(&mut d);
            d.insert("direction", if *reverse { "backward" } else { "forward" });
            d
        }
        Access::Ixscan {
            index,
            bounds,
            reverse,
        } => {
            let mut ib = Document::new();
            for (f, b) in index.fields.iter().zip(bounds) {
                let shown: Vec<Bson> = if *reverse != f.descending {
                    b.intervals
                        .iter()
                        .rev()
                        .map(|i| Bson::String(reversed(i)))
                        .collect()
                } else {
                    b.intervals
                        .iter()
                        .map(|i| Bson::String(i.display()))
                        .collect()
                };
                ib.insert(f.path.clone(), shown);
            }
            let mut multikey_paths = Document::new();
            for f in &index.fields {
                let v: Vec<Bson> = if index.multikey {
                    vec![Bson::String(f.path.clone())]
                } else {
                    Vec::new()
                };
                multikey_paths.insert(f.path.clone(), v);
            }
            let scan = doc! {
                "stage": if count_scan { "COUNT_SCAN" } else { "IXSCAN" },
                "keyPattern": index.spec.key.clone(),
                "indexName": index.spec.name.clone(),
                "isMultiKey": index.multikey,
                "multiKeyPaths": multikey_paths,
                "isUnique": index.spec.unique,
                "isSparse": index.spec.sparse,
                "isPartial": index.spec.partial_filter.is_some(),
                "indexVersion": 2,
                "direction": if *reverse { "backward" } else { "forward" },
                "indexBounds": ib,
            };
            if count_scan {
                return count_scan_stage(scan, index, bounds);
            }
            if index.spec.is_text() {
                return text::describe(index, filter, scan);
            }
            let mut fetch = doc! {"stage": "FETCH"};
            // Bounds that answer the whole filter leave FETCH nothing to
            // check, and mongod shows no filter there.
            if !plan.count_exact {
                filter_field(&mut fetch);
            }
            fetch.insert("inputStage", scan);
            fetch
        }
    }
}

/// mongod's COUNT_SCAN shows one key range as `startKey`/`endKey` with their
/// inclusivity and no direction; bounds of several intervals keep the IXSCAN
/// form (mongod would not count-scan them).
fn count_scan_stage(mut scan: Document, index: &IndexInfo, bounds: &[FieldBounds]) -> Document {
    let single: Option<Vec<&bisondb_query::matcher::bounds::Interval>> = bounds
        .iter()
        .map(|b| match b.intervals.as_slice() {
            [i] => Some(i),
            _ => None,
        })
        .collect();
    let Some(intervals) = single.filter(|v| v.len() == index.fields.len()) else {
        return scan;
    };
    let mut start = Document::new();
    let mut end = Document::new();
    for (f, i) in index.fields.iter().zip(&intervals) {
        // A descending field stores its values inverted: its range starts high.
        let (lo, hi) = if f.descending {
            (&i.hi, &i.lo)
        } else {
            (&i.lo, &i.hi)
        };
        start.insert(f.path.clone(), lo.clone());
        end.insert(f.path.clone(), hi.clone());
    }
    let (start_inc, end_inc) =
        intervals
            .iter()
            .zip(&index.fields)
            .fold((true, true), |(s, e), (i, f)| {
                let (lo_inc, hi_inc) = if f.descending {
                    (i.hi_inclusive, i.lo_inclusive)
                } else {
                    (i.lo_inclusive, i.hi_inclusive)
                };
                (s && lo_inc, e && hi_inc)
            });
    scan.remove("direction");
    scan.insert(
        "indexBounds",
        doc! {
            "startKey": start,
            "startKeyInclusive": start_inc,
            "endKey": end,
            "endKeyInclusive": end_inc,
        },
    );
    scan
}

/// An interval as a backward scan meets it: `[5, 1]` for `[1, 5]`.
fn reversed(i: &bisondb_query::matcher::bounds::Interval) -> String {
    let flipped = bisondb_query::matcher::bounds::Interval {
        lo: i.hi.clone(),
        lo_inclusive: i.hi_inclusive,
        hi: i.lo.clone(),
        hi_inclusive: i.lo_inclusive,
    };
    flipped.display()
}

/// The number of key ranges an index scan over `bounds` seeks to: one per
/// combination of the point intervals on the leading fields, times the
/// intervals of the first ranged field (as the storage scan builds them).
fn seeks(plan: Option<&Plan>) -> u64 {
    let Some(Access::Ixscan { bounds, .. }) = plan.map(|p| &p.access) else {
        return 1;
    };
    let mut n = 1u64;
    for b in bounds {
        if b.is_full() {
            break;
        }
        n = n.saturating_mul(b.intervals.len() as u64);
        if !b.is_points() {
            break;
        }
    }
    n
}

/// How a stage ran: calls to its `work()`, results it returned, whether it
/// reached its end.
struct Ran {
    works: u64,
    advanced: u64,
    eof: bool,
}

impl Ran {
    /// A stage that works once per call of its child (FETCH, SKIP): as many
    /// works as the child, and at least one per result plus the end.
    fn passing_through(child: Option<&Ran>, advanced: u64, eof: bool) -> Ran {
        Ran {
            works: child.map_or(0, |c| c.works).max(advanced + u64::from(eof)),
            advanced,
            eof,
        }
    }
}

/// explain's `executionStats.executionStages`: the `winning` plan tree with
/// each stage's statistics from what ran (`stats`). BisonDB's stages are
/// iterators, not mongod's `work()` state machines, so `works` is derived as
/// mongod's would count it: a scan does one work per key or document examined
/// plus one that finds its end; FETCH, SKIP, LIMIT and projections one per
/// work of their input (LIMIT one more when it stops before its input ends);
/// a blocking SORT one per input work, then one per document it returns and
/// one for its end. `needTime` is what is left after `advanced` and the end.
/// Nothing yields, so `needYield`, `saveState` and `restoreState` are 0;
/// times are not measured per stage (`executionTimeMillisEstimate` 0).
pub fn execution_stages(winning: &Document, plan: Option<&Plan>, stats: &Stats) -> Document {
    annotate(winning, plan, stats).0
}

fn annotate(stage: &Document, plan: Option<&Plan>, s: &Stats) -> (Document, Ran) {
    let name = stage.get_str("stage").unwrap_or_default();
    let child = stage
        .get_document("inputStage")
        .ok()
        .map(|c| annotate(c, plan, s));
    let n = crate::reply::count;
    let mut extra = Document::new();
    let eof_n = |b: bool| b as u64;
    let ran = match name {
        "COLLSCAN" => {
            extra.insert("docsExamined", n(s.docs()));
            let eof = s.access.is_eof();
            Ran {
                works: s.docs() + eof_n(eof),
                advanced: s.access.n(),
                eof,
            }
        }
        "IDHACK" => {
            extra.insert("keysExamined", n(s.keys()));
            extra.insert("docsExamined", n(s.docs()));
            let eof = s.access.is_eof();
            Ran {
                works: s.docs().max(s.access.n()) + eof_n(eof),
                advanced: s.access.n(),
                eof,
            }
        }
        "IXSCAN" => {
            extra.insert("keysExamined", n(s.keys()));
            extra.insert("seeks", n(seeks(plan)));
            extra.insert("dupsTested", n(s.dups_tested.load(Ordering::Relaxed)));
            extra.insert("dupsDropped", n(s.dups_dropped.load(Ordering::Relaxed)));
            let eof = s.ixscan.is_eof();
            Ran {
                works: s.keys().max(s.ixscan.n()) + eof_n(eof),
                advanced: s.ixscan.n(),
                eof,
            }
        }
        "COUNT_SCAN" => {
            // keysExamined already counts the step that found the end.
            extra.insert("keysExamined", n(s.keys()));
            extra.insert("dupsTested", 0);
            extra.insert("dupsDropped", 0);
            let eof = s.ixscan.is_eof();
            Ran {
                works: s.keys().max(s.ixscan.n() + eof_n(eof)),
                advanced: s.ixscan.n(),
                eof,
            }
        }
        "FETCH" => {
            extra.insert("docsExamined", n(s.docs()));
            extra.insert("alreadyHasObj", 0);
            Ran::passing_through(
                child.as_ref().map(|c| &c.1),
                s.access.n(),
                s.access.is_eof(),
            )
        }
        "SORT" => {
            extra.insert("memLimit", n(SORT_MEMORY_LIMIT as u64));
            extra.insert("type", "simple");
            extra.insert(
                "totalDataSizeSorted",
                n(s.sort_bytes.load(Ordering::Relaxed)),
            );
            extra.insert("usedDisk", false);
            extra.insert("spills", 0);
            let eof = s.sort.is_eof();
            let advanced = s.sort.n();
            Ran {
                works: child.as_ref().map_or(0, |c| c.1.works) + advanced + eof_n(eof),
                advanced,
                eof,
            }
        }
        "SKIP" => Ran::passing_through(child.as_ref().map(|c| &c.1), s.skip.n(), s.skip.is_eof()),
        "LIMIT" => {
            let advanced = s.out.n();
            let amount = match stage.get("limitAmount") {
                Some(Bson::Int32(i)) => *i as u64,
                Some(Bson::Int64(i)) => *i as u64,
                _ => u64::MAX,
            };
            let hit = advanced >= amount;
            let (child_works, child_eof) =
                child.as_ref().map_or((0, true), |c| (c.1.works, c.1.eof));
            let eof = hit || child_eof;
            Ran {
                works: (child_works + eof_n(hit && !child_eof)).max(advanced + eof_n(eof)),
                advanced,
                eof,
            }
        }
        "EOF" | "RECORD_STORE_FAST_COUNT" => Ran {
            works: 1,
            advanced: 0,
            eof: true,
        },
        "COUNT" => {
            let (works, eof) = child.as_ref().map_or((1, true), |c| (c.1.works, c.1.eof));
            Ran {
                works,
                advanced: 0,
                eof,
            }
        }
        // Projections and anything else passing its input through.
        _ => match &child {
            Some((_, c)) => Ran {
                works: c.works,
                advanced: c.advanced,
                eof: c.eof,
            },
            None => Ran {
                works: s.out.n() + eof_n(s.out.is_eof()),
                advanced: s.out.n(),
                eof: s.out.is_eof(),
            },
        },
    };
    let mut d = doc! {"stage": name};
    if let Some(f) = stage.get("filter") {
        d.insert("filter", f.clone());
    }
    d.insert("nReturned", n(ran.advanced));
    d.insert("executionTimeMillisEstimate", 0);
    d.insert("works", n(ran.works));
    d.insert("advanced", n(ran.advanced));
    d.insert(
        "needTime",
        n(ran.works.saturating_sub(ran.advanced + eof_n(ran.eof))),
    );
    d.insert("needYield", 0);
    d.insert("saveState", 0);
    d.insert("restoreState", 0);
    d.insert("isEOF", ran.eof as i32);
    for (k, v) in stage {
        if !matches!(k.as_str(), "stage" | "filter" | "inputStage") && !extra.contains_key(k) {
            d.insert(k.clone(), v.clone());
        }
    }
    for (k, v) in extra {
        d.insert(k, v);
    }
    if let Some((c, _)) = child {
        d.insert("inputStage", c);
    }
    (d, ran)
}
