//! `$graphLookup`: recursive search over another collection, following
//! `connectFromField` values to documents whose `connectToField` matches,
//! starting from `startWith`, breadth first.
//!
//! Memory: the loaded collection with its key index, and per search the keys
//! seen and the documents found, are counted against the operation's memory
//! (`bisondb_error::memory`): a dense graph fails with 146
//! ExceededMemoryLimit instead of growing without bound.

use super::lookup::{equality_keys, value_keys};
use super::{map_docs_prepared, whole_number};
use crate::agg::spill::approx_doc_size;
use crate::agg::{spec_doc, DocStream, RunCtx, Stage};
use crate::expr::{Expr, Vars};
use crate::matcher::Matcher;
use crate::path::edit::{set_path, split};
use crate::value::type_name;
use bisondb_error::memory::Charge;
use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, Document};
use std::collections::{HashMap, HashSet};

#[derive(Debug)]
pub(crate) struct GraphLookupStage {
    from: String,
    start_with: Expr,
    connect_from: Vec<String>,
    connect_to: Vec<String>,
    as_path: Vec<String>,
    max_depth: Option<u64>,
    depth_field: Option<Vec<String>>,
    restrict: Option<Matcher>,
}

fn path_arg(v: &Bson, what: &str) -> MongoResult<Vec<String>> {
    match v {
        Bson::String(s)
            if !s.is_empty() && !s.starts_with('$') && !s.split('.').any(str::is_empty) =>
        {
            Ok(split(s))
        }
        other => Err(MongoError::location(
            40103,
            format!(
                "expected '{what}' option to $graphLookup to be a non-empty field path, found {}",
                type_name(other)
            ),
        )),
    }
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let spec = spec_doc(arg, 40327, |_| {
        "the $graphLookup stage specification must be an object".to_string()
    })?;
    let (mut from, mut start_with, mut connect_from, mut connect_to, mut as_path) =
        (None, None, None, None, None);
    let (mut max_depth, mut depth_field, mut restrict) = (None, None, None);
    for (k, v) in spec {
        match k.as_str() {
            "from" => match v {
                Bson::String(s) => from = Some(s.clone()),
                other => {
                    return Err(MongoError::location(
                        40103,
                        format!("expected 'from' to be a string, found {}", type_name(other)),
                    ))
                }
            },
            "startWith" => start_with = Some(Expr::parse(v)?),
            "connectFromField" => connect_from = Some(path_arg(v, k)?),
            "connectToField" => connect_to = Some(path_arg(v, k)?),
            "as" => as_path = Some(path_arg(v, k)?),
            "depthField" => depth_field = Some(path_arg(v, k)?),
            "maxDepth" => {
                let n = whole_number(v).ok_or_else(|| {
                    MongoError::location(
                        40100,
                        format!("maxDepth must be numeric, found type: {}", type_name(v)),
                    )
                })?;
                max_depth = Some(u64::try_from(n).map_err(|_| {
                    MongoError::location(
                        40101,
                        format!("maxDepth requires a nonnegative argument, found: {n}"),
                    )
                })?);
            }
            "restrictSearchWithMatch" => match v {
                Bson::Document(d) => restrict = Some(Matcher::parse_doc(d)?),
                other => {
                    return Err(MongoError::location(
                        40185,
                        format!(
                            "restrictSearchWithMatch must be an object, found {}",
                            type_name(other)
                        ),
                    ))
                }
            },
            other => {
                return Err(MongoError::location(
                    40104,
                    format!("Unknown argument to $graphLookup: {other}"),
                ))
            }
        }
    }
    let missing = |what: &str| {
        MongoError::location(
            40105,
            format!("missing '{what}' option to $graphLookup stage specification: {arg}"),
        )
    };
    Ok(vec![Box::new(GraphLookupStage {
        from: from.ok_or_else(|| missing("from"))?,
        start_with: start_with.ok_or_else(|| missing("startWith"))?,
        connect_from: connect_from.ok_or_else(|| missing("connectFromField"))?,
        connect_to: connect_to.ok_or_else(|| missing("connectToField"))?,
        as_path: as_path.ok_or_else(|| missing("as"))?,
        max_depth,
        depth_field,
        restrict,
    })])
}

