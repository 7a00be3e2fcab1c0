#!/usr/bin/env bash
# Does a process that starts as a node goes dark still start?
#
#   sudo scripts/start-during-cut.sh [options]
#
# On the three nodes `scripts/node-down-gaps.sh --keep` left running (its
# settings file names them), ROUNDS times: start a fresh `migrate
# run-with-lock`, cut the seed off (iptables DROP both ways on its address)
# 5 to 40 ms later — after the process's probe heard it, before its session
# is up — wait for the process, heal, let the node settle. Prints each
# round's exit code, time and the end of its error, then how many failed.
# Exit 0 when none failed, 1 otherwise. The rules (chain
# LOCKSHIFT_START_CUT) are always removed.
#
# Options:
#   --migrate PATH   the binary (default: target/release/migrate)
#   --rounds N       (default 16)
#   --out DIR        node-down-gaps.sh's directory (default target/node-down-gaps)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
cd "$repo"

migrate="$repo/target/release/migrate"
rounds=16
out="$repo/target/node-down-gaps"
while [ $# -gt 0 ]; do
    case "$1" in
        --migrate) migrate="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "start-during-cut: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done

die() { echo "start-during-cut: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (iptables)"
command -v iptables >/dev/null || die "iptables is not installed (apt-get install iptables)"
[ -x "$migrate" ] || die "no migrate binary at $migrate"
settings="$out/lockshift.toml"
[ -f "$settings" ] || die "no $settings: run scripts/node-down-gaps.sh --keep first"
seed="$(sed -n 's/^contact_points = \["\([^:"]*\).*/\1/p' "$settings")"
[ -n "$seed" ] || die "no contact point in $settings"
export LOCKSHIFT_CONFIG="$settings"

iptables -N LOCKSHIFT_START_CUT 2>/dev/null || iptables -F LOCKSHIFT_START_CUT
iptables -I INPUT -j LOCKSHIFT_START_CUT
err="$(mktemp)"
cleanup() {
    iptables -D INPUT -j LOCKSHIFT_START_CUT 2>/dev/null || true
    iptables -F LOCKSHIFT_START_CUT 2>/dev/null || true
    iptables -X LOCKSHIFT_START_CUT 2>/dev/null || true
    rm -f "$err"
}
trap cleanup EXIT

failed=0
for i in $(seq "$rounds"); do
    delay_ms=$((5 + (i * 5) % 40))
    started=$(date +%s%N)
    "$migrate" run-with-lock --timeout 20s start-during-cut -- true 2>"$err" &
    pid=$!
    sleep "0.$(printf %03d "$delay_ms")"
    iptables -A LOCKSHIFT_START_CUT -s "$seed" -j DROP
    iptables -A LOCKSHIFT_START_CUT -d "$seed" -j DROP
    rc=0
    wait "$pid" || rc=$?
    took_ms=$((($(date +%s%N) - started) / 1000000))
    iptables -F LOCKSHIFT_START_CUT
    printf 'round %2d: cut %2d ms after the start; exit %d after %d.%02d s %s\n' \
        "$i" "$delay_ms" "$rc" $((took_ms / 1000)) $((took_ms % 1000 / 10)) \
        "$(grep -v ' WARN \| INFO ' "$err" | tr -d '\n' | tail -c 140)"
    [ "$rc" = 0 ] || failed=$((failed + 1))
    sleep 8
done
echo "failed $failed of $rounds"
[ "$failed" = 0 ]
