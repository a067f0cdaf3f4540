//! The `$changeStream` stage's argument, parsed as mongod's IDL parses it
//! (unknown fields 40415, wrong types 14, enumeration values 2), and the
//! rules about where the stage may stand in a pipeline.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{Bson, Document, Timestamp};

use super::token::ResumeToken;
use crate::value::type_name;

/// `fullDocument`: what an event carries as the document after the change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FullDocument {
    /// Inserts and replaces only.
    #[default]
    Default,
    /// Updates too, read from the collection when the event is returned.
    UpdateLookup,
    /// The stored post-image when there is one.
    WhenAvailable,
    /// The stored post-image; its absence is an error.
    Required,
}

/// `fullDocumentBeforeChange`: the document before an update, replace or
/// delete, from the stored pre-images.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BeforeChange {
    #[default]
    Off,
    WhenAvailable,
    Required,
}

/// Where the stream starts.
#[derive(Debug, Clone, PartialEq)]
pub enum Start {
    /// At the end of the oplog as the stream opens.
    Now,
    /// After the event of a token (never an invalidate's).
    ResumeAfter(ResumeToken),
    /// After the event of a token, an invalidate's too.
    StartAfter(ResumeToken),
    /// At every event at or after a cluster time.
    AtOperationTime(Timestamp),
}

/// A parsed `$changeStream` argument.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeStreamSpec {
    pub full_document: FullDocument,
    pub before_change: BeforeChange,
    pub start: Start,
    pub all_changes_for_cluster: bool,
    pub show_expanded_events: bool,
    /// `showSystemEvents`: events on `system.*` collections in database and
    /// cluster streams.
    pub show_system_events: bool,
    /// The pipeline ends with `$changeStreamSplitLargeEvent` (set by the
    /// server, which runs it on the pipeline's output).
    pub split_large_events: bool,
}

/// Stages mongod allows after `$changeStream` (it says so by the stage's
/// constraints); `$changeStreamSplitLargeEvent` must be the last one.
pub const ALLOWED_AFTER: &[&str] = &[
    "$addFields",
    "$changeStreamSplitLargeEvent",
    "$match",
    "$project",
    "$redact",
    "$replaceRoot",
    "$replaceWith",
    "$set",
    "$unset",
];

/// Options mongod reserves for its own internal use (mongos, tests of
/// internal databases): refused by name, since BisonDB does not implement
/// them.
const NOT_SUPPORTED: &[&str] = &[
    "allowToRunOnConfigDB",
    "allowToRunOnSystemNS",
    "matchCollectionUUIDForUpdateLookup",
    "showRawUpdateDescription",
    "version",
];

fn wrong_type(field: &str, v: &Bson, expected: &str) -> MongoError {
    MongoError::type_mismatch(format!(
        "BSON field '$changeStream.{field}' is the wrong type '{}', expected type '{expected}'",
        type_name(v)
    ))
}

fn as_bool(field: &str, v: &Bson) -> MongoResult<bool> {
    match v {
        Bson::Boolean(b) => Ok(*b),
        other => Err(wrong_type(field, other, "bool")),
    }
}

fn as_enum<'a>(field: &str, v: &'a Bson) -> MongoResult<&'a str> {
    match v {
        Bson::String(s) => Ok(s),
        other => Err(wrong_type(field, other, "string")),
    }
}

fn bad_enum(field: &str, value: &str) -> MongoError {
    MongoError::bad_value(format!(
        "Enumeration value '{value}' for field '$changeStream.{field}' is not a valid value."
    ))
}

impl ChangeStreamSpec {
    /// Parses the stage's argument.
    pub fn parse(arg: &Bson) -> MongoResult<ChangeStreamSpec> {
        let Bson::Document(doc) = arg else {
            return Err(MongoError::location(
                50808,
                "$changeStream stage expects a document as argument",
            ));
        };
        ChangeStreamSpec::parse_doc(doc)
    }

