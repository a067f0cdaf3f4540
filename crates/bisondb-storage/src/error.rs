//! Storage errors and their translation into mongod's error codes.
//!
//! Storage keeps its own small error enum (rather than returning `MongoError`
//! directly) because the server needs structured data from some of them: a
//! duplicate key reply carries `keyPattern` and `keyValue` next to the message.
//! Failures of the engine below (I/O, corruption, a full disk, ...) are the
//! contract's [`EngineError`], wrapped whole.

use bisondb_engine::EngineError;
use bisondb_error::{ErrorCode, MongoError};
use bson::{Bson, Document};

/// What went wrong below the command layer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StorageError {
    /// A unique index (the clustered `_id` one or a secondary index) already holds the key.
    #[error("{}", duplicate_key_message(&.0.namespace, &.0.index_name, &.0.key_value))]
    DuplicateKey(Box<DuplicateKeyInfo>),
    /// The collection (or view) already exists.
    #[error("Collection {0} already exists.")]
    NamespaceExists(String),
    /// The collection does not exist.
    #[error("ns not found: {0}")]
    NamespaceNotFound(String),
    /// The operation is not allowed (e.g. renaming a collection to itself).
    #[error("{0}")]
    IllegalOperation(String),
    /// A client-facing error from index key generation (e.g. 171 parallel arrays).
    #[error("{}", .0.message)]
    Mongo(MongoError),
    /// The engine failed (also used for what the store finds wrong with the
    /// bytes it reads: [`EngineError::Corrupt`], and its own broken invariants:
    /// [`EngineError::Internal`]).
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// What the server needs to build a duplicate-key write error
/// (`keyPattern` and `keyValue` sit next to the message in the reply).
#[derive(Debug, Clone, PartialEq)]
pub struct DuplicateKeyInfo {
    /// `db.collection` the write went to.
    pub namespace: String,
    /// Name of the violated index (`_id_` for the primary key).
    pub index_name: String,
    /// The index key pattern, e.g. `{_id: 1}`.
    pub key_pattern: Document,
    /// The offending key, e.g. `{_id: 1}`.
    pub key_value: Document,
}

impl StorageError {
    /// [`EngineError::Corrupt`]: stored bytes do not decode.
    pub fn corrupt(message: impl Into<String>) -> StorageError {
        StorageError::Engine(EngineError::Corrupt(message.into()))
    }

    /// [`EngineError::Internal`]: a broken invariant.
    pub fn internal(message: impl Into<String>) -> StorageError {
        StorageError::Engine(EngineError::Internal(message.into()))
    }

    /// [`EngineError::InvalidArgument`]: something storage cannot accept.
    pub fn invalid_argument(message: impl Into<String>) -> StorageError {
        StorageError::Engine(EngineError::InvalidArgument(message.into()))
    }

    /// [`EngineError::Io`]: the backend failed to read or write.
    pub fn io(message: impl Into<String>) -> StorageError {
        StorageError::Engine(EngineError::Io(message.into()))
    }

    /// The duplicate-key error for the clustered `_id` index of `namespace`.
    pub fn duplicate_id(namespace: &str, id: Bson) -> StorageError {
        let mut key_pattern = Document::new();
        key_pattern.insert("_id", 1i32);
        let mut key_value = Document::new();
        key_value.insert("_id", id);
        StorageError::DuplicateKey(Box::new(DuplicateKeyInfo {
            namespace: namespace.to_string(),
            index_name: "_id_".to_string(),
            key_pattern,
            key_value,
        }))
    }

    /// The mongod error code this error maps to.
    pub fn code(&self) -> ErrorCode {
        match self {
            StorageError::DuplicateKey(_) => ErrorCode::DuplicateKey,
            StorageError::NamespaceExists(_) => ErrorCode::NamespaceExists,
            StorageError::NamespaceNotFound(_) => ErrorCode::NamespaceNotFound,
            StorageError::IllegalOperation(_) => ErrorCode::IllegalOperation,
            StorageError::Mongo(e) => e.code,
            StorageError::Engine(e) => e.code(),
        }
    }
}

impl From<StorageError> for MongoError {
    fn from(e: StorageError) -> MongoError {
        match &e {
            StorageError::Engine(inner) => inner.clone().into(),
            StorageError::Mongo(m) => m.clone(),
            StorageError::DuplicateKey(info) => {
                let details = bson::doc! {
                    "keyPattern": info.key_pattern.clone(),
                    "keyValue": info.key_value.clone(),
                };
                let err = MongoError::new(e.code(), e.to_string());
                match bson::RawDocumentBuf::try_from(&details) {
                    Ok(raw) => err.with_details(raw.into_bytes()),
                    Err(_) => err,
                }
            }
            _ => MongoError::new(e.code(), e.to_string()),
        }
    }
}

