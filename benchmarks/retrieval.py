"""Benchmark: open retrieval at scale. BM25 on `bm25s` (`indicipr.systems.retrieval.BM25S`, the card's tokens, rank-bm25's IDF
floor) and dense exact top-k (`numpy` dot product over precomputed float32 vectors), beside `rank-bm25`'s
`BM25Okapi.get_scores` (notebook 07's BM25), in one run, at 1k, 10k and 100k contexts.

The contexts are synthetic, built from the statutes' own sentences: every sentence of the section JSONL the project
holds (`data/sample/statutes/*.jsonl`, and `../shared/statutes/*.jsonl` when present), cut at sentence and clause ends;
a context joins 3–8 sentences drawn at random (seeded), about the length of a real one. A query is a window of 6–14
words of one sentence (the length of the benchmark's questions).

Per size and system it prints: the index build time (tokenisation included), the query latency of a top-20 search
(p50 and p99 over the queries, one query at a time, tokenisation included), and memory: the index's own arrays
(exact, where the library exposes them) and the growth of the process's resident memory while building (RSS, rough).
rank-bm25 is timed on fewer queries (`--peer-queries`) because each takes long at 100k; its speed-up column is
rank-bm25's p50 over bm25s's, and the share of the peer's queries where the two top-20 sets agree (exactly, and up to
documents tied with the 20th: synthetic contexts repeat sentences, so ties at the cut are common). The dense index uses random unit vectors (search cost does not depend on their values);
the encoder's own cost, embedding a query with the offline MiniLM (`--encoder`, default on), is measured once and
printed beside, since a real query pays it too. The run uses a fixed number of threads (`--threads`, default 2:
torch's and, through threadpoolctl, numpy's BLAS), printed in its header, so that runs on machines with other core
counts time the same work.

    python benchmarks/retrieval.py [--sizes 1000 10000 100000] [--queries 200] [--peer-queries 20] [--k 20]
                                   [--threads 2] [--no-encoder]
"""

import argparse
import gc
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from indicipr.data import basics, core, qa_files  # noqa: E402
from indicipr.systems.bm25 import BM25Params, bm25_tokens  # noqa: E402
from indicipr.systems.retrieval import BM25S, DenseRetriever  # noqa: E402

_CUT = re.compile(r"(?<=[.;:])\s+|\n+")


def statute_files() -> list[Path]:
    "The section JSONL files the project holds (the sample's statutes, and the shared folder's when present)."
    files = sorted((ROOT / "data" / "sample" / "statutes").glob("*.jsonl"))
    shared = core.shared_dir()
    if shared is not None:
        files += sorted((Path(shared) / "statutes").glob("*.jsonl"))
    return files


def statute_sentences(files) -> list[str]:
    "Distinct sentences/clauses (at least 5 words) of every section of `files`."
    out = {}
    for f in files:
        for rec in qa_files.read_jsonl(f):
            for piece in _CUT.split(rec.get("text", "")):
                piece = " ".join(piece.split())
                if len(piece.split()) >= 5:
                    out.setdefault(piece, None)
    return list(out)


def synthetic_contexts(sentences: list[str], n: int, seed: int = 0) -> list[str]:
    "`n` contexts of 3–8 sentences drawn at random (seeded)."
    rng = np.random.default_rng(seed)
    sizes = rng.integers(3, 9, n)
    picks = rng.integers(0, len(sentences), int(sizes.sum()))
    out, i = [], 0
    for s in sizes:
        out.append(" ".join(sentences[j] for j in picks[i : i + s]))
        i += s
    return out


def synthetic_queries(sentences: list[str], n: int, seed: int = 1) -> list[str]:
    "`n` windows of 6–14 words of random sentences."
    rng = np.random.default_rng(seed)
    out = []
    for j in rng.integers(0, len(sentences), n):
        words = sentences[j].split()
        w = int(rng.integers(6, 15))
        a = int(rng.integers(0, max(1, len(words) - w + 1)))
        out.append(" ".join(words[a : a + w]))
    return out


def rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def percentiles(seconds: list[float]) -> tuple[float, float]:
    ms = np.array(seconds) * 1000
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


