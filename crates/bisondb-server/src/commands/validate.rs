//! `validate`: checks a collection's documents, indexes and statistics against
//! each other (`Collection::validate` in bisondb-storage does the reading) and
//! replies as mongod 8.0 does.
//!
//! mongod reads every option with `trueValue()` (any type: a number is true
//! when not zero, null is false) and ignores fields it does not know, so this
//! parser does too. Option combinations mongod refuses fail with 72
//! InvalidOptions in mongod's order; `background: true` fails with 115 on a
//! standalone, as mongod; in replica-set mode it runs the same full check
//! (BisonDB reads one engine snapshot either way). `repair: true` is allowed, as on a
//! standalone mongod: it fixes index entries, removes invalid documents and
//! corrects the count and size.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_storage::{ValidateOptions, ValidateReport};
use bson::{doc, Bson, Document, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

/// mongod's `advice` for a collection that failed validation.
const ADVICE: &str = "A corrupt namespace has been detected. See http://dochub.mongodb.org/core/data-recovery for recovery steps.";

/// mongod's warning when documents fail the collection's validator.
const NON_COMPLIANT: &str =
    "Detected one or more documents not compliant with the collection's schema. Check logs for log id 5363500.";

pub struct Validate {
    db: String,
    coll: String,
    repair: bool,
    metadata: bool,
    enforce_fast_count: bool,
    background: bool,
}

/// mongod's `BSONElement::trueValue()`.
pub(crate) fn true_value(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::Boolean(b) => b,
        RawBsonRef::Int32(i) => i != 0,
        RawBsonRef::Int64(i) => i != 0,
        RawBsonRef::Double(d) => d != 0.0,
        RawBsonRef::Decimal128(d) => {
            // Not zero: NaN and infinities are true; otherwise some digit of
            // the coefficient is not 0.
            let s = d.to_string();
            let coefficient = s.split(['E', 'e']).next().unwrap_or_default();
            s.contains("NaN")
                || s.contains("Inf")
                || coefficient.chars().any(|c| c.is_ascii_digit() && c != '0')
        }
        RawBsonRef::Null | RawBsonRef::Undefined => false,
        _ => true,
    }
}

fn invalid(msg: &str) -> MongoError {
    MongoError::new(ErrorCode::InvalidOptions, msg)
}

impl Command for Validate {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let mut coll = None;
        let (mut full, mut background, mut repair, mut metadata) = (false, false, false, false);
        let mut enforce_fast_count = false;
        // `Some(value)` when given: an explicit `false` matters.
        let mut check_bson: Option<bool> = None;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "validate" => coll = Some(fields::collection_name(req.name, v)?.to_string()),
                "full" => full = true_value(v),
                "background" => background = true_value(v),
                "repair" => repair = true_value(v),
                "metadata" => metadata = true_value(v),
                "enforceFastCount" => enforce_fast_count = true_value(v),
                "checkBSONConformance" => check_bson = Some(true_value(v)),
                // `scandata` (pymongo still sends it), `logDiagnostics` and the
                // generic arguments: mongod reads only what it knows.
                _ => {}
            }
        }
        let coll = coll.ok_or_else(|| fields::missing_field(req.name, "validate"))?;
        let both = |a: &str, b: &str| {
            invalid(&format!(
                "Running the validate command with both {{ {a}: true }} and {{ {b}: true }} is not supported."
            ))
        };
        if background && full {
            return Err(both("background", "full"));
        }
        if background && enforce_fast_count {
            return Err(both("background", "enforceFastCount"));
        }
        if check_bson == Some(false) && (full || enforce_fast_count) {
            return Err(invalid(
                "Cannot explicitly set 'checkBSONConformance: false' with full validation set.",
            ));
        }
        let check_bson = check_bson.unwrap_or(false);
        if background && repair {
            return Err(both("background", "repair"));
        }
        if enforce_fast_count && repair {
            return Err(both("enforceFastCount", "repair"));
        }
        if check_bson && repair {
            return Err(both("checkBSONConformance", "repair"));
        }
        if metadata && (background || full || enforce_fast_count || check_bson || repair) {
            return Err(invalid(
                "Running the validate command with { metadata: true } is not supported with any other options",
            ));
        }
        Ok(Validate {
            db: req.db.clone(),
            coll,
            repair,
            metadata,
            enforce_fast_count,
            background,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let repl = ctx.state.repl();
        if self.background && !repl.enabled() && !repl.is_mongos() {
            // A standalone mongod has no checkpoint timestamps to validate at
            // (a mongos's shards, replica sets, have).
            return Err(MongoError::new(
                ErrorCode::CommandNotSupported,
                "Running the validate command with { background: true } is not supported in standalone mode",
            ));
        }
        let ns = crate::namespaces::ns(&self.db, &self.coll);
        let Some(c) = ctx.state.storage.collection(&self.db, &self.coll) else {
            return Err(MongoError::new(
                ErrorCode::NamespaceNotFound,
                format!("Collection '{ns}' does not exist to validate."),
            ));
        };
        if crate::namespaces::views::view_of_options(&c.options()).is_some() {
            return Err(MongoError::new(
                ErrorCode::CommandNotSupportedOnView,
                "Cannot validate a view",
            ));
        }
        let mut out = doc! {"ns": ns, "uuid": Bson::from(c.uuid())};
        if self.metadata {
            // Only index specifications are checked, and BisonDB refuses bad
            // ones when they are created: nothing is read.
            out.extend(doc! {
                "nIndexes": 0,
                "keysPerIndex": {},
                "indexDetails": {},
                "valid": true,
                "repaired": false,
                "warnings": [],
                "errors": [],
                "extraIndexEntries": [],
                "missingIndexEntries": [],
                "corruptRecords": [],
            });
            return reply::ok(out);
        }
        let mut report = c.validate(ValidateOptions {
            repair: self.repair,
        })?;
        // A clustered collection has no `_id_` index (its documents are the
        // clustered index), so mongod reports none.
        if crate::namespaces::clustered::Clustered::of_options(&c.options()).is_some() {
            report.indexes.retain(|ix| ix.name != "_id_");
        }
        // mongod corrects a wrong count on its own unless told to insist on it.
        if self.enforce_fast_count {
            let (stats, rest): (Vec<String>, Vec<String>) = std::mem::take(&mut report.warnings)
                .into_iter()
                .partition(|w| w.starts_with("The collection's count and data size"));
            report.warnings = rest;
            report.errors.extend(stats);
        }
        let non_compliant = non_compliant(&c)?;
        if non_compliant > 0 {
            report.warnings.push(NON_COMPLIANT.to_string());
        }
        out.extend(reply_fields(&report, non_compliant, self.repair));
        reply::ok(out)
    }
}

