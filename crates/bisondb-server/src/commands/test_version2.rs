//! `testVersion2`: mongod's test-only command that belongs to API version 2
//! and to no other. Drivers' Stable API tests run it under `apiStrict: true`
//! with API version 1 to see the 323 APIStrictError the registry's
//! `api_version_1` fact gives; run without `apiStrict` it answers `{ok: 1}`.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::reply;
use crate::request::CommandRequest;

pub struct TestVersion2;

impl Command for TestVersion2 {
    fn parse(_req: &CommandRequest<'_>) -> MongoResult<Self> {
        Ok(TestVersion2)
    }

    fn execute(self, _ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        reply::ok(doc! {})
    }
}