def top(scores: np.ndarray, k: int) -> np.ndarray:
    "The k best positions of one score vector (descending)."
    part = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    return part[np.argsort(-scores[part], kind="stable")]


def bench_bm25s(contexts, queries, k):
    gc.collect()
    m0, t0 = rss(), time.perf_counter()
    r = BM25S().index(contexts)
    build, grown = time.perf_counter() - t0, rss() - m0
    s = r.bm.scores
    exact = sum(s[a].nbytes for a in ("data", "indices", "indptr"))
    lat, hits = [], []
    for q in queries:
        t = time.perf_counter()
        hits.append(top(r._scores(q), k))
        lat.append(time.perf_counter() - t)
    return {"build_s": build, "latency": percentiles(lat), "index_mb": exact / 2**20, "rss_mb": grown / 2**20}, hits


def bench_rank_bm25(contexts, queries, k):
    from rank_bm25 import BM25Okapi

    p = BM25Params()
    gc.collect()
    m0, t0 = rss(), time.perf_counter()
    bm = BM25Okapi([bm25_tokens(c) or ["\u0000"] for c in contexts], k1=p.k1, b=p.b, epsilon=p.epsilon)
    build, grown = time.perf_counter() - t0, rss() - m0
    lat, hits, scores = [], [], []
    for q in queries:
        t = time.perf_counter()
        s = bm.get_scores(bm25_tokens(q))
        hits.append(top(s, k))
        lat.append(time.perf_counter() - t)
        scores.append(s)
    return {"build_s": build, "latency": percentiles(lat), "index_mb": None, "rss_mb": grown / 2**20}, hits, scores


def same_up_to_ties(ours, peer, peer_scores, rtol: float = 1e-5) -> bool:
    "The two top-k sets are equal, or differ only by documents the peer scores the same as its k-th (a tie at the cut)."
    if set(ours) == set(peer):
        return True
    kth = peer_scores[peer].min()
    return bool(np.allclose(peer_scores[list(set(ours) ^ set(peer))], kth, rtol=rtol))


