//! Which top-level fields of the input document an expression can read.
//!
//! An aggregation that starts with `$group` only looks at the fields its key
//! and accumulators name, so the server converts just those out of the stored
//! BSON instead of the whole document (for seed 003's analysis, `created_on`
//! and `value` but not `_id`). The analysis is conservative: anything that can
//! see the whole document (`$$ROOT`, `$$CURRENT`) answers "unknown". The
//! accumulators' walk (`Accumulator::top_level_deps`) lives with them, above.

use super::Expr;

/// Adds the first component of `path` to `out` (once).
pub(crate) fn push_top(path: &str, out: &mut Vec<String>) {
    let top = path.split('.').next().unwrap_or(path);
    if !out.iter().any(|f| f == top) {
        out.push(top.to_string());
    }
}

impl Expr {
    /// Adds to `out` every top-level field this expression can read from the
    /// document it is evaluated on; `false` when it can read the whole
    /// document (then `out` is incomplete and must not be used).
    pub fn top_level_deps(&self, out: &mut Vec<String>) -> bool {
        match self {
            Expr::Literal(_) | Expr::Missing | Expr::Regex(_) => true,
            Expr::Field(p) => {
                push_top(p, out);
                true
            }
            // `$$ROOT` and `$$CURRENT` are the document itself; other
            // variables hold values computed from expressions walked here
            // (`$let`, `$map`, `$filter`, `$reduce` bind them from their
            // arguments) or constants (`$$NOW`, user `let`).
            Expr::Var { name, .. } => !matches!(name.as_str(), "ROOT" | "CURRENT"),
            Expr::Object(fields) => fields.iter().all(|(_, e)| e.top_level_deps(out)),
            Expr::Array(items) | Expr::Call(_, items) => {
                items.iter().all(|e| e.top_level_deps(out))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agg::accumulators::Accumulator;
    use bson::bson;

    fn deps(v: bson::Bson) -> Option<Vec<String>> {
        let e = Expr::parse(&v).expect("parses");
        let mut out = Vec::new();
        e.top_level_deps(&mut out).then_some(out)
    }

    #[test]
    fn fields_and_operators() {
        assert_eq!(deps(bson!("$value")), Some(vec!["value".to_string()]));
        assert_eq!(deps(bson!("$a.b.c")), Some(vec!["a".to_string()]));
        assert_eq!(
            deps(bson!({"y": {"$year": "$created_on"}, "d": {"$dayOfMonth": "$created_on"}})),
            Some(vec!["created_on".to_string()])
        );
        assert_eq!(
            deps(bson!({"$add": ["$a", {"$multiply": ["$b.x", 2]}, [1, "$c"]]})),
            Some(vec!["a".to_string(), "b".to_string(), "c".to_string()])
        );
        assert_eq!(deps(bson!(1)), Some(vec![]));
        assert_eq!(deps(bson!("$$NOW")), Some(vec![]));
    }

    #[test]
    fn variables_bound_inside_are_not_fields() {
        let e = bson!({"$map": {"input": "$xs", "as": "x", "in": {"$add": ["$$x", "$k"]}}});
        assert_eq!(deps(e), Some(vec!["xs".to_string(), "k".to_string()]));
        let e = bson!({"$let": {"vars": {"v": "$a"}, "in": "$$v"}});
        assert_eq!(deps(e), Some(vec!["a".to_string()]));
    }

    #[test]
    fn whole_document_is_unknown() {
        assert_eq!(deps(bson!("$$ROOT")), None);
        assert_eq!(deps(bson!("$$CURRENT.a")), None);
        assert_eq!(deps(bson!({"$mergeObjects": ["$$ROOT", {"a": 1}]})), None);
        // $getField reads $$CURRENT when no `input` is given.
        assert_eq!(deps(bson!({"$getField": "a.b"})), None);
    }

    #[test]
    fn accumulators() {
        let a = Accumulator::parse("m", &bson!({"$max": "$value"})).expect("parses");
        let mut out = Vec::new();
        assert!(a.top_level_deps(&mut out));
        assert_eq!(out, vec!["value".to_string()]);
        let spec = bson!({"$top": {"sortBy": {"score": -1}, "output": "$name"}});
        let a = Accumulator::parse("t", &spec).expect("parses");
        let mut out = Vec::new();
        assert!(a.top_level_deps(&mut out));
        assert_eq!(out, vec!["score".to_string(), "name".to_string()]);
    }
}
