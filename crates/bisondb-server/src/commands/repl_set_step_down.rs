//! `replSetStepDown` (mongosh `rs.stepDown()`): a primary hands over to a
//! caught-up electable secondary. The only member of a one-member set has
//! none: as mongod, it waits `secondaryCatchUpPeriodSecs` for one and then
//! fails with 262 ExceededTimeLimit, staying primary. `force: true` (step
//! down anyway, leaving the set without a primary for `stepDownSecs`) is
//! not supported.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::RawDocumentBuf;

use super::{Command, Context};
use crate::fields;
use crate::request::CommandRequest;

pub struct ReplSetStepDown {
    step_down_secs: i64,
    catch_up_secs: i64,
    force: bool,
}

impl Command for ReplSetStepDown {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let mut s = ReplSetStepDown {
            step_down_secs: 60,
            catch_up_secs: 10,
            force: false,
        };
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                // `rs.stepDown()` sends the period, or `true` for the default.
                "replSetStepDown" if matches!(v, bson::RawBsonRef::Boolean(_)) => {}
                "replSetStepDown" => {
                    s.step_down_secs = fields::as_i64(req.name, "replSetStepDown", v)?
                }
                "secondaryCatchUpPeriodSecs" => {
                    s.catch_up_secs = fields::as_i64(req.name, "secondaryCatchUpPeriodSecs", v)?
                }
                "force" => s.force = fields::as_bool(req.name, "force", v)?,
                _ => {}
            }
        }
        if s.catch_up_secs < 0 {
            return Err(MongoError::bad_value(
                "secondaryCatchUpPeriodSecs must be a non-negative number",
            ));
        }
        if s.step_down_secs <= s.catch_up_secs {
            return Err(MongoError::bad_value(
                "stepdown period must be longer than secondaryCatchUpPeriodSecs",
            ));
        }
        Ok(s)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let repl = ctx.state.repl();
        repl.require_initiated()?;
        if !repl.is_writable_primary() {
            return Err(MongoError::new(
                ErrorCode::NotWritablePrimary,
                "not primary so can't step down",
            ));
        }
        if self.force {
            return Err(MongoError::new(
                ErrorCode::CommandNotSupported,
                "replSetStepDown with force: true is not supported: BisonDB's one-member replica set stays primary",
            ));
        }
        // Waiting for a secondary that cannot exist: as long as mongod would.
        let wait = std::time::Duration::from_secs(u64::try_from(self.catch_up_secs).unwrap_or(0));
        let until = std::time::Instant::now() + wait;
        while std::time::Instant::now() < until {
            if ctx.state.is_shutting_down() {
                return Err(MongoError::new(
                    ErrorCode::InterruptedAtShutdown,
                    "interrupted at shutdown",
                ));
            }
            bisondb_js::deadline::check()?;
            std::thread::sleep(std::time::Duration::from_millis(50).min(wait));
        }
        let now = bson::DateTime::now();
        Err(MongoError::new(
            ErrorCode::ExceededTimeLimit,
            format!(
                "No electable secondaries caught up as of {}. Please use the replSetStepDown command with the argument {{force: true}} to force node to step down.",
                now.try_to_rfc3339_string().unwrap_or_default()
            ),
        ))
    }
}
