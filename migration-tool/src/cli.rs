//! Every argument of `migrate`, in one clap-derive file (sqlx-cli's `opt.rs`
//! layout): the subcommand enum whose doc comments are the `--help`, and the
//! option groups shared by every command ([`ConnectOpts`], [`OutputOpts`]),
//! flattened and global so they may come before or after the subcommand.
//!
//! Values are parsed here, not in the operations: a stage, a mode, a lock id
//! or a duration that does not parse is a usage error (exit 2) naming the
//! flag, before anything touches the database.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use lockshift_combined::{Mode, Stage};
use lockshift_lock::LockId;

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

/// `--consistency`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConsistencyArg {
    /// QUORUM: read-your-writes across datacenters.
    Quorum,
    /// LOCAL_QUORUM: only when every client of a lock is in one datacenter.
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

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show the rollout: stage and history, nodes, locks, stale cells, legacy
    /// activity, and whether the next stage is safe.
    ///
    /// Read-only. Exits 0 whatever the verdict on the next stage (use
    /// `advance --dry-run` to wait for "safe" in a script: it exits 3 until
    /// then), and 5 when the fleet is in an unsafe state now: live nodes or
    /// holders of the legacy and the queue algorithm at once (a `main` cell
    /// not written by lockshift counts as a legacy holder).
    #[command(after_help = "Examples:\n  migrate status\n  migrate status --json | jq .next.safe")]
    Status,

    /// Show every cell of one lock in main, shadow and queue: owner, queue
    /// position, writetime, TTL left, age, and whether it looks stale.
    ///
    /// A lock with no cells at all is free (or its id is misspelt): it says
    /// so and exits 0, as for any answer.
    #[command(
        after_help = "Examples:\n  migrate inspect account-42\n  migrate inspect account-42 --json"
    )]
    Inspect {
        /// The lock id (the row key).
        #[arg(value_parser = Checked(parse_lock_id))]
        lock: LockId,
    },

    /// Find stale lock cells across all locks and (with --apply) delete them,
    /// never deleting the cell of an owner that renews within its promise.
    ///
    /// Each cell is judged by its own owner's promise, not by this
    /// machine's settings: the TTL and renewal period announced in the
    /// registry by the very process that wrote it (node id and
    /// incarnation; another process of the same node id says nothing about
    /// it), or else the cell's own TTL (a lockshift owner renews at least
    /// every TTL/2). Ages allow for rollout.clock_skew_margin: an owner's
    /// clock may be that far behind this one. A cell is overdue when not
    /// renewed for --stale-multiple such periods. A cell whose lease is
    /// over — older than its guaranteed life (TTL - 1s - 250ms) by its own
    /// process's promise, so its owner was told it lost the lock; a late
    /// write can leave one (docs/design.md §5, L5) — is deleted. Other
    /// overdue cells are KEPT: their owner's process is live, or the owner
    /// may not have been told yet; a cell with a TTL therefore usually
    /// expires by itself first. Cells without a TTL promise nothing and are
    /// judged only by --stale-after. With --apply every deletion waits for
    /// a second look: the cell is read again one and a half promised
    /// renewal periods after the scan (timed by this machine's monotonic
    /// clock) and skipped if its writetime moved, then deleted USING
    /// TIMESTAMP that writetime, so a renewal racing the delete still wins.
    /// (Cells without a TTL are re-read just before the delete.) So clean
    /// may take that long. Without --apply nothing is deleted. Exits 1 if a
    /// delete failed (the summary counts them).
    #[command(
        after_help = "Examples:\n  migrate clean                        # dry run: what is overdue, what would go\n  migrate clean --apply\n  migrate clean --stale-after 30m --apply   # also cells written without a TTL"
    )]
    Clean {
        /// Delete the cells (default: dry run).
        #[arg(long)]
        apply: bool,
        /// For cells without a TTL, which never expire and promise nothing
        /// (written by binaries that predate leases): overdue when not
        /// renewed for this long, e.g. 30m. Never applies to a cell with a
        /// TTL or an owner's announced promise: it cannot shorten either.
        /// Without it, cells without a TTL are counted, never deleted.
        #[arg(long, value_name = "DURATION", value_parser = Checked(parse_duration))]
        stale_after: Option<Duration>,
        /// Overdue after this many of the owner's promised renewal periods.
        #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..))]
        stale_multiple: u32,
        /// Also delete overdue cells whose owner may still hold the lock
        /// (its process is live, or it may not have been told yet) — still
        /// only after the second look finds them not renewed: an owner
        /// renewing within its promise keeps its cells, whatever the
        /// clocks. RISK: an owner that is alive but not renewing within its
        /// promise — paused (GC, SIGSTOP, a frozen VM), cut off from the
        /// database, or with renewals slow or stuck in flight — may still
        /// run its critical section: it is told it lost the lock only
        /// lost_after_fraction x TTL after its last renewal that landed,
        /// and another process can take the lock before then. And a
        /// renewal of such an owner still in flight when its cell is
        /// deleted lands afterwards and survives (it is stamped after the
        /// delete): the owner then keeps holding, never told, beside
        /// whoever took the lock meanwhile. Use only when you know the
        /// owner is dead (fencing tokens protect a resource that checks
        /// them).
        #[arg(long)]
        force: bool,
        /// Row keys per scan page.
        #[arg(long, value_name = "N", default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..))]
        page_size: u32,
    },

    /// Move the rollout one stage forward (legacy -> dual -> queue -> complete)
    /// if every guard holds.
    ///
    /// A change names its target with --to (the next stage); without it,
    /// only --dry-run is accepted (it evaluates the next stage), so two
    /// commands a moment apart never move the fleet two stages. A refusal
    /// prints every failing guard with what to do and exits 3 (it is
    /// recorded in the history). A skipped stage (e.g. legacy to queue) is a
    /// usage error, exit 2. Already at the target: exit 0.
    #[command(
        after_help = "Examples:\n  migrate advance --dry-run\n  migrate advance --to dual --reason 'all nodes on v2' --by alice"
    )]
    Advance(TransitionArgs),

    /// Move the rollout one stage back (complete -> queue -> dual -> legacy)
    /// if every guard holds.
    ///
    /// A change names its target with --to (the previous stage), as for
    /// `advance`; --dry-run alone evaluates the previous stage. Exit codes
    /// as for `advance`.
    #[command(
        after_help = "Examples:\n  migrate rollback --dry-run\n  migrate rollback --to dual --reason 'queue lock misbehaves'"
    )]
    Rollback(TransitionArgs),

    /// Hold a lock while a command runs: take it, run the command, release.
    ///
    /// If the lease is lost, the command gets SIGTERM, then SIGKILL after
    /// --grace, and migrate exits 4. Otherwise the command's exit code is
    /// passed through (killed by a signal: 128 + signal). Could not take the
    /// lock within --timeout: exit 3. The command not found: exit 127; found
    /// but not executable: 126 (the lock is released, nothing ran). While it
    /// waits, stderr says who holds the lock, and again whenever whom it
    /// waits for changes (at most one line per 5 s). The command runs in its own process group and
    /// dies with migrate (even on kill -9: a supervisor kills the group);
    /// SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to it as they are,
    /// and it gets SIGKILL if still running --grace later or on a second
    /// signal. The lock is held until the command's whole process group is
    /// gone: when the command exits (or is stopped) and processes it started
    /// are still in its group (`sh -c 'job &'`), they get SIGTERM, then
    /// SIGKILL after --grace, and only then is the lock released. (A process
    /// that leaves the group itself, with setsid, is out of reach.) The
    /// process registers as a node (node.id and node.mode come from --mode,
    /// LOCKSHIFT__NODE__..., the --config file, as for every node) and the
    /// command gets LOCKSHIFT_LOCK_ID, LOCKSHIFT_LOCK_OWNER and
    /// LOCKSHIFT_FENCING_TOKEN; without a token the command does not start
    /// (exit 1) unless --fencing-token optional. stdout is the command's:
    /// --json writes the report to stderr, --report FILE to a file.
    #[command(
        after_help = "Examples:\n  migrate run-with-lock nightly-report -- ./report.sh --full\n  migrate run-with-lock db-migration --timeout 5m --mode auto -- sh -c 'make migrate'\n  migrate run-with-lock job --report /var/log/job-lock.json -- ./job.sh"
    )]
    RunWithLock {
        /// Which lock, and how to take it.
        #[command(flatten)]
        acquire: AcquireArgs,
        /// After a forwarded signal or SIGTERM, how long the command may take
        /// to exit before SIGKILL.
        #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = Checked(parse_duration))]
        grace: Duration,
        /// Write the JSON report to this file (as well as --json on stderr).
        #[arg(long, value_name = "FILE")]
        report: Option<PathBuf>,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },

    /// Take a lock and hold it until signalled: print its fencing token on
    /// stdout, keep the lease renewed, release on SIGINT, SIGTERM or SIGHUP.
    ///
    /// `etcdctl lock NAME` without a command: for a script that runs steps
    /// of its own under one lock. The lock is taken as run-with-lock takes
    /// it — same settings, --mode, --timeout and --fencing-token; the
    /// process registers as a node; while it waits, stderr says who holds
    /// the lock. Once the lock is held, exactly one line goes to stdout:
    /// the fencing token (an empty line with --fencing-token optional and
    /// no token), or with --json one JSON object on one line: version,
    /// lock, fencing_token, owner, node, algorithm, waited_ms. Nothing is
    /// printed on stdout before the lock is held, and nothing after (but a
    /// --json error). Then it holds the lock, renewing its lease, until a
    /// signal — SIGINT, SIGTERM, SIGHUP (or SIGQUIT) — releases it and
    /// migrate exits 0 (4 instead if the lease could not be proven up to
    /// then), or until the lease is lost: migrate says so on stderr and
    /// exits 4. Nothing else is stopped then: whatever uses the lock must
    /// watch for the exit, and the resource should check the token. Not
    /// free within --timeout: exit 3, nothing on stdout. A signal while it
    /// still waits: 128 + the signal. No fencing token (required by
    /// default): the lock is released, exit 1. With --json the final report
    /// goes to stderr.
    #[command(
        after_help = "Examples:\n  migrate lock nightly                      # prints the token; Ctrl-C releases\n  migrate lock nightly --timeout 30s --json # {\"version\":1,\"lock\":\"nightly\",\"fencing_token\":17,...}\n  coproc LOCK { migrate lock nightly; }; read -r token <&\"${LOCK[0]}\"\n  ./step --fence \"$token\"; kill $LOCK_PID; wait $LOCK_PID   # 0: held throughout\n\nExit codes:\n  0    released after SIGINT, SIGTERM, SIGHUP or SIGQUIT, the lease held throughout\n  1    error, or no fencing token could be had (the lock was released)\n  2    usage\n  3    the lock was not free within --timeout (nothing printed on stdout)\n  4    the lease was lost while held (said on stderr)\n  128+n  signal n came while still waiting for the lock"
    )]
    Lock(AcquireArgs),

    /// The supervisor of a run-with-lock command (started by run-with-lock).
    #[command(name = "run-with-lock-child", hide = true)]
    RunWithLockChild {
        /// The pid of the run-with-lock process.
        #[arg(long)]
        parent: i32,
        /// SIGTERM → SIGKILL grace for processes the command leaves behind.
        #[arg(long, value_parser = Checked(parse_duration), default_value = "10s")]
        grace: Duration,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },

    /// Print the CQL that creates lockshift's keyspace and tables, to run
    /// with cqlsh (`migrate schema --datacenter dc1:3 > lockshift.cql`).
    ///
    /// Nothing creates schema unless asked: services and `migrate` only
    /// check for it (`--create-schema` or store.cql.create_schema = true ask).
    /// Without --datacenter or --replication-factor, the keyspace gets
    /// store.cql.replication from the settings, whose default
    /// (SimpleStrategy, one replica) suits a single test node only.
    #[command(
        after_help = "Examples:\n  migrate schema --datacenter dc1:3 --datacenter dc2:3 | cqlsh 10.0.0.1\n  migrate schema --keyspace locks --replication-factor 3"
    )]
    Schema {
        /// NetworkTopologyStrategy: this many replicas in this datacenter,
        /// e.g. dc1:3; repeat for each datacenter.
        #[arg(long = "datacenter", value_name = "DC:RF", value_parser = Checked(parse_datacenter))]
        datacenters: Vec<(String, u32)>,
        /// SimpleStrategy with this many replicas (one datacenter only).
        #[arg(long, value_name = "N", conflicts_with = "datacenters")]
        replication_factor: Option<u32>,
        /// Run the statements against the connected cluster instead of
        /// printing them: creates what is missing and sets every table's
        /// options (gc grace, compaction). Brings back a lock the database
        /// refuses to read (docs/operating.md).
        #[arg(long)]
        apply: bool,
    },

    /// Run the local CQL endpoint (an in-memory store served over the CQL
    /// protocol) so several processes and migrate itself can share it.
    ///
    /// Creates the keyspace and tables at start, prints `listening on ADDR`,
    /// and runs until SIGINT or SIGTERM. Data lives in memory only.
    #[command(
        after_help = "Examples:\n  migrate serve\n  migrate serve --listen 127.0.0.1:0 --latency 2ms --jitter 1ms\n  migrate serve --metrics 127.0.0.1:9100   # curl 127.0.0.1:9100/metrics"
    )]
    Serve {
        /// Address to listen on; port 0 picks a free port.
        #[arg(long, default_value = "127.0.0.1:9042")]
        listen: SocketAddr,
        /// Serve metrics in the Prometheus text format on this address
        /// (any path; port 0 picks a free port): the store operations the
        /// endpoint answered, by table and kind.
        #[arg(long, value_name = "ADDR")]
        metrics: Option<SocketAddr>,
        /// Delay every read and write by this much, e.g. 2ms.
        #[arg(long, value_name = "DURATION", value_parser = Checked(parse_duration))]
        latency: Option<Duration>,
        /// Add up to this much random delay on top of --latency.
        #[arg(long, value_name = "DURATION", value_parser = Checked(parse_duration))]
        jitter: Option<Duration>,
    },

    /// Roll a simulated fleet from the legacy lock to the queue lock, with
    /// restarts, while it moves money between accounts; then check that no
    /// transfer was lost and no lock had two holders.
    ///
    /// Needs no database: by default it starts its own endpoint in-process.
    /// Given connection settings (--contact-points, LOCKSHIFT__STORE__CQL__...
    /// or a --config file naming a cluster) it runs against that cluster, in
    /// a keyspace of its own (lockshift_demo_RANDOM, created with
    /// store.cql.replication and dropped at the end). Exits 1 if an
    /// invariant broke.
    #[command(
        after_help = "Examples:\n  migrate demo\n  migrate demo --nodes 6 --accounts 20 --settle 5s\n  migrate demo --json > report.json\n  migrate demo --metrics 127.0.0.1:9100   # the nodes' metrics while it runs\n  migrate demo --contact-points 10.0.0.1:9042   # against a cluster, own keyspace"
    )]
    Demo(DemoArgs),

    /// Measure the legacy, queue and combined locks side by side, like the
    /// thesis' tables 1-2, against the LWT lease users build instead: P
    /// worker processes each take one shared lock K times, for each
    /// algorithm and each P. With --hold-locks: one node holding N locks.
    /// With --soak N: one lock taken N times, its first waits against its
    /// last, and the tombstones its reads passed.
    ///
    /// By default against a local endpoint started in-process with injected
    /// store latency (fixed + uniform jitter); with --cluster against the
    /// database the connection settings name. Prints waits (mean, p50, p99,
    /// max), throughput, store operations per acquisition, hand-off latency
    /// in store round trips and fairness, where each target of the benchmark
    /// stands (met / not met), and writes one PNG per algorithm (acquisition
    /// number against time, one line per process).
    #[command(
        after_help = "Examples:\n  migrate bench\n  migrate bench --processes 1,3,5 --acquisitions 5000   # the thesis' sizes\n  migrate bench --algorithms queue,combined --hold 10ms --plots out/\n  migrate bench --cluster --contact-points 10.0.0.1:9042 --json > bench.json\n  migrate bench --hold-locks 100,1000,10000 --algorithms queue,lwt   # one node holding N locks"
    )]
    Bench(BenchArgs),

    /// One benchmark worker process (started by `migrate bench`).
    #[command(hide = true)]
    BenchWorker {
        /// The worker's spec, as JSON.
        spec: String,
    },
}

