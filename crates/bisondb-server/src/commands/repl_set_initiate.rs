//! `replSetInitiate` (mongosh `rs.initiate()`): makes this node, started with
//! `--replSet`, the one member and primary of its set. Without a
//! configuration (or with an empty one) it builds mongod's default, this
//! node alone as `host:port`.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, Document, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::repl::{set_config, Initiated};
use crate::reply;
use crate::request::CommandRequest;

pub struct ReplSetInitiate {
    config: Option<Document>,
}

impl Command for ReplSetInitiate {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let config = match req
            .body
            .get(req.name)
            .map_err(crate::request::invalid_bson)?
        {
            Some(RawBsonRef::Document(d)) if !d.is_empty() => Some(crate::fields::to_document(d)?),
            _ => None,
        };
        Ok(ReplSetInitiate { config })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let state = ctx.state;
        let repl = state.repl();
        repl.require_enabled()?;
        let port = state.bound_port.get().copied().unwrap_or(state.config.port);
        let set_name = repl.set_name().unwrap_or_default().to_string();
        let defaulted = self.config.is_none();
        let given = self.config.unwrap_or_else(|| {
            doc! {
                "_id": set_name.clone(),
                "version": 1,
                "members": [{"_id": 0, "host": set_config::default_host(port)}],
            }
        });
        let initiated = repl.change_config(&state.storage, |current| {
            if current.is_some() {
                return Err(MongoError::new(
                    ErrorCode::AlreadyInitialized,
                    "already initialized",
                ));
            }
            let mut config = set_config::complete(
                &given,
                &set_name,
                port,
                &state.config.bind_ip,
                Some(bson::oid::ObjectId::new()),
            )?;
            // The node elects itself at once: term 1.
            config.insert("term", 1i64);
            Ok(Initiated { config, term: 1 })
        })?;
        crate::repl::on_elected(state, "initiating set")?;
        let mut reply = doc! {};
        if defaulted {
            let me = set_config::member_host(&initiated.config);
            reply.insert(
                "info2",
                "no configuration specified. Using a default configuration for the set",
            );
            reply.insert("me", me);
        }
        reply::ok(reply)
    }
}
