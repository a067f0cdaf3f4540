//! `$project` in aggregation: inclusion (with computed fields) or exclusion
//! projections. Shares find's rules (`_id` included unless excluded, no mixing
//! of inclusion and exclusion except `_id`) and adds expressions.
//!
//! Output order follows mongod: in an inclusion projection the kept fields
//! appear in the input document's order, then computed fields in spec order.

use crate::agg::{spec_doc, DocStream, RunCtx, Stage};
use crate::expr::{Expr, Vars};
use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, Document};

/// One field of a projection tree.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Item {
    Include,
    Exclude,
    Computed(Expr),
    Sub(Node),
}

/// A level of the projection tree, fields in spec order.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Node {
    fields: Vec<(String, Item)>,
}

impl Node {
    fn get_mut(&mut self, name: &str) -> Option<&mut Item> {
        self.fields
            .iter_mut()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    fn get(&self, name: &str) -> Option<&Item> {
        self.fields.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    fn has_computed(&self) -> bool {
        self.fields.iter().any(|(_, i)| match i {
            Item::Computed(_) => true,
            Item::Sub(n) => n.has_computed(),
            _ => false,
        })
    }

    /// Inserts `item` at dotted `path`, creating sub-nodes.
    fn insert(&mut self, path: &str, full: &str, item: Item) -> MongoResult<()> {
        let collision = || {
            MongoError::location(
                31250,
                format!("Invalid $project :: caused by :: Path collision at {full}"),
            )
        };
        match path.split_once('.') {
            None => {
                if self.get(path).is_some() {
                    return Err(collision());
                }
                self.fields.push((path.to_string(), item));
                Ok(())
            }
            Some((head, rest)) => {
                if self.get(head).is_none() {
                    self.fields
                        .push((head.to_string(), Item::Sub(Node::default())));
                }
                match self.get_mut(head) {
                    Some(Item::Sub(n)) => n.insert(rest, full, item),
                    _ => Err(collision()),
                }
            }
        }
    }
}

/// Whether the projection keeps listed fields or drops them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Inclusion,
    Exclusion,
}

/// A parsed aggregation projection.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AggProjection {
    root: Node,
    mode: Mode,
}

fn check_field(path: &str) -> MongoResult<()> {
    if path.is_empty() {
        return Err(MongoError::location(
            40352,
            "FieldPath cannot be constructed with empty string",
        ));
    }
    for p in path.split('.') {
        if p.is_empty() {
            return Err(MongoError::location(
                15998,
                "FieldPath field names may not be empty strings.",
            ));
        }
        if p.starts_with('$') {
            return Err(MongoError::location(
                16410,
                format!("FieldPath field names may not start with '$'. Found: {p}"),
            ));
        }
    }
    Ok(())
}

struct ParseState {
    mode: Option<Mode>,
    id_excluded: bool,
}

impl AggProjection {
    pub(crate) fn parse(spec: &Document) -> MongoResult<AggProjection> {
        if spec.is_empty() {
            return Err(MongoError::location(
                51272,
                "Invalid $project :: caused by :: projection specification must have at least one field",
            ));
        }
        let mut st = ParseState {
            mode: None,
            id_excluded: false,
        };
        let mut root = Node::default();
        parse_level(spec, "", &mut root, &mut st)?;
        let mode = st.mode.unwrap_or(if st.id_excluded {
            Mode::Exclusion
        } else {
            Mode::Inclusion
        });
        if mode == Mode::Inclusion && root.get("_id").is_none() {
            root.fields.insert(0, ("_id".to_string(), Item::Include));
        }
        Ok(AggProjection { root, mode })
    }

    /// An exclusion projection of the given paths (`$unset`).
    pub(crate) fn exclusion(paths: &[String]) -> MongoResult<AggProjection> {
        let mut root = Node::default();
        for p in paths {
            check_field(p)?;
            root.insert(p, p, Item::Exclude)?;
        }
        Ok(AggProjection {
            root,
            mode: Mode::Exclusion,
        })
    }

    pub(crate) fn apply(&self, doc: &Document, vars: &Vars) -> MongoResult<Document> {
        match self.mode {
            Mode::Exclusion => {
                let mut out = doc.clone();
                exclude(&self.root, &mut out);
                Ok(out)
            }
            Mode::Inclusion => include(&self.root, doc, doc, vars, true),
        }
    }
}

fn set_mode(st: &mut ParseState, want: Mode, path: &str) -> MongoResult<()> {
    match st.mode {
        None => {
            st.mode = Some(want);
            Ok(())
        }
        Some(m) if m == want => Ok(()),
        Some(Mode::Inclusion) => Err(MongoError::location(
            31254,
            format!("Invalid $project :: caused by :: Cannot do exclusion on field {path} in inclusion projection"),
        )),
        Some(Mode::Exclusion) => Err(MongoError::location(
            31253,
            format!("Invalid $project :: caused by :: Cannot do inclusion on field {path} in exclusion projection"),
        )),
    }
}

fn flag(v: &Bson) -> Option<bool> {
    match v {
        Bson::Boolean(b) => Some(*b),
        Bson::Int32(i) => Some(*i != 0),
        Bson::Int64(i) => Some(*i != 0),
        Bson::Double(d) => Some(*d != 0.0),
        Bson::Decimal128(d) => Some(crate::value::dec_to_f64(d) != 0.0),
        _ => None,
    }
}

