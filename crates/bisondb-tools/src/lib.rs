//! `bisondb dump` and `bisondb restore`: logical backups in mongodump's
//! directory layout (`layout.rs`), so `mongorestore` can read what `dump`
//! writes and `restore` can read what `mongodump` wrote.
//!
//! Both talk to any MongoDB-compatible URI through the official driver and
//! depend on no server crate: what they see is what any client sees.
//! Documents are streamed, a cursor batch at a time into a buffered file and
//! a bounded batch at a time out of one, so no collection is ever held in
//! memory. File I/O is plain blocking I/O on the runtime's worker: the tools
//! are one client each, with nothing else on their runtime to hold up.

pub mod buckets;
pub mod dump;
pub mod layout;
pub mod restore;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

pub use dump::{dump, DumpOptions, DumpSummary};
pub use restore::{restore, RestoreOptions, RestoreSummary};

/// A failed dump or restore, with a message for the user.
#[derive(Debug)]
pub struct ToolError {
    pub message: String,
}

impl ToolError {
    pub fn new(message: impl Into<String>) -> ToolError {
        ToolError {
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolError {}

impl From<mongodb::error::Error> for ToolError {
    fn from(e: mongodb::error::Error) -> ToolError {
        ToolError::new(e.to_string())
    }
}

impl From<std::io::Error> for ToolError {
    fn from(e: std::io::Error) -> ToolError {
        ToolError::new(e.to_string())
    }
}

impl From<serde_json::Error> for ToolError {
    fn from(e: serde_json::Error) -> ToolError {
        ToolError::new(format!("JSON: {e}"))
    }
}

impl From<bson::error::Error> for ToolError {
    fn from(e: bson::error::Error) -> ToolError {
        ToolError::new(format!("BSON: {e}"))
    }
}

pub type Result<T> = std::result::Result<T, ToolError>;

/// The server a tool connects to when no `--uri` is given.
const DEFAULT_URI: &str = "mongodb://localhost:27017";

/// The flags both tools share: the server and what of it to work on.
#[derive(Args, Clone, Debug)]
pub struct Scope {
    /// The server to connect to.
    #[arg(long, default_value = DEFAULT_URI)]
    pub uri: String,
    /// Only this database.
    #[arg(long, short = 'd')]
    pub db: Option<String>,
    /// Only this collection (needs --db).
    #[arg(long, short = 'c')]
    pub collection: Option<String>,
}

/// `bisondb dump`'s flags (mongodump's names).
#[derive(Args, Clone, Debug)]
pub struct DumpArgs {
    #[command(flatten)]
    pub scope: Scope,
    /// The directory to write (created if missing).
    #[arg(long, short = 'o', default_value = "dump")]
    pub out: PathBuf,
    /// Gzip every file (`.bson.gz`, `.metadata.json.gz`).
    #[arg(long)]
    pub gzip: bool,
    /// Dump each view's documents as a collection instead of its definition.
    #[arg(long = "viewsAsCollections")]
    pub views_as_collections: bool,
}

/// `bisondb restore`'s flags (mongorestore's names).
#[derive(Args, Clone, Debug)]
pub struct RestoreArgs {
    #[command(flatten)]
    pub scope: Scope,
    /// The dump directory (as `bisondb dump --out` or `mongodump --out` wrote it).
    #[arg(long, default_value = "dump")]
    pub dir: PathBuf,
    /// Accepted for mongorestore's sake: gzipped files are recognized by
    /// their `.gz` names either way.
    #[arg(long)]
    pub gzip: bool,
    /// Drop each collection before restoring it.
    #[arg(long)]
    pub drop: bool,
    /// Insert in the dump's order and stop at the first error.
    #[arg(long = "maintainInsertionOrder")]
    pub maintain_insertion_order: bool,
    /// Stop at the first failed insert (by default a duplicate key or a
    /// document the validator refuses is counted and skipped).
    #[arg(long = "stopOnError")]
    pub stop_on_error: bool,
    /// Do not create the dumped indexes.
    #[arg(long = "noIndexRestore")]
    pub no_index_restore: bool,
    /// Do not create collections with their dumped options.
    #[arg(long = "noOptionsRestore")]
    pub no_options_restore: bool,
    /// Insert past the collections' validators.
    #[arg(long = "bypassDocumentValidation")]
    pub bypass_document_validation: bool,
    /// Documents per insert (mongorestore's hidden --batchSize).
    #[arg(long = "batchSize", default_value_t = 1000)]
    pub batch_size: usize,
}

impl From<DumpArgs> for DumpOptions {
    fn from(a: DumpArgs) -> DumpOptions {
        DumpOptions {
            uri: a.scope.uri,
            out: a.out,
            db: a.scope.db,
            collection: a.scope.collection,
            gzip: a.gzip,
            views_as_collections: a.views_as_collections,
        }
    }
}

impl From<RestoreArgs> for RestoreOptions {
    fn from(a: RestoreArgs) -> RestoreOptions {
        RestoreOptions {
            uri: a.scope.uri,
            dir: a.dir,
            db: a.scope.db,
            collection: a.scope.collection,
            drop: a.drop,
            maintain_insertion_order: a.maintain_insertion_order,
            stop_on_error: a.stop_on_error || a.maintain_insertion_order,
            no_index_restore: a.no_index_restore,
            no_options_restore: a.no_options_restore,
            bypass_document_validation: a.bypass_document_validation,
            batch_size: a.batch_size.clamp(1, 100_000),
        }
    }
}

/// Runs `f` on a fresh runtime and turns its outcome into an exit code (1 on
/// failure, with the message on standard error).
fn run_tool<T>(
    name: &str,
    f: impl std::future::Future<Output = Result<T>>,
    report: impl FnOnce(&T),
) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bisondb {name}: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(f) {
        Ok(t) => {
            report(&t);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bisondb {name}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Entry point of `bisondb dump`.
pub fn run_dump(args: DumpArgs) -> ExitCode {
    run_tool("dump", dump(args.into()), |s: &DumpSummary| {
        eprintln!(
            "bisondb dump: {} collection(s), {} view(s), {} document(s)",
            s.collections, s.views, s.documents
        )
    })
}

/// Entry point of `bisondb restore`.
pub fn run_restore(args: RestoreArgs) -> ExitCode {
    run_tool("restore", restore(args.into()), |s: &RestoreSummary| {
        eprintln!(
            "bisondb restore: {} collection(s), {} view(s), {} document(s) restored, {} failed",
            s.collections, s.views, s.documents, s.failed
        )
    })
}
