#!/usr/bin/env python3
"""Issue 40's churn on a real cluster: short-lived processes, one `migrate
run-with-lock churn -- true` after another, on one lock, in keyspaces whose
lock tables keep tombstones for different gc graces, side by side. Prints,
every --every seconds, how many tombstone cells a read of the lock's
`main` and `queue` rows passes in each keyspace (from the read's own
Cassandra trace), and the runs so far.

    scripts/churn-tombstones.py HOST:PORT PREFIX SECONDS [--grace 600,120]

Each grace G gets a fresh keyspace PREFIX_G made by `migrate schema
--apply`, then `ALTER TABLE … WITH gc_grace_seconds = G` on main, shadow
and queue (G = lockshift's own is what `--apply` sets already). One looping
process per keyspace, all at once, for SECONDS. The keyspaces are dropped
at the end unless --keep.
"""
import argparse
import os
import re
import subprocess
import sys
import time

from cassandra.cluster import Cluster

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCK = "churn"
READ = re.compile(r"Read (\d+) live rows and (\d+) tombstone cells")


def env_for(contact, keyspace):
    env = dict(os.environ)
    env.update(
        LOCKSHIFT__STORE__BACKEND="cql",
        LOCKSHIFT__STORE__CQL__CONTACT_POINTS=contact,
        LOCKSHIFT__STORE__CQL__KEYSPACE=keyspace,
    )
    return env


def tombstones(session, keyspace, table):
    """Tombstone cells a read of the lock's row passes, from its trace."""
    rows = session.execute(
        f"SELECT column_name FROM {keyspace}.{table} WHERE row_key = %s",
        (LOCK,),
        trace=True,
    )
    trace = rows.get_query_trace(max_wait_sec=5)
    passed = [int(m.group(2)) for e in trace.events if (m := READ.search(e.description))]
    return max(passed, default=0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("contact")
    p.add_argument("prefix")
    p.add_argument("seconds", type=int)
    p.add_argument("--grace", default="600,120")
    p.add_argument("--every", type=int, default=30)
    p.add_argument("--keep", action="store_true")
    a = p.parse_args()
    migrate = os.environ.get("MIGRATE", os.path.join(HERE, "target/release/migrate"))
    graces = [int(g) for g in a.grace.split(",")]
    host, port = a.contact.split(":")
    session = Cluster([host], port=int(port)).connect()
    keyspaces = {g: f"{a.prefix}_{g}" for g in graces}
    for g, ks in keyspaces.items():
        subprocess.run(
            [migrate, "schema", "--apply"], env=env_for(a.contact, ks), check=True,
            stdout=subprocess.DEVNULL,
        )
        for table in ("main", "shadow", "queue"):
            session.execute(f"ALTER TABLE {ks}.{table} WITH gc_grace_seconds = {g}")
    loop = (
        'n=0; f=0; while [ ! -e "$STOP" ]; do '
        'if "$MIGRATE" run-with-lock churn -- true >/dev/null 2>>"$ERR"; '
        'then n=$((n+1)); else f=$((f+1)); fi; echo "$n $f" > "$COUNT"; done'
    )
    work = f"/tmp/churn-{os.getpid()}"
    os.makedirs(work)
    stop = os.path.join(work, "stop")
    loops = []
    for g, ks in keyspaces.items():
        env = env_for(a.contact, ks)
        env.update(
            MIGRATE=migrate, STOP=stop, COUNT=f"{work}/count_{g}", ERR=f"{work}/err_{g}",
            LOCKSHIFT__NODE__ID=f"churn-{g}",
        )
        loops.append(subprocess.Popen(["bash", "-c", loop], env=env))
    started = time.time()
    header = "  t(s) " + "".join(
        f"| gc {g}s: runs, main, queue tombstones ".ljust(40) for g in graces
    )
    print(header, flush=True)
    failed = {g: 0 for g in graces}
    try:
        while True:
            time.sleep(a.every)
            t = time.time() - started
            cols = []
            for g, ks in keyspaces.items():
                try:
                    runs, failed[g] = map(int, open(f"{work}/count_{g}").read().split())
                except (OSError, ValueError):
                    runs = 0
                cols.append(
                    f"| {runs:>6}, {tombstones(session, ks, 'main'):>6}, "
                    f"{tombstones(session, ks, 'queue'):>6}".ljust(40)
                )
            print(f"{t:6.0f} " + "".join(cols), flush=True)
            if t >= a.seconds:
                break
    finally:
        open(stop, "w").close()
        for proc in loops:
            proc.wait()
    for g in graces:
        err = f"{work}/err_{g}"
        said = open(err).read().strip() if os.path.exists(err) else ""
        print(f"gc {g}s: {failed[g]} failed runs; the runs' stderr: {said[:400] or 'nothing'}")
    if not a.keep:
        for ks in keyspaces.values():
            session.execute(f"DROP KEYSPACE IF EXISTS {ks}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
