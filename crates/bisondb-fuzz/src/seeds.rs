//! Seed inputs: real messages, filters, expressions, pipelines and updates of
//! the kinds drivers send, encoded as each target reads them. The stable driver
//! starts from these; `bisondb-fuzz seeds DIR` writes them for cargo-fuzz.

use bisondb_wire::{encode_op_compressed, encode_op_msg_with_sequences, msg_flags, Compressor};
use bson::{doc, Bson, Document, RawDocumentBuf};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::gen::regex;
use crate::targets::RAW_MODE;

fn bytes_of(d: &Document) -> Vec<u8> {
    RawDocumentBuf::try_from(d)
        .map(|r| r.into_bytes())
        .unwrap_or_default()
}

/// `0xFF` + the document: a target's raw mode.
fn raw(d: Document) -> Vec<u8> {
    let mut out = vec![RAW_MODE];
    out.extend(bytes_of(&d));
    out
}

/// Random choice streams (generated mode), the same on every run.
fn generated(n: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let len = rng.random_range(1..200);
            let mut v: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            v[0] = 0;
            v
        })
        .collect()
}

fn sample_docs() -> Bson {
    Bson::Array(vec![
        Bson::Document(doc! {"_id": 1, "a": 1, "b": "x", "arr": [1, 2, 3]}),
        Bson::Document(doc! {"_id": 2, "a": {"b": [1, {"c": 2}]}, "tags": ["p", "q"]}),
        Bson::Document(doc! {"_id": 3, "a": null, "x": 2.5, "n": -7_i64}),
        Bson::Document(doc! {"_id": 4, "a": [ {"b": 1}, {"b": 2} ], "c": "2024-01-01"}),
    ])
}

pub fn wire() -> Vec<Vec<u8>> {
    let bodies = [
        doc! {"hello": 1, "$db": "admin", "client": {"driver": {"name": "x", "version": "1"}}},
        doc! {"find": "c", "filter": {"a": {"$gt": 1}}, "sort": {"a": -1}, "limit": 5, "$db": "test"},
        doc! {"aggregate": "c", "pipeline": [{"$match": {"a": 1}}, {"$group": {"_id": "$b", "n": {"$sum": 1}}}], "cursor": {}, "$db": "test"},
        doc! {"insert": "c", "ordered": true, "$db": "test"},
        doc! {"ping": 1, "$db": "admin", "lsid": {"id": bson::Binary{subtype: bson::spec::BinarySubtype::Uuid, bytes: vec![0; 16]}}},
    ];
    let docs = [doc! {"_id": 1, "a": [1, 2]}, doc! {"_id": 2, "s": "t"}];
    let raw_docs: Vec<RawDocumentBuf> = docs
        .iter()
        .filter_map(|d| RawDocumentBuf::try_from(d).ok())
        .collect();
    let refs: Vec<&bson::RawDocument> = raw_docs.iter().map(|d| d.as_ref()).collect();
    let mut out = Vec::new();
    for (i, b) in bodies.iter().enumerate() {
        let Ok(body) = RawDocumentBuf::try_from(b) else {
            continue;
        };
        let seqs: Vec<(&str, &[&bson::RawDocument])> = if b.contains_key("insert") {
            vec![("documents", refs.as_slice())]
        } else {
            Vec::new()
        };
        for flags in [0, msg_flags::CHECKSUM_PRESENT] {
            let Ok(m) = encode_op_msg_with_sequences(i as i32, 0, flags, &body, &seqs, None) else {
                continue;
            };
            out.push(m.to_vec());
            for c in [
                Compressor::Noop,
                Compressor::Snappy,
                Compressor::Zlib,
                Compressor::Zstd,
            ] {
                if let Ok(z) = encode_op_compressed(&m, c) {
                    out.push(z.to_vec());
                }
            }
        }
    }
    // A legacy OP_QUERY handshake on admin.$cmd.
    let q = bytes_of(&doc! {"isMaster": 1, "helloOk": true});
    let mut msg = Vec::new();
    let len = 16 + 4 + "admin.$cmd\0".len() + 8 + q.len();
    msg.extend((len as i32).to_le_bytes());
    msg.extend(9_i32.to_le_bytes());
    msg.extend(0_i32.to_le_bytes());
    msg.extend(2004_i32.to_le_bytes());
    msg.extend(0_u32.to_le_bytes());
    msg.extend(b"admin.$cmd\0");
    msg.extend(0_i32.to_le_bytes());
    msg.extend((-1_i32).to_le_bytes());
    msg.extend(&q);
    out.push(msg.clone());
    if let Ok(z) = encode_op_compressed(&msg, Compressor::Zlib) {
        out.push(z.to_vec());
    }
    out
}

