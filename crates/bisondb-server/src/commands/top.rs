//! `top`: per-collection time and counts since start-up, as mongod's `top`
//! reports them (`totals.<ns>.{total, readLock, writeLock, queries, getmore,
//! insert, update, remove, commands}`, each `{time, count}` with time in
//! microseconds). The connection records every finished command that names a
//! collection ([`Top::record`]).

use std::collections::HashMap;
use std::time::Duration;

use bisondb_error::MongoResult;
use bson::{doc, Document, RawDocumentBuf};
use parking_lot::Mutex;

use super::{Command, Context};
use crate::registry::CommandSpec;
use crate::reply;
use crate::request::CommandRequest;

/// One `{time, count}` pair.
#[derive(Debug, Default, Clone, Copy)]
struct Usage {
    micros: u64,
    count: u64,
}

impl Usage {
    fn add(&mut self, micros: u64) {
        self.micros = self.micros.saturating_add(micros);
        self.count += 1;
    }

    fn doc(self) -> Document {
        doc! {
            "time": i64::try_from(self.micros).unwrap_or(i64::MAX),
            "count": i64::try_from(self.count).unwrap_or(i64::MAX),
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct CollectionUsage {
    total: Usage,
    read_lock: Usage,
    write_lock: Usage,
    queries: Usage,
    getmore: Usage,
    insert: Usage,
    update: Usage,
    remove: Usage,
    commands: Usage,
    /// By `opLatencies` class (reads, writes, commands), for `$collStats`'s
    /// `latencyStats`.
    latency: [Usage; 3],
}

/// The slot of a class in [`CollectionUsage::latency`].
fn class_slot(class: crate::registry::Latency) -> usize {
    match class {
        crate::registry::Latency::Read => 0,
        crate::registry::Latency::Write => 1,
        crate::registry::Latency::Command => 2,
    }
}

/// The server's per-collection usage, by database then collection, so that a
/// command finds its entry with its borrowed names and allocates only the
/// first time a collection is seen.
#[derive(Debug, Default)]
pub struct Top {
    by_ns: Mutex<HashMap<String, HashMap<String, CollectionUsage>>>,
}

impl Top {
    /// Counts one finished command against the collection it names (commands
    /// on no collection are not counted, as in mongod).
    pub fn record(&self, req: &CommandRequest<'_>, spec: Option<&CommandSpec>, took: Duration) {
        let Some(coll) = crate::op_ctx::collection_of(req) else {
            return;
        };
        let Some(spec) = spec else { return };
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let mut map = self.by_ns.lock();
        if !map.contains_key(req.db.as_str()) {
            map.insert(req.db.to_string(), HashMap::new());
        }
        let Some(colls) = map.get_mut(req.db.as_str()) else {
            return;
        };
        if !colls.contains_key(coll) {
            colls.insert(coll.to_string(), CollectionUsage::default());
        }
        let Some(u) = colls.get_mut(coll) else { return };
        u.total.add(micros);
        if let Some(l) = u.latency.get_mut(class_slot(spec.latency)) {
            l.add(micros);
        }
        if spec.write_concern {
            u.write_lock.add(micros);
        } else {
            u.read_lock.add(micros);
        }
        match req.name {
            "find" => u.queries.add(micros),
            "getMore" => u.getmore.add(micros),
            "insert" => u.insert.add(micros),
            "update" => u.update.add(micros),
            "delete" => u.remove.add(micros),
            _ => u.commands.add(micros),
        }
    }

    /// `$collStats`'s `latencyStats` of `db.coll`: total microseconds and
    /// operations of its reads, writes and other commands since start-up
    /// (mongod's `transactions`, whole transactions' latency per collection,
    /// is not measured: 0).
    pub fn latency_stats(&self, db: &str, coll: &str) -> Document {
        let usage = self
            .by_ns
            .lock()
            .get(db)
            .and_then(|c| c.get(coll))
            .map(|u| u.latency)
            .unwrap_or_default();
        let one = |u: Usage| {
            doc! {
                "latency": i64::try_from(u.micros).unwrap_or(i64::MAX),
                "ops": i64::try_from(u.count).unwrap_or(i64::MAX),
            }
        };
        let [reads, writes, commands] = usage;
        doc! {
            "reads": one(reads),
            "writes": one(writes),
            "commands": one(commands),
            "transactions": one(Usage::default()),
        }
    }

    fn report(&self) -> Document {
        let map = self.by_ns.lock();
        let mut names: Vec<(String, CollectionUsage)> = map
            .iter()
            .flat_map(|(db, colls)| colls.iter().map(move |(c, u)| (format!("{db}.{c}"), *u)))
            .collect();
        names.sort_by(|a, b| a.0.cmp(&b.0));
        let mut totals = doc! {"note": "all times in microseconds"};
        for (ns, u) in names {
            totals.insert(
                ns,
                doc! {
                    "total": u.total.doc(),
                    "readLock": u.read_lock.doc(),
                    "writeLock": u.write_lock.doc(),
                    "queries": u.queries.doc(),
                    "getmore": u.getmore.doc(),
                    "insert": u.insert.doc(),
                    "update": u.update.doc(),
                    "remove": u.remove.doc(),
                    "commands": u.commands.doc(),
                },
            );
        }
        totals
    }
}

pub struct TopCommand;

impl Command for TopCommand {
    fn parse(_req: &CommandRequest<'_>) -> MongoResult<Self> {
        Ok(TopCommand)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        reply::ok(doc! {"totals": ctx.state.top.report()})
    }
}
