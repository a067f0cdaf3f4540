//! `$fill`: fills null and missing fields, per partition, in `sortBy`
//! order: with a constant expression (`value`), the last non-null value
//! (`method: "locf"`), or linear interpolation on the sort field
//! (`method: "linear"`).

use super::{missing_field, number_or_date, partition_fields_arg, unknown_field_or_type};
use crate::agg::{spec_doc, DocStream, RunCtx, Stage};
use crate::compare::compare_bson_in;
use crate::expr::{Expr, Vars};
use crate::key::{key_of_in, Partitions};
use crate::path::edit::{set_path, split};
use crate::sort::SortSpec;
use crate::value::{nullish, type_name};
use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, Document, RawDocumentBuf};

#[derive(Debug)]
enum Method {
    Value(Expr),
    Locf,
    Linear,
}

#[derive(Debug)]
pub(crate) struct FillStage {
    partition_by: Option<Expr>,
    partition_fields: Vec<String>,
    sort: Option<SortSpec>,
    sort_field: Option<String>,
    outputs: Vec<(String, Method)>,
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let spec = spec_doc(arg, 6050200, |v| {
        format!(
            "$fill specification must be an object, found {}",
            type_name(v)
        )
    })?;
    let (mut partition_by, mut partition_fields, mut sort, mut sort_field, mut outputs) =
        (None, Vec::new(), None, None, None);
    for (k, v) in spec {
        match (k.as_str(), v) {
            ("partitionBy", v) => partition_by = Some(Expr::parse(v)?),
            ("partitionByFields", Bson::Array(a)) => {
                partition_fields.extend(partition_fields_arg("$fill", a)?)
            }
            ("sortBy", Bson::Document(d)) => {
                sort = Some(SortSpec::parse(d)?);
                if d.len() == 1 {
                    sort_field = d.keys().next().cloned();
                }
            }
            ("output", Bson::Document(d)) => {
                let mut out = Vec::with_capacity(d.len());
                for (field, m) in d {
                    let Bson::Document(md) = m else {
                        return Err(MongoError::type_mismatch(format!(
                            "$fill output for '{field}' must be an object"
                        )));
                    };
                    let method = match (md.get("value"), md.get("method"), md.len()) {
                        (Some(e), None, 1) => Method::Value(Expr::parse(e)?),
                        (None, Some(Bson::String(s)), 1) if s == "locf" => Method::Locf,
                        (None, Some(Bson::String(s)), 1) if s == "linear" => Method::Linear,
                        _ => {
                            return Err(MongoError::location(
                                6050203,
                                format!("Exactly one of 'value' and 'method' (\"locf\" or \"linear\") must be specified for $fill output '{field}'"),
                            ))
                        }
                    };
                    out.push((field.clone(), method));
                }
                outputs = Some(out);
            }
            (other, v) => return Err(unknown_field_or_type("$fill", other, v)),
        }
    }
    let outputs = outputs.ok_or_else(|| missing_field("$fill", "output"))?;
    if partition_by.is_some() && !partition_fields.is_empty() {
        return Err(MongoError::location(
            6050204,
            "Maximum one of 'partitionBy' and 'partitionByFields' can be specified in '$fill'",
        ));
    }
    for (f, m) in &outputs {
        if matches!(m, Method::Linear) && sort_field.is_none() {
            return Err(MongoError::location(
                6050201,
                format!("'linear' fill for '{f}' requires a sortBy with exactly one field"),
            ));
        }
        if matches!(m, Method::Locf) && sort.is_none() {
            return Err(MongoError::location(
                6050201,
                format!("'locf' fill for '{f}' requires a sortBy"),
            ));
        }
    }
    Ok(vec![Box::new(FillStage {
        partition_by,
        partition_fields,
        sort,
        sort_field,
        outputs,
    })])
}

impl FillStage {
    fn partition_key(&self, d: &Document, vars: &Vars) -> MongoResult<Bson> {
        if let Some(e) = &self.partition_by {
            return Ok(e.eval(d, vars)?.unwrap_or(Bson::Null));
        }
        let mut key = Document::new();
        for f in &self.partition_fields {
            key.insert(
                f.clone(),
                crate::path::get_path_bson(d, f)
                    .cloned()
                    .unwrap_or(Bson::Null),
            );
        }
        Ok(Bson::Document(key))
    }