struct Graph {
    docs: Vec<Document>,
    by_key: HashMap<Vec<u8>, Vec<usize>>,
    /// Every document and key held, counted against the operation's memory.
    _charge: Charge,
}

/// What one document found costs: its clone in the `as` array and its
/// entries in the visited sets.
fn found_size(d: &Document) -> usize {
    approx_doc_size(d) + 64
}

impl GraphLookupStage {
    fn load(&self, cx: &RunCtx) -> MongoResult<Graph> {
        let mut charge = Charge::new();
        let mut docs = Vec::new();
        for r in cx.read(&self.from, "$graphLookup")? {
            let d = r?;
            if self.restrict.as_ref().is_none_or(|m| m.matches_doc(&d)) {
                charge.grow(approx_doc_size(&d))?;
                docs.push(d);
            }
        }
        let mut by_key: HashMap<Vec<u8>, Vec<usize>> = HashMap::new();
        for (i, d) in docs.iter().enumerate() {
            for k in equality_keys(d, &self.connect_to, cx.collation.as_deref()) {
                charge.grow(k.len() + 64)?;
                by_key.entry(k).or_default().push(i);
            }
        }
        Ok(Graph {
            docs,
            by_key,
            _charge: charge,
        })
    }

    fn search(&self, mut doc: Document, g: &Graph, vars: &Vars) -> MongoResult<Document> {
        let start = self.start_with.eval(&doc, vars)?;
        let mut frontier: Vec<Vec<u8>> = value_keys(start.as_ref(), vars.collation());
        let mut seen_keys: HashSet<Vec<u8>> = HashSet::new();
        let mut found: Vec<(usize, u64)> = Vec::new();
        let mut visited: HashSet<usize> = HashSet::new();
        // The frontier's keys and the documents found, until the result is
        // handed on (mongod bounds this set too).
        let mut charge = Charge::new();
        let mut depth: u64 = 0;
        while !frontier.is_empty() && self.max_depth.is_none_or(|m| depth <= m) {
            let mut next = Vec::new();
            for k in frontier {
                if seen_keys.contains(&k) {
                    continue;
                }
                charge.grow(2 * k.len() + 64)?;
                seen_keys.insert(k.clone());
                for &i in g.by_key.get(&k).map(Vec::as_slice).unwrap_or_default() {
                    if !visited.insert(i) {
                        continue;
                    }
                    found.push((i, depth));
                    if let Some(d) = g.docs.get(i) {
                        charge.grow(found_size(d))?;
                        // A document without connectFromField ends its branch.
                        let v = crate::path::get_path_bson_fanout(d, &self.connect_from.join("."));
                        if v.as_ref().is_some_and(|x| !matches!(x, Bson::Null)) {
                            next.extend(value_keys(v.as_ref(), vars.collation()));
                        }
                    }
                }
            }
            frontier = next;
            depth += 1;
        }
        let mut out = Vec::with_capacity(found.len());
        for (i, depth) in found {
            let Some(d) = g.docs.get(i) else { continue };
            let mut d = d.clone();
            if let Some(df) = &self.depth_field {
                set_path(
                    &mut d,
                    df,
                    Bson::Int64(i64::try_from(depth).unwrap_or(i64::MAX)),
                )?;
            }
            out.push(Bson::Document(d));
        }
        set_path(&mut doc, &self.as_path, Bson::Array(out))?;
        Ok(doc)
    }
}

impl Stage for GraphLookupStage {
    fn run(self: Box<Self>, input: DocStream, cx: &RunCtx) -> DocStream {
        let vars = cx.vars();
        map_docs_prepared(
            input,
            (self, cx.clone(), vars),
            |(st, cx, _)| st.load(cx),
            |(st, _, vars), doc, g| st.search(doc, g, vars),
        )
    }

    fn foreign_collections(&self, out: &mut Vec<String>) {
        out.push(self.from.clone());
    }
}
