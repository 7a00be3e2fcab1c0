//! Every argument of `migrate`, in clap-derive form (sqlx-cli's `opt.rs`
//! layout): the subcommand enum whose doc comments are the `--help`
//! ([`Command`], in `command`), the arguments of the larger subcommands and
//! the groups two subcommands share (in `args`), and here the option groups
//! shared by every command ([`ConnectOpts`], [`OutputOpts`]), flattened and
//! global so they may come before or after the subcommand.
//!
//! Values are parsed here, not in the operations: a stage, a mode, a lock id
//! or a duration that does not parse is a usage error (exit 2) naming the
//! flag, before anything touches the database.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, ValueEnum};
use lockshift_decide::algorithm::{Mode, Stage};
use lockshift_lock::LockId;

mod args;
mod command;

/// The arguments of the larger subcommands and the groups two share, in
/// `args`.
pub use args::{
    AcquireArgs, BenchArgs, CleanArgs, DemoArgs, HomeForgetArgs, HomeMoveArgs, RunArgs, SchemaArgs,
    ServeArgs, TransitionArgs,
};
/// The subcommands, in `command`.
pub use command::{Command, HomeAction};

const EXIT_CODES: &str = "\
Exit codes:
  0  ok (run-with-lock: the command's own exit code is passed through)
  1  error: database unreachable, schema missing, store failure
  2  usage: bad flag or value, invalid settings, unknown or skipped stage
  3  not safe yet / refused: guards failed (advance, rollback, --dry-run),
     another operator's transition won the race, or run-with-lock or lock
     could not take the lock within --timeout
  4  lease lost: run-with-lock lost the lock and stopped the command, or
     lock lost the lock it held
  5  unsafe state: status found legacy and queue in use at the same time
run-with-lock passes the command's own exit code through (killed by a
signal: 128 + the signal), and exits
  126  the command could not be run (found, but not executable)
  127  the command was not found (not a file, not on PATH)
  with the lock released and nothing run.
lock exits 0 when a signal (INT, TERM, HUP, QUIT) released the lock it
held, and 128 + the signal when one came while it still waited.";

const EXAMPLES: &str = "\
Examples:
  migrate serve &                        # a local endpoint on 127.0.0.1:9042
  migrate status                         # stage, nodes, locks, verdict
  migrate advance --dry-run              # is the next stage safe yet?
  migrate advance --to dual --reason 'fleet on v2'   # move one stage forward
  migrate run-with-lock nightly-report -- ./report.sh --full
  migrate lock nightly-report            # print the fencing token, hold until Ctrl-C
  migrate --contact-points 10.0.0.1:9042,10.0.0.2:9042 status --json
  migrate schema --datacenter dc1:3 | cqlsh 10.0.0.1   # create the tables
  migrate demo                           # the whole rollout on a simulated fleet

Connection settings come from flags, then LOCKSHIFT__... environment
variables (e.g. LOCKSHIFT__STORE__CQL__CONTACT_POINTS=10.0.0.1:9042), then
the config file (--config or LOCKSHIFT_CONFIG); flags win. Every command
that reads or changes the fleet's state needs the store named this way
(for `migrate serve`: --contact-points 127.0.0.1:9042); `serve`, `demo`,
`schema` and `bench` need none. Authentication and TLS: --username with
--password-file (or LOCKSHIFT__STORE__CQL__PASSWORD), --tls-ca-file,
--tls-cert-file and --tls-key-file, or the same keys in the file.";

/// The operator tool for moving a fleet from the legacy lock to the queue lock.
///
/// Shows the rollout (stage, nodes, locks), advances or rolls it back through
/// guarded transitions, cleans up stale lock cells, and runs commands under a
/// lock (or holds one for a script). It talks to ScyllaDB/Cassandra (or the local endpoint `migrate
/// serve`) through the same store interface the services use.
#[derive(Debug, Parser)]
#[command(
    name = "migrate",
    version,
    propagate_version = true,
    after_help = format!("{EXAMPLES}\n\n{EXIT_CODES}"),
    max_term_width = 100
)]
pub struct Cli {
    /// Where the database is and how to talk to it.
    #[command(flatten)]
    pub connect: ConnectOpts,
    /// How to print results.
    #[command(flatten)]
    pub output: OutputOpts,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Connection options shared by every command that talks to the database.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Connection")]
pub struct ConnectOpts {
    /// Settings file (TOML; the services' own file works).
    #[arg(long, global = true, env = "LOCKSHIFT_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// CQL nodes to contact, host:port, comma-separated (127.0.0.1:9042 for
    /// a local `migrate serve`).
    #[arg(
        long,
        global = true,
        value_delimiter = ',',
        value_name = "HOST:PORT,..."
    )]
    pub contact_points: Vec<String>,
    /// Keyspace holding lockshift's tables [default: lockshift].
    #[arg(long, global = true, value_name = "NAME")]
    pub keyspace: Option<String>,
    /// Consistency of every read and write [default: quorum].
    #[arg(long, global = true, value_enum)]
    pub consistency: Option<ConsistencyArg>,
    /// How long to wait for the first connection, e.g. 5s.
    #[arg(long, global = true, value_name = "DURATION", value_parser = Checked(parse_duration))]
    pub connect_timeout: Option<Duration>,
    /// Create the keyspace and tables if they are missing. Without it, only
    /// `serve` and `demo` create schema; the other commands check for it and
    /// say how to create it.
    #[arg(long, global = true)]
    pub create_schema: bool,
    /// User name for password authentication; the password comes from
    /// --password-file or LOCKSHIFT__STORE__CQL__PASSWORD (never a flag:
    /// flags show in `ps`).
    #[arg(long, global = true, value_name = "NAME")]
    pub username: Option<String>,
    /// File holding the password (one trailing newline is dropped).
    #[arg(long, global = true, value_name = "FILE")]
    pub password_file: Option<PathBuf>,
    /// Connect with TLS, trusting the CA certificate(s) in this PEM file.
    #[arg(long, global = true, value_name = "FILE")]
    pub tls_ca_file: Option<PathBuf>,
    /// Client certificate (PEM) for nodes that require one; with --tls-key-file.
    #[arg(long, global = true, value_name = "FILE", requires = "tls_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, global = true, value_name = "FILE", requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,
    /// UNSAFE: accept a node certificate that does not name the node's
    /// address (the CA signature is still checked). Any certificate the CA
    /// signed then passes for any node.
    #[arg(long, global = true)]
    pub tls_skip_hostname_verification: bool,
}

