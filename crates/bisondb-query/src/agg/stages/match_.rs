//! `$match`: filters documents with the query matcher.

use crate::agg::{spec_doc, DocStream, RunCtx, Stage};
use crate::matcher::Matcher;
use bisondb_error::MongoResult;
use bson::{Bson, Document};

#[derive(Debug)]
pub(crate) struct MatchStage {
    filter: Document,
    matcher: Matcher,
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let filter = spec_doc(arg, 15959, |_| {
        "the match filter must be an expression in an object".to_string()
    })?;
    let matcher = Matcher::parse_doc(filter)?;
    // A $match filters; it cannot order by distance.
    if matcher.near().is_some() {
        return Err(bisondb_error::MongoError::location(
            5626500,
            "$geoNear, $near, and $nearSphere are not allowed in this context, as these operators require sorting geospatial data. If you do not need sort, consider using $geoWithin instead.",
        ));
    }
    // mongod parses a pipeline's filters without JavaScript.
    if matcher.has_where() {
        return Err(bisondb_error::MongoError::bad_value(
            "$where is not allowed in this context",
        ));
    }
    Ok(vec![Box::new(MatchStage {
        filter: filter.clone(),
        matcher,
    })])
}

impl Stage for MatchStage {
    fn run(self: Box<Self>, input: DocStream, cx: &RunCtx) -> DocStream {
        // A `$text` is bound to the text index only when this `$match` is the
        // pipeline's first stage on a collection (the planner runs it).
        if self.matcher.text_params().is_some() && self.matcher.bound_text().is_none() {
            return Box::new(std::iter::once(Err(bisondb_error::MongoError::location(
                17313,
                "$match with $text is only allowed as the first pipeline stage",
            ))));
        }
        let m = self.matcher.with_collation(cx.collation.clone());
        Box::new(input.filter(move |r| match r {
            Ok(d) => m.matches_doc(d),
            Err(_) => true,
        }))
    }

    fn match_filter(&self) -> Option<&Document> {
        Some(&self.filter)
    }
}
