//! Lightweight transactions on the engine: what applies, what each answer
//! holds, TTLs, and the refusals.

use crate::engine::tests::Db;

fn leases() -> Db {
    let mut db = Db::new();
    db.ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
    db.ok("CREATE TABLE ks.leases (name text PRIMARY KEY, owner text, n int)");
    db
}

#[test]
fn a_lease_lifecycle_answers_applied_and_the_current_row() {
    let mut db = leases();
    // (statement, rows as `[applied]|columns…`): regular columns of `*`
    // are in name order (n, owner), after the key.
    let steps: &[(&str, &[&str])] = &[
        (
            "INSERT INTO ks.leases (name, owner) VALUES ('a', 'x') IF NOT EXISTS USING TTL 10",
            &["true"],
        ),
        // Taken: not applied, the whole current row.
        (
            "INSERT INTO ks.leases (name, owner) VALUES ('a', 'y') IF NOT EXISTS USING TTL 10",
            &["false|a|null|x"],
        ),
        // Renewal by a non-owner: not applied, the condition's column.
        (
            "UPDATE ks.leases USING TTL 10 SET owner = 'y' WHERE name = 'a' IF owner = 'y'",
            &["false|x"],
        ),
        (
            "UPDATE ks.leases USING TTL 10 SET n = 2 WHERE name = 'a' IF owner = 'x'",
            &["true"],
        ),
        (
            "UPDATE ks.leases SET n = 3 WHERE name = 'a' IF owner = 'x' AND n = 1",
            &["false|x|2"],
        ),
        (
            "DELETE FROM ks.leases WHERE name = 'a' IF owner = 'y'",
            &["false|x"],
        ),
        (
            "DELETE FROM ks.leases WHERE name = 'a' IF owner = 'x'",
            &["true"],
        ),
        // Gone: not applied, and no row to show.
        (
            "DELETE FROM ks.leases WHERE name = 'a' IF owner = 'x'",
            &["false"],
        ),
        (
            "UPDATE ks.leases SET owner = 'x' WHERE name = 'a' IF EXISTS",
            &["false"],
        ),
        // A null condition matches a missing row.
        (
            "UPDATE ks.leases SET n = 1 WHERE name = 'b' IF owner = null",
            &["true"],
        ),
        (
            "UPDATE ks.leases SET owner = 'z' WHERE name = 'b' IF EXISTS",
            &["true"],
        ),
        (
            "INSERT INTO ks.leases (name, owner) VALUES ('b', 'y') IF NOT EXISTS",
            &["false|b|1|z"],
        ),
    ];
    for (cql, expected) in steps {
        assert_eq!(db.rows(cql), *expected, "{cql}");
    }
    // The lost races changed nothing.
    assert_eq!(db.rows("SELECT name, n, owner FROM ks.leases"), ["b|1|z"]);
}

#[test]
fn the_answer_names_its_columns_as_cassandra_does() {
    let mut db = leases();
    let names = |db: &mut Db, cql: &str| -> Vec<String> {
        let (cols, _) = db
            .run(cql)
            .unwrap_or_else(|e| panic!("{cql}: {}", e.message));
        cols.iter().map(|c| c.name.clone()).collect()
    };
    assert_eq!(
        names(
            &mut db,
            "INSERT INTO ks.leases (name, owner) VALUES ('a', 'x') IF NOT EXISTS"
        ),
        ["[applied]"]
    );
    assert_eq!(
        names(
            &mut db,
            "INSERT INTO ks.leases (name, owner) VALUES ('a', 'x') IF NOT EXISTS"
        ),
        ["[applied]", "name", "n", "owner"]
    );
    assert_eq!(
        names(
            &mut db,
            "UPDATE ks.leases SET n = 1 WHERE name = 'a' IF n = 5 AND owner = 'x' AND n = 5"
        ),
        ["[applied]", "n", "owner"]
    );
}

