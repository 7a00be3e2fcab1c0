//! Parser tests: every statement of the lockshift brief, the operator subset,
//! and the refusals.

use super::*;

fn ok(s: &str) -> Statement {
    parse(s).unwrap_or_else(|e| panic!("{s}: {}", e.message))
}

fn err(s: &str) -> CqlError {
    match parse(s) {
        Ok(stmt) => panic!("{s} parsed as {stmt:?}"),
        Err(e) => e,
    }
}

#[test]
fn lockshift_statements_parse_with_markers_in_textual_order() {
    let Statement::Insert(i) = ok(
        "INSERT INTO lockshift.main (row_key, column_name, value) VALUES (?, ?, ?) USING TTL ? AND TIMESTAMP ?",
    ) else {
        panic!()
    };
    assert_eq!(i.columns, ["row_key", "column_name", "value"]);
    assert_eq!(i.markers, 5);
    assert!(matches!(
        &i.using.ttl,
        Some(Term::Marker(Marker { index: 3, .. }))
    ));
    assert!(matches!(
        &i.using.timestamp,
        Some(Term::Marker(Marker { index: 4, .. }))
    ));

    let Statement::Delete(d) =
        ok("DELETE FROM lockshift.main USING TIMESTAMP ? WHERE row_key = ? AND column_name = ?")
    else {
        panic!()
    };
    assert!(matches!(
        &d.timestamp,
        Some(Term::Marker(Marker { index: 0, .. }))
    ));
    assert_eq!(d.relations.len(), 2);

    let Statement::Select(s) = ok(
        "SELECT column_name, value, writetime(value), ttl(value) FROM lockshift.main WHERE row_key = ? AND column_name >= ? LIMIT ?",
    ) else {
        panic!()
    };
    let sels: Vec<_> = s.selectors.unwrap().into_iter().map(|(s, _)| s).collect();
    assert_eq!(sels[2], Selector::WriteTime("value".into()));
    assert_eq!(sels[3], Selector::Ttl("value".into()));
    assert!(matches!(
        s.limit,
        Some(Term::Marker(Marker { index: 2, .. }))
    ));

    let Statement::Select(s) = ok("SELECT DISTINCT row_key FROM lockshift.main") else {
        panic!()
    };
    assert!(s.distinct);

    ok("SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?");
    ok(
        "CREATE KEYSPACE IF NOT EXISTS lockshift WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1} AND durable_writes = true",
    );
    let Statement::CreateTable(t) = ok(
        "CREATE TABLE IF NOT EXISTS lockshift.main (row_key text, column_name text, value blob, PRIMARY KEY ((row_key), column_name)) WITH CLUSTERING ORDER BY (column_name ASC)",
    ) else {
        panic!()
    };
    assert_eq!(
        t.primary_key,
        Some((vec!["row_key".into()], vec!["column_name".into()]))
    );
    assert_eq!(
        t.clustering_order,
        [("column_name".to_string(), Order::Asc)]
    );
}

#[test]
fn driver_and_operator_statements() {
    ok(
        "select keyspace_name, replication, durable_writes from system_schema.keyspaces where keyspace_name in ?",
    );
    ok(
        "SELECT host_id, rpc_address, data_center, rack, tokens FROM system.local WHERE key='local'",
    );
    ok("USE \"Mixed\"");
    ok(
        "BEGIN UNLOGGED BATCH USING TIMESTAMP 5 INSERT INTO t (a) VALUES (1); DELETE FROM t WHERE a = 2; APPLY BATCH;",
    );
    ok("UPDATE t USING TTL 10 SET v = 'x', w = 0xff WHERE k IN (1, 2) AND c = 3");
    ok(
        "SELECT * FROM t WHERE token(k) > -9223372036854775808 AND token(k) <= token(5) LIMIT 100 ALLOW FILTERING",
    );
    ok("SELECT count(*) AS n FROM t");
    ok("SELECT k FROM t WHERE k = 1 ORDER BY c DESC PER PARTITION LIMIT 2 LIMIT 3");
    ok(
        "CREATE TABLE t (k int PRIMARY KEY, m map<text, frozen<list<int>>>, s set<uuid>) WITH default_time_to_live = 60 AND comment = 'x'",
    );
    ok("INSERT INTO t (k, u, l, m) VALUES (:k, now(), [1, 2], {'a': 1.5, 'b': -Infinity})");
    ok("DROP TABLE IF EXISTS ks.t");
    ok("DROP KEYSPACE ks");
    ok("TRUNCATE TABLE ks.t");
}