/// `bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Algorithms to measure, in order (lwt: the lightweight-transaction
    /// lease Cassandra users build, a baseline) [default:
    /// legacy,queue,combined,lwt; with --soak: legacy,queue,combined].
    #[arg(long, value_delimiter = ',', value_name = "ALGORITHM,...", value_parser = Checked(parse_bench_algorithm))]
    pub algorithms: Vec<lockshift_bench::BenchAlgorithm>,
    /// Worker process counts P, in order [default: 1,3,5; with --soak: 1].
    #[arg(long, value_delimiter = ',', value_name = "P,...", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub processes: Vec<u32>,
    /// Acquisitions per process K.
    #[arg(long, short = 'k', default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub acquisitions: u32,
    /// How long each acquisition holds the lock, e.g. 1ms.
    #[arg(long, value_name = "DURATION", default_value = "1ms", value_parser = Checked(parse_duration))]
    pub hold: Duration,
    /// Injected store latency per request at the local endpoint, e.g. 2ms.
    #[arg(long, value_name = "DURATION", default_value = "2ms", value_parser = Checked(parse_duration), conflicts_with = "cluster")]
    pub latency: Duration,
    /// Extra latency per request, uniform in [0, jitter), e.g. 1ms.
    #[arg(long, value_name = "DURATION", default_value = "1ms", value_parser = Checked(parse_duration), conflicts_with = "cluster")]
    pub jitter: Duration,
    /// Measure the database of the connection settings instead of a local endpoint.
    #[arg(long)]
    pub cluster: bool,
    /// Directory for the PNG plots.
    #[arg(long, value_name = "DIR", default_value = "bench-plots")]
    pub plots: std::path::PathBuf,
    /// Do not draw plots.
    #[arg(long, conflicts_with = "plots")]
    pub no_plots: bool,
    /// Seed of the workers' random choices and the injected jitter.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Hold mode instead of contention: one node holds N locks at once,
    /// for each N given (e.g. 100,1000,10000), and the bench reports store
    /// operations per held lock per renew period, memory and CPU.
    #[arg(long, value_name = "N,...", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub hold_locks: Vec<u32>,
    /// Hold mode: renew periods to measure.
    #[arg(long, default_value_t = 3, requires = "hold_locks", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub periods: u32,
    /// Hold mode: the lease renew period (default: lock.renew_every of the settings).
    #[arg(long, value_name = "DURATION", requires = "hold_locks", value_parser = Checked(parse_duration))]
    pub renew_every: Option<Duration>,
    /// Soak instead of contention: take one lock N times per algorithm (and
    /// per P, the N split between the P processes), then compare the mean
    /// and p99 wait of the first and the last tenth and report the most
    /// tombstones any read passed and the database's warnings. Verdict per
    /// algorithm: last tenth mean ≤ 1.2 × first tenth mean, and no read
    /// above 1 000 tombstones. Draws no plots.
    #[arg(long, value_name = "N", conflicts_with_all = ["hold_locks", "acquisitions"], value_parser = clap::value_parser!(u32).range(10..=100_000_000))]
    pub soak: Option<u32>,
}

