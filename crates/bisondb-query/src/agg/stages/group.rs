//! `$group`: buckets documents by the `_id` expression (canonical keys, so
//! 1 and 1.0 share a group) and folds accumulators per bucket. Output is in
//! first-seen group order with `_id` first.
//!
//! Memory: the groups' keys and accumulator states are counted (estimated,
//! as mongod does) against `internalDocumentSourceGroupMaxMemoryBytes`, and
//! against the operation's memory (`bisondb_error::memory`). Past the first,
//! without `allowDiskUse`, the stage fails with 292; the second refusing is
//! 146 ExceededMemoryLimit, or with `allowDiskUse` the start of spilling
//! (then 146 only when the groups already in memory grow past it). With it, the groups
//! already in memory keep accumulating, and every document of a group not in
//! memory yet is spilled with its group key through the external sort
//! ([`Sorter`]); after the input ends, the spilled documents come back
//! ordered by key (stably, so `$first`/`$push` see input order) and are
//! aggregated one group at a time. The two sets of keys are disjoint, so no
//! accumulator state ever needs merging. Spilled groups come after the
//! in-memory ones (mongod's output order is unspecified too).

use crate::agg::accumulators::{
    accumulate_all, finish_all, new_states, AccOp, AccState, Accumulator,
};
use crate::agg::spill::{approx_doc_size, approx_size, MemoryLimits, SortedDocs, Sorter};
use crate::agg::{spec_doc, DocStream, RawDocStream, RunCtx, Stage};
use crate::expr::raw::{owned_fields, RawCx, RawExpr};
use crate::expr::{Expr, Vars};
use crate::key::canonical_key_in;
use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, Document, RawDocumentBuf};
use std::collections::HashMap;
use std::sync::Arc;

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
    /// Documents folded in, and the states' size when last measured (at
    /// every power of two of `docs`, so measuring stays amortised O(1)).
    docs: u64,
    measured: usize,
}

/// Estimated memory of an accumulator state.
fn state_size(st: &AccState) -> usize {
    let values = |v: &mut dyn Iterator<Item = &Bson>| 24 + v.map(approx_size).sum::<usize>();
    match st {
        AccState::Push(v) | AccState::FirstN(v, _) | AccState::Extremes(v, _) => {
            values(&mut v.iter())
        }
        // The values and their canonical keys.
        AccState::Set(v, _) => 2 * values(&mut v.iter()),
        AccState::LastN(v, _) => values(&mut v.iter()),
        AccState::Merge(d) => approx_doc_size(d),
        AccState::Ranked { items, .. } => {
            24 + items
                .iter()
                .map(|(k, v)| values(&mut k.iter()) + approx_size(v))
                .sum::<usize>()
        }
        AccState::Quantiles(a, b) => 48 + 8 * (a.len() + b.len()),
        AccState::Extreme(Some(v)) | AccState::First(Some(v)) | AccState::Last(v) => {
            16 + approx_size(v)
        }
        _ => 32,
    }
}

fn new_group(stage: &GroupStage, id: Bson) -> Group {
    Group {
        id,
        states: new_states(&stage.fields),
        docs: 0,
        measured: 0,
    }
}

fn finish_group(stage: &GroupStage, g: Group) -> Document {
    finish_all(g.id, &stage.fields, g.states)
}

/// The spilled documents' sort: by group key, the bytes of the record's `k`.
fn spill_sorter(limits: &MemoryLimits) -> Sorter<Vec<u8>> {
    Sorter::new(
        limits.group_bytes,
        limits,
        Arc::new(|raw: &bson::RawDocument| {
            raw.get_binary("k")
                .map(|b| b.bytes.to_vec())
                .map_err(|e| MongoError::internal(format!("corrupt $group spill record: {e}")))
        }),
        Arc::new(|a: &Vec<u8>, b: &Vec<u8>| a.cmp(b)),
    )
}

/// `$group`'s key and accumulators compiled for raw input documents.
struct RawGroup {
    id: RawExpr,
    accs: Vec<RawAcc>,
}

/// How an accumulator is fed from a raw document.
enum RawAcc {
    /// Its argument evaluated over the raw document, folded as a value.
    Value(RawExpr),
    /// `$top`/`$bottom` (and their N forms) and `$accumulator` read more
    /// than a value (a sort key, the document for JavaScript): they get an
    /// owned document of the top-level fields they read.
    Owned(Vec<String>),
}

