#!/usr/bin/env python3
"""outbox-fsync: what writing outbox files durably costs on this disk, three ways.

Each way writes GROUPS groups of N files of BYTES bytes so that every file is whole or
absent and durable (temporary file, fsync, rename, fsync of the directory), like the
outbox transport (transport-smtp/src/outbox_writes.rs):

- ``threads``: what the outbox did before: each file on a thread of its own, all N at once,
  each doing all four steps (two fsyncs per file);
- ``group``: what it does now: one thread writes all N temporary files and starts their
  writeback (``posix_fadvise(DONTNEED)``), fsyncs each, renames each, fsyncs the directory
  once;
- ``group-no-hint``: the same without starting the writeback first, to show what the hint
  does (each fsync then commits the journal again for its own file's data).

Prints files per second, wall time per group and this process's CPU per file. Standard
library only; Linux (``os.posix_fadvise``). The directory defaults to one made under the
current directory (``--dir`` to choose: it must be on the disk being measured).

    python3 bench/outbox-fsync.py [--files 32] [--groups 30] [--bytes 3000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time


def write_temp(directory: str, name: str, data: bytes) -> int:
    fd = os.open(os.path.join(directory, name), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    os.write(fd, data)
    return fd


def fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def one_file(directory: str, name: str, data: bytes) -> None:
    fd = write_temp(directory, f".{name}.tmp", data)
    os.fsync(fd)
    os.close(fd)
    os.rename(os.path.join(directory, f".{name}.tmp"), os.path.join(directory, f"{name}.eml"))
    fsync_dir(directory)


def threads_way(directory: str, group: int, files: int, data: bytes) -> None:
    workers = [
        threading.Thread(target=one_file, args=(directory, f"t{group}-{i}", data)) for i in range(files)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def group_way(directory: str, group: int, files: int, data: bytes, hint: bool) -> None:
    written = []
    for i in range(files):
        name = f"g{group}-{i}"
        fd = write_temp(directory, f".{name}.tmp", data)
        if hint:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        written.append((fd, name))
    for fd, _ in written:
        os.fsync(fd)
    for fd, name in written:
        os.close(fd)
        os.rename(os.path.join(directory, f".{name}.tmp"), os.path.join(directory, f"{name}.eml"))
    fsync_dir(directory)


def measure(way: str, directory: str, groups: int, files: int, data: bytes) -> str:
    wall, cpu = time.perf_counter(), time.process_time()
    for group in range(groups):
        if way == "threads":
            threads_way(directory, group, files, data)
        else:
            group_way(directory, group, files, data, hint=(way == "group"))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    n = groups * files
    return (
        f"| {way} | {n / wall:,.0f} | {wall / groups * 1000:.2f} | {cpu / n * 1e6:.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=32, help="files per group (default 32)")
    parser.add_argument("--groups", type=int, default=30, help="groups per way (default 30)")
    parser.add_argument("--bytes", type=int, default=3000, help="bytes per file (default 3000)")
    parser.add_argument("--rounds", type=int, default=2, help="times each way is run (default 2)")
    parser.add_argument("--dir", default=".", help="where to make the scratch directory")
    args = parser.parse_args()
    data = os.urandom(args.bytes)
    print(f"{args.files} files of {args.bytes} bytes per group, {args.groups} groups per run")
    print()
    print("| way | files/s | ms per group | CPU µs per file |")
    print("|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="outbox-fsync-") as scratch:
        for _ in range(args.rounds):
            for way in ("threads", "group", "group-no-hint"):
                directory = tempfile.mkdtemp(dir=scratch)
                print(measure(way, directory, args.groups, args.files, data), flush=True)


if __name__ == "__main__":
    main()
