//! `$set`, `$setOnInsert`, `$unset`, `$rename` and `$currentDate`.

use super::path::{self, Lookup};
use super::{FieldPath, OpKind};
use crate::value::{render, type_name};
use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, DateTime, Document, Timestamp};

pub(super) fn set(doc: &mut Document, fp: &FieldPath, value: Bson) -> MongoResult<()> {
    path::set_path(doc, &fp.parts, value)
}

pub(super) fn parse_current_date(value: &Bson) -> MongoResult<OpKind> {
    match value {
        Bson::Boolean(_) => Ok(OpKind::CurrentDate { timestamp: false }),
        Bson::Document(d) => {
            if d.len() != 1 || !d.contains_key("$type") {
                return Err(MongoError::bad_value(format!(
                    "The only valid field of the option is '$type': {{$currentDate: {{field : {{$type: 'date/timestamp'}}}}}}. Found: {}",
                    render(value)
                )));
            }
            match d.get("$type") {
                Some(Bson::String(t)) if t == "date" => Ok(OpKind::CurrentDate { timestamp: false }),
                Some(Bson::String(t)) if t == "timestamp" => Ok(OpKind::CurrentDate { timestamp: true }),
                _ => Err(MongoError::bad_value(
                    "The '$type' string field is required to be 'date' or 'timestamp': {$currentDate: {field : {$type: 'date'}}}",
                )),
            }
        }
        other => Err(MongoError::bad_value(format!(
            "{} is not valid type for $currentDate. Please use a boolean ('true') or a $type expression ({{$type: 'timestamp/date'}}).",
            type_name(other)
        ))),
    }
}

pub(super) fn current_date(doc: &mut Document, fp: &FieldPath, timestamp: bool) -> MongoResult<()> {
    let now = DateTime::now();
    let value = if timestamp {
        let secs = u32::try_from(now.timestamp_millis().div_euclid(1000)).unwrap_or(u32::MAX);
        Bson::Timestamp(Timestamp {
            time: secs,
            increment: 1,
        })
    } else {
        Bson::DateTime(now)
    };
    path::set_path(doc, &fp.parts, value)
}

pub(super) fn parse_rename(fp: &FieldPath, value: &Bson) -> MongoResult<OpKind> {
    let Bson::String(to) = value else {
        return Err(MongoError::bad_value(format!(
            "The 'to' field for $rename must be a string: {}: {}",
            fp.dotted,
            render(value)
        )));
    };
    let to_fp = FieldPath::parse(to)?;
    if to_fp.parts == fp.parts {
        return Err(MongoError::bad_value(format!(
            "The source and target field for $rename must differ: {}: \"{to}\"",
            fp.dotted
        )));
    }
    if fp.is_prefix_of(&to_fp) || to_fp.is_prefix_of(fp) {
        return Err(MongoError::bad_value(format!(
            "The source and target field for $rename must not be on the same path: {}: \"{to}\"",
            fp.dotted
        )));
    }
    Ok(OpKind::Rename(to_fp))
}

fn through_array(doc: &Document, parts: &[String]) -> bool {
    // mongod refuses $rename when either side goes through an array element.
    let mut cur: Option<&Bson> = None;
    for (i, p) in parts.iter().enumerate() {
        let next = match cur {
            None if i == 0 => doc.get(p),
            Some(Bson::Document(d)) => d.get(p),
            Some(Bson::Array(_)) => return true,
            _ => return false,
        };
        match next {
            Some(v) => cur = Some(v),
            None => return false,
        }
    }
    false
}

pub(super) fn rename(doc: &mut Document, from: &FieldPath, to: &FieldPath) -> MongoResult<()> {
    if through_array(doc, &from.parts) {
        return Err(MongoError::bad_value(format!(
            "The source field cannot be an array element, '{}' in doc with {} fields",
            from.dotted,
            doc.len()
        )));
    }
    let value = match path::lookup(doc, &from.parts) {
        Lookup::Found(v) => v.clone(),
        _ => return Ok(()),
    };
    if through_array(doc, &to.parts) {
        return Err(MongoError::bad_value(format!(
            "The destination field cannot be an array element, '{}' in doc with {} fields",
            to.dotted,
            doc.len()
        )));
    }
    path::check_settable(doc, &to.parts)?;
    path::unset_path(doc, &from.parts);
    path::set_path(doc, &to.parts, value)
}
