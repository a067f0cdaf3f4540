//! The command-parsing target: a command body (and sometimes kind-1 document
//! sequences) through the checks the registry makes before a handler
//! (`CommandRequest`, the generic arguments, the API version fields) and the
//! command's own `parse`, without a socket or a server.
//!
//! [`PARSERS`] names every command the registry serves with the type whose
//! `parse` reads it; `every_served_command_has_a_parser` keeps it complete.

use bisondb_error::MongoResult;
use bisondb_server::commands::*;
use bisondb_server::request::{CommandRequest, Sequence};
use bson::{Bson, Document, RawDocumentBuf};

use crate::gen::{Gen, Vocab, COMMON_FIELDS};
use crate::targets::{bounded, input, Input, EXPR_OPS, QUERY_OPS, STAGES};

type Parse = fn(&CommandRequest<'_>) -> MongoResult<()>;

fn p<C: Command>(r: &CommandRequest<'_>) -> MongoResult<()> {
    C::parse(r).map(drop)
}

/// Canonical command name → its parse step.
pub const PARSERS: &[(&str, Parse)] = &[
    ("abortTransaction", p::<abort_transaction::AbortTransaction>),
    ("aggregate", p::<aggregate::Aggregate>),
    ("authenticate", p::<authenticate::Authenticate>),
    ("buildInfo", p::<build_info::BuildInfo>),
    ("bulkWrite", |r| bulk_write::BulkWrite::parse(r).map(drop)),
    (
        "checkMetadataConsistency",
        p::<check_metadata_consistency::CheckMetadataConsistency>,
    ),
    (
        "cloneCollectionAsCapped",
        p::<convert_to_capped::ConvertToCapped>,
    ),
    ("collMod", p::<coll_mod::CollMod>),
    ("collStats", p::<coll_stats::CollStats>),
    (
        "commitTransaction",
        p::<commit_transaction::CommitTransaction>,
    ),
    (
        "configureFailPoint",
        p::<configure_fail_point::ConfigureFailPoint>,
    ),
    ("connectionStatus", p::<connection_status::ConnectionStatus>),
    ("convertToCapped", p::<convert_to_capped::ConvertToCapped>),
    ("count", p::<count::Count>),
    ("create", p::<create::Create>),
    ("createIndexes", p::<create_indexes::CreateIndexes>),
    ("createRole", p::<create_role::CreateRole>),
    ("createUser", p::<create_user::CreateUser>),
    ("currentOp", p::<current_op::CurrentOp>),
    ("dbStats", p::<db_stats::DbStats>),
    ("delete", |r| delete::Delete::parse(r).map(drop)),
    ("distinct", p::<distinct::Distinct>),
    ("drop", p::<drop::Drop>),
    (
        "dropAllRolesFromDatabase",
        p::<drop_all_roles_from_database::DropAllRolesFromDatabase>,
    ),
    (
        "dropAllUsersFromDatabase",
        p::<drop_all_users_from_database::DropAllUsersFromDatabase>,
    ),
    ("dropDatabase", p::<drop_database::DropDatabase>),
    ("dropIndexes", p::<drop_indexes::DropIndexes>),
    ("dropRole", p::<drop_role::DropRole>),
    ("dropUser", p::<drop_user::DropUser>),
    ("endSessions", p::<end_sessions::EndSessions>),
    ("explain", p::<explain::Explain>),
    ("find", p::<find::Find>),
    ("findAndModify", p::<find_and_modify::FindAndModify>),
    ("fsync", p::<fsync::Fsync>),
    ("fsyncUnlock", p::<fsync_unlock::FsyncUnlock>),
    ("getCmdLineOpts", p::<get_cmd_line_opts::GetCmdLineOpts>),
    ("getLog", p::<get_log::GetLog>),
    ("getMore", p::<get_more::GetMore>),
    ("getParameter", p::<get_parameter::GetParameter>),
    (
        "grantPrivilegesToRole",
        p::<grant_privileges_to_role::GrantPrivilegesToRole>,
    ),
    (
        "grantRolesToRole",
        p::<grant_roles_to_role::GrantRolesToRole>,
    ),
    (
        "grantRolesToUser",
        p::<grant_roles_to_user::GrantRolesToUser>,
    ),
    ("hello", p::<hello::Hello>),
    ("hostInfo", p::<host_info::HostInfo>),
    ("insert", |r| insert::Insert::parse(r).map(drop)),
    ("killAllSessions", p::<kill_all_sessions::KillAllSessions>),
    (
        "killAllSessionsByPattern",
        p::<kill_all_sessions_by_pattern::KillAllSessionsByPattern>,
    ),
    ("killCursors", p::<kill_cursors::KillCursors>),
    ("killOp", p::<kill_op::KillOp>),
    ("killSessions", p::<kill_sessions::KillSessions>),
    ("listCollections", p::<list_collections::ListCollections>),
    ("listCommands", |r| {
        list_commands::ListCommands::parse(r).map(drop)
    }),
    ("listDatabases", p::<list_databases::ListDatabases>),
    ("listIndexes", p::<list_indexes::ListIndexes>),
    ("logRotate", p::<log_rotate::LogRotate>),
    ("logout", p::<logout::Logout>),
    ("mapReduce", p::<map_reduce::MapReduce>),
    ("ping", p::<ping::Ping>),
    ("profile", p::<profile::Profile>),
    (
        "refreshLogicalSessionCacheNow",
        p::<refresh_logical_session_cache_now::RefreshLogicalSessionCacheNow>,
    ),
    ("refreshSessions", p::<refresh_sessions::RefreshSessions>),
    ("renameCollection", p::<rename_collection::RenameCollection>),
    ("replSetFreeze", p::<repl_set_freeze::ReplSetFreeze>),
    (
        "replSetGetConfig",
        p::<repl_set_get_config::ReplSetGetConfig>,
    ),
    (
        "replSetGetStatus",
        p::<repl_set_get_status::ReplSetGetStatus>,
    ),
    ("replSetInitiate", p::<repl_set_initiate::ReplSetInitiate>),
    ("replSetReconfig", p::<repl_set_reconfig::ReplSetReconfig>),
    ("replSetStepDown", p::<repl_set_step_down::ReplSetStepDown>),
    (
        "revokePrivilegesFromRole",
        p::<revoke_privileges_from_role::RevokePrivilegesFromRole>,
    ),
    (
        "revokeRolesFromRole",
        p::<revoke_roles_from_role::RevokeRolesFromRole>,
    ),
    (
        "revokeRolesFromUser",
        p::<revoke_roles_from_user::RevokeRolesFromUser>,
    ),
    ("rolesInfo", p::<roles_info::RolesInfo>),
    ("saslContinue", p::<sasl_continue::SaslContinue>),
    ("saslStart", p::<sasl_start::SaslStart>),
    ("serverStatus", p::<server_status::ServerStatus>),
    ("setParameter", p::<set_parameter::SetParameter>),
    ("shutdown", p::<shutdown::Shutdown>),
    ("startSession", p::<start_session::StartSession>),
    ("testVersion2", p::<ping::Ping>),
    ("top", p::<top::TopCommand>),
    ("update", |r| update::Update::parse(r).map(drop)),
    ("updateRole", p::<update_role::UpdateRole>),
    ("updateUser", p::<update_user::UpdateUser>),
    ("usersInfo", p::<users_info::UsersInfo>),
    ("validate", p::<validate::Validate>),
    ("whatsmyuri", p::<whatsmyuri::WhatsMyUri>),
];

/// The parse step of the command `name` names (aliases resolved by the
/// registry).
pub fn parser(name: &str) -> Option<Parse> {
    let spec = bisondb_server::registry::lookup(name)?;
    let canonical = spec.alias_of.unwrap_or(spec.name);
    PARSERS
        .iter()
        .find(|(n, _)| *n == canonical)
        .map(|(_, f)| *f)
}

/// Fields the commands read, beside their own name.
const COMMAND_FIELDS: &[&str] = &[
    "filter",
    "query",
    "q",
    "u",
    "upsert",
    "multi",
    "limit",
    "skip",
    "sort",
    "projection",
    "fields",
    "hint",
    "collation",
    "let",
    "pipeline",
    "cursor",
    "batchSize",
    "maxTimeMS",
    "allowDiskUse",
    "explain",
    "key",
    "indexes",
    "documents",
    "updates",
    "deletes",
    "ordered",
    "arrayFilters",
    "new",
    "remove",
    "update",
    "bypassDocumentValidation",
    "writeConcern",
    "readConcern",
    "lsid",
    "txnNumber",
    "autocommit",
    "startTransaction",
    "comment",
    "$readPreference",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
    "singleBatch",
    "tailable",
    "awaitData",
    "min",
    "max",
    "returnKey",
    "showRecordId",
    "collection",
    "verbosity",
    "validator",
    "validationLevel",
    "validationAction",
    "capped",
    "size",
    "viewOn",
    "timeseries",
    "clusteredIndex",
    "expireAfterSeconds",
    "changeStreamPreAndPostImages",
    "index",
    "name",
    "unique",
    "sparse",
    "partialFilterExpression",
    "full",
    "repair",
    "nameOnly",
    "authorizedCollections",
    "ops",
    "nsInfo",
    "errorsOnly",
    "map",
    "reduce",
    "out",
    "finalize",
    "to",
    "dropTarget",
    "mode",
    "data",
    "roles",
    "privileges",
    "pwd",
    "mechanism",
    "payload",
    "conversationId",
    "getLog",
    "level",
    "slowms",
    "sampleRate",
    "cursors",
    "op",
    "$db",
    "$clusterTime",
    "maxTimeMSOpOnly",
    "term",
    "$all",
    "$ownOps",
    "w",
    "j",
    "wtimeout",
    "level",
    "afterClusterTime",
    "atClusterTime",
];

const COMMAND_VOCAB: Vocab = Vocab {
    ops: EXPR_OPS,
    fields: COMMAND_FIELDS,
    strings: &[
        "c",
        "test",
        "admin",
        "local",
        "majority",
        "snapshot",
        "1",
        "local.oplog.rs",
    ],
};

const QUERY_VOCAB: Vocab = Vocab {
    ops: QUERY_OPS,
    fields: COMMON_FIELDS,
    strings: &[],
};

fn field_value(g: &mut Gen<'_>, key: &str) -> Bson {
    match key {
        "filter" | "query" | "q" | "partialFilterExpression" | "validator" => {
            Bson::Document(g.doc(&QUERY_VOCAB, 3))
        }
        "pipeline" => {
            let n = g.below(3);
            Bson::Array(
                (0..n)
                    .map(|_| {
                        let mut s = Document::new();
                        s.insert(g.pick(STAGES), g.value(&COMMAND_VOCAB, 3));
                        Bson::Document(s)
                    })
                    .collect(),
            )
        }
        "updates" | "deletes" | "documents" | "indexes" | "ops" | "nsInfo" => {
            let n = g.below(3);
            Bson::Array(
                (0..n)
                    .map(|_| Bson::Document(g.doc(&COMMAND_VOCAB, 3)))
                    .collect(),
            )
        }
        _ => g.value(&COMMAND_VOCAB, 3),
    }
}

/// Parse a command body: the registry's checks, then the command's `parse`.
pub fn command(data: &[u8]) {
    let Some(inp) = input(data) else { return };
    let (body, seqs) = match inp {
        Input::Raw(d) => (d, Vec::new()),
        Input::Gen(mut g) => {
            let name = g.pick(PARSERS).0;
            let mut body = Document::new();
            let first = match g.below(4) {
                0 => Bson::Int32(1),
                1 => g.value(&COMMAND_VOCAB, 2),
                _ => Bson::String("c".into()),
            };
            body.insert(name, first);
            for _ in 0..g.below(7) {
                let k = g.pick(COMMAND_FIELDS);
                let v = field_value(&mut g, k);
                body.insert(k, v);
            }
            if g.below(4) != 0 {
                body.insert("$db", "test");
            }
            let mut seqs = Vec::new();
            if g.below(4) == 0 {
                let id = g.pick(&["documents", "updates", "deletes", "ops", "nsInfo"]);
                let docs: Vec<Document> =
                    (0..g.below(3)).map(|_| g.doc(&COMMAND_VOCAB, 2)).collect();
                seqs.push((id, docs));
            }
            (body, seqs)
        }
    };
    let Ok(raw) = RawDocumentBuf::try_from(&body) else {
        return;
    };
    let seq_raw: Vec<(&str, Vec<RawDocumentBuf>)> = seqs
        .iter()
        .map(|(id, docs)| {
            (
                *id,
                docs.iter()
                    .filter_map(|d| RawDocumentBuf::try_from(d).ok())
                    .collect(),
            )
        })
        .collect();
    bounded(|| {
        let sequences = seq_raw
            .iter()
            .map(|(id, docs)| Sequence {
                identifier: id,
                documents: docs.iter().map(|d| d.as_ref()).collect(),
            })
            .collect();
        let req = match CommandRequest::from_msg(&raw, sequences) {
            Ok(r) => r,
            Err(_) => match CommandRequest::from_body(&raw, "test") {
                Ok(r) => r,
                Err(_) => return,
            },
        };
        let _ = bisondb_server::fields::check_generic_args(req.name, req.body, false);
        let _ = bisondb_server::fields::check_generic_args(req.name, req.body, true);
        if let Some(spec) = bisondb_server::registry::lookup(req.name) {
            let _ =
                bisondb_server::fields::check_api_version(spec.name, spec.api_version_1, req.body);
        }
        if let Some(parse) = parser(req.name) {
            let _ = parse(&req);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_command_has_a_parser() {
        for spec in bisondb_server::registry::COMMANDS {
            if spec.handler().is_some() {
                assert!(
                    parser(spec.name).is_some(),
                    "{}: add its parse step to PARSERS",
                    spec.name
                );
            }
        }
        for (name, _) in PARSERS {
            let spec = bisondb_server::registry::lookup(name);
            assert!(
                spec.is_some_and(|s| s.handler().is_some() && s.alias_of.is_none()),
                "{name} is not a served canonical command"
            );
        }
    }
}
