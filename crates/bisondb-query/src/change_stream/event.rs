//! Oplog entries become change events.
//!
//! One entry gives no event (another namespace, a no-op, a command a stream
//! does not report), one event, or several: a transaction's `applyOps`
//! gives one event per operation in commit order, and a drop, rename or
//! database drop of what a stream watches is followed by its `invalidate`.
//! The fields a stream adds from storage (`fullDocument` of an update,
//! pre-images) are the server's; [`Event`] says what it needs to add them.

use bisondb_error::{MongoError, MongoResult};
use bson::{Binary, Bson, DateTime, Document, Timestamp};

use super::diff::update_description;
use super::token::ResumeToken;

/// What a stream watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    Collection {
        db: String,
        coll: String,
    },
    Database {
        db: String,
    },
    /// Every database but `admin`, `config` and `local`.
    Cluster,
}

/// Which events a stream wants.
#[derive(Debug, Clone)]
pub struct Filter {
    pub scope: Scope,
    /// `showExpandedEvents`: DDL events and `collectionUUID`.
    pub expanded: bool,
    /// `showSystemEvents`: `system.*` collections in database and cluster
    /// streams.
    pub system: bool,
}

/// One change event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub token: ResumeToken,
    /// The event document, without the fields the server adds.
    pub doc: Document,
    pub operation_type: &'static str,
    /// The event's database and collection (collection empty for a
    /// database event).
    pub ns: (String, String),
    pub document_key: Option<Document>,
    /// The collection's UUID (`ui`).
    pub uuid: Option<Binary>,
    /// The entry's timestamp, which keys the stored pre-image.
    pub ts: Timestamp,
    /// An `update`'s `$v: 2` diff, which applied to the pre-image gives
    /// the post-image.
    pub update_diff: Option<Document>,
    /// The event ends the stream (an `invalidate`).
    pub invalidates: bool,
}

fn bad(msg: impl Into<String>) -> MongoError {
    MongoError::internal(format!("malformed oplog entry: {}", msg.into()))
}

fn split_ns(ns: &str) -> (&str, &str) {
    ns.split_once('.').unwrap_or((ns, ""))
}

const INTERNAL_DBS: &[&str] = &["admin", "config", "local"];

impl Filter {
    fn wants_db(&self, db: &str) -> bool {
        match &self.scope {
            Scope::Cluster => !INTERNAL_DBS.contains(&db),
            Scope::Database { db: d } | Scope::Collection { db: d, .. } => d == db,
        }
    }

    fn wants_coll(&self, db: &str, coll: &str) -> bool {
        match &self.scope {
            Scope::Collection { db: d, coll: c } => d == db && c == coll,
            _ => self.wants_db(db) && (self.system || !coll.starts_with("system.")),
        }
    }

    /// The watched collection is `db.coll`.
    fn watches(&self, db: &str, coll: &str) -> bool {
        matches!(&self.scope, Scope::Collection { db: d, coll: c } if d == db && c == coll)
    }
}

/// What every event of one entry shares.
struct Ctx<'a> {
    ts: Timestamp,
    wall: Option<DateTime>,
    /// A transaction's `lsid` and `txnNumber`.
    txn: Option<(&'a Bson, &'a Bson)>,
    filter: &'a Filter,
}

struct Draft {
    operation_type: &'static str,
    db: String,
    coll: String,
    uuid: Option<Binary>,
    /// Fields after `_id`, `operationType`, `clusterTime`, `wallTime` and
    /// `collectionUUID`, in order.
    body: Document,
    document_key: Option<Document>,
    update_diff: Option<Document>,
    invalidates_after: bool,
}

