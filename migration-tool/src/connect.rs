//! From flags, environment and config file to [`Settings`] and an open store,
//! with errors that tell the operator what to do next.
//!
//! Precedence: flags, then `LOCKSHIFT__…` environment variables, then the
//! file (`--config` or `LOCKSHIFT_CONFIG`), then defaults —
//! [`Settings::load`] does the last three, the flags are laid on top here.
//!
//! `migrate` always talks CQL: an embedded store inside the tool's own
//! process would hold nothing the fleet wrote. `store.backend = "embedded"`
//! (the services' default) therefore means the default CQL endpoint,
//! `127.0.0.1:9042`, where `migrate serve` listens.
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
    let mut settings = Settings::load(path).map_err(|e| usage_from_settings(e, path, None))?;
    settings.store.backend = StoreBackend::Cql;
    let cql = &mut settings.store.cql;
    if !opts.contact_points.is_empty() {
        cql.contact_points = opts.contact_points.clone();
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
    if opts.contact_points.is_empty() && loaded.store.backend != StoreBackend::Cql {
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
                .map(|p| format!("{p} ({})", source_of(&p.key, path, opts)))
                .collect::<Vec<_>>()
                .join("\n  - ")
        ),
        SettingsError::Parse { message } => match key_in(message) {
            Some(key) => format!("{e} ({})", source_of(key, path, opts)),
            None => format!("{e} ({})", anywhere(path)),
        },
        _ => e.to_string(),
    };
    UsageError(text).into()
}

/// The key a `config` crate message names ("… for key `lock.lease_ttl`").
fn key_in(message: &str) -> Option<&str> {
    let start = message.find("key `")? + "key `".len();
    let len = message[start..].find('`')?;
    Some(&message[start..start + len])
}

/// Where the value of `key` came from, by precedence: flag, environment,
/// file, default.
fn source_of(key: &str, path: Option<&Path>, opts: Option<&ConnectOpts>) -> String {
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
        return format!("from {var}={value:?} in the environment");
    }
    match path {
        Some(p) => format!("from the file {}", p.display()),
        None => "its default".to_string(),
    }
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