#[test]
fn an_expired_lease_can_be_taken_and_no_longer_renewed() {
    // TTLs count whole seconds (a cell written f into a second lives
    // ttl - f): whole-second steps keep the expiries exact.
    let mut db = leases();
    assert_eq!(
        db.rows("INSERT INTO ks.leases (name, owner) VALUES ('a', 'x') IF NOT EXISTS USING TTL 3"),
        ["true"]
    );
    db.advance(2.0);
    assert_eq!(
        db.rows("UPDATE ks.leases USING TTL 3 SET owner = 'x' WHERE name = 'a' IF owner = 'x'"),
        ["true"],
        "renewed before expiry"
    );
    db.advance(2.0);
    assert_eq!(
        db.rows("INSERT INTO ks.leases (name, owner) VALUES ('a', 'y') IF NOT EXISTS USING TTL 3"),
        ["false|a|null|x"],
        "the renewal moved the expiry"
    );
    db.advance(1.0);
    assert_eq!(
        db.rows("UPDATE ks.leases USING TTL 3 SET owner = 'x' WHERE name = 'a' IF owner = 'x'"),
        ["false"],
        "expired: the old owner cannot renew"
    );
    assert_eq!(
        db.rows("INSERT INTO ks.leases (name, owner) VALUES ('a', 'y') IF NOT EXISTS USING TTL 3"),
        ["true"]
    );
}

#[test]
fn a_conditional_write_wins_over_an_older_client_timestamp() {
    // An LWT is stamped by the server (Cassandra: the Paxos ballot), never
    // with a client timestamp, so it supersedes what it read.
    let mut db = leases();
    db.ok("INSERT INTO ks.leases (name, owner) VALUES ('a', 'x') USING TIMESTAMP 5");
    assert_eq!(
        db.rows("UPDATE ks.leases SET owner = 'y' WHERE name = 'a' IF owner = 'x'"),
        ["true"]
    );
    assert_eq!(
        db.rows("SELECT owner FROM ks.leases WHERE name = 'a'"),
        ["y"]
    );
}

#[test]
fn what_a_conditional_statement_may_not_do_is_refused() {
    let mut db = leases();
    db.ok("CREATE TABLE ks.main (row_key text, column_name text, value blob, PRIMARY KEY ((row_key), column_name))");
    for (cql, message) in [
        (
            "INSERT INTO ks.leases (name, owner) VALUES ('a', 'x') IF NOT EXISTS USING TIMESTAMP 5",
            "Cannot provide custom timestamp for conditional updates",
        ),
        (
            "UPDATE ks.leases SET owner = 'x' WHERE name IN ('a', 'b') IF owner = 'y'",
            "IN on the partition key is not supported with conditional updates",
        ),
        (
            "DELETE FROM ks.main WHERE row_key = 'r' IF value = 0x",
            "DELETE statements must restrict all PRIMARY KEY columns",
        ),
        (
            "UPDATE ks.main SET value = 0x WHERE row_key = 'r' AND column_name IN ('a', 'b') IF value = 0x",
            "IN on the clustering key columns is not supported with conditional updates",
        ),
        (
            "UPDATE ks.leases SET owner = 'x' WHERE name = 'a' IF name = 'a'",
            "PRIMARY KEY column 'name' cannot have IF conditions",
        ),
        (
            "UPDATE ks.leases SET owner = 'x' WHERE name = 'a' IF missing = 'a'",
            "missing",
        ),
        (
            "BEGIN BATCH INSERT INTO ks.leases (name, owner) VALUES ('a', 'x') IF NOT EXISTS APPLY BATCH",
            "inside a BATCH are not supported",
        ),
        (
            "UPDATE ks.leases SET owner = 'x' WHERE name = 'a' IF n = 'text'",
            "Invalid STRING constant",
        ),
    ] {
        let e = db.err(cql);
        assert!(e.message.contains(message), "{cql}: {}", e.message);
    }
    assert!(
        db.rows("SELECT name FROM ks.leases").is_empty(),
        "nothing applied"
    );
}