fn parse_level(
    spec: &Document,
    prefix: &str,
    node: &mut Node,
    st: &mut ParseState,
) -> MongoResult<()> {
    for (k, v) in spec {
        check_field(k)?;
        let full = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        let is_id = full == "_id";
        let item = match v {
            v if flag(v).is_some() => {
                let keep = flag(v).unwrap_or(true);
                if is_id {
                    if !keep {
                        st.id_excluded = true;
                    }
                } else {
                    set_mode(
                        st,
                        if keep {
                            Mode::Inclusion
                        } else {
                            Mode::Exclusion
                        },
                        &full,
                    )?;
                }
                if keep {
                    Item::Include
                } else {
                    Item::Exclude
                }
            }
            Bson::Document(d) if d.keys().next().is_some_and(|f| f.starts_with('$')) => {
                if !is_id {
                    if st.mode == Some(Mode::Exclusion) {
                        return Err(MongoError::location(
                            31252,
                            "Invalid $project :: caused by :: Cannot use expression other than $meta in exclusion projection",
                        ));
                    }
                    set_mode(st, Mode::Inclusion, &full)?;
                }
                Item::Computed(Expr::parse(v)?)
            }
            Bson::Document(d) => {
                if d.is_empty() {
                    return Err(MongoError::location(
                        51270,
                        format!("Invalid $project :: caused by :: An empty sub-projection is not a valid value. Found empty object at path {full}"),
                    ));
                }
                let mut sub = Node::default();
                parse_level(d, &full, &mut sub, st)?;
                Item::Sub(sub)
            }
            other => {
                if st.mode == Some(Mode::Exclusion) && !is_id {
                    return Err(MongoError::location(
                        31252,
                        "Invalid $project :: caused by :: Cannot use expression other than $meta in exclusion projection",
                    ));
                }
                if !is_id {
                    set_mode(st, Mode::Inclusion, &full)?;
                }
                Item::Computed(Expr::parse(other)?)
            }
        };
        match item {
            // Dotted keys nest; merge into an existing sub-node when present.
            Item::Sub(sub) if node.get(k).is_some() => {
                for (sk, si) in sub.fields {
                    node.insert(&format!("{k}.{sk}"), &full, si)?;
                }
            }
            item => node.insert(k, &full, item)?,
        }
    }
    Ok(())
}

fn exclude(node: &Node, doc: &mut Document) {
    for (k, item) in &node.fields {
        match item {
            Item::Exclude => {
                doc.remove(k);
            }
            Item::Sub(n) => match doc.get_mut(k) {
                Some(Bson::Document(d)) => exclude(n, d),
                Some(Bson::Array(a)) => exclude_array(n, a),
                _ => {}
            },
            _ => {}
        }
    }
}

fn exclude_array(node: &Node, a: &mut [Bson]) {
    for x in a.iter_mut() {
        match x {
            Bson::Document(d) => exclude(node, d),
            Bson::Array(inner) => exclude_array(node, inner),
            _ => {}
        }
    }
}

fn include(
    node: &Node,
    doc: &Document,
    root: &Document,
    vars: &Vars,
    top: bool,
) -> MongoResult<Document> {
    let mut out = Document::new();
    // _id computed at top level still goes first.
    if top {
        if let Some(Item::Computed(e)) = node.get("_id") {
            if let Some(v) = e.eval(root, vars)? {
                out.insert("_id", v);
            }
        }
    }
    for (k, v) in doc {
        match node.get(k) {
            Some(Item::Include) => {
                out.insert(k.clone(), v.clone());
            }
            Some(Item::Sub(n)) => match v {
                Bson::Document(d) => {
                    out.insert(k.clone(), include(n, d, root, vars, false)?);
                }
                Bson::Array(a) => {
                    out.insert(k.clone(), include_array(n, a, root, vars)?);
                }
                _ => {}
            },
            _ => {}
        }
    }
    for (k, item) in &node.fields {
        match item {
            Item::Computed(e) if !(top && k == "_id") => match e.eval(root, vars)? {
                Some(v) => {
                    out.insert(k.clone(), v);
                }
                None => {
                    out.remove(k);
                }
            },
            Item::Sub(n)
                if n.has_computed()
                    && !matches!(doc.get(k), Some(Bson::Document(_) | Bson::Array(_))) =>
            {
                out.insert(k.clone(), include(n, &Document::new(), root, vars, false)?);
            }
            _ => {}
        }
    }
    Ok(out)
}

fn include_array(node: &Node, a: &[Bson], root: &Document, vars: &Vars) -> MongoResult<Bson> {
    let mut out = Vec::with_capacity(a.len());
    for x in a {
        match x {
            Bson::Document(d) => out.push(Bson::Document(include(node, d, root, vars, false)?)),
            Bson::Array(inner) => out.push(include_array(node, inner, root, vars)?),
            // Scalars survive only when the sub-projection computes values.
            _ if node.has_computed() => out.push(Bson::Document(include(
                node,
                &Document::new(),
                root,
                vars,
                false,
            )?)),
            _ => {}
        }
    }
    Ok(Bson::Array(out))
}

#[derive(Debug)]
pub(crate) struct ProjectStage {
    proj: AggProjection,
}

impl ProjectStage {
    pub(crate) fn new(proj: AggProjection) -> ProjectStage {
        ProjectStage { proj }
    }
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let spec = spec_doc(arg, 15969, |_| {
        "$project specification must be an object".to_string()
    })?;
    Ok(vec![Box::new(ProjectStage {
        proj: AggProjection::parse(spec)?,
    })])
}

impl Stage for ProjectStage {
    fn run(self: Box<Self>, input: DocStream, cx: &RunCtx) -> DocStream {
        let vars = cx.vars();
        let proj = self.proj;
        super::map_docs(input, move |d| proj.apply(&d, &vars))
    }
}
