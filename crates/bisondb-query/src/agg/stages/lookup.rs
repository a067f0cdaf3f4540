//! `$lookup`: joins each input document with documents of another collection
//! of the same database. Supported: the equality form (`localField` /
//! `foreignField`), an uncorrelated `pipeline`, and both together. `let`
//! (correlated sub-pipelines) is not supported yet.

use super::map_docs_prepared;
use crate::agg::spill::approx_doc_size;
use crate::agg::{DocStream, Pipeline, RunCtx, Stage};
use crate::collation::Collation;
use crate::expr::{check_var_name, Expr};
use crate::key::key_of_in;
use crate::path::edit::{parse_index, set_path, split};
use crate::value::type_name;
use bisondb_error::memory::Charge;
use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{Bson, Document};
use std::collections::HashMap;

#[derive(Debug)]
pub(crate) struct LookupStage {
    from: String,
    local: Option<String>,
    foreign: Option<Vec<String>>,
    as_path: Vec<String>,
    pipeline: Option<Vec<Document>>,
    /// `let` variables, substituted into the sub-pipeline per input document.
    lets: Vec<(String, Expr)>,
}

fn field_string(v: &Bson, what: &str) -> MongoResult<String> {
    match v {
        Bson::String(s)
            if !s.is_empty() && !s.starts_with('$') && !s.split('.').any(str::is_empty) =>
        {
            Ok(s.clone())
        }
        Bson::String(s) => Err(MongoError::failed_to_parse(format!(
            "$lookup argument '{what}: \"{s}\"' is not a valid field path"
        ))),
        other => Err(MongoError::failed_to_parse(format!(
            "$lookup argument '{what}' must be a string, found {}: {other}",
            type_name(other)
        ))),
    }
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let Bson::Document(spec) = arg else {
        return Err(MongoError::failed_to_parse(format!(
            "the $lookup stage specification must be an object, but found {}",
            type_name(arg)
        )));
    };
    let (mut from, mut local, mut foreign, mut as_field, mut pipeline) =
        (None, None, None, None, None);
    let mut lets: Vec<(String, Expr)> = Vec::new();
    for (k, v) in spec {
        match k.as_str() {
            "from" => match v {
                Bson::String(s) => from = Some(s.clone()),
                Bson::Document(_) => {
                    return Err(MongoError::new(
                        ErrorCode::NotImplemented,
                        "$lookup from another database is not supported by BisonDB yet",
                    ))
                }
                other => {
                    return Err(MongoError::failed_to_parse(format!(
                        "$lookup 'from' field must be a string, found {}",
                        type_name(other)
                    )))
                }
            },
            "localField" => local = Some(field_string(v, k)?),
            "foreignField" => foreign = Some(field_string(v, k)?),
            "as" => as_field = Some(field_string(v, k)?),
            "let" => {
                let Bson::Document(vars) = v else {
                    return Err(MongoError::failed_to_parse(format!(
                        "$lookup argument 'let' must be an object, is type {}",
                        type_name(v)
                    )));
                };
                for (name, e) in vars {
                    check_var_name(name)?;
                    lets.push((name.clone(), Expr::parse(e)?));
                }
            }
            "pipeline" => {
                let Bson::Array(stages) = v else {
                    return Err(MongoError::failed_to_parse(
                        "$lookup 'pipeline' must be an array of stages",
                    ));
                };
                let mut docs = Vec::with_capacity(stages.len());
                for st in stages {
                    match st {
                        Bson::Document(d) => docs.push(d.clone()),
                        _ => {
                            return Err(MongoError::failed_to_parse(
                                "$lookup 'pipeline' must be an array of stages",
                            ))
                        }
                    }
                }
                pipeline = Some(docs);
            }
            other => {
                return Err(MongoError::failed_to_parse(format!(
                    "unknown argument to $lookup: {other}"
                )))
            }
        }
    }
    let as_field = as_field
        .ok_or_else(|| MongoError::failed_to_parse("must specify 'as' field for a $lookup"))?;
    let from =
        from.ok_or_else(|| MongoError::failed_to_parse("must specify 'from' field for a $lookup"))?;
    match (&local, &foreign, &pipeline) {
        (Some(_), Some(_), _) | (None, None, Some(_)) => {}
        _ => {
            return Err(MongoError::failed_to_parse(
                "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be specified",
            ))
        }
    }
    if let Some(stages) = &pipeline {
        // Validate now, with the variables standing in as nulls.
        let probe: Vec<(String, Option<Bson>)> = lets
            .iter()
            .map(|(n, _)| (n.clone(), Some(Bson::Null)))
            .collect();
        if Pipeline::parse(&substitute_stages(stages, &probe))?
            .output()
            .is_some()
        {
            return Err(MongoError::location(
                51047,
                "$out and $merge are not allowed to be used within a $lookup stage",
            ));
        }
    }
    Ok(vec![Box::new(LookupStage {
        from,
        local,
        foreign: foreign.as_deref().map(split),
        as_path: split(&as_field),
        pipeline,
        lets,
    })])
}