def bench_dense(n, queries, k, dim=384, seed=0):
    rng = np.random.default_rng(seed)
    gc.collect()
    m0, t0 = rss(), time.perf_counter()
    vecs = rng.standard_normal((n, dim), dtype=np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    build, grown = time.perf_counter() - t0, rss() - m0
    qv = rng.standard_normal((len(queries), dim), dtype=np.float32)
    qv /= np.linalg.norm(qv, axis=1, keepdims=True)
    lat = []
    for q in qv:
        t = time.perf_counter()
        top(vecs @ q, k)
        lat.append(time.perf_counter() - t)
    return {"build_s": build, "latency": percentiles(lat), "index_mb": vecs.nbytes / 2**20, "rss_mb": grown / 2**20}


def encoder_costs(sentences, queries, n_docs: int = 64) -> dict:
    "The offline MiniLM's cost: one query embedded at a time (p50/p99) and contexts embedded per second (batches of 32)."
    d = DenseRetriever("minilm-l6").load()
    d.embed(queries[:2])  # warm-up
    lat = []
    for q in queries[:50]:
        t = time.perf_counter()
        d.embed([q])
        lat.append(time.perf_counter() - t)
    docs = synthetic_contexts(sentences, n_docs, seed=7)
    t = time.perf_counter()
    d.embed(docs)
    return {"query_latency": percentiles(lat), "contexts_per_s": n_docs / (time.perf_counter() - t)}


DEFAULT_THREADS = 2  # the CI machine's cores: the README's figures were measured there


def check_options(ap: argparse.ArgumentParser, args) -> None:
    "Refuse, with one sentence and exit 2 (argparse's `error`), a count that would trace back or time nothing."
    for flag, values, what in (
        ("--sizes", args.sizes, "a number of contexts"),
        ("--queries", [args.queries], "the queries timed per size"),
        ("--peer-queries", [args.peer_queries], "the queries timed per size for rank-bm25"),
        ("--k", [args.k], "the length of the top-k list searched"),
        ("--threads", [args.threads], "the threads torch and numpy use"),
    ):
        bad = [v for v in values if v < 1]
        if bad:
            ap.error(f"{flag} {bad[0]}: {what}, at least 1")
    if args.peer_queries > args.queries:
        ap.error(f"--peer-queries {args.peer_queries}: at most --queries ({args.queries}), the first of the same list")


def pin_threads(n: int) -> int:
    "Use `n` threads in torch and in numpy's BLAS (threadpoolctl, when installed); the count torch reports."
    import torch

    torch.set_num_threads(n)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n)
    except ImportError:
        pass
    return torch.get_num_threads()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--queries", type=int, default=200, help="queries per size for bm25s and dense")
    ap.add_argument(
        "--peer-queries", type=int, default=20, help="queries per size for rank-bm25 (the first of the same list)"
    )
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--threads", type=int, default=DEFAULT_THREADS, help=f"threads of torch and numpy (default {DEFAULT_THREADS})"
    )
    ap.add_argument("--no-encoder", action="store_true", help="skip the MiniLM query-embedding cost")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    args = ap.parse_args(argv)
    check_options(ap, args)
    import os

    threads = pin_threads(args.threads)
    sentences = statute_sentences(statute_files())
    queries = synthetic_queries(sentences, args.queries, args.seed + 1)
    print(
        f"{len(sentences)} distinct statute sentences from {len(statute_files())} files; {len(queries)} queries of "
        f"{np.mean([len(q.split()) for q in queries]):.1f} words; top-{args.k}; {threads} threads on "
        f"{os.cpu_count()} CPUs\n"
    )
    rows = []
    for n in args.sizes:
        contexts = synthetic_contexts(sentences, n, args.seed)
        b, hits = bench_bm25s(contexts, queries, args.k)
        r, peer_hits, peer_scores = bench_rank_bm25(contexts, queries[: args.peer_queries], args.k)
        same = float(np.mean([set(a) == set(c) for a, c in zip(hits, peer_hits)]) * 100)
        tied = float(np.mean([same_up_to_ties(a, c, s) for a, c, s in zip(hits, peer_hits, peer_scores)]) * 100)
        del peer_scores
        d = bench_dense(n, queries, args.k, seed=args.seed)
        for name, res in (("BM25 bm25s", b), ("BM25 rank-bm25 get_scores", r), ("dense numpy (384-d)", d)):
            rows.append({"contexts": n, "system": name, **res})
        rows[-3]["speedup"] = r["latency"][0] / b["latency"][0]
        rows[-3]["same_top_k"], rows[-3]["same_up_to_ties"] = same, tied
        print(f"  {n:>7,} contexts done", flush=True)
        del contexts
        gc.collect()
    head = f"{'contexts':>9} {'system':<27} {'build s':>8} {'p50 ms':>8} {'p99 ms':>8} {'index MB':>9} {'RSS +MB':>8}  notes"
    print("\n" + head + "\n" + "-" * len(head))
    for x in rows:
        note = (
            (
                f"{x['speedup']:.0f}x rank-bm25 p50; same top-{args.k} set on {x['same_top_k']:.0f}% of the peer's queries, "
                f"{x['same_up_to_ties']:.0f}% up to ties at the cut"
            )
            if "speedup" in x
            else ""
        )
        idx = f"{x['index_mb']:.1f}" if x["index_mb"] is not None else "n/a"
        print(
            f"{x['contexts']:>9,} {x['system']:<27} {x['build_s']:>8.2f} {x['latency'][0]:>8.2f} {x['latency'][1]:>8.2f} "
            f"{idx:>9} {x['rss_mb']:>8.1f}  {note}"
        )
    enc = None
    if not args.no_encoder:
        enc = encoder_costs(sentences, queries)
        print(
            f"\nMiniLM (offline package) embedding one query: p50 {enc['query_latency'][0]:.1f} ms, p99 {enc['query_latency'][1]:.1f} ms; "
            f"contexts embedded: {enc['contexts_per_s']:.1f}/s (so a dense index of N contexts takes N / that many seconds to build)"
        )
    if args.json:
        out = {"rows": rows, "encoder": enc, "threads": threads}
        basics.write_text_atomic(Path(args.json), json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
