//! `$out` and `$merge`: parsed here, carried out by the server. The pipeline
//! produces the documents to write; [`OutputStage::merge_one`] decides, per
//! document, what `$merge` does with it given the matching target document.

use super::stages::lookup::substitute_stages;
use super::Pipeline;
use crate::expr::value::type_name;
use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{Bson, Document};

/// What `$merge` does when a target document matches.
#[derive(Debug, Clone, PartialEq)]
pub enum WhenMatched {
    Replace,
    KeepExisting,
    Merge,
    Fail,
    /// An update pipeline run on the existing document, with `$$new` bound
    /// to the incoming one.
    Pipeline(Vec<Document>),
}

/// What `$merge` does when no target document matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenNotMatched {
    Insert,
    Discard,
    Fail,
}

/// A parsed `$out` or `$merge`.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputStage {
    /// Replace the target collection with the results.
    Out { db: Option<String>, coll: String },
    /// Merge the results into the target collection, matching on `on`.
    Merge {
        db: Option<String>,
        coll: String,
        on: Vec<String>,
        when_matched: WhenMatched,
        when_not_matched: WhenNotMatched,
    },
}

/// The outcome of `$merge` for one document.
#[derive(Debug, Clone, PartialEq)]
pub enum MergeAction {
    Insert(Document),
    /// Replace the matched target document with this one.
    Replace(Document),
    /// Leave the target as it is.
    Keep,
    /// Drop the incoming document.
    Discard,
}

fn target(arg: &Bson, stage: &str) -> MongoResult<(Option<String>, String)> {
    match arg {
        Bson::String(s) if !s.is_empty() => Ok((None, s.clone())),
        Bson::Document(d) => {
            let mut db = None;
            let mut coll = None;
            for (k, v) in d {
                match (k.as_str(), v) {
                    ("db", Bson::String(s)) => db = Some(s.clone()),
                    ("coll", Bson::String(s)) => coll = Some(s.clone()),
                    ("timeseries", _) if stage == "$out" => {
                        return Err(MongoError::new(
                            ErrorCode::NotImplemented,
                            "$out to a time series collection is not supported by BisonDB yet",
                        ))
                    }
                    (other, _) => {
                        return Err(MongoError::location(
                            40415,
                            format!("BSON field '{stage}.{other}' is an unknown field."),
                        ))
                    }
                }
            }
            let coll = coll.ok_or_else(|| {
                MongoError::location(
                    40414,
                    format!("BSON field '{stage}.coll' is missing but a required field"),
                )
            })?;
            Ok((db, coll))
        }
        other => Err(MongoError::location(
            if stage == "$out" { 16990 } else { 51178 },
            format!(
                "{stage} only supports a string or object argument, but found {}",
                type_name(other)
            ),
        )),
    }
}

