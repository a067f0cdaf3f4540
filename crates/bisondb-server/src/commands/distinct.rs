//! `distinct`: the distinct values of a field among matching documents, arrays
//! unwound one level, in BSON order.

use bisondb_error::{MongoError, MongoResult};
use bisondb_query::compare::compare_bson_in;
use bisondb_query::matcher::Matcher;
use bson::{doc, Bson, Document, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::plan;
use crate::reply;
use crate::request::CommandRequest;

pub struct Distinct {
    db: String,
    coll: String,
    key: String,
    query: Matcher,
    /// `query` as sent: lets a partial index serve it.
    query_doc: Document,
    hint: Option<plan::Hint>,
    collation: crate::collation::Given,
}

impl Command for Distinct {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut coll = None;
        let mut key = None;
        let mut query = Matcher::parse_doc(&Document::new())?;
        let mut query_doc = Document::new();
        let mut hint = None;
        let mut collation = None;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "distinct" => coll = Some(fields::collection_name(n, v)?.to_string()),
                "key" => key = Some(fields::as_str(n, "key", v)?.to_string()),
                "query" => {
                    if !matches!(v, bson::RawBsonRef::Null) {
                        let raw = fields::as_doc(n, "query", v)?;
                        query = Matcher::parse(raw)?;
                        query_doc = fields::to_document(raw)?;
                    }
                }
                "collation" => collation = crate::collation::parse_arg(n, v)?,
                "hint" => hint = plan::Hint::parse(v)?,
                other => fields::check_known(n, other, &[])?,
            }
        }
        let coll = coll.ok_or_else(|| fields::missing_field(n, "distinct"))?;
        let key = key.ok_or_else(|| fields::missing_field(n, "key"))?;
        if key.is_empty() {
            return Err(MongoError::bad_value(
                "FieldPath cannot be constructed with empty string",
            ));
        }
        Ok(Distinct {
            db: req.db.clone(),
            coll,
            key,
            query,
            query_doc,
            hint,
            collation,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let coll = ctx.state.storage.collection(&self.db, &self.coll);
        let collation = crate::collation::effective(&self.collation, coll.as_ref())?;
        let query = self.query.clone().with_collation(collation.clone());
        let chosen = plan::choose(
            coll.as_ref(),
            &query,
            Some(&self.query_doc),
            None,
            self.hint.as_ref(),
        )?;
        let stats = std::sync::Arc::new(plan::Stats::default());
        ctx.conn.op.plan(&stats, &chosen);
        plan::note_index_use(coll.as_ref(), &chosen);
        let docs = plan::execute(coll.as_ref(), &chosen, &query, stats)?
            .map(|d| d.and_then(|d| fields::to_document(&d)));
        values_reply_in(docs, &self.key, collation.as_deref())
    }
}

/// The `distinct` reply for `key` over `docs` (also used for views); under a
/// collation, strings it finds equal are one value.
pub(crate) fn values_reply_in(
    docs: impl Iterator<Item = MongoResult<Document>>,
    key: &str,
    c: Option<&bisondb_query::collation::Collation>,
) -> MongoResult<RawDocumentBuf> {
    let mut values: Vec<Bson> = Vec::new();
    for d in docs {
        let d = d?;
        let mut found = Vec::new();
        collect_values(&Bson::Document(d), key, &mut found);
        for v in found {
            match v {
                Bson::Array(items) => values.extend(items),
                other => values.push(other),
            }
        }
    }
    values.sort_by(|a, b| compare_bson_in(a, b, c));
    values.dedup_by(|a, b| compare_bson_in(a, b, c) == std::cmp::Ordering::Equal);
    let bytes: usize = values.iter().map(bson_size_estimate).sum();
    if bytes > bisondb_wire::MAX_BSON_OBJECT_SIZE {
        return Err(MongoError::new(
            bisondb_error::ErrorCode::BSONObjectTooLarge,
            "distinct too big, 16mb cap",
        ));
    }
    reply::ok(doc! {"values": values})
}

/// Values at a dotted path, descending into arrays of documents as mongod's
/// distinct does.
fn collect_values(v: &Bson, path: &str, out: &mut Vec<Bson>) {
    let (head, rest) = match path.split_once('.') {
        Some((h, r)) => (h, Some(r)),
        None => (path, None),
    };
    match v {
        Bson::Document(d) => {
            if let Some(child) = d.get(head) {
                match rest {
                    None => out.push(child.clone()),
                    Some(r) => collect_values(child, r, out),
                }
            }
        }
        Bson::Array(items) => {
            if let Ok(i) = head.parse::<usize>() {
                if let Some(child) = items.get(i) {
                    match rest {
                        None => out.push(child.clone()),
                        Some(r) => collect_values(child, r, out),
                    }
                    return;
                }
            }
            for item in items {
                if let Bson::Document(_) = item {
                    collect_values(item, path, out);
                }
            }
        }
        _ => {}
    }
}

fn bson_size_estimate(v: &Bson) -> usize {
    match v {
        Bson::String(s) => s.len() + 8,
        Bson::Document(d) => {
            d.iter()
                .map(|(k, v)| k.len() + 2 + bson_size_estimate(v))
                .sum::<usize>()
                + 5
        }
        Bson::Array(a) => a.iter().map(bson_size_estimate).sum::<usize>() + 5,
        Bson::Binary(b) => b.bytes.len() + 8,
        _ => 16,
    }
}