impl Ctx<'_> {
    fn finish(&self, d: Draft, index: u64, out: &mut Vec<Event>) {
        let mut id = bson::doc! {"operationType": d.operation_type};
        if let Some(k) = &d.document_key {
            id.insert("documentKey", k.clone());
        }
        let token = ResumeToken::event(self.ts, index, d.uuid.as_ref(), &id);
        let mut doc = bson::doc! {
            "_id": token.to_document(),
            "operationType": d.operation_type,
            "clusterTime": self.ts,
        };
        if let Some(w) = self.wall {
            doc.insert("wallTime", w);
        }
        if self.filter.expanded {
            if let Some(u) = &d.uuid {
                doc.insert("collectionUUID", Bson::Binary(u.clone()));
            }
        }
        doc.extend(d.body);
        if let Some((lsid, txn_number)) = self.txn {
            doc.insert("lsid", lsid.clone());
            doc.insert("txnNumber", txn_number.clone());
        }
        let invalidate = d.invalidates_after.then(|| {
            let t = token.invalidate();
            let mut inv = bson::doc! {
                "_id": t.to_document(),
                "operationType": "invalidate",
                "clusterTime": self.ts,
            };
            if let Some(w) = self.wall {
                inv.insert("wallTime", w);
            }
            (t, inv)
        });
        out.push(Event {
            token,
            doc,
            operation_type: d.operation_type,
            ns: (d.db.clone(), d.coll.clone()),
            document_key: d.document_key,
            uuid: d.uuid.clone(),
            ts: self.ts,
            update_diff: d.update_diff,
            invalidates: false,
        });
        if let Some((token, doc)) = invalidate {
            out.push(Event {
                token,
                doc,
                operation_type: "invalidate",
                ns: (d.db, d.coll),
                document_key: None,
                uuid: d.uuid,
                ts: self.ts,
                update_diff: None,
                invalidates: true,
            });
        }
    }
}

fn ns_doc(db: &str, coll: &str) -> Document {
    bson::doc! {"db": db, "coll": coll}
}

fn uuid_of(op: &Document) -> Option<Binary> {
    match op.get("ui") {
        Some(Bson::Binary(b)) => Some(b.clone()),
        _ => None,
    }
}

fn get_doc<'a>(op: &'a Document, key: &str) -> MongoResult<&'a Document> {
    match op.get(key) {
        Some(Bson::Document(d)) => Ok(d),
        _ => Err(bad(format!("'{key}' is not an object"))),
    }
}

/// The change events of one oplog entry that `filter` wants, in order.
pub fn events(entry: &Document, filter: &Filter) -> MongoResult<Vec<Event>> {
    let ts = match entry.get("ts") {
        Some(Bson::Timestamp(t)) => *t,
        _ => return Err(bad("no 'ts'")),
    };
    let wall = match entry.get("wall") {
        Some(Bson::DateTime(d)) => Some(*d),
        _ => None,
    };
    let txn = match (entry.get("lsid"), entry.get("txnNumber")) {
        (Some(l), Some(n)) if is_apply_ops(entry) => Some((l, n)),
        _ => None,
    };
    let cx = Ctx {
        ts,
        wall,
        txn,
        filter,
    };
    let mut out = Vec::new();
    if is_apply_ops(entry) {
        let o = get_doc(entry, "o")?;
        let Some(Bson::Array(ops)) = o.get("applyOps") else {
            return Err(bad("'applyOps' is not an array"));
        };
        for (i, op) in ops.iter().enumerate() {
            let Bson::Document(op) = op else {
                return Err(bad("an applyOps operation is not an object"));
            };
            if let Some(d) = draft(op, filter)? {
                cx.finish(d, i as u64, &mut out);
            }
        }
    } else if let Some(d) = draft(entry, filter)? {
        cx.finish(d, 0, &mut out);
    }
    Ok(out)
}

fn is_apply_ops(entry: &Document) -> bool {
    entry.get_str("op").is_ok_and(|op| op == "c")
        && matches!(entry.get("o"), Some(Bson::Document(o)) if o.contains_key("applyOps"))
}

/// The event one operation (an entry, or an operation of an `applyOps`)
/// makes for `filter`, if any.
fn draft(op: &Document, filter: &Filter) -> MongoResult<Option<Draft>> {
    let kind = op.get_str("op").map_err(|_| bad("no 'op'"))?;
    let ns = op.get_str("ns").map_err(|_| bad("no 'ns'"))?;
    let (db, coll) = split_ns(ns);
    match kind {
        "i" | "u" | "d" => {
            // A view's definition is a document of system.views: its insert
            // is the view's creation.
            if kind == "i" && coll == "system.views" && filter.expanded {
                return view_created(op, db, filter);
            }
            if !filter.wants_coll(db, coll) {
                return Ok(None);
            }
            crud(op, kind, db, coll, filter).map(Some)
        }
        "c" => command(op, db, filter),
        _ => Ok(None),
    }
}

