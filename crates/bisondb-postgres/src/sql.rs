//! Every SQL statement the engine sends, in one place, limited to what
//! PostgreSQL, CockroachDB and YugabyteDB all accept: `bytea` keys compared
//! as bytes, `INSERT ... ON CONFLICT (k) DO UPDATE`, `= ANY($1)` and
//! `unnest` over arrays, `REPEATABLE READ` transactions, savepoints,
//! `lock_timeout`. The one difference is the primary key's declaration:
//! YugabyteDB shards a plain `PRIMARY KEY (k)` by hash, which would turn
//! every range scan into a scan of all tablets, so on the distributed stores
//! the key is declared `PRIMARY KEY (k ASC)` (range sharding), which
//! PostgreSQL's grammar does not accept.

use std::ops::Bound;

/// The table holding every key and value of the store.
pub const KV_TABLE: &str = "bisondb_kv";

/// The table holding what the store is (its format version).
pub const META_TABLE: &str = "bisondb_meta";

/// The store behind the URI, from `SELECT version()`: only the primary key's
/// declaration depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// PostgreSQL itself (and Citus, which is PostgreSQL).
    Postgres,
    /// CockroachDB or YugabyteDB: range-sharded ordered keys.
    Distributed,
}

impl Flavor {
    /// The flavor `SELECT version()`'s answer names.
    pub fn from_version(version: &str) -> Flavor {
        // YugabyteDB answers "PostgreSQL 11.2-YB-2.20.0.0-b0 on ...".
        if version.contains("CockroachDB") || version.contains("-YB-") {
            Flavor::Distributed
        } else {
            Flavor::Postgres
        }
    }

    /// The statements creating the tables when they are missing.
    pub fn create_tables(self) -> [String; 2] {
        let key = match self {
            Flavor::Postgres => "PRIMARY KEY (k)",
            Flavor::Distributed => "PRIMARY KEY (k ASC)",
        };
        [
            format!("CREATE TABLE IF NOT EXISTS {KV_TABLE} (k BYTEA NOT NULL, v BYTEA NOT NULL, {key})"),
            format!(
                "CREATE TABLE IF NOT EXISTS {META_TABLE} (name TEXT NOT NULL PRIMARY KEY, value TEXT NOT NULL)"
            ),
        ]
    }
}

/// Records the format version unless one is recorded.
pub fn record_format() -> String {
    format!("INSERT INTO {META_TABLE} (name, value) VALUES ('format', $1) ON CONFLICT (name) DO NOTHING")
}

/// Reads the recorded format version.
pub fn read_format() -> String {
    format!("SELECT value FROM {META_TABLE} WHERE name = 'format'")
}

/// One key's value.
pub fn get() -> String {
    format!("SELECT v FROM {KV_TABLE} WHERE k = $1")
}

/// Locks key `$1` against writers until the transaction ends (a guarded
/// commit: `Transaction::commit_batch_guarded`).
pub fn lock_shared() -> String {
    format!("SELECT 1 FROM {KV_TABLE} WHERE k = $1 FOR SHARE")
}

/// One key's value, the key locked against every other locker until the
/// transaction ends (`Transaction::lock_key`).
pub fn lock_exclusive() -> String {
    format!("SELECT v FROM {KV_TABLE} WHERE k = $1 FOR UPDATE")
}

/// The keys of `$1` that are present, with their values (in no order).
pub fn get_many() -> String {
    format!("SELECT k, v FROM {KV_TABLE} WHERE k = ANY($1::BYTEA[])")
}

/// Sets many keys at once (`$1` keys, `$2` values, each key once).
pub fn upsert_many() -> String {
    format!(
        "INSERT INTO {KV_TABLE} (k, v) SELECT * FROM unnest($1::BYTEA[], $2::BYTEA[]) \
         ON CONFLICT (k) DO UPDATE SET v = excluded.v"
    )
}

