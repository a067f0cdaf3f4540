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
