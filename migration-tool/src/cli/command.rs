//! The subcommands of `migrate`: one variant each, whose doc comments are
//! its `--help`.

use std::time::Duration;

use clap::Subcommand;
use lockshift_lock::LockId;

use super::{
    AcquireArgs, BenchArgs, Checked, CleanArgs, DemoArgs, HomeForgetArgs, HomeMoveArgs, RunArgs,
    SchemaArgs, ServeArgs, TransitionArgs,
};
use super::{parse_duration, parse_lock_id};

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
    /// judged only by --stale-after, which must exceed the longest hold of
    /// any binary that predates lockshift (its cells are never renewed).
    /// With --apply every deletion waits for a second look: the cell is
    /// read again one and a half renewal periods after the scan — the
    /// promised one, or half the cell's TTL left if longer (a registry row
    /// may understate its process's lease) — timed by this machine's
    /// monotonic clock, and skipped if its writetime moved, then deleted USING
    /// TIMESTAMP that writetime, so a renewal racing the delete still wins.
    /// (Cells without a TTL are re-read just before the delete.) So clean
    /// may take that long. Without --apply nothing is deleted. Exits 1 if a
    /// delete failed (the summary counts them).
    #[command(
        after_help = "Examples:\n  migrate clean                        # dry run: what is overdue, what would go\n  migrate clean --apply\n  migrate clean --stale-after 30m --apply   # also cells written without a TTL"
    )]
    Clean(CleanArgs),

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
        /// How the command runs.
        #[command(flatten)]
        run: RunArgs,
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

    /// Run a command while leading an election: `run-with-lock` on the
    /// election's lock, recording this process as its leader — node id,
    /// --value, the time and the fencing token — where `migrate leader`
    /// and every node's `observe` read it, before the command starts.
    ///
    /// Candidates wait their turn (first come, first served where the queue
    /// lock runs); the leader leads while the command runs, and the next
    /// candidate leads once it ends. Everything else — the process group,
    /// signals, --grace, the LOCKSHIFT_* variables, the exit codes — is as
    /// `run-with-lock`'s; and 1 if the leader record could not be written
    /// (the command did not start).
    #[command(
        after_help = "Examples:\n  migrate elect scheduler --value \"$(hostname):8080\" -- ./scheduler\n  migrate leader scheduler --watch"
    )]
    Elect {
        /// The election (its lock), and how to take it.
        #[command(flatten)]
        acquire: AcquireArgs,
        /// What the leader proclaims (a URL, a shard list; up to 4 KiB of
        /// printable text).
        #[arg(long, default_value = "")]
        value: String,
        /// How the command runs.
        #[command(flatten)]
        run: RunArgs,
    },

    /// Who leads an election: node, value, since and fencing token, read at
    /// the election lock's home; "nobody leads" when no one does (exit 0
    /// either way). --watch prints it again on every change (read every
    /// 500 ms; a change shows within about a second) until SIGINT or
    /// SIGTERM; --json prints one JSON object per line (version, election,
    /// leader: null or {node, owner, value, since, token}).
    #[command(
        after_help = "Examples:\n  migrate leader scheduler\n  migrate leader scheduler --watch --json"
    )]
    Leader {
        /// The election.
        #[arg(value_parser = Checked(parse_lock_id))]
        election: LockId,
        /// Print again on every change, until interrupted.
        #[arg(long)]
        watch: bool,
    },

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

    /// Where each lock lives across datacenters: the homes as every
    /// datacenter shows them (docs/design.md §4a); `home move` moves one.
    ///
    /// Reads the homes row from every datacenter, each at LOCAL_QUORUM
    /// there: every rule (the default rule, prefix rules), its home,
    /// version and since when it serves, and which datacenters show it — a
    /// move not yet replicated everywhere shows as an older version there.
    #[command(
        after_help = "Examples:\n  migrate home\n  migrate home move --to dc2 --dry-run\n  migrate home move --prefix eu/ --to dc2\n  migrate home move --to dc2 --force   # the current home is gone (read docs/operating.md first)\n  migrate home forget prefix: --apply   # a cell no build decodes\n\nExit codes (home move, home forget):\n  0    moved (or --dry-run: it may be moved); forgotten (or its dry run)\n  1    error (the store), or a move or a forget not written everywhere (the report says where)\n  2    usage (an empty or impossible --prefix)\n  3    refused: the current home or the new one does not answer, the last move has not finished, --force while the current home answers; forget: the cell decodes"
    )]
    Home {
        /// `move`, or nothing to show the homes.
        #[command(subcommand)]
        action: Option<HomeAction>,
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
        after_help = "Examples:\n  migrate schema --datacenter dc1:3 --datacenter dc2:3 | cqlsh 10.0.0.1\n  migrate schema --datacenter dc1:3 --datacenter dc2:3 --home dc1 --apply   # a fleet's first set-up across datacenters\n  migrate schema --keyspace locks --replication-factor 3"
    )]
    Schema(SchemaArgs),

    /// Run the local CQL endpoint (an in-memory store served over the CQL
    /// protocol) so several processes and migrate itself can share it.
    ///
    /// Creates the keyspace and tables at start, prints `listening on ADDR`,
    /// and runs until SIGINT or SIGTERM. Data lives in memory only.
    #[command(
        after_help = "Examples:\n  migrate serve\n  migrate serve --listen 127.0.0.1:0 --latency 2ms --jitter 1ms\n  migrate serve --metrics 127.0.0.1:9100   # curl 127.0.0.1:9100/metrics"
    )]
    Serve(ServeArgs),

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
    /// last, and the tombstones its reads passed. With --census N,...: what
    /// a census of N held locks costs, beside a raw scan of the tables.
    ///
    /// By default against a local endpoint started in-process with injected
    /// store latency (fixed + uniform jitter); with --cluster against the
    /// database the connection settings name. Prints waits (mean, p50, p99,
    /// max), throughput, store operations per acquisition, hand-off latency
    /// in store round trips and fairness, where each target of the benchmark
    /// stands (met / not met), and writes one PNG per algorithm (acquisition
    /// number against time, one line per process).
    #[command(
        after_help = "Examples:\n  migrate bench\n  migrate bench --processes 1,3,5 --acquisitions 5000   # the thesis' sizes\n  migrate bench --algorithms queue,combined --hold 10ms --plots out/\n  migrate bench --cluster --contact-points 10.0.0.1:9042 --json > bench.json\n  migrate bench --hold-locks 100,1000,10000 --algorithms queue,lwt   # one node holding N locks\n  migrate bench --observers 4 --observe-for 30s --leader-every 3s   # what following a leader costs\n  migrate bench --census 1e4,1e5,1e6   # a census of N held locks beside a raw scan\n  migrate bench --cluster --census 1e5 --json   # the same on the cluster, own keyspace per size"
    )]
    Bench(BenchArgs),

    /// One benchmark worker process (started by `migrate bench`).
    #[command(hide = true)]
    BenchWorker {
        /// The worker's spec, as JSON.
        spec: String,
    },
}

/// What `migrate home` does besides showing the homes.
#[derive(Debug, Clone, Subcommand)]
pub enum HomeAction {
    /// Move a rule's home to another datacenter: planned, through the
    /// current home, which must answer; or `--force`d without it. The new
    /// home serves after every view and lease under the old one has run
    /// out (2 × rollout.stage_valid_for + the longest lease TTL +
    /// rollout.clock_skew_margin + 1 s); until then the rule's locks are
    /// refused as "moving", which acquisitions wait out (until their
    /// timeout). Asked again, a move that could not write everywhere is
    /// completed: its record is copied, as it is, where it lacks.
    Move(HomeMoveArgs),
    /// Remove a cell of the homes row that this build cannot decode (a
    /// record of an empty prefix, written by hand, or corrupt), which
    /// refuses the locks it could home — every lock, for a column that
    /// names no rule — in every process. A dry run by default: it lists
    /// the datacenters that show the cell; with --apply it deletes it in
    /// each of them, USING TIMESTAMP the writetime it read there (a newer
    /// write of the column survives). Refused (exit 3) for a cell that
    /// decodes: move its rule instead.
    Forget(HomeForgetArgs),
}
