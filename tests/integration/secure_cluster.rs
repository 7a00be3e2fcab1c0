//! Authentication and TLS against real Cassandra nodes (issue 19 item 1):
//! the right credentials work; a wrong password, missing credentials, a
//! clear-text client, an untrusted CA and a missing client certificate are
//! each refused at once, with a message saying which.
//!
//! The nodes come from the environment ([`SecureCluster::from_env`]):
//! `.ci/run` starts them (`start-cassandra.sh --auth --tls CERTDIR`, and
//! `--tls-client-auth` on a second address) when the Cassandra bundle is
//! there, and sets `LOCKSHIFT_REQUIRE_SECURE_CLUSTER` so that a missing one
//! fails rather than skips. Without them each test prints why it skipped.
//!
//! "At once" is checked by kind, not by the clock: a refusal is
//! [`StoreErrorKind::Authentication`] with the reason in words, where a
//! hang would end as a `Connection` error after the connect timeout.

use std::path::PathBuf;

use lockshift_store::settings::{Secret, TlsSettings};
use lockshift_store::{
    CellWrite, CqlSettings, CqlStore, RowQuery, Store, StoreError, StoreErrorKind, Timestamp,
    WriteOptions, schema,
};
use lockshift_tests::targets::{SecureCluster, run_prefix};

const KEYSPACE: &str = "lockshift_test_secure";

fn untrusted_ca() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/untrusted-ca.crt")
}

async fn refused(settings: &CqlSettings) -> StoreError {
    let err = CqlStore::connect(settings)
        .await
        .expect_err("the cluster refuses this client");
    assert_eq!(
        err.kind(),
        StoreErrorKind::Authentication,
        "refused, not unreachable: {err}"
    );
    err
}

/// A write and a read through the secured connection.
async fn round_trip(store: &CqlStore) {
    let row = run_prefix();
    let at = WriteOptions::at(Timestamp::from_micros(1_700_000_000_000_000));
    store
        .write(
            schema::SCRATCH,
            &row,
            &[CellWrite::new("c", b"v".to_vec())],
            at,
        )
        .await
        .unwrap();
    let cells = store
        .read(schema::SCRATCH, &row, &RowQuery::all())
        .await
        .unwrap();
    assert_eq!(cells.len(), 1);
    assert_eq!(cells[0].value, b"v");
}

#[tokio::test]
async fn right_credentials_over_tls_work() {
    let Some(c) = SecureCluster::or_skip("right_credentials_over_tls_work") else {
        return;
    };
    let settings = c.settings(KEYSPACE);
    let store = CqlStore::connect(&settings).await.unwrap();
    round_trip(&store).await;
    // The same with the password from a file, and the name check skipped:
    // the chain is still checked (see untrusted_ca_fails_...).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("password");
    std::fs::write(&file, format!("{}\n", c.password)).unwrap();
    let from_file = CqlSettings {
        password: None,
        password_file: Some(file),
        create_schema: false,
        ..settings
    };
    let store = CqlStore::connect(&from_file).await.unwrap();
    round_trip(&store).await;
}

#[tokio::test]
async fn a_wrong_password_fails_and_says_so() {
    let Some(c) = SecureCluster::or_skip("a_wrong_password_fails_and_says_so") else {
        return;
    };
    let settings = CqlSettings {
        password: Some(Secret::new("not-the-password")),
        ..c.settings(KEYSPACE)
    };
    let err = refused(&settings).await.to_string();
    assert!(err.contains("authentication failed"), "{err}");
    assert!(err.contains("wrong user name or password"), "{err}");
    assert!(!err.contains("not-the-password"), "never the secret: {err}");
}

#[tokio::test]
async fn missing_credentials_fail_and_say_so() {
    let Some(c) = SecureCluster::or_skip("missing_credentials_fail_and_say_so") else {
        return;
    };
    let settings = CqlSettings {
        username: None,
        password: None,
        ..c.settings(KEYSPACE)
    };
    let err = refused(&settings).await.to_string();
    assert!(
        err.contains("requires a user name and password and none was given"),
        "{err}"
    );
}

#[tokio::test]
async fn a_clear_text_client_is_told_tls_is_required() {
    let Some(c) = SecureCluster::or_skip("a_clear_text_client_is_told_tls_is_required") else {
        return;
    };
    let settings = CqlSettings {
        tls: TlsSettings::default(),
        ..c.settings(KEYSPACE)
    };
    let err = refused(&settings).await.to_string();
    assert!(err.contains("may require TLS"), "{err}");
    assert!(err.contains("store.cql.tls.ca_file"), "{err}");
}

#[tokio::test]
async fn an_untrusted_ca_fails_certificate_verification() {
    let Some(c) = SecureCluster::or_skip("an_untrusted_ca_fails_certificate_verification") else {
        return;
    };
    for verify_hostname in [true, false] {
        let settings = CqlSettings {
            tls: TlsSettings {
                ca_file: Some(untrusted_ca()),
                verify_hostname,
                ..TlsSettings::default()
            },
            ..c.settings(KEYSPACE)
        };
        let err = refused(&settings).await.to_string();
        assert!(
            err.contains("certificate verification failed"),
            "verify_hostname = {verify_hostname}: {err}"
        );
        assert!(
            err.contains("not signed by a CA in store.cql.tls.ca_file"),
            "{err}"
        );
    }
}

#[tokio::test]
async fn a_node_requiring_a_client_certificate_takes_cert_and_key() {
    let Some(c) =
        SecureCluster::or_skip("a_node_requiring_a_client_certificate_takes_cert_and_key")
    else {
        return;
    };
    let Some(points) = c.client_auth_points.clone() else {
        println!(
            "skipped: {} is not set",
            lockshift_tests::targets::TLS_CLIENT_AUTH_CONTACT_POINTS_VAR
        );
        return;
    };
    let without = CqlSettings {
        contact_points: points.clone(),
        ..c.settings(KEYSPACE)
    };
    let err = refused(&without).await.to_string();
    assert!(err.contains("TLS handshake failed"), "{err}");
    assert!(err.contains("client certificate"), "{err}");
    let with = CqlSettings {
        tls: TlsSettings {
            cert_file: Some(c.tls_dir.join("client.crt")),
            key_file: Some(c.tls_dir.join("client.key")),
            ..without.tls.clone()
        },
        ..without
    };
    let store = CqlStore::connect(&with).await.unwrap();
    round_trip(&store).await;
}