/// Replaces `$$name` and `$$name.path` strings by the variables' values (as
/// `$literal`), which is how `let` variables reach the sub-pipeline.
fn substitute(v: &Bson, vals: &[(String, Option<Bson>)]) -> Bson {
    match v {
        Bson::String(s) if s.starts_with("$$") => {
            let body = &s[2..];
            let (name, path) = match body.split_once('.') {
                Some((n, p)) => (n, Some(p)),
                None => (body, None),
            };
            let Some((_, val)) = vals.iter().find(|(n, _)| n == name) else {
                return v.clone();
            };
            let resolved = match (val, path) {
                (Some(Bson::Document(d)), Some(p)) => crate::path::get_path_bson_fanout(d, p),
                (Some(Bson::Array(a)), Some(p)) => crate::path::get_path_bson_fanout(
                    &bson::doc! {"v": a.clone()},
                    &format!("v.{p}"),
                ),
                (_, Some(_)) => None,
                (val, None) => val.clone(),
            };
            match resolved {
                Some(x) => Bson::Document(bson::doc! {"$literal": x}),
                None => Bson::String("$$REMOVE".to_string()),
            }
        }
        Bson::Document(d) => Bson::Document(
            d.iter()
                .map(|(k, x)| (k.clone(), substitute(x, vals)))
                .collect(),
        ),
        Bson::Array(a) => Bson::Array(a.iter().map(|x| substitute(x, vals)).collect()),
        other => other.clone(),
    }
}

pub(crate) fn substitute_stages(
    stages: &[Document],
    vals: &[(String, Option<Bson>)],
) -> Vec<Document> {
    stages
        .iter()
        .map(|d| {
            d.iter()
                .map(|(k, x)| (k.clone(), substitute(x, vals)))
                .collect()
        })
        .collect()
}

/// Values a query equality on `parts` can match in `v`: reached values, and
/// for arrays also their elements (query semantics). Missing reads as null.
fn collect(v: &Bson, parts: &[String], out: &mut Vec<Bson>) {
    let Some((first, rest)) = parts.split_first() else {
        if let Bson::Array(a) = v {
            out.extend(a.iter().cloned());
        }
        out.push(v.clone());
        return;
    };
    match v {
        Bson::Document(d) => match d.get(first) {
            Some(x) => collect(x, rest, out),
            None => out.push(Bson::Null),
        },
        Bson::Array(a) => {
            if let Some(x) = parse_index(first).and_then(|i| a.get(i)) {
                collect(x, rest, out);
            }
            for e in a {
                if matches!(e, Bson::Document(_)) {
                    collect(e, parts, out);
                }
            }
        }
        _ => out.push(Bson::Null),
    }
}

/// Canonical keys a query equality on `parts` matches in `doc`.
/// Under a collation, strings it finds equal share a key.
pub(crate) fn equality_keys(
    doc: &Document,
    parts: &[String],
    c: Option<&Collation>,
) -> Vec<Vec<u8>> {
    let mut vals = Vec::new();
    collect(&Bson::Document(doc.clone()), parts, &mut vals);
    let mut keys: Vec<Vec<u8>> = vals.iter().map(|v| key_of_in(Some(v), c)).collect();
    keys.sort();
    keys.dedup();
    keys
}

fn local_keys(doc: &Document, local: &str, c: Option<&Collation>) -> Vec<Vec<u8>> {
    value_keys(crate::path::get_path_bson_fanout(doc, local).as_ref(), c)
}

/// Keys to look up for a local value: each element of an array (missing
/// and empty arrays look up null).
pub(crate) fn value_keys(v: Option<&Bson>, c: Option<&Collation>) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = match v {
        Some(Bson::Array(a)) if !a.is_empty() => a.iter().map(|x| key_of_in(Some(x), c)).collect(),
        Some(Bson::Array(_)) => vec![key_of_in(None, c)],
        other => vec![key_of_in(other, c)],
    };
    keys.sort();
    keys.dedup();
    keys
}

struct Joined {
    foreign: Vec<Document>,
    index: HashMap<Vec<u8>, Vec<usize>>,
    uncorrelated: Option<Vec<Bson>>,
    /// The foreign documents and their index, counted against the
    /// operation's memory (`bisondb_error::memory`) while the join runs.
    _charge: Charge,
}

