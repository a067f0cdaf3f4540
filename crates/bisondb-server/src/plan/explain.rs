//! explain's plan trees. A plan is a chain of physical stages (mongod's
//! names: IDHACK (EXPRESS_IXSCAN for a find by `_id`), COLLSCAN, IXSCAN or COUNT_SCAN, FETCH, SORT, SKIP, LIMIT,
//! the projections, the text and geo stages, COUNT), each implementing
//! [`Stage`]: it writes its own fields of the `queryPlanner.winningPlan`
//! node and, from the plan's [`Stats`], how it ran and its fields of the
//! `executionStats.executionStages` node. A [`StageTree`] is built from the
//! chosen [`Plan`] ([`StageTree::of_plan`]) with the stages a command stacks
//! on top of it (sort, skip, limit, projection, count), in the order the
//! command runs them; explain walks it once for each section.
//!
//! [`explain_read`] drives the explain of the commands whose read is a
//! filter, a sort and a hint; `find` and `count` build their trees
//! themselves (they stack skip, limit, projection or a count on the plan).
//! [`Verbosity`] says how much runs and which sections the reply has.
//!
//! The stages of the access paths live with them (`access.rs`), the SORT
//! with the blocking sort (`sort.rs`), the text and geo stages in `text.rs`
//! and `geo_near.rs`; the stages the commands add, and the tree, here.

use std::sync::Arc;
use std::time::Instant;

use bisondb_error::{MongoError, MongoResult};
use bisondb_query::matcher::Matcher;
use bisondb_query::sort::SortSpec;
use bisondb_storage::Collection;
use bson::{doc, Bson, Document};

use super::access::{IndexScanStage, ScanBounds};
use super::sort::SortStage;
use super::{geo_near, text, Access, Hint, Plan, Stats, SORT_MEMORY_LIMIT};

/// How a stage ran: calls to its `work()`, results it returned, whether it
/// reached its end.
///
/// BisonDB's stages are iterators, not mongod's `work()` state machines, so
/// `works` is derived as mongod's would count it: a scan does one work per
/// key or document examined plus one that finds its end; FETCH, SKIP, LIMIT
/// and projections one per work of their input (LIMIT one more when it stops
/// before its input ends); a blocking SORT one per input work, then one per
/// document it returns and one for its end. `needTime` is what is left after
/// `advanced` and the end. Nothing yields, so `needYield`, `saveState` and
/// `restoreState` are 0; times are not measured per stage
/// (`executionTimeMillisEstimate` 0).
#[derive(Debug, Clone, Copy)]
pub struct Ran {
    pub works: u64,
    pub advanced: u64,
    pub eof: bool,
}

impl Ran {
    /// A stage that works once per call of its child (FETCH, SKIP): as many
    /// works as the child, and at least one per result plus the end.
    pub fn passing_through(child: Option<&Ran>, advanced: u64, eof: bool) -> Ran {
        Ran {
            works: child.map_or(0, |c| c.works).max(advanced + u64::from(eof)),
            advanced,
            eof,
        }
    }

    /// A stage that has nothing to read (EOF, a count from the catalog).
    pub fn once() -> Ran {
        Ran {
            works: 1,
            advanced: 0,
            eof: true,
        }
    }

    /// A stage that hands on what its input returns (projections, the text
    /// and geo stages above their scan); without an input, what the whole
    /// plan returned.
    pub fn as_input(input: Option<&Ran>, s: &Stats) -> Ran {
        match input {
            Some(c) => *c,
            None => Ran {
                works: s.out.n() + u64::from(s.out.is_eof()),
                advanced: s.out.n(),
                eof: s.out.is_eof(),
            },
        }
    }
}

/// One physical stage of a plan, as explain shows it.
pub trait Stage {
    /// mongod's name of the stage (`"IXSCAN"`).
    fn name(&self) -> &'static str;

    /// mongod 8's express stages render a node of their own: `isCached`
    /// first, and no per-stage counters but what they examined.
    fn express(&self) -> bool {
        false
    }

    /// The filter the stage checks, shown right after its name.
    fn filter(&self) -> Option<&Document> {
        None
    }

    /// The stage's own fields of its `winningPlan` node.
    fn describe(&self, out: &mut Document);

    /// How the stage ran, from the plan's counters and its input's run.
    fn ran(&self, stats: &Stats, input: Option<&Ran>) -> Ran;

