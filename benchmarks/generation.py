"""Benchmark: QA generation against the local llama.cpp server (SmolLM2-135M-Instruct).

Measures candidates per second at concurrency 1 and 4 (each run with its own empty cache, so
every context is a real model call; `--repeats` interleaves the settings and reports medians), then the wall time of a fully cached rerun (zero calls).
Contexts are the first N recorded sample contexts; generation uses the offline profile's settings
(greedy, fixed seed, the offline schema bounds and token cap).

    .venv/bin/python benchmarks/generation.py [--contexts 6] [--concurrency 1 4] [--n-threads N]

llama-cpp-python's server evaluates one request at a time, so concurrency mostly overlaps the
HTTP and parsing work of one request with the decoding of the next; on a server that batches
(vLLM, llama.cpp's own `llama-server -np 4`, hosted APIs) concurrency is where the speed comes from.
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from indicipr.data.config import present, settings_for  # noqa: E402
from indicipr.build.generate import ensure_recorded_sample, generate_candidates, recorded_contexts  # noqa: E402
from indicipr.llm.client import ResponseCache, chat_json  # noqa: E402
from indicipr.llm.servers import local_llm_server  # noqa: E402


def timed_run(contexts, endpoint, cache_path, concurrency, settings):
    "Generate for `contexts`; returns (seconds, contexts, candidates, parse failures, model calls)."
    cache = ResponseCache(cache_path)
    t0 = time.perf_counter()
    out = generate_candidates(
        contexts,
        endpoint,
        cache,
        concurrency=concurrency,
        params=present(settings.params),
        schema_limits=present(settings.schema_limits),
        progress=False,
    )
    seconds = time.perf_counter() - t0
    good = sum(1 for c in out["candidates"] if c["parse_error"] is None)
    failures = sum(1 for c in out["candidates"] if c["parse_error"] is not None)
    return seconds, len(out["generations"]), good, failures, cache.stores


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--contexts", type=int, default=6, help="number of recorded contexts to generate for")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--repeats", type=int, default=1, help="runs per setting (interleaved); the median is reported")
    ap.add_argument(
        "--n-threads", type=int, default=None, help="llama.cpp threads (default: the server's, half the cores)"
    )
    args = ap.parse_args(argv)

    settings = settings_for("generate", "offline")
    contexts = recorded_contexts(ensure_recorded_sample())[: args.contexts]
    rows = []
    with tempfile.TemporaryDirectory() as tmp, local_llm_server(n_threads=args.n_threads) as endpoint:
        # warm-up: page the model in, so the first measured run is not charged for it
        chat_json(endpoint, [{"role": "user", "content": "Say OK in JSON."}], None, None, max_tokens=8)
        timings, counts = {conc: [] for conc in args.concurrency}, {}
        for rep in range(args.repeats):  # interleaved, so load drifts hit both settings
            for conc in args.concurrency:
                cache_path = Path(tmp) / f"cache_c{conc}_r{rep}.jsonl"
                secs, n_ctx, good, bad, calls = timed_run(contexts, endpoint, cache_path, conc, settings)
                timings[conc].append(secs)
                counts[conc] = (n_ctx, good, bad, calls)
                print(
                    f"repeat {rep + 1}, concurrency {conc}: {secs:.1f} s, {good / secs:.3f} candidates/s, "
                    f"{n_ctx / secs:.3f} contexts/s, {calls} model calls, {bad} parse failures",
                    flush=True,
                )
        for conc in args.concurrency:
            rows.append((f"concurrency {conc}", statistics.median(timings[conc]), *counts[conc]))
        secs, n_ctx, good, bad, calls = timed_run(contexts, endpoint, cache_path, args.concurrency[-1], settings)
        assert calls == 0, f"the cached rerun made {calls} model calls"
        rows.append(("cached rerun", secs, n_ctx, good, bad, calls))

    print(
        f"\nmodel {endpoint.model} via llama.cpp, {len(contexts)} contexts, "
        f"max_tokens {settings.params.max_tokens}, schema bounds {present(settings.schema_limits)}"
    )
    print(f"{'run':<16}{'seconds':>10}{'contexts':>10}{'candidates':>12}{'failures':>10}{'calls':>7}{'cand/s':>10}")
    for name, secs, n_ctx, good, bad, calls in rows:
        print(f"{name:<16}{secs:>10.3f}{n_ctx:>10}{good:>12}{bad:>10}{calls:>7}{good / secs:>10.3f}")
    base = rows[0][1]
    for name, secs, *_ in rows[1:]:
        print(f"{name}: {base / secs:.2f}x the speed of {rows[0][0]}")


if __name__ == "__main__":
    main()
