"""Benchmark: `indicipr evaluate` on large predictions files (1 MB, 10 MB, 50 MB by default): seconds and peak memory.

The predictions answer the test split of the sample with long texts built from the contexts' own words, shuffled so
that none occurs in its context: the error analysis then searches every answer twice (exact, then case- and
whitespace-insensitive), the worst case for it. Each size runs `indicipr evaluate` in a fresh process (`os.wait4` gives
that process's peak RSS). Side by side, on the same answers of the smallest size, the search the error analysis used
before (a regular expression compiled from each prediction) is timed in this process against the string search it
uses now.

    python benchmarks/evaluate_scale.py [--sizes-mb 1 10 50] [--resamples 1000] [--data-source sample]
"""

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from indicipr.data import benchmark, qa_files  # noqa: E402
from indicipr.analysis import error_taxonomy


def long_answers(records: list[dict], total_bytes: int, seed: int = 0) -> dict[str, str]:
    "`{id: text}` of about `total_bytes` in all: each text the context's words shuffled (found nowhere in the context)."
    rng, per = random.Random(seed), max(1, total_bytes // len(records))
    out = {}
    for r in records:
        words = r["context"].split()
        text = []
        while sum(len(w) + 1 for w in text) < per:
            text.extend(rng.sample(words, len(words)))
        out[r["id"]] = " ".join(text)[:per]
    return out


def regex_occurrences(text: str, context: str) -> list:
    "The former search of `error_taxonomy._occurrences`: a regular expression compiled from the prediction."
    spans = [(m.start(), m.start() + len(text)) for m in re.finditer(re.escape(text), context)]
    if spans:
        return spans
    pattern = r"\s+".join(re.escape(w) for w in text.split())
    return [m.span() for m in re.finditer(pattern, context, flags=re.IGNORECASE)]


def run_evaluate(pred: Path, data_source: str, resamples: int) -> tuple[float, int, int]:
    "(seconds, peak RSS in bytes, exit status) of `indicipr evaluate --gold test --pred PRED` in a new process."
    exe = Path(sys.executable).parent / "indicipr"
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [
            str(exe),
            "evaluate",
            "--gold",
            "test",
            "--data-source",
            data_source,
            "--pred",
            str(pred),
            "--resamples",
            str(resamples),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t0, usage.ru_maxrss * 1024, p.returncode


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes-mb", type=float, nargs="+", default=[1, 10, 50])
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--data-source", default="sample")
    args = ap.parse_args(argv)
    records = [dict(r) for r in benchmark.load_benchmark(args.data_source, verbose=False)["test"]]
    print(
        f"indicipr evaluate on {len(records)} test questions of {args.data_source}; answers found nowhere in their contexts"
    )
    print(f"{'file':>8} {'answer':>10} {'seconds':>8} {'peak MB':>8}  exit")
    first = None
    with tempfile.TemporaryDirectory() as d:
        for mb in args.sizes_mb:
            preds = long_answers(records, int(mb * 2**20))
            first = first or preds
            path = Path(d) / f"preds_{mb:g}mb.jsonl"
            qa_files.write_jsonl(path, ({"id": k, "prediction_text": v} for k, v in preds.items()))
            seconds, peak, rc = run_evaluate(path, args.data_source, args.resamples)
            size = path.stat().st_size
            print(
                f"{size / 2**20:>6.1f}MB {size // len(records) // 1024:>8}KB {seconds:>8.1f} {peak / 2**20:>8.0f}  {rc}"
            )
    contexts = {r["id"]: r["context"] for r in records}
    for name, search in (
        ("string search (now)", error_taxonomy._occurrences),
        ("regular expression (before)", regex_occurrences),
    ):
        t0 = time.perf_counter()
        for qid, text in first.items():
            search(text, contexts[qid])
        print(f"error-analysis search of the {args.sizes_mb[0]:g} MB answers, {name}: {time.perf_counter() - t0:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
