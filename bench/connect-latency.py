#!/usr/bin/env python3
"""New-connection latency of the HTTPS listener: N sequential `curl -sk .../healthz`, each on
a new TCP and TLS connection, against a `tidings-server` started here on a fresh data dir.

    bench/connect-latency.py [--binary target/release/tidings-server] [--requests 100]

Prints p50/p90/p99/max of curl's `time_total` and how many took over 30 ms (the Nagle plus
delayed-ACK stall is ~40 ms on loopback), then one CSV line for bench/README.md. Measurement
only: nothing here asserts a time.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time


def percentile(sorted_values, p):
    index = min(len(sorted_values) - 1, max(0, round(p / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[index]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default="target/release/tidings-server")
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--label", default="")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as data:
        env = dict(os.environ, TIDINGS_DATA_DIR=data, TIDINGS_LISTEN="127.0.0.1:0", TIDINGS_LOG="warn")
        server = subprocess.Popen([args.binary], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            url = None
            deadline = time.time() + 60
            while url is None and time.time() < deadline:
                line = server.stderr.readline()
                if not line:
                    sys.exit("the server exited before listening")
                found = re.match(r"listening on (https://\S+)", line)
                if found:
                    url = found.group(1) + "/healthz"
            # Warm-up: the first handshake pays for lazy initialisation.
            subprocess.run(["curl", "-sk", "-o", "/dev/null", url], check=True)
            times = []
            for _ in range(args.requests):
                out = subprocess.run(
                    ["curl", "-sk", "-o", "/dev/null", "-w", "%{time_total}", url],
                    check=True, capture_output=True, text=True,
                ).stdout
                times.append(float(out) * 1000)
        finally:
            server.terminate()
            server.wait(timeout=30)

    s = sorted(times)
    p50, p90, p99 = (percentile(s, p) for p in (50, 90, 99))
    slow = sum(1 for t in times if t > 30)
    print(f"{len(times)} new connections: p50 {p50:.1f} ms, p90 {p90:.1f} ms, p99 {p99:.1f} ms, "
          f"max {s[-1]:.1f} ms; {slow} over 30 ms")
    print(f"csv,{args.label},{len(times)},{p50:.2f},{p90:.2f},{p99:.2f},{s[-1]:.2f},{slow}")


if __name__ == "__main__":
    main()
