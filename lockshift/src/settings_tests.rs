use std::collections::HashMap;
use std::io::Write;

use lockshift_store::{Consistency, StoreBackend};

use super::*;

fn env(pairs: &[(&str, &str)]) -> Option<HashMap<String, String>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

#[test]
fn defaults_are_valid() {
    assert!(
        Settings::default().problems().is_empty(),
        "{:?}",
        Settings::default().problems()
    );
    let loaded = Settings::load_with_env(None, env(&[])).unwrap();
    assert_eq!(loaded, Settings::default());
}

#[test]
fn the_file_is_read_and_the_environment_overrides_it() {
    let f = file(
        r#"
        [node]
        id = "web-1"
        mode = "combined"
        [store]
        backend = "cql"
        [store.cql]
        contact_points = ["10.0.0.1:9042"]
        consistency = "local_quorum"
        [lock]
        lease_ttl = "80s"
        [lock.queue]
        head_poll = "5ms"
        "#,
    );
    let s = Settings::load_with_env(
        Some(f.path()),
        env(&[
            ("LOCKSHIFT__LOCK__RENEW_EVERY", "20s"),
            ("LOCKSHIFT__NODE__MODE", "queue"),
            (
                "LOCKSHIFT__STORE__CQL__CONTACT_POINTS",
                "10.0.0.7:9042,10.0.0.8:9042",
            ),
            ("OTHER__LOCK__RENEW_EVERY", "1s"),
        ]),
    )
    .unwrap();
    assert_eq!(s.node.id.as_deref(), Some("web-1"));
    assert_eq!(s.node.mode, Mode::Queue, "env wins over the file");
    assert_eq!(s.store.backend, Some(StoreBackend::Cql));
    assert_eq!(
        s.store.cql.contact_points,
        ["10.0.0.7:9042", "10.0.0.8:9042"]
    );
    assert_eq!(s.store.cql.consistency, Consistency::LocalQuorum);
    assert_eq!(s.lock.lease_ttl, Duration::from_secs(80));
    assert_eq!(s.lock.renew_every, Duration::from_secs(20));
    assert_eq!(s.lock.queue.head_poll, Duration::from_millis(5));
}

#[test]
fn a_broken_rule_names_the_key_and_the_rule() {
    let err =
        Settings::load_with_env(None, env(&[("LOCKSHIFT__LOCK__RENEW_EVERY", "40s")])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid settings:\n  - lock.renew_every (40s) must be less than half of lock.lease_ttl (1m)"
    );
    let SettingsError::Invalid { problems } = err else {
        panic!("not Invalid")
    };
    assert_eq!(problems[0].key, "lock.renew_every");
}

#[test]
fn every_broken_rule_is_listed() {
    let err = Settings::from_toml(
        r#"
        [node]
        id = "has space"
        [rollout]
        quiet_period = "30s"
        heartbeat_ttl = "5s"
        "#,
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("node.id is invalid: invalid id: node id \"has space\" contains ' '"),
        "{text}"
    );
    assert!(
        text.contains("rollout.quiet_period (30s) must exceed rollout.stage_valid_for + lock.lease_ttl + rollout.clock_skew_margin (1m 35s)"),
        "{text}"
    );
    assert!(
        text.contains("rollout.heartbeat_ttl (5s) must be more than twice"),
        "{text}"
    );
}

#[test]
fn wrong_types_and_unknown_keys_are_named() {
    let message = |r: Result<Settings, SettingsError>| r.unwrap_err().to_string();
    assert_eq!(
        message(Settings::from_toml("[lock]\nrenew_every = \"soon\"\n")),
        "invalid settings: invalid value: string \"soon\", expected a duration for key `lock.renew_every`"
    );
    let unknown = message(Settings::from_toml("[lock]\nrenew_evry = \"5s\"\n"));
    assert!(
        unknown.contains("unknown field `renew_evry`") && unknown.contains("for key `lock`"),
        "{unknown}"
    );
    assert_eq!(
        message(Settings::from_toml("[node]\nmode = \"fast\"\n")),
        "invalid settings: unknown mode \"fast\"; expected legacy, combined, queue or auto for key `node.mode`"
    );
    let negative = message(Settings::load_with_env(
        None,
        env(&[("LOCKSHIFT__LOCK__LEASE_TTL", "-3s")]),
    ));
    assert!(
        negative.contains("\"-3s\", expected a duration for key `lock.lease_ttl`"),
        "{negative}"
    );
}