/// Which lock, and how to take it: `run-with-lock` and `lock` alike.
#[derive(Debug, Clone, Args)]
pub struct AcquireArgs {
    /// The lock id.
    #[arg(value_parser = Checked(parse_lock_id))]
    pub lock: LockId,
    /// Lock algorithm: legacy, combined, queue or auto (follow the stage).
    /// A mode the stage forbids degrades to combined, with a warning.
    /// [default: node.mode from the settings, else auto]
    #[arg(long, value_parser = Checked(parse_mode))]
    pub mode: Option<Mode>,
    /// Give up waiting for the lock after this long (exit 3); default: wait for ever.
    #[arg(long, value_name = "DURATION", value_parser = Checked(parse_duration))]
    pub timeout: Option<Duration>,
    /// Whether holding needs a fencing token: `required` (the default) —
    /// taking the token is retried while the lease holds; if it cannot be
    /// had, the lock is released and migrate exits 1 (run-with-lock does
    /// not start the command) —, `optional` goes on without one
    /// (run-with-lock: the command gets no LOCKSHIFT_FENCING_TOKEN; lock:
    /// prints an empty line).
    #[arg(long, value_enum, default_value = "required")]
    pub fencing_token: FencingTokenArg,
}

/// `advance` and `rollback`.
#[derive(Debug, Clone, Args)]
pub struct TransitionArgs {
    /// Target stage: legacy, dual, queue or complete. Required to change the
    /// stage; with --dry-run it defaults to one step.
    #[arg(long, value_name = "STAGE", value_parser = Checked(parse_stage))]
    pub to: Option<Stage>,
    /// Only evaluate the guards; change and record nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Who asks, recorded in the history (default: $USER@host).
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Why, recorded in the history.
    #[arg(
        long,
        value_name = "TEXT",
        default_value = "",
        hide_default_value = true
    )]
    pub reason: String,
}

