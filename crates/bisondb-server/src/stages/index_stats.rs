//! `$indexStats`: how often user operations used each index of a collection
//! since the server started or the index was (re)built, as mongod 8 reports
//! it. The counters live beside the indexes in the storage layer (in memory,
//! like mongod's) and are advanced by the commands when their plan reads an
//! index (`plan::note_index_use`); the TTL monitor does not count, as in mongod.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_storage::Collection;
use bson::{doc, Bson, Document};

/// Checks the stage's argument (an empty object) and that there is a
/// collection to report on.
pub fn check_spec(spec: &Bson, coll: Option<&str>) -> MongoResult<()> {
    match spec {
        Bson::Document(d) if d.is_empty() => {}
        _ => {
            return Err(MongoError::location(
                28803,
                "The $indexStats stage specification must be an empty object",
            ))
        }
    }
    if coll.is_none() {
        return Err(MongoError::new(
            ErrorCode::InvalidNamespace,
            "{aggregate: 1} is not valid for '$indexStats'; a collection is required.",
        ));
    }
    Ok(())
}

/// One document per index (`_id` first, then in creation order):
/// `{name, key, host, accesses: {ops, since}, spec}`. A missing collection
/// has no indexes.
pub fn output(coll: Option<&Collection>, host: &str) -> MongoResult<Vec<Document>> {
    let Some(coll) = coll else {
        return Ok(Vec::new());
    };
    let ((id_ops, id_since), usage) = coll.index_usage();
    let mut specs = crate::namespaces::index_specs(coll).into_iter();
    let mut out = Vec::new();
    if let Some(id_spec) = specs.next() {
        out.push(entry(id_spec, host, id_ops, id_since));
    }
    for spec in specs {
        // Indexes created after `index_usage()` was read are left for the next call.
        let name = spec.get_str("name").ok();
        let found = usage.iter().find(|(n, _, _)| Some(n.as_str()) == name);
        let Some(&(_, ops, since)) = found else {
            continue;
        };
        out.push(entry(spec, host, ops, since));
    }
    Ok(out)
}

fn entry(spec: Document, host: &str, ops: u64, since: bson::DateTime) -> Document {
    let name = spec.get("name").cloned().unwrap_or(Bson::Null);
    let key = spec.get("key").cloned().unwrap_or(Bson::Null);
    doc! {
        "name": name,
        "key": key,
        "host": host,
        "accesses": {"ops": i64::try_from(ops).unwrap_or(i64::MAX), "since": since},
        "spec": spec,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_argument_is_an_empty_object_on_a_collection() {
        assert!(check_spec(&Bson::Document(doc! {}), Some("c")).is_ok());
        for bad in [Bson::Document(doc! {"a": 1}), Bson::Int32(1), Bson::Null] {
            let e = check_spec(&bad, Some("c")).unwrap_err();
            assert_eq!(e.code.code(), 28803, "{bad:?}");
        }
        let e = check_spec(&Bson::Document(doc! {}), None).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidNamespace);
    }

    #[test]
    fn entries_have_mongods_fields_in_order() {
        let since = bson::DateTime::from_millis(5);
        let d = entry(
            doc! {"v": 2, "key": {"a": 1}, "name": "a_1"},
            "h:1",
            3,
            since,
        );
        let keys: Vec<&str> = d.keys().map(String::as_str).collect();
        assert_eq!(keys, ["name", "key", "host", "accesses", "spec"]);
        assert_eq!(
            d.get_document("accesses").unwrap(),
            &doc! {"ops": 3i64, "since": since}
        );
        assert_eq!(d.get_str("name").unwrap(), "a_1");
    }
}