fn crud(op: &Document, kind: &str, db: &str, coll: &str, filter: &Filter) -> MongoResult<Draft> {
    let o = get_doc(op, "o")?;
    let o2 = match op.get("o2") {
        Some(Bson::Document(d)) => Some(d),
        _ => None,
    };
    let id_key = || -> MongoResult<Document> {
        o.get("_id")
            .map(|id| bson::doc! {"_id": id.clone()})
            .ok_or_else(|| bad("the document has no _id"))
    };
    // (type, document key, fullDocument, updateDescription, diff)
    let (operation_type, key, full, description, update_diff) = match kind {
        "i" => {
            let key = match o2 {
                Some(k) => k.clone(),
                None => id_key()?,
            };
            ("insert", key, Some(o), None, None)
        }
        "u" => {
            let key = o2.cloned().ok_or_else(|| bad("an update has no 'o2'"))?;
            if o.contains_key("$v") {
                let diff = match (o.get("$v"), o.get("diff")) {
                    (Some(Bson::Int32(2) | Bson::Int64(2)), Some(Bson::Document(d))) => d,
                    _ => return Err(bad("only $v: 2 update diffs are read")),
                };
                let description = update_description(diff, filter.expanded)?;
                ("update", key, None, Some(description), Some(diff.clone()))
            } else {
                // A whole new document: a replacement.
                ("replace", key, Some(o), None, None)
            }
        }
        _ => ("delete", id_key()?, None, None, None),
    };
    let mut body = Document::new();
    if let Some(full) = full {
        body.insert("fullDocument", full.clone());
    }
    body.insert("ns", ns_doc(db, coll));
    body.insert("documentKey", key.clone());
    if let Some(d) = description {
        body.insert("updateDescription", d);
    }
    Ok(Draft {
        operation_type,
        db: db.to_string(),
        coll: coll.to_string(),
        uuid: uuid_of(op),
        body,
        document_key: Some(key),
        update_diff,
        invalidates_after: false,
    })
}

fn view_created(op: &Document, db: &str, filter: &Filter) -> MongoResult<Option<Draft>> {
    let o = get_doc(op, "o")?;
    let Some(Bson::String(full)) = o.get("_id") else {
        return Err(bad("a view's _id is not a string"));
    };
    let (_, view) = split_ns(full);
    if !filter.wants_coll(db, view) {
        return Ok(None);
    }
    let mut desc = o.clone();
    desc.remove("_id");
    let mut body = Document::new();
    body.insert("ns", ns_doc(db, view));
    body.insert("operationDescription", desc);
    body.insert("nsType", "view");
    Ok(Some(Draft {
        operation_type: "create",
        db: db.to_string(),
        coll: view.to_string(),
        uuid: None,
        body,
        document_key: None,
        update_diff: None,
        invalidates_after: false,
    }))
}