impl LookupStage {
    fn prepare(&self, cx: &RunCtx) -> MongoResult<Joined> {
        let mut charge = Charge::new();
        let foreign: Vec<Document> = cx
            .read(&self.from, "$lookup")?
            .map(|d| {
                let d = d?;
                charge.grow(approx_doc_size(&d))?;
                Ok(d)
            })
            .collect::<MongoResult<_>>()?;
        let mut index: HashMap<Vec<u8>, Vec<usize>> = HashMap::new();
        let mut uncorrelated = None;
        match (&self.foreign, &self.pipeline) {
            (Some(parts), _) => {
                for (i, d) in foreign.iter().enumerate() {
                    for k in equality_keys(d, parts, cx.collation.as_deref()) {
                        charge.grow(k.len() + 64)?;
                        index.entry(k).or_default().push(i);
                    }
                }
            }
            (None, Some(stages)) if self.lets.is_empty() => {
                // The same matches join every input document: past the
                // largest document they would fail every join, so they fail
                // here before more of them are held.
                uncorrelated = Some(
                    run_sub(stages, foreign.clone(), cx, &self.from)?
                        .into_iter()
                        .map(Bson::Document)
                        .collect(),
                );
            }
            _ => {}
        }
        Ok(Joined {
            foreign,
            index,
            uncorrelated,
            _charge: charge,
        })
    }

    fn join(&self, mut doc: Document, j: &Joined, cx: &RunCtx) -> MongoResult<Document> {
        let matches: Vec<Bson> = if let Some(u) = &j.uncorrelated {
            u.clone()
        } else {
            let mut idx: Vec<usize> = Vec::new();
            if let Some(local) = &self.local {
                for k in local_keys(&doc, local, cx.collation.as_deref()) {
                    if let Some(v) = j.index.get(&k) {
                        idx.extend(v);
                    }
                }
            } else {
                idx.extend(0..j.foreign.len());
            }
            idx.sort_unstable();
            idx.dedup();
            let docs = bounded(
                idx.into_iter()
                    .filter_map(|i| j.foreign.get(i).cloned())
                    .map(Ok),
                &self.from,
            )?;
            match &self.pipeline {
                Some(stages) if !self.lets.is_empty() => {
                    let vars = cx.vars();
                    let mut vals = Vec::with_capacity(self.lets.len());
                    for (n, e) in &self.lets {
                        vals.push((n.clone(), e.eval(&doc, &vars)?));
                    }
                    run_sub(&substitute_stages(stages, &vals), docs, cx, &self.from)?
                }
                Some(stages) => run_sub(stages, docs, cx, &self.from)?,
                None => docs,
            }
            .into_iter()
            .map(Bson::Document)
            .collect()
        };
        set_path(&mut doc, &self.as_path, Bson::Array(matches))?;
        Ok(doc)
    }
}

fn run_sub(
    stages: &[Document],
    docs: Vec<Document>,
    cx: &RunCtx,
    from: &str,
) -> MongoResult<Vec<Document>> {
    let p = Pipeline::parse(stages)?;
    let input: DocStream = Box::new(docs.into_iter().map(Ok));
    bounded(p.run_stages(input, cx), from)
}

/// The matches of one join, checked against the operation's interruption per
/// document and failing as mongod (4568) once their total size passes the
/// largest document a stage may produce, so a join never holds more than
/// that for one input document.
fn bounded(
    matches: impl Iterator<Item = MongoResult<Document>>,
    from: &str,
) -> MongoResult<Vec<Document>> {
    let mut out = Vec::new();
    let mut total = 0usize;
    // Held until the matches join their document (counted no further).
    let mut charge = Charge::new();
    for d in matches {
        bisondb_error::interrupt::check()?;
        let d = d?;
        let size = crate::agg::spill::bson_doc_size(&d);
        charge.grow(size)?;
        total += size;
        if total > crate::agg::spill::MAX_INTERNAL_DOC_BYTES {
            return Err(MongoError::location(
                4568,
                format!(
                    "Total size of documents in {from} matching pipeline's $lookup stage exceeds {} bytes",
                    crate::agg::spill::MAX_INTERNAL_DOC_BYTES
                ),
            ));
        }
        out.push(d);
    }
    Ok(out)
}

impl Stage for LookupStage {
    fn run(self: Box<Self>, input: DocStream, cx: &RunCtx) -> DocStream {
        map_docs_prepared(
            input,
            (self, cx.clone()),
            |(st, cx)| st.prepare(cx),
            |(st, cx), doc, j| st.join(doc, j, cx),
        )
    }

    fn foreign_collections(&self, out: &mut Vec<String>) {
        out.push(self.from.clone());
        if let Some(stages) = &self.pipeline {
            if let Ok(p) = Pipeline::parse(stages) {
                out.extend(p.foreign_collections());
            }
        }
    }
}
