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
    /// The generic arguments of the body, read in one pass when first
    /// asked for ([`CommandRequest::generic`]).
    pub generic: std::cell::OnceCell<GenericArgs<'a>>,
}

/// Generic arguments that several steps of every command read (the cluster
/// time, read and write concern checks before and after it runs in
/// replica-set mode): read once per request in one pass over the body, not
/// once per step. Each is the first field of its name when it is a
/// document; otherwise absent, as a lookup with `RawDocument::get` sees it.
#[derive(Clone, Copy, Default)]
pub struct GenericArgs<'a> {
    pub cluster_time: Option<&'a RawDocument>,
    pub read_concern: Option<&'a RawDocument>,
    pub write_concern: Option<&'a RawDocument>,
    /// Whether the body has a `txnNumber` / an `autocommit` field (of any
    /// type): what labelling a reply asks of every command in a set.
    pub has_txn_number: bool,
    pub has_autocommit: bool,
}

impl<'a> GenericArgs<'a> {
    /// Reads `body` once (up to a malformed element, as `get` would stop).
    pub fn of(body: &'a RawDocument) -> GenericArgs<'a> {
        let mut out = GenericArgs::default();
        let mut seen = (false, false, false);
        for el in body.iter() {
            let Ok((k, v)) = el else { break };
            let slot = match k.as_str() {
                "$clusterTime" if !seen.0 => {
                    seen.0 = true;
                    &mut out.cluster_time
                }
                "readConcern" if !seen.1 => {
                    seen.1 = true;
                    &mut out.read_concern
                }
                "writeConcern" if !seen.2 => {
                    seen.2 = true;
                    &mut out.write_concern
                }
                "txnNumber" => {
                    out.has_txn_number = true;
                    continue;
                }
                "autocommit" => {
                    out.has_autocommit = true;
                    continue;
                }
                _ => continue,
            };
            if let RawBsonRef::Document(d) = v {
                *slot = Some(d);
            }
        }
        out
    }
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
        // `$external`, the virtual database of externally authenticated
        // users (MONGODB-X509), takes commands as in mongod.
        if db != EXTERNAL_DB {
            check_db_name(&db)?;
        }
        Ok(CommandRequest {
            body,
            sequences,
            name,
            db,
            generic: std::cell::OnceCell::new(),
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
            generic: std::cell::OnceCell::new(),
        })
    }

    /// The body's generic arguments ([`GenericArgs`]), read on first use.
    pub fn generic(&self) -> GenericArgs<'a> {
        *self.generic.get_or_init(|| GenericArgs::of(self.body))
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

/// The virtual database of externally authenticated users (MONGODB-X509).
pub const EXTERNAL_DB: &str = "$external";

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

#[cfg(test)]
mod tests {
    use super::GenericArgs;
    use bson::rawdoc;

    /// One pass finds what `RawDocument::get` would: the first field of
    /// each name, and only when it is a document.
    #[test]
    fn generic_args_are_the_first_document_of_each_name() {
        let body = rawdoc! {
            "insert": "c",
            "readConcern": "local",
            "$clusterTime": {"clusterTime": bson::Timestamp { time: 1, increment: 2 }},
            "writeConcern": {"w": 1},
            "readConcern": {"level": "snapshot"},
            "writeConcern": {"w": 2},
        };
        let args = GenericArgs::of(&body);
        assert!(args.read_concern.is_none());
        assert_eq!(
            args.write_concern.map(|d| d.to_owned()),
            Some(rawdoc! {"w": 1})
        );
        assert!(args
            .cluster_time
            .is_some_and(|d| d.get_timestamp("clusterTime").is_ok()));
        let plain = rawdoc! {"ping": 1};
        let none = GenericArgs::of(&plain);
        assert!(none.cluster_time.is_none() && none.write_concern.is_none());
    }
}
