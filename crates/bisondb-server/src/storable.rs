//! What a document must be to be stored: at most 16 MiB, with a valid `_id`
//! as its first field (an ObjectId is generated when it has none).

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{Document, RawBsonRef, RawDocument, RawDocumentBuf};

/// Largest document a client may store (mongod's BSONObjMaxUserSize).
pub const MAX_USER_DOC: usize = bisondb_wire::MAX_BSON_OBJECT_SIZE;

/// Checks a document for storage and puts `_id` first, generating an ObjectId when
/// it is missing. Returns the bytes to store (borrowed when already in shape).
pub fn prepare_for_insert(doc: &RawDocument) -> MongoResult<std::borrow::Cow<'_, RawDocument>> {
    use std::borrow::Cow;
    let len = doc.as_bytes().len();
    if len > MAX_USER_DOC {
        return Err(MongoError::new(
            ErrorCode::BSONObjectTooLarge,
            format!("object to insert too large. size in bytes: {len}, max size: {MAX_USER_DOC}"),
        ));
    }
    // Structure was validated by bisondb-wire when the message was decoded.
    let mut first = true;
    let mut id_first = false;
    let mut id: Option<RawBsonRef<'_>> = None;
    // Elements, not values: only `_id`'s value is read (the others were checked
    // when the message was decoded, and parsing them again cost the request path).
    for el in doc.iter_elements() {
        let el = el.map_err(crate::request::invalid_bson)?;
        if el.key().as_str() == "_id" {
            if id.is_some() {
                return Err(MongoError::bad_value(
                    "can't have multiple _id fields in one document",
                ));
            }
            let v = el.value().map_err(crate::request::invalid_bson)?;
            check_id_value(v)?;
            id = Some(v);
            id_first = first;
        }
        first = false;
    }
    match id {
        Some(_) if id_first => Ok(Cow::Borrowed(doc)),
        Some(id) => {
            let mut out = RawDocumentBuf::new();
            out.append(crate::reply::key("_id")?, id);
            for el in doc.iter() {
                let (k, v) = el.map_err(crate::request::invalid_bson)?;
                if k.as_str() != "_id" {
                    out.append(k, v);
                }
            }
            Ok(Cow::Owned(out))
        }
        None => {
            let mut out = RawDocumentBuf::new();
            out.append(crate::reply::key("_id")?, bson::oid::ObjectId::new());
            for el in doc.iter() {
                let (k, v) = el.map_err(crate::request::invalid_bson)?;
                out.append(k, v);
            }
            Ok(Cow::Owned(out))
        }
    }
}

/// mongod's restrictions on `_id` values.
pub fn check_id_value(v: RawBsonRef<'_>) -> MongoResult<()> {
    let bad = |t: &str| {
        MongoError::new(
            ErrorCode::InvalidIdField,
            format!("The '_id' value cannot be of type {t}"),
        )
    };
    match v {
        RawBsonRef::Array(_) => Err(bad("array")),
        RawBsonRef::RegularExpression(_) => Err(bad("regex")),
        RawBsonRef::Undefined => Err(bad("undefined")),
        RawBsonRef::Document(d) => {
            for el in d.iter() {
                let (k, _) = el.map_err(crate::request::invalid_bson)?;
                if k.as_str().starts_with('$') {
                    return Err(MongoError::new(
                        ErrorCode::DollarPrefixedFieldName,
                        format!("_id fields may not contain '$'-prefixed fields: {} is not valid for storage.", k.as_str()),
                    ));
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Owned-document variant of [`prepare_for_insert`], for documents built by updates.
pub fn prepare_owned(doc: &Document) -> MongoResult<RawDocumentBuf> {
    let raw = crate::reply::to_raw(doc)
        .map_err(|_| MongoError::bad_value("document contains a field name with a NUL byte"))?;
    Ok(prepare_for_insert(&raw)?.into_owned())
}
