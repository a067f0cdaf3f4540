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

/// The largest `maxTimeMS` mongod accepts (`INT_MAX`).
pub const MAX_TIME_MS_LIMIT: i64 = i32::MAX as i64;

/// `maxTimeMS` read as mongod's `parseMaxTimeMS` reads it: any number type
/// (a decimal is truncated), whole and in `[0, 2147483647]`; 0 is "no limit".
/// Every error is BadValue (2), with mongod's messages.
pub fn max_time_ms(v: RawBsonRef<'_>) -> MongoResult<u64> {
    // mongod's `safeNumberLong`: truncates, saturates, and reads NaN as 0.
    let saturate = |d: f64| {
        if d.is_nan() {
            0
        } else {
            d as i64
        }
    };
    let n = match v {
        RawBsonRef::Int32(i) => i64::from(i),
        RawBsonRef::Int64(i) => i,
        RawBsonRef::Double(d) => saturate(d),
        RawBsonRef::Decimal128(d) => saturate(d.to_string().parse::<f64>().unwrap_or(f64::NAN)),
        _ => return Err(MongoError::bad_value("maxTimeMS must be a number")),
    };
    if !(0..=MAX_TIME_MS_LIMIT).contains(&n) {
        return Err(MongoError::bad_value(format!(
            "{n} value for maxTimeMS is out of range [0, {MAX_TIME_MS_LIMIT}]"
        )));
    }
    if let RawBsonRef::Double(d) = v {
        if d.fract() != 0.0 {
            return Err(MongoError::bad_value("maxTimeMS has non-integral value"));
        }
    }
    Ok(n as u64)
}

/// Checks the types of the generic arguments any command may carry, once per
/// command before it runs (the registry's dispatch), so that no command can
/// ignore a malformed one: `maxTimeMS` (see [`max_time_ms`]; a `getMore` may
/// send null), `readConcern`, `writeConcern`, `lsid` and `$readPreference`
/// (objects), `apiVersion` (the string "1", else 322 APIVersionError as in
/// mongod), `apiStrict` and `apiDeprecationErrors` (booleans). `comment` takes
/// any type. What these objects hold is read where they are used.
pub fn check_generic_args(
    cmd: &str,
    body: &RawDocument,
    replica_set: bool,
) -> MongoResult<SessionArgs> {
    let mut args = SessionArgs::default();
    let mut lsid = false;
    for el in body.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        match k.as_str() {
            "txnNumber" => args.txn_number = Some(txn_number(cmd, v)?),
            "autocommit" => args.autocommit = Some(as_bool(cmd, "autocommit", v)?),
            "startTransaction" => {
                args.start_transaction = Some(as_bool(cmd, "startTransaction", v)?)
            }
            "maxTimeMS" if cmd == "getMore" && v == RawBsonRef::Null => {}
            "maxTimeMS" => {
                max_time_ms(v)?;
            }
            k @ ("readConcern" | "writeConcern" | "lsid" | "$readPreference") => {
                as_doc(cmd, k, v)?;
                lsid |= k == "lsid";
            }
            "apiVersion" if as_str(cmd, "apiVersion", v)? != "1" => {
                return Err(MongoError::new(
                    ErrorCode::APIVersionError,
                    "API version must be \"1\"",
                ));
            }
            k @ ("apiStrict" | "apiDeprecationErrors") if !matches!(v, RawBsonRef::Boolean(_)) => {
                return Err(wrong_type(cmd, k, v, "bool"));
            }
            _ => {}
        }
    }
    transaction_fields(&args, lsid, replica_set)?;
    Ok(args)
}

/// Whether the request asks for the Stable API strictly (`apiStrict: true`).
pub fn api_strict(body: &RawDocument) -> bool {
    matches!(body.get("apiStrict"), Ok(Some(RawBsonRef::Boolean(true))))
}

