//! The fields write commands share: the write concern, and the batch of
//! statements with its target collection and `ordered`.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_storage::Durability;
use bson::{RawBsonRef, RawDocument};

use crate::fields;

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
    let v = body
        .get("writeConcern")
        .map_err(crate::request::invalid_bson)?;
    write_concern_of(cmd, v)
}

/// [`write_concern`] of a body's first `writeConcern` field, `v`, found by
/// a caller that reads the body anyway.
pub fn write_concern_of(cmd: &str, v: Option<RawBsonRef<'_>>) -> MongoResult<WriteConcern> {
    let mut wc = WriteConcern::default();
    let Some(v) = v else {
        return Ok(wc);
    };
    let d = fields::as_doc(cmd, "writeConcern", v)?;
    for el in d.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        match k.as_str() {
            "w" => match v {
                RawBsonRef::Int32(_) | RawBsonRef::Int64(_) | RawBsonRef::Double(_) => {
                    let n = fields::as_i64(cmd, "writeConcern.w", v)?;
                    if n < 0 {
                        return Err(MongoError::new(
                            ErrorCode::FailedToParse,
                            "w has to be a non-negative number and not greater than 50; found: "
                                .to_string()
                                + &n.to_string(),
                        ));
                    }
                    // A replica-set member answers it after the write
                    // (`repl::cluster_time`).
                    if n > 1 && !crate::repl::on_member() {
                        return Err(MongoError::location(
                            2,
                            "cannot use 'w' > 1 on a standalone server (BisonDB runs without replication)",
                        ));
                    }
                    wc.unacknowledged = n == 0;
                }
                RawBsonRef::String("majority") => wc.durability = Durability::Sync,
                RawBsonRef::String(_) if crate::repl::on_member() => {}
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
                    return Err(fields::wrong_type(
                        cmd,
                        "writeConcern.w",
                        other,
                        "[string, int, object]",
                    ))
                }
            },
            "j" => {
                if fields::as_bool(cmd, "writeConcern.j", v)? {
                    wc.durability = Durability::Sync;
                }
            }
            "fsync" => {
                if fields::as_bool(cmd, "writeConcern.fsync", v)? {
                    wc.durability = Durability::Sync;
                }
            }
            "wtimeout" | "wtimeoutMS" | "provenance" => {}
            other => return Err(fields::unknown_field("writeConcern", other)),
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
    // The first `writeConcern`, as `RawDocument::get` finds it: one pass
    // over the body for both (another scan per write was 1.3k
    // instructions, 2.4k with a set's `$clusterTime` in the body).
    let mut wc_field = None;
    for el in req.body.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        match k.as_str() {
            k if k == n => coll = Some(fields::collection_name(n, v)?.to_string()),
            "ordered" => ordered = fields::as_bool(n, "ordered", v)?,
            // A command that reads `let` reads it itself; one that does not
            // (insert) still refuses a malformed one, as mongod's IDL does.
            "let" if also.contains(&"let") => {
                fields::as_doc(n, "let", v)?;
            }
            k if k == list || also.contains(&k) => {}
            "writeConcern" if wc_field.is_none() => wc_field = Some(v),
            other => fields::check_known(n, other, &[])?,
        }
    }
    let coll = coll.ok_or_else(|| fields::missing_field(n, n))?;
    let statements = req
        .documents(list)?
        .ok_or_else(|| fields::missing_field(n, list))?;
    if statements.is_empty() || statements.len() > 100_000 {
        return Err(MongoError::new(
            ErrorCode::InvalidLength,
            format!(
                "Write batch sizes must be between 1 and 100000. Got {} operations.",
                statements.len()
            ),
        ));
    }
    let wc = write_concern_of(n, wc_field)?;
    Ok(WriteBatch {
        coll,
        statements,
        ordered,
        wc,
    })
}
