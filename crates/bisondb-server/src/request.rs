//! A command as the registry sees it: the body document, its kind-1 document
//! sequences, the command name and the target database.
//!
//! Built from an OP_MSG or a legacy OP_QUERY on `<db>.$cmd`; also constructible from a
//! bare document so commands are testable without a socket.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{RawBsonRef, RawDocument};

/// The documents of one kind-1 section, as borrowed slices.
pub struct Sequence<'a> {
    pub identifier: &'a str,
    pub documents: Vec<&'a RawDocument>,
}

pub struct CommandRequest<'a> {
    pub body: &'a RawDocument,
    pub sequences: Vec<Sequence<'a>>,
    /// The command name exactly as sent (first key of the body).
    pub name: &'a str,
    /// The database from `$db` (OP_MSG) or the namespace (OP_QUERY).
    pub db: String,
}

impl<'a> CommandRequest<'a> {
    /// Reads the name and `$db` of an OP_MSG body.
    pub fn from_msg(body: &'a RawDocument, sequences: Vec<Sequence<'a>>) -> MongoResult<Self> {
        let name = first_key(body)?;
        let db = match body.get("$db") {
            Ok(Some(RawBsonRef::String(s))) => s.to_string(),
            Ok(Some(_)) => {
                return Err(MongoError::type_mismatch(
                    "BSON field '$db' is the wrong type, expected type 'string'",
                ))
            }
            Ok(None) => {
                return Err(MongoError::location(
                    40571,
                    "OP_MSG requests require a $db argument",
                ))
            }
            Err(e) => return Err(invalid_bson(e)),
        };
        // `$external` is mongod's one database name with a `$`: where the
        // users authenticated elsewhere (MONGODB-X509) live; user and
        // authentication commands name it.
        if db != "$external" {
            check_db_name(&db)?;
        }
        Ok(CommandRequest {
            body,
            sequences,
            name,
            db,
        })
    }

    /// A request over a plain document (tests, OP_QUERY).
    pub fn from_body(body: &'a RawDocument, db: &str) -> MongoResult<Self> {
        let name = first_key(body)?;
        Ok(CommandRequest {
            body,
            sequences: Vec::new(),
            name,
            db: db.to_string(),
        })
    }

    /// The documents of a field that drivers may send either in the body as an array
    /// or as a kind-1 sequence (`documents`, `updates`, `deletes`).
    pub fn documents(&self, field: &str) -> MongoResult<Option<Vec<&'a RawDocument>>> {
        let mut out: Option<Vec<&'a RawDocument>> = None;
        for seq in &self.sequences {
            if seq.identifier == field {
                if out.is_some() {
                    return Err(MongoError::bad_value(format!(
                        "Duplicate document sequence '{field}'"
                    )));
                }
                out = Some(seq.documents.clone());
            }
        }
        match self.body.get(field) {
            Ok(Some(RawBsonRef::Array(arr))) => {
                if out.is_some() {
                    return Err(MongoError::bad_value(format!(
                        "Field '{field}' is given both in the command body and as a document sequence"
                    )));
                }
                let mut docs = Vec::new();
                for (i, v) in arr.into_iter().enumerate() {
                    match v {
                        Ok(RawBsonRef::Document(d)) => docs.push(d),
                        Ok(other) => {
                            return Err(MongoError::type_mismatch(format!(
                                "BSON field '{}.{field}.{i}' is the wrong type '{}', expected type 'object'",
                                self.name,
                                crate::fields::type_name(other.element_type())
                            )))
                        }
                        Err(e) => return Err(invalid_bson(e)),
                    }
                }
                Ok(Some(docs))
            }
            Ok(Some(other)) => Err(MongoError::type_mismatch(format!(
                "BSON field '{}.{field}' is the wrong type '{}', expected type 'array'",
                self.name,
                crate::fields::type_name(other.element_type())
            ))),
            Ok(None) => Ok(out),
            Err(e) => Err(invalid_bson(e)),
        }
    }
}

fn first_key(body: &RawDocument) -> MongoResult<&str> {
    match body.iter().next() {
        Some(Ok((k, _))) => Ok(k.as_str()),
        Some(Err(e)) => Err(invalid_bson(e)),
        None => Err(MongoError::failed_to_parse(
            "Empty command object: a command document needs a command name as its first field",
        )),
    }
}

/// mongod's rules for database names.
pub fn check_db_name(db: &str) -> MongoResult<()> {
    if db.is_empty() {
        return Err(MongoError::new(
            ErrorCode::InvalidNamespace,
            "Invalid empty database name",
        ));
    }
    if db.len() >= 64 {
        return Err(MongoError::new(
            ErrorCode::InvalidNamespace,
            format!("Invalid database name '{db}': database names must be shorter than 64 bytes"),
        ));
    }
    if let Some(c) = db
        .chars()
        .find(|c| matches!(c, '/' | '\\' | '.' | ' ' | '"' | '$' | '\0'))
    {
        return Err(MongoError::new(
            ErrorCode::InvalidNamespace,
            format!("Invalid database name '{db}': it contains the character '{c}'"),
        ));
    }
    Ok(())
}

/// Maps a BSON parse error in a client document to mongod's InvalidBSON.
pub fn invalid_bson(e: impl std::fmt::Display) -> MongoError {
    MongoError::new(
        ErrorCode::InvalidBSON,
        format!("invalid BSON in request: {e}"),
    )
}
