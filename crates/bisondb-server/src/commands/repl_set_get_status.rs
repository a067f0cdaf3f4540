//! `replSetGetStatus` (mongosh `rs.status()`): the set as its only member,
//! the primary, sees it.

use bisondb_error::MongoResult;
use bson::{doc, Bson, DateTime, RawDocumentBuf};

use super::{Command, Context};
use crate::repl::hello::op_time;
use crate::reply;
use crate::request::CommandRequest;

pub struct ReplSetGetStatus;

impl Command for ReplSetGetStatus {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        // `initialSync` asks for initial sync progress, which a set that
        // never syncs has none of: accepted, nothing to add.
        if let Some(v) = req
            .body
            .get("initialSync")
            .map_err(crate::request::invalid_bson)?
        {
            crate::fields::as_i64(req.name, "initialSync", v)?;
        }
        Ok(ReplSetGetStatus)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let state = ctx.state;
        let repl = state.repl();
        let set = repl.require_initiated()?;
        let term = set.term;
        let (ts, wall) = repl.last_write();
        let wall = DateTime::from_millis(wall);
        let optime = op_time(ts, term);
        let member = crate::repl::set_config::member(&set.config)
            .cloned()
            .unwrap_or_default();
        let primary = repl.is_writable_primary();
        let (member_state, state_str) = if primary {
            (1i32, "PRIMARY")
        } else {
            (2i32, "SECONDARY")
        };
        let (election_ts, election_wall) = repl.elected_at();
        let uptime = i64::try_from(state.started.elapsed().as_secs()).unwrap_or(i64::MAX);
        reply::ok(doc! {
            "set": repl.set_name().unwrap_or_default(),
            "date": DateTime::now(),
            "myState": member_state,
            "term": term,
            "syncSourceHost": "",
            "syncSourceId": -1i32,
            "heartbeatIntervalMillis": 2000i64,
            "majorityVoteCount": 1i32,
            "writeMajorityCount": 1i32,
            "votingMembersCount": 1i32,
            "writableVotingMembersCount": 1i32,
            "optimes": {
                "lastCommittedOpTime": optime.clone(),
                "lastCommittedWallTime": wall,
                "readConcernMajorityOpTime": optime.clone(),
                "appliedOpTime": optime.clone(),
                "durableOpTime": optime.clone(),
                "writtenOpTime": optime.clone(),
                "lastAppliedWallTime": wall,
                "lastDurableWallTime": wall,
                "lastWrittenWallTime": wall,
            },
            "lastStableRecoveryTimestamp": ts,
            "members": [{
                "_id": member.get("_id").cloned().unwrap_or(Bson::Int32(0)),
                "name": member.get_str("host").unwrap_or_default(),
                "health": 1.0,
                "state": member_state,
                "stateStr": state_str,
                "uptime": uptime,
                "optime": optime.clone(),
                "optimeDate": DateTime::from_millis(i64::from(ts.time) * 1000),
                "optimeWritten": optime,
                "optimeWrittenDate": DateTime::from_millis(i64::from(ts.time) * 1000),
                "lastAppliedWallTime": wall,
                "lastDurableWallTime": wall,
                "lastWrittenWallTime": wall,
                "syncSourceHost": "",
                "syncSourceId": -1i32,
                "infoMessage": "",
                "electionTime": election_ts,
                "electionDate": DateTime::from_millis(election_wall),
                "configVersion": set.config.get_i32("version").unwrap_or(1),
                "configTerm": set.config.get_i64("term").unwrap_or(term),
                "self": true,
                "lastHeartbeatMessage": "",
            }],
        })
    }
}
