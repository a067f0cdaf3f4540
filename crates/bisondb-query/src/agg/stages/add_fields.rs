//! `$addFields` (alias `$set`): computes fields and merges them into the
//! document. Existing fields keep their place, new ones are appended; nested
//! specs (`{a: {b: <expr>}}` or `"a.b"`) merge into embedded documents and
//! apply to each document of an array. `$$REMOVE` removes the field.

use crate::agg::{spec_doc, DocStream, RunCtx, Stage};
use crate::expr::{Expr, Vars};
use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, Document};

#[derive(Debug, Clone, PartialEq)]
enum Item {
    Value(Expr),
    Sub(Vec<(String, Item)>),
}

#[derive(Debug)]
pub(crate) struct AddFieldsStage {
    fields: Vec<(String, Item)>,
}

fn insert(
    fields: &mut Vec<(String, Item)>,
    path: &str,
    item: Item,
    stage: &str,
) -> MongoResult<()> {
    let collision = || {
        MongoError::location(
            31250,
            format!("Invalid {stage} :: caused by :: Path collision at {path}"),
        )
    };
    match path.split_once('.') {
        None => {
            if fields.iter().any(|(k, _)| k == path) {
                return Err(collision());
            }
            fields.push((path.to_string(), item));
            Ok(())
        }
        Some((head, rest)) => {
            if !fields.iter().any(|(k, _)| k == head) {
                fields.push((head.to_string(), Item::Sub(Vec::new())));
            }
            match fields.iter_mut().find(|(k, _)| k == head) {
                Some((_, Item::Sub(sub))) => insert(sub, rest, item, stage),
                _ => Err(collision()),
            }
        }
    }
}

fn parse_fields(spec: &Document, stage: &str) -> MongoResult<Vec<(String, Item)>> {
    let mut fields = Vec::with_capacity(spec.len());
    for (k, v) in spec {
        if k.is_empty() || k.split('.').any(str::is_empty) {
            return Err(MongoError::location(
                40352,
                "FieldPath cannot be constructed with empty string",
            ));
        }
        if k.starts_with('$') {
            return Err(MongoError::location(
                16410,
                format!("FieldPath field names may not start with '$'. Found: {k}"),
            ));
        }
        let item = match v {
            Bson::Document(d)
                if !d.is_empty() && !d.keys().next().is_some_and(|f| f.starts_with('$')) =>
            {
                Item::Sub(parse_fields(d, stage)?)
            }
            other => Item::Value(Expr::parse(other)?),
        };
        insert(&mut fields, k, item, stage)?;
    }
    Ok(fields)
}

fn parse_named(arg: &Bson, stage: &'static str) -> MongoResult<Vec<Box<dyn Stage>>> {
    let spec = spec_doc(arg, 40272, |v| {
        format!(
            "{stage} specification stage must be an object, got {}",
            crate::value::type_name(v)
        )
    })?;
    if spec.is_empty() {
        return Err(MongoError::location(
            40177,
            format!("Invalid {stage} :: caused by :: specification must have at least one field"),
        ));
    }
    Ok(vec![Box::new(AddFieldsStage {
        fields: parse_fields(spec, stage)?,
    })])
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    parse_named(arg, "$addFields")
}

pub(crate) fn parse_set(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    parse_named(arg, "$set")
}

fn apply(
    fields: &[(String, Item)],
    target: &mut Document,
    root: &Document,
    vars: &Vars,
) -> MongoResult<()> {
    for (k, item) in fields {
        match item {
            Item::Value(e) => match e.eval(root, vars)? {
                Some(v) => {
                    target.insert(k.clone(), v);
                }
                None => {
                    target.remove(k);
                }
            },
            Item::Sub(sub) => match target.get_mut(k) {
                Some(Bson::Document(d)) => apply(sub, d, root, vars)?,
                Some(Bson::Array(a)) => apply_array(sub, a, root, vars)?,
                _ => {
                    let mut d = Document::new();
                    apply(sub, &mut d, root, vars)?;
                    target.insert(k.clone(), d);
                }
            },
        }
    }
    Ok(())
}

fn apply_array(
    fields: &[(String, Item)],
    a: &mut [Bson],
    root: &Document,
    vars: &Vars,
) -> MongoResult<()> {
    for x in a.iter_mut() {
        match x {
            Bson::Document(d) => apply(fields, d, root, vars)?,
            Bson::Array(inner) => apply_array(fields, inner, root, vars)?,
            other => {
                let mut d = Document::new();
                apply(fields, &mut d, root, vars)?;
                *other = Bson::Document(d);
            }
        }
    }
    Ok(())
}

impl Stage for AddFieldsStage {
    fn run(self: Box<Self>, input: DocStream, cx: &RunCtx) -> DocStream {
        let vars = cx.vars();
        let fields = self.fields;
        super::map_docs(input, move |doc| {
            let mut out = doc.clone();
            apply(&fields, &mut out, &doc, &vars)?;
            Ok(out)
        })
    }
}
