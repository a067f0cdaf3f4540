//! `replSetReconfig` (mongosh `rs.reconfig()`): replaces the set's
//! configuration with a newer version of it, still of this one member.
//! mongod's rules: the version must grow (with `force` the primary picks a
//! much larger one), the set's name and `replicaSetId` stay, the term is the
//! current one whatever the document says.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{Bson, Document, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::repl::{set_config, Initiated};
use crate::reply;
use crate::request::CommandRequest;

pub struct ReplSetReconfig {
    config: Document,
    force: bool,
}

impl Command for ReplSetReconfig {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let mut config = None;
        let mut force = false;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "replSetReconfig" => {
                    config = Some(fields::to_document(fields::as_doc(
                        req.name,
                        "replSetReconfig",
                        v,
                    )?)?)
                }
                "force" => force = fields::as_bool(req.name, "force", v)?,
                _ => {}
            }
        }
        Ok(ReplSetReconfig {
            config: config.unwrap_or_default(),
            force,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let state = ctx.state;
        let repl = state.repl();
        repl.require_initiated()?;
        if !self.force && !repl.is_writable_primary() {
            return Err(MongoError::new(
                ErrorCode::NotWritablePrimary,
                "replSetReconfig should only be run on a writable PRIMARY",
            ));
        }
        let port = state.bound_port.get().copied().unwrap_or(state.config.port);
        let set_name = repl.set_name().unwrap_or_default().to_string();
        let given = self.config;
        let force = self.force;
        repl.change_config(&state.storage, |current| {
            let current = current.ok_or_else(|| {
                MongoError::new(ErrorCode::NotYetInitialized, "no replset config has been received")
            })?;
            let old_version = current.config.get_i32("version").unwrap_or(1);
            if let Some(Bson::String(name)) = given.get("_id") {
                if name != &set_name {
                    return Err(MongoError::new(
                        ErrorCode::NewReplicaSetConfigurationIncompatible,
                        format!(
                            "New config is rejected :: caused by :: New and old configurations differ in replica set name; old was {set_name}, and new is {name}"
                        ),
                    ));
                }
            }
            let old_id = current
                .config
                .get_document("settings")
                .ok()
                .and_then(|s| s.get_object_id("replicaSetId").ok());
            if let (Some(old), Ok(settings)) = (old_id, given.get_document("settings")) {
                if let Ok(new) = settings.get_object_id("replicaSetId") {
                    if new != old {
                        return Err(MongoError::new(
                            ErrorCode::NewReplicaSetConfigurationIncompatible,
                            format!(
                                "New config is rejected :: caused by :: New and old configurations differ in replica set ID; old was {old}, and new is {new}"
                            ),
                        ));
                    }
                }
            }
            let version = match given.get("version") {
                Some(Bson::Int32(v)) => i64::from(*v),
                Some(Bson::Int64(v)) => *v,
                Some(Bson::Double(v)) if v.fract() == 0.0 => *v as i64,
                Some(_) => {
                    return Err(MongoError::new(
                        ErrorCode::TypeMismatch,
                        "The replica set configuration's version must be a number",
                    ))
                }
                None => {
                    return Err(MongoError::new(
                        ErrorCode::InvalidReplicaSetConfig,
                        "Missing expected field \"version\"",
                    ))
                }
            };
            let version = if force {
                // mongod adds a large random amount so that a forced
                // configuration wins over any other one in flight.
                let jitter = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| i64::from(d.subsec_nanos() % 90_000));
                i64::from(old_version) + 10_000 + jitter
            } else {
                if version <= i64::from(old_version) {
                    return Err(MongoError::new(
                        ErrorCode::NewReplicaSetConfigurationIncompatible,
                        format!(
                            "New config is rejected :: caused by :: New replica set configuration version must be greater than old, but {version} is not greater than {old_version} for replica set {set_name}"
                        ),
                    ));
                }
                version
            };
            let version = i32::try_from(version).map_err(|_| {
                MongoError::bad_value("The replica set configuration's version is too large")
            })?;
            let mut config = set_config::complete(
                &given,
                &set_name,
                port,
                &state.config.bind_ip,
                old_id,
            )?;
            config.insert("version", version);
            config.insert("term", current.term);
            Ok(Initiated {
                config,
                term: current.term,
            })
        })?;
        reply::ok(bson::doc! {})
    }
}
