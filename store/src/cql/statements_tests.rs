use super::*;
use crate::settings::Replication;

/// The statements, byte for byte as the local endpoint's parser
/// expects them.
#[test]
fn statement_text_is_exactly_the_agreed_cql() {
    let ks = "lockshift";
    let t = schema::MAIN;
    assert_eq!(
        insert(ks, t),
        "INSERT INTO lockshift.main (row_key, column_name, value) VALUES (?, ?, ?) USING TTL ? AND TIMESTAMP ?"
    );
    assert_eq!(
        delete(ks, t),
        "DELETE FROM lockshift.main USING TIMESTAMP ? WHERE row_key = ? AND column_name = ?"
    );
    assert_eq!(
        select_first(ks, t),
        "SELECT column_name, value, writetime(value), ttl(value) FROM lockshift.main WHERE row_key = ? LIMIT ?"
    );
    assert_eq!(
        select_from(ks, t),
        "SELECT column_name, value, writetime(value), ttl(value) FROM lockshift.main WHERE row_key = ? AND column_name >= ? LIMIT ?"
    );
    assert_eq!(
        scan(ks, schema::QUEUE),
        "SELECT DISTINCT row_key FROM lockshift.queue"
    );
    assert_eq!(
        scan_cells(ks, t),
        "SELECT token(row_key), row_key, column_name, value, writetime(value), ttl(value) \
         FROM lockshift.main WHERE token(row_key) > ? AND token(row_key) <= ?"
    );
    assert_eq!(
        LIST_TABLES,
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?"
    );
}

#[test]
fn schema_cql_creates_the_keyspace_then_every_table() {
    let settings = CqlSettings::default();
    let ddl = schema_cql(&settings);
    assert_eq!(ddl.len(), 1 + schema::ALL.len());
    assert_eq!(
        ddl[0],
        "CREATE KEYSPACE IF NOT EXISTS lockshift WITH replication = \
         {'class': 'SimpleStrategy', 'replication_factor': 1} AND durable_writes = true"
    );
    assert_eq!(
        ddl[1],
        "CREATE TABLE IF NOT EXISTS lockshift.main (row_key text, column_name text, value blob, \
         fence bigint, PRIMARY KEY ((row_key), column_name)) WITH CLUSTERING ORDER BY \
         (column_name ASC) AND gc_grace_seconds = 120"
    );
    for (i, table) in schema::ALL.iter().enumerate() {
        assert!(
            ddl[i + 1].starts_with(&format!("CREATE TABLE IF NOT EXISTS lockshift.{table} (")),
            "statement #{} is for {table}: {}",
            i + 1,
            ddl[i + 1]
        );
        assert!(
            ddl[i + 1].ends_with(&format!(
                " AND gc_grace_seconds = {}",
                schema::options(*table).gc_grace_seconds
            )),
            "{table} states its gc grace from schema::options: {}",
            ddl[i + 1]
        );
    }
}

#[test]
fn schema_cql_follows_keyspace_and_replication_settings() {
    let settings = CqlSettings {
        keyspace: "locks_prod".into(),
        replication: Replication::NetworkTopologyStrategy {
            datacenters: [("dc1".to_string(), 3)].into_iter().collect(),
        },
        ..CqlSettings::default()
    };
    let ddl = schema_cql(&settings);
    assert_eq!(
        ddl[0],
        "CREATE KEYSPACE IF NOT EXISTS locks_prod WITH replication = \
         {'class': 'NetworkTopologyStrategy', 'dc1': 3} AND durable_writes = true"
    );
    assert!(ddl[7].starts_with("CREATE TABLE IF NOT EXISTS locks_prod.scratch ("));
}

#[test]
fn consistency_maps_one_to_one() {
    assert_eq!(
        driver_consistency(Consistency::Quorum),
        DriverConsistency::Quorum
    );
    assert_eq!(
        driver_consistency(Consistency::LocalQuorum),
        DriverConsistency::LocalQuorum
    );
}
