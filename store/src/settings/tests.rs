use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::*;

#[test]
fn defaults_are_valid_even_for_cql() {
    let s = StoreSettings {
        backend: Some(StoreBackend::Cql),
        ..StoreSettings::default()
    };
    assert!(s.problems().is_empty(), "{:?}", s.problems());
}

#[test]
fn each_problem_names_its_key() {
    let s = StoreSettings {
        backend: Some(StoreBackend::Cql),
        cql: CqlSettings {
            contact_points: vec!["nohost".into(), "h:0".into()],
            keyspace: "Bad-Name".into(),
            replication: Replication::SimpleStrategy {
                replication_factor: 0,
            },
            request_timeout: Duration::ZERO,
            keepalive_timeout: Duration::ZERO,
            ..CqlSettings::default()
        },
        ..StoreSettings::default()
    };
    let msgs: Vec<String> = s.problems().iter().map(|p| p.to_string()).collect();
    assert_eq!(msgs.len(), 6, "{msgs:#?}");
    assert!(msgs[0].starts_with("store.cql.contact_points[0] (\"nohost\") must be host:port"));
    assert!(msgs[1].contains("contact_points[1]") && msgs[1].contains("port"));
    assert!(msgs[2].starts_with("store.cql.keyspace (\"Bad-Name\")"));
    assert!(msgs[3].contains("replication_factor must be at least 1"));
    assert_eq!(msgs[4], "store.cql.request_timeout must be greater than 0");
    assert_eq!(
        msgs[5],
        "store.cql.keepalive_timeout must be greater than 0"
    );
}

/// Issue 11 item 4: a process on the embedded store is told at start
/// that its locks exclude only within itself.
#[test]
fn the_embedded_store_says_it_excludes_only_this_process() {
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    tracing::subscriber::with_default(subscriber, || {
        let embedded = StoreSettings {
            backend: Some(StoreBackend::Embedded),
            ..StoreSettings::default()
        };
        runtime.block_on(embedded.open()).unwrap();
    });
    let logged = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(logged.contains("WARN"), "{logged}");
    assert!(
        logged.contains("locks exclude only within this process"),
        "{logged}"
    );
}

/// Issue 19 item 2: settings that name no store open none, and the
/// error says exactly what to add.
#[test]
fn no_store_is_chosen_unless_asked() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    assert_eq!(StoreSettings::default().backend, None);
    let err = runtime
        .block_on(StoreSettings::default().open())
        .unwrap_err();
    assert_eq!(err.kind(), crate::StoreErrorKind::Invalid);
    for needle in [
        "no store chosen",
        "[store.cql] contact_points = [",
        "store.backend = \"embedded\"",
        "LOCKSHIFT__STORE__CQL__CONTACT_POINTS",
    ] {
        assert!(err.message().contains(needle), "{needle}: {err}");
    }
}

fn tls_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    for f in ["ca.crt", "client.crt", "client.key", "password"] {
        std::fs::write(path.join(f), "x\n").unwrap();
    }
    (dir, path)
}

/// A change to default CQL settings, for table-driven cases.
type Edit<'a> = Box<dyn FnOnce(&mut CqlSettings) + 'a>;

fn cql_with(f: impl FnOnce(&mut CqlSettings)) -> Vec<String> {
    let mut cql = CqlSettings::default();
    f(&mut cql);
    cql.problems().iter().map(ToString::to_string).collect()
}

