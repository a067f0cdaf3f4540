//! Namespace kinds and what every namespace shows, whatever its kind.
//!
//! A collection's catalog options make it a plain collection, a capped one
//! ([`capped`]), a clustered one ([`clustered`]), a view ([`views`]) or a
//! time-series collection ([`timeseries`]: a view over a bucket collection).
//! The modules here know each kind's options and layout; commands (above)
//! ask them, and nothing here reaches up into `commands/`. [`stats`] gives a
//! collection's statistics as `collStats` and `$collStats` report them.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, Bson, Document};

pub mod capped;
pub mod clustered;
pub mod stats;
pub mod timeseries;
pub mod views;

/// `db.coll`
pub fn ns(db: &str, coll: &str) -> String {
    format!("{db}.{coll}")
}

/// What asks to write documents into a namespace: each path answers a
/// forbidden target with mongod's own code for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// A write command (`insert`...).
    Command,
    /// An aggregation's `$out`.
    Out,
    /// An aggregation's `$merge`.
    Merge,
}

/// The one check of whether documents may be written into `db.coll` through
/// `writer`: never into `system.*` collections (they hold the catalog's own
/// documents: users, views, profiles, buckets...), and never through `$out` or
/// `$merge` into the internal databases `admin`, `local` and `config` (mongod's
/// `NamespaceString::isOnInternalDb`). The namespace's length is checked when
/// the collection is created (the storage's `check_names`).
pub fn check_writable(db: &str, coll: &str, writer: Writer) -> MongoResult<()> {
    let system = coll.starts_with("system.");
    // mongod's codes and wording differ between the two stages.
    let (stage, cannot, special, internal) = match writer {
        Writer::Command if system => {
            return Err(MongoError::new(
                ErrorCode::InvalidNamespace,
                format!(
                    "Invalid namespace specified '{db}.{coll}': cannot write to system collections"
                ),
            ))
        }
        Writer::Command => return Ok(()),
        Writer::Out => ("$out", "Can't", 17385, 31321),
        Writer::Merge => ("$merge", "Cannot", 31319, 31320),
    };
    if system {
        return Err(MongoError::location(
            special,
            format!("{cannot} {stage} to special collection: {coll}"),
        ));
    }
    if matches!(db, "admin" | "local" | "config") {
        return Err(MongoError::location(
            internal,
            format!("{cannot} {stage} to internal database: {db}"),
        ));
    }
    Ok(())
}

/// `$out` and `$merge` write into collections only: onto a view they fail
/// with 166, as in mongod (a `$out` would otherwise replace the view).
pub fn check_not_view(storage: &bisondb_storage::Storage, db: &str, coll: &str) -> MongoResult<()> {
    match storage.collection(db, coll) {
        Some(c) if c.options().contains_key("viewOn") => Err(MongoError::new(
            ErrorCode::CommandNotSupportedOnView,
            format!("Namespace {db}.{coll} is a view, not a collection"),
        )),
        _ => Ok(()),
    }
}

/// The `_id_` index as listIndexes reports it.
pub fn id_index_spec() -> Document {
    doc! {"v": 2, "key": {"_id": 1}, "name": "_id_"}
}

/// Default index name, as drivers and mongod build it: `a_1_b_-1`.
pub fn default_index_name(key: &Document) -> String {
    key.iter()
        .map(|(k, v)| {
            let v = match v {
                Bson::String(s) => s.clone(),
                Bson::Double(d) if d.fract() == 0.0 => format!("{}", *d as i64),
                other => other.to_string(),
            };
            format!("{k}_{v}")
        })
        .collect::<Vec<_>>()
        .join("_")
}

/// Each index's specification as `listIndexes` shows it: the `_id` index (or
/// a clustered collection's clustered index) first, then the secondary
/// indexes in creation order.
pub fn index_specs(coll: &bisondb_storage::Collection) -> Vec<bson::Document> {
    let options = coll.options();
    let first = match clustered::Clustered::of_options(&options) {
        Some(c) => c.list_indexes_entry(&options),
        None => id_index_spec(),
    };
    let mut specs = vec![first];
    for ix in coll.indexes() {
        let mut spec = ix.spec.to_document();
        if ix.prepare_unique {
            spec.insert("prepareUnique", true);
        }
        specs.push(spec);
    }
    specs
}
