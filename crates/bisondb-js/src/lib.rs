//! Server-side JavaScript for BisonDB, on an embedded QuickJS (`rquickjs`).
//!
//! mongod runs `$where` predicates with an embedded JavaScript engine; this crate
//! is BisonDB's. The API is small on purpose:
//!
//! - [`Predicate::compile`] turns a `$where` string (an expression, a function
//!   body with `return`, or a whole `function () {...}`) into a predicate, once
//!   per query; syntax errors surface here, as mongod reports them at parse time.
//! - [`Predicate::matches`] runs it against one document: `this` and the global
//!   `obj` are the document converted to JavaScript (see `convert.rs`), and the
//!   truthiness of the result decides, as mongod's `getBoolean` does.
//! - [`call_function`] runs a `$function` body with its arguments and
//!   converts the result back to BSON.
//! - [`mapreduce::MapReduce`] holds one `mapReduce` command's `map`,
//!   `reduce` and `finalize` functions, with `emit` and the command's `scope`
//!   in a context of their own.
//! - [`deadline`] is the operation's time limit (`maxTimeMS`), kept per thread:
//!   the engine's interrupt handler and `sleep()` watch it, so a long script ends
//!   with 50 MaxTimeMSExpired instead of running on.
//!
//! QuickJS runtimes are not `Send`, while a parsed filter is shared between
//! threads (a cursor's `getMore` may run on another worker). So a
//! [`Predicate`] holds only its source and an id, and each thread keeps one
//! runtime with the functions it compiled, keyed by that id (see [`engine`]).
//! The crate is separate from `bisondb-query` so QuickJS's C code is compiled
//! once and the query crate's rebuilds stay fast.

mod convert;
pub mod deadline;
mod engine;
pub mod mapreduce;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::RawDocument;

/// A compiled `$where` predicate. Cheap to clone; `Send + Sync` (the compiled
/// function itself lives in each evaluating thread's engine).
#[derive(Clone)]
pub struct Predicate {
    id: u64,
    source: Arc<str>,
}

impl std::fmt::Debug for Predicate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Predicate")
            .field("source", &self.source)
            .finish()
    }
}

/// Ids distinguish predicates in the per-thread caches; they are never reused.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Predicate {
    /// Compiles `code` on this thread's engine. A syntax error is 139
    /// JSInterpreterFailure, as in mongod.
    pub fn compile(code: &str) -> MongoResult<Predicate> {
        let p = Predicate {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            source: Arc::from(code),
        };
        engine::with(|e| e.compile(p.id, &p.source))?;
        Ok(p)
    }

    /// The JavaScript source as given.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Runs the predicate with `doc` as `this` and `obj`. A thrown error is 139
    /// JSInterpreterFailure with its message; an expired [`deadline`] is 50.
    pub fn matches(&self, doc: &RawDocument) -> MongoResult<bool> {
        deadline::check()?;
        engine::with(|e| e.call(self.id, &self.source, doc))
    }
}

/// `$function`: calls the function whose source is `body` with `args`
/// (converted to JavaScript) and returns its result as BSON. Bodies are
/// compiled once per thread and cached by source. Errors as
/// [`Predicate::matches`].
pub fn call_function(body: &str, args: &[bson::Bson]) -> MongoResult<bson::Bson> {
    deadline::check()?;
    engine::with(|e| e.call_body(body, args))
}

/// Compiles a `$function` body without running it, so a syntax error fails
/// the command before any document is read.
pub fn check_function(body: &str) -> MongoResult<()> {
    engine::with(|e| e.check_body(body))
}

/// mongod's error for a script that threw or failed to compile.
pub(crate) fn js_error(message: impl Into<String>) -> MongoError {
    MongoError::new(ErrorCode::JSInterpreterFailure, message)
}

#[cfg(test)]
mod tests;
