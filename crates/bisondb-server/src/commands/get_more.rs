//! `getMore`: the next batch of an open cursor.

use bisondb_error::MongoResult;
use bson::{RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::request::CommandRequest;
use crate::state::OpCounters;

pub struct GetMore {
    id: i64,
    ns: String,
    batch_size: Option<usize>,
    /// `maxTimeMS` was sent: only an `awaitData` cursor takes it (how long to
    /// wait, see `crate::tailable`).
    max_time: bool,
}

impl Command for GetMore {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut id = None;
        let mut coll = None;
        let mut batch_size = None;
        let mut max_time = false;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "getMore" => match v {
                    RawBsonRef::Int64(i) => id = Some(i),
                    other => return Err(fields::wrong_type(n, "getMore", other, "long")),
                },
                "collection" => coll = Some(crate::cursor::cursor_collection(n, v)?.to_string()),
                "batchSize" => {
                    let b = fields::as_non_negative(n, "batchSize", v)? as usize;
                    batch_size = (b > 0).then_some(b);
                }
                "maxTimeMS" => max_time = !matches!(v, RawBsonRef::Null),
                "term" | "lastKnownCommittedOpTime" => {}
                other => fields::check_known(n, other, &[])?,
            }
        }
        let id = id.ok_or_else(|| fields::missing_field(n, "getMore"))?;
        let coll = coll.ok_or_else(|| fields::missing_field(n, "collection"))?;
        Ok(GetMore {
            id,
            ns: crate::namespaces::ns(&req.db, &coll),
            batch_size,
            max_time,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        OpCounters::add(&ctx.state.opcounters.getmore, 1);
        let _pinned = ctx.state.cursors.pin();
        let mut cursor = ctx.state.cursors.take(self.id, &self.ns)?;
        // A cursor is its opener's: no other user may read on (not even one
        // with every privilege), as mongod.
        if !crate::auth::is_coauthorized_with(ctx, cursor.owner.as_deref()) {
            ctx.state.cursors.restore(self.id, cursor);
            return Err(bisondb_error::MongoError::new(
                bisondb_error::ErrorCode::Unauthorized,
                format!(
                    "cursor id {} was not created by the authenticated user",
                    self.id
                ),
            ));
        }
        // mongod checks no privilege before it finds the cursor (an unknown
        // id is 43 to any user), then the opening command's privileges
        // again: `find` on the cursor's collection stands for them here, so
        // a cursor outlives no revoked read access.
        let (db, coll) = self.ns.split_once('.').unwrap_or((self.ns.as_str(), ""));
        if !crate::auth::has_ns_action(ctx, db, coll, crate::auth::Action::Find)? {
            ctx.state.cursors.restore(self.id, cursor);
            return Err(bisondb_error::MongoError::new(
                bisondb_error::ErrorCode::Unauthorized,
                format!("not authorized on {db} to execute command getMore"),
            ));
        }
        if self.max_time && !cursor.is_await_data() {
            ctx.state.cursors.restore(self.id, cursor);
            return Err(bisondb_error::MongoError::bad_value(
                "cannot set maxTimeMS on getMore command for a non-awaitData cursor",
            ));
        }
        ctx.conn.op.resume(cursor.profile.as_ref());
        // The rest of the opening command's maxTimeMS (see `Cursor::time_left`).
        let _deadline = bisondb_js::deadline::scope(
            cursor
                .time_left
                .and_then(|t| std::time::Instant::now().checked_add(t)),
        );
        let change_stream = cursor.stream.is_some();
        // The failure drops the cursor it holds, as mongod's getMore kills
        // its cursor on an error.
        if let Some(e) = ctx.state.fail_points.fail_get_more(change_stream) {
            return Err(e);
        }
        let batch = match cursor.next_batch(self.batch_size) {
            Ok(b) => b,
            Err(e) if change_stream => {
                return Err(crate::fail_points::label_change_stream_error(e))
            }
            Err(e) => return Err(e),
        };
        let token = match &cursor.stream {
            Some(s) => Some(s.post_batch_token(&batch.docs)?),
            None => None,
        };
        let id = if batch.exhausted {
            0
        } else {
            if cursor.time_left.is_some() {
                cursor.time_left = crate::cursor::time_left();
            }
            ctx.state.cursors.restore(self.id, cursor);
            self.id
        };
        match token {
            Some(t) => crate::cursor::stream_reply(&self.ns, id, batch.docs, false, t),
            None => crate::cursor::cursor_reply(&self.ns, id, batch.docs, false),
        }
    }
}
