//! The write paths shared by `update`, `delete` and `findAndModify`: pick the target
//! documents, then change each one with an atomic read-modify-write by `_id` that
//! re-checks the filter (a concurrent writer may have changed the document since the
//! snapshot that found it).

use bisondb_error::{MongoError, MongoResult};
use bisondb_query::matcher::Matcher;
use bisondb_query::sort::SortSpec;
use bisondb_query::update::{upsert_seed, UpdateSpec};
use bisondb_storage::{Collection, Durability, Modify};
use bson::{Bson, Document, RawBson, RawDocument, RawDocumentBuf};

use crate::commands::util;
use crate::plan;

/// What one update statement did.
#[derive(Debug, Default)]
pub struct UpdateResult {
    pub matched: u64,
    pub modified: u64,
    pub upserted_id: Option<Bson>,
    /// The document before and after the change (only the last one for multi).
    pub before: Option<Document>,
    pub after: Option<Document>,
}

/// The `_id` values of the documents an operation targets, in filter (or sort) order.
pub fn target_ids(
    coll: Option<&Collection>,
    matcher: &Matcher,
    sort: Option<&SortSpec>,
    multi: bool,
) -> MongoResult<Vec<RawBson>> {
    let src = plan::matching(coll, matcher)?;
    let docs: Box<dyn Iterator<Item = MongoResult<RawDocumentBuf>>> = match sort {
        Some(s) => Box::new(
            plan::sort(src, s, (!multi).then_some(1), true)?
                .into_iter()
                .map(Ok),
        ),
        None => src,
    };
    let mut ids = Vec::new();
    for d in docs {
        let d = d?;
        let id = d
            .get("_id")
            .map_err(crate::request::invalid_bson)?
            .ok_or_else(|| MongoError::internal("stored document without _id"))?;
        ids.push(RawBson::from(id));
        if !multi {
            break;
        }
    }
    Ok(ids)
}

fn to_doc(d: &RawDocument) -> MongoResult<Document> {
    Document::try_from(d)
        .map_err(|e| MongoError::internal(format!("stored document is not valid BSON: {e}")))
}

/// Applies one update statement (`q`, `u`, `multi`, `upsert`).
#[allow(clippy::too_many_arguments)]
pub fn update(
    storage: &bisondb_storage::Storage,
    db: &str,
    coll_name: &str,
    matcher: &Matcher,
    spec: &UpdateSpec,
    sort: Option<&SortSpec>,
    multi: bool,
    upsert: bool,
    durability: Durability,
    keep_images: bool,
) -> MongoResult<UpdateResult> {
    let mut res = UpdateResult::default();
    let coll = storage.collection(db, coll_name);
    let ids = target_ids(coll.as_ref(), matcher, sort, multi)?;
    if let Some(coll) = &coll {
        for id in &ids {
            coll.modify(id.as_raw_bson_ref(), durability, &mut |cur| {
                let Some(cur) = cur else {
                    return Ok(Modify::Keep);
                };
                if !matcher.matches(cur) {
                    return Ok(Modify::Keep);
                }
                res.matched += 1;
                let before = to_doc(cur)?;
                let mut after = before.clone();
                let changed = spec.apply_with_query(&mut after, false, Some(matcher))?;
                let action = if changed {
                    res.modified += 1;
                    Modify::Replace(util::prepare_owned(&after)?)
                } else {
                    Modify::Keep
                };
                if keep_images {
                    res.before = Some(before);
                    res.after = Some(after);
                }
                Ok(action)
            })?;
        }
    }
    if res.matched == 0 && upsert {
        let mut doc = match spec {
            UpdateSpec::Replacement(r) => {
                let mut d = Document::new();
                if !r.contains_key("_id") {
                    if let Some(id) = matcher.id_equality() {
                        d.insert("_id", id);
                    }
                }
                d.extend(r.clone());
                d
            }
            _ => {
                let mut d = upsert_seed(&matcher.equality_fields())?;
                spec.apply_with_query(&mut d, true, Some(matcher))?;
                d
            }
        };
        if !doc.contains_key("_id") {
            let mut with_id = Document::new();
            with_id.insert("_id", bson::oid::ObjectId::new());
            with_id.extend(doc);
            doc = with_id;
        }
        let raw = util::prepare_owned(&doc)?;
        let coll = storage
            .get_or_create_collection(db, coll_name)
            .map_err(MongoError::from)?;
        let outcome = coll.insert_many(&[&raw], true, durability);
        if let Some((_, e)) = outcome.errors.into_iter().next() {
            return Err(MongoError::from(e));
        }
        res.upserted_id = doc.get("_id").cloned();
        if keep_images {
            res.after = Some(doc);
        }
    }
    Ok(res)
}

/// Deletes the documents matching `matcher` (at most one unless `multi`); returns
/// the number deleted and, with `keep_image`, the last deleted document.
pub fn delete(
    coll: Option<&Collection>,
    matcher: &Matcher,
    sort: Option<&SortSpec>,
    multi: bool,
    durability: Durability,
    keep_image: bool,
) -> MongoResult<(u64, Option<Document>)> {
    let Some(c) = coll else { return Ok((0, None)) };
    let mut n = 0u64;
    let mut image = None;
    for id in target_ids(coll, matcher, sort, multi)? {
        c.modify(id.as_raw_bson_ref(), durability, &mut |cur| {
            let Some(cur) = cur else {
                return Ok(Modify::Keep);
            };
            if !matcher.matches(cur) {
                return Ok(Modify::Keep);
            }
            n += 1;
            if keep_image {
                image = Some(to_doc(cur)?);
            }
            Ok(Modify::Delete)
        })?;
    }
    Ok((n, image))
}