#[test]
fn prepared_conditions_bind_typed_markers() {
    let mut db = leases();
    let p = db
        .prepare("UPDATE ks.leases USING TTL ? SET owner = ? WHERE name = ? IF owner = ?")
        .unwrap();
    let names: Vec<(&str, String)> = p
        .binds
        .iter()
        .map(|b| (b.name.as_str(), b.ty.to_string()))
        .collect();
    assert_eq!(
        names,
        [
            ("[ttl]", "int".to_string()),
            ("owner", "text".to_string()),
            ("name", "text".to_string()),
            ("owner", "text".to_string())
        ]
    );
    assert!(p.conditional);
    let text = |s: &str| crate::wire::Value::Bytes(s.as_bytes().to_vec());
    let ttl = crate::wire::Value::Bytes(10i32.to_be_bytes().to_vec());
    db.ok("INSERT INTO ks.leases (name, owner) VALUES ('a', 'x')");
    let out = db
        .exec(
            &p,
            &[ttl.clone(), text("y"), text("a"), text("x")],
            None,
            None,
        )
        .unwrap();
    let crate::engine::Outcome::Cas(_, page) = out else {
        panic!("{out:?}")
    };
    assert_eq!(page.rows, [[Some(vec![1u8])]]);
    let unset = db.exec(
        &p,
        &[ttl, text("y"), text("a"), crate::wire::Value::Unset],
        None,
        None,
    );
    assert!(unset.unwrap_err().message.contains("unset"));
}

/// A fenced write's two conditional updates (the store's CQL backend,
/// `store/src/cql/fenced.rs`): `IF fence <= t` holds against a smaller or
/// equal token only, never against a null, and `IF fence = null` takes a
/// cell never fenced — answering the current fence when not applied.
#[test]
fn fence_conditions_compare_by_the_column_type_and_fail_on_a_null() {
    let mut db = leases();
    db.ok(
        "CREATE TABLE ks.scratch (row_key text, column_name text, value blob, fence bigint, \
         PRIMARY KEY ((row_key), column_name))",
    );
    let set = |value: &str, fence: i64, cond: &str| {
        format!(
            "UPDATE ks.scratch SET value = {value}, fence = {fence} WHERE row_key = 'acct-3' \
             AND column_name = 'balance' IF {cond}"
        )
    };
    let steps: Vec<(String, &[&str])> = vec![
        // No row: `<=` fails, `[applied]` alone; `= null` applies.
        (set("0x01", 41, "fence <= 41"), &["false"]),
        (set("0x01", 41, "fence = null"), &["true"]),
        // Equal and larger tokens apply; a smaller one is refused with the fence.
        (set("0x02", 41, "fence <= 41"), &["true"]),
        (set("0x03", 42, "fence <= 42"), &["true"]),
        (set("0x04", 41, "fence <= 41"), &["false|42"]),
        (set("0x04", 41, "fence = null"), &["false|42"]),
        // 1000 > 42 as numbers (a byte-wise order would say otherwise for
        // negative or differently sized values; bigint is fixed-size, but
        // the comparison is the type's).
        (set("0x05", 1000, "fence <= 1000"), &["true"]),
        (set("0x06", 999, "fence < 1000"), &["false|1000"]),
        (set("0x06", 999, "fence >= 1000"), &["true"]),
        (set("0x07", 999, "fence > 998"), &["true"]),
        (set("0x08", 999, "fence > 999"), &["false|999"]),
    ];
    for (i, (cql, expected)) in steps.iter().enumerate() {
        assert_eq!(db.rows(cql), *expected, "step #{i}: {cql}");
    }
    assert_eq!(
        db.rows("SELECT value, fence FROM ks.scratch WHERE row_key = 'acct-3'"),
        ["0x07|999"]
    );
    // A null fence (a row written without one) fails `<=` and answers the null.
    db.ok("INSERT INTO ks.scratch (row_key, column_name, value) VALUES ('b', 'c', 0x00)");
    assert_eq!(
        db.rows(
            "UPDATE ks.scratch SET value = 0x01, fence = 1 WHERE row_key = 'b' AND \
             column_name = 'c' IF fence <= 1"
        ),
        ["false|null"]
    );
    let e = db.err(
        "UPDATE ks.scratch SET value = 0x01, fence = 1 WHERE row_key = 'b' AND \
         column_name = 'c' IF fence <= null",
    );
    assert!(
        e.message
            .contains("Invalid comparison with null for operator \"<=\""),
        "{}",
        e.message
    );
}