fn command(op: &Document, db: &str, filter: &Filter) -> MongoResult<Option<Draft>> {
    let o = get_doc(op, "o")?;
    let Some((name, target)) = o.iter().next() else {
        return Err(bad("an empty command"));
    };
    let target_coll = match target {
        Bson::String(s) => s.as_str(),
        _ => "",
    };
    let uuid = uuid_of(op);
    let simple =
        |operation_type: &'static str, coll: &str, body: Document, invalidates_after: bool| Draft {
            operation_type,
            db: db.to_string(),
            coll: coll.to_string(),
            uuid: uuid.clone(),
            body,
            document_key: None,
            update_diff: None,
            invalidates_after,
        };
    let without_name = || {
        let mut d = o.clone();
        d.remove(name);
        d
    };
    let draft = match name.as_str() {
        "drop" => {
            if !filter.wants_coll(db, target_coll) {
                return Ok(None);
            }
            let body = bson::doc! {"ns": ns_doc(db, target_coll)};
            simple("drop", target_coll, body, filter.watches(db, target_coll))
        }
        "renameCollection" => {
            let (from_db, from_coll) = split_ns(target_coll);
            let to = o.get_str("to").map_err(|_| bad("a rename has no 'to'"))?;
            let (to_db, to_coll) = split_ns(to);
            if !filter.wants_coll(from_db, from_coll) {
                return Ok(None);
            }
            let mut body =
                bson::doc! {"ns": ns_doc(from_db, from_coll), "to": ns_doc(to_db, to_coll)};
            if filter.expanded {
                let mut desc = bson::doc! {"to": ns_doc(to_db, to_coll)};
                if let Some(Bson::Binary(b)) = o.get("dropTarget") {
                    desc.insert("dropTarget", Bson::Binary(b.clone()));
                }
                body.insert("operationDescription", desc);
            }
            let mut d = simple(
                "rename",
                from_coll,
                body,
                filter.watches(from_db, from_coll),
            );
            d.db = from_db.to_string();
            d
        }
        "dropDatabase" => {
            if !filter.wants_db(db) || matches!(filter.scope, Scope::Collection { .. }) {
                // A collection stream learns of its collection's drop from
                // that collection's own drop entry, written before this one.
                return Ok(None);
            }
            let body = bson::doc! {"ns": {"db": db}};
            simple(
                "dropDatabase",
                "",
                body,
                matches!(filter.scope, Scope::Database { .. }),
            )
        }
        "create" if filter.expanded => {
            if !filter.wants_coll(db, target_coll) {
                return Ok(None);
            }
            let desc = without_name();
            let ns_type = if desc.contains_key("viewOn") {
                "view"
            } else if desc.contains_key("timeseries") {
                "timeseries"
            } else {
                "collection"
            };
            let body = bson::doc! {"ns": ns_doc(db, target_coll), "operationDescription": desc, "nsType": ns_type};
            simple("create", target_coll, body, false)
        }
        "createIndexes" | "commitIndexBuild" if filter.expanded => {
            if !filter.wants_coll(db, target_coll) {
                return Ok(None);
            }
            let indexes = if name == "commitIndexBuild" {
                match o.get("indexes") {
                    Some(Bson::Array(a)) => a.clone(),
                    _ => return Err(bad("commitIndexBuild has no 'indexes'")),
                }
            } else {
                vec![Bson::Document(without_name())]
            };
            let body = bson::doc! {"ns": ns_doc(db, target_coll), "operationDescription": {"indexes": indexes}};
            simple("createIndexes", target_coll, body, false)
        }
        "dropIndexes" if filter.expanded => {
            if !filter.wants_coll(db, target_coll) {
                return Ok(None);
            }
            let spec = match op.get("o2") {
                Some(Bson::Document(d)) => d.clone(),
                _ => bson::doc! {"name": o.get("index").cloned().unwrap_or(Bson::Null)},
            };
            let body = bson::doc! {"ns": ns_doc(db, target_coll), "operationDescription": {"indexes": [spec]}};
            simple("dropIndexes", target_coll, body, false)
        }
        "collMod" if filter.expanded => {
            if !filter.wants_coll(db, target_coll) {
                return Ok(None);
            }
            let mut body =
                bson::doc! {"ns": ns_doc(db, target_coll), "operationDescription": without_name()};
            if let Some(Bson::Document(before)) = op.get("o2") {
                let mut state = Document::new();
                if let Some(c) = before.get("collectionOptions_old") {
                    state.insert("collectionOptions", c.clone());
                }
                if let Some(i) = before.get("indexOptions_old") {
                    state.insert("indexOptions", i.clone());
                }
                body.insert("stateBeforeChange", state);
            }
            simple("modify", target_coll, body, false)
        }
        _ => return Ok(None),
    };
    Ok(Some(draft))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, spec::BinarySubtype};

    fn ts(i: u32) -> Timestamp {
        Timestamp {
            time: 100,
            increment: i,
        }
    }

    fn uuid() -> Binary {
        Binary {
            subtype: BinarySubtype::Uuid,
            bytes: vec![1; 16],
        }
    }

    fn coll_filter() -> Filter {
        Filter {
            scope: Scope::Collection {
                db: "d".into(),
                coll: "c".into(),
            },
            expanded: false,
            system: false,
        }
    }

    fn entry(i: u32, op: &str, ns: &str, o: Document, o2: Option<Document>) -> Document {
        let mut e = doc! {"ts": ts(i), "t": 1_i64, "v": 2, "op": op, "ns": ns, "ui": uuid(), "o": o, "wall": DateTime::from_millis(5)};
        if let Some(o2) = o2 {
            e.insert("o2", o2);
        }
        e
    }

    /// The events of an entry on `d.c` for a stream on it.
    fn on_c(i: u32, op: &str, o: Document, o2: Option<Document>) -> Vec<Event> {
        events(&entry(i, op, "d.c", o, o2), &coll_filter()).unwrap()
    }

    fn strip_id(mut d: Document) -> Document {
        d.remove("_id");
        d
    }

    #[test]
    fn crud_events() {
        let f = coll_filter();
        let ins = on_c(1, "i", doc! {"_id": 1, "a": 1}, Some(doc! {"_id": 1}));
        assert_eq!(ins.len(), 1);
        assert_eq!(
            strip_id(ins[0].doc.clone()),
            doc! {"operationType": "insert", "clusterTime": ts(1), "wallTime": DateTime::from_millis(5),
            "fullDocument": {"_id": 1, "a": 1}, "ns": {"db": "d", "coll": "c"}, "documentKey": {"_id": 1}}
        );
        assert_eq!(
            ins[0].doc.get_document("_id").unwrap(),
            &ins[0].token.to_document()
        );

        let upd = on_c(
            2,
            "u",
            doc! {"$v": 2, "diff": {"u": {"a": 2}, "d": {"b": false}}},
            Some(doc! {"_id": 1}),
        );
        assert_eq!(
            strip_id(upd[0].doc.clone()),
            doc! {"operationType": "update", "clusterTime": ts(2), "wallTime": DateTime::from_millis(5),
            "ns": {"db": "d", "coll": "c"}, "documentKey": {"_id": 1},
            "updateDescription": {"updatedFields": {"a": 2}, "removedFields": ["b"], "truncatedArrays": []}}
        );
        let rep = on_c(3, "u", doc! {"_id": 1, "z": 1}, Some(doc! {"_id": 1}));
        assert_eq!(rep[0].operation_type, "replace");
        assert_eq!(
            rep[0].doc.get_document("fullDocument").unwrap(),
            &doc! {"_id": 1, "z": 1}
        );
        let del = events(&entry(4, "d", "d.c", doc! {"_id": 1}, None), &f).unwrap();
        assert_eq!(del[0].operation_type, "delete");
        assert_eq!(del[0].document_key, Some(doc! {"_id": 1}));
        assert!(!del[0].doc.contains_key("collectionUUID"));
        // Other namespaces, no-ops.
        assert!(events(&entry(5, "i", "d.other", doc! {"_id": 1}, None), &f)
            .unwrap()
            .is_empty());
        assert!(events(&entry(6, "n", "", doc! {"msg": "x"}, None), &f)
            .unwrap()
            .is_empty());
        // Tokens follow the oplog.
        assert!(
            ins[0].token < upd[0].token
                && upd[0].token < rep[0].token
                && rep[0].token < del[0].token
        );
    }

    #[test]
    fn namespaces() {
        let db = Filter {
            scope: Scope::Database { db: "d".into() },
            expanded: false,
            system: false,
        };
        let all = Filter {
            scope: Scope::Cluster,
            expanded: false,
            system: false,
        };
        let ins = |ns: &str| entry(1, "i", ns, doc! {"_id": 1}, None);
        assert_eq!(events(&ins("d.x"), &db).unwrap().len(), 1);
        assert!(events(&ins("e.x"), &db).unwrap().is_empty());
        assert!(events(&ins("d.system.js"), &db).unwrap().is_empty());
        assert_eq!(events(&ins("e.x"), &all).unwrap().len(), 1);
        for internal in ["admin.x", "config.x", "local.x", "config.system.preimages"] {
            assert!(
                events(&ins(internal), &all).unwrap().is_empty(),
                "{internal}"
            );
        }
        let sys = Filter { system: true, ..db };
        assert_eq!(events(&ins("d.system.js"), &sys).unwrap().len(), 1);
    }

    #[test]
    fn drops_and_renames_invalidate_the_collection_stream() {
        let f = coll_filter();
        let drop = events(&entry(7, "c", "d.$cmd", doc! {"drop": "c"}, None), &f).unwrap();
        assert_eq!(
            drop.iter().map(|e| e.operation_type).collect::<Vec<_>>(),
            ["drop", "invalidate"]
        );
        assert!(
            drop[1].invalidates && drop[1].token.from_invalidate && drop[0].token < drop[1].token
        );
        assert_eq!(
            strip_id(drop[1].doc.clone()),
            doc! {"operationType": "invalidate", "clusterTime": ts(7), "wallTime": DateTime::from_millis(5)}
        );
        assert!(
            events(&entry(7, "c", "d.$cmd", doc! {"drop": "other"}, None), &f)
                .unwrap()
                .is_empty()
        );
        let rename = events(&entry(8, "c", "d.$cmd", doc! {"renameCollection": "d.c", "to": "d.n", "stayTemp": false, "dropTarget": false}, None), &f).unwrap();
        assert_eq!(
            rename.iter().map(|e| e.operation_type).collect::<Vec<_>>(),
            ["rename", "invalidate"]
        );
        assert_eq!(
            rename[0].doc.get_document("to").unwrap(),
            &doc! {"db": "d", "coll": "n"}
        );
        // A database stream sees the drop, and is invalidated by dropDatabase.
        let db = Filter {
            scope: Scope::Database { db: "d".into() },
            expanded: false,
            system: false,
        };
        assert_eq!(
            events(&entry(7, "c", "d.$cmd", doc! {"drop": "c"}, None), &db)
                .unwrap()
                .len(),
            1
        );
        let dd = events(
            &entry(9, "c", "d.$cmd", doc! {"dropDatabase": 1}, None),
            &db,
        )
        .unwrap();
        assert_eq!(
            dd.iter().map(|e| e.operation_type).collect::<Vec<_>>(),
            ["dropDatabase", "invalidate"]
        );
        assert_eq!(dd[0].doc.get_document("ns").unwrap(), &doc! {"db": "d"});
        assert!(
            events(&entry(9, "c", "d.$cmd", doc! {"dropDatabase": 1}, None), &f)
                .unwrap()
                .is_empty()
        );
        let all = Filter {
            scope: Scope::Cluster,
            expanded: false,
            system: false,
        };
        assert_eq!(
            events(
                &entry(9, "c", "d.$cmd", doc! {"dropDatabase": 1}, None),
                &all
            )
            .unwrap()
            .len(),
            1
        );
    }

    #[test]
    fn expanded_events() {
        let f = Filter {
            expanded: true,
            ..coll_filter()
        };
        let plain = coll_filter();
        let create = entry(
            1,
            "c",
            "d.$cmd",
            doc! {"create": "c", "idIndex": {"v": 2, "key": {"_id": 1}, "name": "_id_"}},
            None,
        );
        assert!(events(&create, &plain).unwrap().is_empty());
        let ev = events(&create, &f).unwrap();
        assert_eq!(ev[0].operation_type, "create");
        assert_eq!(ev[0].doc.get_str("nsType").unwrap(), "collection");
        assert_eq!(ev[0].doc.get("collectionUUID"), Some(&Bson::Binary(uuid())));
        assert!(ev[0]
            .doc
            .get_document("operationDescription")
            .unwrap()
            .contains_key("idIndex"));
        let ci = entry(
            2,
            "c",
            "d.$cmd",
            doc! {"createIndexes": "c", "v": 2, "key": {"x": 1}, "name": "x_1"},
            None,
        );
        let ev = events(&ci, &f).unwrap();
        assert_eq!(ev[0].operation_type, "createIndexes");
        assert_eq!(
            ev[0].doc.get_document("operationDescription").unwrap(),
            &doc! {"indexes": [{"v": 2, "key": {"x": 1}, "name": "x_1"}]}
        );
        let di = entry(
            3,
            "c",
            "d.$cmd",
            doc! {"dropIndexes": "c", "index": "x_1"},
            Some(doc! {"v": 2, "key": {"x": 1}, "name": "x_1"}),
        );
        assert_eq!(events(&di, &f).unwrap()[0].operation_type, "dropIndexes");
        let cm = entry(
            4,
            "c",
            "d.$cmd",
            doc! {"collMod": "c", "validationLevel": "off"},
            None,
        );
        let ev = events(&cm, &f).unwrap();
        assert_eq!(ev[0].operation_type, "modify");
        assert_eq!(
            ev[0].doc.get_document("operationDescription").unwrap(),
            &doc! {"validationLevel": "off"}
        );
        let rn = entry(
            5,
            "c",
            "d.$cmd",
            doc! {"renameCollection": "d.c", "to": "d.foo", "stayTemp": false, "dropTarget": uuid()},
            None,
        );
        let ev = events(&rn, &f).unwrap();
        assert_eq!(
            ev[0].doc.get_document("operationDescription").unwrap(),
            &doc! {"to": {"db": "d", "coll": "foo"}, "dropTarget": uuid()}
        );
        let view = entry(
            6,
            "i",
            "d.system.views",
            doc! {"_id": "d.c", "viewOn": "src", "pipeline": []},
            None,
        );
        let ev = events(&view, &f).unwrap();
        assert_eq!(ev[0].operation_type, "create");
        assert_eq!(ev[0].doc.get_str("nsType").unwrap(), "view");
        let ins = events(&entry(7, "i", "d.c", doc! {"_id": 1}, None), &f).unwrap();
        assert_eq!(
            ins[0].doc.get("collectionUUID"),
            Some(&Bson::Binary(uuid()))
        );
    }

    #[test]
    fn transactions_in_commit_order() {
        let f = Filter {
            scope: Scope::Database { db: "d".into() },
            expanded: false,
            system: false,
        };
        let lsid = doc! {"id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![9; 16] }};
        let e = doc! {
            "ts": ts(10), "t": 1_i64, "op": "c", "ns": "admin.$cmd", "wall": DateTime::from_millis(1),
            "o": {"applyOps": [
                {"op": "i", "ns": "d.c", "ui": uuid(), "o": {"_id": 1}, "o2": {"_id": 1}},
                {"op": "i", "ns": "other.c", "ui": uuid(), "o": {"_id": 2}},
                {"op": "u", "ns": "d.c", "ui": uuid(), "o": {"$v": 2, "diff": {"u": {"a": 1}}}, "o2": {"_id": 1}},
                {"op": "d", "ns": "d.c", "ui": uuid(), "o": {"_id": 1}},
            ]},
            "lsid": lsid.clone(), "txnNumber": 4_i64, "prevOpTime": {"ts": Timestamp { time: 0, increment: 0 }, "t": -1_i64},
        };
        let ev = events(&e, &f).unwrap();
        assert_eq!(
            ev.iter().map(|e| e.operation_type).collect::<Vec<_>>(),
            ["insert", "update", "delete"]
        );
        assert_eq!(
            ev.iter().map(|e| e.token.txn_op_index).collect::<Vec<_>>(),
            [0, 2, 3]
        );
        for w in ev.windows(2) {
            assert!(w[0].token.to_hex() < w[1].token.to_hex());
        }
        for x in &ev {
            assert_eq!(x.doc.get_document("lsid").unwrap(), &lsid);
            assert_eq!(x.doc.get_i64("txnNumber").unwrap(), 4);
            assert_eq!(x.doc.get_timestamp("clusterTime").unwrap(), ts(10));
        }
    }

    #[test]
    fn malformed_entries_are_errors_not_panics() {
        let f = coll_filter();
        for bad in [
            doc! {},
            doc! {"ts": ts(1)},
            doc! {"ts": ts(1), "op": "i", "ns": "d.c"},
            doc! {"ts": ts(1), "op": "u", "ns": "d.c", "o": {"$v": 1, "$set": {"a": 1}}, "o2": {"_id": 1}},
            doc! {"ts": ts(1), "op": "u", "ns": "d.c", "o": {"$v": 2, "diff": {"u": {"a": 1}}}},
            doc! {"ts": ts(1), "op": "c", "ns": "admin.$cmd", "o": {"applyOps": 1}},
        ] {
            assert!(events(&bad, &f).is_err(), "{bad:?}");
        }
    }
}
