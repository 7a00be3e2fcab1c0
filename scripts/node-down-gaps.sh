#!/usr/bin/env bash
# How long does a fleet of `migrate run-with-lock` processes stall while one
# node of a three-node cluster (RF 3, QUORUM) is cut off or paused?
#
#   sudo scripts/node-down-gaps.sh [options]
#
# Starts (or reuses) three Apache Cassandra nodes on loopback addresses,
# creates a keyspace with three replicas, and runs PROCESSES loops, each
# taking one lock over and over with `migrate run-with-lock` (a new process
# per critical section, as a cron-style fleet does). Every critical section
# appends its start, end and fencing token to a log. Meanwhile the phases:
#
#   steady     PHASE s   all three nodes up
#   cut-off    PHASE s   one node cut off (iptables DROP on its address; the
#                        first, the seed, unless --cut says otherwise)
#   healed     PHASE s
#   paused     PHASE s   the second node stopped (SIGSTOP to its JVM)
#   resumed    PHASE s
#
# and prints, per phase, the critical sections and the longest gap between
# one section's end and the next one's start (the gap is counted in the
# phase it started in), then checks the whole log: no two sections overlap,
# and fencing tokens increase. Exit 0 when those hold, 1 otherwise.
#
# Needs root (iptables, signals to the nodes), iptables, python3, and the
# Cassandra bundle (LOCKSHIFT_CASSANDRA_DIR, default: the shared/cassandra
# directory beside the directory holding this repository). Nodes it starts
# are stopped at the end unless --keep; the iptables rules are always
# removed (chain LOCKSHIFT_FAULT).
#
# Options:
#   --migrate PATH       the binary (default: target/release/migrate, built if missing)
#   --processes N        concurrent run-with-lock loops (default 4)
#   --phase SECONDS      length of each phase (default 20)
#   --hold SECONDS       how long each critical section lasts (default 0.05)
#   --addresses A,B,C    the nodes' loopback addresses (default 127.0.0.41,127.0.0.42,127.0.0.43)
#   --cut N              which node (1-3) the cut-off phase cuts (default 1: the seed,
#                        whose loss every fresh process's start meets)
#   --keep               leave the nodes running
#   --out DIR            logs and settings (default target/node-down-gaps)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
cd "$repo"

migrate=""
processes=4
phase=20
hold=0.05
addresses="127.0.0.41,127.0.0.42,127.0.0.43"
keep=0
cut=1
out="$repo/target/node-down-gaps"
while [ $# -gt 0 ]; do
    case "$1" in
        --migrate) migrate="$2"; shift 2 ;;
        --processes) processes="$2"; shift 2 ;;
        --phase) phase="$2"; shift 2 ;;
        --hold) hold="$2"; shift 2 ;;
        --addresses) addresses="$2"; shift 2 ;;
        --keep) keep=1; shift ;;
        --cut) cut="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "node-down-gaps: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done

die() { echo "node-down-gaps: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (iptables and signals to the nodes)"
command -v iptables >/dev/null || die "iptables is not installed (apt-get install iptables)"
cassandra_dir="${LOCKSHIFT_CASSANDRA_DIR:-$repo/../shared/cassandra}"
[ -x "$cassandra_dir/start-cassandra.sh" ] || die "no Cassandra bundle at $cassandra_dir (set LOCKSHIFT_CASSANDRA_DIR)"
if [ -z "$migrate" ]; then
    migrate="$repo/target/release/migrate"
    [ -x "$migrate" ] || cargo build --release -p lockshift-migration-tool
fi
[ -x "$migrate" ] || die "no migrate binary at $migrate"

IFS=, read -r -a nodes <<< "$addresses"
[ "${#nodes[@]}" = 3 ] || die "--addresses needs three addresses, got '$addresses'"
case "$cut" in 1|2|3) ;; *) die "--cut takes 1, 2 or 3, got '$cut'" ;; esac
cut_addr="${nodes[$((cut - 1))]}"
mkdir -p "$out"
log="$out/sections.log"
phases="$out/phases.log"
: > "$log"
: > "$phases"
rm -f "$out/failures.log" "$out/run-with-lock.log"

started=()
loops=()
cleanup() {
    for pid in "${loops[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    iptables -D INPUT -j LOCKSHIFT_FAULT 2>/dev/null || true
    iptables -F LOCKSHIFT_FAULT 2>/dev/null || true
    iptables -X LOCKSHIFT_FAULT 2>/dev/null || true
    for n in "${nodes[@]}"; do
        [ -f "$out/$n/pid" ] && kill -CONT "$(cat "$out/$n/pid")" 2>/dev/null || true
    done
    if [ "$keep" = 0 ]; then
        for n in "${started[@]}"; do "$cassandra_dir/stop-cassandra.sh" "$out/$n" >/dev/null || true; done
    fi
}
trap cleanup EXIT

