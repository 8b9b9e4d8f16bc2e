"""A SQLite writer for the watch tests: N transactions of one row each in WAL mode with
synchronous=FULL, so every commit ends in an fsync of the write-ahead log.

    python sqlite_writer.py DB N"""

from __future__ import annotations

import sqlite3
import sys

if __name__ == "__main__":
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    db.execute("pragma journal_mode=wal")
    db.execute("pragma synchronous=full")
    db.execute("create table if not exists t (k integer primary key, v blob)")
    for _ in range(int(sys.argv[2])):
        db.execute("begin")
        db.execute("insert into t (v) values (?)", (b"x" * 200,))
        db.execute("commit")
    db.close()
