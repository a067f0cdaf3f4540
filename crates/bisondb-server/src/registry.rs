//! The one table of commands: sorted by name, looked up by binary search.
//!
//! Every name a client may send that BisonDB knows of has one [`CommandSpec`] in
//! [`COMMANDS`], holding all of the command's facts: its handler (one module in
//! `commands/`, named after the command) or why it has none, the canonical name
//! of an alias, whether it runs only against `admin` or only with test
//! commands enabled, whether it may run long (off the async runtime), whether
//! its reply may be compressed, how it treats a view, and its help line.
//! Commands of mongod that BisonDB does not provide are entries too, so they
//! fail with an error naming them instead of "no such command", and keep the
//! facts that hold even for an error reply (a `saslStart` reply is never
//! compressed). The connection loop looks a request's command up once and
//! reads every fact from the spec it found.
//!
//! Facts later work adds per command go here, as one more field of
//! [`CommandSpec`] stated in every entry (the unit tests below keep the table
//! complete and consistent): the privileges a command requires (the security
//! issue), whether it may run in a multi-document transaction and whether a
//! driver may retry it (the replica-set issue).

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::RawDocumentBuf;

use crate::auth::{needs, Action, Needs};
use crate::commands::{self, Context};
pub use crate::on_view::OnView;
use crate::request::CommandRequest;
pub use crate::txn::Txn;

pub type Handler = fn(&CommandRequest<'_>, &mut Context<'_>) -> MongoResult<RawDocumentBuf>;

/// What serves a command.
#[derive(Clone, Copy)]
pub enum Run {
    /// BisonDB serves it with this handler.
    Handler(Handler),
    /// mongod 8 has it, BisonDB does not yet: 115 CommandNotSupported naming it.
    NotSupported,
    /// mongod removed it long ago: 59 CommandNotFound as for any unknown
    /// name. Listed for the compression specification, which names it.
    Removed,
}

/// Which of serverStatus's `opLatencies` a command's time counts under
/// (mongod's read/write type of a command).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Latency {
    /// Queries: find, getMore, count, distinct, aggregate.
    Read,
    /// insert, update, delete, findAndModify, bulkWrite.
    Write,
    /// Everything else.
    Command,
}

impl Latency {
    /// The `opLatencies` field.
    pub fn name(self) -> &'static str {
        match self {
            Latency::Read => "reads",
            Latency::Write => "writes",
            Latency::Command => "commands",
        }
    }
}

/// Whether a command's reply may be compressed (with the request's compressor).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    Compressible,
    /// The compression specification's list: the handshake and the
    /// authentication commands, whose replies (errors too) are never
    /// compressed.
    NeverCompressed,
}

/// Everything the server knows about one command. Every entry states every
/// field: there are no defaults to forget.
#[derive(Clone, Copy)]
pub struct CommandSpec {
    pub name: &'static str,
    pub run: Run,
    /// For another name of a command (`isMaster`), the canonical name; the
    /// entry has the canonical one's facts and handler.
    pub alias_of: Option<&'static str>,
    /// mongod refuses these outside the admin database.
    pub admin_only: bool,
    /// Exists only with `--setParameter enableTestCommands=1`; otherwise
    /// "no such command", as mongod.
    pub test_only: bool,
    /// May scan a whole collection or more (an aggregation over 10,000,000
    /// documents takes seconds): runs off the async runtime's worker (see
    /// `connection::off_the_runtime_if_long`). Short commands (insert, hello)
    /// skip that hand-off, which costs a thread wake-up.
    pub may_run_long: bool,
    /// Takes a write concern (`writeConcern`), so a failCommand fail point's
    /// `writeConcernError` is added to its reply; `aggregate` takes one only
    /// when it ends in `$out`/`$merge`, which `fail_points.rs` sees in its body.
    pub write_concern: bool,
    /// Which `opLatencies` class its time counts under.
    pub latency: Latency,
    /// Whether it runs inside a multi-document transaction, and what a
    /// session's `txnNumber` means to it outside one.
    pub txn: Txn,
    /// Whether its reply may be compressed.
    pub reply: Reply,
    pub on_view: OnView,
    /// Shown by `listCommands`.
    pub help: &'static str,
    /// What a user must be granted to run it with `--auth` (mongod's
    /// "Privilege Actions"), or that it runs before authentication.
    pub privileges: Needs,
    /// Part of the Stable API's version 1 (the manual's "Stable API"
    /// command list), so a request with `apiStrict: true` may run it; any
    /// other command then fails with 323 APIStrictError.
    pub api_version_1: bool,
}

impl CommandSpec {
    /// The handler, for a command BisonDB serves.
    pub fn handler(&self) -> Option<Handler> {
        match self.run {
            Run::Handler(h) => Some(h),
            Run::NotSupported | Run::Removed => None,
        }
    }
}

/// Commands of mongos that mongod lacks: their handlers answer 59 "no such
/// command" off mongos mode, and `listCommands` lists them only in it.
const MONGOS_ONLY: &[&str] = &["checkMetadataConsistency"];

/// `listCommands` lists this table: the registry hands the served entries to
/// the command, so that `commands/` does not import the registry back.
fn list_commands(req: &CommandRequest<'_>, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
    let mongos = ctx.state.repl().is_mongos();
    let served = COMMANDS
        .iter()
        .filter(|c| c.handler().is_some())
        .filter(|c| mongos || !MONGOS_ONLY.contains(&c.name))
        .map(|c| list_commands::Listed {
            name: c.name,
            help: c.help,
            admin_only: c.admin_only,
            test_only: c.test_only,
        });
    list_commands::ListCommands::parse(req)?.execute(ctx, served)
}

/// Another name of `of`, with its facts and handler.
const fn alias(name: &'static str, of: &CommandSpec, help: &'static str) -> CommandSpec {
    CommandSpec {
        name,
        alias_of: Some(of.name),
        help,
        ..*of
    }
}