/// `demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Service nodes in the fleet.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=32))]
    pub nodes: u16,
    /// Transfer workers per node.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub workers: u16,
    /// Accounts (each a lock and a row).
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u16).range(2..=1000))]
    pub accounts: u16,
    /// Opening balance of each account.
    #[arg(long, default_value_t = 1000)]
    pub balance: i64,
    /// How long the fleet runs between rollout steps, e.g. 4s.
    #[arg(long, value_name = "DURATION", default_value = "4s", value_parser = Checked(parse_duration))]
    pub settle: Duration,
    /// Injected latency of every store request, e.g. 1ms.
    #[arg(long, value_name = "DURATION", default_value = "1ms", value_parser = Checked(parse_duration))]
    pub latency: Duration,
    /// Seed of the workers' choices (accounts, amounts, pauses).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Serve the nodes' metrics (lock waits and holds, acquisitions,
    /// timeouts, lease losses, store operations, mode and stage) in the
    /// Prometheus text format on this address while the demo runs; port 0
    /// picks a free port. The address is printed on stderr.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
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

fn parse_bench_algorithm(s: &str) -> Result<lockshift_bench::BenchAlgorithm, String> {
    s.parse()
}

fn parse_stage(s: &str) -> Result<Stage, String> {
    s.parse()
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    s.parse()
}

