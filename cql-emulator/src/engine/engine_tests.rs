//! Engine tests: CQL text in, rows out, no network. `model_tests.rs` holds
//! the model test against the embedded store.

use std::sync::Arc;
use std::time::Duration;

use lockshift_store::{ManualClock, Timestamp};

use super::*;
use crate::engine::compile::ResultColumn;
use crate::types::CqlType;

const START: i64 = 1_700_000_000_000_000;

pub(crate) struct Db {
    pub(crate) engine: Engine,
    pub(crate) clock: Arc<ManualClock>,
    pub(crate) keyspace: Option<String>,
}

fn render(ty: &CqlType, v: &Option<Vec<u8>>) -> String {
    let Some(b) = v else { return "null".into() };
    match ty.unfrozen() {
        CqlType::Text | CqlType::Ascii => String::from_utf8_lossy(b).into_owned(),
        CqlType::Int => crate::value::as_i32(b).map_or("?".into(), |x| x.to_string()),
        CqlType::Bigint | CqlType::Timestamp => {
            crate::value::as_i64(b).map_or("?".into(), |x| x.to_string())
        }
        CqlType::Boolean => (b.first() == Some(&1)).to_string(),
        _ => format!(
            "0x{}",
            b.iter().map(|x| format!("{x:02x}")).collect::<String>()
        ),
    }
}

impl Db {
    pub(crate) fn new() -> Db {
        let clock = Arc::new(ManualClock::new(Timestamp::from_micros(START)));
        let node = NodeInfo {
            host_id: Uuid::nil(),
            rpc_address: "127.0.0.1".parse().unwrap(),
            rpc_port: 9042,
            cluster_name: "test".into(),
            data_center: "dc".into(),
            rack: "r".into(),
        };
        let engine = Engine::new(
            clock.clone(),
            node,
            FaultController::new(),
            3600,
            TombstoneThresholds::default(),
        );
        Db {
            engine,
            clock,
            keyspace: None,
        }
    }

    /// A Db with keyspace `ks` and lockshift's table shape as `ks.main`.
    pub(crate) fn lockshift() -> Db {
        let mut db = Db::new();
        db.ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
        db.ok("CREATE TABLE ks.main (row_key text, column_name text, value blob, PRIMARY KEY ((row_key), column_name)) WITH CLUSTERING ORDER BY (column_name ASC)");
        db
    }

    pub(crate) fn prepare(&self, cql: &str) -> Result<Prepared, CqlError> {
        let stmt = crate::parse::parse(cql)?;
        self.engine.compile(self.keyspace.as_deref(), &stmt)
    }

    pub(crate) fn exec(
        &mut self,
        p: &Prepared,
        values: &[Value],
        page: Option<usize>,
        state: Option<&[u8]>,
    ) -> Result<Outcome, CqlError> {
        let opts = ExecOptions {
            values,
            page_size: page,
            paging_state: state,
            default_timestamp: None,
            consistency: 4,
        };
        self.engine.execute(p, &opts)
    }

    pub(crate) fn run(&mut self, cql: &str) -> Result<(Vec<ResultColumn>, Page), CqlError> {
        let p = self.prepare(cql)?;
        match self.exec(&p, &[], None, None)? {
            Outcome::Rows(page) => Ok((p.result.clone(), page)),
            Outcome::Cas(columns, page) => Ok((columns, page)),
            Outcome::SetKeyspace(ks) => {
                self.keyspace = Some(ks);
                Ok((Vec::new(), Page::default()))
            }
            _ => Ok((Vec::new(), Page::default())),
        }
    }

    pub(crate) fn ok(&mut self, cql: &str) {
        if let Err(e) = self.run(cql) {
            panic!("{cql}: {}", e.message);
        }
    }

    pub(crate) fn err(&mut self, cql: &str) -> CqlError {
        match self.run(cql) {
            Ok(_) => panic!("{cql} succeeded"),
            Err(e) => e,
        }
    }

