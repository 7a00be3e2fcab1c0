#!/usr/bin/env python3
"""Shared acquisitions on a real store, from their own start/end logs
(issue 43's Done-when lines).

    MIGRATE=target/release/migrate scripts/sharing-fleet.py permits SECONDS
    MIGRATE=target/release/migrate scripts/sharing-fleet.py rw SECONDS

`permits`: 8 processes loop `migrate run-with-lock --permits 3 pool --
CMD`; `rw`: 6 loop `--shared` and 2 plain (writers) on `table`. Each
command appends `start ID T` and `end ID T` (this host's clock, one
clock for all) to a log; each loop also notes when it began to wait. The
store comes from the LOCKSHIFT__STORE__* variables, as for `migrate`.

Prints: acquisitions, the most inside at once (permits: never above 3),
readers seen beside a writer (rw: never), and order: for every
acquisition, how many that began to wait after it entered before it
(permits: within one position), and for every writer how many readers
that began to wait after it entered before it (rw: one generation).
Exit 1 when a line is broken.
"""

import os
import subprocess
import sys
import tempfile
import threading
import time

MIGRATE = os.environ.get("MIGRATE", "target/release/migrate")


def loop(ident, args, log, until, waits):
    cmd_line = (
        f'echo "start {ident} $(date +%s.%N)" >> {log}; '
        f"sleep 0.$((RANDOM % 4 + 1)); "
        f'echo "end {ident} $(date +%s.%N)" >> {log}'
    )
    n = 0
    while time.time() < until:
        began = time.time()
        n += 1
        tag = f"{ident}#{n}"
        result = subprocess.run(
            [MIGRATE, "run-with-lock", *args, "--", "bash", "-c", cmd_line.replace(ident, tag)],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            print(f"{tag}: exit {result.returncode}: {result.stderr.strip()[-400:]}", file=sys.stderr)
        waits[tag] = began


def main():
    mode, seconds = sys.argv[1], float(sys.argv[2])
    if mode == "permits":
        kinds = [("p", ["--permits", "3", "pool"])] * 8
    elif mode == "rw":
        kinds = [("r", ["--shared", "table"])] * 6 + [("w", ["table"])] * 2
    else:
        sys.exit(f"unknown mode {mode!r}: permits or rw")
    log = tempfile.NamedTemporaryFile(prefix="sharing-", suffix=".log", delete=False).name
    until = time.time() + seconds
    waits = {}
    threads = [
        threading.Thread(target=loop, args=(f"{kind}{i}", args, log, until, waits))
        for i, (kind, args) in enumerate(kinds)
    ]
    started = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - started
    events = []
    for line in open(log):
        what, tag, at = line.split()
        events.append((float(at), 0 if what == "end" else 1, tag))
    events.sort()
    inside, most, beside = set(), 0, []
    entered = {}
    for at, is_start, tag in events:
        if is_start:
            kinds_inside = {t[0] for t in inside}
            if tag[0] == "w" and inside:
                beside.append(f"writer {tag} entered beside {sorted(inside)}")
            if tag[0] == "r" and "w" in kinds_inside:
                beside.append(f"reader {tag} entered beside {sorted(inside)}")
            inside.add(tag)
            most = max(most, len(inside))
            entered[tag] = at
        else:
            inside.discard(tag)
    # Order: who began to wait later but entered earlier.
    overtaken = []
    for tag, at in entered.items():
        if tag not in waits or (mode == "rw" and tag[0] != "w"):
            continue
        if mode == "permits":
            later = [o for o, a in entered.items() if o in waits and waits[o] > waits[tag] and a < at]
        else:
            later = [o for o, a in entered.items()
                     if tag[0] == "w" and o[0] == "r" and o in waits and waits[o] > waits[tag] and a < at]
        overtaken.append(len(later))
    acquisitions = len(entered)
    print(f"mode {mode}: {len(kinds)} processes, {wall:.1f} s, {acquisitions} acquisitions, log {log}")
    print(f"most inside at once: {most}")
    print(f"entries beside a writer: {len(beside)}")
    for b in beside[:10]:
        print("  " + b)
    if overtaken:
        hist = {}
        for k in overtaken:
            hist[k] = hist.get(k, 0) + 1
        who = "acquisitions" if mode == "permits" else "writer acquisitions"
        print(f"{who} overtaken by later arrivals (count: how many): "
              + ", ".join(f"{k}: {hist[k]}" for k in sorted(hist)))
    broken = bool(beside) or (mode == "permits" and most > 3) or acquisitions == 0
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