/// Documents that fail the collection's validator (none without one, or
/// with `validationLevel: "off"`).
fn non_compliant(c: &bisondb_storage::Collection) -> MongoResult<u64> {
    let Some(validator) = crate::validation::Validator::for_collection(Some(c), false)? else {
        return Ok(0);
    };
    let mut n = 0u64;
    for doc in c.scan(false) {
        // Unreadable documents were counted as invalid by the storage check.
        let Ok(doc) = doc else { continue };
        if !validator.complies(&doc) {
            n += 1;
        }
    }
    Ok(n)
}

/// mongod's `appendNumber`: an int32 when the value fits.
fn number(n: u64) -> Bson {
    match i32::try_from(n) {
        Ok(i) => Bson::Int32(i),
        Err(_) => Bson::Int64(i64::try_from(n).unwrap_or(i64::MAX)),
    }
}

/// The reply after `ns` and `uuid`, in mongod's order.
fn reply_fields(report: &ValidateReport, non_compliant: u64, repair: bool) -> Document {
    // mongod keeps its per-index results in a map ordered by name.
    let mut indexes: Vec<_> = report.indexes.iter().collect();
    indexes.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    let mut keys = Document::new();
    let mut details = Document::new();
    for ix in &indexes {
        keys.insert(ix.name.clone(), number(ix.keys));
        details.insert(ix.name.clone(), doc! {"valid": ix.valid});
    }
    let strings = |v: &[String]| Bson::Array(v.iter().cloned().map(Bson::String).collect());
    let docs = |v: &[Document]| Bson::Array(v.iter().cloned().map(Bson::Document).collect());
    let valid = report.valid();
    let mut out = doc! {
        "nInvalidDocuments": number(report.invalid_documents),
        "nNonCompliantDocuments": number(non_compliant),
        "nrecords": number(report.nrecords),
        "nIndexes": number(indexes.len() as u64),
        "keysPerIndex": keys,
        "indexDetails": details,
        "valid": valid,
        "repaired": report.repaired,
        "warnings": strings(&report.warnings),
        "errors": strings(&report.errors),
        "extraIndexEntries": docs(&report.extra_index_entries),
        "missingIndexEntries": docs(&report.missing_index_entries),
        "corruptRecords": Bson::Array(report.corrupt_records.clone()),
    };
    if repair {
        out.extend(doc! {
            "numRemovedCorruptRecords": number(report.removed_corrupt_records),
            "numRemovedExtraIndexEntries": number(report.removed_extra_index_entries),
            "numInsertedMissingIndexEntries": number(report.inserted_missing_index_entries),
            "numDocumentsMovedToLostAndFound": 0,
            "numOutdatedMissingIndexEntry": 0,
        });
    }
    if !valid {
        out.insert("advice", ADVICE);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn true_value_follows_mongod() {
        use bson::RawBsonRef as R;
        assert!(true_value(R::Boolean(true)) && !true_value(R::Boolean(false)));
        assert!(true_value(R::Int32(2)) && !true_value(R::Int32(0)));
        assert!(!true_value(R::Double(0.0)) && true_value(R::Double(0.5)));
        assert!(!true_value(R::Null) && true_value(R::String("")));
    }

    #[test]
    fn reply_orders_indexes_by_name_and_advises_when_invalid() {
        let mut report = ValidateReport {
            nrecords: 2,
            ..ValidateReport::default()
        };
        for (name, keys, valid) in [("b_1", 2, true), ("_id_", 2, true), ("A_1", 1, false)] {
            report.indexes.push(bisondb_storage::IndexReport {
                name: name.into(),
                keys,
                valid,
            });
        }
        let out = reply_fields(&report, 0, false);
        let names: Vec<&String> = out
            .get_document("keysPerIndex")
            .map(|d| d.keys().collect())
            .unwrap_or_default();
        assert_eq!(names, ["A_1", "_id_", "b_1"]);
        assert_eq!(out.get_bool("valid").ok(), Some(false));
        assert_eq!(out.get_str("advice").ok(), Some(ADVICE));
        assert!(out.get("numRemovedCorruptRecords").is_none());
    }
}
