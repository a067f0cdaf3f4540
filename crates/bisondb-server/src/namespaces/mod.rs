//! Namespace kinds and what every namespace shows, whatever its kind.
//!
//! A collection's catalog options make it a plain collection, a capped one
//! ([`capped`]), a clustered one ([`clustered`]), a view ([`views`]) or a
//! time-series collection ([`timeseries`]: a view over a bucket collection).
//! The modules here know each kind's options and layout; commands (above)
//! ask them, and nothing here reaches up into `commands/`. [`stats`] gives a
//! collection's statistics as `collStats` and `$collStats` report them.

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
