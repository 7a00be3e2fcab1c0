//! The arguments of the larger subcommands (`bench`, `demo`), the groups
//! two subcommands share (`run-with-lock` and `lock`; `advance` and
//! `rollback`), and the flags a command takes as one value (`clean`,
//! `schema`, `serve`).

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;
use lockshift_decide::algorithm::{Mode, Stage};
use lockshift_lock::LockId;

use super::{Checked, FencingTokenArg};
use super::{
    parse_bench_algorithm, parse_census_size, parse_datacenter, parse_datacenter_name,
    parse_duration, parse_lock_id, parse_mode, parse_prefix, parse_stage,
};

/// `bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Algorithms to measure, in order (lwt: the lightweight-transaction
    /// lease Cassandra users build, a baseline) [default:
    /// legacy,queue,combined,lwt; with --soak: legacy,queue,combined].
    #[arg(long, value_delimiter = ',', value_name = "ALGORITHM,...", value_parser = Checked(parse_bench_algorithm))]
    pub algorithms: Vec<lockshift_bench::BenchAlgorithm>,
    /// Worker process counts P, in order, at most 64 [default: 1,3,5;
    /// with --soak: 1]; with --idle, fleet sizes, at most 10 000 [default:
    /// 1,10,100,1000].
    #[arg(long, value_delimiter = ',', value_name = "P,...", value_parser = clap::value_parser!(u32).range(1..=10_000))]
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
    /// Measure the database of the connection settings: instead of a local
    /// endpoint, or beside it and the embedded store (--fenced-writes,
    /// --observers, --census).
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
    /// Datacenter mode: what a lock's home costs a client in it and one
    /// elsewhere (docs/design.md §4a) — requests per acquisition by the
    /// datacenter that coordinated them, and uncontended and hand-off
    /// times in each client's own round trips. On an embedded
    /// two-datacenter cluster (paused clock, exact round trips) by default;
    /// with --cluster on the connection settings' cluster, the lock homed
    /// in --home and the far client in --far.
    #[arg(long, conflicts_with_all = ["hold_locks", "soak"])]
    pub datacenters: bool,
    /// Compare N fenced writes (a conditional update on the fencing token,
    /// one Paxos round) with N plain writes, one at a time: on the embedded
    /// store, on the local endpoint (--latency per round trip), and with
    /// --cluster on the cluster too. Prints the latencies and the ratio.
    /// With --observers: the writes of each kind for its ratio line
    /// [default there: 50].
    #[arg(long, value_name = "N", conflicts_with_all = ["hold_locks", "soak", "datacenters"], value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub fenced_writes: Option<u32>,
    /// Observer mode: what following an election's leader costs (docs/
    /// design.md §5b). N observers, each a node of its own following the
    /// election (`Election::observe`), for --observe-for while two candidates
    /// take turns leading, a new leader every --leader-every. Prints per
    /// observer the reads of the election's row a second (counted at its
    /// store) and the delay from each leader's election to the observer
    /// seeing it (p50, max), then the fenced/plain write ratio on the same
    /// store: on the embedded store, the local endpoint (--latency per
    /// round trip) and with --cluster on the cluster too.
    #[arg(long, value_name = "N", conflicts_with_all = ["hold_locks", "soak", "datacenters"], value_parser = clap::value_parser!(u32).range(1..=256))]
    pub observers: Option<u32>,
    /// Observer mode: how long the observers are measured, e.g. 30s.
    #[arg(long, value_name = "DURATION", default_value = "10s", requires = "observers", value_parser = Checked(parse_duration))]
    pub observe_for: Duration,
    /// Observer mode: how long each leader leads, at least 1s (two
    /// observer periods), e.g. 3s.
    #[arg(long, value_name = "DURATION", default_value = "2s", requires = "observers", value_parser = Checked(parse_duration))]
    pub leader_every: Duration,
    /// Census mode: for each size N (e.g. 1e4,1e5,1e6 or 20000), plant N
    /// held locks in a store of their own — a fresh embedded store, a
    /// fresh local endpoint (--latency per round trip), and with --cluster
    /// also a keyspace lockshift_bench_census_N of the cluster, created and
    /// dropped — take the census as `migrate status` does, and beside it a
    /// raw paged scan of main, shadow and queue. Prints per size and store
    /// the census's seconds, rows a second and peak resident memory, the
    /// raw scan's seconds, and each one's requests by table and by
    /// datacenter.
    #[arg(long, value_name = "N,...", value_delimiter = ',', value_parser = Checked(parse_census_size), conflicts_with_all = ["hold_locks", "soak", "datacenters", "fenced_writes", "observers"])]
    pub census: Vec<u64>,
    /// Idle mode: for each fleet size of --processes, that many nodes live
    /// idle in this process on one embedded store (paused clock: exact
    /// counts), or with --cluster on the cluster in real time, each fleet
    /// in a keyspace lockshift_bench_idle_N, created and dropped (rates);
    /// prints the requests a second one idle process sends, by table,
    /// alone and in the fleet, and what `status` beside the fleet lists
    /// and costs.
    #[arg(long, conflicts_with_all = ["hold_locks", "soak", "datacenters", "fenced_writes", "observers", "census"])]
    pub idle: bool,
    /// Sharing mode: semaphores of 1, 4 and 16 permits and a
    /// readers/writers mix beside the mutex, on an embedded store whose
    /// every request takes --latency of virtual time (exact, replayable);
    /// prints hand-off in round trips, throughput and requests per
    /// acquisition.
    #[arg(long, conflicts_with_all = ["hold_locks", "soak", "datacenters", "fenced_writes", "observers", "census", "idle", "cluster"])]
    pub sharing: bool,
    /// Idle mode: how long requests are counted, after a warm-up of a
    /// minute (embedded) or 40s (--cluster) [default: 5m; with --cluster:
    /// 30s].
    #[arg(long, value_name = "DURATION", requires = "idle", value_parser = Checked(parse_duration))]
    pub idle_window: Option<Duration>,
    /// Datacenter mode on a cluster: the lock's home.
    #[arg(long, value_name = "DC", requires_all = ["datacenters", "cluster", "far"], value_parser = Checked(parse_datacenter_name))]
    pub home: Option<lockshift_store::Datacenter>,
    /// Datacenter mode on a cluster: where the far client runs.
    #[arg(long, value_name = "DC", requires_all = ["datacenters", "cluster", "home"], value_parser = Checked(parse_datacenter_name))]
    pub far: Option<lockshift_store::Datacenter>,
}