/// The Stable API parameters as mongod's `initializeAPIParameters` checks
/// them against the command (`api_version_1`, the registry's fact):
/// `apiStrict` or `apiDeprecationErrors` need `apiVersion` (4886600), and
/// with `apiStrict: true` a command outside version 1 fails with 323
/// APIStrictError. Version 1 deprecates nothing, so `apiDeprecationErrors`
/// refuses nothing. The types and the version's value are
/// [`check_generic_args`]'s.
pub fn check_api_version(cmd: &str, api_version_1: bool, body: &RawDocument) -> MongoResult<()> {
    let mut version = false;
    let mut flags = false;
    for el in body.iter() {
        let (k, _) = el.map_err(crate::request::invalid_bson)?;
        match k.as_str() {
            "apiVersion" => version = true,
            "apiStrict" | "apiDeprecationErrors" => flags = true,
            _ => {}
        }
    }
    if flags && !version {
        return Err(MongoError::new(
            ErrorCode::Other(4886600),
            "Provided apiStrict and/or apiDeprecationErrors without passing apiVersion",
        ));
    }
    if api_strict(body) && !api_version_1 {
        return Err(MongoError::new(
            ErrorCode::APIStrictError,
            format!("Provided apiStrict:true, but the command {cmd} is not in API Version 1"),
        ));
    }
    Ok(())
}

/// A command's transaction fields (`txnNumber`, `autocommit`,
/// `startTransaction`), typed by [`check_generic_args`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionArgs {
    pub txn_number: Option<i64>,
    pub autocommit: Option<bool>,
    pub start_transaction: Option<bool>,
}

impl SessionArgs {
    /// A statement of a multi-document transaction (`autocommit: false`).
    pub fn in_transaction(&self) -> bool {
        self.autocommit.is_some()
    }
}

/// `txnNumber`: a long (mongod's IDL also takes an int or a whole double).
fn txn_number(cmd: &str, v: RawBsonRef<'_>) -> MongoResult<i64> {
    match v {
        RawBsonRef::Int64(n) => Ok(n),
        RawBsonRef::Int32(n) => Ok(i64::from(n)),
        RawBsonRef::Double(d) if d.fract() == 0.0 && d.is_finite() && d.abs() < 9.2e18 => {
            Ok(d as i64)
        }
        other => Err(wrong_type(cmd, "txnNumber", other, "long")),
    }
}