    /// Rows rendered as `a|b|c`.
    pub(crate) fn rows(&mut self, cql: &str) -> Vec<String> {
        let (cols, page) = self
            .run(cql)
            .unwrap_or_else(|e| panic!("{cql}: {}", e.message));
        page.rows
            .iter()
            .map(|r| {
                r.iter()
                    .zip(&cols)
                    .map(|(v, c)| render(&c.ty, v))
                    .collect::<Vec<_>>()
                    .join("|")
            })
            .collect()
    }

    pub(crate) fn advance(&self, secs: f64) {
        self.clock.advance(Duration::from_secs_f64(secs));
    }
}

// ===== The lockshift statements =====

#[test]
fn tie_goes_to_the_tombstone_and_a_newer_write_survives_an_older_delete() {
    let mut db = Db::lockshift();
    db.ok("INSERT INTO ks.main (row_key, column_name, value) VALUES ('r', 'c', 0x01) USING TIMESTAMP 10");
    db.ok("DELETE FROM ks.main USING TIMESTAMP 10 WHERE row_key = 'r' AND column_name = 'c'");
    assert!(
        db.rows("SELECT column_name FROM ks.main WHERE row_key = 'r'")
            .is_empty()
    );
    // A late write at the delete's timestamp stays shadowed (invariant 1 of `engine::data`).
    db.ok("INSERT INTO ks.main (row_key, column_name, value) VALUES ('r', 'c', 0x02) USING TIMESTAMP 10");
    assert!(
        db.rows("SELECT column_name FROM ks.main WHERE row_key = 'r'")
            .is_empty()
    );
    db.ok("INSERT INTO ks.main (row_key, column_name, value) VALUES ('r', 'c', 0x03) USING TIMESTAMP 11");
    db.ok("DELETE FROM ks.main USING TIMESTAMP 9 WHERE row_key = 'r' AND column_name = 'c'");
    assert_eq!(
        db.rows("SELECT column_name, value, writetime(value) FROM ks.main WHERE row_key = 'r'"),
        ["c|0x03|11"]
    );
}

#[test]
fn ttl_runs_on_the_engine_clock_from_apply_time() {
    let mut db = Db::lockshift();
    db.ok("INSERT INTO ks.main (row_key, column_name, value) VALUES ('r', 'a', 0x) USING TTL 10 AND TIMESTAMP 1");
    db.ok("INSERT INTO ks.main (row_key, column_name, value) VALUES ('r', 'b', 0x) USING TTL 0 AND TIMESTAMP 1");
    assert_eq!(
        db.rows("SELECT column_name, ttl(value) FROM ks.main WHERE row_key = 'r'"),
        ["a|10", "b|null"]
    );
    db.advance(2.5);
    assert_eq!(
        db.rows("SELECT column_name, ttl(value) FROM ks.main WHERE row_key = 'r'"),
        ["a|8", "b|null"]
    );
    db.advance(7.5);
    assert_eq!(
        db.rows("SELECT column_name FROM ks.main WHERE row_key = 'r'"),
        ["b"]
    );
    // The expired cell is a tombstone at its timestamp: an older write stays hidden.
    db.ok(
        "INSERT INTO ks.main (row_key, column_name, value) VALUES ('r', 'a', 0x) USING TIMESTAMP 0",
    );
    assert_eq!(
        db.rows("SELECT column_name FROM ks.main WHERE row_key = 'r'"),
        ["b"]
    );
}