/// `home move`: which rule, where to, how.
#[derive(Debug, Clone, Args)]
pub struct HomeMoveArgs {
    /// The prefix rule to move (created if new: it takes the locks whose
    /// names start with it from the rule that homes them now); without it,
    /// the default rule — every other lock and the fleet's own rows. Not
    /// empty, and one a lock id can start with (a record no build decodes
    /// would stop every lock of the fleet).
    #[arg(long, value_name = "PREFIX", value_parser = Checked(parse_prefix))]
    pub prefix: Option<String>,
    /// The new home datacenter.
    #[arg(long, value_name = "DC", value_parser = Checked(parse_datacenter_name))]
    pub to: lockshift_store::Datacenter,
    /// Move without the current home's consent, for a home that is gone
    /// (not merely cut off: a home that is only cut off keeps serving its
    /// own side until it reads the move, and both sides would hold locks).
    #[arg(long)]
    pub force: bool,
    /// Only judge the move; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Who asks, recorded in the move (default: $USER@host).
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
}

/// `home forget`: which cell.
#[derive(Debug, Clone, Args)]
pub struct HomeForgetArgs {
    /// The column of the homes row to remove, exactly as `migrate home`
    /// lists it (e.g. `prefix:` for a record of an empty prefix).
    #[arg(value_name = "COLUMN")]
    pub column: String,
    /// Delete it (default: dry run — say what would go).
    #[arg(long)]
    pub apply: bool,
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
    /// Take one of N permits of the semaphore of this name: at most N
    /// holders at once, in arrival order. Every user of the name gives the
    /// same N; another N, or the name taken as a plain lock, is refused
    /// (exit 1). Needs the queue or combined lock (not --mode legacy).
    #[arg(long, value_name = "N", conflicts_with = "shared")]
    pub permits: Option<std::num::NonZeroU32>,
    /// Take the lock shared, as a reader: beside other readers, never
    /// beside a writer (a plain acquisition of the name is its writer,
    /// and a writer in line holds back readers that come after it). Needs
    /// the queue or combined lock (not --mode legacy).
    #[arg(long)]
    pub shared: bool,
}

