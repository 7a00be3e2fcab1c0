#!/usr/bin/env bash
# Issue 41's check on a real cluster: processes whose clocks are minutes off
# (libfaketime) beside processes in step, looping `migrate run-with-lock` on
# one lock while an operator at the true time drives the whole rollout
# legacy -> dual -> queue -> complete as fast as the guards allow.
#
#   scripts/skewed-fleet.sh HOST:PORT KEYSPACE OFFSETS...
#
# OFFSETS are faketime offsets, one looping process each ("0" runs without
# faketime): `0 0 -120s +120s` is the issue's fleet, `0 0 0 0` its control.
# Each critical section takes a directory lock (mkdir is atomic), so two
# holders at once are counted whatever the processes' clocks say. Prints
# each guarded move's wait, the critical sections and the overlaps (STAGES
# names the moves, "dual queue complete" by default). Give a
# fresh KEYSPACE each run (`migrate schema --apply` makes it).
set -euo pipefail

contact=$1
keyspace=$2
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
migrate=${MIGRATE:-$here/target/release/migrate}
lib=${LIBFAKETIME:-/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1}
work=$(mktemp -d)
trap 'touch "$work/stop"; wait; rm -rf "$work"' EXIT

export LOCKSHIFT__STORE__BACKEND=cql
export LOCKSHIFT__STORE__CQL__CONTACT_POINTS=$contact
export LOCKSHIFT__STORE__CQL__KEYSPACE=$keyspace

"$migrate" schema --apply >/dev/null

section='mkdir "$CS" 2>/dev/null || echo overlap >> "$OUT"; echo in >> "$OUT"; sleep 0.05; rmdir "$CS"'
n=0
for offset in "$@"; do
    n=$((n + 1))
    (
        while [ ! -e "$work/stop" ]; do
            env_vars=(LOCKSHIFT__NODE__ID="loop-$n" CS="$work/cs" OUT="$work/sections")
            if [ "$offset" != 0 ]; then
                env_vars+=(LD_PRELOAD="$lib" FAKETIME="$offset")
            fi
            env "${env_vars[@]}" "$migrate" run-with-lock --mode auto --timeout 60s X \
                -- sh -c "$section" >/dev/null 2>>"$work/loop-$n.err" ||
                echo "loop-$n exit $?" >> "$work/failures"
        done
    ) &
done

sleep 15
start=$(date +%s.%N)
for stage in ${STAGES:-dual queue complete}; do
    t0=$(date +%s.%N)
    tries=0
    until "$migrate" advance --to "$stage" --by skewed-fleet >/dev/null 2>"$work/advance.err"; do
        tries=$((tries + 1))
        sleep 1
    done
    t1=$(date +%s.%N)
    printf 'advance to %-8s waited %6.1f s (%d refusals)\n' "$stage" "$(echo "$t1 - $t0" | bc)" "$tries"
done
printf 'whole rollout: %.1f s\n' "$(echo "$(date +%s.%N) - $start" | bc)"
sleep 10
touch "$work/stop"
wait
sections=$(grep -c '^in$' "$work/sections" || true)
overlaps=$(grep -c '^overlap$' "$work/sections" || true)
failures=$({ cat "$work/failures" 2>/dev/null || true; } | wc -l)
echo "critical sections: $sections; overlaps: $overlaps; failed runs: $failures"
"$migrate" status | sed -n '/^nodes/,/^$/p'
