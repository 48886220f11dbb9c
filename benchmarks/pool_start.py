#!/usr/bin/env python
"""Benchmark: how long a CPU pool of training workers takes to start, forked from the pool's forkserver
(`indicipr.systems.pool.warm_pool`) against spawned workers (the peer: multiprocessing's `spawn`, as the pool started
them before).

    .venv/bin/python benchmarks/pool_start.py                 # 3 workers (phase 2's seeds), 3 rounds
    .venv/bin/python benchmarks/pool_start.py --workers 2 --rounds 5

Each round is one fresh process per way, in alternating order: it runs `run_pool` with `--workers` workers over as many
jobs, whose module imports what a training job's does (notebook 08's `indicipr.systems.encoders`, torch and
transformers with it), and prints the seconds until the last worker ran its job. The ways:

| way | what happens before the first job |
|---|---|
| spawned (the peer) | every worker starts a fresh Python and imports the module: on two cores, three imports share them |
| forked, cold | `run_pool` starts the forkserver, which imports the module once, then forks the workers |
| forked, warm | the forkserver was started (`warm_pool`) long enough before: the workers are forked at once |

The jobs return their worker's parent, which says how the worker started (this process for a spawned one, the server
for a forked one); a round whose workers did not start the way it names fails the script.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
if __name__ != "__main__":  # imported by name (`pool_start`), as the rounds' job module: a training job's imports
    import indicipr.systems.encoders  # noqa: F401

WAYS = ("spawned", "forked, cold", "forked, warm")


def one_round(way: str, workers: int, settle: float) -> dict:
    "In this process (a fresh one): start a pool the `way` named, run one job per worker; seconds and parents."
    import pool_start  # this file as a module: the jobs' module, which a worker imports (or the server has)
    from indicipr.systems import encoders, pool

    if way == "spawned":  # the pool as it is where it cannot fork: no server starts, every worker is spawned
        pool.warm_pool = lambda *args, **kwargs: False
    elif way == "forked, warm":
        pool.warm_pool(encoders.run_encoders, workers, workers)
        time.sleep(settle)  # the server imports meanwhile
    t0 = time.perf_counter()
    parents = [p for _, p in pool.run_pool(pool_start.parent, list(range(workers)), workers=workers)]
    return {"seconds": time.perf_counter() - t0, "parents": parents, "pid": os.getpid()}


def parent(job, callbacks=None) -> int:
    "A job: this worker's parent process."
    return os.getppid()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=3, help="workers, and jobs (default 3: phase 2's seeds)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the three ways (default 3)")
    ap.add_argument("--settle", type=float, default=10.0, help="seconds the warm server gets to import (default 10)")
    ap.add_argument("--one", choices=WAYS, help=argparse.SUPPRESS)  # one round of one way, in a fresh process
    args = ap.parse_args(argv)
    if args.workers < 2:
        ap.exit(2, "pool_start.py: --workers must be at least 2\n")
    if args.rounds < 1:
        ap.exit(2, "pool_start.py: --rounds must be at least 1\n")
    if args.settle < 0:
        ap.exit(2, f"pool_start.py: --settle must not be negative, got {args.settle}\n")
    if args.one:
        print(json.dumps(one_round(args.one, args.workers, args.settle)))
        return 0
    from indicipr.systems import pool

    if not pool._pidfd_works():
        print("pool_start.py: this system spawns every pool's workers (forking needs Linux 5.3 or later)")
        return 0
    print(f"# A CPU pool of {args.workers} workers of notebook 08's module: seconds until the last one ran its job")
    print(f"{os.cpu_count()} cores; each round a fresh process per way, in alternating order\n")
    print("| round | " + " | ".join(WAYS) + " |")
    print("|---|" + "---|" * len(WAYS))
    times: dict[str, list[float]] = {w: [] for w in WAYS}
    for r in range(args.rounds):
        row = {}
        for way in WAYS if r % 2 == 0 else WAYS[::-1]:
            cmd = [sys.executable, __file__, "--one", way, "--workers", str(args.workers), "--settle", str(args.settle)]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode:
                sys.stderr.write(done.stderr[-2000:])
                return done.returncode
            res = json.loads(done.stdout.strip().splitlines()[-1])
            spawned = set(res["parents"]) == {res["pid"]}
            if spawned != (way == "spawned"):
                print(f"pool_start.py: the {way} round's workers started otherwise (parents {res['parents']})")
                return 1
            row[way] = res["seconds"]
            times[way].append(res["seconds"])
        print(f"| {r + 1} | " + " | ".join(f"{row[w]:.2f} s" for w in WAYS) + " |")
    best = {w: min(v) for w, v in times.items()}
    print(
        f"\nbest: spawned {best['spawned']:.2f} s, forked cold {best['forked, cold']:.2f} s, "
        f"forked warm {best['forked, warm']:.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
