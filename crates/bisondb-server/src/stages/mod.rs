//! The aggregation stages the server provides because they read what only
//! the server has: storage statistics (`$collStats`), index usage counters
//! (`$indexStats`), the session cache (`$listLocalSessions`).

pub mod coll_stats;
pub mod index_stats;
pub mod list_local_sessions;