fn parse_lock_id(s: &str) -> Result<LockId, String> {
    LockId::new(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn values_are_checked_at_parse_time() {
        let err = Cli::try_parse_from(["migrate", "advance", "--to", "qeue"]).unwrap_err();
        assert!(
            err.to_string()
                .contains("unknown stage \"qeue\"; expected legacy, dual, queue or complete"),
            "{err}"
        );
        let err = Cli::try_parse_from([
            "migrate",
            "run-with-lock",
            "x",
            "--timeout",
            "3x",
            "--",
            "true",
        ])
        .unwrap_err();
        assert!(err.to_string().contains("--timeout"), "{err}");
        let cli = Cli::try_parse_from([
            "migrate",
            "--json",
            "run-with-lock",
            "x",
            "--contact-points",
            "a:1,b:2",
            "--",
            "sh",
            "-c",
            "echo --json",
        ])
        .unwrap();
        assert!(cli.output.json);
        assert_eq!(cli.connect.contact_points, ["a:1", "b:2"]);
        match cli.command {
            Command::RunWithLock {
                command, acquire, ..
            } => {
                assert_eq!(command, ["sh", "-c", "echo --json"]);
                assert_eq!(acquire.mode, None, "the settings' node.mode decides");
            }
            other => panic!("{other:?}"),
        }
    }

    /// `lock` takes run-with-lock's acquisition flags, and no command.
    #[test]
    fn lock_takes_the_acquisition_flags_and_no_command() {
        let cli = Cli::try_parse_from([
            "migrate",
            "lock",
            "nightly",
            "--timeout",
            "30s",
            "--mode",
            "combined",
            "--fencing-token",
            "optional",
            "--json",
        ])
        .unwrap();
        assert!(cli.output.json);
        match cli.command {
            Command::Lock(AcquireArgs {
                lock,
                mode,
                timeout,
                fencing_token,
            }) => {
                assert_eq!(lock.as_str(), "nightly");
                assert_eq!(mode, Some(Mode::Combined));
                assert_eq!(timeout, Some(Duration::from_secs(30)));
                assert_eq!(fencing_token, FencingTokenArg::Optional);
            }
            other => panic!("{other:?}"),
        }
        let cli = Cli::try_parse_from(["migrate", "lock", "nightly"]).unwrap();
        match cli.command {
            Command::Lock(args) => {
                assert_eq!((args.timeout, args.mode), (None, None));
                assert_eq!(args.fencing_token, FencingTokenArg::Required);
            }
            other => panic!("{other:?}"),
        }
        for args in [
            &["migrate", "lock", "nightly", "--", "true"][..],
            &["migrate", "lock"][..],
            &["migrate", "lock", "nightly", "--grace", "1s"][..],
        ] {
            let err = Cli::try_parse_from(args).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{args:?}: {err}");
        }
        // A long lock id is refused with the value cut short.
        let long = "x".repeat(1_000);
        let err = Cli::try_parse_from(["migrate", "lock", &long]).unwrap_err();
        assert!(err.to_string().len() < 600, "{err}");
    }
}