pub fn bson() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = [
        doc! {},
        doc! {"a": 1, "b": "s", "c": 1.5, "d": true, "e": null},
        doc! {"a": {"b": [1, {"c": [[]]}]}, "r": regex("^a", "i")},
        doc! {"t": bson::Timestamp{time: 1, increment: 2}, "dt": bson::DateTime::from_millis(0), "o": bson::oid::ObjectId::from_bytes([1; 12])},
        doc! {"code": Bson::JavaScriptCodeWithScope(bson::JavaScriptCodeWithScope{code: "x".into(), scope: doc!{"x": 1}}), "dec": "1.5".parse::<bson::Decimal128>().unwrap_or(bson::Decimal128::from_bytes([0; 16]))},
        doc! {"bin": bson::Binary{subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1, 2, 3]}, "min": Bson::MinKey, "max": Bson::MaxKey, "u": Bson::Undefined, "sym": Bson::Symbol("s".into())},
    ]
    .iter()
    .map(bytes_of)
    .collect();
    out.extend(generated(16, 1));
    out
}

pub fn command() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = [
        doc! {"find": "c", "filter": {"a": {"$in": [1, 2]}}, "projection": {"a": 1}, "sort": {"b": 1}, "skip": 1, "limit": 2, "batchSize": 10, "maxTimeMS": 100, "$db": "test"},
        doc! {"aggregate": "c", "pipeline": [{"$match": {"a": {"$gt": 0}}}, {"$sort": {"a": 1}}, {"$limit": 3}], "cursor": {"batchSize": 2}, "allowDiskUse": true, "$db": "test"},
        doc! {"update": "c", "updates": [{"q": {"a": 1}, "u": {"$set": {"b.$[x]": 2}}, "arrayFilters": [{"x": {"$gt": 1}}], "multi": true, "upsert": false}], "ordered": false, "$db": "test"},
        doc! {"delete": "c", "deletes": [{"q": {"a": {"$exists": true}}, "limit": 0}], "$db": "test"},
        doc! {"insert": "c", "documents": [{"_id": 1}], "writeConcern": {"w": 1}, "$db": "test"},
        doc! {"createIndexes": "c", "indexes": [{"key": {"a": 1, "b": -1}, "name": "a_1_b_-1", "unique": true, "partialFilterExpression": {"a": {"$gt": 5}}}], "$db": "test"},
        doc! {"distinct": "c", "key": "a.b", "query": {"x": 1}, "collation": {"locale": "fr", "strength": 1}, "$db": "test"},
        doc! {"count": "c", "query": {"a": 1}, "limit": 10, "skip": 1, "hint": {"a": 1}, "$db": "test"},
        doc! {"findAndModify": "c", "query": {"a": 1}, "update": [{"$set": {"b": "$a"}}], "new": true, "upsert": true, "fields": {"b": 1}, "$db": "test"},
        doc! {"explain": {"find": "c", "filter": {"a": 1}}, "verbosity": "executionStats", "$db": "test"},
        doc! {"getMore": 12345_i64, "collection": "c", "batchSize": 5, "maxTimeMS": 10, "$db": "test"},
        doc! {"create": "v", "viewOn": "c", "pipeline": [{"$project": {"a": 1}}], "$db": "test"},
        doc! {"create": "ts", "timeseries": {"timeField": "t", "metaField": "m", "granularity": "hours"}, "$db": "test"},
        doc! {"collMod": "c", "validator": {"$jsonSchema": {"required": ["a"]}}, "validationLevel": "moderate", "$db": "test"},
        doc! {"bulkWrite": 1, "ops": [{"insert": 0, "document": {"a": 1}}, {"update": 0, "filter": {}, "updateMods": {"$inc": {"a": 1}}}], "nsInfo": [{"ns": "test.c"}], "$db": "admin"},
        doc! {"mapReduce": "c", "map": "function(){emit(this.a, 1)}", "reduce": "function(k, v){return Array.sum(v)}", "out": {"inline": 1}, "$db": "test"},
        doc! {"hello": 1, "client": {"driver": {"name": "n", "version": "1"}, "os": {"type": "Linux"}}, "compression": ["zstd"], "saslSupportedMechs": "admin.u", "$db": "admin"},
        doc! {"createUser": "u", "pwd": "p", "roles": [{"role": "read", "db": "test"}], "$db": "test"},
        doc! {"validate": "c", "full": true, "$db": "test"},
        doc! {"renameCollection": "test.c", "to": "test.d", "dropTarget": true, "$db": "admin"},
    ]
    .into_iter()
    .map(raw)
    .collect();
    out.extend(generated(32, 2));
    out
}

