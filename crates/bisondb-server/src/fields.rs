//! Typed reading of command fields with mongod's IDL error messages.
//!
//! mongod parses every command through generated code that rejects unknown fields
//! (40415) and wrong types (14, "BSON field 'find.limit' is the wrong type ...").
//! Commands here do the same with these helpers, so a typo in a client's option is an
//! error rather than a silently ignored setting.

pub mod write;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::spec::ElementType;
use bson::{Bson, Document, RawArray, RawBsonRef, RawDocument};

/// Options accepted and ignored because they only affect performance or replication.
pub const IGNORED_OPTIONS: &[&str] = &["$readPreference", "readConcern"];

/// Fields any command may carry (driver and session plumbing), per mongod's generic
/// arguments. Sorted for binary search.
const GENERIC_ARGS: &[&str] = &[
    "$audit",
    "$client",
    "$clusterTime",
    "$configServerState",
    "$db",
    "$readPreference",
    "$topologyTime",
    "allowImplicitCollectionCreation",
    "apiDeprecationErrors",
    "apiStrict",
    "apiVersion",
    "autocommit",
    "clientOperationKey",
    "comment",
    "databaseVersion",
    "lsid",
    "maxTimeMS",
    "mayBypassWriteBlocking",
    "readConcern",
    "shardVersion",
    "startTransaction",
    "txnNumber",
    "writeConcern",
];

pub fn is_generic_arg(name: &str) -> bool {
    GENERIC_ARGS.binary_search(&name).is_ok()
}

/// mongod's name for a BSON type, as used in error messages and `$type`.
pub fn type_name(t: ElementType) -> &'static str {
    match t {
        ElementType::Double => "double",
        ElementType::String => "string",
        ElementType::EmbeddedDocument => "object",
        ElementType::Array => "array",
        ElementType::Binary => "binData",
        ElementType::Undefined => "undefined",
        ElementType::ObjectId => "objectId",
        ElementType::Boolean => "bool",
        ElementType::DateTime => "date",
        ElementType::Null => "null",
        ElementType::RegularExpression => "regex",
        ElementType::DbPointer => "dbPointer",
        ElementType::JavaScriptCode => "javascript",
        ElementType::Symbol => "symbol",
        ElementType::JavaScriptCodeWithScope => "javascriptWithScope",
        ElementType::Int32 => "int",
        ElementType::Timestamp => "timestamp",
        ElementType::Int64 => "long",
        ElementType::Decimal128 => "decimal",
        ElementType::MaxKey => "maxKey",
        ElementType::MinKey => "minKey",
    }
}

pub fn unknown_field(cmd: &str, field: &str) -> MongoError {
    MongoError::location(
        40415,
        format!("BSON field '{cmd}.{field}' is an unknown field."),
    )
}

pub fn missing_field(cmd: &str, field: &str) -> MongoError {
    MongoError::location(
        40414,
        format!("BSON field '{cmd}.{field}' is missing but a required field"),
    )
}

pub fn wrong_type(cmd: &str, field: &str, v: RawBsonRef<'_>, expected: &str) -> MongoError {
    MongoError::type_mismatch(format!(
        "BSON field '{cmd}.{field}' is the wrong type '{}', expected type{} '{expected}'",
        type_name(v.element_type()),
        if expected.starts_with('[') { "s" } else { "" }
    ))
}

/// Rejects a field that is neither known to the command nor generic.
pub fn check_known(cmd: &str, field: &str, known: &[&str]) -> MongoResult<()> {
    if known.contains(&field) || is_generic_arg(field) {
        Ok(())
    } else {
        Err(unknown_field(cmd, field))
    }
}

/// A boolean option; mongod's IDL also accepts numbers (non-zero is true).
pub fn as_bool(cmd: &str, field: &str, v: RawBsonRef<'_>) -> MongoResult<bool> {
    match v {
        RawBsonRef::Boolean(b) => Ok(b),
        RawBsonRef::Int32(i) => Ok(i != 0),
        RawBsonRef::Int64(i) => Ok(i != 0),
        RawBsonRef::Double(d) => Ok(d != 0.0),
        RawBsonRef::Null | RawBsonRef::Undefined => Ok(false),
        other => Err(wrong_type(
            cmd,
            field,
            other,
            "[bool, long, int, decimal, double]",
        )),
    }
}

/// A whole number option (int, long, or a double with no fraction).
pub fn as_i64(cmd: &str, field: &str, v: RawBsonRef<'_>) -> MongoResult<i64> {
    match v {
        RawBsonRef::Int32(i) => Ok(i64::from(i)),
        RawBsonRef::Int64(i) => Ok(i),
        RawBsonRef::Double(d) if d.fract() == 0.0 && d.is_finite() && d.abs() < 9.2e18 => {
            Ok(d as i64)
        }
        RawBsonRef::Double(d) => Err(MongoError::bad_value(format!(
            "BSON field '{cmd}.{field}' has a non-integral value {d}; it must be a whole number"
        ))),
        RawBsonRef::Decimal128(d) => {
            let s = d.to_string();
            s.parse::<i64>().map_err(|_| {
                MongoError::bad_value(format!(
                    "BSON field '{cmd}.{field}' must be a whole number, got {s}"
                ))
            })
        }
        other => Err(wrong_type(
            cmd,
            field,
            other,
            "[long, int, decimal, double]",
        )),
    }
}