/// `--consistency`, spelt as `store.cql.consistency` is (`local_quorum`);
/// `local-quorum` is taken too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConsistencyArg {
    /// QUORUM: read-your-writes across datacenters.
    Quorum,
    /// LOCAL_QUORUM: only when every client of a lock is in one datacenter.
    #[value(name = "local_quorum", alias = "local-quorum")]
    LocalQuorum,
}

/// `--fencing-token` (`run-with-lock`, `lock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FencingTokenArg {
    /// No token, no hold (and no command).
    Required,
    /// Go on without a token when none can be had.
    Optional,
}

/// Output options shared by every command.
#[derive(Debug, Clone, Copy, Default, Args)]
#[command(next_help_heading = "Output")]
pub struct OutputOpts {
    /// Print the result as JSON (one object with "version": 1) instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
}

/// A value parser that echoes the value it refuses once, cut short. (With
/// a plain function clap quotes the whole value in its message: a 100 KB
/// lock name came back whole.)
#[derive(Clone, Copy)]
pub struct Checked<T>(pub fn(&str) -> Result<T, String>);

impl<T> std::fmt::Debug for Checked<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Checked")
    }
}

impl<T: Clone + Send + Sync + 'static> clap::builder::TypedValueParser for Checked<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        let what = arg.map_or_else(|| "a value".to_string(), |a| format!("'{a}'"));
        let text = value.to_string_lossy();
        let Some(valid) = value.to_str() else {
            return Err(usage(
                cmd,
                format!("invalid value {} for {what}: not UTF-8", quoted(&text)),
            ));
        };
        (self.0)(valid).map_err(|why| {
            // Once: a reason that quotes the value already says it.
            let cut = lockshift_lock::cut_short(valid);
            let message = if why.contains(cut.as_ref()) {
                format!("invalid value for {what}: {why}")
            } else {
                format!("invalid value {} for {what}: {why}", quoted(valid))
            };
            usage(cmd, message)
        })
    }
}

/// `value` quoted, cut short (as every message quotes a value).
fn quoted(value: &str) -> String {
    format!("'{}'", lockshift_lock::cut_short(value))
}

fn usage(cmd: &clap::Command, message: String) -> clap::Error {
    let mut cmd = cmd.clone();
    clap::Error::raw(
        clap::error::ErrorKind::ValueValidation,
        format!("{message}\n"),
    )
    .format(&mut cmd)
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s)
        .map_err(|e| format!("{e} (expected a duration such as 30s, 2m or 250ms)"))
}

fn parse_datacenter(s: &str) -> Result<(String, u32), String> {
    let (dc, rf) = s
        .rsplit_once(':')
        .ok_or_else(|| "it is not DC:RF, e.g. dc1:3".to_string())?;
    let rf: u32 = rf
        .parse()
        .map_err(|_| "the replication factor is not a number".to_string())?;
    if dc.is_empty() {
        return Err("the datacenter name is empty".to_string());
    }
    Ok((dc.to_string(), rf))
}

fn parse_datacenter_name(s: &str) -> Result<lockshift_store::Datacenter, String> {
    lockshift_store::Datacenter::new(s).map_err(|e| e.to_string())
}

fn parse_bench_algorithm(s: &str) -> Result<lockshift_bench::BenchAlgorithm, String> {
    s.parse()
}

fn parse_census_size(s: &str) -> Result<u64, String> {
    lockshift_bench::census::parse_size(s)
}

fn parse_stage(s: &str) -> Result<Stage, String> {
    s.parse()
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    s.parse()
}

/// A home prefix, by the one check every way of writing a homes record
/// goes through (`Rule::prefix`).
fn parse_prefix(s: &str) -> Result<String, String> {
    lockshift_decide::home::Rule::prefix(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

fn parse_lock_id(s: &str) -> Result<LockId, String> {
    LockId::new(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