    /// The stage's own fields of its `executionStages` node, after the
    /// counters every stage has: its `winningPlan` fields, then what it
    /// examined.
    fn describe_run(&self, stats: &Stats, out: &mut Document) {
        let _ = stats;
        self.describe(out);
    }
}

/// A plan's stages, each over its input.
pub struct StageTree<'a> {
    stage: Box<dyn Stage + 'a>,
    input: Option<Box<StageTree<'a>>>,
}

impl<'a> StageTree<'a> {
    /// A stage that reads no input.
    pub fn leaf(stage: impl Stage + 'a) -> StageTree<'a> {
        StageTree {
            stage: Box::new(stage),
            input: None,
        }
    }

    /// `stage` over this tree.
    pub fn then(self, stage: impl Stage + 'a) -> StageTree<'a> {
        StageTree {
            stage: Box::new(stage),
            input: Some(Box::new(self)),
        }
    }

    /// The stages of `plan`: its access path, and the ordering of a `$near`
    /// query. `filter` is the filter as sent; `count_scan`: the plan counts
    /// index keys without fetching (COUNT_SCAN).
    pub fn of_plan(plan: &'a Plan, filter: &'a Document, count_scan: bool) -> StageTree<'a> {
        let scan = Self::access(plan, filter, count_scan);
        match &plan.geo_near {
            Some(g) => scan.then(geo_near::GeoNearStage(g)),
            None => scan,
        }
    }

    fn access(plan: &'a Plan, filter: &'a Document, count_scan: bool) -> StageTree<'a> {
        let fetch = |filter: &'a Document| FetchStage {
            filter: (!filter.is_empty()).then_some(filter),
        };
        match &plan.access {
            Access::Empty => StageTree::leaf(NothingToRead("EOF")),
            Access::KeyRange { index, start, end } => StageTree::leaf(IndexScanStage::new(
                index.as_deref(),
                ScanBounds::KeyRange { start, end },
                false,
            ))
            .then(fetch(filter)),
            Access::IdLookup(_) => StageTree::leaf(super::access::IdHackStage),
            Access::Collscan {
                reverse,
                id_index: true,
                id_bounds,
            } => {
                let bounds = match id_bounds {
                    Some(b) => ScanBounds::Fields(std::slice::from_ref(b)),
                    None => ScanBounds::All,
                };
                StageTree::leaf(IndexScanStage::new(None, bounds, *reverse)).then(fetch(filter))
            }
            Access::Collscan { reverse, .. } => StageTree::leaf(super::access::CollscanStage {
                filter: (!filter.is_empty()).then_some(filter),
                reverse: *reverse,
            }),
            Access::Ixscan {
                index,
                bounds,
                reverse,
            } => {
                let scan = IndexScanStage::new(Some(index), ScanBounds::Fields(bounds), *reverse);
                if count_scan {
                    return StageTree::leaf(scan.counting());
                }
                if index.spec.is_text() {
                    return text::stages(index, filter, scan);
                }
                // Bounds that answer the whole filter leave FETCH nothing to
                // check, and mongod shows no filter there.
                let filter = if plan.count_exact {
                    None
                } else {
                    (!filter.is_empty()).then_some(filter)
                };
                StageTree::leaf(scan).then(FetchStage { filter })
            }
        }
    }

    /// A blocking SORT by `spec` over this tree; `limit`: what `find` keeps.
    pub fn sort(self, spec: &bisondb_query::sort::SortSpec, limit: Option<u64>) -> StageTree<'a> {
        self.then(SortStage::new(spec, limit))
    }

    pub fn skip(self, amount: u64) -> StageTree<'a> {
        self.then(SkipStage(amount))
    }

    pub fn limit(self, amount: u64) -> StageTree<'a> {
        self.then(LimitStage(amount))
    }

    /// `find`'s `returnKey`: each result replaced by its index key.
    pub fn return_key(self) -> StageTree<'a> {
        self.then(PassThrough("RETURN_KEY"))
    }

    /// A projection of each result by `spec`.
    pub fn projection(self, spec: &'a Document) -> StageTree<'a> {
        self.then(ProjectionStage(spec))
    }

    /// `count` over this tree.
    pub fn count(self) -> StageTree<'a> {
        self.then(CountStage)
    }

    /// `count` without a filter: the collection's recorded count.
    pub fn fast_count() -> StageTree<'a> {
        StageTree::leaf(NothingToRead("RECORD_STORE_FAST_COUNT"))
    }

    /// mongod 8's express path for a find by `_id`: one node, whatever
    /// limit, sort or projection the find has.
    pub fn express_id(projection: Option<&'a Document>) -> StageTree<'a> {
        StageTree::leaf(super::access::ExpressIdStage { projection })
    }

    /// explain's `queryPlanner.winningPlan`.
    pub fn winning_plan(&self) -> Document {
        if self.stage.express() {
            let mut d = doc! {"isCached": false, "stage": self.stage.name()};
            self.stage.describe(&mut d);
            return d;
        }
        let mut d = doc! {"stage": self.stage.name()};
        if let Some(f) = self.stage.filter() {
            d.insert("filter", f.clone());
        }
        self.stage.describe(&mut d);
        if let Some(input) = &self.input {
            d.insert("inputStage", input.winning_plan());
        }
        d
    }

    /// explain's `executionStats.executionStages`: each stage with its
    /// statistics from what ran (`stats`).
    pub fn execution_stages(&self, stats: &Stats) -> Document {
        self.run(stats).0
    }

    fn run(&self, s: &Stats) -> (Document, Ran) {
        let input = self.input.as_ref().map(|i| i.run(s));
        let ran = self.stage.ran(s, input.as_ref().map(|i| &i.1));
        let n = crate::reply::count;
        if self.stage.express() {
            let mut d = doc! {"isCached": false, "stage": self.stage.name()};
            self.stage.describe(&mut d);
            d.insert("nReturned", n(ran.advanced));
            self.stage.describe_run(s, &mut d);
            return (d, ran);
        }
        let mut d = doc! {"stage": self.stage.name()};
        if let Some(f) = self.stage.filter() {
            d.insert("filter", f.clone());
        }
        d.insert("nReturned", n(ran.advanced));
        d.insert("executionTimeMillisEstimate", 0);
        d.insert("works", n(ran.works));
        d.insert("advanced", n(ran.advanced));
        d.insert(
            "needTime",
            n(ran.works.saturating_sub(ran.advanced + u64::from(ran.eof))),
        );
        d.insert("needYield", 0);
        d.insert("saveState", 0);
        d.insert("restoreState", 0);
        d.insert("isEOF", ran.eof as i32);
        self.stage.describe_run(s, &mut d);
        if let Some((i, _)) = input {
            d.insert("inputStage", i);
        }
        (d, ran)
    }
}

