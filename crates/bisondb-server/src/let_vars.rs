//! Command-level `let` (find, aggregate, update, delete, findAndModify): user
//! variables visible as `$$name` to the command's expressions.
//!
//! The values are constants for the whole command (mongod evaluates them once,
//! against no document), so they are substituted into the command's expressions
//! before those are parsed: `"$$name"` becomes `{$literal: value}` and
//! `"$$name.path"` a `$let` over the literal. Filters are rewritten only inside
//! `$expr`, where a `$$` string is a variable; elsewhere in a filter it is a
//! plain string value.

use bisondb_error::{MongoError, MongoResult};
use bisondb_query::expr::{Expr, Vars};
use bson::{doc, Bson, Document, RawBsonRef};

use crate::fields;

/// The evaluated `let` variables of one command.
#[derive(Debug, Default, Clone)]
pub struct LetVars {
    vars: Vec<(String, Bson)>,
}

impl LetVars {
    /// Validates the names and evaluates the values of `cmd`'s `let` document.
    pub fn parse(cmd: &str, v: RawBsonRef<'_>) -> MongoResult<LetVars> {
        let d = fields::to_document(fields::as_doc(cmd, "let", v)?)?;
        let now = Vars::new();
        let mut vars = Vec::new();
        for (name, value) in &d {
            check_name(name)?;
            let value = Expr::parse(value)?.eval(&Document::new(), &now)?;
            // A missing value (e.g. `$$REMOVE`) leaves the variable unset.
            if let Some(value) = value {
                vars.push((name.clone(), value));
            }
        }
        Ok(LetVars { vars })
    }