pub fn matcher() -> Vec<Vec<u8>> {
    let filters = [
        doc! {"a": 1},
        doc! {"a": {"$gt": 0, "$lt": 10}},
        doc! {"a.b": {"$elemMatch": {"c": {"$gte": 2}}}},
        doc! {"$or": [{"a": null}, {"b": {"$regex": "^x", "$options": "i"}}]},
        doc! {"arr": {"$all": [1, 2], "$size": 3}},
        doc! {"tags": {"$in": ["p", regex("q", "")]}},
        doc! {"$expr": {"$gt": ["$a", "$x"]}},
        doc! {"a": {"$not": {"$type": "string"}}, "n": {"$mod": [7, 0]}},
        doc! {"$jsonSchema": {"bsonType": "object", "required": ["a"], "properties": {"a": {"bsonType": "int", "minimum": 0}}}},
        doc! {"a": {"$bitsAllSet": [0, 1]}, "x": {"$exists": true}},
        doc! {"loc": {"$geoWithin": {"$box": [[0, 0], [1, 1]]}}},
        doc! {"$nor": [{"a": {"$eq": [ {"b": 1}, {"b": 2} ]}}], "_id": {"$nin": [9]}},
    ];
    let mut out: Vec<Vec<u8>> = filters
        .into_iter()
        .map(|f| raw(doc! {"filter": f, "docs": sample_docs()}))
        .collect();
    out.extend(generated(32, 3));
    out
}

