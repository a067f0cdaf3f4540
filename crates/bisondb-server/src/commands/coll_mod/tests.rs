use std::sync::Arc;

use bson::{doc, Document, RawDocumentBuf};

use crate::context::{ConnectionInfo, Context};
use crate::request::CommandRequest;
use crate::state::ServerState;

fn server() -> Arc<ServerState> {
    let storage =
        bisondb_storage::Storage::open(Arc::new(bisondb_storage::MemoryEngine::new())).unwrap();
    ServerState::new(crate::ServerConfig::default(), storage)
}

/// Runs `cmd` on database `t` through the registry; the reply or the error document.
fn run(state: &Arc<ServerState>, cmd: Document) -> Document {
    let raw = RawDocumentBuf::try_from(&cmd).unwrap();
    let req = CommandRequest::from_body(&raw, "t").unwrap();
    let mut conn = ConnectionInfo::default();
    let mut ctx = Context {
        state,
        conn: &mut conn,
    };
    match crate::registry::dispatch(&req, &mut ctx) {
        Ok(r) => Document::try_from(r.as_ref()).unwrap(),
        Err(e) => crate::reply::error_document(&e),
    }
}

fn code(reply: &Document) -> i32 {
    reply.get_i32("code").unwrap_or(0)
}

#[test]
fn missing_collection_is_namespace_not_found() {
    let s = server();
    let r = run(&s, doc! {"collMod": "nope", "validator": {"a": 1}});
    assert_eq!(code(&r), 26, "{r}");
    assert_eq!(r.get_str("codeName").unwrap(), "NamespaceNotFound");
}

#[test]
fn validator_changes_are_stored_and_listed() {
    let s = server();
    run(&s, doc! {"create": "c"});
    let r = run(
        &s,
        doc! {"collMod": "c", "validator": {"a": {"$type": "int"}}, "validationAction": "warn"},
    );
    assert_eq!(r, doc! {"ok": 1.0});
    let opts = s.storage.collection("t", "c").unwrap().options();
    assert_eq!(
        opts.as_ref(),
        &doc! {"validator": {"a": {"$type": "int"}}, "validationAction": "warn"}
    );
    run(&s, doc! {"collMod": "c", "validationLevel": "moderate"});
    let opts = s.storage.collection("t", "c").unwrap().options();
    assert_eq!(opts.get_str("validationLevel").unwrap(), "moderate");
    assert_eq!(opts.get_str("validationAction").unwrap(), "warn");
}

#[test]
fn bad_options_fail_as_mongod_fails_them() {
    let s = server();
    run(&s, doc! {"create": "c"});
    for (cmd, want) in [
        (doc! {"collMod": "c", "bogus": 1}, 40415),
        (doc! {"collMod": "c", "validationLevel": "sometimes"}, 2),
        (doc! {"collMod": "c", "validationAction": "errorAndLog"}, 2),
        (doc! {"collMod": "c", "validator": 5}, 14),
        (doc! {"collMod": "c", "validator": {"$where": "1"}}, 224),
        (doc! {"collMod": "c", "viewOn": "x"}, 72),
        (doc! {"collMod": "c", "pipeline": []}, 72),
        (doc! {"collMod": "c", "expireAfterSeconds": 5}, 72),
        (
            doc! {"collMod": "c", "index": {"name": "a_1", "bogus": true}},
            40415,
        ),
    ] {
        let r = run(&s, cmd.clone());
        assert_eq!(code(&r), want, "{cmd}: {r}");
    }
    // Nothing was changed by the failed attempts.
    assert!(s.storage.collection("t", "c").unwrap().options().is_empty());
}

#[test]
fn index_options_change_with_mongods_reply() {
    let s = server();
    run(
        &s,
        doc! {"createIndexes": "c", "indexes": [
            {"key": {"a": 1}, "name": "a_1"},
            {"key": {"t": 1}, "name": "t_1", "expireAfterSeconds": 3600},
        ]},
    );
    let r = run(
        &s,
        doc! {"collMod": "c", "index": {"keyPattern": {"a": 1}, "hidden": true}},
    );
    assert_eq!(r, doc! {"hidden_old": false, "hidden_new": true, "ok": 1.0});
    // Hiding a hidden index changes nothing and says nothing.
    let r = run(
        &s,
        doc! {"collMod": "c", "index": {"name": "a_1", "hidden": true}},
    );
    assert_eq!(r, doc! {"ok": 1.0});
    let r = run(
        &s,
        doc! {"collMod": "c", "index": {"name": "t_1", "expireAfterSeconds": 60}},
    );
    assert_eq!(
        r,
        doc! {"expireAfterSeconds_old": 3600_i64, "expireAfterSeconds_new": 60_i64, "ok": 1.0}
    );
    // A plain single-field index becomes a TTL index.
    let r = run(
        &s,
        doc! {"collMod": "c", "index": {"name": "a_1", "expireAfterSeconds": 5}},
    );
    assert_eq!(r, doc! {"expireAfterSeconds_new": 5_i64, "ok": 1.0});
    let specs: Vec<_> = s
        .storage
        .collection("t", "c")
        .unwrap()
        .indexes()
        .into_iter()
        .map(|i| i.spec)
        .collect();
    assert!(specs[0].hidden);
    assert_eq!(specs[0].expire_after_seconds, Some(5));
    assert_eq!(specs[1].expire_after_seconds, Some(60));
    for (index, want, msg) in [
        (
            doc! {"name": "_id_", "hidden": true},
            2,
            "can't hide _id index",
        ),
        (
            doc! {"name": "nope", "hidden": true},
            27,
            "cannot find index nope for ns t.c",
        ),
        (
            doc! {"hidden": true},
            72,
            "Must specify either index name or key pattern.",
        ),
        (
            doc! {"name": "a_1"},
            72,
            "no expireAfterSeconds, hidden, unique, or prepareUnique field",
        ),
        (
            doc! {"name": "a_1", "unique": true},
            72,
            "Cannot make index unique with 'prepareUnique=false'. Run collMod to set it first.",
        ),
        (
            doc! {"name": "a_1", "unique": false},
            2,
            "Cannot make index non-unique",
        ),
    ] {
        let r = run(&s, doc! {"collMod": "c", "index": index.clone()});
        assert_eq!(code(&r), want, "{index}: {r}");
        assert_eq!(r.get_str("errmsg").unwrap(), msg, "{index}");
    }
}