impl AcquireArgs {
    /// How the flags say to share the lock.
    pub fn sharing(&self) -> lockshift::Sharing {
        match (self.permits, self.shared) {
            (Some(permits), _) => lockshift::Sharing::Permit { permits },
            (None, true) => lockshift::Sharing::Shared,
            (None, false) => lockshift::Sharing::Exclusive,
        }
    }
}

/// How `run-with-lock` and `elect` run their command.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// After a forwarded signal or SIGTERM, how long the command may take
    /// to exit before SIGKILL.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = Checked(parse_duration))]
    pub grace: Duration,
    /// Write the JSON report to this file (as well as --json on stderr).
    #[arg(long, value_name = "FILE")]
    pub report: Option<std::path::PathBuf>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
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
    /// Pause one holder past its lease mid-transfer (after its last lease
    /// check, before its writes), as a GC pause or SIGSTOP would: its node
    /// sends nothing until a later holder has written the account. Its late
    /// write must be refused by the fence and counted (`fenced_refusals`),
    /// and money still conserved.
    #[arg(long)]
    pub pause_holder: bool,
}

/// `clean`'s flags, as the command takes them.
#[derive(Debug, Clone, Copy, Args)]
pub struct CleanArgs {
    /// Delete the cells (default: dry run).
    #[arg(long)]
    pub apply: bool,
    /// For cells without a TTL, which never expire and promise nothing
    /// (written by binaries that predate leases): overdue when not
    /// renewed for this long, e.g. 30m. Never applies to a cell with a
    /// TTL or an owner's announced promise: it cannot shorten either.
    /// Without it, cells without a TTL are counted, never deleted.
    #[arg(long, value_name = "DURATION", value_parser = Checked(parse_duration))]
    pub stale_after: Option<Duration>,
    /// Overdue after this many of the owner's promised renewal periods.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..))]
    pub stale_multiple: u32,
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
    pub force: bool,
    /// Row keys per scan page.
    #[arg(long, value_name = "N", default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..))]
    pub page_size: u32,
}

/// `schema`'s flags, as the command takes them.
#[derive(Debug, Clone, Args)]
pub struct SchemaArgs {
    /// NetworkTopologyStrategy: this many replicas in this datacenter,
    /// e.g. dc1:3; repeat for each datacenter.
    #[arg(long = "datacenter", value_name = "DC:RF", value_parser = Checked(parse_datacenter))]
    pub datacenters: Vec<(String, u32)>,
    /// SimpleStrategy with this many replicas (one datacenter only).
    #[arg(long, value_name = "N", conflicts_with = "datacenters")]
    pub replication_factor: Option<u32>,
    /// Run the statements against the connected cluster instead of
    /// printing them: creates what is missing and sets every table's
    /// options (gc grace, compaction). Brings back a lock the database
    /// refuses to read (docs/operating.md).
    #[arg(long)]
    pub apply: bool,
    /// With --apply, before any process of the fleet starts: record DC
    /// as the home of every lock (and of the fleet's rows) in every
    /// datacenter, serving at once — where the fleet's first start
    /// would record it from lock.home_datacenter and wait the move
    /// wait (about 2 min) before serving. Refused (exit 3) once a
    /// process is registered, or a home is recorded, in any datacenter,
    /// or while one does not answer.
    #[arg(long, value_name = "DC", requires = "apply", value_parser = Checked(parse_datacenter_name))]
    pub home: Option<lockshift_store::Datacenter>,
}

/// `serve`'s flags, as the command takes them.
#[derive(Debug, Clone, Copy, Args)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:9042")]
    pub listen: SocketAddr,
    /// Serve metrics in the Prometheus text format on this address
    /// (any path; port 0 picks a free port): the store operations the
    /// endpoint answered, by table and kind.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
    /// Delay every read and write by this much, e.g. 2ms.
    #[arg(long, value_name = "DURATION", value_parser = Checked(parse_duration))]
    pub latency: Option<Duration>,
    /// Add up to this much random delay on top of --latency.
    #[arg(long, value_name = "DURATION", value_parser = Checked(parse_duration))]
    pub jitter: Option<Duration>,
}