/// How much an `explain` runs and tells: the plan only (`queryPlanner`),
/// or also the statistics of running its read part to completion (writes
/// are never applied). Only one plan is ever considered, so
/// `allPlansExecution` adds an empty list of the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbosity {
    QueryPlanner,
    ExecutionStats,
    AllPlansExecution,
}

impl Verbosity {
    pub fn parse(s: &str) -> MongoResult<Verbosity> {
        match s {
            "queryPlanner" => Ok(Verbosity::QueryPlanner),
            "executionStats" => Ok(Verbosity::ExecutionStats),
            "allPlansExecution" => Ok(Verbosity::AllPlansExecution),
            other => Err(MongoError::bad_value(format!(
                "verbosity string must be one of {{'queryPlanner', 'executionStats', 'allPlansExecution'}}, got '{other}'"
            ))),
        }
    }

    /// Whether the plan runs.
    pub fn runs(self) -> bool {
        self != Verbosity::QueryPlanner
    }

    /// The reply's plan sections: `queryPlanner` and, when the plan ran,
    /// `executionStats`.
    pub fn sections(self, planner: Document, exec: Option<Document>) -> Document {
        let mut out = doc! {"explainVersion": "1", "queryPlanner": planner};
        if let Some(mut e) = exec {
            if self == Verbosity::AllPlansExecution {
                e.insert("allPlansExecution", Vec::<Bson>::new());
            }
            out.insert("executionStats", e);
        }
        out
    }
}

