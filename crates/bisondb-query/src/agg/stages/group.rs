//! `$group`: buckets documents by the `_id` expression (canonical keys, so
//! 1 and 1.0 share a group) and folds accumulators per bucket. Output is in
//! first-seen group order with `_id` first.

use crate::agg::accumulators::{AccState, Accumulator};
use crate::agg::key::key_of_in;
use crate::agg::{spec_doc, DocStream, RunCtx, Stage};
use crate::expr::{Expr, Vars};
use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, Document};
use std::collections::HashMap;

#[derive(Debug)]
pub(crate) struct GroupStage {
    id: Expr,
    fields: Vec<(String, Accumulator)>,
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let spec = spec_doc(arg, 15947, |_| {
        "a group's fields must be specified in an object".to_string()
    })?;
    Ok(vec![Box::new(GroupStage::parse_spec(spec)?)])
}

impl GroupStage {
    pub(crate) fn parse_spec(spec: &Document) -> MongoResult<GroupStage> {
        let mut id = None;
        let mut fields = Vec::with_capacity(spec.len());
        for (k, v) in spec {
            if k == "_id" {
                id = Some(Expr::parse(v)?);
                continue;
            }
            if k.contains('.') {
                return Err(MongoError::location(
                    40235,
                    format!("The field name '{k}' cannot contain '.'"),
                ));
            }
            if k.starts_with('$') {
                return Err(MongoError::location(
                    40236,
                    format!("The field name '{k}' cannot be an operator name"),
                ));
            }
            fields.push((k.clone(), Accumulator::parse(k, v)?));
        }
        let id = id.ok_or_else(|| {
            MongoError::location(15955, "a group specification must include an _id")
        })?;
        Ok(GroupStage { id, fields })
    }

    pub(crate) fn new(id: Expr, fields: Vec<(String, Accumulator)>) -> GroupStage {
        GroupStage { id, fields }
    }
}

struct Group {
    id: Bson,
    states: Vec<AccState>,
}

fn group_all(stage: &GroupStage, input: DocStream, vars: Vars) -> MongoResult<Vec<Document>> {
    let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut groups: Vec<Group> = Vec::new();
    for r in input {
        let doc = r?;
        let id = stage.id.eval(&doc, &vars)?;
        let key = key_of_in(id.as_ref(), vars.collation());
        let slot = match index.get(&key) {
            Some(i) => *i,
            None => {
                groups.push(Group {
                    id: id.unwrap_or(Bson::Null),
                    states: stage.fields.iter().map(|(_, a)| a.new_state()).collect(),
                });
                let i = groups.len() - 1;
                index.insert(key, i);
                i
            }
        };
        let g = groups
            .get_mut(slot)
            .ok_or_else(|| MongoError::internal("group index out of range"))?;
        for ((_, acc), st) in stage.fields.iter().zip(g.states.iter_mut()) {
            acc.accumulate(st, &doc, &vars)?;
        }
    }
    Ok(groups
        .into_iter()
        .map(|g| {
            let mut out = Document::new();
            out.insert("_id", g.id);
            for ((name, acc), st) in stage.fields.iter().zip(g.states) {
                out.insert(name.clone(), st.finish(acc.op));
            }
            out
        })
        .collect())
}

impl Stage for GroupStage {
    fn top_level_deps(&self, out: &mut Vec<String>) -> bool {
        self.id.top_level_deps(out) && self.fields.iter().all(|(_, a)| a.top_level_deps(out))
    }

    fn run(self: Box<Self>, input: DocStream, cx: &RunCtx) -> DocStream {
        let vars = cx.vars();
        crate::agg::blocking(input, move |inp| group_all(&self, inp, vars))
    }
}