/// Adds rows whose keys are new, in the binary copy format (`k`, `v`); a key
/// that exists fails the whole copy with a unique violation.
pub fn copy_in() -> String {
    format!("COPY {KV_TABLE} (k, v) FROM STDIN WITH BINARY")
}

/// Sets one key (inside a transaction).
pub fn upsert_one() -> String {
    format!("INSERT INTO {KV_TABLE} (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v")
}

/// Removes many keys at once (`$1` keys).
pub fn delete_many() -> String {
    format!("DELETE FROM {KV_TABLE} WHERE k = ANY($1::BYTEA[])")
}

/// Removes one key (inside a transaction).
pub fn delete_one() -> String {
    format!("DELETE FROM {KV_TABLE} WHERE k = $1")
}

/// The bytes the table and its index use, where the store can tell
/// (PostgreSQL); other stores fail it and report 0.
pub fn table_size() -> String {
    format!("SELECT pg_total_relation_size('{KV_TABLE}')::BIGINT")
}

/// A bound's shape, without its key: what the scan statement depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edge {
    Included,
    Excluded,
    Unbounded,
}

impl Edge {
    /// The shape of `b`.
    pub fn of<T>(b: &Bound<T>) -> Edge {
        match b {
            Bound::Included(_) => Edge::Included,
            Bound::Excluded(_) => Edge::Excluded,
            Bound::Unbounded => Edge::Unbounded,
        }
    }
}

/// One page of a range scan: keys between the bounds (each a parameter when
/// bounded, in order start then end), in key order or its reverse, with the
/// page size as the last parameter. Cursors continue with the last key
/// returned as an excluded bound (keyset pagination), so no page skips over
/// rows it read before.
pub fn scan(start: Edge, end: Edge, reverse: bool) -> String {
    let mut conds = Vec::new();
    let mut n = 0;
    let mut param = || {
        n += 1;
        n
    };
    match start {
        Edge::Included => conds.push(format!("k >= ${}", param())),
        Edge::Excluded => conds.push(format!("k > ${}", param())),
        Edge::Unbounded => {}
    }
    match end {
        Edge::Included => conds.push(format!("k <= ${}", param())),
        Edge::Excluded => conds.push(format!("k < ${}", param())),
        Edge::Unbounded => {}
    }
    let filter = if conds.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conds.join(" AND "))
    };
    let order = if reverse { "DESC" } else { "ASC" };
    let limit = param();
    format!("SELECT k, v FROM {KV_TABLE}{filter} ORDER BY k {order} LIMIT ${limit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_statements_number_their_parameters() {
        assert_eq!(
            scan(Edge::Included, Edge::Excluded, false),
            "SELECT k, v FROM bisondb_kv WHERE k >= $1 AND k < $2 ORDER BY k ASC LIMIT $3"
        );
        assert_eq!(
            scan(Edge::Unbounded, Edge::Included, true),
            "SELECT k, v FROM bisondb_kv WHERE k <= $1 ORDER BY k DESC LIMIT $2"
        );
        assert_eq!(
            scan(Edge::Unbounded, Edge::Unbounded, false),
            "SELECT k, v FROM bisondb_kv ORDER BY k ASC LIMIT $1"
        );
    }

    #[test]
    fn distributed_stores_range_shard_the_key() {
        assert_eq!(
            Flavor::from_version("CockroachDB CCL v23.2.0"),
            Flavor::Distributed
        );
        assert_eq!(
            Flavor::from_version("PostgreSQL 11.2-YB-2.20.0.0-b0 on x86_64-pc-linux-gnu"),
            Flavor::Distributed
        );
        assert_eq!(
            Flavor::from_version("PostgreSQL 15.8 (Debian 15.8-0+deb12u1) on x86_64"),
            Flavor::Postgres
        );
        assert!(Flavor::Distributed.create_tables()[0].contains("PRIMARY KEY (k ASC)"));
        assert!(Flavor::Postgres.create_tables()[0].contains("PRIMARY KEY (k)"));
    }
}
