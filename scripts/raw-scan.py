#!/usr/bin/env python3
"""A raw paged scan of main, shadow and queue with writetime and TTL, by
the Python driver (5 000-row pages): the yardstick `migrate status` is
timed beside.

    scripts/raw-scan.py HOST:PORT KEYSPACE
"""
import sys
import time

from cassandra.cluster import Cluster
from cassandra.query import SimpleStatement


def main():
    host, port = sys.argv[1].split(":")
    session = Cluster([host], port=int(port)).connect(sys.argv[2])
    started = time.time()
    total = 0
    for table in ("main", "shadow", "queue"):
        q = SimpleStatement(
            f"SELECT row_key, column_name, value, writetime(value), ttl(value) FROM {table}",
            fetch_size=5000,
        )
        total += sum(1 for _ in session.execute(q))
    print(f"scanned {total} cells in {time.time() - started:.2f} s")


if __name__ == "__main__":
    main()
