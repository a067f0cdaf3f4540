//! `buildInfo`: the version drivers and tools read to pick features. BisonDB speaks
//! MongoDB 8.0's protocol, so it reports 8.0 and names itself in `bisondb`.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::reply;
use crate::request::CommandRequest;

/// The MongoDB version whose behaviour BisonDB follows.
pub const COMPAT_VERSION: &str = "8.0.0";

pub struct BuildInfo;

impl Command for BuildInfo {
    fn parse(_req: &CommandRequest<'_>) -> MongoResult<Self> {
        Ok(BuildInfo)
    }

    fn execute(self, _ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        reply::ok(doc! {
            "version": COMPAT_VERSION,
            "gitVersion": "bisondb-".to_string() + env!("CARGO_PKG_VERSION"),
            "modules": [],
            "allocator": "system",
            "javascriptEngine": "none",
            "sysInfo": "deprecated",
            "versionArray": [8, 0, 0, 0],
            "openssl": {"running": "disabled", "compiled": "disabled"},
            "buildEnvironment": {"target_arch": std::env::consts::ARCH, "target_os": std::env::consts::OS},
            "bits": 64,
            "debug": cfg!(debug_assertions),
            "maxBsonObjectSize": bisondb_wire::MAX_BSON_OBJECT_SIZE as i32,
            "storageEngines": bisondb_storage::engine_names(),
            "bisondb": {"version": env!("CARGO_PKG_VERSION")},
        })
    }
}
