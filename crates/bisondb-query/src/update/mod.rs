//! Update documents: replacement, operator (`$set`, `$inc`, ...) and
//! pipeline-style updates, applied to owned documents.
//!
//! Operator updates are parsed once into a list of `(path, operation)` pairs,
//! checked for conflicting paths, and sorted the way mongod (5.0+) walks its
//! update tree: field names in lexicographic order, numeric names in numeric
//! order. Applying them in that order reproduces mongod's field order for
//! newly created fields.

mod arith;
mod array;
mod fields;
/// Moved below the stages, which write fields the same way ([`crate::path::edit`]).
pub use crate::path::edit as path;
mod positional;

use crate::agg::update_pipeline::check_id_unchanged;
use crate::collation::Collation;
use crate::value::render;
use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{Bson, Document};
use std::cmp::Ordering;
use std::sync::Arc;

pub(crate) use arith::{ArithArg, BitOp, NumArg};
pub(crate) use array::{PullCond, PushSpec};

/// Longest dotted path accepted: deeper documents exceed BSON's nesting
/// limit anyway, and the bound keeps path recursion shallow.
const MAX_PATH_PARTS: usize = 200;

/// A dotted field path as written in the update, with its components.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldPath {
    pub dotted: String,
    pub parts: Vec<String>,
}

impl FieldPath {
    /// Parses an update path, rejecting the forms mongod rejects.
    fn parse(path: &str) -> MongoResult<FieldPath> {
        if path.is_empty() {
            return Err(MongoError::new(
                ErrorCode::EmptyFieldName,
                "An empty update path is not valid.",
            ));
        }
        let parts = path::split(path);
        if parts.len() > MAX_PATH_PARTS {
            return Err(MongoError::bad_value(format!(
                "The update path '{}...' has more than {MAX_PATH_PARTS} components",
                path.chars().take(64).collect::<String>()
            )));
        }
        for p in &parts {
            if p.is_empty() {
                return Err(MongoError::new(
                    ErrorCode::EmptyFieldName,
                    format!("The update path '{path}' contains an empty field name, which is not allowed."),
                ));
            }
            if let positional::Component::Filtered(id) = positional::classify(p) {
                positional::check_identifier(id, path)?;
            }
        }
        Ok(FieldPath {
            dotted: path.to_string(),
            parts,
        })
    }

    /// The first `$`-prefixed field name in the path that is not a
    /// positional operator (`$`, `$[]`, `$[id]`).
    fn dollar_field(&self) -> Option<&str> {
        self.parts
            .iter()
            .find(|p| p.starts_with('$') && !positional::is_positional(p))
            .map(String::as_str)
    }

    /// mongod (5.0+) validates an update's `$`-prefixed field names when it
    /// stores the changed fields, not when it parses the update, and an
    /// upsert that inserts is validated as an insert, which accepts them
    /// (manual, "Dollar-Prefixed Field Names": "An update which creates a
    /// new document during an upsert is treated as an insert rather than an
    /// update for field name validation"). So the refusal happens here, for
    /// an operation about to change an existing document. `$unset` is exempt:
    /// it stores nothing, and through a missing field it does nothing; so is
    /// `$setOnInsert`, which changes nothing in an existing document.
    fn check_storable(&self, kind: &OpKind, ctx: &Ctx) -> MongoResult<()> {
        if ctx.inserting || matches!(kind, OpKind::Unset | OpKind::SetOnInsert(_)) {
            return Ok(());
        }
        let mut paths = vec![self];
        if let OpKind::Rename(to) = kind {
            paths.push(to);
        }
        for fp in paths {
            if let Some(p) = fp.dollar_field() {
                return Err(MongoError::new(
                    ErrorCode::DollarPrefixedFieldName,
                    format!(
                        "The dollar ($) prefixed field '{p}' in '{}' is not valid for storage.",
                        fp.dotted
                    ),
                ));
            }
        }
        Ok(())
    }

