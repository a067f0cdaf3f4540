//! `$unwind`: one output document per array element.

use crate::agg::{DocStream, RunCtx, Stage};
use crate::value::type_name;
use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, Document};

#[derive(Debug)]
pub(crate) struct UnwindStage {
    path: Vec<String>,
    include_index: Option<String>,
    preserve: bool,
}

fn parse_path(s: &str) -> MongoResult<Vec<String>> {
    let Some(p) = s.strip_prefix('$') else {
        return Err(MongoError::location(
            28818,
            format!("path option to $unwind stage should be prefixed with a '$': {s}"),
        ));
    };
    if p.is_empty() || p.split('.').any(|c| c.is_empty() || c.starts_with('$')) {
        return Err(MongoError::location(
            28818,
            format!("path option to $unwind stage should be prefixed with a '$': {s}"),
        ));
    }
    Ok(p.split('.').map(str::to_string).collect())
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let stage = match arg {
        Bson::String(s) => UnwindStage {
            path: parse_path(s)?,
            include_index: None,
            preserve: false,
        },
        Bson::Document(d) => {
            let mut path = None;
            let mut include_index = None;
            let mut preserve = false;
            for (k, v) in d {
                match (k.as_str(), v) {
                    ("path", Bson::String(s)) => path = Some(parse_path(s)?),
                    ("path", other) => {
                        return Err(MongoError::location(
                            28808,
                            format!("expected a string as the path for $unwind stage, got {}", type_name(other)),
                        ))
                    }
                    ("includeArrayIndex", Bson::String(s)) if !s.is_empty() => {
                        if s.starts_with('$') {
                            return Err(MongoError::location(
                                28822,
                                format!("includeArrayIndex option to $unwind stage should not be prefixed with a '$': {s}"),
                            ));
                        }
                        include_index = Some(s.clone());
                    }
                    ("includeArrayIndex", other) => {
                        return Err(MongoError::location(
                            28810,
                            format!(
                                "expected a non-empty string for the includeArrayIndex  option to $unwind stage, got {}",
                                type_name(other)
                            ),
                        ))
                    }
                    ("preserveNullAndEmptyArrays", Bson::Boolean(b)) => preserve = *b,
                    ("preserveNullAndEmptyArrays", other) => {
                        return Err(MongoError::location(
                            28809,
                            format!(
                                "expected a boolean for the preserveNullAndEmptyArrays option to $unwind stage, got {}",
                                type_name(other)
                            ),
                        ))
                    }
                    (other, _) => {
                        return Err(MongoError::location(28811, format!("unrecognized option to $unwind stage: {other}")))
                    }
                }
            }
            let path = path
                .ok_or_else(|| MongoError::location(28812, "no path specified to $unwind stage"))?;
            UnwindStage {
                path,
                include_index,
                preserve,
            }
        }
        other => {
            return Err(MongoError::location(
                15981,
                format!(
                "expected either a string or an object as specification for $unwind stage, got {}",
                type_name(other)
            ),
            ))
        }
    };
    Ok(vec![Box::new(stage)])
}

/// Looks the path up through documents only (no array traversal), as
/// `$unwind` does.
fn get<'a>(doc: &'a Document, path: &[String]) -> Option<&'a Bson> {
    let (first, rest) = path.split_first()?;
    let mut cur = doc.get(first)?;
    for p in rest {
        cur = match cur {
            Bson::Document(d) => d.get(p)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Replaces the value at `path`, which is known to exist through documents.
fn set(doc: &mut Document, path: &[String], v: Bson) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        doc.insert(first.clone(), v);
        return;
    }
    if let Some(Bson::Document(d)) = doc.get_mut(first) {
        set(d, rest, v);
    }
}

/// Removes the field at `path`, which is known to exist through documents.
fn remove(doc: &mut Document, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        doc.remove(first);
    } else if let Some(Bson::Document(d)) = doc.get_mut(first) {
        remove(d, rest);
    }
}

impl UnwindStage {
    fn unwind(&self, doc: Document) -> Vec<MongoResult<Document>> {
        let with_index = |mut d: Document, idx: Bson| {
            if let Some(name) = &self.include_index {
                d.insert(name.clone(), idx);
            }
            Ok(d)
        };
        match get(&doc, &self.path) {
            Some(Bson::Array(a)) if !a.is_empty() => {
                let items = a.clone();
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.into_iter().enumerate() {
                    let mut d = doc.clone();
                    set(&mut d, &self.path, item);
                    out.push(with_index(
                        d,
                        Bson::Int64(i64::try_from(i).unwrap_or(i64::MAX)),
                    ));
                }
                out
            }
            Some(Bson::Array(_)) if self.preserve => {
                // mongod outputs an empty array's document without the field
                // (it sets the path to a missing value); a null or missing
                // one is left as it is (manual, `$unwind`, "Preserve Null and
                // Empty Arrays": `{_id: 2, item: "EFG", sizes: []}` comes
                // out as `{_id: 2, item: "EFG"}`, `sizes: null` stays).
                let mut doc = doc;
                remove(&mut doc, &self.path);
                vec![with_index(doc, Bson::Null)]
            }
            Some(Bson::Array(_)) | Some(Bson::Null) | None => {
                if self.preserve {
                    vec![with_index(doc, Bson::Null)]
                } else {
                    Vec::new()
                }
            }
            // A non-array value unwinds as a one-element array.
            Some(_) => vec![with_index(doc, Bson::Null)],
        }
    }
}

impl Stage for UnwindStage {
    fn run(self: Box<Self>, input: DocStream, _cx: &RunCtx) -> DocStream {
        Box::new(input.flat_map(move |r| match r {
            Ok(d) => self.unwind(d),
            Err(e) => vec![Err(e)],
        }))
    }
}