#[test]
fn limit_counts_live_rows_and_start_column_is_inclusive() {
    let mut db = Db::lockshift();
    for (c, ttl) in [("d", 0), ("a", 1), ("c", 0), ("b", 0)] {
        db.ok(&format!("INSERT INTO ks.main (row_key, column_name, value) VALUES ('r', '{c}', 0x) USING TTL {ttl} AND TIMESTAMP 5"));
    }
    db.advance(1.0);
    assert_eq!(
        db.rows("SELECT column_name FROM ks.main WHERE row_key = 'r' LIMIT 2"),
        ["b", "c"]
    );
    assert_eq!(
        db.rows(
            "SELECT column_name FROM ks.main WHERE row_key = 'r' AND column_name >= 'c' LIMIT 5"
        ),
        ["c", "d"]
    );
    assert_eq!(db.rows("SELECT column_name FROM ks.main WHERE row_key = 'r' AND column_name > 'b' AND column_name < 'd'"), ["c"]);
    assert_eq!(
        db.err("SELECT * FROM ks.main WHERE row_key = 'r' LIMIT 0")
            .message,
        "LIMIT must be strictly positive"
    );
}

#[test]
fn server_timestamps_strictly_increase_on_a_stopped_clock() {
    let mut db = Db::lockshift();
    db.ok("INSERT INTO ks.main (row_key, column_name, value) VALUES ('r', 'c', 0x01)");
    db.ok("INSERT INTO ks.main (row_key, column_name, value) VALUES ('r', 'c', 0x02)");
    let rows = db.rows("SELECT value, writetime(value) FROM ks.main WHERE row_key = 'r'");
    assert_eq!(rows.len(), 1);
    let (value, wt) = rows[0].split_once('|').unwrap();
    assert_eq!(
        value, "0x02",
        "the second write must win: its timestamp is higher"
    );
    assert!(wt.parse::<i64>().unwrap() > START, "{wt}");
}

#[test]
fn distinct_keys_page_by_position() {
    let mut db = Db::lockshift();
    for i in 0..20 {
        db.ok(&format!("INSERT INTO ks.main (row_key, column_name, value) VALUES ('k{i:02}', 'c', 0x) USING TIMESTAMP 1"));
    }
    db.ok("DELETE FROM ks.main USING TIMESTAMP 2 WHERE row_key = 'k05' AND column_name = 'c'");
    let p = db.prepare("SELECT DISTINCT row_key FROM ks.main").unwrap();
    let mut seen = Vec::new();
    let mut state: Option<Vec<u8>> = None;
    let mut pages = 0;
    loop {
        let Outcome::Rows(page) = db.exec(&p, &[], Some(6), state.as_deref()).unwrap() else {
            panic!()
        };
        assert!(page.rows.len() <= 6);
        seen.extend(
            page.rows
                .iter()
                .map(|r| String::from_utf8(r[0].clone().unwrap()).unwrap()),
        );
        pages += 1;
        if pages == 2 {
            // A key deleted and one written mid-scan never make a key repeat.
            db.ok(
                "DELETE FROM ks.main USING TIMESTAMP 3 WHERE row_key = 'k00' AND column_name = 'c'",
            );
            db.ok("INSERT INTO ks.main (row_key, column_name, value) VALUES ('new', 'c', 0x) USING TIMESTAMP 3");
        }
        match page.paging_state {
            Some(s) => state = Some(s),
            None => break,
        }
    }
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), seen.len(), "no key twice: {seen:?}");
    assert!(
        !seen.contains(&"k05".to_string()),
        "a dead row's key is not listed"
    );
    for i in (1..20).filter(|i| *i != 5) {
        assert!(
            seen.contains(&format!("k{i:02}")),
            "k{i:02} missing from {seen:?}"
        );
    }
    assert_eq!(
        pages, 4,
        "19-20 keys in pages of 6, and no empty trailing page"
    );
}

