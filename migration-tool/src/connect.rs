//! From flags, environment and config file to [`Settings`] and an open store,
//! with errors that tell the operator what to do next.
//!
//! Precedence: flags, then `LOCKSHIFT__…` environment variables, then the
//! file (`--config` or `LOCKSHIFT_CONFIG`), then defaults —
//! [`Settings::load`] does the last three, the flags are laid on top here.
//!
//! `migrate` always talks CQL: an embedded store inside the tool's own
//! process would hold nothing the fleet wrote. The commands that read or
//! change the fleet's state (`status`, `inspect`, `clean`, `advance`,
//! `rollback`, `run-with-lock`, `bench --cluster`) need the store *named* —
//! `--contact-points`, `LOCKSHIFT__STORE__CQL__…`, or `[store.cql]` in the
//! file ([`store_settings`]); with nothing named, or with
//! `store.backend = "embedded"` (a store inside each service process,
//! which no other process can reach), they stop with a usage error that
//! says what to add. They once fell back to `127.0.0.1:9042`: a
//! `run-with-lock` on a machine whose settings went missing then took its
//! lock from whatever listened there — a local `migrate serve` — and
//! excluded nobody. `serve` (which *is* that endpoint), `schema` (prints
//! only), `bench` (its own endpoint) and `demo` (its own fleet, in-process
//! unless a cluster is named) need no store named ([`settings`]).
//!
//! Schema: nothing creates a keyspace or tables unless asked — the
//! `--create-schema` flag, `store.cql.create_schema = true` in the file or
//! environment, or the commands whose job it is (`serve`, `demo`). The
//! others check, and on a missing keyspace or table point at `migrate
//! schema`, which prints the statements to run.

use std::path::Path;

use lockshift::{Settings, SettingsError};
use lockshift_store::{
    Consistency, CqlStore, SharedStore, StoreBackend, StoreError, StoreErrorKind,
};

use crate::UsageError;
use crate::cli::{ConnectOpts, ConsistencyArg};

/// The environment variable naming the settings file.
pub const CONFIG_ENV: &str = "LOCKSHIFT_CONFIG";

/// Loads the settings for a command: file and environment via
/// [`Settings::load`], then the flags of `opts`, then validation.
///
/// `create_schema_by_default`: whether the command creates the schema
/// without being told (`serve` and `demo`); the others only check unless
/// the flag or `store.cql.create_schema` asks.
///
/// # Errors
/// A [`UsageError`] (exit 2) for unreadable or invalid settings.
pub fn settings(opts: &ConnectOpts, create_schema_by_default: bool) -> anyhow::Result<Settings> {
    let path = opts.config.as_deref();
    let loaded = Settings::load(path).map_err(|e| usage_from_settings(e, path, None))?;
    with_flags(loaded, opts, create_schema_by_default)
}

/// As [`settings`], for the commands that work on the fleet's store: the
/// store must be named (see the module docs).
///
/// # Errors
/// A [`UsageError`] (exit 2) for unreadable or invalid settings, for
/// settings that name no store, and for `store.backend = "embedded"`.
pub fn store_settings(
    opts: &ConnectOpts,
    create_schema_by_default: bool,
) -> anyhow::Result<Settings> {
    let path = opts.config.as_deref();
    let loaded = Settings::load(path).map_err(|e| usage_from_settings(e, path, None))?;
    if opts.contact_points.is_empty() {
        match loaded.store.backend {
            Some(StoreBackend::Cql) => {}
            Some(StoreBackend::Embedded) => {
                return Err(UsageError(format!(
                    "store.backend = \"embedded\" ({}) names a store inside each service \
                     process, which migrate cannot reach. Name the fleet's cluster: \
                     --contact-points HOST:PORT,… (127.0.0.1:9042 for a local `migrate serve`), \
                     LOCKSHIFT__STORE__CQL__CONTACT_POINTS, or [store.cql] contact_points in \
                     the --config file",
                    source_of("store.backend", path, None, "", Fallback::Default)
                ))
                .into());
            }
            None => {
                return Err(UsageError(format!(
                    "no store named: this command works on the fleet's store. Pass \
                     --contact-points HOST:PORT,… (127.0.0.1:9042 for a local `migrate serve`), \
                     set LOCKSHIFT__STORE__CQL__CONTACT_POINTS, or add [store.cql] \
                     contact_points = [\"HOST:PORT\"] to the --config file ({})",
                    anywhere(path)
                ))
                .into());
            }
        }
    }
    with_flags(loaded, opts, create_schema_by_default)
}