    fn has_positional(&self) -> bool {
        self.parts.iter().any(|p| positional::is_positional(p))
    }

    fn is_prefix_of(&self, other: &FieldPath) -> bool {
        self.parts.len() <= other.parts.len()
            && self.parts.iter().zip(&other.parts).all(|(a, b)| a == b)
    }
}

/// mongod's update-tree order for one path component: numeric names in
/// numeric order, everything else by bytes.
fn cmp_component(a: &str, b: &str) -> Ordering {
    match (path::parse_index(a), path::parse_index(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => a.as_bytes().cmp(b.as_bytes()),
    }
}

fn cmp_paths(a: &FieldPath, b: &FieldPath) -> Ordering {
    for (x, y) in a.parts.iter().zip(&b.parts) {
        match cmp_component(x, y) {
            Ordering::Equal => {}
            o => return o,
        }
    }
    a.parts.len().cmp(&b.parts.len())
}

/// One parsed update operation.
#[derive(Debug, Clone)]
pub(crate) enum OpKind {
    Set(Bson),
    SetOnInsert(Bson),
    Unset,
    CurrentDate { timestamp: bool },
    Rename(FieldPath),
    Inc(ArithArg),
    Mul(ArithArg),
    Min(Bson),
    Max(Bson),
    Bit(Vec<(BitOp, NumArg)>),
    Push(PushSpec),
    AddToSet(Vec<Bson>),
    Pop { first: bool },
    Pull(PullCond),
    PullAll(Vec<Bson>),
}

/// Per-application context used by operators for their messages and `$setOnInsert`.
pub(crate) struct Ctx {
    pub inserting: bool,
    /// `{_id: ...}` as mongod puts it in error messages.
    pub id_desc: String,
    /// The update's collation (its query's), for `$min`/`$max`, `$addToSet`,
    /// `$pull`, `$pullAll` and `$push`'s `$sort`; `None`: simple.
    pub collation: Option<Arc<Collation>>,
}

/// A parsed operator-style update.
#[derive(Debug, Clone)]
pub struct OperatorUpdate {
    ops: Vec<(FieldPath, OpKind)>,
    array_filters: Vec<positional::ArrayFilter>,
}

/// A parsed update: a replacement document, operators, or a pipeline.
#[derive(Debug, Clone)]
pub enum UpdateSpec {
    Replacement(Document),
    Operators(OperatorUpdate),
    Pipeline(Vec<Document>),
}

/// The update operators (modifiers) an operator-style update may use.
pub const MODIFIERS: &[&str] = &[
    "$addToSet",
    "$bit",
    "$currentDate",
    "$inc",
    "$max",
    "$min",
    "$mul",
    "$pop",
    "$pull",
    "$pullAll",
    "$push",
    "$rename",
    "$set",
    "$setOnInsert",
    "$unset",
];

impl UpdateSpec {
    /// Parses an update document. A first key starting with `$` makes it an
    /// operator update (every key must then be a modifier); otherwise it is a
    /// replacement (the server rejects `$`-prefixed top-level fields in it).
    pub fn parse(update: &Document) -> MongoResult<UpdateSpec> {
        Self::parse_with_array_filters(update, &[])
    }

    /// Like [`UpdateSpec::parse`], with the update's `arrayFilters` for
    /// `$[<identifier>]` paths. Every filter must be used by some path.
    pub fn parse_with_array_filters(
        update: &Document,
        array_filters: &[Document],
    ) -> MongoResult<UpdateSpec> {
        let is_ops = update.keys().next().is_some_and(|k| k.starts_with('$'));
        if !is_ops {
            return Ok(UpdateSpec::Replacement(update.clone()));
        }
        let mut ops: Vec<(FieldPath, OpKind)> = Vec::new();
        for (modifier, arg) in update {
            if MODIFIERS.binary_search(&modifier.as_str()).is_err() {
                return Err(MongoError::failed_to_parse(format!(
                    "Unknown modifier: {modifier}. Expected a valid update modifier or pipeline-style update specified as an array"
                )));
            }
            let Bson::Document(fields) = arg else {
                return Err(MongoError::failed_to_parse(format!(
                    "Modifiers operate on fields but we found type {} instead. For example: {{$mod: {{<field>: ...}}}} not {{{modifier}: {}}}",
                    crate::value::type_name(arg),
                    render(arg)
                )));
            };
            for (field, value) in fields {
                let fp = FieldPath::parse(field)?;
                let kind = parse_op(modifier, &fp, value)?;
                ops.push((fp, kind));
            }
        }
        check_conflicts(&ops)?;
        ops.sort_by(|a, b| cmp_paths(&a.0, &b.0));
        let array_filters = positional::parse_array_filters(array_filters)?;
        check_positional(&ops, &array_filters, update)?;
        Ok(UpdateSpec::Operators(OperatorUpdate { ops, array_filters }))
    }

    /// Parses a pipeline-style update (an array of stages). Only the stages
    /// mongod allows in updates are accepted.
    pub fn parse_pipeline(stages: &[Document]) -> MongoResult<UpdateSpec> {
        crate::agg::update_pipeline::check(stages)?;
        Ok(UpdateSpec::Pipeline(stages.to_vec()))
    }

    pub fn is_replacement(&self) -> bool {
        matches!(self, UpdateSpec::Replacement(_))
    }

    /// Applies the update to `doc` in place. `inserting` is true when the
    /// document is being created by an upsert (`$setOnInsert` applies only
    /// then). Returns whether the document changed. On error `doc` is left
    /// untouched.
    pub fn apply(&self, doc: &mut Document, inserting: bool) -> MongoResult<bool> {
        self.apply_with_query(doc, inserting, None)
    }

    /// Like [`UpdateSpec::apply`]; `query` is the update's filter, which the
    /// positional `$` operator needs to find the matched array element.
    pub fn apply_with_query(
        &self,
        doc: &mut Document,
        inserting: bool,
        query: Option<&crate::matcher::Matcher>,
    ) -> MongoResult<bool> {
        let old_id = doc.get("_id").cloned();
        let id_desc = match &old_id {
            Some(v) => format!("{{_id: {}}}", render(v)),
            None => "{}".to_string(),
        };
        // The filter's collation applies to the update too, as in mongod.
        let collation = query.and_then(|q| q.collation()).cloned();
        let mut work = match self {
            UpdateSpec::Replacement(r) => replace(doc, r)?,
            UpdateSpec::Operators(ops) => {
                let mut work = doc.clone();
                let ctx = Ctx {
                    inserting,
                    id_desc,
                    collation,
                };
                // arrayFilters match under the update's collation too.
                let collated: Vec<positional::ArrayFilter>;
                let filters = match &ctx.collation {
                    Some(c) if !ops.array_filters.is_empty() => {
                        collated = ops.array_filters.iter().map(|f| f.collated(c)).collect();
                        &collated
                    }
                    _ => &ops.array_filters,
                };
                for (fp, kind) in &ops.ops {
                    if fp.has_positional() {
                        // Positions are resolved against the document as it
                        // was matched, not as earlier operations left it:
                        // mongod finds the `$` element once, from the query's
                        // match, and tests each array filter once per element
                        // before applying every path below it, so a second
                        // `children.$.x` is not lost when the first changed
                        // the field the query matched on. Paths never overlap
                        // (checked at parse), so no earlier operation changed
                        // the arrays being expanded.
                        for concrete in positional::expand(doc, fp, query, filters)? {
                            apply_op(&mut work, &concrete, kind, &ctx)?;
                        }
                    } else {
                        apply_op(&mut work, fp, kind, &ctx)?;
                    }
                }
                check_id_unchanged(old_id.as_ref(), &work)?;
                work
            }
            UpdateSpec::Pipeline(stages) => {
                crate::agg::update_pipeline::apply(stages, doc, collation)?
            }
        };
        let changed = work != *doc;
        if changed {
            std::mem::swap(doc, &mut work);
        }
        Ok(changed)
    }
}

fn replace(old: &Document, replacement: &Document) -> MongoResult<Document> {
    let mut out = Document::new();
    match (old.get("_id"), replacement.get("_id")) {
        (Some(old_id), Some(new_id)) if old_id != new_id => {
            return Err(MongoError::new(
                ErrorCode::ImmutableField,
                format!(
                    "After applying the update, the (immutable) field '_id' was found to have been altered to _id: {}",
                    render(new_id)
                ),
            ));
        }
        (Some(id), _) | (None, Some(id)) => {
            out.insert("_id", id.clone());
        }
        (None, None) => {}
    }
    for (k, v) in replacement {
        if k != "_id" {
            out.insert(k.clone(), v.clone());
        }
    }
    Ok(out)
}

fn check_positional(
    ops: &[(FieldPath, OpKind)],
    filters: &[positional::ArrayFilter],
    update: &Document,
) -> MongoResult<()> {
    let mut used = vec![false; filters.len()];
    for (fp, kind) in ops {
        let mut paths = vec![fp];
        if let OpKind::Rename(to) = kind {
            paths.push(to);
        }
        for p in paths {
            if p.parts
                .first()
                .is_some_and(|c| positional::is_positional(c))
            {
                return Err(MongoError::bad_value(format!(
                    "Cannot have positional (i.e. '$') element in the first position in path '{}'",
                    p.dotted
                )));
            }
            if p.parts.iter().filter(|c| *c == "$").count() > 1 {
                return Err(MongoError::bad_value(format!(
                    "Too many positional (i.e. '$') elements found in path '{}'",
                    p.dotted
                )));
            }
            if matches!(kind, OpKind::Rename(_)) && p.has_positional() {
                return Err(MongoError::bad_value(format!(
                    "The source field for $rename may not be dynamic: {}",
                    p.dotted
                )));
            }
            for c in &p.parts {
                if let positional::Component::Filtered(id) = positional::classify(c) {
                    match filters.iter().position(|f| f.id == id) {
                        Some(i) => {
                            if let Some(u) = used.get_mut(i) {
                                *u = true;
                            }
                        }
                        None => {
                            return Err(MongoError::bad_value(format!(
                                "No array filter found for identifier '{id}' in path '{}'",
                                p.dotted
                            )))
                        }
                    }
                }
            }
        }
    }
    if let Some(i) = used.iter().position(|u| !u) {
        let id = filters.get(i).map_or("", |f| f.id.as_str());
        return Err(MongoError::failed_to_parse(format!(
            "The array filter for identifier '{id}' was not used in the update {}",
            crate::value::render_doc(update)
        )));
    }
    Ok(())
}

fn check_conflicts(ops: &[(FieldPath, OpKind)]) -> MongoResult<()> {
    let mut paths: Vec<&FieldPath> = Vec::with_capacity(ops.len());
    for (fp, kind) in ops {
        paths.push(fp);
        if let OpKind::Rename(to) = kind {
            paths.push(to);
        }
    }
    paths.sort_by(|a, b| cmp_paths(a, b));
    for w in paths.windows(2) {
        if let [a, b] = w {
            if a.is_prefix_of(b) {
                return Err(MongoError::new(
                    ErrorCode::ConflictingUpdateOperators,
                    format!(
                        "Updating the path '{}' would create a conflict at '{}'",
                        b.dotted, a.dotted
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn parse_op(modifier: &str, fp: &FieldPath, value: &Bson) -> MongoResult<OpKind> {
    match modifier {
        "$set" => Ok(OpKind::Set(value.clone())),
        "$setOnInsert" => Ok(OpKind::SetOnInsert(value.clone())),
        "$unset" => Ok(OpKind::Unset),
        "$currentDate" => fields::parse_current_date(value),
        "$rename" => fields::parse_rename(fp, value),
        "$inc" => arith::parse_num_arg("$inc", fp, value).map(OpKind::Inc),
        "$mul" => arith::parse_num_arg("$mul", fp, value).map(OpKind::Mul),
        "$min" => Ok(OpKind::Min(value.clone())),
        "$max" => Ok(OpKind::Max(value.clone())),
        "$bit" => arith::parse_bit(fp, value),
        "$push" => array::parse_push(fp, value),
        "$addToSet" => array::parse_add_to_set(value),
        "$pop" => array::parse_pop(value),
        "$pull" => array::parse_pull(value),
        "$pullAll" => array::parse_pull_all(value),
        other => Err(MongoError::failed_to_parse(format!(
            "Unknown modifier: {other}. Expected a valid update modifier or pipeline-style update specified as an array"
        ))),
    }
}

fn apply_op(doc: &mut Document, fp: &FieldPath, kind: &OpKind, ctx: &Ctx) -> MongoResult<()> {
    fp.check_storable(kind, ctx)?;
    match kind {
        OpKind::Set(v) => fields::set(doc, fp, v.clone()),
        OpKind::SetOnInsert(v) => {
            if ctx.inserting {
                fields::set(doc, fp, v.clone())
            } else {
                Ok(())
            }
        }
        OpKind::Unset => {
            path::unset_path(doc, &fp.parts);
            Ok(())
        }
        OpKind::CurrentDate { timestamp } => fields::current_date(doc, fp, *timestamp),
        OpKind::Rename(to) => fields::rename(doc, fp, to),
        OpKind::Inc(n) => arith::inc(doc, fp, *n, ctx),
        OpKind::Mul(n) => arith::mul(doc, fp, *n, ctx),
        OpKind::Min(v) => arith::min_max(doc, fp, v, Ordering::Less, ctx),
        OpKind::Max(v) => arith::min_max(doc, fp, v, Ordering::Greater, ctx),
        OpKind::Bit(ops) => arith::bit(doc, fp, ops, ctx),
        OpKind::Push(spec) => array::push(doc, fp, spec, ctx),
        OpKind::AddToSet(vals) => array::add_to_set(doc, fp, vals, ctx),
        OpKind::Pop { first } => array::pop(doc, fp, *first),
        OpKind::Pull(cond) => array::pull(doc, fp, cond, ctx),
        OpKind::PullAll(vals) => array::pull_all(doc, fp, vals, ctx),
    }
}

/// Builds the document an upsert starts from: the filter's equality fields
/// (dotted paths become nested documents), `_id` first.
pub fn upsert_seed(equality_fields: &[(String, Bson)]) -> MongoResult<Document> {
    let mut fields: Vec<FieldPath> = Vec::with_capacity(equality_fields.len());
    for (p, _) in equality_fields {
        fields.push(FieldPath::parse(p)?);
    }
    let mut sorted: Vec<&FieldPath> = fields.iter().collect();
    sorted.sort_by(|a, b| cmp_paths(a, b));
    for w in sorted.windows(2) {
        if let [a, b] = w {
            if a.parts == b.parts {
                return Err(MongoError::new(
                    ErrorCode::NotSingleValueField,
                    format!(
                        "cannot infer query fields to set, path '{}' is matched twice",
                        a.dotted
                    ),
                ));
            }
            if a.is_prefix_of(b) {
                return Err(MongoError::new(
                    ErrorCode::NotSingleValueField,
                    format!(
                        "cannot infer query fields to set, both paths '{}' and '{}' are matched",
                        b.dotted, a.dotted
                    ),
                ));
            }
        }
    }
    let mut doc = Document::new();
    let is_id = |fp: &FieldPath| fp.parts.first().is_some_and(|p| p == "_id");
    for pass_id in [true, false] {
        for (fp, (_, v)) in fields.iter().zip(equality_fields) {
            if is_id(fp) == pass_id {
                path::set_path(&mut doc, &fp.parts, v.clone())?;
            }
        }
    }
    Ok(doc)
}

#[cfg(test)]
mod tests;