#[test]
fn a_missing_or_malformed_file_is_named() {
    let err = Settings::load_with_env(Some(Path::new("/nonexistent/lockshift.toml")), env(&[]))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot read settings file /nonexistent/lockshift.toml: no such file"
    );
    let f = file("[lock\nlease_ttl = ");
    let err = Settings::load_with_env(Some(f.path()), env(&[])).unwrap_err();
    assert!(matches!(err, SettingsError::File { .. }), "{err}");
    assert!(
        err.to_string().contains(&f.path().display().to_string()),
        "{err}"
    );
}

/// Issue 19 (C) #7: a directory named as the settings file is called one,
/// not "no such file".
#[test]
fn a_directory_is_not_a_settings_file() {
    let dir = tempfile::tempdir().unwrap();
    let err = Settings::load_with_env(Some(dir.path()), env(&[])).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("it is a directory"), "{text}");
    assert!(!text.contains("no such file"), "{text}");
}

#[test]
fn absurd_durations_are_refused_not_panicked_on() {
    for (key, value) in [
        ("LOCKSHIFT__LOCK__RENEW_EVERY", "500000000000y"),
        ("LOCKSHIFT__LOCK__LEASE_TTL", "500000000000y"),
        ("LOCKSHIFT__ROLLOUT__STAGE_REREAD_EVERY", "500000000000y"),
        ("LOCKSHIFT__ROLLOUT__HEARTBEAT_EVERY", "500000000000y"),
        ("LOCKSHIFT__ROLLOUT__CLOCK_SKEW_MARGIN", "500000000000y"),
        ("LOCKSHIFT__LOCK__QUEUE__HEAD_POLL", "500000000000y"),
    ] {
        let result =
            std::panic::catch_unwind(|| Settings::load_with_env(None, env(&[(key, value)])));
        let err = result
            .unwrap_or_else(|_| panic!("{key}={value} panicked"))
            .unwrap_err();
        let key_path = key
            .trim_start_matches("LOCKSHIFT__")
            .to_lowercase()
            .replace("__", ".");
        assert!(err.to_string().contains(&key_path), "{key}: {err}");
    }
}

/// Issue 11 item 4: settings that name a cluster mean that cluster. A
/// `[store.cql]` section (or a `LOCKSHIFT__STORE__CQL__…` variable) without
/// `store.backend` used to leave every process on its own in-memory store.
#[test]
fn a_cql_section_without_a_backend_means_cql() {
    let f = file("[store.cql]\ncontact_points = [\"10.0.0.1:9042\"]\n");
    let s = Settings::load_with_env(Some(f.path()), env(&[])).unwrap();
    assert_eq!(s.store.backend, Some(StoreBackend::Cql));
    assert_eq!(s.store.cql.contact_points, ["10.0.0.1:9042"]);
    let s = Settings::load_with_env(
        None,
        env(&[("LOCKSHIFT__STORE__CQL__CONTACT_POINTS", "10.0.0.2:9042")]),
    )
    .unwrap();
    assert_eq!(
        s.store.backend,
        Some(StoreBackend::Cql),
        "from the environment"
    );
    let s = Settings::from_toml("[store]\nbackend = \"embedded\"\n[store.cql]\nkeyspace = \"x\"\n")
        .unwrap();
    assert_eq!(
        s.store.backend,
        Some(StoreBackend::Embedded),
        "an explicit backend wins"
    );
    let s = Settings::from_toml("[lock]\nrenew_every = \"5s\"\n").unwrap();
    assert_eq!(
        s.store.backend, None,
        "nothing said about the store: no store (a node refuses to start)"
    );
}