/// A command of mongod that BisonDB does not provide; `reply` is the one
/// fact that still applies to its (error) reply.
const fn not_supported(name: &'static str, reply: Reply) -> CommandSpec {
    unserved(name, Run::NotSupported, reply)
}

/// A command mongod removed; listed because its replies are never compressed.
const fn removed(name: &'static str) -> CommandSpec {
    unserved(name, Run::Removed, Reply::NeverCompressed)
}

const fn unserved(name: &'static str, run: Run, reply: Reply) -> CommandSpec {
    CommandSpec {
        name,
        run,
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply,
        on_view: OnView::Unaffected,
        help: "",
        // Unserved: only the 13 of an unauthenticated client applies.
        privileges: Needs::Authenticated,
        api_version_1: false,
    }
}

use commands::*;

// Commands known by other names too: the table lists each of these and, one
// line each, its aliases.

const BUILD_INFO: CommandSpec = CommandSpec {
    name: "buildInfo",
    run: Run::Handler(run::<build_info::BuildInfo>),
    alias_of: None,
    admin_only: false,
    test_only: false,
    may_run_long: false,
    write_concern: false,
    latency: Latency::Command,
    txn: Txn::Refused,
    reply: Reply::Compressible,
    on_view: OnView::Unaffected,
    help: "version and build details",
    privileges: Needs::Nothing,
    api_version_1: false,
};

const DB_STATS: CommandSpec = CommandSpec {
    name: "dbStats",
    run: Run::Handler(run::<db_stats::DbStats>),
    alias_of: None,
    admin_only: false,
    test_only: false,
    may_run_long: true,
    write_concern: false,
    latency: Latency::Command,
    txn: Txn::Refused,
    reply: Reply::Compressible,
    on_view: OnView::Unaffected,
    help: "statistics of a database",
    privileges: Needs::Database(&[Action::DbStats]),
    api_version_1: false,
};

const FIND_AND_MODIFY: CommandSpec = CommandSpec {
    name: "findAndModify",
    run: Run::Handler(run::<find_and_modify::FindAndModify>),
    alias_of: None,
    admin_only: false,
    test_only: false,
    may_run_long: true,
    write_concern: true,
    latency: Latency::Write,
    txn: Txn::RetryableWrite,
    reply: Reply::Compressible,
    on_view: OnView::Refused,
    help: "update or delete one document and return it",
    privileges: Needs::Computed(needs::find_and_modify),
    api_version_1: true,
};

const HELLO: CommandSpec = CommandSpec {
    name: "hello",
    run: Run::Handler(run::<hello::Hello>),
    alias_of: None,
    admin_only: false,
    test_only: false,
    may_run_long: false,
    write_concern: false,
    latency: Latency::Command,
    txn: Txn::Refused,
    reply: Reply::NeverCompressed,
    on_view: OnView::Unaffected,
    help: "handshake: server capabilities",
    privileges: Needs::Nothing,
    api_version_1: true,
};

const MAP_REDUCE: CommandSpec = CommandSpec {
    name: "mapReduce",
    run: Run::Handler(run::<map_reduce::MapReduce>),
    alias_of: None,
    admin_only: false,
    test_only: false,
    may_run_long: true,
    // Only with output to a collection (`fail_points::map_reduce_writes`
    // tells from the body, as for an aggregation's `$out`).
    write_concern: false,
    latency: Latency::Command,
    txn: Txn::Refused,
    reply: Reply::Compressible,
    // The handler refuses a view or a time series itself, with mongod's words.
    on_view: OnView::Unaffected,
    help: "run JavaScript map, reduce and finalize functions over a collection (deprecated)",
    privileges: Needs::Computed(needs::map_reduce),
    // Not in the Stable API's version 1 (the manual's command list).
    api_version_1: false,
};

