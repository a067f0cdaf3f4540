//! The one table of commands: sorted by name, looked up by binary search.
//!
//! Every command BisonDB serves has one entry here and one module in `commands/`.
//! Commands mongod has but BisonDB does not are listed in [`UNSUPPORTED`] so they fail
//! with an error that names them instead of "no such command".

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::RawDocumentBuf;

use crate::commands::{self, Context};
use crate::request::CommandRequest;

pub type Handler = fn(&CommandRequest<'_>, &mut Context<'_>) -> MongoResult<RawDocumentBuf>;

pub struct CommandSpec {
    pub name: &'static str,
    pub handler: Handler,
    /// mongod refuses these outside the admin database.
    pub admin_only: bool,
    /// Exists only with `--setParameter enableTestCommands=1`; otherwise
    /// "no such command", as mongod.
    pub test_only: bool,
    pub help: &'static str,
}

const fn cmd(name: &'static str, handler: Handler, help: &'static str) -> CommandSpec {
    CommandSpec {
        name,
        handler,
        admin_only: false,
        test_only: false,
        help,
    }
}

const fn admin(name: &'static str, handler: Handler, help: &'static str) -> CommandSpec {
    CommandSpec {
        name,
        handler,
        admin_only: true,
        test_only: false,
        help,
    }
}

/// An admin command that exists only when test commands are enabled.
const fn test_admin(name: &'static str, handler: Handler, help: &'static str) -> CommandSpec {
    CommandSpec {
        name,
        handler,
        admin_only: true,
        test_only: true,
        help,
    }
}

use commands::*;

/// Sorted by name (byte order); a unit test keeps it so.
pub static COMMANDS: &[CommandSpec] = &[
    cmd(
        "aggregate",
        run::<aggregate::Aggregate>,
        "run an aggregation pipeline",
    ),
    cmd(
        "buildInfo",
        run::<build_info::BuildInfo>,
        "version and build details",
    ),
    cmd(
        "buildinfo",
        run::<build_info::BuildInfo>,
        "alias of buildInfo",
    ),
    admin(
        "bulkWrite",
        bulk_write::handle,
        "inserts, updates and deletes over several collections",
    ),
    cmd(
        "cloneCollectionAsCapped",
        run::<convert_to_capped::ConvertToCapped>,
        "copy a collection into a new capped collection",
    ),
    cmd(
        "collMod",
        run::<coll_mod::CollMod>,
        "change a collection's validation options, an index's options or a view",
    ),
    cmd(
        "collStats",
        run::<coll_stats::CollStats>,
        "statistics of a collection",
    ),
    test_admin(
        "configureFailPoint",
        run::<configure_fail_point::ConfigureFailPoint>,
        "set a fail point's mode (test commands only)",
    ),
    cmd(
        "connectionStatus",
        run::<connection_status::ConnectionStatus>,
        "authentication state of this connection",
    ),
    cmd(
        "convertToCapped",
        run::<convert_to_capped::ConvertToCapped>,
        "replace a collection by a capped copy of it",
    ),
    cmd(
        "count",
        run::<count::Count>,
        "count documents matching a query",
    ),
    cmd("create", run::<create::Create>, "create a collection"),
    cmd(
        "createIndexes",
        run::<create_indexes::CreateIndexes>,
        "create indexes",
    ),
    cmd(
        "dbStats",
        run::<db_stats::DbStats>,
        "statistics of a database",
    ),
    cmd("delete", delete::handle, "delete documents"),
    cmd(
        "distinct",
        run::<distinct::Distinct>,
        "distinct values of a field",
    ),
    cmd("drop", run::<drop::Drop>, "drop a collection"),
    cmd(
        "dropDatabase",
        run::<drop_database::DropDatabase>,
        "drop a database",
    ),
    cmd(
        "dropIndexes",
        run::<drop_indexes::DropIndexes>,
        "drop indexes",
    ),
    cmd(
        "endSessions",
        run::<end_sessions::EndSessions>,
        "end logical sessions",
    ),
    cmd(
        "explain",
        run::<explain::Explain>,
        "the query plan of a command, and its execution statistics",
    ),
    cmd("find", run::<find::Find>, "query documents"),
    cmd(
        "findAndModify",
        run::<find_and_modify::FindAndModify>,
        "update or delete one document and return it",
    ),
    cmd(
        "findandmodify",
        run::<find_and_modify::FindAndModify>,
        "alias of findAndModify",
    ),
    admin(
        "fsync",
        run::<fsync::Fsync>,
        "flush the storage engine's log to disk",
    ),
    admin(
        "getCmdLineOpts",
        run::<get_cmd_line_opts::GetCmdLineOpts>,
        "the server's command line and parsed options",
    ),
    admin("getLog", run::<get_log::GetLog>, "recent log lines"),
    cmd(
        "getMore",
        run::<get_more::GetMore>,
        "next batch of a cursor",
    ),
    admin(
        "getParameter",
        run::<get_parameter::GetParameter>,
        "server parameters",
    ),
    cmd(
        "hello",
        run::<hello::Hello>,
        "handshake: server capabilities",
    ),
    cmd(
        "hostInfo",
        run::<host_info::HostInfo>,
        "information about the host",
    ),
    cmd("insert", insert::handle, "insert documents"),
    cmd("isMaster", run::<hello::Hello>, "legacy alias of hello"),
    cmd("ismaster", run::<hello::Hello>, "legacy alias of hello"),
    cmd(
        "killCursors",
        run::<kill_cursors::KillCursors>,
        "close cursors",
    ),
    cmd(
        "listCollections",
        run::<list_collections::ListCollections>,
        "collections of a database",
    ),
    cmd(
        "listCommands",
        run::<list_commands::ListCommands>,
        "the commands this server knows",
    ),
    admin(
        "listDatabases",
        run::<list_databases::ListDatabases>,
        "the databases",
    ),
    cmd(
        "listIndexes",
        run::<list_indexes::ListIndexes>,
        "indexes of a collection",
    ),
    cmd("ping", run::<ping::Ping>, "check that the server answers"),
    cmd(
        "profile",
        run::<profile::Profile>,
        "read or set the database profiler's level, slowms, sampleRate and filter",
    ),
    admin(
        "renameCollection",
        run::<rename_collection::RenameCollection>,
        "rename a collection",
    ),
    cmd(
        "serverStatus",
        run::<server_status::ServerStatus>,
        "server statistics",
    ),
    admin("shutdown", run::<shutdown::Shutdown>, "stop the server"),
    cmd("update", update::handle, "update documents"),
    cmd(
        "usersInfo",
        run::<users_info::UsersInfo>,
        "the users a database defines (none: BisonDB has no authentication yet)",
    ),
    cmd(
        "validate",
        run::<validate::Validate>,
        "check a collection's documents, indexes and statistics",
    ),
    cmd(
        "whatsmyuri",
        run::<whatsmyuri::WhatsMyUri>,
        "the client's address as the server sees it",
    ),
];

