//! `dropIndexes`: by name, by key pattern, a list of names, or `"*"` (every
//! index but `_id_`). The `_id` index is refused as mongod refuses it, and
//! so is a clustered collection's clustered index (5979800), which mongod
//! does not count in `nIndexesWas`.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, Document, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct DropIndexes {
    db: String,
    coll: String,
    target: Target,
}

enum Target {
    All,
    Names(Vec<String>),
    Key(Document),
}

impl Command for DropIndexes {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        // A write concern a standalone server cannot satisfy fails the command.
        crate::fields::write::write_concern(req.name, req.body)?;
        let n = req.name;
        let mut coll = None;
        let mut target = None;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "dropIndexes" | "deleteIndexes" => {
                    coll = Some(fields::collection_name(n, v)?.to_string())
                }
                "index" => {
                    target = Some(match v {
                        RawBsonRef::String("*") => Target::All,
                        RawBsonRef::String(s) => Target::Names(vec![s.to_string()]),
                        RawBsonRef::Document(d) => Target::Key(fields::to_document(d)?),
                        RawBsonRef::Array(a) => {
                            let mut names = Vec::new();
                            for x in a {
                                match x.map_err(crate::request::invalid_bson)? {
                                    RawBsonRef::String(s) => names.push(s.to_string()),
                                    other => {
                                        return Err(fields::wrong_type(n, "index", other, "string"))
                                    }
                                }
                            }
                            Target::Names(names)
                        }
                        other => {
                            return Err(fields::wrong_type(
                                n,
                                "index",
                                other,
                                "[string, object, array]",
                            ))
                        }
                    })
                }
                other => fields::check_known(n, other, &[])?,
            }
        }
        let coll = coll.ok_or_else(|| fields::missing_field(n, "dropIndexes"))?;
        let target = target.ok_or_else(|| fields::missing_field(n, "index"))?;
        Ok(DropIndexes {
            db: req.db.clone(),
            coll,
            target,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let storage = &ctx.state.storage;
        let Some(coll) = storage.collection(&self.db, &self.coll) else {
            return Err(MongoError::new(
                ErrorCode::NamespaceNotFound,
                format!("ns not found {}.{}", self.db, self.coll),
            ));
        };
        let indexes = coll.indexes();
        let clustered = crate::namespaces::clustered::Clustered::of_options(&coll.options());
        if let Some(c) = &clustered {
            let hits = match &self.target {
                Target::All => false,
                Target::Names(names) => names.iter().any(|n| n == c.name()),
                Target::Key(key) => crate::namespaces::clustered::Clustered::matches_key(key),
            };
            if hits {
                return Err(crate::namespaces::clustered::cannot_drop());
            }
        }
        // The clustered index is the collection itself, not one of its indexes.
        let was = indexes.len() as i32 + i32::from(clustered.is_none());
        let all = matches!(self.target, Target::All);
        let cannot_drop_id = || MongoError::new(ErrorCode::InvalidOptions, "cannot drop _id index");
        let names: Vec<String> = match self.target {
            Target::All => indexes.iter().map(|i| i.spec.name.clone()).collect(),
            Target::Names(names) => {
                // All or nothing: check every name before dropping any.
                for name in &names {
                    if name == "_id_" && clustered.is_none() {
                        return Err(cannot_drop_id());
                    }
                    if !indexes.iter().any(|i| &i.spec.name == name) {
                        return Err(MongoError::new(
                            ErrorCode::IndexNotFound,
                            format!("index not found with name [{name}]"),
                        ));
                    }
                }
                names
            }
            Target::Key(key) => {
                if key.len() == 1 && key.contains_key("_id") {
                    return Err(cannot_drop_id());
                }
                // A text index is stored as `{_fts: "text", _ftsx: 1}`; the
                // pattern it was created with names it too.
                let stored = match bisondb_query::text::is_text_key(&key) {
                    true => bisondb_query::text::fix_spec(&doc! {"key": key.clone()})
                        .map_or_else(|_| key.clone(), |(k, _)| k),
                    false => key.clone(),
                };
                let probe = bisondb_storage::IndexSpec {
                    name: String::new(),
                    key: stored.clone(),
                    unique: false,
                    sparse: false,
                    partial_filter: None,
                    expire_after_seconds: None,
                    hidden: false,
                    background: None,
                    collation: None,
                    type_options: bson::Document::new(),
                };
                let matching: Vec<String> = indexes
                    .iter()
                    .filter(|i| i.spec.same_key(&probe) && i.spec.key.keys().eq(stored.keys()))
                    .map(|i| i.spec.name.clone())
                    .collect();
                match matching.as_slice() {
                    [] => {
                        return Err(MongoError::new(
                            ErrorCode::IndexNotFound,
                            format!(
                                "can't find index with key: {}",
                                bisondb_storage::error::shell_format_document(&key)
                            ),
                        ))
                    }
                    [_] => matching,
                    _ => {
                        return Err(MongoError::new(
                            ErrorCode::AmbiguousIndexKeyPattern,
                            format!(
                                "{} indexes found for key: {}, identify by name instead. Conflicting indexes: {}",
                                matching.len(),
                                bisondb_storage::error::shell_format_document(&key),
                                matching.join(", ")
                            ),
                        ))
                    }
                }
            }
        };
        for name in &names {
            storage.drop_index(&self.db, &self.coll, name)?;
        }
        let mut out = doc! {"nIndexesWas": was};
        if all {
            out.insert("msg", "non-_id indexes dropped for collection");
        }
        reply::ok(out)
    }
}