/// Issue 19 item 1: credentials and TLS files come from the environment
/// as they are — a password of digits or `True` is not read as a number
/// or a boolean — and the password never shows in `Debug`.
#[test]
fn secrets_and_files_come_from_the_environment_verbatim() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("0042");
    std::fs::write(&ca, "x").unwrap();
    let s = Settings::load_with_env(
        None,
        env(&[
            ("LOCKSHIFT__STORE__CQL__CONTACT_POINTS", "10.0.0.2:9042"),
            ("LOCKSHIFT__STORE__CQL__USERNAME", "True"),
            ("LOCKSHIFT__STORE__CQL__PASSWORD", "000123"),
            ("LOCKSHIFT__STORE__CQL__TLS__CA_FILE", ca.to_str().unwrap()),
            ("LOCKSHIFT__STORE__CQL__TLS__VERIFY_HOSTNAME", "false"),
        ]),
    )
    .unwrap();
    let cql = &s.store.cql;
    assert_eq!(cql.username.as_deref(), Some("True"));
    assert_eq!(cql.password.as_ref().map(|p| p.expose()), Some("000123"));
    assert_eq!(cql.tls.ca_file.as_deref(), Some(ca.as_path()));
    assert!(!cql.tls.verify_hostname);
    let debug = format!("{s:?}");
    assert!(!debug.contains("000123"), "{debug}");
    assert!(debug.contains("<redacted>"), "{debug}");
}

/// Issue 19 item 1: a TLS or credentials mistake in the environment is
/// refused at load, naming the key.
#[test]
fn tls_and_credential_mistakes_are_refused_at_load() {
    let err = Settings::load_with_env(
        None,
        env(&[
            ("LOCKSHIFT__STORE__CQL__USERNAME", "app"),
            ("LOCKSHIFT__STORE__CQL__PASSWORD", "pw"),
            ("LOCKSHIFT__STORE__CQL__PASSWORD_FILE", "/nonexistent/pw"),
            (
                "LOCKSHIFT__STORE__CQL__TLS__CERT_FILE",
                "/nonexistent/c.crt",
            ),
        ]),
    )
    .unwrap_err()
    .to_string();
    for needle in [
        "store.cql.password and store.cql.password_file are both set",
        "store.cql.password_file (\"/nonexistent/pw\") does not exist",
        "store.cql.tls.cert_file is set, but store.cql.tls.key_file (its private key) is not",
        "store.cql.tls.ca_file is not",
    ] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
}

/// Home settings (issue 29): each mistake named by its key, and the time
/// service that reads one fleet-wide row refused beside per-prefix homes.
#[test]
fn home_settings_are_checked_with_what_they_need() {
    let load = |text: &str| Settings::load_with_env(Some(file(text).path()), env(&[]));
    let cql = "[store.cql]\ncontact_points = [\"10.0.0.1:9042\"]\nlocal_datacenter = \"dc1\"\n";
    let ok = format!(
        "{cql}[lock]\nhome_datacenter = \"dc1\"\nhomes = [{{ prefix = \"eu/\", datacenter = \"dc2\" }}]\n"
    );
    let s = load(&ok).unwrap();
    assert_eq!(s.lock.homes.len(), 1);
    #[rustfmt::skip]
    let refused = [
        (format!("{ok}[time]\nsource = \"global\"\n"), "time.source", "eu/"),
        (ok.replace("local_datacenter = \"dc1\"\n", ""), "store.cql.local_datacenter", "needs"),
        (ok.replace("\"eu/\"", "\"\""), "lock.homes", "it is empty"),
        // The same check as `migrate home move --prefix` (issue 42 item 1).
        (ok.replace("\"eu/\"", "\" eu/\""), "lock.homes", "starts with whitespace"),
    ];
    for (text, key, words) in refused {
        let e = load(&text).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains(words), "{text}\n{e}");
    }
    // Every prefix at the default home: one datacenter serves the row.
    let same = ok.replace("datacenter = \"dc2\"", "datacenter = \"dc1\"");
    load(&format!("{same}[time]\nsource = \"global\"\n")).unwrap();
}