/// A transaction's or a retryable write's fields, as mongod's
/// `initializeOperationSessionInfo` answers them. On a standalone a
/// transaction number is refused outright (drivers only send one to a
/// replica set or mongos), so no statement of a transaction ever runs
/// outside one. In replica-set mode a transaction number needs the session
/// it numbers; `autocommit` can only be false and `startTransaction` only
/// true. On both, `autocommit` and `startTransaction` need the fields they
/// depend on.
fn transaction_fields(args: &SessionArgs, lsid: bool, replica_set: bool) -> MongoResult<()> {
    if let Some(n) = args.txn_number {
        if !replica_set {
            return Err(MongoError::new(
                ErrorCode::IllegalOperation,
                "Transaction numbers are only allowed on a replica set member or mongos",
            ));
        }
        if !lsid {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                "Transaction number requires a session ID to also be specified",
            ));
        }
        if n < 0 {
            return Err(MongoError::bad_value(format!(
                "Transaction number cannot be negative: {n}"
            )));
        }
    }
    if let Some(autocommit) = args.autocommit {
        if args.txn_number.is_none() {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                "'autocommit' field requires a transaction number to also be specified",
            ));
        }
        if autocommit {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                "Specifying autocommit=true is not allowed.",
            ));
        }
    }
    if let Some(start) = args.start_transaction {
        if args.autocommit.is_none() {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                "'startTransaction' field requires 'autocommit' field to also be specified",
            ));
        }
        if !start {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                "Specifying startTransaction=false is not allowed.",
            ));
        }
    }
    Ok(())
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
    fn max_time_ms_as_mongod_parses_it() {
        assert_eq!(max_time_ms(RawBsonRef::Int32(0)).unwrap(), 0);
        assert_eq!(max_time_ms(RawBsonRef::Double(100.0)).unwrap(), 100);
        assert_eq!(
            max_time_ms(RawBsonRef::Int64(i64::from(i32::MAX))).unwrap(),
            2147483647
        );
        let msg = |v| max_time_ms(v).unwrap_err().message;
        assert_eq!(msg(RawBsonRef::String("x")), "maxTimeMS must be a number");
        assert_eq!(msg(RawBsonRef::Null), "maxTimeMS must be a number");
        assert_eq!(
            msg(RawBsonRef::Int32(-5)),
            "-5 value for maxTimeMS is out of range [0, 2147483647]"
        );
        assert_eq!(
            msg(RawBsonRef::Int64(1 << 40)),
            "1099511627776 value for maxTimeMS is out of range [0, 2147483647]"
        );
        assert_eq!(
            msg(RawBsonRef::Double(1.5)),
            "maxTimeMS has non-integral value"
        );
        assert_eq!(
            max_time_ms(RawBsonRef::Boolean(true)).unwrap_err().code,
            ErrorCode::BadValue
        );
    }

    #[test]
    fn generic_args_types() {
        let ok = bson::rawdoc! {"find": "c", "readConcern": {"level": "local"}, "lsid": {"id": 1},
        "apiVersion": "1", "apiStrict": false, "comment": 5, "maxTimeMS": 10};
        assert!(check_generic_args("find", &ok, false).is_ok());
        let code = |d: &RawDocument| {
            check_generic_args("find", d, false)
                .unwrap_err()
                .code
                .code()
        };
        assert_eq!(code(&bson::rawdoc! {"find": "c", "readConcern": "x"}), 14);
        assert_eq!(code(&bson::rawdoc! {"find": "c", "writeConcern": 1}), 14);
        assert_eq!(
            code(&bson::rawdoc! {"find": "c", "$readPreference": "p"}),
            14
        );
        assert_eq!(code(&bson::rawdoc! {"find": "c", "apiVersion": "2"}), 322);
        assert_eq!(code(&bson::rawdoc! {"find": "c", "apiStrict": 1}), 14);
        assert_eq!(code(&bson::rawdoc! {"find": "c", "maxTimeMS": {}}), 2);
        let get_more = bson::rawdoc! {"getMore": 1_i64, "maxTimeMS": null};
        assert!(check_generic_args("getMore", &get_more, false).is_ok());
    }

    #[test]
    fn transaction_fields_by_mode() {
        let code = |d: &RawDocument, rs: bool| {
            check_generic_args("insert", d, rs)
                .err()
                .map(|e| e.code.code())
        };
        let lsid = bson::rawdoc! {"id": 1};
        let retry = bson::rawdoc! {"insert": "c", "lsid": lsid.clone(), "txnNumber": 1_i64};
        // A standalone refuses any transaction number; a replica set takes it.
        assert_eq!(code(&retry, false), Some(20));
        assert_eq!(code(&retry, true), None);
        let args = check_generic_args("insert", &retry, true).unwrap_or_default();
        assert_eq!(args.txn_number, Some(1));
        assert!(!args.in_transaction());
        // Without its session, with autocommit true or startTransaction false.
        assert_eq!(
            code(&bson::rawdoc! {"insert": "c", "txnNumber": 1_i64}, true),
            Some(72)
        );
        assert_eq!(
            code(
                &bson::rawdoc! {"find": "c", "lsid": lsid.clone(), "txnNumber": 1_i64, "autocommit": true},
                true
            ),
            Some(72)
        );
        assert_eq!(
            code(
                &bson::rawdoc! {"find": "c", "lsid": lsid.clone(), "txnNumber": 1_i64, "autocommit": false, "startTransaction": false},
                true
            ),
            Some(72)
        );
        let txn = bson::rawdoc! {"find": "c", "lsid": lsid.clone(), "txnNumber": 1_i64, "autocommit": false, "startTransaction": true};
        assert!(check_generic_args("find", &txn, true).is_ok_and(|a| a.in_transaction()));
        assert_eq!(
            code(&bson::rawdoc! {"find": "c", "autocommit": false}, true),
            Some(72)
        );
        assert_eq!(
            code(
                &bson::rawdoc! {"find": "c", "lsid": lsid, "txnNumber": "1"},
                true
            ),
            Some(14)
        );
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
