//! Pieces shared by several commands: namespaces, write concerns, cursor replies.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_storage::Durability;
use bson::{doc, Document, RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf};

use crate::args;
use crate::cursor::Batch;

/// A write concern as far as BisonDB acts on it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WriteConcern {
    /// `w: 0`: the client wants no acknowledgement.
    pub unacknowledged: bool,
    pub durability: Durability,
}

impl Default for WriteConcern {
    fn default() -> Self {
        WriteConcern {
            unacknowledged: false,
            durability: Durability::Buffered,
        }
    }
}

/// Reads `writeConcern` from a command body. `j: true` and `w: "majority"` wait for
/// the log sync; `w` greater than 1 cannot be satisfied by a standalone server.
pub fn write_concern(cmd: &str, body: &RawDocument) -> MongoResult<WriteConcern> {
    let mut wc = WriteConcern::default();
    let Some(v) = body
        .get("writeConcern")
        .map_err(crate::request::invalid_bson)?
    else {
        return Ok(wc);
    };
    let d = args::as_doc(cmd, "writeConcern", v)?;
    for el in d.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        match k.as_str() {
            "w" => match v {
                RawBsonRef::Int32(_) | RawBsonRef::Int64(_) | RawBsonRef::Double(_) => {
                    let n = args::as_i64(cmd, "writeConcern.w", v)?;
                    if n < 0 {
                        return Err(MongoError::new(
                            ErrorCode::FailedToParse,
                            "w has to be a non-negative number and not greater than 50; found: "
                                .to_string()
                                + &n.to_string(),
                        ));
                    }
                    if n > 1 {
                        return Err(MongoError::location(
                            2,
                            "cannot use 'w' > 1 on a standalone server (BisonDB runs without replication)",
                        ));
                    }
                    wc.unacknowledged = n == 0;
                }
                RawBsonRef::String("majority") => wc.durability = Durability::Sync,
                RawBsonRef::String(tag) => {
                    return Err(MongoError::new(
                        ErrorCode::Other(79),
                        format!(
                        "No write concern mode named '{tag}' found in replica set configuration"
                    ),
                    ))
                }
                RawBsonRef::Document(_) => {}
                other => {
                    return Err(args::wrong_type(
                        cmd,
                        "writeConcern.w",
                        other,
                        "[string, int, object]",
                    ))
                }
            },
            "j" => {
                if args::as_bool(cmd, "writeConcern.j", v)? {
                    wc.durability = Durability::Sync;
                }
            }
            "fsync" => {
                if args::as_bool(cmd, "writeConcern.fsync", v)? {
                    wc.durability = Durability::Sync;
                }
            }
            "wtimeout" | "wtimeoutMS" | "provenance" => {}
            other => return Err(args::unknown_field("writeConcern", other)),
        }
    }
    if wc.unacknowledged && wc.durability == Durability::Sync {
        // mongod: {w: 0, j: true} is contradictory.
        return Err(MongoError::failed_to_parse(
            "Cannot request unacknowledged write concern and journaling",
        ));
    }
    Ok(wc)
}

/// `{cursor: {firstBatch|nextBatch: [...], id, ns}, ok: 1}`, built raw so result
/// documents are copied once, never re-parsed.
pub fn cursor_reply(
    ns: &str,
    id: i64,
    batch: RawArrayBuf,
    first: bool,
) -> MongoResult<RawDocumentBuf> {
    let mut cursor = RawDocumentBuf::new();
    cursor.append(key(if first { "firstBatch" } else { "nextBatch" })?, batch);
    cursor.append(key("id")?, id);
    cursor.append(key("ns")?, ns);
    let mut reply = RawDocumentBuf::new();
    reply.append(key("cursor")?, cursor);
    reply.append(key("ok")?, 1.0);
    Ok(reply)
}

fn key(s: &'static str) -> MongoResult<&'static bson::raw::CStr> {
    <&bson::raw::CStr>::try_from(s)
        .map_err(|e| MongoError::internal(format!("bad reply key {s}: {e}")))
}

/// Registers the rest of a batch as a cursor (if any) and builds the reply.
pub fn finish_first_batch(
    state: &crate::state::ServerState,
    ns: &str,
    mut cursor: crate::cursor::Cursor,
    batch: Batch,
    single_batch: bool,
) -> MongoResult<RawDocumentBuf> {
    let id = if batch.exhausted || single_batch {
        0
    } else {
        cursor.ns = ns.to_string();
        state.cursors.register(cursor)
    };
    cursor_reply(ns, id, batch.docs, true)
}

/// `db.coll`
pub fn ns(db: &str, coll: &str) -> String {
    format!("{db}.{coll}")
}

/// The `_id_` index as listIndexes reports it.
pub fn id_index_spec() -> Document {
    doc! {"v": 2, "key": {"_id": 1}, "name": "_id_"}
}

/// Options accepted and ignored because they only affect performance or replication.
pub const IGNORED_OPTIONS: &[&str] = &["$readPreference", "readConcern"];

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
            out.append(key("_id")?, id);
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
            out.append(key("_id")?, bson::oid::ObjectId::new());
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

/// A storage error as the client sees it, with duplicate-key details for writeErrors.
pub fn storage_error_details(e: &bisondb_storage::StorageError) -> Option<Document> {
    match e {
        bisondb_storage::StorageError::DuplicateKey(info) => {
            Some(doc! {"keyPattern": info.key_pattern.clone(), "keyValue": info.key_value.clone()})
        }
        _ => None,
    }
}

/// The fields every write command shares: the target collection (the command's
/// first field), its statements (a body array or a kind-1 sequence named `list`),
/// `ordered`, and the write concern.
pub struct WriteBatch<'a> {
    pub coll: String,
    pub statements: Vec<&'a RawDocument>,
    pub ordered: bool,
    pub wc: WriteConcern,
}

/// Parses [`WriteBatch`] fields; `also` names the command's other accepted fields,
/// which the command reads itself (`let`, `bypassDocumentValidation`).
pub fn parse_write_batch<'a>(
    req: &crate::request::CommandRequest<'a>,
    list: &str,
    also: &[&str],
) -> MongoResult<WriteBatch<'a>> {
    let n = req.name;
    let mut coll = None;
    let mut ordered = true;
    for el in req.body.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        match k.as_str() {
            k if k == n => coll = Some(args::collection_name(n, v)?.to_string()),
            "ordered" => ordered = args::as_bool(n, "ordered", v)?,
            k if k == list || also.contains(&k) => {}
            other => args::check_known(n, other, &[])?,
        }
    }
    let coll = coll.ok_or_else(|| args::missing_field(n, n))?;
    let statements = req
        .documents(list)?
        .ok_or_else(|| args::missing_field(n, list))?;
    if statements.is_empty() || statements.len() > 100_000 {
        return Err(MongoError::new(
            ErrorCode::InvalidLength,
            format!(
                "Write batch sizes must be between 1 and 100000. Got {} operations.",
                statements.len()
            ),
        ));
    }
    let wc = write_concern(n, req.body)?;
    Ok(WriteBatch {
        coll,
        statements,
        ordered,
        wc,
    })
}
