//! `$out` and `$merge`: parsed here, carried out by the server. The pipeline
//! produces the documents to write; [`OutputStage::merge_one`] decides, per
//! document, what `$merge` does with it given the matching target document.

use super::stages::lookup::substitute_stages;
use super::stages::{missing_field, unknown_field};
use super::Pipeline;
use crate::expr::{Expr, Vars};
use crate::value::type_name;
use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{Bson, Document};

/// What `$merge` does when a target document matches.
#[derive(Debug, Clone, PartialEq)]
pub enum WhenMatched {
    Replace,
    KeepExisting,
    Merge,
    Fail,
    /// An update pipeline run on the existing document, with the `let`
    /// variables (by default `{new: "$$ROOT"}`) evaluated against the
    /// incoming document.
    Pipeline {
        stages: Vec<Document>,
        lets: Vec<(String, Expr)>,
    },
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
                    (other, _) => return Err(unknown_field(stage, other)),
                }
            }
            let coll = coll.ok_or_else(|| missing_field(stage, "coll"))?;
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

/// mongod's name for a `whenMatched` mode, in its messages.
fn mode_name(m: &WhenMatched) -> &'static str {
    match m {
        WhenMatched::Replace => "replace",
        WhenMatched::KeepExisting => "keepExisting",
        WhenMatched::Merge => "merge",
        WhenMatched::Fail => "fail",
        WhenMatched::Pipeline { .. } => "pipeline",
    }
}

/// Binds `$merge`'s `let` to its `whenMatched` pipeline: `{new: "$$ROOT"}`
/// when absent, `new` added when a merge that inserts left it out (mongod
/// does, to send the incoming document along), and `let` refused with any
/// other mode (51199).
fn with_lets(
    when_matched: WhenMatched,
    lets: Option<Document>,
    when_not_matched: WhenNotMatched,
) -> MongoResult<WhenMatched> {
    let WhenMatched::Pipeline { stages, .. } = when_matched else {
        if lets.is_some() {
            return Err(MongoError::location(
                51199,
                format!(
                    "Cannot use 'let' variables with 'whenMatched: {}' mode",
                    mode_name(&when_matched)
                ),
            ));
        }
        return Ok(when_matched);
    };
    let mut spec = lets.unwrap_or_else(|| bson::doc! {"new": "$$ROOT"});
    match spec.get("new") {
        None if when_not_matched == WhenNotMatched::Insert => {
            spec.insert("new", "$$ROOT");
        }
        None => {}
        Some(Bson::String(s)) if s == "$$ROOT" => {}
        Some(_) => {
            return Err(MongoError::location(
                51273,
                "'let' may not define a value for the reserved 'new' variable other than '$$ROOT'",
            ))
        }
    }
    let mut lets = Vec::with_capacity(spec.len());
    for (name, v) in &spec {
        crate::expr::check_var_name(name)?;
        lets.push((name.clone(), Expr::parse(v)?));
    }
    // Parse the pipeline once with placeholders, so a bad one fails the
    // command rather than the first matching document.
    let probe: Vec<(String, Option<Bson>)> = lets
        .iter()
        .map(|(n, _)| (n.clone(), Some(Bson::Null)))
        .collect();
    super::update_pipeline::check(&substitute_stages(&stages, &probe))?;
    Ok(WhenMatched::Pipeline { stages, lets })
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
        let mut lets: Option<Document> = None;
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
                            WhenMatched::Pipeline {
                                stages: docs,
                                lets: Vec::new(),
                            }
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
                "let" => match v {
                    Bson::Document(d) => lets = Some(d.clone()),
                    other => {
                        return Err(MongoError::type_mismatch(format!(
                            "BSON field '$merge.let' is the wrong type '{}', expected type 'object'",
                            type_name(other)
                        )))
                    }
                },
                other => return Err(unknown_field("$merge", other)),
            }
        }
        let (db, coll) = into.ok_or_else(|| missing_field("$merge", "into"))?;
        let when_matched = with_lets(when_matched, lets, when_not_matched)?;
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
            WhenMatched::Pipeline { stages, lets } => {
                let vars = Vars::new();
                let mut vals = Vec::with_capacity(lets.len());
                for (name, e) in lets {
                    vals.push((name.clone(), e.eval(&incoming, &vars)?));
                }
                let stages = substitute_stages(stages, &vals);
                super::update_pipeline::check(&stages)?;
                let out = super::update_pipeline::apply(&stages, existing, None)?;
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