#[test]
fn a_views_definition_can_change() {
    let s = server();
    run(&s, doc! {"create": "src"});
    run(&s, doc! {"create": "v", "viewOn": "src", "pipeline": []});
    let r = run(
        &s,
        doc! {"collMod": "v", "viewOn": "src", "pipeline": [{"$match": {"a": 1}}]},
    );
    assert_eq!(r, doc! {"ok": 1.0});
    let opts = s.storage.collection("t", "v").unwrap().options();
    assert_eq!(
        opts.as_ref(),
        &doc! {"viewOn": "src", "pipeline": [{"$match": {"a": 1}}]}
    );
    // A view over itself is a cycle; a validator is no view option.
    assert_eq!(code(&run(&s, doc! {"collMod": "v", "viewOn": "v"})), 180);
    assert_eq!(
        code(&run(&s, doc! {"collMod": "v", "validator": {"a": 1}})),
        72
    );
}

#[test]
fn an_index_becomes_unique_in_two_steps() {
    let s = server();
    run(
        &s,
        doc! {"insert": "c", "documents": [{"_id": 1, "x": 1}, {"_id": 2, "x": 1}, {"_id": 3, "x": 3}]},
    );
    run(
        &s,
        doc! {"createIndexes": "c", "indexes": [{"key": {"x": 1}, "name": "x_1"}]},
    );
    let r = run(
        &s,
        doc! {"collMod": "c", "index": {"keyPattern": {"x": 1}, "prepareUnique": true}},
    );
    assert_eq!(
        r,
        doc! {"prepareUnique_old": false, "prepareUnique_new": true, "ok": 1.0}
    );
    let listed = run(&s, doc! {"listIndexes": "c"});
    let specs = listed
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    assert_eq!(
        specs[1]
            .as_document()
            .unwrap()
            .get_bool("prepareUnique")
            .ok(),
        Some(true)
    );
    // New duplicates are refused while the old ones stay.
    let r = run(&s, doc! {"insert": "c", "documents": [{"_id": 4, "x": 3}]});
    assert_eq!(
        r.get_array("writeErrors").unwrap()[0]
            .as_document()
            .unwrap()
            .get_i32("code")
            .unwrap(),
        11000,
        "{r}"
    );
    let r = run(
        &s,
        doc! {"collMod": "c", "index": {"keyPattern": {"x": 1}, "unique": true}},
    );
    assert_eq!(code(&r), 359, "{r}");
    assert_eq!(r.get_str("codeName").unwrap(), "CannotConvertIndexToUnique");
    assert_eq!(
        r.get_array("violations").unwrap(),
        &vec![bson::Bson::Document(doc! {"ids": [1, 2]})]
    );
    run(
        &s,
        doc! {"delete": "c", "deletes": [{"q": {"_id": 2}, "limit": 1}]},
    );
    let r = run(
        &s,
        doc! {"collMod": "c", "index": {"keyPattern": {"x": 1}, "unique": true}},
    );
    assert_eq!(r, doc! {"unique_new": true, "ok": 1.0});
    let ix = &s.storage.collection("t", "c").unwrap().indexes()[0];
    assert!(ix.spec.unique && !ix.prepare_unique);
    // Once unique, asking again changes nothing; forceNonUnique goes back.
    let r = run(
        &s,
        doc! {"collMod": "c", "index": {"name": "x_1", "unique": true}},
    );
    assert_eq!(r, doc! {"ok": 1.0});
    let r = run(
        &s,
        doc! {"collMod": "c", "index": {"name": "x_1", "forceNonUnique": true}},
    );
    assert_eq!(r, doc! {"forceNonUnique_new": true, "ok": 1.0});
    assert!(
        !s.storage.collection("t", "c").unwrap().indexes()[0]
            .spec
            .unique
    );
}
