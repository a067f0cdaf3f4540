//! `renameCollection`: `{renameCollection: "db.from", to: "db.to", dropTarget}`.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct RenameCollection {
    from: (String, String),
    to: (String, String),
    drop_target: bool,
}

fn split_ns(ns: &str) -> MongoResult<(String, String)> {
    match ns.split_once('.') {
        Some((db, coll)) if !db.is_empty() && !coll.is_empty() => {
            crate::request::check_db_name(db)?;
            fields::check_collection_name(coll)?;
            Ok((db.to_string(), coll.to_string()))
        }
        _ => Err(MongoError::new(
            ErrorCode::InvalidNamespace,
            format!("Invalid namespace specified '{ns}'"),
        )),
    }
}

impl Command for RenameCollection {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        // A write concern a standalone server cannot satisfy fails the command.
        crate::fields::write::write_concern(req.name, req.body)?;
        let n = req.name;
        let (mut from, mut to, mut drop_target) = (None, None, false);
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "renameCollection" => {
                    from = Some(split_ns(fields::as_str(n, "renameCollection", v)?)?)
                }
                "to" => to = Some(split_ns(fields::as_str(n, "to", v)?)?),
                "dropTarget" => drop_target = fields::as_bool(n, "dropTarget", v)?,
                "stayTemp" => {
                    fields::as_bool(n, "stayTemp", v)?;
                }
                other => fields::check_known(n, other, &[])?,
            }
        }
        let from = from.ok_or_else(|| fields::missing_field(n, "renameCollection"))?;
        let to = to.ok_or_else(|| fields::missing_field(n, "to"))?;
        Ok(RenameCollection {
            from,
            to,
            drop_target,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let storage = &ctx.state.storage;
        let (fd, fc) = &self.from;
        let (td, tc) = &self.to;
        if storage.collection(fd, fc).is_none() {
            return Err(MongoError::new(
                ErrorCode::NamespaceNotFound,
                format!("Source collection {fd}.{fc} does not exist"),
            ));
        }
        // The manual: renameCollection is not compatible with time series
        // collections (their buckets would be left behind).
        if crate::namespaces::timeseries::options_of(storage, fd, fc).is_some()
            || crate::namespaces::timeseries::options_of(storage, td, tc).is_some()
        {
            return Err(MongoError::new(
                ErrorCode::IllegalOperation,
                "renameCollection is not supported on time-series collections",
            ));
        }
        if self.from == self.to {
            return Err(MongoError::new(
                ErrorCode::IllegalOperation,
                "Can't rename a collection to itself",
            ));
        }
        if storage.collection(td, tc).is_some() && !self.drop_target {
            return Err(MongoError::new(
                ErrorCode::NamespaceExists,
                "target namespace exists",
            ));
        }
        storage.rename_collection(fd, fc, td, tc, self.drop_target)?;
        ctx.state
            .cursors
            .kill_namespace(&crate::namespaces::ns(fd, fc));
        ctx.state
            .cursors
            .kill_namespace(&crate::namespaces::ns(td, tc));
        reply::ok(doc! {})
    }
}