    /// Finds `let` in a command body before its other fields are parsed.
    pub fn from_body(cmd: &str, body: &bson::RawDocument) -> MongoResult<LetVars> {
        match body.get("let").map_err(crate::request::invalid_bson)? {
            Some(v) => LetVars::parse(cmd, v),
            None => Ok(LetVars::default()),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    /// Rewrites the `$expr` parts of a query filter.
    pub fn filter(&self, f: &Document) -> Document {
        if self.is_empty() {
            return f.clone();
        }
        f.iter()
            .map(|(k, v)| {
                let v = match (k.as_str(), v) {
                    ("$expr", e) => self.expr(e),
                    ("$and" | "$or" | "$nor", Bson::Array(items)) => Bson::Array(
                        items
                            .iter()
                            .map(|i| match i {
                                Bson::Document(d) => Bson::Document(self.filter(d)),
                                other => other.clone(),
                            })
                            .collect(),
                    ),
                    _ => v.clone(),
                };
                (k.clone(), v)
            })
            .collect()
    }

    /// Rewrites every stage of a pipeline (`$match` as a filter).
    pub fn pipeline(&self, stages: &[Document]) -> Vec<Document> {
        stages.iter().map(|s| self.stage(s)).collect()
    }

    fn stage(&self, s: &Document) -> Document {
        if self.is_empty() {
            return s.clone();
        }
        s.iter()
            .map(|(k, v)| {
                let v = match (k.as_str(), v) {
                    ("$match", Bson::Document(f)) => Bson::Document(self.filter(f)),
                    _ => self.expr(v),
                };
                (k.clone(), v)
            })
            .collect()
    }

    /// Rewrites an aggregation expression.
    pub fn expr(&self, e: &Bson) -> Bson {
        if self.is_empty() {
            return e.clone();
        }
        match e {
            Bson::String(s) => self.variable(s).unwrap_or_else(|| e.clone()),
            Bson::Array(items) => Bson::Array(items.iter().map(|i| self.expr(i)).collect()),
            Bson::Document(d) if d.contains_key("$literal") => e.clone(),
            Bson::Document(d) => Bson::Document(
                d.iter()
                    .map(|(k, v)| {
                        // A nested pipeline's `$match` keeps filter semantics.
                        let v = match (k.as_str(), v) {
                            ("$match", Bson::Document(f)) => Bson::Document(self.filter(f)),
                            _ => self.expr(v),
                        };
                        (k.clone(), v)
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    fn variable(&self, s: &str) -> Option<Bson> {
        let rest = s.strip_prefix("$$")?;
        let (name, path) = match rest.split_once('.') {
            Some((n, p)) => (n, Some(p)),
            None => (rest, None),
        };
        let (_, value) = self.vars.iter().rev().find(|(n, _)| n == name)?;
        let literal = Bson::Document(doc! {"$literal": value.clone()});
        Some(match path {
            None => literal,
            Some(p) => Bson::Document(doc! {
                "$let": {"vars": {"letvalue": literal}, "in": format!("$$letvalue.{p}")}
            }),
        })
    }
}

/// mongod's rules for user variable names.
fn check_name(name: &str) -> MongoResult<()> {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return Err(MongoError::location(
            16869,
            "empty variable names are not allowed",
        ));
    };
    if first.is_ascii() && !first.is_ascii_lowercase() {
        return Err(MongoError::location(
            16870,
            format!("'{name}' starts with an invalid character for a user variable name"),
        ));
    }
    if chars.any(|c| !(c.is_ascii_alphanumeric() || c == '_' || !c.is_ascii())) {
        return Err(MongoError::location(
            16871,
            format!("'{name}' contains an invalid character for a variable name"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(d: Document) -> LetVars {
        let raw = bson::RawDocumentBuf::try_from(&doc! {"let": d}).unwrap();
        LetVars::from_body("find", &raw).unwrap()
    }

    fn eval(e: &Bson, root: &Document) -> Option<Bson> {
        Expr::parse(e).unwrap().eval(root, &Vars::new()).unwrap()
    }

    #[test]
    fn variables_become_literals_in_expressions() {
        let v = vars(doc! {"id": 2, "sub": {"a": [1, 2]}, "sum": {"$add": [1, 2]}});
        let cases = [
            (Bson::String("$$id".into()), Some(Bson::Int32(2))),
            (
                Bson::String("$$sub.a".into()),
                Some(Bson::Array(vec![1.into(), 2.into()])),
            ),
            (Bson::String("$$sum".into()), Some(Bson::Int32(3))),
            (Bson::String("$$other".into()), None),
            (Bson::String("$x".into()), Some(Bson::Int32(7))),
        ];
        for (e, want) in cases {
            let rewritten = v.expr(&e);
            if want.is_none() {
                assert_eq!(
                    rewritten, e,
                    "unknown variables stay for the parser to reject"
                );
                continue;
            }
            assert_eq!(eval(&rewritten, &doc! {"x": 7}), want, "{e}");
        }
    }

    #[test]
    fn filters_rewrite_only_expr() {
        let v = vars(doc! {"id": 1});
        let f = doc! {"a": "$$id", "$expr": {"$eq": ["$_id", "$$id"]}, "$or": [{"$expr": "$$id"}]};
        let out = v.filter(&f);
        assert_eq!(out.get_str("a").unwrap(), "$$id");
        assert_eq!(
            out.get_document("$expr").unwrap(),
            &doc! {"$eq": ["$_id", {"$literal": 1}]}
        );
        assert_eq!(
            out.get_array("$or").unwrap()[0],
            Bson::Document(doc! {"$expr": {"$literal": 1}})
        );
    }

    #[test]
    fn literal_contents_are_left_alone() {
        let v = vars(doc! {"id": 1});
        let e = Bson::Document(doc! {"$literal": "$$id"});
        assert_eq!(v.expr(&e), e);
    }

    #[test]
    fn invalid_names_fail_like_mongod() {
        for (name, code) in [("", 16869), ("Upper", 16870), ("a-b", 16871)] {
            let raw = bson::RawDocumentBuf::try_from(&doc! {"let": {name: 1}}).unwrap();
            let err = LetVars::from_body("find", &raw).unwrap_err();
            assert_eq!(err.code.code(), code, "{name}");
        }
    }
}