/// Issue 19 item 1: each mistake in the credentials and TLS keys is
/// refused with a message naming the key (and the file).
#[test]
fn credential_and_tls_mistakes_name_their_key() {
    let (_keep, dir) = tls_dir();
    let missing = dir.join("nope.crt");
    let cases: Vec<(&str, Edit<'_>)> = vec![
        (
            "store.cql.password and store.cql.password_file are both set",
            Box::new(|c| {
                c.username = Some("app".into());
                c.password = Some(Secret::new("pw"));
                c.password_file = Some(dir.join("password"));
            }),
        ),
        (
            "store.cql.username is set, but neither store.cql.password nor store.cql.password_file is",
            Box::new(|c| c.username = Some("app".into())),
        ),
        (
            "store.cql.password is set, but store.cql.username is not",
            Box::new(|c| c.password = Some(Secret::new("pw"))),
        ),
        (
            "store.cql.tls.ca_file (",
            Box::new(|c| c.tls.ca_file = Some(missing.clone())),
        ),
        (
            "store.cql.tls.cert_file is set, but store.cql.tls.key_file (its private key) is not",
            Box::new(|c| {
                c.tls.ca_file = Some(dir.join("ca.crt"));
                c.tls.cert_file = Some(dir.join("client.crt"));
            }),
        ),
        (
            "store.cql.tls.key_file is set, but store.cql.tls.cert_file (the certificate) is not",
            Box::new(|c| {
                c.tls.ca_file = Some(dir.join("ca.crt"));
                c.tls.key_file = Some(dir.join("client.key"));
            }),
        ),
        (
            "but store.cql.tls.ca_file is not",
            Box::new(|c| {
                c.tls.cert_file = Some(dir.join("client.crt"));
                c.tls.key_file = Some(dir.join("client.key"));
            }),
        ),
        (
            "store.cql.password_file (",
            Box::new(|c| {
                c.username = Some("app".into());
                c.password_file = Some(dir.join("missing-password"));
            }),
        ),
    ];
    for (i, (want, set)) in cases.into_iter().enumerate() {
        let msgs = cql_with(set);
        assert_eq!(msgs.len(), 1, "case #{i}: {msgs:#?}");
        assert!(msgs[0].contains(want), "case #{i}: {msgs:#?}");
    }
    let msgs = cql_with(|c| c.tls.ca_file = Some(missing.clone()));
    assert!(msgs[0].ends_with("nope.crt\") does not exist"), "{msgs:?}");
    // Right settings: no problem.
    let ok = cql_with(|c| {
        c.username = Some("app".into());
        c.password_file = Some(dir.join("password"));
        c.tls.ca_file = Some(dir.join("ca.crt"));
        c.tls.cert_file = Some(dir.join("client.crt"));
        c.tls.key_file = Some(dir.join("client.key"));
    });
    assert!(ok.is_empty(), "{ok:?}");
}

/// The password never shows in Debug output nor in serialised settings.
#[test]
fn the_password_is_never_shown() {
    let cql = CqlSettings {
        username: Some("app".into()),
        password: Some(Secret::new("hunter2-secret")),
        ..CqlSettings::default()
    };
    let debug = format!(
        "{cql:?} {:#?}",
        StoreSettings {
            cql: cql.clone(),
            ..StoreSettings::default()
        }
    );
    assert!(!debug.contains("hunter2"), "{debug}");
    assert!(debug.contains("<redacted>"), "{debug}");
    let json = serde_json::to_string(&cql).unwrap();
    assert!(!json.contains("hunter2"), "{json}");
    assert!(json.contains("\"username\":\"app\""), "{json}");
}

#[test]
fn the_password_file_is_read_without_its_newline() {
    let (_keep, dir) = tls_dir();
    std::fs::write(dir.join("password"), "s3cret\r\n").unwrap();
    let cql = CqlSettings {
        username: Some("app".into()),
        password_file: Some(dir.join("password")),
        ..CqlSettings::default()
    };
    let (user, pw) = cql.credentials().unwrap().unwrap();
    assert_eq!((user.as_str(), pw.expose()), ("app", "s3cret"));
    std::fs::write(dir.join("password"), "\n").unwrap();
    let err = cql.credentials().unwrap_err().to_string();
    assert!(err.starts_with("store.cql.password_file ("), "{err}");
    assert!(err.ends_with("is empty"), "{err}");
}

#[test]
fn replication_renders_as_cql() {
    let mut dcs = BTreeMap::new();
    dcs.insert("dc1".to_string(), 3);
    dcs.insert("dc2".to_string(), 2);
    assert_eq!(
        Replication::NetworkTopologyStrategy { datacenters: dcs }.to_cql(),
        "{'class': 'NetworkTopologyStrategy', 'dc1': 3, 'dc2': 2}"
    );
    assert_eq!(
        Replication::default().to_cql(),
        "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    );
}