pub fn expr() -> Vec<Vec<u8>> {
    let exprs = [
        doc! {"$add": ["$a", 1, "$x"]},
        doc! {"$cond": {"if": {"$gt": ["$a", 0]}, "then": "$b", "else": {"$literal": "$x"}}},
        doc! {"$map": {"input": "$arr", "as": "v", "in": {"$multiply": ["$$v", 2]}}},
        doc! {"$reduce": {"input": "$arr", "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}},
        doc! {"$dateToString": {"date": "$$NOW", "format": "%Y-%m-%d", "timezone": "Europe/Paris"}},
        doc! {"$dateAdd": {"startDate": bson::DateTime::from_millis(0), "unit": "month", "amount": 13}},
        doc! {"$regexFindAll": {"input": "$b", "regex": "(a)|b"}},
        doc! {"$substrCP": ["$b", 0, 3]},
        doc! {"$convert": {"input": "$b", "to": "int", "onError": null}},
        doc! {"$switch": {"branches": [{"case": {"$eq": ["$a", 1]}, "then": "one"}], "default": "other"}},
        doc! {"$sortArray": {"input": "$arr", "sortBy": -1}},
        doc! {"$let": {"vars": {"x": "$a"}, "in": {"$pow": ["$$x", 2]}}},
        doc! {"$zip": {"inputs": ["$arr", "$tags"], "useLongestLength": true, "defaults": [0, "z"]}},
        doc! {"$setField": {"field": "f", "input": "$$ROOT", "value": 1}},
        doc! {"$range": [0, 10, 3]},
        doc! {"$toHashedIndexKey": "$a"},
    ];
    let mut out: Vec<Vec<u8>> = exprs
        .into_iter()
        .map(|e| {
            raw(doc! {"expr": e, "doc": {"_id": 1, "a": 2, "b": "abc", "x": 1.5, "arr": [3, 1, 2], "tags": ["p", "q"]}})
        })
        .collect();
    out.extend(generated(32, 4));
    out
}

pub fn pipeline() -> Vec<Vec<u8>> {
    let pipelines = [
        vec![
            doc! {"$match": {"a": {"$exists": true}}},
            doc! {"$group": {"_id": "$b", "n": {"$sum": 1}, "all": {"$push": "$$ROOT"}}},
        ],
        vec![
            doc! {"$unwind": {"path": "$arr", "includeArrayIndex": "i", "preserveNullAndEmptyArrays": true}},
            doc! {"$sort": {"arr": -1, "_id": 1}},
        ],
        vec![
            doc! {"$bucket": {"groupBy": "$a", "boundaries": [0, 2, 10], "default": "other", "output": {"c": {"$count": {}}}}},
        ],
        vec![doc! {"$bucketAuto": {"groupBy": "$_id", "buckets": 3, "granularity": "R5"}}],
        vec![
            doc! {"$setWindowFields": {"partitionBy": "$b", "sortBy": {"_id": 1}, "output": {"s": {"$sum": "$a", "window": {"documents": ["unbounded", "current"]}}}}},
        ],
        vec![doc! {"$densify": {"field": "_id", "range": {"step": 1, "bounds": "full"}}}],
        vec![doc! {"$fill": {"sortBy": {"_id": 1}, "output": {"a": {"method": "linear"}}}}],
        vec![doc! {"$facet": {"x": [{"$count": "n"}], "y": [{"$sortByCount": "$b"}]}}],
        vec![
            doc! {"$project": {"a": 1, "d": {"$add": ["$a", 1]}}},
            doc! {"$skip": 1},
            doc! {"$limit": 2},
        ],
        vec![
            doc! {"$replaceRoot": {"newRoot": {"$mergeObjects": [{"z": 0}, "$$ROOT"]}}},
            doc! {"$unset": ["z"]},
        ],
        vec![doc! {"$redact": {"$cond": [{"$eq": ["$a", 1]}, "$$PRUNE", "$$DESCEND"]}}],
        vec![
            doc! {"$group": {"_id": null, "top": {"$topN": {"n": 2, "sortBy": {"a": 1}, "output": "$_id"}}, "p": {"$percentile": {"input": "$a", "p": [0.5], "method": "approximate"}}}},
        ],
        vec![
            doc! {"$documents": [{"a": 1}, {"a": 2}]},
            doc! {"$count": "n"},
        ],
    ];
    let mut out: Vec<Vec<u8>> = pipelines
        .into_iter()
        .map(|p| {
            let p: Vec<Bson> = p.into_iter().map(Bson::Document).collect();
            raw(doc! {"pipeline": p, "docs": sample_docs()})
        })
        .collect();
    out.extend(generated(32, 5));
    out
}

pub fn update() -> Vec<Vec<u8>> {
    let cases = [
        doc! {"u": {"$set": {"a.b": 1}, "$inc": {"n": 2}}, "doc": {"_id": 1, "a": {"b": 0}, "n": 1}},
        doc! {"u": {"$push": {"arr": {"$each": [4, 5], "$slice": -3, "$sort": 1, "$position": 0}}}, "doc": {"_id": 1, "arr": [3, 1]}},
        doc! {"u": {"$set": {"arr.$[x]": 0}}, "arrayFilters": [{"x": {"$gt": 1}}], "doc": {"_id": 1, "arr": [1, 2, 3]}},
        doc! {"u": {"$set": {"arr.$": 9}}, "q": {"arr": 2}, "doc": {"_id": 1, "arr": [1, 2, 3]}},
        doc! {"u": {"$pull": {"arr": {"$gte": 2}}, "$unset": {"b": ""}}, "doc": {"_id": 1, "arr": [1, 2, 3], "b": 1}},
        doc! {"u": {"$rename": {"a": "c"}, "$currentDate": {"d": {"$type": "timestamp"}}}, "doc": {"_id": 1, "a": 1}},
        doc! {"u": {"$bit": {"n": {"and": 5}}, "$mul": {"x": 2}, "$min": {"m": 0}}, "doc": {"_id": 1, "n": 7, "x": 1.5}},
        doc! {"u": {"$setOnInsert": {"s": 1}, "$addToSet": {"tags": {"$each": ["a", "b"]}}}, "upsert": true, "doc": {"_id": 1}},
        doc! {"u": [{"$set": {"t": {"$add": ["$n", 1]}}}, {"$unset": "n"}], "doc": {"_id": 1, "n": 1}},
        doc! {"u": {"a": 1, "b": {"c": 2}}, "doc": {"_id": 1, "z": 1}},
        doc! {"u": {"$pop": {"arr": -1}, "$pullAll": {"tags": ["p"]}}, "doc": {"_id": 1, "arr": [1, 2], "tags": ["p", "q"]}},
    ];
    let mut out: Vec<Vec<u8>> = cases.into_iter().map(raw).collect();
    out.extend(generated(32, 6));
    out
}