#[test]
fn refusals_name_what_is_unsupported() {
    assert_eq!(err("SELEC * FROM t").kind, crate::error::ErrorKind::Syntax);
    assert!(
        err("SELECT * FORM t")
            .message
            .contains("line 1:9 unexpected input 'FORM', expecting FROM")
    );
    assert!(
        err("ALTER TABLE t ADD x int")
            .message
            .contains("ALTER is not supported")
    );
    assert!(err("SELECT * FROM t WHERE a != 1").message.contains("!="));
    assert!(
        err("UPDATE t SET c = c + 1 WHERE k = 1")
            .message
            .contains("arithmetic")
    );
    assert!(err("SELECT JSON * FROM t").message.contains("JSON"));
    assert!(
        err("SELECT * FROM t WHERE (a, b) > (1, 2)")
            .message
            .contains("multi-column")
    );
    assert!(
        err("CREATE INDEX ON t (v)")
            .message
            .contains("CREATE INDEX")
    );
    assert!(
        err("SELECT * FROM t;;")
            .message
            .contains("expecting end of statement")
    );
    assert!(
        err("SELECT from FROM t")
            .message
            .contains("unexpected input 'from'")
    );
    assert!(err("").message.contains("<EOF>"));
}

#[test]
fn reserved_words_need_quotes_but_unreserved_ones_do_not() {
    ok("SELECT key, value, type, kind, position, ttl, writetime FROM t");
    ok("SELECT \"select\" FROM \"from\"");
    err("CREATE TABLE select (k int PRIMARY KEY)");
}

#[test]
fn conditions_of_lightweight_transactions() {
    let Statement::Insert(i) =
        ok("INSERT INTO ks.leases (name, owner) VALUES (?, ?) IF NOT EXISTS USING TTL ?")
    else {
        panic!()
    };
    assert!(i.if_not_exists);
    assert!(matches!(
        &i.using.ttl,
        Some(Term::Marker(Marker { index: 2, .. }))
    ));
    let Statement::Update(u) =
        ok("UPDATE ks.leases USING TTL ? SET owner = ? WHERE name = ? IF owner = ? AND n = 3")
    else {
        panic!()
    };
    let Some(Condition::Compare(conds)) = &u.condition else {
        panic!("{:?}", u.condition)
    };
    assert_eq!(conds.len(), 2);
    assert_eq!(conds[0].0, "owner");
    assert_eq!(conds[0].1, Op::Eq);
    assert!(matches!(&conds[0].2, Term::Marker(Marker { index: 3, .. })));
    assert_eq!(u.markers, 4);
    // A fenced write's condition.
    let Statement::Update(u) =
        ok("UPDATE ks.t SET value = ?, fence = ? WHERE k = ? AND c = ? IF fence <= ?")
    else {
        panic!()
    };
    let Some(Condition::Compare(conds)) = &u.condition else {
        panic!("{:?}", u.condition)
    };
    assert_eq!((conds[0].0.as_str(), conds[0].1), ("fence", Op::Le));
    let Statement::Update(u) = ok("UPDATE ks.leases SET owner = 'a' WHERE name = 'x' IF EXISTS")
    else {
        panic!()
    };
    assert_eq!(u.condition, Some(Condition::Exists));
    let Statement::Delete(d) = ok("DELETE FROM ks.leases WHERE name = ? IF owner = ?") else {
        panic!()
    };
    assert!(matches!(&d.condition, Some(Condition::Compare(c)) if c.len() == 1));
    let Statement::Delete(d) = ok("DELETE FROM ks.leases WHERE name = ?") else {
        panic!()
    };
    assert_eq!(d.condition, None);
    for refused in [
        "UPDATE ks.leases SET owner = 'a' WHERE name = 'x' IF owner != 'b'",
        "DELETE FROM ks.leases WHERE name = 'x' IF owner IN ('a', 'b')",
    ] {
        assert!(
            err(refused)
                .message
                .contains("only `=`, `<`, `<=`, `>`, `>=` conditions"),
            "{refused}"
        );
    }
}
