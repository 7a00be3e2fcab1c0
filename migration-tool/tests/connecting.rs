//! How `migrate` finds and connects to its store (issue 19 items 1 and 2):
//! the store must be named — nothing falls back to a local endpoint — and
//! `status` says whether the connection is encrypted and authenticated,
//! never the password. Against secured Cassandra nodes when the
//! environment names them (`LOCKSHIFT_TEST_TLS_CONTACT_POINTS`,
//! `LOCKSHIFT_TEST_TLS_DIR`, see `tests/src/targets.rs`), else those parts
//! print why they skip.

// Integration tests: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Endpoint, migrate};

/// Issue 19 item 2: with no store named, the commands that work on the
/// fleet's store refuse to guess (exit 2, saying what to add) — they once
/// went to 127.0.0.1:9042 — and `store.backend = "embedded"` is refused as
/// a store migrate cannot reach. `schema` needs no store.
#[tokio::test]
async fn the_store_must_be_named() {
    for args in [
        &["status"][..],
        &["inspect", "x"],
        &["clean"],
        &["advance", "--dry-run"],
        &["run-with-lock", "x", "--", "true"],
    ] {
        migrate(None, args, &[])
            .await
            .expect_code(2)
            .stderr_has("no store named")
            .stderr_has("--contact-points HOST:PORT")
            .stderr_has("LOCKSHIFT__STORE__CQL__CONTACT_POINTS");
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("lockshift.toml");
    std::fs::write(&config, "[store]\nbackend = \"embedded\"\n").unwrap();
    migrate(None, &["--config", config.to_str().unwrap(), "status"], &[])
        .await
        .expect_code(2)
        .stderr_has("store.backend = \"embedded\"")
        .stderr_has("migrate cannot reach");
    migrate(None, &["schema"], &[])
        .await
        .expect_code(0)
        .stdout_has("CREATE KEYSPACE IF NOT EXISTS lockshift");
}

/// `status` reports the connection's protection; a clear-text endpoint
/// without authentication says so.
#[tokio::test]
async fn status_says_the_connection_is_not_encrypted() {
    let e = Endpoint::with_schema().await;
    let j = e.migrate(&["status", "--json"]).await.expect_code(0).json();
    assert_eq!(j["connection"]["encrypted"], false, "{j:#}");
    assert_eq!(j["connection"]["authenticated"], false, "{j:#}");
    e.migrate(&["status"])
        .await
        .expect_code(0)
        .stdout_has("connection not encrypted, not authenticated");
}

/// The secured node named by the environment, the CA and a password file.
struct Secure {
    point: String,
    ca: String,
    password_file: tempfile::NamedTempFile,
}

fn secure_or_skip(test: &str) -> Option<Secure> {
    let point = std::env::var("LOCKSHIFT_TEST_TLS_CONTACT_POINTS").ok();
    let dir = std::env::var("LOCKSHIFT_TEST_TLS_DIR").ok();
    let (Some(point), Some(dir)) = (point, dir) else {
        assert!(
            std::env::var_os("LOCKSHIFT_REQUIRE_SECURE_CLUSTER").is_none(),
            "{test}: LOCKSHIFT_REQUIRE_SECURE_CLUSTER is set but the secured nodes are not named"
        );
        println!(
            "skipped {test}: LOCKSHIFT_TEST_TLS_CONTACT_POINTS and LOCKSHIFT_TEST_TLS_DIR are not set"
        );
        return None;
    };
    let auth =
        std::env::var("LOCKSHIFT_TEST_AUTH").unwrap_or_else(|_| "cassandra:cassandra".into());
    let (_, password) = auth.split_once(':').unwrap();
    let password_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(password_file.path(), format!("{password}\n")).unwrap();
    Some(Secure {
        point: point.split(',').next().unwrap().to_string(),
        ca: format!("{dir}/ca.crt"),
        password_file,
    })
}

/// Issue 19 item 1, through `migrate`'s flags: TLS and a password file
/// connect; `status --json` says encrypted and authenticated, names the
/// user and never the password; a wrong password is refused, saying so.
#[tokio::test]
async fn migrate_connects_with_tls_and_a_password_file() {
    let Some(s) = secure_or_skip("migrate_connects_with_tls_and_a_password_file") else {
        return;
    };
    let auth =
        std::env::var("LOCKSHIFT_TEST_AUTH").unwrap_or_else(|_| "cassandra:cassandra".into());
    let user = auth.split_once(':').unwrap().0.to_string();
    let pw_file = s.password_file.path().to_str().unwrap().to_string();
    let args = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "--keyspace",
            "lockshift_test_migrate_secure",
            "--create-schema",
            "--username",
            &user,
            "--password-file",
            &pw_file,
            "--tls-ca-file",
            &s.ca,
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        v.extend(extra.iter().map(|a| a.to_string()));
        v
    };
    let owned = args(&["status", "--json"]);
    let argv: Vec<&str> = owned.iter().map(String::as_str).collect();
    let r = migrate(Some(&s.point), &argv, &[]).await;
    let j = r.expect_code(0).json();
    assert_eq!(j["connection"]["encrypted"], true, "{j:#}");
    assert_eq!(j["connection"]["hostname_verified"], true, "{j:#}");
    assert_eq!(j["connection"]["authenticated"], true, "{j:#}");
    assert_eq!(j["connection"]["user"], user.as_str(), "{j:#}");
    let mut keys: Vec<&String> = j["connection"].as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "authenticated",
            "client_certificate",
            "encrypted",
            "hostname_verified",
            "user"
        ],
        "no secret in the report"
    );
    assert!(!r.stdout.contains("password"), "{r:#?}");
    let owned = args(&["status"]);
    let argv: Vec<&str> = owned.iter().map(String::as_str).collect();
    migrate(Some(&s.point), &argv, &[])
        .await
        .expect_code(0)
        .stdout_has("connection TLS (certificates verified, hostname checked), authenticated as");

    std::fs::write(s.password_file.path(), "not-the-password\n").unwrap();
    let owned = args(&["status"]);
    let argv: Vec<&str> = owned.iter().map(String::as_str).collect();
    let r = migrate(Some(&s.point), &argv, &[]).await;
    r.expect_code(1)
        .stderr_has("refused this client")
        .stderr_has("wrong user name or password");
    assert!(!r.stderr.contains("not-the-password"), "{r:#?}");
}