impl RawGroup {
    fn compile(stage: &GroupStage) -> RawGroup {
        let accs = stage
            .fields
            .iter()
            .map(|(_, acc)| match acc.op {
                AccOp::Top | AccOp::Bottom | AccOp::TopN | AccOp::BottomN | AccOp::Js => {
                    let mut deps = Vec::new();
                    acc.top_level_deps(&mut deps);
                    RawAcc::Owned(deps)
                }
                _ => RawAcc::Value(RawExpr::compile(&acc.arg)),
            })
            .collect();
        RawGroup {
            id: RawExpr::compile(&stage.id),
            accs,
        }
    }

    fn accumulate<'a>(
        &'a self,
        stage: &GroupStage,
        states: &mut [AccState],
        cx: &RawCx<'a, '_>,
        vars: &Vars,
    ) -> MongoResult<()> {
        for ((raw, (_, acc)), st) in self.accs.iter().zip(&stage.fields).zip(states.iter_mut()) {
            match raw {
                RawAcc::Value(e) => st.add_in(acc.op, e.eval_value(cx)?, vars.collation())?,
                RawAcc::Owned(deps) => acc.accumulate(st, &cx.owned_fields(Some(deps))?, vars)?,
            }
        }
        Ok(())
    }
}

/// One input document of [`group_all`].
enum Doc {
    Owned(Document),
    Raw(RawDocumentBuf),
}

/// `$group`'s input: owned documents, or stored ones read raw.
enum Input {
    Owned(DocStream),
    Raw(RawDocStream),
}

fn group_all(
    stage: Arc<GroupStage>,
    input: Input,
    vars: Vars<'static>,
    limits: &MemoryLimits,
) -> MongoResult<DocStream> {
    let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut groups: Vec<Group> = Vec::new();
    let mut bytes = 0usize;
    // `bytes` as counted against the operation's (and server's) memory.
    let mut charge = bisondb_error::memory::Charge::new();
    let mut overflow: Option<Sorter<Vec<u8>>> = None;
    let (docs, compiled): (Box<dyn Iterator<Item = MongoResult<Doc>> + Send>, _) = match input {
        Input::Owned(s) => (Box::new(s.map(|r| r.map(Doc::Owned))), None),
        Input::Raw(s) => (
            Box::new(s.map(|r| r.map(Doc::Raw))),
            Some(RawGroup::compile(&stage)),
        ),
    };
    let compiled = compiled.as_ref();
    // The current document's key, reused so a known group costs no allocation.
    let mut key = Vec::new();
    for r in docs {
        let doc = r?;
        key.clear();
        // The raw path keys the document without building its `_id`; the
        // owned one has built it already.
        let (id, cx) = match (&doc, compiled) {
            (Doc::Raw(d), Some(g)) => {
                let cx = RawCx::new(d, &vars);
                g.id.key_into(&cx, &mut key, vars.collation())?;
                (None, Some(cx))
            }
            (Doc::Raw(_), None) => return Err(MongoError::internal("raw $group not compiled")),
            (Doc::Owned(d), _) => {
                let id = stage.id.eval(d, &vars)?;
                canonical_key_in(id.as_ref(), &mut key, vars.collation());
                (Some(id), None)
            }
        };
        let slot = match index.get(key.as_slice()) {
            Some(i) => *i,
            None => {
                let id = match (id, &cx, compiled) {
                    (Some(id), _, _) => id,
                    (None, Some(cx), Some(g)) => g.id.eval_value(cx)?,
                    _ => return Err(MongoError::internal("$group key without its value")),
                }
                .unwrap_or(Bson::Null);
                if let Some(sorter) = overflow.as_mut() {
                    let doc = match &doc {
                        Doc::Owned(d) => d.clone(),
                        Doc::Raw(d) => owned_fields(d, None)?,
                    };
                    let rec = bson::doc! {
                        "k": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: key.clone() },
                        "i": id,
                        "d": doc,
                    };
                    let size = approx_doc_size(&rec);
                    sorter.push(key.clone(), rec, size)?;
                    continue;
                }
                bytes = bytes
                    .saturating_add(2 * key.len() + approx_size(&id))
                    .saturating_add(32 * stage.fields.len());
                groups.push(new_group(&stage, id));
                let i = groups.len() - 1;
                index.insert(key.clone(), i);
                i
            }
        };
        let g = groups
            .get_mut(slot)
            .ok_or_else(|| MongoError::internal("group index out of range"))?;
        match (&doc, &cx, compiled) {
            (Doc::Owned(d), _, _) => accumulate_all(&stage.fields, &mut g.states, d, &vars)?,
            (_, Some(cx), Some(compiled)) => {
                compiled.accumulate(&stage, &mut g.states, cx, &vars)?
            }
            _ => return Err(MongoError::internal("raw $group not compiled")),
        }
        g.docs += 1;
        if g.docs.is_power_of_two() {
            let m: usize = g.states.iter().map(state_size).sum();
            bytes = bytes.saturating_sub(g.measured).saturating_add(m);
            g.measured = m;
        }
        if bytes > limits.group_bytes && overflow.is_none() {
            if !limits.allow_disk_use {
                return Err(crate::agg::spill::group_limit_error());
            }
            overflow = Some(spill_sorter(limits));
        }
        if bytes != charge.bytes() {
            if let Err(e) = charge.set(bytes) {
                // The groups in memory cannot spill; new ones can.
                if overflow.is_some() || !limits.allow_disk_use {
                    return Err(e);
                }
                overflow = Some(spill_sorter(limits));
            }
        }
    }
    let st = stage.clone();
    let in_memory = groups.into_iter().map(move |g| {
        let _held = &charge;
        Ok(finish_group(&st, g))
    });
    Ok(match overflow {
        None => Box::new(in_memory),
        Some(sorter) => Box::new(in_memory.chain(SpilledGroups {
            sorted: sorter.finish()?,
            pending: None,
            stage,
            vars,
            failed: false,
        })),
    })
}