#[test]
fn row_paging_resumes_after_the_last_row_in_both_directions() {
    let mut db = Db::new();
    db.ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
    db.ok("CREATE TABLE ks.t (k int, c int, v text, PRIMARY KEY (k, c)) WITH CLUSTERING ORDER BY (c DESC)");
    for k in 0..3 {
        for c in 0..5 {
            db.ok(&format!(
                "INSERT INTO ks.t (k, c, v) VALUES ({k}, {c}, 'v{k}{c}')"
            ));
        }
    }
    for (cql, expect) in [
        (
            "SELECT v FROM ks.t WHERE k = 1",
            vec!["v14", "v13", "v12", "v11", "v10"],
        ),
        (
            "SELECT v FROM ks.t WHERE k = 1 ORDER BY c ASC",
            vec!["v10", "v11", "v12", "v13", "v14"],
        ),
        (
            "SELECT v FROM ks.t WHERE k IN (2, 0) AND c >= 3",
            vec!["v04", "v03", "v24", "v23"],
        ),
        (
            "SELECT v FROM ks.t WHERE k = 1 AND c < 4 AND c > 1 LIMIT 5",
            vec!["v13", "v12"],
        ),
        (
            "SELECT v FROM ks.t WHERE k = 1 AND c IN (0, 3, 3) ",
            vec!["v13", "v10"],
        ),
    ] {
        let p = db.prepare(cql).unwrap();
        let mut got = Vec::new();
        let mut state: Option<Vec<u8>> = None;
        loop {
            let Outcome::Rows(page) = db.exec(&p, &[], Some(2), state.as_deref()).unwrap() else {
                panic!()
            };
            got.extend(
                page.rows
                    .iter()
                    .map(|r| String::from_utf8(r[0].clone().unwrap()).unwrap()),
            );
            match page.paging_state {
                Some(s) => state = Some(s),
                None => break,
            }
        }
        // IN orders partitions by token; compare as a set there.
        if cql.contains(" IN (2, 0)") {
            let mut g = got.clone();
            g.sort();
            let mut e = expect.clone();
            e.sort();
            assert_eq!(g, e, "{cql}");
        } else {
            assert_eq!(got, expect, "{cql}");
        }
    }
    // ORDER BY over several partitions sorts all rows, then applies LIMIT.
    let rows = db.rows("SELECT v FROM ks.t WHERE k IN (0, 1, 2) ORDER BY c ASC LIMIT 2");
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|v| v.ends_with('0')), "{rows:?}");
    // LIMIT across pages.
    let p = db.prepare("SELECT v FROM ks.t LIMIT 7").unwrap();
    let mut total = 0;
    let mut state: Option<Vec<u8>> = None;
    loop {
        let Outcome::Rows(page) = db.exec(&p, &[], Some(3), state.as_deref()).unwrap() else {
            panic!()
        };
        total += page.rows.len();
        match page.paging_state {
            Some(s) => state = Some(s),
            None => break,
        }
    }
    assert_eq!(total, 7);
}

// ===== The operator subset =====

#[test]
fn deletes_of_cells_ranges_and_partitions() {
    let mut db = Db::new();
    db.ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
    db.ok("USE ks");
    db.ok("CREATE TABLE t (k text, c int, a text, b text, PRIMARY KEY (k, c))");
    for c in 0..6 {
        db.ok(&format!(
            "INSERT INTO t (k, c, a, b) VALUES ('x', {c}, 'a{c}', 'b{c}') USING TIMESTAMP 10"
        ));
    }
    db.ok("DELETE a FROM t USING TIMESTAMP 11 WHERE k = 'x' AND c = 0");
    assert_eq!(
        db.rows("SELECT c, a, b FROM t WHERE k = 'x' AND c = 0"),
        ["0|null|b0"]
    );
    db.ok("DELETE FROM t USING TIMESTAMP 11 WHERE k = 'x' AND c >= 2 AND c < 4");
    assert_eq!(
        db.rows("SELECT c FROM t WHERE k = 'x'"),
        ["0", "1", "4", "5"]
    );
    // The range tombstone shadows a late, older write into the range.
    db.ok("INSERT INTO t (k, c, a) VALUES ('x', 3, 'late') USING TIMESTAMP 9");
    assert_eq!(
        db.rows("SELECT c FROM t WHERE k = 'x'"),
        ["0", "1", "4", "5"]
    );
    db.ok("DELETE FROM t USING TIMESTAMP 12 WHERE k = 'x'");
    assert!(db.rows("SELECT c FROM t WHERE k = 'x'").is_empty());
    db.ok("INSERT INTO t (k, c, a) VALUES ('x', 1, 'new') USING TIMESTAMP 13");
    assert_eq!(
        db.rows("SELECT c, a, b FROM t WHERE k = 'x'"),
        ["1|new|null"]
    );
    // UPDATE writes no row marker: nulling its only cell removes the row.
    db.ok("UPDATE t USING TIMESTAMP 20 SET a = 'u' WHERE k = 'y' AND c = 1");
    assert_eq!(db.rows("SELECT a FROM t WHERE k = 'y'"), ["u"]);
    db.ok("UPDATE t USING TIMESTAMP 21 SET a = null WHERE k = 'y' AND c = 1");
    assert!(db.rows("SELECT a FROM t WHERE k = 'y'").is_empty());
    db.ok("TRUNCATE t");
    assert!(db.rows("SELECT * FROM t").is_empty());
}