/// explain of a read by `filter`, `sort` and `hint` on `coll` (named `ns`):
/// the read part of `aggregate` (its leading `$match` and a `$sort` right
/// after it), `distinct`, `update`, `delete` and `findAndModify`. The
/// `queryPlanner` section, and with `execute` the `executionStats` of
/// reading every match.
pub fn explain_read(
    coll: Option<&Collection>,
    ns: String,
    filter: &Document,
    sort: Option<&SortSpec>,
    hint: Option<&Hint>,
    execute: bool,
) -> MongoResult<(Document, Option<Document>)> {
    let m = Matcher::parse_doc(filter)?;
    let started = Instant::now();
    let chosen = super::choose(coll, &m, Some(filter), sort, hint)?;
    let mut tree = StageTree::of_plan(&chosen, filter, false);
    let blocking_sort = sort.filter(|_| !chosen.provides_sort);
    if let Some(s) = blocking_sort {
        tree = tree.sort(s, None);
    }
    let planner = query_planner(ns, filter, &tree);
    if !execute {
        return Ok((planner, None));
    }
    let stats = Arc::new(Stats::default());
    let mut src = super::execute(coll, &chosen, &m, stats.clone())?;
    if let Some(s) = blocking_sort {
        src = super::sorted_source(src, s, None, true, SORT_MEMORY_LIMIT, stats.clone())?;
    }
    for d in super::counted(src, stats.clone(), |s| &s.out) {
        d?;
    }
    let stages = tree.execution_stages(&stats);
    Ok((planner, Some(execution_stats(&stats, started, stages))))
}

/// explain's `queryPlanner` section: the plan `tree` the planner chose for
/// `filter` (as sent) on the namespace `ns`. Only one plan is ever
/// considered, so none is rejected.
pub fn query_planner(ns: String, filter: &Document, tree: &StageTree<'_>) -> Document {
    doc! {
        "namespace": ns,
        "parsedQuery": parsed_query(filter),
        "indexFilterSet": false,
        "winningPlan": tree.winning_plan(),
        "rejectedPlans": [],
    }
}

/// explain's `executionStats` section: what the plan that ran since
/// `started` returned and examined (`stats`), and its `executionStages`.
pub fn execution_stats(stats: &Stats, started: Instant, stages: Document) -> Document {
    let n = crate::reply::count;
    doc! {
        "executionSuccess": true,
        "nReturned": n(stats.out.n()),
        "executionTimeMillis": n(started.elapsed().as_millis() as u64),
        "totalKeysExamined": n(stats.keys()),
        "totalDocsExamined": n(stats.docs()),
        "executionStages": stages,
    }
}

/// The filter as mongod's explain shows its parsed form for the common
/// shapes: a field compared to a plain value is an `$eq` (a regular
/// expression value a `$regex`), operator documents stay as sent. (mongod
/// also gathers several conditions under `$and` in its canonical order;
/// BisonDB keeps them as one document.)
fn parsed_query(filter: &Document) -> Document {
    let mut out = Document::new();
    for (k, v) in filter {
        let shown = match v {
            _ if k.starts_with('$') => v.clone(),
            Bson::Document(d) if d.keys().next().is_some_and(|f| f.starts_with('$')) => v.clone(),
            Bson::RegularExpression(r) => {
                let mut d = doc! {"$regex": r.pattern.as_str()};
                if !r.options.is_empty() {
                    d.insert("$options", r.options.as_str());
                }
                Bson::Document(d)
            }
            _ => Bson::Document(doc! {"$eq": v.clone()}),
        };
        out.insert(k.clone(), shown);
    }
    out
}

/// A stage with nothing to read: EOF (nothing can match, the collection
/// does not exist) or RECORD_STORE_FAST_COUNT (a count from the catalog).
struct NothingToRead(&'static str);

impl Stage for NothingToRead {
    fn name(&self) -> &'static str {
        self.0
    }
    fn describe(&self, _: &mut Document) {}
    fn ran(&self, _: &Stats, _: Option<&Ran>) -> Ran {
        Ran::once()
    }
}

/// The documents an index scan named, read and checked against the filter.
pub struct FetchStage<'a> {
    pub filter: Option<&'a Document>,
}

impl Stage for FetchStage<'_> {
    fn name(&self) -> &'static str {
        "FETCH"
    }
    fn filter(&self) -> Option<&Document> {
        self.filter
    }
    fn describe(&self, _: &mut Document) {}
    fn ran(&self, s: &Stats, input: Option<&Ran>) -> Ran {
        Ran::passing_through(input, s.access.n(), s.access.is_eof())
    }
    fn describe_run(&self, s: &Stats, out: &mut Document) {
        out.insert("docsExamined", crate::reply::count(s.docs()));
        out.insert("alreadyHasObj", 0);
    }
}

