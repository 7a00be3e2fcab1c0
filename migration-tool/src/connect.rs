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
//! Schema: the operator commands never create tables by accident. They
//! check, and on a missing keyspace or table say how to create it; only
//! `--create-schema`, an explicitly configured `store.cql.create_schema =
//! true`, `serve` and `demo` create it.

use std::path::Path;

use lockshift_combined::{Settings, SettingsError};
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
/// `create_schema` is what the command does without being told: `serve` and
/// `demo` create it, the operator commands only check — unless the flag is
/// given or the key is set explicitly in the file or environment.
///
/// # Errors
/// A [`UsageError`] (exit 2) for unreadable or invalid settings.
pub fn settings(opts: &ConnectOpts, create_schema_by_default: bool) -> anyhow::Result<Settings> {
    let path = opts.config.as_deref();
    let mut settings = Settings::load(path).map_err(|e| usage_from_settings(e, path))?;
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
    cql.create_schema = opts.create_schema
        || create_schema_by_default
        || (cql.create_schema && create_schema_set_explicitly(path));
    settings
        .validated()
        .map_err(|e| usage_from_settings(e, path))
}

/// Whether `store.cql.create_schema` was given in the file or environment
/// (rather than being the services' default, `true`).
fn create_schema_set_explicitly(path: Option<&Path>) -> bool {
    const KEY: &str = "store.cql.create_schema";
    if std::env::var_os("LOCKSHIFT__STORE__CQL__CREATE_SCHEMA").is_some() {
        return true;
    }
    let Some(path) = path else { return false };
    config::Config::builder()
        .add_source(config::File::from(path).format(config::FileFormat::Toml))
        .build()
        .is_ok_and(|c| c.get_bool(KEY).is_ok())
}

fn usage_from_settings(e: SettingsError, path: Option<&Path>) -> anyhow::Error {
    let hint = match path {
        Some(p) => format!(" (file {}, plus LOCKSHIFT__… variables)", p.display()),
        None => " (from LOCKSHIFT__… environment variables)".to_string(),
    };
    UsageError(format!("{e}{hint}")).into()
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
            "lockshift's tables are missing in keyspace {ks} at {points}. Create them with \
             `migrate --create-schema status` (or set store.cql.create_schema = true, or run the \
             DDL of CqlStore::schema_cql); a local endpoint started with `migrate serve` has them \
             already",
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