#[test]
fn token_scans_count_and_filtering() {
    let mut db = Db::lockshift();
    for i in 0..10 {
        db.ok(&format!(
            "INSERT INTO ks.main (row_key, column_name, value) VALUES ('k{i}', 'c', 0x0{i})"
        ));
    }
    let tokens: Vec<i64> = db
        .rows("SELECT token(row_key) FROM ks.main")
        .iter()
        .map(|t| t.parse().unwrap())
        .collect();
    assert_eq!(tokens.len(), 10);
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "scan is in token order"
    );
    let after = db.rows(&format!(
        "SELECT token(row_key) FROM ks.main WHERE token(row_key) > {}",
        tokens[4]
    ));
    assert_eq!(after.len(), 5);
    assert_eq!(db.rows("SELECT count(*) FROM ks.main"), ["10"]);
    assert_eq!(
        db.rows("SELECT COUNT(1) FROM ks.main WHERE row_key IN ('k1', 'k2', 'zz')"),
        ["2"]
    );
    assert!(
        db.err("SELECT * FROM ks.main WHERE value = 0x01")
            .message
            .contains("ALLOW FILTERING")
    );
    assert_eq!(
        db.rows("SELECT row_key FROM ks.main WHERE value = 0x03 ALLOW FILTERING"),
        ["k3"]
    );
}

#[test]
fn ddl_keeps_system_schema_in_step_and_bumps_the_version() {
    let mut db = Db::new();
    let v0 = db.rows("SELECT schema_version FROM system.local WHERE key = 'local'");
    db.ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
    db.ok("CREATE TABLE ks.t (k int, c text, v list<int>, PRIMARY KEY ((k), c)) WITH CLUSTERING ORDER BY (c DESC) AND default_time_to_live = 60");
    let v1 = db.rows("SELECT schema_version FROM system.local WHERE key = 'local'");
    assert_ne!(v0, v1);
    assert_eq!(
        db.rows("SELECT column_name, kind, position, type, clustering_order FROM system_schema.columns WHERE keyspace_name = 'ks' AND table_name = 't'"),
        ["c|clustering|0|text|desc", "k|partition_key|0|int|none", "v|regular|-1|list<int>|none"]
    );
    assert_eq!(db.rows("SELECT table_name, default_time_to_live FROM system_schema.tables WHERE keyspace_name = 'ks'"), ["t|60"]);
    db.ok("CREATE TABLE IF NOT EXISTS ks.t (k int PRIMARY KEY)");
    assert!(matches!(
        db.err("CREATE TABLE ks.t (k int PRIMARY KEY)").kind,
        crate::error::ErrorKind::AlreadyExists { .. }
    ));
    db.ok("DROP TABLE ks.t");
    assert!(
        db.rows("SELECT table_name FROM system_schema.tables WHERE keyspace_name = 'ks'")
            .is_empty()
    );
    assert!(
        db.rows("SELECT column_name FROM system_schema.columns WHERE keyspace_name = 'ks'")
            .is_empty()
    );
    db.ok("DROP KEYSPACE ks");
    assert!(
        db.rows("SELECT * FROM system_schema.keyspaces WHERE keyspace_name = 'ks'")
            .is_empty()
    );
    assert_eq!(
        db.err("DROP KEYSPACE ks").message,
        "Cannot drop non existing keyspace 'ks'."
    );
    db.ok("DROP KEYSPACE IF EXISTS ks");
}