/// `E11000 duplicate key error collection: db.coll index: _id_ dup key: { _id: 1 }`,
/// the exact shape mongod uses (drivers and tests match on it).
fn duplicate_key_message(namespace: &str, index_name: &str, key_value: &Document) -> String {
    format!(
        "E11000 duplicate key error collection: {namespace} index: {index_name} dup key: {}",
        shell_format_document(key_value)
    )
}

/// Formats a document the way mongod prints keys in error messages: unquoted
/// field names, `ObjectId('..')`, doubles with a decimal point.
pub fn shell_format_document(doc: &Document) -> String {
    if doc.is_empty() {
        return "{}".to_string();
    }
    let fields: Vec<String> = doc
        .iter()
        .map(|(k, v)| format!("{k}: {}", shell_format_value(v)))
        .collect();
    format!("{{ {} }}", fields.join(", "))
}

fn shell_format_value(v: &Bson) -> String {
    match v {
        Bson::Int32(i) => i.to_string(),
        Bson::Int64(i) => i.to_string(),
        Bson::Double(d) => {
            if d.is_finite() && d.fract() == 0.0 && d.abs() < 1e15 {
                format!("{d:.1}")
            } else {
                d.to_string()
            }
        }
        Bson::String(s) => format!("{s:?}"),
        Bson::ObjectId(o) => format!("ObjectId('{}')", o.to_hex()),
        Bson::Boolean(b) => b.to_string(),
        Bson::Null => "null".to_string(),
        Bson::Document(d) => shell_format_document(d),
        Bson::Array(a) => {
            let items: Vec<String> = a.iter().map(shell_format_value).collect();
            if items.is_empty() {
                "[]".to_string()
            } else {
                format!("[ {} ]", items.join(", "))
            }
        }
        Bson::Decimal128(d) => format!("{d}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::oid::ObjectId;

    #[test]
    fn duplicate_key_message_matches_mongod() {
        let cases: Vec<(Bson, &str)> = vec![
            (Bson::Int32(1), "{ _id: 1 }"),
            (Bson::Double(1.0), "{ _id: 1.0 }"),
            (Bson::Double(1.5), "{ _id: 1.5 }"),
            (Bson::String("a".into()), "{ _id: \"a\" }"),
            (
                Bson::ObjectId(ObjectId::parse_str("5f1d7f5e8b3e4a1b2c3d4e5f").unwrap_or_default()),
                "{ _id: ObjectId('5f1d7f5e8b3e4a1b2c3d4e5f') }",
            ),
        ];
        for (id, shown) in cases {
            let e = StorageError::duplicate_id("db.coll", id);
            let m: MongoError = e.clone().into();
            assert_eq!(m.code, ErrorCode::DuplicateKey);
            assert_eq!(m.code.code(), 11000);
            assert_eq!(
                m.message,
                format!(
                    "E11000 duplicate key error collection: db.coll index: _id_ dup key: {shown}"
                )
            );
        }
    }

    #[test]
    fn codes_match_mongod() {
        // The engine's own errors keep their codes when wrapped
        // (bisondb-engine's tests list them all).
        let cases = [
            (
                StorageError::NamespaceExists("a.b".into()),
                48,
                "NamespaceExists",
            ),
            (
                StorageError::NamespaceNotFound("a.b".into()),
                26,
                "NamespaceNotFound",
            ),
            (
                StorageError::IllegalOperation("x".into()),
                20,
                "IllegalOperation",
            ),
            (
                StorageError::Engine(EngineError::Full),
                14031,
                "OutOfDiskSpace",
            ),
            (StorageError::internal("x"), 1, "InternalError"),
        ];
        for (e, code, name) in cases {
            let m: MongoError = e.into();
            assert_eq!(m.code.code(), code);
            assert_eq!(m.code.name(), name);
        }
    }

    #[test]
    fn key_pattern_and_value_stay_accessible() {
        match StorageError::duplicate_id("d.c", Bson::Int64(7)) {
            StorageError::DuplicateKey(info) => {
                assert_eq!(info.key_pattern, bson::doc! {"_id": 1});
                assert_eq!(info.key_value, bson::doc! {"_id": 7i64});
                assert_eq!(info.index_name, "_id_");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// The details survive the conversion every command error goes through.
    #[test]
    fn duplicate_key_details_reach_the_mongo_error() {
        let e = MongoError::from(StorageError::duplicate_id("d.c", Bson::Int32(7)));
        assert_eq!(e.code.code(), 11000);
        let details = e
            .details
            .as_deref()
            .and_then(|b| bson::RawDocument::from_bytes(b).ok())
            .and_then(|r| bson::Document::try_from(r).ok());
        assert_eq!(
            details,
            Some(bson::doc! {"keyPattern": {"_id": 1}, "keyValue": {"_id": 7}})
        );
        let other = MongoError::from(StorageError::io("disk"));
        assert!(other.details.is_none());
    }
}
