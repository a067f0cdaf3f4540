//! Reply documents: the `ok: 0` error shape, `ok: 1` success, write errors, and
//! conversion of owned documents to the raw bytes sent on the wire.

use bisondb_error::{MongoError, MongoResult};
use bson::{doc, Bson, Document, RawDocumentBuf};

/// mongod's error reply: `{ok: 0, errmsg, code, codeName}`.
pub fn error_document(e: &MongoError) -> Document {
    let mut d = doc! {
        "ok": 0.0,
        "errmsg": e.message.clone(),
        "code": e.code.code(),
        "codeName": e.code.name().into_owned(),
    };
    d.extend(details(e));
    d
}

/// The error's extra reply fields (e.g. a duplicate key's `keyPattern` and
/// `keyValue`); empty when it has none.
pub fn details(e: &MongoError) -> Document {
    e.details
        .as_deref()
        .and_then(|b| bson::RawDocument::from_bytes(b).ok())
        .and_then(|raw| Document::try_from(raw).ok())
        .unwrap_or_default()
}

/// Serializes a reply; a reply that can't be serialized is a BisonDB bug.
pub fn to_raw(doc: &Document) -> MongoResult<RawDocumentBuf> {
    RawDocumentBuf::try_from(doc)
        .map_err(|e| MongoError::internal(format!("reply is not valid BSON: {e}")))
}

/// `{...fields, ok: 1}`.
pub fn ok(mut fields: Document) -> MongoResult<RawDocumentBuf> {
    fields.insert("ok", 1.0);
    to_raw(&fields)
}

/// One entry of a write command's `writeErrors` array.
pub fn write_error(index: usize, e: &MongoError, extra: Option<Document>) -> Document {
    let mut d = doc! {
        "index": index as i64,
        "code": e.code.code(),
        "codeName": e.code.name().into_owned(),
        "errmsg": e.message.clone(),
    };
    for (k, v) in extra.unwrap_or_else(|| details(e)) {
        d.insert(k, v);
    }
    d
}

/// Whole numbers go out as int32 when they fit, as mongod does for counters.
pub fn count(n: u64) -> Bson {
    match i32::try_from(n) {
        Ok(i) => Bson::Int32(i),
        Err(_) => Bson::Int64(i64::try_from(n).unwrap_or(i64::MAX)),
    }
}

/// A storage error as the client sees it, with duplicate-key details for writeErrors.
pub fn storage_error_details(e: &bisondb_storage::StorageError) -> Option<Document> {
    match e {
        bisondb_storage::StorageError::DuplicateKey(info) => {
            Some(doc! {"keyPattern": info.key_pattern.clone(), "keyValue": info.key_value.clone()})
        }
        _ => None,
    }
}

/// A reply field name, as the raw document builders take it.
pub(crate) fn key(s: &'static str) -> MongoResult<&'static bson::raw::CStr> {
    <&bson::raw::CStr>::try_from(s)
        .map_err(|e| MongoError::internal(format!("bad reply key {s}: {e}")))
}

/// A write command's reply: `fields` (`n`, ...), then `writeErrors` when a
/// statement failed.
pub fn write_reply(mut fields: Document, errors: Vec<Bson>) -> MongoResult<RawDocumentBuf> {
    if !errors.is_empty() {
        fields.insert("writeErrors", errors);
    }
    ok(fields)
}

/// What the statements of an `update` command did, for its reply.
#[derive(Default)]
pub struct UpdateTally {
    matched: u64,
    modified: u64,
    upserted: Vec<Bson>,
}

impl UpdateTally {
    /// Counts statement `index`'s outcome.
    pub fn add(&mut self, index: usize, matched: u64, modified: u64, upserted_id: Option<Bson>) {
        self.matched += matched;
        self.modified += modified;
        if let Some(id) = upserted_id {
            self.upserted
                .push(Bson::Document(doc! {"index": index as i32, "_id": id}));
        }
    }

    /// The reply: `n` (matched and upserted), `nModified`, then `upserted`
    /// and `writeErrors` when there are some.
    pub fn reply(self, errors: Vec<Bson>) -> MongoResult<RawDocumentBuf> {
        let mut r = doc! {
            "n": count(self.matched + self.upserted.len() as u64),
            "nModified": count(self.modified),
        };
        if !self.upserted.is_empty() {
            r.insert("upserted", self.upserted);
        }
        write_reply(r, errors)
    }
}
