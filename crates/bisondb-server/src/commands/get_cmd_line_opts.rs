//! `getCmdLineOpts`: the command line and the options as parsed, in mongod's shape.

use bisondb_error::MongoResult;
use bson::{doc, Document, RawDocumentBuf};

use super::{Command, Context};
use crate::reply;
use crate::request::CommandRequest;

pub struct GetCmdLineOpts;

impl Command for GetCmdLineOpts {
    fn parse(_req: &CommandRequest<'_>) -> MongoResult<Self> {
        Ok(GetCmdLineOpts)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let c = &ctx.state.config;
        let port = ctx.state.bound_port.get().copied().unwrap_or(c.port);
        let parsed = parsed_options(c, port);
        reply::ok(doc! {"argv": crate::tls::redact_argv(&c.argv), "parsed": parsed})
    }
}

/// The options as parsed, in mongod's shape (also the start-up log's
/// "Options set by command line"); `port` the one bound.
pub fn parsed_options(c: &crate::ServerConfig, port: u16) -> Document {
    let mut parsed = doc! {
            "net": {
                "port": i32::from(port),
                "bindIp": c.bind_ip.join(","),
                "maxIncomingConnections": c.max_conns as i64,
                "unixDomainSocket": {
                    "enabled": c.unix_socket,
                    "pathPrefix": c.unix_socket_prefix.display().to_string(),
                    "filePermissions": c.file_permissions as i32,
                },
            },
            "storage": {"dbPath": c.dbpath.display().to_string(), "engine": c.storage_engine.clone()},
    };
    // The log's settings, those given (mongod's `parsed` has the options set).
    let mut system_log = doc! {"quiet": c.quiet};
    if let (Some(path), crate::log::Destination::File) = (&c.logpath, c.log_destination) {
        system_log.insert("destination", "file");
        system_log.insert("path", path.display().to_string());
    }
    if c.log_append {
        system_log.insert("logAppend", true);
    }
    if c.log_rotate == crate::log::RotateMode::Reopen {
        system_log.insert("logRotate", "reopen");
    }
    if c.verbosity > 0 {
        system_log.insert("verbosity", i32::from(c.verbosity));
    }
    if !c.component_verbosity.is_empty() {
        let mut comps = Document::new();
        for (name, v) in &c.component_verbosity {
            comps.insert(name.clone(), doc! {"verbosity": i32::from(*v)});
        }
        system_log.insert("component", comps);
    }
    parsed.insert("systemLog", system_log);
    if let Some(name) = &c.repl_set_name {
        let mut replication = doc! {"replSet": name.clone()};
        if let Some(mb) = c.oplog_size_mb {
            replication.insert("oplogSizeMB", mb as i64);
        }
        parsed.insert("replication", replication);
    }
    let mut security = crate::tls::parsed_security_options(c);
    if c.redact_client_log_data {
        security.insert("redactClientLogData", true);
    }
    if !security.is_empty() {
        parsed.insert("security", security);
    }
    if let (Some(addr), Ok(net)) = (&c.metrics_addr, parsed.get_document_mut("net")) {
        net.insert("metricsAddr", addr.clone());
    }
    if let (Some(tls), Ok(net)) = (
        crate::tls::parsed_tls_options(c),
        parsed.get_document_mut("net"),
    ) {
        net.insert("tls", tls);
    }
    // mongod reports each --setParameter value as the string given.
    if !c.set_parameters.is_empty() {
        let mut params = Document::new();
        for (name, value) in &c.set_parameters {
            params.insert(name.clone(), value.clone());
        }
        parsed.insert("setParameter", params);
    }
    parsed
}