    fn parse_doc(doc: &Document) -> MongoResult<ChangeStreamSpec> {
        let mut spec = ChangeStreamSpec {
            full_document: FullDocument::Default,
            before_change: BeforeChange::Off,
            start: Start::Now,
            all_changes_for_cluster: false,
            show_expanded_events: false,
            show_system_events: false,
            split_large_events: false,
        };
        let mut starts = 0;
        for (k, v) in doc {
            match k.as_str() {
                "fullDocument" => {
                    spec.full_document = match as_enum(k, v)? {
                        "default" => FullDocument::Default,
                        "updateLookup" => FullDocument::UpdateLookup,
                        "whenAvailable" => FullDocument::WhenAvailable,
                        "required" => FullDocument::Required,
                        other => return Err(bad_enum(k, other)),
                    }
                }
                "fullDocumentBeforeChange" => {
                    spec.before_change = match as_enum(k, v)? {
                        "off" => BeforeChange::Off,
                        "whenAvailable" => BeforeChange::WhenAvailable,
                        "required" => BeforeChange::Required,
                        other => return Err(bad_enum(k, other)),
                    }
                }
                "resumeAfter" | "startAfter" => {
                    if !matches!(v, Bson::Document(_)) {
                        return Err(wrong_type(k, v, "object"));
                    }
                    let token = ResumeToken::parse(v)?;
                    starts += 1;
                    spec.start = if k == "resumeAfter" {
                        Start::ResumeAfter(token)
                    } else {
                        Start::StartAfter(token)
                    };
                }
                "startAtOperationTime" => {
                    let Bson::Timestamp(ts) = v else {
                        return Err(wrong_type(k, v, "timestamp"));
                    };
                    starts += 1;
                    spec.start = Start::AtOperationTime(*ts);
                }
                "allChangesForCluster" => spec.all_changes_for_cluster = as_bool(k, v)?,
                "showExpandedEvents" => spec.show_expanded_events = as_bool(k, v)?,
                "showSystemEvents" => spec.show_system_events = as_bool(k, v)?,
                // Migrations happen only between shards; a replica set has none.
                "showMigrationEvents" => {
                    as_bool(k, v)?;
                }
                other if NOT_SUPPORTED.contains(&other) => {
                    return Err(MongoError::new(
                        ErrorCode::NotImplemented,
                        format!("$changeStream option '{other}' is not supported by BisonDB"),
                    ))
                }
                other => {
                    return Err(MongoError::location(
                        40415,
                        format!("BSON field '$changeStream.{other}' is an unknown field."),
                    ))
                }
            }
        }
        if starts > 1 {
            return Err(MongoError::location(
                40674,
                "Only one type of resume option is allowed, but multiple were found.",
            ));
        }
        if let Start::ResumeAfter(t) = &spec.start {
            if t.from_invalidate {
                return Err(MongoError::new(
                    ErrorCode::InvalidResumeToken,
                    "Attempting to resume a change stream using 'resumeAfter' is not allowed from an invalidate notification.",
                ));
            }
        }
        Ok(spec)
    }
}

