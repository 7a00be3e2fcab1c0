#!/usr/bin/env python3
"""Standard CQL clients against the lockshift CQL emulator.

Usage: check_clients.py HOST PORT

Runs lockshift's statements through the DataStax Python driver (which
negotiates its protocol version down from 0x42 to v4 and reads the schema
with SELECT * from system_schema), then a few statements through cqlsh if it
is on PATH. Exits non-zero with a message on the first mismatch.

CI: pip install cassandra-driver cqlsh   (CASS_DRIVER_NO_EXTENSIONS=1 speeds it up)
"""

import logging
import re
import shutil
import subprocess
import sys

from cassandra import InvalidRequest, WriteTimeout
from cassandra.cluster import Cluster, ExecutionProfile, EXEC_PROFILE_DEFAULT
from cassandra.policies import RoundRobinPolicy
from cassandra.query import BatchStatement, BatchType, SimpleStatement

logging.basicConfig(level=logging.ERROR)


def check(cond, what):
    if not cond:
        print("FAILED:", what, file=sys.stderr)
        sys.exit(1)
    print("ok:", what)


def python_driver(host, port):
    profile = ExecutionProfile(load_balancing_policy=RoundRobinPolicy())
    cluster = Cluster([host], port=port, execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    s = cluster.connect()
    check(cluster.protocol_version == 4, "negotiated protocol v4 (got %s)" % cluster.protocol_version)

    s.execute("CREATE KEYSPACE IF NOT EXISTS lockshift WITH replication = "
              "{'class': 'SimpleStrategy', 'replication_factor': 1} AND durable_writes = true")
    for t in ["main", "queue"]:
        s.execute("CREATE TABLE IF NOT EXISTS lockshift.%s (row_key text, column_name text, value blob, "
                  "PRIMARY KEY ((row_key), column_name)) WITH CLUSTERING ORDER BY (column_name ASC)" % t)
    check(cluster.metadata.keyspaces["lockshift"].tables["main"].primary_key[1].name == "column_name",
          "schema metadata follows DDL")

    check_tables = s.prepare("SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?")
    check(sorted(r.table_name for r in s.execute(check_tables, ["lockshift"])) == ["main", "queue"],
          "schema check lists the tables")

    ins = s.prepare("INSERT INTO lockshift.main (row_key, column_name, value) VALUES (?, ?, ?) USING TTL ? AND TIMESTAMP ?")
    dele = s.prepare("DELETE FROM lockshift.main USING TIMESTAMP ? WHERE row_key = ? AND column_name = ?")
    read = s.prepare("SELECT column_name, value, writetime(value), ttl(value) FROM lockshift.main WHERE row_key = ? LIMIT ?")
    read_from = s.prepare("SELECT column_name, value, writetime(value), ttl(value) FROM lockshift.main "
                          "WHERE row_key = ? AND column_name >= ? LIMIT ?")

    s.execute(ins, ["lock", "b", b"2", 0, 10])
    s.execute(ins, ["lock", "a", b"1", 60, 10])
    batch = BatchStatement(batch_type=BatchType.UNLOGGED)
    batch.add(ins, ["lock", "c", b"3", 0, 10])
    batch.add(ins, ["lock", "d", b"4", 0, 10])
    s.execute(batch)
    rows = list(s.execute(read, ["lock", 10]))
    check([r.column_name for r in rows] == ["a", "b", "c", "d"], "prepared insert + batch, ordered read")
    check(rows[0].writetime_value == 10 and 0 < rows[0].ttl_value <= 60 and rows[1].ttl_value is None,
          "writetime() and ttl()")

    s.execute(dele, [10, "lock", "a"])          # tie: the tombstone wins
    s.execute(ins, ["lock", "b", b"new", 0, 11])
    s.execute(dele, [10, "lock", "b"])          # older delete: the newer write survives
    rows = list(s.execute(read_from, ["lock", "b", 2]))
    check([(r.column_name, r.value) for r in rows] == [("b", b"new"), ("c", b"3")],
          "reconciliation, start column and LIMIT")

    # Unprepared statements with client-side values.
    s.execute("INSERT INTO lockshift.queue (row_key, column_name, value) VALUES (%s, %s, %s) USING TIMESTAMP 5",
              ("q", "x", b"\x00"))
    check(len(list(s.execute("SELECT * FROM lockshift.queue WHERE row_key = 'q'"))) == 1, "unprepared insert")

    for i in range(25):
        s.execute(ins, ["key-%02d" % i, "c", b"", 0, 1])
    keys = s.execute(SimpleStatement("SELECT DISTINCT row_key FROM lockshift.main", fetch_size=4))
    seen = [r.row_key for r in keys]
    check(len(seen) == 26 and len(set(seen)) == 26, "DISTINCT row keys paged 4 at a time (%d keys)" % len(seen))

    try:
        s.execute("SELECT * FROM lockshift.nope")
        check(False, "unknown table is an error")
    except InvalidRequest as e:
        check("unconfigured table nope" in str(e), "unknown table is InvalidRequest")

    s.execute("INSERT INTO lockshift_emulator.faults (id, fault, tables, times) VALUES ('py', 'write_timeout', {'lockshift.main'}, 1)")
    try:
        s.execute(ins, ["lock", "z", b"", 0, 20])
        check(False, "injected write timeout")
    except WriteTimeout:
        check(True, "the fault table injects a WriteTimeout")
    cluster.shutdown()


def cqlsh(host, port):
    exe = shutil.which("cqlsh")
    if exe is None:
        print("skip: cqlsh not on PATH")
        return
    script = ("USE lockshift; "
              "INSERT INTO main (row_key, column_name, value) VALUES ('sh', 'c', 0xcafe) USING TIMESTAMP 3; "
              "SELECT column_name, value, writetime(value) FROM main WHERE row_key = 'sh'; "
              "SELECT count(*) FROM main; "
              "SELECT * FROM lockshift_emulator.faults;")
    out = subprocess.run([exe, host, str(port), "-e", script], capture_output=True, text=True, timeout=60)
    check(out.returncode == 0, "cqlsh runs (stderr: %s)" % out.stderr.strip())
    check(re.search(r"^\s*c\s*\|\s*0xcafe\s*\|\s*3\s*$", out.stdout, re.M) is not None,
          "cqlsh reads back its write with its writetime")
    check("write_timeout" in out.stdout, "cqlsh reads the fault table")
    desc = subprocess.run([exe, host, str(port), "-e", "DESCRIBE TABLE lockshift.main; DESCRIBE KEYSPACES"],
                          capture_output=True, text=True, timeout=60)
    check("CREATE TABLE lockshift.main" in desc.stdout and "PRIMARY KEY (row_key, column_name)" in desc.stdout
          and "lockshift_emulator" in desc.stdout, "cqlsh DESCRIBE (server side)")
    bad = subprocess.run([exe, host, str(port), "-e", "SELEC nope;"], capture_output=True, text=True, timeout=60)
    check("SyntaxException" in bad.stderr, "cqlsh shows a syntax error")


if __name__ == "__main__":
    host, port = sys.argv[1], int(sys.argv[2])
    python_driver(host, port)
    cqlsh(host, port)
    print("all client checks passed")