#[test]
fn default_ttl_applies_unless_a_ttl_is_given() {
    let mut db = Db::new();
    db.ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
    db.ok("CREATE TABLE ks.t (k int PRIMARY KEY, v int) WITH default_time_to_live = 5");
    db.ok("INSERT INTO ks.t (k, v) VALUES (1, 1)");
    db.ok("INSERT INTO ks.t (k, v) VALUES (2, 2) USING TTL 0");
    db.ok("INSERT INTO ks.t (k, v) VALUES (3, 3) USING TTL 100");
    assert_eq!(
        db.rows("SELECT k, ttl(v) FROM ks.t WHERE k IN (1, 2, 3)")
            .len(),
        3
    );
    db.advance(6.0);
    let mut left = db.rows("SELECT k FROM ks.t");
    left.sort();
    assert_eq!(left, ["2", "3"]);
}

#[test]
fn people_get_errors_they_understand() {
    let mut db = Db::lockshift();
    let cases = [
        ("SELECT * FROM ks.nope", "unconfigured table nope"),
        ("SELECT * FROM nope.t", "Keyspace nope does not exist"),
        ("SELECT * FROM main", "No keyspace has been specified"),
        ("SELECT nope FROM ks.main", "Undefined column name nope"),
        (
            "SELECT * FROM ks.main WHERE column_name = 'x'",
            "ALLOW FILTERING",
        ),
        (
            "INSERT INTO ks.main (row_key, value) VALUES ('r', 0x)",
            "Some clustering keys are missing: column_name",
        ),
        (
            "INSERT INTO ks.main (row_key, column_name) VALUES ('r', 1)",
            "Invalid INTEGER constant (1) for \"column_name\" of type text",
        ),
        (
            "INSERT INTO ks.main (row_key, column_name, value) VALUES ('', 'c', 0x)",
            "Key may not be empty",
        ),
        (
            "UPDATE ks.main SET value = 0x WHERE row_key = 'r' AND column_name = 'c' IF value != 0x",
            "only `=`, `<`, `<=`, `>`, `>=` conditions",
        ),
        (
            "INSERT INTO ks.main (row_key, column_name, value) VALUES ('r', 'c', 0x) USING TTL -1",
            "A TTL must be greater or equal to 0, but was -1",
        ),
        (
            "UPDATE ks.main SET row_key = 'x' WHERE row_key = 'r' AND column_name = 'c'",
            "PRIMARY KEY part row_key found in SET part",
        ),
        (
            "DELETE FROM ks.main WHERE column_name = 'c'",
            "Some partition key parts are missing: row_key",
        ),
        (
            "SELECT writetime(row_key) FROM ks.main",
            "Cannot use selection function writetime on PRIMARY KEY part row_key",
        ),
        (
            "SELECT * FROM ks.main WHERE row_key = 'r' ORDER BY value",
            "Order by",
        ),
        (
            "INSERT INTO system.local (key) VALUES ('x')",
            "system keyspace is not user-modifiable",
        ),
        ("DROP KEYSPACE system_schema", "not user-modifiable"),
        (
            "CREATE TABLE ks.s (k int PRIMARY KEY, s int STATIC)",
            "static columns are not supported",
        ),
        (
            "CREATE TABLE ks.s (k int PRIMARY KEY, c counter)",
            "counter columns are not supported",
        ),
        (
            "CREATE TABLE ks.s (k list<int> PRIMARY KEY)",
            "Invalid non-frozen collection type",
        ),
        (
            "CREATE TABLE ks.s (k int, c int, PRIMARY KEY (k, c)) WITH CLUSTERING ORDER BY (k ASC)",
            "CLUSTERING ORDER BY",
        ),
        (
            "CREATE TABLE ks.s (k int PRIMARY KEY) WITH bogus = 1",
            "Unknown property 'bogus'",
        ),
        (
            "CREATE KEYSPACE k2 WITH replication = {'class': 'Nope'}",
            "Unable to find replication strategy class 'Nope'",
        ),
        ("USE nope", "Keyspace 'nope' does not exist"),
        (
            "BEGIN COUNTER BATCH UPDATE ks.main SET value = 0x WHERE row_key = 'r' AND column_name = 'c' APPLY BATCH",
            "counter batches",
        ),
    ];
    for (i, (cql, want)) in cases.iter().enumerate() {
        let e = db.err(cql);
        assert!(
            e.message.contains(want),
            "case #{i} {cql}: got '{}', want '{want}'",
            e.message
        );
    }
}