impl OutputStage {
    pub(crate) fn parse(name: &str, arg: &Bson) -> MongoResult<OutputStage> {
        if name == "$out" {
            let (db, coll) = target(arg, name)?;
            return Ok(OutputStage::Out { db, coll });
        }
        let spec = match arg {
            Bson::String(_) => {
                let (db, coll) = target(arg, name)?;
                return Ok(OutputStage::Merge {
                    db,
                    coll,
                    on: vec!["_id".into()],
                    when_matched: WhenMatched::Merge,
                    when_not_matched: WhenNotMatched::Insert,
                });
            }
            Bson::Document(d) => d,
            other => {
                return Err(MongoError::location(
                    51182,
                    format!(
                        "$merge only supports a string or object argument, not {}",
                        type_name(other)
                    ),
                ))
            }
        };
        let mut into = None;
        let mut on = vec!["_id".to_string()];
        let mut when_matched = WhenMatched::Merge;
        let mut when_not_matched = WhenNotMatched::Insert;
        for (k, v) in spec {
            match k.as_str() {
                "into" => into = Some(target(v, name)?),
                "on" => {
                    on = match v {
                        Bson::String(s) => vec![s.clone()],
                        Bson::Array(a) if !a.is_empty() => a
                            .iter()
                            .map(|x| match x {
                                Bson::String(s) => Ok(s.clone()),
                                _ => Err(MongoError::location(51134, "$merge 'on' array elements must be strings")),
                            })
                            .collect::<MongoResult<_>>()?,
                        _ => return Err(MongoError::location(51186, "$merge 'on' field must be a string or an array of strings")),
                    }
                }
                "whenMatched" => {
                    when_matched = match v {
                        Bson::String(s) => match s.as_str() {
                            "replace" => WhenMatched::Replace,
                            "keepExisting" => WhenMatched::KeepExisting,
                            "merge" => WhenMatched::Merge,
                            "fail" => WhenMatched::Fail,
                            "pipeline" => return Err(MongoError::bad_value("Enumeration value 'pipeline' for field 'whenMatched' is not a valid value.")),
                            other => {
                                return Err(MongoError::bad_value(format!(
                                    "Enumeration value '{other}' for field '$merge.whenMatched' is not a valid value."
                                )))
                            }
                        },
                        Bson::Array(stages) => {
                            let mut docs = Vec::with_capacity(stages.len());
                            for st in stages {
                                match st {
                                    Bson::Document(d) => docs.push(d.clone()),
                                    _ => return Err(MongoError::failed_to_parse("$merge 'whenMatched' pipeline must contain objects")),
                                }
                            }
                            let probe = substitute_stages(&docs, &[("new".to_string(), Some(Bson::Null))]);
                            crate::update::UpdateSpec::parse_pipeline(&probe)?;
                            WhenMatched::Pipeline(docs)
                        }
                        other => {
                            return Err(MongoError::type_mismatch(format!(
                                "BSON field '$merge.whenMatched' is the wrong type '{}'",
                                type_name(other)
                            )))
                        }
                    }
                }
                "whenNotMatched" => {
                    when_not_matched = match v {
                        Bson::String(s) if s == "insert" => WhenNotMatched::Insert,
                        Bson::String(s) if s == "discard" => WhenNotMatched::Discard,
                        Bson::String(s) if s == "fail" => WhenNotMatched::Fail,
                        other => {
                            return Err(MongoError::bad_value(format!(
                                "Enumeration value '{other}' for field '$merge.whenNotMatched' is not a valid value."
                            )))
                        }
                    }
                }
                "let" => {
                    return Err(MongoError::new(
                        ErrorCode::NotImplemented,
                        "$merge with 'let' variables is not supported by BisonDB yet",
                    ))
                }
                other => return Err(MongoError::location(40415, format!("BSON field '$merge.{other}' is an unknown field."))),
            }
        }
        let (db, coll) = into.ok_or_else(|| {
            MongoError::location(
                40414,
                "BSON field '$merge.into' is missing but a required field",
            )
        })?;
        Ok(OutputStage::Merge {
            db,
            coll,
            on,
            when_matched,
            when_not_matched,
        })
    }

    /// For `$merge`: what to do with `incoming` given the target document
    /// matching it on the `on` fields (if any). `$out` always inserts.
    pub fn merge_one(
        &self,
        existing: Option<&Document>,
        incoming: Document,
    ) -> MongoResult<MergeAction> {
        let OutputStage::Merge {
            when_matched,
            when_not_matched,
            ..
        } = self
        else {
            return Ok(MergeAction::Insert(incoming));
        };
        let Some(existing) = existing else {
            return match when_not_matched {
                WhenNotMatched::Insert => Ok(MergeAction::Insert(incoming)),
                WhenNotMatched::Discard => Ok(MergeAction::Discard),
                WhenNotMatched::Fail => Err(MongoError::location(
                    13113,
                    "$merge could not find a matching document in the target collection for at least one document in the source collection",
                )),
            };
        };
        match when_matched {
            WhenMatched::Replace => {
                // The target keeps its _id.
                let mut out = Document::new();
                if let Some(id) = existing.get("_id") {
                    out.insert("_id", id.clone());
                }
                for (k, v) in incoming {
                    if k != "_id" {
                        out.insert(k, v);
                    }
                }
                Ok(MergeAction::Replace(out))
            }
            WhenMatched::KeepExisting => Ok(MergeAction::Keep),
            WhenMatched::Merge => {
                let mut out = existing.clone();
                for (k, v) in incoming {
                    if k != "_id" {
                        out.insert(k, v);
                    }
                }
                Ok(MergeAction::Replace(out))
            }
            WhenMatched::Fail => Err(MongoError::new(
                ErrorCode::DuplicateKey,
                "$merge failed due to matching document in the target collection (whenMatched: 'fail')",
            )),
            WhenMatched::Pipeline(stages) => {
                let stages = substitute_stages(stages, &[("new".to_string(), Some(Bson::Document(incoming)))]);
                let spec = crate::update::UpdateSpec::parse_pipeline(&stages)?;
                let mut out = existing.clone();
                spec.apply(&mut out, false)?;
                Ok(MergeAction::Replace(out))
            }
        }
    }
}

impl Pipeline {
    /// The trailing `$out`/`$merge`, if any; [`Pipeline::run`] produces the
    /// documents it should write.
    pub fn output(&self) -> Option<&OutputStage> {
        self.output.as_ref()
    }
}
