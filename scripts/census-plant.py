#!/usr/bin/env python3
"""Plants N held lock cells in `main` (and a waiter's queue cell for every
tenth lock), as a fleet with a lock per entity would hold them, to time
`migrate status` / `advance --dry-run` / `clean` against a raw scan.

    scripts/census-plant.py HOST:PORT KEYSPACE N [--ttl SECONDS]

Each held cell's owner is `plant/<16 hex>`, its value `queue`; the TTL
(default 3600 s) keeps them live while the commands are timed.
"""
import argparse
import time

from cassandra.cluster import Cluster
from cassandra.concurrent import execute_concurrent_with_args


def main():
    p = argparse.ArgumentParser()
    p.add_argument("contact")
    p.add_argument("keyspace")
    p.add_argument("n", type=int)
    p.add_argument("--ttl", type=int, default=3600)
    a = p.parse_args()
    host, port = a.contact.split(":")
    session = Cluster([host], port=int(port)).connect(a.keyspace)
    main_insert = session.prepare(
        f"INSERT INTO main (row_key, column_name, value) VALUES (?, ?, ?) USING TTL {a.ttl}"
    )
    queue_insert = session.prepare(
        f"INSERT INTO queue (row_key, column_name, value) VALUES (?, ?, ?) USING TTL {a.ttl}"
    )
    started = time.time()
    held = [(f"entity-{i}", f"plant/{i:016x}", b"queue") for i in range(a.n)]
    execute_concurrent_with_args(session, main_insert, held, concurrency=256)
    now_us = int(time.time() * 1_000_000)
    waiting = [
        (f"entity-{i}", f"plant/{i + a.n:016x}", f"{now_us:020d}:queue".encode())
        for i in range(0, a.n, 10)
    ]
    execute_concurrent_with_args(session, queue_insert, waiting, concurrency=256)
    print(f"planted {a.n} held and {len(waiting)} waiting cells in {time.time() - started:.1f} s")


if __name__ == "__main__":
    main()