struct SkipStage(u64);

impl Stage for SkipStage {
    fn name(&self) -> &'static str {
        "SKIP"
    }
    fn describe(&self, out: &mut Document) {
        out.insert("skipAmount", self.0 as i64);
    }
    fn ran(&self, s: &Stats, input: Option<&Ran>) -> Ran {
        Ran::passing_through(input, s.skip.n(), s.skip.is_eof())
    }
}

struct LimitStage(u64);

impl Stage for LimitStage {
    fn name(&self) -> &'static str {
        "LIMIT"
    }
    fn describe(&self, out: &mut Document) {
        out.insert("limitAmount", self.0 as i64);
    }
    fn ran(&self, s: &Stats, input: Option<&Ran>) -> Ran {
        let advanced = s.out.n();
        let hit = advanced >= self.0;
        let (input_works, input_eof) = input.map_or((0, true), |c| (c.works, c.eof));
        let eof = hit || input_eof;
        Ran {
            works: (input_works + u64::from(hit && !input_eof)).max(advanced + u64::from(eof)),
            advanced,
            eof,
        }
    }
}

/// A stage with no fields of its own that hands on what its input returns.
pub struct PassThrough(pub &'static str);

impl Stage for PassThrough {
    fn name(&self) -> &'static str {
        self.0
    }
    fn describe(&self, _: &mut Document) {}
    fn ran(&self, s: &Stats, input: Option<&Ran>) -> Ran {
        Ran::as_input(input, s)
    }
}

struct ProjectionStage<'a>(&'a Document);

impl Stage for ProjectionStage<'_> {
    fn name(&self) -> &'static str {
        "PROJECTION_SIMPLE"
    }
    fn describe(&self, out: &mut Document) {
        out.insert("transformBy", self.0.clone());
    }
    fn ran(&self, s: &Stats, input: Option<&Ran>) -> Ran {
        Ran::as_input(input, s)
    }
}

/// `count`: it returns nothing, it counts (the command adds `nCounted`).
struct CountStage;

impl Stage for CountStage {
    fn name(&self) -> &'static str {
        "COUNT"
    }
    fn describe(&self, _: &mut Document) {}
    fn ran(&self, _: &Stats, input: Option<&Ran>) -> Ran {
        let (works, eof) = input.map_or((1, true), |c| (c.works, c.eof));
        Ran {
            works,
            advanced: 0,
            eof,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{parsed_query, Verbosity};
    use bson::{doc, Regex};

    #[test]
    fn verbosity_names_the_three_levels_or_fails_with_code_2() {
        for (name, v) in [
            ("queryPlanner", Verbosity::QueryPlanner),
            ("executionStats", Verbosity::ExecutionStats),
            ("allPlansExecution", Verbosity::AllPlansExecution),
        ] {
            assert_eq!(Verbosity::parse(name).ok(), Some(v));
        }
        let e = Verbosity::parse("all")
            .err()
            .unwrap_or_else(|| panic!("'all' should fail"));
        assert_eq!(e.code.code(), 2);
        assert_eq!(
            e.message,
            "verbosity string must be one of {'queryPlanner', 'executionStats', 'allPlansExecution'}, got 'all'"
        );
    }

    #[test]
    fn parsed_query_shows_equalities_as_eq() {
        assert_eq!(parsed_query(&doc! {"a": 3}), doc! {"a": {"$eq": 3}});
        assert_eq!(
            parsed_query(&doc! {"a": {"x": 1}}),
            doc! {"a": {"$eq": {"x": 1}}}
        );
        assert_eq!(
            parsed_query(&doc! {"a": {"$gt": 1}, "$or": [{"b": 1}]}),
            doc! {"a": {"$gt": 1}, "$or": [{"b": 1}]}
        );
        let re = Regex {
            pattern: "^x".to_string().try_into().expect("pattern"),
            options: "i".to_string().try_into().expect("options"),
        };
        assert_eq!(
            parsed_query(&doc! {"s": re}),
            doc! {"s": {"$regex": "^x", "$options": "i"}}
        );
    }
}