/// A non-negative whole number option, with mongod's message for negatives.
pub fn as_non_negative(cmd: &str, field: &str, v: RawBsonRef<'_>) -> MongoResult<i64> {
    let n = as_i64(cmd, field, v)?;
    if n < 0 {
        return Err(MongoError::bad_value(format!(
            "BSON field '{field}' value must be >= 0, actual value '{n}'"
        )));
    }
    Ok(n)
}

pub fn as_str<'a>(cmd: &str, field: &str, v: RawBsonRef<'a>) -> MongoResult<&'a str> {
    match v {
        RawBsonRef::String(s) => Ok(s),
        other => Err(wrong_type(cmd, field, other, "string")),
    }
}

pub fn as_doc<'a>(cmd: &str, field: &str, v: RawBsonRef<'a>) -> MongoResult<&'a RawDocument> {
    match v {
        RawBsonRef::Document(d) => Ok(d),
        other => Err(wrong_type(cmd, field, other, "object")),
    }
}

pub fn as_array<'a>(cmd: &str, field: &str, v: RawBsonRef<'a>) -> MongoResult<&'a RawArray> {
    match v {
        RawBsonRef::Array(a) => Ok(a),
        other => Err(wrong_type(cmd, field, other, "array")),
    }
}

/// Converts a raw client document into an owned one (InvalidBSON if malformed).
pub fn to_document(d: &RawDocument) -> MongoResult<Document> {
    Document::try_from(d).map_err(crate::request::invalid_bson)
}

/// Converts a raw client value into an owned one.
pub fn to_bson(v: RawBsonRef<'_>) -> MongoResult<Bson> {
    Bson::try_from(v).map_err(crate::request::invalid_bson)
}

/// The collection name a command targets through its first field.
pub fn collection_name<'a>(cmd: &str, v: RawBsonRef<'a>) -> MongoResult<&'a str> {
    match v {
        RawBsonRef::String(s) => {
            check_collection_name(s)?;
            Ok(s)
        }
        other => Err(MongoError::new(
            ErrorCode::InvalidNamespace,
            format!(
                "collection name has invalid type {}: the '{cmd}' field must be a collection name string",
                type_name(other.element_type())
            ),
        )),
    }
}

/// mongod's rules for collection names.
pub fn check_collection_name(name: &str) -> MongoResult<()> {
    if name.is_empty() {
        return Err(MongoError::new(
            ErrorCode::InvalidNamespace,
            "Invalid namespace specified: collection name is empty",
        ));
    }
    if name.contains('\0') || name.contains('$') && !name.starts_with("system.") {
        return Err(MongoError::new(
            ErrorCode::InvalidNamespace,
            format!("Invalid collection name: '{name}' (collection names cannot contain '$' or null characters)"),
        ));
    }
    if name.starts_with('.') || name.ends_with('.') {
        return Err(MongoError::new(
            ErrorCode::InvalidNamespace,
            format!("Invalid collection name: '{name}'"),
        ));
    }
    Ok(())
}

/// Reads mongod's `scale` option (a positive whole number).
pub fn parse_scale(cmd: &str, v: bson::RawBsonRef<'_>) -> MongoResult<u64> {
    let s = as_i64(cmd, "scale", v)?;
    if s < 1 {
        return Err(MongoError::bad_value("scale has to be >= 1"));
    }
    Ok(s as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_args_sorted() {
        let mut v = GENERIC_ARGS.to_vec();
        v.sort_unstable();
        assert_eq!(v, GENERIC_ARGS);
    }

    #[test]
    fn number_parsing() {
        assert_eq!(as_i64("find", "limit", RawBsonRef::Double(5.0)).unwrap(), 5);
        assert!(as_i64("find", "limit", RawBsonRef::Double(5.5)).is_err());
        let e = as_i64("find", "limit", RawBsonRef::String("x")).unwrap_err();
        assert_eq!(e.code, ErrorCode::TypeMismatch);
        assert_eq!(e.message, "BSON field 'find.limit' is the wrong type 'string', expected types '[long, int, decimal, double]'");
        assert!(as_non_negative("find", "skip", RawBsonRef::Int32(-1)).is_err());
    }

    #[test]
    fn unknown_fields() {
        assert!(check_known("find", "lsid", &["filter"]).is_ok());
        let e = check_known("find", "fliter", &["filter"]).unwrap_err();
        assert_eq!(e.code.code(), 40415);
    }

    #[test]
    fn collection_names() {
        assert!(check_collection_name("a.b").is_ok());
        assert!(check_collection_name("").is_err());
        assert!(check_collection_name("a$b").is_err());
        assert!(check_collection_name(".a").is_err());
    }
}