#[test]
fn prepared_bind_specs_follow_marker_roles() {
    let db = Db::lockshift();
    let types = |p: &Prepared| {
        p.binds
            .iter()
            .map(|b| (b.name.clone(), b.ty.to_string()))
            .collect::<Vec<_>>()
    };
    let p = db.prepare("INSERT INTO ks.main (row_key, column_name, value) VALUES (?, ?, ?) USING TTL ? AND TIMESTAMP ?").unwrap();
    assert_eq!(
        types(&p),
        [
            ("row_key", "text"),
            ("column_name", "text"),
            ("value", "blob"),
            ("[ttl]", "int"),
            ("[timestamp]", "bigint")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    assert_eq!(p.pk_indexes, [0]);
    assert!(p.result.is_empty());
    let p = db
        .prepare("DELETE FROM ks.main USING TIMESTAMP ? WHERE row_key = ? AND column_name = ?")
        .unwrap();
    assert_eq!(p.pk_indexes, [1]);
    assert_eq!(
        types(&p)[0],
        ("[timestamp]".to_string(), "bigint".to_string())
    );
    let p = db.prepare("SELECT column_name, value, writetime(value), ttl(value) FROM ks.main WHERE row_key = ? AND column_name >= ? LIMIT ?").unwrap();
    assert_eq!(types(&p)[2], ("[limit]".to_string(), "int".to_string()));
    let result: Vec<String> = p
        .result
        .iter()
        .map(|c| format!("{}:{}", c.name, c.ty))
        .collect();
    assert_eq!(
        result,
        [
            "column_name:text",
            "value:blob",
            "writetime(value):bigint",
            "ttl(value):int"
        ]
    );
    let p = db
        .prepare("SELECT keyspace_name FROM system_schema.tables WHERE keyspace_name IN ?")
        .unwrap();
    assert_eq!(
        types(&p),
        [("in(keyspace_name)".to_string(), "list<text>".to_string())]
    );
    assert!(p.pk_indexes.is_empty());
}

#[test]
fn batch_text_shares_one_timestamp_and_is_all_or_nothing() {
    let mut db = Db::lockshift();
    db.ok("BEGIN UNLOGGED BATCH INSERT INTO ks.main (row_key, column_name, value) VALUES ('r', 'a', 0x); INSERT INTO ks.main (row_key, column_name, value) VALUES ('r', 'b', 0x); APPLY BATCH");
    let wt = db.rows("SELECT writetime(value) FROM ks.main WHERE row_key = 'r'");
    assert_eq!(wt.len(), 2);
    assert_eq!(wt[0], wt[1]);
    let e = db.err("BEGIN BATCH INSERT INTO ks.main (row_key, column_name, value) VALUES ('r', 'c', 0x) INSERT INTO ks.main (row_key, column_name, value) VALUES ('', 'd', 0x) APPLY BATCH");
    assert!(e.message.contains("Key may not be empty"));
    assert_eq!(
        db.rows("SELECT column_name FROM ks.main WHERE row_key = 'r'"),
        ["a", "b"],
        "nothing of a failed batch applied"
    );
    assert!(db.err("BEGIN BATCH USING TIMESTAMP 1 INSERT INTO ks.main (row_key, column_name, value) VALUES ('r', 'c', 0x) USING TIMESTAMP 2 APPLY BATCH").message.contains("either on BATCH or individual"));
}

#[test]
fn fault_table_round_trips_rules() {
    let mut db = Db::new();
    db.ok("INSERT INTO lockshift_emulator.faults (id, fault, tables, ops, times) VALUES ('t1', 'write_timeout', {'ks.main'}, 'write', 2)");
    db.ok("INSERT INTO lockshift_emulator.faults (id, fault, latency_ms, probability, seed) VALUES ('slow', 'latency', 50, 0.5, 7)");
    assert_eq!(
        db.rows("SELECT id, fault, ops, times, remaining, fired FROM lockshift_emulator.faults WHERE id = 't1'"),
        ["t1|write_timeout|write|2|2|0"]
    );
    let rules = db.engine.faults.rules();
    assert_eq!(rules.len(), 2);
    assert_eq!(
        rules[1].rule.fault(),
        crate::Fault::Latency(Duration::from_millis(50))
    );
    let e = db.err("INSERT INTO lockshift_emulator.faults (id, fault) VALUES ('bad', 'explode')");
    assert!(
        e.message.contains("unknown fault 'explode'"),
        "{}",
        e.message
    );
    // A bad rule in a batch leaves the batch's other writes unapplied.
    db.ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
    db.ok("CREATE TABLE ks.t (k int PRIMARY KEY, v int)");
    let e = db.err("BEGIN BATCH INSERT INTO ks.t (k, v) VALUES (1, 1) INSERT INTO lockshift_emulator.faults (id, fault, probability) VALUES ('p', 'overloaded', 1.5) APPLY BATCH");
    assert!(
        e.message.contains("probability must be between 0 and 1"),
        "{}",
        e.message
    );
    assert!(db.rows("SELECT k FROM ks.t").is_empty());
    assert!(
        db.err("UPDATE lockshift_emulator.faults SET fired = 3 WHERE id = 't1'")
            .message
            .contains("read-only")
    );
    db.ok("UPDATE lockshift_emulator.faults SET times = 5 WHERE id = 't1'");
    assert_eq!(
        db.rows("SELECT times FROM lockshift_emulator.faults WHERE id = 't1'"),
        ["5"]
    );
    db.ok("DELETE FROM lockshift_emulator.faults WHERE id = 't1'");
    assert_eq!(
        db.rows("SELECT id FROM lockshift_emulator.faults"),
        ["slow"]
    );
    db.ok("TRUNCATE lockshift_emulator.faults");
    assert!(db.engine.faults.rules().is_empty());
}

/// `toUnixTimestamp(now())`: the coordinator's clock in milliseconds, as a
/// client measures its offset from the database by.
#[test]
fn to_unix_timestamp_of_now_is_the_engine_clock_in_milliseconds() {
    let mut db = Db::new();
    let ms = START / 1000;
    assert_eq!(
        db.rows("SELECT toUnixTimestamp(now()) FROM system.local WHERE key = 'local'"),
        [ms.to_string()]
    );
    db.clock.advance(Duration::from_millis(1_500));
    assert_eq!(
        db.rows("select TOUNIXTIMESTAMP(NOW()) from system.local where key = 'local'"),
        [(ms + 1_500).to_string()]
    );
    assert!(
        db.err("SELECT toUnixTimestamp(key) FROM system.local")
            .to_string()
            .contains("only toUnixTimestamp(now())")
    );
}