port_open() { (exec 3<>"/dev/tcp/$1/9042") 2>/dev/null; }
for n in "${nodes[@]}"; do
    if port_open "$n"; then
        [ -f "$out/$n/pid" ] || die "$n:9042 answers but was not started by this script (no $out/$n/pid)"
        continue
    fi
    CASS_SW_DIR="$out/sw" "$cassandra_dir/start-cassandra.sh" "$out/$n" "$n" 9042 \
        --seeds "${nodes[0]}" --cluster-name lockshift-faults >"$out/start-$n.log" 2>&1 \
        || { tail -20 "$out/start-$n.log" >&2; die "node $n did not start"; }
    started+=("$n")
done

contact="${nodes[0]}:9042,${nodes[1]}:9042,${nodes[2]}:9042"
settings="$out/lockshift.toml"
cat > "$settings" <<EOF
[store.cql]
contact_points = ["${nodes[0]}:9042", "${nodes[1]}:9042", "${nodes[2]}:9042"]
keyspace = "lockshift_faults"
consistency = "quorum"
replication = { class = "SimpleStrategy", replication_factor = 3 }
EOF
export LOCKSHIFT_CONFIG="$settings"
# The schema once, before the faults (a schema change needs every node).
"$migrate" --create-schema status >/dev/null 2>"$out/schema.log" \
    || { cat "$out/schema.log" >&2; die "could not create the schema on $contact"; }

section='t0=$(date +%s.%N); sleep "$1"; echo "$t0 $(date +%s.%N) ${LOCKSHIFT_FENCING_TOKEN:-none} $LOCKSHIFT_LOCK_OWNER" >> "$2"'
loop() {
    while :; do
        local rc=0
        "$migrate" run-with-lock --timeout 120s node-down-gaps -- sh -c "$section" sh "$hold" "$log" \
            2>>"$out/run-with-lock.log" || rc=$?
        [ "$rc" = 0 ] || echo "$(date +%s.%N) exit $rc" >> "$out/failures.log"
    done
}
for _ in $(seq "$processes"); do
    loop &
    loops+=($!)
done

mark() { echo "$(date +%s.%N) $1" >> "$phases"; echo "$(date +%T) $1"; }
iptables -N LOCKSHIFT_FAULT 2>/dev/null || iptables -F LOCKSHIFT_FAULT
iptables -I INPUT -j LOCKSHIFT_FAULT

mark steady; sleep "$phase"
mark cut-off
iptables -A LOCKSHIFT_FAULT -s "$cut_addr" -j DROP
iptables -A LOCKSHIFT_FAULT -d "$cut_addr" -j DROP
sleep "$phase"
iptables -F LOCKSHIFT_FAULT
mark healed; sleep "$phase"
paused="$(cat "$out/${nodes[1]}/pid")"
mark paused; kill -STOP "$paused"; sleep "$phase"
kill -CONT "$paused"
mark resumed; sleep "$phase"
mark end

for pid in "${loops[@]}"; do kill "$pid" 2>/dev/null || true; done
loops=()
sleep 2

python3 - "$log" "$phases" "${out}/failures.log" <<'PY'
import sys
sections = []
for line in open(sys.argv[1]):
    start, end, token, owner = line.split(maxsplit=3)
    sections.append((float(start), float(end), token, owner.strip()))
sections.sort()
marks = [(float(t), name) for t, name in (l.split() for l in open(sys.argv[2]))]
failures = 0
try:
    failures = sum(1 for _ in open(sys.argv[3]))
except FileNotFoundError:
    pass

def phase_of(t):
    name = "before"
    for at, n in marks:
        if t >= at:
            name = n
    return name

rows = {n: [0, 0.0] for _, n in marks if n != "end"}
for (s, e, _, _), nxt in zip(sections, sections[1:] + [None]):
    p = phase_of(s)
    if p in rows:
        rows[p][0] += 1
    if nxt is not None:
        gp = phase_of(e)
        if gp in rows:
            rows[gp][1] = max(rows[gp][1], nxt[0] - e)
print(f"{'phase':<10} {'sections':>8} {'longest gap s':>14}")
for name, (count, gap) in rows.items():
    print(f"{name:<10} {count:>8} {gap:>14.2f}")
overlaps = sum(1 for a, b in zip(sections, sections[1:]) if b[0] < a[1])
tokens = [s[2] for s in sections]
untokened = sum(1 for t in tokens if t == "none")
numeric = [int(t) for t in tokens if t != "none"]
decreasing = sum(1 for a, b in zip(numeric, numeric[1:]) if b <= a)
print(f"sections {len(sections)}, overlaps {overlaps}, without a token {untokened}, "
      f"tokens not increasing {decreasing}, run-with-lock failures {failures}")
sys.exit(0 if overlaps == 0 and decreasing == 0 else 1)
PY