/// Sorted by name (byte order); a unit test keeps it so.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "abortTransaction",
        run: Run::Handler(run::<abort_transaction::AbortTransaction>),
        alias_of: None,
        admin_only: true,
        test_only: false,
        may_run_long: false,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Ends,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "end the session's transaction, applying nothing",
        privileges: Needs::Authenticated,
        api_version_1: true,
    },
    CommandSpec {
        name: "aggregate",
        run: Run::Handler(run::<aggregate::Aggregate>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: true,
        write_concern: false,
        latency: Latency::Read,
        txn: Txn::Allowed,
        reply: Reply::Compressible,
        on_view: OnView::ReadsThrough,
        help: "run an aggregation pipeline",
        privileges: Needs::Computed(needs::aggregate),
        api_version_1: true,
    },
    not_supported("applyOps", Reply::Compressible),
    CommandSpec {
        name: "authenticate",
        run: Run::Handler(run::<authenticate::Authenticate>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        privileges: Needs::Nothing,
        api_version_1: true,
        reply: Reply::NeverCompressed,
        on_view: OnView::Unaffected,
        help:
            "authenticate with MONGODB-X509: the client certificate's subject, a user of $external",
    },
    BUILD_INFO,
    alias("buildinfo", &BUILD_INFO, "alias of buildInfo"),
    CommandSpec {
        name: "bulkWrite",
        run: Run::Handler(bulk_write::handle),
        alias_of: None,
        admin_only: true,
        test_only: false,
        may_run_long: true,
        write_concern: true,
        latency: Latency::Write,
        txn: Txn::RetryableWrite,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "inserts, updates and deletes over several collections",
        privileges: Needs::Computed(needs::bulk_write),
        api_version_1: true,
    },
    // Served in mongos mode (the postgres engine); elsewhere the handler
    // answers 59 "no such command" as mongod, which lacks it.
    CommandSpec {
        name: "checkMetadataConsistency",
        run: Run::Handler(run::<check_metadata_consistency::CheckMetadataConsistency>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "sharding metadata inconsistencies (mongos mode: none, one store)",
        privileges: Needs::Computed(needs::check_metadata_consistency),
        api_version_1: false,
    },
    not_supported("checkShardingIndex", Reply::Compressible),
    // Served by convert_to_capped.rs, which copies rather than replaces under this name.
    CommandSpec {
        name: "cloneCollectionAsCapped",
        run: Run::Handler(run::<convert_to_capped::ConvertToCapped>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: true,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "copy a collection into a new capped collection",
        privileges: Needs::Computed(needs::clone_collection_as_capped),
        api_version_1: false,
    },
    CommandSpec {
        name: "collMod",
        run: Run::Handler(run::<coll_mod::CollMod>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: true,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "change a collection's validation options, an index's options or a view",
        privileges: Needs::Collection(&[Action::CollMod]),
        api_version_1: true,
    },
    CommandSpec {
        name: "collStats",
        run: Run::Handler(run::<coll_stats::CollStats>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: true,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "statistics of a collection",
        privileges: Needs::Collection(&[Action::CollStats]),
        api_version_1: false,
    },
    CommandSpec {
        name: "commitTransaction",
        run: Run::Handler(run::<commit_transaction::CommitTransaction>),
        alias_of: None,
        admin_only: true,
        test_only: false,
        may_run_long: false,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Ends,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "apply the session's transaction atomically",
        privileges: Needs::Authenticated,
        api_version_1: true,
    },
    not_supported("compact", Reply::Compressible),
    CommandSpec {
        name: "configureFailPoint",
        run: Run::Handler(run::<configure_fail_point::ConfigureFailPoint>),
        alias_of: None,
        admin_only: true,
        test_only: true,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "set a fail point's mode (test commands only)",
        privileges: Needs::Authenticated,
        api_version_1: false,
    },
    CommandSpec {
        name: "connectionStatus",
        run: Run::Handler(run::<connection_status::ConnectionStatus>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "authentication state of this connection",
        privileges: Needs::Nothing,
        api_version_1: false,
    },
    CommandSpec {
        name: "convertToCapped",
        run: Run::Handler(run::<convert_to_capped::ConvertToCapped>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: true,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "replace a collection by a capped copy of it",
        privileges: Needs::Collection(&[Action::ConvertToCapped]),
        api_version_1: false,
    },
    removed("copydb"),
    removed("copydbSaslStart"),
    removed("copydbgetnonce"),
    CommandSpec {
        name: "count",
        run: Run::Handler(run::<count::Count>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: true,
        write_concern: false,
        latency: Latency::Read,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::ReadsThrough,
        help: "count documents matching a query",
        privileges: Needs::Collection(&[Action::Find]),
        api_version_1: true,
    },
    CommandSpec {
        name: "create",
        run: Run::Handler(run::<create::Create>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: true,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Allowed,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "create a collection",
        privileges: Needs::Computed(needs::create),
        api_version_1: true,
    },
    CommandSpec {
        name: "createIndexes",
        run: Run::Handler(run::<create_indexes::CreateIndexes>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: true,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Allowed,
        reply: Reply::Compressible,
        on_view: OnView::Refused,
        help: "create indexes",
        privileges: Needs::Collection(&[Action::CreateIndex]),
        api_version_1: true,
    },
    CommandSpec {
        name: "createRole",
        run: Run::Handler(run::<create_role::CreateRole>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "create a user-defined role of this database",
        privileges: Needs::Computed(needs::create_role),
        api_version_1: false,
    },
    not_supported("createSearchIndexes", Reply::Compressible),
    CommandSpec {
        name: "createUser",
        run: Run::Handler(run::<create_user::CreateUser>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::NeverCompressed,
        on_view: OnView::Unaffected,
        help: "create a user of this database",
        privileges: Needs::Computed(needs::create_user),
        api_version_1: false,
    },
    CommandSpec {
        name: "currentOp",
        run: Run::Handler(run::<current_op::CurrentOp>),
        alias_of: None,
        admin_only: true,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "the operations in flight; $all lists idle connections too",
        privileges: Needs::Computed(needs::current_op),
        api_version_1: false,
    },
    not_supported("dataSize", Reply::Compressible),
    DB_STATS,
    // mongod answers the lower-case name too (pymongo's auth tests send it).
    alias("dbstats", &DB_STATS, "alias of dbStats"),
    CommandSpec {
        name: "delete",
        run: Run::Handler(delete::handle),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: true,
        write_concern: true,
        latency: Latency::Write,
        txn: Txn::RetryableWrite,
        reply: Reply::Compressible,
        on_view: OnView::Refused,
        help: "delete documents",
        privileges: Needs::Collection(&[Action::Remove]),
        api_version_1: true,
    },
    CommandSpec {
        name: "distinct",
        run: Run::Handler(run::<distinct::Distinct>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: true,
        write_concern: false,
        latency: Latency::Read,
        txn: Txn::Allowed,
        reply: Reply::Compressible,
        on_view: OnView::ReadsThrough,
        help: "distinct values of a field",
        privileges: Needs::Collection(&[Action::Find]),
        api_version_1: false,
    },
    CommandSpec {
        name: "drop",
        run: Run::Handler(run::<drop::Drop>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: true,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "drop a collection",
        privileges: Needs::Collection(&[Action::DropCollection]),
        api_version_1: true,
    },
    CommandSpec {
        name: "dropAllRolesFromDatabase",
        run: Run::Handler(run::<drop_all_roles_from_database::DropAllRolesFromDatabase>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "remove every user-defined role of this database",
        privileges: Needs::Database(&[Action::DropRole]),
        api_version_1: false,
    },
    CommandSpec {
        name: "dropAllUsersFromDatabase",
        run: Run::Handler(run::<drop_all_users_from_database::DropAllUsersFromDatabase>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "remove every user of this database",
        privileges: Needs::Database(&[Action::DropUser]),
        api_version_1: false,
    },
    CommandSpec {
        name: "dropDatabase",
        run: Run::Handler(run::<drop_database::DropDatabase>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: true,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "drop a database",
        privileges: Needs::Database(&[Action::DropDatabase]),
        api_version_1: true,
    },
    CommandSpec {
        name: "dropIndexes",
        run: Run::Handler(run::<drop_indexes::DropIndexes>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: true,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Refused,
        help: "drop indexes",
        privileges: Needs::Collection(&[Action::DropIndex]),
        api_version_1: true,
    },
    CommandSpec {
        name: "dropRole",
        run: Run::Handler(run::<drop_role::DropRole>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "remove a user-defined role",
        privileges: Needs::Database(&[Action::DropRole]),
        api_version_1: false,
    },
    not_supported("dropSearchIndex", Reply::Compressible),
    CommandSpec {
        name: "dropUser",
        run: Run::Handler(run::<drop_user::DropUser>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "remove a user of this database",
        privileges: Needs::Database(&[Action::DropUser]),
        api_version_1: false,
    },
    CommandSpec {
        name: "endSessions",
        run: Run::Handler(run::<end_sessions::EndSessions>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "end logical sessions",
        privileges: Needs::Nothing,
        api_version_1: true,
    },
    CommandSpec {
        name: "explain",
        run: Run::Handler(run::<explain::Explain>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::ExplainsCommand,
        help: "the query plan of a command, and its execution statistics",
        privileges: Needs::Explained,
        api_version_1: true,
    },
    not_supported("filemd5", Reply::Compressible),
    CommandSpec {
        name: "find",
        run: Run::Handler(run::<find::Find>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: true,
        write_concern: false,
        latency: Latency::Read,
        txn: Txn::Allowed,
        reply: Reply::Compressible,
        on_view: OnView::ReadsThrough,
        help: "query documents",
        privileges: Needs::Collection(&[Action::Find]),
        api_version_1: true,
    },
    FIND_AND_MODIFY,
    alias("findandmodify", &FIND_AND_MODIFY, "alias of findAndModify"),
    CommandSpec {
        name: "fsync",
        run: Run::Handler(run::<fsync::Fsync>),
        alias_of: None,
        admin_only: true,
        test_only: false,
        // With `lock: true` it waits for the writes in flight, then flushes.
        may_run_long: true,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "flush the storage engine's data files to disk; lock: true blocks writes",
        privileges: Needs::Cluster(&[Action::Fsync]),
        api_version_1: false,
    },
    CommandSpec {
        name: "fsyncUnlock",
        run: Run::Handler(run::<fsync_unlock::FsyncUnlock>),
        alias_of: None,
        admin_only: true,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "release one hold of the lock fsync with lock: true took",
        privileges: Needs::Cluster(&[Action::Unlock]),
        api_version_1: false,
    },
    CommandSpec {
        name: "getCmdLineOpts",
        run: Run::Handler(run::<get_cmd_line_opts::GetCmdLineOpts>),
        alias_of: None,
        admin_only: true,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "the server's command line and parsed options",
        privileges: Needs::Cluster(&[Action::GetCmdLineOpts]),
        api_version_1: false,
    },
    not_supported("getDefaultRWConcern", Reply::Compressible),
    CommandSpec {
        name: "getLog",
        run: Run::Handler(run::<get_log::GetLog>),
        alias_of: None,
        admin_only: true,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "recent log lines",
        privileges: Needs::Cluster(&[Action::GetLog]),
        api_version_1: false,
    },
    CommandSpec {
        name: "getMore",
        run: Run::Handler(run::<get_more::GetMore>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: true,
        write_concern: false,
        latency: Latency::Read,
        txn: Txn::Allowed,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "next batch of a cursor",
        // Ownership and the opening command's privileges, checked by the
        // command once it has found the cursor.
        privileges: Needs::Authenticated,
        api_version_1: true,
    },
    CommandSpec {
        name: "getParameter",
        run: Run::Handler(run::<get_parameter::GetParameter>),
        alias_of: None,
        admin_only: true,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "server parameters",
        privileges: Needs::Cluster(&[Action::GetParameter]),
        api_version_1: false,
    },
    removed("getnonce"),
    CommandSpec {
        name: "grantPrivilegesToRole",
        run: Run::Handler(run::<grant_privileges_to_role::GrantPrivilegesToRole>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "add privileges to a user-defined role",
        privileges: Needs::Database(&[Action::GrantRole]),
        api_version_1: false,
    },
    CommandSpec {
        name: "grantRolesToRole",
        run: Run::Handler(run::<grant_roles_to_role::GrantRolesToRole>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "add roles a user-defined role inherits",
        privileges: Needs::Computed(needs::grant_roles),
        api_version_1: false,
    },
    CommandSpec {
        name: "grantRolesToUser",
        run: Run::Handler(run::<grant_roles_to_user::GrantRolesToUser>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "add roles to a user",
        privileges: Needs::Computed(needs::grant_roles),
        api_version_1: false,
    },
    HELLO,
    CommandSpec {
        name: "hostInfo",
        run: Run::Handler(run::<host_info::HostInfo>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "information about the host",
        privileges: Needs::Cluster(&[Action::HostInfo]),
        api_version_1: false,
    },
    CommandSpec {
        name: "insert",
        run: Run::Handler(insert::handle),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: true,
        latency: Latency::Write,
        txn: Txn::RetryableWrite,
        reply: Reply::Compressible,
        on_view: OnView::Refused,
        help: "insert documents",
        privileges: Needs::CollectionAnd(
            &[Action::Insert],
            &[("bypassDocumentValidation", Action::BypassDocumentValidation)],
        ),
        api_version_1: true,
    },
    // mongod keeps the legacy names out of the Stable API: only `hello` is in it.
    CommandSpec {
        api_version_1: false,
        ..alias("isMaster", &HELLO, "legacy alias of hello")
    },
    CommandSpec {
        api_version_1: false,
        ..alias("ismaster", &HELLO, "legacy alias of hello")
    },
    CommandSpec {
        name: "killAllSessions",
        run: Run::Handler(run::<kill_all_sessions::KillAllSessions>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "end the cursors of all sessions, or of the users listed",
        privileges: Needs::Cluster(&[Action::KillAnySession]),
        api_version_1: false,
    },
    CommandSpec {
        name: "killAllSessionsByPattern",
        run: Run::Handler(run::<kill_all_sessions_by_pattern::KillAllSessionsByPattern>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "end the cursors of the sessions matching patterns",
        privileges: Needs::Cluster(&[Action::KillAnySession]),
        api_version_1: false,
    },
    CommandSpec {
        name: "killCursors",
        run: Run::Handler(run::<kill_cursors::KillCursors>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Allowed,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "close cursors",
        // Own cursors need no privilege, another user's `killAnyCursor`
        // (mongod's "Required Access"): both checked per cursor by the
        // command, so an unknown id is reported, never refused.
        privileges: Needs::Authenticated,
        api_version_1: true,
    },
    CommandSpec {
        name: "killOp",
        run: Run::Handler(run::<kill_op::KillOp>),
        alias_of: None,
        admin_only: true,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "interrupt an operation by its opid",
        // Any user may kill its own operations; `killop` reaches everyone's
        // (checked by the command).
        privileges: Needs::Authenticated,
        api_version_1: false,
    },
    CommandSpec {
        name: "killSessions",
        run: Run::Handler(run::<kill_sessions::KillSessions>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "end the cursors of logical sessions",
        privileges: Needs::Authenticated,
        api_version_1: false,
    },
    CommandSpec {
        name: "listCollections",
        run: Run::Handler(run::<list_collections::ListCollections>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "collections of a database",
        privileges: Needs::Computed(needs::list_collections),
        api_version_1: true,
    },
    CommandSpec {
        name: "listCommands",
        run: Run::Handler(list_commands),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "the commands this server knows",
        privileges: Needs::Nothing,
        api_version_1: false,
    },
    CommandSpec {
        name: "listDatabases",
        run: Run::Handler(run::<list_databases::ListDatabases>),
        alias_of: None,
        admin_only: true,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "the databases",
        privileges: Needs::Authenticated,
        api_version_1: true,
    },
    CommandSpec {
        name: "listIndexes",
        run: Run::Handler(run::<list_indexes::ListIndexes>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Refused,
        help: "indexes of a collection",
        privileges: Needs::Collection(&[Action::ListIndexes]),
        api_version_1: true,
    },
    not_supported("listSearchIndexes", Reply::Compressible),
    CommandSpec {
        name: "logRotate",
        run: Run::Handler(run::<log_rotate::LogRotate>),
        alias_of: None,
        admin_only: true,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "rename or reopen the log file",
        privileges: Needs::Cluster(&[Action::LogRotate]),
        api_version_1: false,
    },
    CommandSpec {
        name: "logout",
        run: Run::Handler(run::<logout::Logout>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "end this connection's authentication",
        privileges: Needs::Nothing,
        api_version_1: false,
    },
    MAP_REDUCE,
    alias("mapreduce", &MAP_REDUCE, "alias of mapReduce"),
    CommandSpec {
        name: "ping",
        run: Run::Handler(run::<ping::Ping>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "check that the server answers",
        privileges: Needs::Nothing,
        api_version_1: true,
    },
    CommandSpec {
        name: "profile",
        run: Run::Handler(run::<profile::Profile>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "read or set the database profiler's level, slowms, sampleRate and filter",
        privileges: Needs::Database(&[Action::EnableProfiler]),
        api_version_1: false,
    },
    not_supported("reIndex", Reply::Compressible),
    CommandSpec {
        name: "refreshLogicalSessionCacheNow",
        run: Run::Handler(run::<refresh_logical_session_cache_now::RefreshLogicalSessionCacheNow>),
        alias_of: None,
        admin_only: true,
        test_only: true,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "write the session cache to config.system.sessions now",
        privileges: Needs::Authenticated,
        api_version_1: false,
    },
    CommandSpec {
        name: "refreshSessions",
        run: Run::Handler(run::<refresh_sessions::RefreshSessions>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "keep logical sessions alive",
        privileges: Needs::Authenticated,
        api_version_1: true,
    },
    CommandSpec {
        name: "renameCollection",
        run: Run::Handler(run::<rename_collection::RenameCollection>),
        alias_of: None,
        admin_only: true,
        test_only: false,
        may_run_long: true,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "rename a collection",
        privileges: Needs::Computed(needs::rename_collection),
        api_version_1: false,
    },
    not_supported("replSetAbortPrimaryCatchUp", Reply::Compressible),
    CommandSpec {
        name: "replSetFreeze",
        run: Run::Handler(run::<repl_set_freeze::ReplSetFreeze>),
        alias_of: None,
        admin_only: true,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "keep a secondary from standing for election (the only member is primary)",
        privileges: Needs::Cluster(&[Action::ReplSetStateChange]),
        api_version_1: false,
    },
    CommandSpec {
        name: "replSetGetConfig",
        run: Run::Handler(run::<repl_set_get_config::ReplSetGetConfig>),
        alias_of: None,
        admin_only: true,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "the replica set's configuration",
        privileges: Needs::Cluster(&[Action::ReplSetGetConfig]),
        api_version_1: false,
    },
    not_supported("replSetGetRBID", Reply::Compressible),
    CommandSpec {
        name: "replSetGetStatus",
        run: Run::Handler(run::<repl_set_get_status::ReplSetGetStatus>),
        alias_of: None,
        admin_only: true,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "the replica set's members and optimes",
        privileges: Needs::Cluster(&[Action::ReplSetGetStatus]),
        api_version_1: false,
    },
    not_supported("replSetHeartbeat", Reply::Compressible),
    CommandSpec {
        name: "replSetInitiate",
        run: Run::Handler(run::<repl_set_initiate::ReplSetInitiate>),
        alias_of: None,
        admin_only: true,
        test_only: false,
        may_run_long: true,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "make this node the one member and primary of its replica set",
        privileges: Needs::Cluster(&[Action::ReplSetConfigure]),
        api_version_1: false,
    },
    not_supported("replSetMaintenance", Reply::Compressible),
    CommandSpec {
        name: "replSetReconfig",
        run: Run::Handler(run::<repl_set_reconfig::ReplSetReconfig>),
        alias_of: None,
        admin_only: true,
        test_only: false,
        may_run_long: true,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "replace the replica set's configuration",
        privileges: Needs::Cluster(&[Action::ReplSetConfigure]),
        api_version_1: false,
    },
    not_supported("replSetRequestVotes", Reply::Compressible),
    not_supported("replSetResizeOplog", Reply::Compressible),
    CommandSpec {
        name: "replSetStepDown",
        run: Run::Handler(run::<repl_set_step_down::ReplSetStepDown>),
        alias_of: None,
        admin_only: true,
        test_only: false,
        may_run_long: true,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "step down as primary (no electable secondary: 262 after the catch-up period)",
        privileges: Needs::Cluster(&[Action::ReplSetStateChange]),
        api_version_1: false,
    },
    not_supported("replSetSyncFrom", Reply::Compressible),
    not_supported("replSetUpdatePosition", Reply::Compressible),
    CommandSpec {
        name: "revokePrivilegesFromRole",
        run: Run::Handler(run::<revoke_privileges_from_role::RevokePrivilegesFromRole>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "take privileges from a user-defined role",
        privileges: Needs::Database(&[Action::RevokeRole]),
        api_version_1: false,
    },
    CommandSpec {
        name: "revokeRolesFromRole",
        run: Run::Handler(run::<revoke_roles_from_role::RevokeRolesFromRole>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "take roles a user-defined role inherits",
        privileges: Needs::Computed(needs::revoke_roles),
        api_version_1: false,
    },
    CommandSpec {
        name: "revokeRolesFromUser",
        run: Run::Handler(run::<revoke_roles_from_user::RevokeRolesFromUser>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "take roles from a user",
        privileges: Needs::Computed(needs::revoke_roles),
        api_version_1: false,
    },
    CommandSpec {
        name: "rolesInfo",
        run: Run::Handler(run::<roles_info::RolesInfo>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "the roles of this database, their inheritance and privileges",
        privileges: Needs::Computed(needs::roles_info),
        api_version_1: false,
    },
    CommandSpec {
        name: "saslContinue",
        run: Run::Handler(run::<sasl_continue::SaslContinue>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::NeverCompressed,
        on_view: OnView::Unaffected,
        help: "continue a SASL authentication conversation",
        privileges: Needs::Nothing,
        api_version_1: true,
    },
    CommandSpec {
        name: "saslStart",
        run: Run::Handler(run::<sasl_start::SaslStart>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::NeverCompressed,
        on_view: OnView::Unaffected,
        help: "begin a SASL (SCRAM) authentication conversation",
        privileges: Needs::Nothing,
        api_version_1: true,
    },
    CommandSpec {
        name: "serverStatus",
        run: Run::Handler(run::<server_status::ServerStatus>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "server statistics",
        privileges: Needs::Cluster(&[Action::ServerStatus]),
        api_version_1: false,
    },
    not_supported("setDefaultRWConcern", Reply::Compressible),
    not_supported("setFeatureCompatibilityVersion", Reply::Compressible),
    CommandSpec {
        name: "setParameter",
        run: Run::Handler(run::<set_parameter::SetParameter>),
        alias_of: None,
        admin_only: true,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "set server parameters at run time",
        privileges: Needs::Cluster(&[Action::SetParameter]),
        api_version_1: false,
    },
    CommandSpec {
        name: "shutdown",
        run: Run::Handler(run::<shutdown::Shutdown>),
        alias_of: None,
        admin_only: true,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "stop the server",
        privileges: Needs::Cluster(&[Action::Shutdown]),
        api_version_1: false,
    },
    CommandSpec {
        name: "startSession",
        run: Run::Handler(run::<start_session::StartSession>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "start a logical session",
        privileges: Needs::Authenticated,
        api_version_1: false,
    },
    // mongod's test-only command of API version 2 and no other: under
    // `apiStrict: true` with version 1 it gets the 323 APIStrictError the
    // `api_version_1` fact gives; otherwise it answers `{ok: 1}`, as `ping`.
    CommandSpec {
        name: "testVersion2",
        run: Run::Handler(run::<ping::Ping>),
        alias_of: None,
        admin_only: false,
        test_only: true,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "a command of API version 2 only (test commands only)",
        // mongod's test command checks no privilege but, as every command
        // outside the handshake, runs only once authenticated.
        privileges: Needs::Authenticated,
        api_version_1: false,
    },
    CommandSpec {
        name: "top",
        run: Run::Handler(run::<top::TopCommand>),
        alias_of: None,
        admin_only: true,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "time and counts per collection, in microseconds",
        privileges: Needs::Cluster(&[Action::Top]),
        api_version_1: false,
    },
    CommandSpec {
        name: "update",
        run: Run::Handler(update::handle),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: true,
        write_concern: true,
        latency: Latency::Write,
        txn: Txn::RetryableWrite,
        reply: Reply::Compressible,
        on_view: OnView::Refused,
        help: "update documents",
        privileges: Needs::Computed(needs::update),
        api_version_1: true,
    },
    CommandSpec {
        name: "updateRole",
        run: Run::Handler(run::<update_role::UpdateRole>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "replace a user-defined role's privileges or roles",
        privileges: Needs::Computed(needs::update_role),
        api_version_1: false,
    },
    not_supported("updateSearchIndex", Reply::Compressible),
    CommandSpec {
        name: "updateUser",
        run: Run::Handler(run::<update_user::UpdateUser>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: true,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::NeverCompressed,
        on_view: OnView::Unaffected,
        help: "change a user's password, roles or data",
        privileges: Needs::Computed(needs::update_user),
        api_version_1: false,
    },
    CommandSpec {
        name: "usersInfo",
        run: Run::Handler(run::<users_info::UsersInfo>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "the users a database defines (none: BisonDB has no authentication yet)",
        privileges: Needs::Computed(needs::users_info),
        api_version_1: false,
    },
    CommandSpec {
        name: "validate",
        run: Run::Handler(run::<validate::Validate>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: true,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "check a collection's documents, indexes and statistics",
        privileges: Needs::Collection(&[Action::Validate]),
        api_version_1: false,
    },
    CommandSpec {
        name: "whatsmyuri",
        run: Run::Handler(run::<whatsmyuri::WhatsMyUri>),
        alias_of: None,
        admin_only: false,
        test_only: false,
        may_run_long: false,
        write_concern: false,
        latency: Latency::Command,
        txn: Txn::Refused,
        reply: Reply::Compressible,
        on_view: OnView::Unaffected,
        help: "the client's address as the server sees it",
        privileges: Needs::Authenticated,
        api_version_1: false,
    },
];

/// Where `spec` sits in [`COMMANDS`] (`None` for a copy from elsewhere),
/// for tables laid out as the registry is (the per-command counters of
/// `metrics/`): an address difference, no search.
pub fn position(spec: &CommandSpec) -> Option<usize> {
    let base = COMMANDS.as_ptr() as usize;
    let at = spec as *const CommandSpec as usize;
    let offset = at.checked_sub(base)?;
    let size = std::mem::size_of::<CommandSpec>();
    (offset % size == 0 && offset / size < COMMANDS.len()).then_some(offset / size)
}

pub fn lookup(name: &str) -> Option<&'static CommandSpec> {
    COMMANDS
        .binary_search_by(|c| c.name.cmp(name))
        .ok()
        .and_then(|i| COMMANDS.get(i))
}

/// Every name the command of `spec` answers to: its canonical name and its
/// aliases (a fail point set on `isMaster` fails `hello` too, as mongod's).
pub fn names_of(spec: &CommandSpec) -> Vec<&'static str> {
    let canonical = spec.alias_of.unwrap_or(spec.name);
    COMMANDS
        .iter()
        .filter(|c| c.name == canonical || c.alias_of == Some(canonical))
        .map(|c| c.name)
        .collect()
}

/// With `--auth`: whether the connection may run `req`, whose spec is
/// `spec` (`explain` needs what the command it explains needs).
pub fn authorize(
    spec: &CommandSpec,
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
) -> MongoResult<()> {
    // A removed command is "no such command" to everyone, as on mongod.
    if matches!(spec.run, Run::Removed) {
        return Ok(());
    }
    if !matches!(spec.privileges, Needs::Explained) {
        return crate::auth::check(req.name, &spec.privileges, req, ctx);
    }
    crate::auth::check(req.name, &Needs::Authenticated, req, ctx)?;
    if let Ok(Some(bson::RawBsonRef::Document(inner))) = req.body.get(req.name) {
        let inner = CommandRequest::from_body(inner, &req.db)?;
        if let Some(s) = lookup(inner.name).filter(|s| !matches!(s.privileges, Needs::Explained)) {
            return authorize(s, &inner, ctx).map_err(|_| crate::auth::not_authorized(req));
        }
    }
    Ok(())
}

/// Runs one command: lookup, then [`dispatch_spec`].
pub fn dispatch(req: &CommandRequest<'_>, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
    dispatch_spec(lookup(req.name), req, ctx)
}

/// Runs one command whose spec the caller looked up: test-only and admin
/// checks, a view's treatment, then the handler.
pub fn dispatch_spec(
    spec: Option<&CommandSpec>,
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
) -> MongoResult<RawDocumentBuf> {
    let Some(spec) = spec else {
        return Err(no_such_command(req.name));
    };
    let handler = match spec.run {
        Run::Handler(h) => h,
        Run::NotSupported => {
            return Err(MongoError::new(
                ErrorCode::CommandNotSupported,
                format!(
                    "BisonDB does not support the '{}' command yet (see docs/COMPATIBILITY.md)",
                    req.name
                ),
            ))
        }
        Run::Removed => return Err(no_such_command(req.name)),
    };
    if spec.test_only && !ctx.state.config.enable_test_commands {
        return Err(no_such_command(req.name));
    }
    if spec.admin_only && req.db != "admin" {
        return Err(MongoError::new(
            ErrorCode::Unauthorized,
            format!("{} may only be run against the admin database.", spec.name),
        ));
    }
    let repl = ctx.state.repl();
    let session = crate::fields::check_generic_args(req.name, req.body, repl.takes_txn_numbers())?;
    crate::fields::check_api_version(spec.name, spec.api_version_1, req.body)?;
    if repl.takes_txn_numbers() && !session.in_transaction() {
        // Outside a transaction only the reads a transaction also runs
        // (find, aggregate, distinct: allowed there and taking no write
        // concern) read at a snapshot, as in mongod.
        let snapshot_reader = spec.txn == Txn::Allowed && !spec.write_concern;
        crate::repl::cluster_time::check_snapshot_outside_txn(req, snapshot_reader)?;
        if req.name == "aggregate" {
            crate::repl::cluster_time::check_linearizable_aggregate(req.body)?;
        }
        if let (true, None, Some(at)) = (
            snapshot_reader,
            session.txn_number,
            crate::repl::snapshots::requested(req),
        ) {
            return crate::repl::snapshots::read_at(at, req, ctx, |req, ctx| {
                run_handler(spec, handler, req, ctx)
            });
        }
    }
    if session.txn_number.is_some() {
        // Retryable writes and transactions (replica-set and mongos modes).
        return crate::txn::dispatch(spec.txn, session, req, ctx, |req, ctx| {
            run_handler(spec, handler, req, ctx)
        });
    }
    run_handler(spec, handler, req, ctx)
}

/// Runs a command's handler, or its view handling.
pub fn run_handler(
    spec: &CommandSpec,
    handler: Handler,
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
) -> MongoResult<RawDocumentBuf> {
    // Reads through a view run as aggregations; writes to one fail.
    if let Some(r) = crate::on_view::intercept(spec.on_view, req, ctx) {
        return r;
    }
    handler(req, ctx)
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
    fn table_is_sorted() {
        for w in COMMANDS.windows(2) {
            assert!(w[0].name < w[1].name, "{} >= {}", w[0].name, w[1].name);
        }
    }

    #[test]
    fn lookup_finds_every_command() {
        for c in COMMANDS {
            assert_eq!(lookup(c.name).map(|s| s.name), Some(c.name));
        }
        assert!(lookup("nosuch").is_none());
    }

    #[test]
    fn position_is_the_index_in_the_table() {
        for (i, c) in COMMANDS.iter().enumerate() {
            assert_eq!(position(c), Some(i));
            assert_eq!(lookup(c.name).and_then(position), Some(i));
        }
        let copy = BUILD_INFO;
        assert_eq!(position(&copy), None, "a copy is not in the table");
        // The latency classes mongod gives the query and write commands.
        for (name, class) in [
            ("find", Latency::Read),
            ("getMore", Latency::Read),
            ("aggregate", Latency::Read),
            ("insert", Latency::Write),
            ("update", Latency::Write),
            ("delete", Latency::Write),
            ("findAndModify", Latency::Write),
            ("hello", Latency::Command),
            ("createIndexes", Latency::Command),
        ] {
            assert_eq!(lookup(name).map(|s| s.latency), Some(class), "{name}");
        }
    }

    /// Every spec is complete and its facts agree with each other.
    #[test]
    fn specs_are_complete_and_consistent() {
        for c in COMMANDS {
            let n = c.name;
            match c.run {
                Run::Handler(_) => assert!(!c.help.is_empty(), "{n}: no help"),
                // A command without a handler has no facts about running.
                Run::NotSupported | Run::Removed => {
                    assert!(c.help.is_empty(), "{n}");
                    assert!(!c.may_run_long && !c.admin_only && !c.test_only, "{n}");
                    assert!(!c.write_concern, "{n}");
                    assert_eq!(c.on_view, OnView::Unaffected, "{n}");
                    assert!(c.alias_of.is_none(), "{n}");
                }
            }
            // Admin commands name no collection of the admin database.
            if c.admin_only {
                assert_eq!(c.on_view, OnView::Unaffected, "{n}");
            }
            if c.test_only {
                // Except the Stable API's, which drivers' tests run on
                // their own database, as mongod allows.
                assert!(
                    c.admin_only || n == "testVersion2",
                    "{n}: test commands run against admin"
                );
            }
            // A command that reads through a view may scan its source.
            if c.on_view == OnView::ReadsThrough {
                assert!(c.may_run_long, "{n}");
            }
            if let Some(canonical) = c.alias_of {
                let Some(of) = lookup(canonical) else {
                    panic!("{n}: alias of the unknown {canonical}");
                };
                assert!(of.alias_of.is_none(), "{n}: alias of an alias");
                let (Some(h), Some(of_h)) = (c.handler(), of.handler()) else {
                    panic!("{n}: an alias without a handler");
                };
                assert_eq!(h as usize, of_h as usize, "{n}: not {canonical}'s handler");
                assert_eq!(
                    (
                        c.admin_only,
                        c.test_only,
                        c.may_run_long,
                        c.write_concern,
                        c.reply,
                        c.on_view
                    ),
                    (
                        of.admin_only,
                        of.test_only,
                        of.may_run_long,
                        of.write_concern,
                        of.reply,
                        of.on_view
                    ),
                    "{n}: facts differ from {canonical}'s"
                );
            }
        }
    }

    /// The commands of the Stable API's version 1, as the manual lists them
    /// (with `saslStart`/`saslContinue`, which mongod's IDL puts there, and
    /// `bulkWrite`, added in 8.0); the legacy `isMaster` is not one.
    #[test]
    fn stable_api_version_1_is_mongods_list() {
        let v1: Vec<&str> = COMMANDS
            .iter()
            .filter(|c| c.api_version_1)
            .map(|c| c.name)
            .collect();
        assert_eq!(
            v1,
            [
                "abortTransaction",
                "aggregate",
                "authenticate",
                "bulkWrite",
                "collMod",
                "commitTransaction",
                "count",
                "create",
                "createIndexes",
                "delete",
                "drop",
                "dropDatabase",
                "dropIndexes",
                "endSessions",
                "explain",
                "find",
                "findAndModify",
                "findandmodify",
                "getMore",
                "hello",
                "insert",
                "killCursors",
                "listCollections",
                "listDatabases",
                "listIndexes",
                "ping",
                "refreshSessions",
                "saslContinue",
                "saslStart",
                "update",
            ]
        );
    }

    #[test]
    fn names_of_an_aliased_command() {
        for name in ["hello", "isMaster", "ismaster"] {
            let spec = lookup(name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(names_of(spec), ["hello", "isMaster", "ismaster"]);
        }
        let insert = lookup("insert").unwrap_or_else(|| panic!("insert"));
        assert_eq!(names_of(insert), ["insert"]);
    }

    /// The compression specification's list of commands whose replies are
    /// never compressed, served or not.
    #[test]
    fn never_compressed_as_the_specification_lists() {
        let mut never: Vec<&str> = COMMANDS
            .iter()
            .filter(|c| c.reply == Reply::NeverCompressed)
            .map(|c| c.name)
            .collect();
        never.sort_unstable();
        assert_eq!(
            never,
            [
                "authenticate",
                "copydb",
                "copydbSaslStart",
                "copydbgetnonce",
                "createUser",
                "getnonce",
                "hello",
                "isMaster",
                "ismaster",
                "saslContinue",
                "saslStart",
                "updateUser",
            ]
        );
    }
}
