//! Unit tests of the CQL backend that need no server: row decoding, bind
//! values, schema messages, and connecting to nothing.

use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

use super::CqlStore;
use super::keyspace::missing_schema_message;
use super::rows::{cell_from_row, limit_bind, ttl_bind};
use crate::cell::check_request;
use crate::cell::{Cell, OpKind, Timestamp, WriteOptions};
use crate::error::StoreErrorKind;
use crate::settings::CqlSettings;
use crate::{Ttl, schema};

fn settings_for(contact_point: String) -> CqlSettings {
    CqlSettings {
        contact_points: vec![contact_point],
        connect_timeout: Duration::from_millis(300),
        request_timeout: Duration::from_millis(300),
        ..CqlSettings::default()
    }
}

#[test]
fn rows_become_cells() {
    let cell = cell_from_row(("owner-a".into(), Some(b"v".to_vec()), Some(42), Some(7))).unwrap();
    assert_eq!(
        cell,
        Cell {
            column: "owner-a".into(),
            value: b"v".to_vec(),
            writetime: Timestamp::from_micros(42),
            ttl: Some(Duration::from_secs(7)),
        }
    );
    let forever = cell_from_row(("c".into(), Some(vec![]), Some(-5), None)).unwrap();
    assert_eq!(forever.ttl, None, "null ttl() means no TTL");
    assert_eq!(forever.value, Vec::<u8>::new(), "an empty blob is a value");
    assert_eq!(
        forever.writetime,
        Timestamp::from_micros(-5),
        "timestamps before the epoch are legal"
    );
}

#[test]
fn malformed_rows_are_errors_not_panics() {
    for (i, (row, want)) in [
        (
            ("c".to_string(), None, Some(1), None),
            "column \"c\" has a null value",
        ),
        (
            ("c".to_string(), Some(vec![]), None, None),
            "column \"c\" has no writetime",
        ),
        (
            ("c".to_string(), Some(vec![]), Some(1), Some(-1)),
            "column \"c\" reports a negative ttl (-1)",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(cell_from_row(row).unwrap_err(), want, "case #{i}");
    }
}

#[test]
fn bind_values_follow_the_agreed_encoding() {
    let at = WriteOptions::at(Timestamp::from_micros(1));
    assert_eq!(ttl_bind(&at), 0, "no TTL binds 0");
    assert_eq!(ttl_bind(&at.with_ttl(Ttl::from_secs(15).unwrap())), 15);
    assert_eq!(
        ttl_bind(&at.with_ttl(Ttl::from_secs(Ttl::MAX_SECS).unwrap())),
        630_720_000
    );
    assert_eq!(limit_bind(None), i32::MAX, "no limit reads everything");
    assert_eq!(limit_bind(NonZeroU32::new(3)), 3);
    assert_eq!(
        limit_bind(NonZeroU32::new(u32::MAX)),
        i32::MAX,
        "clamped to CQL's int"
    );
}

#[test]
fn keys_are_checked_like_the_embedded_store() {
    let err = check_request(OpKind::Write, schema::MAIN, "", ["c"], None).unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Invalid);
    assert!(err.message().contains("row key must not be empty"), "{err}");
    let err = check_request(OpKind::Delete, schema::MAIN, "r", ["a", ""], None).unwrap_err();
    assert_eq!(err.op(), OpKind::Delete);
    assert!(err.message().contains("column must not be empty"), "{err}");
    let long = "x".repeat(crate::MAX_KEY_BYTES + 1);
    assert!(check_request(OpKind::Read, schema::MAIN, &long, [], None).is_err());
    assert!(check_request(OpKind::Read, schema::MAIN, "r", [], None).is_ok());
}

#[test]
fn missing_schema_messages_name_what_is_missing_and_the_fix() {
    let msg = missing_schema_message("lockshift", false, &schema::ALL);
    assert_eq!(
        msg,
        "keyspace lockshift does not exist; run the statements `migrate schema` prints \
         (cqlsh -f), or set store.cql.create_schema = true to create them with \
         store.cql.replication"
    );
    let msg = missing_schema_message("lockshift", true, &[schema::QUEUE, schema::NODES]);
    assert!(
        msg.starts_with("keyspace lockshift lacks tables lockshift.queue, lockshift.nodes; run the statements `migrate schema` prints"),
        "{msg}"
    );
    let msg = missing_schema_message("ks", true, &[schema::MAIN]);
    assert!(msg.starts_with("keyspace ks lacks table ks.main;"), "{msg}");
}

#[tokio::test]
async fn invalid_settings_are_rejected_before_connecting() {
    let settings = CqlSettings {
        keyspace: "Bad-Name".into(),
        ..settings_for("127.0.0.1:1".into())
    };
    let err = CqlStore::connect(&settings).await.unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Invalid);
    assert!(err.message().contains("store.cql.keyspace"), "{err}");
}

/// Nothing listens on port 1: the driver's connection is refused at once, and
/// the error says where it tried and that it is a connection failure.
#[tokio::test]
async fn nothing_listening_is_a_quick_connection_error() {
    let started = Instant::now();
    let err = CqlStore::connect(&settings_for("127.0.0.1:1".into()))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Connection, "{err}");
    assert!(err.is_retryable());
    assert!(
        err.message()
            .starts_with("connecting to 127.0.0.1:1 (connect timeout 300ms): "),
        "{err}"
    );
    assert!(
        err.to_string().contains("no connection"),
        "the display says what it means: {err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

/// A host that accepts TCP connections but never answers the CQL handshake
/// (a hung process, a wrong port behind a proxy) must not hang `connect`.
#[tokio::test]
async fn a_silent_endpoint_is_a_connection_error_not_a_hang() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let sink = tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let mut buf = [0u8; 1024];
            // Read and ignore, keeping the socket open.
            let _ = socket.read(&mut buf).await;
            held.push(socket);
        }
    });
    let started = Instant::now();
    let result = tokio::time::timeout(
        Duration::from_secs(30),
        CqlStore::connect(&settings_for(addr.to_string())),
    )
    .await;
    sink.abort();
    let err = result
        .expect("connect must give up on its own")
        .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Connection, "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}