/// Commands of mongod 8 that BisonDB does not provide. Sorted.
pub static UNSUPPORTED: &[&str] = &[
    "abortTransaction",
    "applyOps",
    "authenticate",
    "checkShardingIndex",
    "commitTransaction",
    "compact",
    "createRole",
    "createSearchIndexes",
    "createUser",
    "currentOp",
    "dataSize",
    "dropAllRolesFromDatabase",
    "dropAllUsersFromDatabase",
    "dropRole",
    "dropSearchIndex",
    "dropUser",
    "filemd5",
    "fsyncUnlock",
    "getDefaultRWConcern",
    "grantRolesToUser",
    "killAllSessions",
    "killAllSessionsByPattern",
    "killOp",
    "killSessions",
    "listSearchIndexes",
    "logout",
    "mapReduce",
    "reIndex",
    "refreshSessions",
    "replSetGetStatus",
    "revokeRolesFromUser",
    "rolesInfo",
    "saslContinue",
    "saslStart",
    "setDefaultRWConcern",
    "setFeatureCompatibilityVersion",
    "setParameter",
    "startSession",
    "updateRole",
    "updateSearchIndex",
    "updateUser",
];

pub fn lookup(name: &str) -> Option<&'static CommandSpec> {
    COMMANDS
        .binary_search_by(|c| c.name.cmp(name))
        .ok()
        .and_then(|i| COMMANDS.get(i))
}

/// Runs one command: lookup, admin check, handler.
pub fn dispatch(req: &CommandRequest<'_>, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
    match lookup(req.name) {
        Some(spec) if spec.test_only && !ctx.state.config.enable_test_commands => {
            Err(no_such_command(req.name))
        }
        Some(spec) => {
            if spec.admin_only && req.db != "admin" {
                return Err(MongoError::new(
                    ErrorCode::Unauthorized,
                    format!("{} may only be run against the admin database.", spec.name),
                ));
            }
            // Reads through a view run as aggregations; writes to one fail.
            if let Some(r) = commands::views::intercept(req, ctx) {
                return r;
            }
            (spec.handler)(req, ctx)
        }
        None if UNSUPPORTED.binary_search(&req.name).is_ok() => Err(MongoError::new(
            ErrorCode::CommandNotSupported,
            format!(
                "BisonDB does not support the '{}' command yet (see docs/COMPATIBILITY.md)",
                req.name
            ),
        )),
        None => Err(no_such_command(req.name)),
    }
}

fn no_such_command(name: &str) -> MongoError {
    MongoError::new(
        ErrorCode::CommandNotFound,
        format!("no such command: '{name}'"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_sorted_and_disjoint() {
        for w in COMMANDS.windows(2) {
            assert!(w[0].name < w[1].name, "{} >= {}", w[0].name, w[1].name);
        }
        for w in UNSUPPORTED.windows(2) {
            assert!(w[0] < w[1], "{} >= {}", w[0], w[1]);
        }
        for name in UNSUPPORTED {
            assert!(
                lookup(name).is_none(),
                "{name} is both supported and unsupported"
            );
        }
    }

    #[test]
    fn lookup_finds_every_command() {
        for c in COMMANDS {
            assert_eq!(lookup(c.name).map(|s| s.name), Some(c.name));
        }
        assert!(lookup("nosuch").is_none());
    }
}