/// Aggregates the spilled documents, which arrive ordered by group key.
struct SpilledGroups {
    sorted: SortedDocs,
    pending: Option<Document>,
    stage: Arc<GroupStage>,
    vars: Vars<'static>,
    failed: bool,
}

impl SpilledGroups {
    fn next_group(&mut self) -> MongoResult<Option<Document>> {
        let first = match self.pending.take() {
            Some(r) => r,
            None => match self.sorted.next() {
                Some(r) => r?,
                None => return Ok(None),
            },
        };
        let key = record_key(&first)?;
        let mut g = new_group(&self.stage, first.get("i").cloned().unwrap_or(Bson::Null));
        let mut rec = first;
        loop {
            let doc = match rec.remove("d") {
                Some(Bson::Document(d)) => d,
                _ => return Err(MongoError::internal("corrupt $group spill record")),
            };
            accumulate_all(&self.stage.fields, &mut g.states, &doc, &self.vars)?;
            match self.sorted.next() {
                None => break,
                Some(r) => {
                    let next = r?;
                    if record_key(&next)? != key {
                        self.pending = Some(next);
                        break;
                    }
                    rec = next;
                }
            }
        }
        Ok(Some(finish_group(&self.stage, g)))
    }
}

fn record_key(rec: &Document) -> MongoResult<Vec<u8>> {
    rec.get_binary_generic("k")
        .cloned()
        .map_err(|e| MongoError::internal(format!("corrupt $group spill record: {e}")))
}

impl Iterator for SpilledGroups {
    type Item = MongoResult<Document>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match self.next_group() {
            Ok(d) => d.map(Ok),
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

impl Stage for GroupStage {
    fn top_level_deps(&self, out: &mut Vec<String>) -> bool {
        self.id.top_level_deps(out) && self.fields.iter().all(|(_, a)| a.top_level_deps(out))
    }

    fn run(self: Box<Self>, input: DocStream, cx: &RunCtx) -> DocStream {
        self.run_input(Input::Owned(input), cx)
    }

    /// Raw when the key and accumulators name the fields they read: a
    /// `$$ROOT` would convert the whole document at every use.
    fn reads_raw(&self) -> bool {
        self.top_level_deps(&mut Vec::new())
    }

    fn run_raw(self: Box<Self>, input: RawDocStream, cx: &RunCtx) -> DocStream {
        self.run_input(Input::Raw(input), cx)
    }
}

impl GroupStage {
    fn run_input(self: Box<Self>, input: Input, cx: &RunCtx) -> DocStream {
        let vars = cx.vars();
        let limits = cx.memory.clone();
        let stage: Arc<GroupStage> = Arc::from(self);
        crate::agg::blocking_stream(input, move |inp| group_all(stage, inp, vars, &limits))
    }
}