/// Checks the stages after a `$changeStream`: only those mongod allows, and
/// `$changeStreamSplitLargeEvent` last.
pub fn check_following(stages: &[Document]) -> MongoResult<()> {
    for (i, stage) in stages.iter().enumerate() {
        let Some(name) = stage.keys().next() else {
            continue;
        };
        if name == "$changeStream" {
            return Err(MongoError::location(
                40602,
                "$changeStream is only valid as the first stage in a pipeline",
            ));
        }
        if !ALLOWED_AFTER.contains(&name.as_str()) {
            // Unknown names keep the pipeline parser's 40324.
            if crate::agg::is_stage_name(name) {
                return Err(MongoError::new(
                    ErrorCode::IllegalOperation,
                    format!("{name} is not permitted in a $changeStream pipeline"),
                ));
            }
            continue;
        }
        if name == "$changeStreamSplitLargeEvent" && i + 1 != stages.len() {
            return Err(MongoError::location(
                7182802,
                "$changeStreamSplitLargeEvent must be the last stage in the pipeline",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change_stream::token::TokenKind;
    use bson::doc;

    fn err(arg: Bson) -> i32 {
        ChangeStreamSpec::parse(&arg).unwrap_err().code.code()
    }

    #[test]
    fn parses_options() {
        let token = ResumeToken::position(
            Timestamp {
                time: 3,
                increment: 1,
            },
            TokenKind::HighWaterMark,
        );
        let spec = ChangeStreamSpec::parse(&Bson::Document(doc! {
            "fullDocument": "updateLookup",
            "fullDocumentBeforeChange": "whenAvailable",
            "resumeAfter": token.to_document(),
            "showExpandedEvents": true,
        }))
        .unwrap();
        assert_eq!(spec.full_document, FullDocument::UpdateLookup);
        assert_eq!(spec.before_change, BeforeChange::WhenAvailable);
        assert_eq!(spec.start, Start::ResumeAfter(token));
        assert!(spec.show_expanded_events && !spec.all_changes_for_cluster);
        let spec = ChangeStreamSpec::parse(&Bson::Document(doc! {})).unwrap();
        assert_eq!(spec.start, Start::Now);
        assert_eq!(spec.full_document, FullDocument::Default);
        let ts = Timestamp {
            time: 9,
            increment: 0,
        };
        let spec = ChangeStreamSpec::parse(&Bson::Document(
            doc! {"startAtOperationTime": ts, "fullDocument": "required"},
        ))
        .unwrap();
        assert_eq!(spec.start, Start::AtOperationTime(ts));
        assert_eq!(spec.full_document, FullDocument::Required);
    }

    #[test]
    fn refuses_as_mongod() {
        let token = ResumeToken::position(
            Timestamp {
                time: 3,
                increment: 1,
            },
            TokenKind::Event,
        );
        assert_eq!(err(Bson::Int32(1)), 50808);
        assert_eq!(err(Bson::Document(doc! {"foo": 1})), 40415);
        assert_eq!(err(Bson::Document(doc! {"fullDocument": 1})), 14);
        assert_eq!(err(Bson::Document(doc! {"fullDocument": "nope"})), 2);
        assert_eq!(
            err(Bson::Document(doc! {"fullDocumentBeforeChange": "default"})),
            2
        );
        assert_eq!(err(Bson::Document(doc! {"allChangesForCluster": 1})), 14);
        assert_eq!(err(Bson::Document(doc! {"startAtOperationTime": 1})), 14);
        assert_eq!(err(Bson::Document(doc! {"resumeAfter": 1})), 14);
        assert_eq!(
            err(Bson::Document(
                doc! {"resumeAfter": token.to_document(), "startAfter": token.to_document()}
            )),
            40674
        );
        assert_eq!(
            err(Bson::Document(
                doc! {"resumeAfter": token.invalidate().to_document()}
            )),
            260
        );
        assert!(ChangeStreamSpec::parse(&Bson::Document(
            doc! {"startAfter": token.invalidate().to_document()}
        ))
        .is_ok());
        assert_eq!(
            err(Bson::Document(doc! {"showRawUpdateDescription": true})),
            238
        );
    }

    #[test]
    fn following_stages() {
        assert!(check_following(&[
            doc! {"$match": {}},
            doc! {"$project": {"x": 1}},
            doc! {"$changeStreamSplitLargeEvent": {}}
        ])
        .is_ok());
        assert_eq!(
            check_following(&[doc! {"$group": {"_id": 1}}])
                .unwrap_err()
                .code
                .code(),
            20
        );
        assert_eq!(
            check_following(&[doc! {"$changeStream": {}}])
                .unwrap_err()
                .code
                .code(),
            40602
        );
        assert_eq!(
            check_following(&[
                doc! {"$changeStreamSplitLargeEvent": {}},
                doc! {"$match": {}}
            ])
            .unwrap_err()
            .code
            .code(),
            7182802
        );
        // Unknown names are the parser's to refuse (40324).
        assert!(check_following(&[doc! {"$unsupported": "foo"}]).is_ok());
    }
}