    fn run_all(&self, input: DocStream, cx: &RunCtx) -> MongoResult<Vec<Document>> {
        let vars = cx.vars();
        let mut partitions = Partitions::new();
        for r in input {
            let d = r?;
            let pk = self.partition_key(&d, &vars)?;
            partitions.push(key_of_in(Some(&pk), vars.collation()), pk, d);
        }
        let mut parts = partitions.into_groups();
        if self.partition_by.is_some() || !self.partition_fields.is_empty() {
            parts.sort_by(|a, b| compare_bson_in(&a.0, &b.0, vars.collation()));
        }
        let mut out = Vec::new();
        for (_, docs) in parts {
            out.extend(self.fill_partition(docs, &vars)?);
        }
        Ok(out)
    }

    fn fill_partition(&self, docs: Vec<Document>, vars: &Vars) -> MongoResult<Vec<Document>> {
        let mut docs = docs;
        if let Some(s) = &self.sort {
            let mut keyed = Vec::with_capacity(docs.len());
            for d in docs {
                let raw = RawDocumentBuf::try_from(&d).map_err(|e| {
                    MongoError::internal(format!("document cannot be encoded for sorting: {e}"))
                })?;
                keyed.push((s.sort_key(&raw), d));
            }
            keyed.sort_by(|a, b| s.compare_keys(&a.0, &b.0));
            docs = keyed.into_iter().map(|(_, d)| d).collect();
        }
        for (field, method) in &self.outputs {
            let parts = split(field);
            let values: Vec<Option<Bson>> = docs
                .iter()
                .map(|d| {
                    crate::path::get_path_bson(d, field)
                        .filter(|v| !nullish(Some(v)))
                        .cloned()
                })
                .collect();
            let mut filled: Vec<Option<Bson>> = vec![None; docs.len()];
            match method {
                Method::Value(e) => {
                    for (i, d) in docs.iter().enumerate() {
                        if values.get(i).is_some_and(Option::is_none) {
                            if let Some(slot) = filled.get_mut(i) {
                                *slot = Some(e.eval(d, vars)?.unwrap_or(Bson::Null));
                            }
                        }
                    }
                }
                Method::Locf => {
                    let mut last: Option<Bson> = None;
                    for (i, v) in values.iter().enumerate() {
                        match v {
                            Some(v) => last = Some(v.clone()),
                            None => {
                                if let (Some(l), Some(slot)) = (&last, filled.get_mut(i)) {
                                    *slot = Some(l.clone());
                                }
                            }
                        }
                    }
                }
                Method::Linear => {
                    let sf = self.sort_field.clone().unwrap_or_default();
                    let xs: Vec<Option<f64>> = docs
                        .iter()
                        .map(|d| crate::path::get_path_bson(d, &sf).and_then(number_or_date))
                        .collect();
                    let known: Vec<usize> = (0..docs.len())
                        .filter(|i| values.get(*i).is_some_and(Option::is_some))
                        .collect();
                    for w in known.windows(2) {
                        let (Some(&a), Some(&b)) = (w.first(), w.get(1)) else {
                            continue;
                        };
                        let (Some(Some(ya)), Some(Some(yb))) = (
                            values.get(a).map(|v| v.as_ref().and_then(number_or_date)),
                            values.get(b).map(|v| v.as_ref().and_then(number_or_date)),
                        ) else {
                            continue;
                        };
                        let (Some(Some(xa)), Some(Some(xb))) = (xs.get(a), xs.get(b)) else {
                            continue;
                        };
                        for i in a + 1..b {
                            if let (Some(Some(x)), Some(slot)) = (xs.get(i), filled.get_mut(i)) {
                                let y = if xb == xa {
                                    ya
                                } else {
                                    ya + (yb - ya) * (x - xa) / (xb - xa)
                                };
                                *slot = Some(Bson::Double(y));
                            }
                        }
                    }
                }
            }
            for (d, f) in docs.iter_mut().zip(filled) {
                if let Some(v) = f {
                    set_path(d, &parts, v)?;
                }
            }
        }
        Ok(docs)
    }
}

impl Stage for FillStage {
    fn run(self: Box<Self>, input: DocStream, cx: &RunCtx) -> DocStream {
        let cx = cx.clone();
        crate::agg::blocking(input, move |inp| self.run_all(inp, &cx))
    }
}