/// The flags of `opts` on top of `loaded`, then validation.
fn with_flags(
    mut settings: Settings,
    opts: &ConnectOpts,
    create_schema_by_default: bool,
) -> anyhow::Result<Settings> {
    let path = opts.config.as_deref();
    settings.store.backend = Some(StoreBackend::Cql);
    let cql = &mut settings.store.cql;
    if !opts.contact_points.is_empty() {
        cql.contact_points = opts.contact_points.clone();
    }
    if let Some(user) = &opts.username {
        cql.username = Some(user.clone());
    }
    if let Some(file) = &opts.password_file {
        // The flag replaces whatever password the file or environment gave.
        cql.password = None;
        cql.password_file = Some(file.clone());
    }
    if let Some(ca) = &opts.tls_ca_file {
        cql.tls.ca_file = Some(ca.clone());
    }
    if let Some(cert) = &opts.tls_cert_file {
        cql.tls.cert_file = Some(cert.clone());
    }
    if let Some(key) = &opts.tls_key_file {
        cql.tls.key_file = Some(key.clone());
    }
    if opts.tls_skip_hostname_verification {
        cql.tls.verify_hostname = false;
    }
    if let Some(ks) = &opts.keyspace {
        cql.keyspace = ks.clone();
    }
    if let Some(c) = opts.consistency {
        cql.consistency = match c {
            ConsistencyArg::Quorum => Consistency::Quorum,
            ConsistencyArg::LocalQuorum => Consistency::LocalQuorum,
        };
    }
    if let Some(t) = opts.connect_timeout {
        cql.connect_timeout = t;
    }
    cql.create_schema = opts.create_schema || create_schema_by_default || cql.create_schema;
    settings
        .validated()
        .map_err(|e| usage_from_settings(e, path, Some(opts)))
}

/// The settings of a cluster, if flags, environment or file name one
/// (`--contact-points`, or settings whose store is CQL); `None` otherwise.
/// `demo` runs against it when there is one.
///
/// # Errors
/// As [`settings`].
pub fn cluster_settings(opts: &ConnectOpts) -> anyhow::Result<Option<Settings>> {
    let path = opts.config.as_deref();
    let loaded = Settings::load(path).map_err(|e| usage_from_settings(e, path, None))?;
    if opts.contact_points.is_empty() && loaded.store.backend != Some(StoreBackend::Cql) {
        return Ok(None);
    }
    settings(opts, false).map(Some)
}

/// The settings error as a usage error, each broken rule followed by where
/// its value came from: the flag, the `LOCKSHIFT__…` variable (and its
/// value), or the file — whichever actually set it.
fn usage_from_settings(
    e: SettingsError,
    path: Option<&Path>,
    opts: Option<&ConnectOpts>,
) -> anyhow::Error {
    let text = match &e {
        SettingsError::Invalid { problems } => format!(
            "invalid settings:\n  - {}",
            problems
                .iter()
                .map(|p| {
                    format!(
                        "{p} ({})",
                        source_of(&p.key, path, opts, &p.message, Fallback::Default)
                    )
                })
                .collect::<Vec<_>>()
                .join("\n  - ")
        ),
        // A value that does not parse, or a key that does not exist, came
        // from somewhere: never from a default.
        SettingsError::Parse { message } => match parsed_key(message) {
            Some(key) => format!(
                "{e} ({})",
                source_of(&key, path, opts, message, Fallback::Given)
            ),
            None => format!("{e} ({})", anywhere(path)),
        },
        _ => e.to_string(),
    };
    UsageError(text).into()
}

/// The key a `config` crate message names ("… for key `lock.lease_ttl`"),
/// with the unknown field it names, if any ("unknown field `bogus` … for
/// key `lock`" is `lock.bogus`).
fn parsed_key(message: &str) -> Option<String> {
    let between = |after: &str| -> Option<&str> {
        let start = message.find(after)? + after.len();
        let len = message[start..].find('`')?;
        Some(&message[start..start + len])
    };
    let key = between("key `");
    match (key, between("unknown field `")) {
        (Some(key), Some(field)) => Some(format!("{key}.{field}")),
        (None, Some(field)) => Some(field.to_string()),
        (Some(key), None) => Some(key.to_string()),
        (None, None) => None,
    }
}

/// What a key's value came from when neither a flag nor a variable set it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fallback {
    /// Its default, unless the file gave it.
    Default,
    /// Something gave it (it does not parse, or the key is unknown): the
    /// file if there is one.
    Given,
}

/// Where the value of `key` came from, by precedence: flag, environment,
/// file, default. The value is echoed (cut short) unless `message`
/// already quotes it: once is enough.
fn source_of(
    key: &str,
    path: Option<&Path>,
    opts: Option<&ConnectOpts>,
    message: &str,
    fallback: Fallback,
) -> String {
    if let Some(opts) = opts {
        let flag = match key {
            "store.cql.contact_points" if !opts.contact_points.is_empty() => {
                Some("--contact-points")
            }
            "store.cql.keyspace" if opts.keyspace.is_some() => Some("--keyspace"),
            "store.cql.consistency" if opts.consistency.is_some() => Some("--consistency"),
            "store.cql.connect_timeout" if opts.connect_timeout.is_some() => {
                Some("--connect-timeout")
            }
            "store.cql.username" if opts.username.is_some() => Some("--username"),
            "store.cql.password" | "store.cql.password_file" if opts.password_file.is_some() => {
                Some("--password-file")
            }
            "store.cql.tls.ca_file" if opts.tls_ca_file.is_some() => Some("--tls-ca-file"),
            "store.cql.tls.cert_file" if opts.tls_cert_file.is_some() => Some("--tls-cert-file"),
            "store.cql.tls.key_file" if opts.tls_key_file.is_some() => Some("--tls-key-file"),
            _ => None,
        };
        if let Some(flag) = flag {
            return format!("from {flag}");
        }
    }
    // A list key's variable names the list, e.g. `…__CONTACT_POINTS` for
    // `store.cql.contact_points[1]`.
    let base = key.split('[').next().unwrap_or(key);
    let var = format!(
        "{}__{}",
        lockshift::settings::ENV_PREFIX,
        base.to_uppercase().replace('.', "__")
    );
    if let Ok(value) = std::env::var(&var) {
        // Never echo a secret; cut long values short; say a value once.
        if base == "store.cql.password" || quotes(message, &value) {
            return format!("from {var} in the environment");
        }
        return format!(
            "from {var}={} in the environment",
            lockshift_store::settings::echo(&value)
        );
    }
    match (path, fallback) {
        (Some(p), _) => format!("from the file {}", lockshift_store::settings::show_path(p)),
        (None, Fallback::Default) => "its default".to_string(),
        (None, Fallback::Given) => "from a LOCKSHIFT__… environment variable".to_string(),
    }
}

/// Whether `message` already quotes `value` (whole, or its first
/// characters where it was cut short).
fn quotes(message: &str, value: &str) -> bool {
    let head: String = value.chars().take(32).collect();
    let quoted = format!("{head:?}");
    let open = quoted.strip_suffix('"').unwrap_or(&quoted);
    !value.is_empty() && message.contains(open)
}

/// When the key is unknown: everywhere it could have come from.
fn anywhere(path: Option<&Path>) -> String {
    match path {
        Some(p) => format!("file {}, plus LOCKSHIFT__… variables", p.display()),
        None => "from LOCKSHIFT__… environment variables".to_string(),
    }
}

/// Connects to the database the settings name.
///
/// # Errors
/// With a next step for the two errors operators meet first: an unreachable
/// database (which contact points were tried; `migrate serve` for a local
/// endpoint) and a missing keyspace or table (how to create it).
pub async fn open(settings: &Settings) -> anyhow::Result<SharedStore> {
    let cql = &settings.store.cql;
    match CqlStore::connect(cql).await {
        Ok(store) => Ok(std::sync::Arc::new(store)),
        Err(e) => Err(explain_connect_error(settings, e)),
    }
}

/// The connection error with what to do about it.
pub fn explain_connect_error(settings: &Settings, e: StoreError) -> anyhow::Error {
    let cql = &settings.store.cql;
    let points = cql.contact_points.join(", ");
    match e.kind() {
        StoreErrorKind::SchemaMissing => anyhow::Error::new(e).context(format!(
            "lockshift's tables are missing in keyspace {ks} at {points}. `migrate schema` \
             prints the statements to run (with your replication: --datacenter dc1:3); or \
             `migrate --create-schema status` creates them with store.cql.replication; a local \
             endpoint started with `migrate serve` has them already",
            ks = cql.keyspace
        )),
        StoreErrorKind::Authentication => anyhow::Error::new(e).context(format!(
            "the database at {points} refused this client (authentication or TLS); the \
             reason follows. Settings: --username/--password-file or store.cql.username and \
             store.cql.password_file; --tls-ca-file/--tls-cert-file/--tls-key-file or \
             [store.cql.tls]"
        )),
        StoreErrorKind::Connection | StoreErrorKind::NotApplied | StoreErrorKind::Unavailable => {
            anyhow::Error::new(e).context(format!(
                "cannot reach the database (tried {points}). Is it running? For a local endpoint \
                 run `migrate serve` (listens on 127.0.0.1:9042); for a cluster pass \
                 --contact-points host:port,... or set LOCKSHIFT__STORE__CQL__CONTACT_POINTS or \
                 store.cql.contact_points in the --config file"
            ))
        }
        _ => anyhow::Error::new(e).context(format!("cannot open the store at {points}")),
    }
}
