#!/usr/bin/env python
"""Benchmark: the project's batched sliding-window QA inference vs transformers 4.x `pipeline("question-answering")`, against a matmul floor.

Both answer the same 382 questions with long contexts with the same saved checkpoint, the same
windows (384 tokens, stride 128) and the same maximum answer length, on the same number of CPU
threads; the peer runs in its own virtual environment because transformers 5 removed the task:

    python -m venv benchmarks/.peer-venv
    benchmarks/.peer-venv/bin/pip install torch==2.13.0 "transformers<5"
    .venv/bin/python benchmarks/qa_inference.py            # --help for the options

The systems, each timed over all questions (tokenising, forward passes and decoding):
- **ours**: `indicipr.systems.qa_model.predict_answers` with `engine="auto"` (OpenVINO fp32 when the
  `openvino` extra is installed and the numerics are native, `INDICIPR_NUMERICS=native`; else torch; `--engine`
  picks one), batch 4;
- **ours-torch**: the same call with `engine="torch"` (eager torch, all threads);
- **peer**: the pipeline at each `--peer-batch-sizes` (kept running in its own process: model
  loaded and warmed once, then asked for one timed pass at a time);
- **floor**: the forward passes' matrix multiplies alone, at ours' own shapes (every padded batch
  of ours: per layer the Q, K, V and attention-output projections, the feed-forward up and down
  projections, the two batched attention products; then the QA head), with preallocated operands,
  in two layouts (one process on all threads; one single-thread worker per thread, splitting the
  batches) and the faster of the two taken each round. No fp32 implementation that does these
  multiplies with this BLAS on this machine runs the forward passes faster, so `floor / ours` is
  the share of the reachable speed ours gets (1.0 = at the floor; above 1 means the engine's
  kernels beat torch's sgemm at these shapes). The FLOP count divided by is printed: 2·m·k·n
  summed over those products at the padded shapes.

The repeats are interleaved: every round times the floor, ours, the peer, ours-torch and the
peer's other batch size once each (the floor's single-thread-worker layout right before ours), `--repeats` rounds (default 3), so that a slow minute on a
shared machine lands on every system; the medians and min-max of the rounds are printed, and the
ratios (ours / best peer, floor / ours) are taken round by round, then summarised the same way.
Rows that change the numerics (int8 dynamic quantization), the torch.compile row (`--compile`,
its compile time apart), ours with the other decoding rule and the peer at its default
`max_answer_len=15` run once after the rounds and never count towards the ratios.

Checked (the script exits 1 when either fails, after printing the figures): ours' answers are
identical to ours-torch's on every question (so EM/F1 are identical), and OpenVINO's window logits
are within 1e-5 of torch's on every window of the first `--logit-questions` questions (default 100, about
230 windows; 0: all).

Ours compares spans across windows with the library's default rule (the default of
`indicipr.systems.qa_model.predict_answers`'s `span_score`, read from its signature, so the benchmark times
what the pipeline runs); `--span-score` picks either rule (`window_probs`: per-window
probabilities, as the transformers pipeline does; `logits`: `run_qa.py`'s start + end logit), and
the rule not chosen is the extra `ours-decoding` row (`--no-other-rule-row` drops it).
`--batch-sweep 1 2 4 8 16` first times ours at several batch sizes (where the CPU default of 4
windows per batch comes from).

The questions: every QA pair of the sample benchmark is asked twice against a long context built
from the sample's contexts of the same Act: once with its own context first and the following
contexts appended, once with the preceding contexts first and its own context last, each until
the context holds at least `--min-words` words (default 350, about 2-3 windows of 384 tokens).
The answer offsets are shifted accordingly, so the gold span is still exact.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def long_context_questions(records, min_words: int = 350) -> list[dict]:
    "Two long-context variants of every record (own context first / own context last), answers re-anchored."
    from indicipr.data.core import act_for_id

    by_act: dict[str, list[str]] = {}
    for r in records:
        ctxs = by_act.setdefault(act_for_id(r["id"]).key, [])
        if r["context"] not in ctxs:
            ctxs.append(r["context"])
    out = []
    for r in records:
        ctxs = by_act[act_for_id(r["id"]).key]
        i = ctxs.index(r["context"])
        for variant, step in (("first", 1), ("last", -1)):
            parts, k = [r["context"]], i
            while sum(len(p.split()) for p in parts) < min_words and len(parts) < len(ctxs):
                k = (k + step) % len(ctxs)
                parts = parts + [ctxs[k]] if step == 1 else [ctxs[k]] + parts
            if len(parts) == 1:  # an Act with a single context: repeat nothing
                parts = [r["context"]]
            context = " ".join(parts)
            offset = 0 if step == 1 else len(" ".join(parts[:-1])) + (1 if len(parts) > 1 else 0)
            start = r["answers"]["answer_start"][0] + offset
            text = r["answers"]["text"][0]
            assert context[start : start + len(text)] == text, (r["id"], variant)
            out.append(
                {
                    "id": f"{r['id']}#{variant}",
                    "question": r["question"],
                    "context": context,
                    "answers": {"text": [text], "answer_start": [start]},
                }
            )
    return out


def find_checkpoint(data_source: str) -> Path | None:
    "A fine-tuned MiniLM folder written by notebook 08 (the data source's first, then any)."
    from indicipr.data import benchmark, core

    models = core.data_dir() / "models"
    first = models / benchmark.source_tag(data_source) / "minilm-l6_seed0"
    if (first / "qa_config.json").exists():
        return first
    found = sorted(models.glob("*/minilm-l6_seed*/qa_config.json"))
    return found[0].parent if found else None


def train_checkpoint(data_source: str, out: Path) -> Path:
    "Fine-tune MiniLM-L6 for one epoch on the training split (when no notebook-08 checkpoint exists)."
    from indicipr.data import benchmark
    from indicipr.systems import finetune
    from indicipr.systems import qa_model as QM
    from indicipr.systems import training as TR

    train = [dict(r) for r in benchmark.load_benchmark(data_source)["train"]]
    tok = QM.load_tokenizer("minilm-l6")
    mal = QM.suggest_max_answer_length(train, tok)
    cfg = TR.TrainConfig(epochs=1, learning_rate=1e-4, batch_size=16, seed=0, save_checkpoints=False)
    return finetune.train_encoder("minilm-l6", train, cfg, out, mal)


def score(records, preds) -> dict:
    from indicipr.scoring.metrics import exact_match, token_f1

    n = len(records)
    return {
        "em": 100 * sum(exact_match(preds[r["id"]], r["answers"]["text"]) for r in records) / n,
        "f1": 100 * sum(token_f1(preds[r["id"]], r["answers"]["text"]) for r in records) / n,
    }


def library_span_score() -> str:
    "The span-scoring rule `indicipr.systems.qa_model.predict_answers` uses when none is given (what the pipeline runs)."
    import inspect

    from indicipr.systems import qa_model as QM

    return inspect.signature(QM.predict_answers).parameters["span_score"].default


def window_lengths(model_dir: Path, records) -> np.ndarray:
    "Token lengths of the sliding windows the checkpoint's inference runs over `records` (its max_length and stride)."
    from indicipr.systems import finetune
    from indicipr.systems import qa_model as QM

    cfg = finetune.qa_config(model_dir)
    tok = QM.load_tokenizer(str(model_dir))
    return QM.encode_windows(records, tok, finetune.trained_window(cfg)).lengths


def forward_flops(lengths, layers: int, hidden: int, intermediate: int) -> float:
    """Floating-point operations of one encoder forward pass over windows of `lengths` tokens
    (multiply-add = 2): Q/K/V/output projections and the feed-forward block per token, the
    attention products per token pair, and the 2-unit QA head."""
    n = np.asarray(lengths, dtype=np.float64)
    per_token = 2 * (4 * hidden * hidden + 2 * hidden * intermediate)
    attention = 2 * 2 * n * n * hidden
    return float((layers * (n * per_token + attention) + n * 2 * hidden * 2).sum())


def model_shape(model_dir: Path) -> dict:
    "The encoder's shape (layers, hidden size, feed-forward size, attention heads) from its config.json."
    c = json.loads((Path(model_dir) / "config.json").read_text())
    return {
        "layers": c["num_hidden_layers"],
        "hidden": c["hidden_size"],
        "intermediate": c["intermediate_size"],
        "heads": c["num_attention_heads"],
    }


def batch_shapes(lengths, batch_size: int, pad_multiple: int = 8, max_length: int = 384) -> list[tuple[int, int]]:
    "(windows, padded length) of each batch ours runs: `predict_answers`'s own batching and padding of windows of `lengths`."
    from indicipr.systems.qa_model import _batches_by_length, round_up

    lengths = np.asarray(lengths)
    return [
        (len(idx), min(round_up(int(lengths[idx].max()), pad_multiple), max_length))
        for idx in _batches_by_length(lengths, batch_size)
    ]


def layer_products(B: int, L: int, hidden: int, intermediate: int, heads: int) -> list[tuple[int, int, int, int]]:
    """The matrix products of one encoder layer over a padded batch of B windows of L tokens, as
    (batch, m, k, n): Q, K, V and the attention output (T×H·H×H, T = B·L), the feed-forward up
    (T×H·H×I) and down (T×I·I×H) projections, and per head the scores (L×d·d×L) and the weighted
    values (L×L·L×d), d = H / heads."""
    T, d = B * L, hidden // heads
    return (
        [(1, T, hidden, hidden)] * 4
        + [(1, T, hidden, intermediate), (1, T, intermediate, hidden)]
        + [(B * heads, L, d, L), (B * heads, L, L, d)]
    )


def products_flops(shapes, layers: int, hidden: int, intermediate: int, heads: int) -> float:
    "2·m·k·n summed over every product of the forward passes at `shapes` (the layers' and the 2-unit QA head's)."
    total = 0
    for B, L in shapes:
        total += layers * sum(2 * b * m * k * n for b, m, k, n in layer_products(B, L, hidden, intermediate, heads))
        total += 2 * B * L * hidden * 2
    return float(total)


class MatmulFloor:
    """The shape-matched floor: every matrix product of ours' forward passes (at its padded batch
    shapes, with each layer's own weights), with preallocated operands, timed in two layouts."""

    def __init__(self, shapes, layers: int, hidden: int, intermediate: int, heads: int, threads: int):
        import torch

        self.shapes, self.layers, self.threads = list(shapes), layers, threads
        self.dims = (hidden, intermediate, heads)
        g = torch.Generator().manual_seed(0)
        self.weights = [
            [
                torch.randn(o, i, generator=g) * 0.05
                for o, i in [(hidden, hidden)] * 4 + [(intermediate, hidden), (hidden, intermediate)]
            ]
            for _ in range(layers)
        ]
        self.head = torch.randn(2, hidden, generator=g)
        Bmax, Lmax = max(b for b, _ in self.shapes), max(length for _, length in self.shapes)
        self.buffers = [self._buffers(Bmax, Lmax, g) for _ in range(max(1, threads))]  # one set per worker

    def _buffers(self, B, L, g):
        import torch

        H, inter, nh = self.dims
        T = B * L
        return {
            "x": torch.randn(T * H, generator=g),
            "y": torch.randn(T * inter, generator=g),
            "q": torch.randn(B * nh * L * (H // nh), generator=g),
            "p": torch.randn(B * nh * L * L, generator=g),
            "oh": torch.empty(T * H),
            "oi": torch.empty(T * inter),
            "os": torch.empty(B * nh * L * L),
            "od": torch.empty(B * nh * L * (H // nh)),
            "o2": torch.empty(T * 2),
        }

    def run_batch(self, shape, buf):
        "The products of one batch's forward pass."
        import torch

        (B, L), (H, inter, nh) = shape, self.dims
        T, d, Bh = B * L, H // nh, B * nh
        x, y = buf["x"][: T * H].view(T, H), buf["y"][: T * inter].view(T, inter)
        q, p = buf["q"][: Bh * L * d].view(Bh, L, d), buf["p"][: Bh * L * L].view(Bh, L, L)
        oh, oi = buf["oh"][: T * H].view(T, H), buf["oi"][: T * inter].view(T, inter)
        os_, od = buf["os"][: Bh * L * L].view(Bh, L, L), buf["od"][: Bh * L * d].view(Bh, L, d)
        for w in self.weights:
            for k in range(4):
                torch.mm(x, w[k].t(), out=oh)
            torch.mm(x, w[4].t(), out=oi)
            torch.mm(y, w[5].t(), out=oh)
            torch.bmm(q, q.transpose(1, 2), out=os_)
            torch.bmm(p, q, out=od)
        torch.mm(x, self.head.t(), out=buf["o2"][: T * 2].view(T, 2))

    def run(self, limit: int | None = None) -> dict:
        """Seconds of all batches' products (the first `limit` batches: a warm-up) in each layout:
        `threads` threads in one process, and one single-thread worker per thread taking the batches in turn."""
        from concurrent.futures import ThreadPoolExecutor

        import torch

        old, shapes = torch.get_num_threads(), self.shapes[:limit]
        times = {}
        try:
            torch.set_num_threads(self.threads)
            t0 = time.perf_counter()
            for s in shapes:
                self.run_batch(s, self.buffers[0])
            times[f"1 process x {self.threads} threads"] = time.perf_counter() - t0
            if self.threads > 1:
                torch.set_num_threads(1)
                import threading

                local = threading.local()
                ids = iter(range(self.threads))
                lock = threading.Lock()

                def work(s):
                    if not hasattr(local, "buf"):
                        with lock:
                            local.buf = self.buffers[next(ids)]
                    self.run_batch(s, local.buf)

                with ThreadPoolExecutor(self.threads) as pool:
                    t0 = time.perf_counter()
                    list(pool.map(work, shapes))
                    times[f"{self.threads} workers x 1 thread"] = time.perf_counter() - t0
        finally:
            torch.set_num_threads(old)
        return times


class Ours:
    "The project's inference (`indicipr.systems.qa_model.predict_answers`) with one engine, warmed once."

    def __init__(self, model, tok, kw: dict, engine: str, records, warmup: int = 4):
        from indicipr.systems import qa_model as QM

        self.model, self.tok, self.kw, self.engine = model, tok, kw, engine
        t0 = time.perf_counter()
        QM.predict_answers(model, tok, records[:warmup], engine=engine, **kw)  # OpenVINO converts and compiles here
        self.warmup_seconds = time.perf_counter() - t0

    def run(self, records) -> tuple[float, dict]:
        from indicipr.systems import qa_model as QM

        t0 = time.perf_counter()
        answers = QM.predict_answers(self.model, self.tok, records, engine=self.engine, **self.kw)
        return time.perf_counter() - t0, {r["id"]: a.text for r, a in zip(records, answers)}


PEER_VENV_HINT = (
    "create it with: python -m venv benchmarks/.peer-venv && "
    'benchmarks/.peer-venv/bin/pip install torch==2.13.0 "transformers<5"'
)


class Peer:
    "`peer_qa_pipeline.py --serve` in the peer environment: the pipeline loaded once, one timed pass per request."

    def __init__(self, peer_python: Path, model_dir: Path, questions: Path, threads: int, log: Path):
        cmd = [
            str(peer_python),
            str(Path(__file__).with_name("peer_qa_pipeline.py")),
            "--serve",
            "--model",
            str(model_dir),
            "--questions",
            str(questions),
            "--threads",
            str(threads),
        ]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_VERBOSITY": "error",
        }
        self.log = open(log, "w")
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env
        )
        self.versions = json.loads(self._line("READY "))

    def _line(self, prefix: str) -> str:
        for line in self.proc.stdout:
            if line.startswith(prefix):
                return line[len(prefix) :]
        raise RuntimeError(f"the peer stopped (exit {self.proc.wait()}); its log: {self.log.name}")

    def run(self, batch_size: int, max_answer_len: int, warmup: bool = False) -> tuple[float, dict]:
        self.proc.stdin.write(
            json.dumps({"batch_size": batch_size, "max_answer_len": max_answer_len, "warmup": warmup}) + "\n"
        )
        self.proc.stdin.flush()
        r = json.loads(self._line("RESULT "))
        return r["seconds"], r["predictions"]

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        self.log.close()


def spread(xs) -> dict:
    "Median, min and max of a list of numbers."
    xs = np.asarray(xs, dtype=float)
    return {"median": float(np.median(xs)), "min": float(xs.min()), "max": float(xs.max())}


def fmt(s: dict, digits: int = 2) -> str:
    return f"{s['median']:.{digits}f} [{s['min']:.{digits}f}-{s['max']:.{digits}f}]"


def max_logit_difference(a, b) -> float:
    "Largest |difference| between two `window_logits` results (start and end logits of every window)."
    assert len(a) == len(b)
    return max(float(np.abs(x - y).max()) for wa, wb in zip(a, b) for x, y in zip(wa, wb))


def batch_size_sweep(model, tok, kw, engine, records, sizes) -> list[dict]:
    "Milliseconds per window of ours at each batch size (the CPU default comes from this)."
    from indicipr.systems import qa_model as QM

    n_windows = len(QM.encode_windows(records, tok, kw["window"]))
    rows = []
    for bs in sizes:
        r = Ours(model, tok, kw | {"batch_size": bs}, engine, records, warmup=2)
        secs = r.run(records)[0]
        rows.append({"batch_size": bs, "ms/window": 1000 * secs / n_windows, "q/s": len(records) / secs})
        print(f"  batch {bs:3d}: {rows[-1]['ms/window']:.1f} ms/window", flush=True)
    return rows


def main(argv=None) -> int:
    from indicipr.systems.finetune import qa_config
    from indicipr.systems.qa_model import ENGINES, SPAN_SCORES, default_eval_batch_size

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--model",
        default=None,
        help="fine-tuned checkpoint (default: notebook 08's minilm-l6_seed0; trained if absent)",
    )
    p.add_argument("--data-source", default="sample")
    p.add_argument("--min-words", type=int, default=350)
    p.add_argument("--limit", type=int, default=None, help="use only the first N questions (smoke runs)")
    p.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="windows per batch of the project's inference (default: the CPU default, 4)",
    )
    p.add_argument(
        "--engine", default="auto", choices=ENGINES, help="ours' engine (default: auto, predict_answers's default)"
    )
    p.add_argument(
        "--span-score",
        default=library_span_score(),
        choices=SPAN_SCORES,
        help="how ours compares spans across windows (default: indicipr.systems.qa_model.predict_answers's default, "
        f"{library_span_score()!r})",
    )
    p.add_argument(
        "--other-rule-row",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also report ours with the other span-scoring rule (one run after the rounds)",
    )
    p.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="add a torch.compile row (fp32; one run after the rounds, its compile time apart)",
    )
    p.add_argument(
        "--batch-sweep",
        type=int,
        nargs="*",
        default=None,
        help="first time ours at these batch sizes on the first 60 questions (e.g. 1 2 4 8 16)",
    )
    p.add_argument("--peer-batch-sizes", type=int, nargs="+", default=[1, 32])
    p.add_argument(
        "--peer-default-len",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run the peer once with its default max_answer_len=15 (batch 1), for reference",
    )
    p.add_argument(
        "--int8",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="add the int8 dynamic-quantization row (one run)",
    )
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--repeats", type=int, default=3, help="interleaved rounds: each system timed once a round")
    p.add_argument(
        "--logit-questions",
        type=int,
        default=100,
        help="compare the engine's and torch's window logits on the first N questions (default 100; 0: all)",
    )
    p.add_argument("--peer-python", default=str(ROOT / "benchmarks" / ".peer-venv" / "bin" / "python"))
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "out"))
    args = p.parse_args(argv)
    for name in ("repeats", "threads", "batch_size", "limit", "logit_questions"):
        v = getattr(args, name)
        if v is not None and v < (0 if name == "logit_questions" else 1):
            print(
                f"qa_inference.py: --{name.replace('_', '-')} must be at least {0 if name == 'logit_questions' else 1}, not {v}",
                file=sys.stderr,
            )
            return 2
    if not Path(args.peer_python).exists():
        print(f"qa_inference.py: --peer-python {args.peer_python} does not exist; {PEER_VENV_HINT}", file=sys.stderr)
        return 2

    import torch

    from indicipr.data import basics, benchmark, qa_files
    from indicipr.systems import finetune
    from indicipr.systems import qa_model as QM

    load_start = os.getloadavg()
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model_dir = (
        Path(args.model)
        if args.model
        else (find_checkpoint(args.data_source) or train_checkpoint(args.data_source, out / "minilm-l6_bench"))
    )
    cfg = qa_config(model_dir)
    mal = int(cfg.get("max_answer_length", 64))
    splits = benchmark.load_benchmark(args.data_source)
    base = [dict(r) for s in ("train", "validation", "test") for r in splits[s]]
    records = long_context_questions(base, args.min_words)[: args.limit]
    qpath = out / "qa_inference_questions.jsonl"
    qa_files.write_jsonl(qpath, records)
    words = sorted(len(r["context"].split()) for r in records)
    print(
        f"{len(records)} questions, context words median {words[len(words) // 2]}, max {words[-1]}; "
        f"checkpoint {model_dir}; max answer length {mal} tokens; {args.threads} threads",
        flush=True,
    )

    bs = args.batch_size or default_eval_batch_size("cpu")
    model, tok, _ = finetune.load_finetuned(model_dir)
    model.eval()
    kw = dict(
        window=finetune.trained_window(cfg),
        span_score=args.span_score,
        max_answer_length=mal,
        batch_size=bs,
        device="cpu",
    )
    lengths = QM.encode_windows(records, tok, kw["window"]).lengths
    engine = QM.resolve_engine(args.engine, model, "cpu", int(lengths.sum()))
    print(f"ours' engine: {args.engine} -> {engine}", flush=True)
    sweep = None
    if args.batch_sweep:
        print(f"batch-size sweep on the first {min(60, len(records))} questions ({engine}):", flush=True)
        sweep = batch_size_sweep(model, tok, kw, engine, records[:60], args.batch_sweep)

    # the systems, each loaded and warmed once
    ours = Ours(model, tok, kw, engine, records)
    ours_torch = Ours(model, tok, kw, "torch", records)
    peer = Peer(Path(args.peer_python), model_dir, qpath, args.threads, out / "peer_stderr.log")
    try:
        for pbs in args.peer_batch_sizes:
            peer.run(pbs, mal, warmup=True)
        shape = model_shape(model_dir)
        shapes = batch_shapes(lengths, bs, 8, kw["window"].max_length)
        floor = MatmulFloor(shapes, threads=args.threads, **shape)
        floor.run(limit=8)  # warm-up (pages, BLAS buffers)
        product_flops = products_flops(shapes, **shape)
        useful_flops = forward_flops(lengths, shape["layers"], shape["hidden"], shape["intermediate"])
        print(
            f"floor: {product_flops / 1e9:.0f} GFLOP of matrix products at ours' {len(shapes)} padded batch shapes "
            f"({useful_flops / 1e9:.0f} GFLOP without the padding)",
            flush=True,
        )

        systems = [("ours", lambda: ours.run(records))]
        peer_labels = [f"peer batch {pbs}" for pbs in args.peer_batch_sizes]
        systems.append((peer_labels[0], lambda pbs=args.peer_batch_sizes[0]: peer.run(pbs, mal)))
        systems.append(("ours-torch", lambda: ours_torch.run(records)))
        for lab, pbs in zip(peer_labels[1:], args.peer_batch_sizes[1:]):
            systems.append((lab, lambda pbs=pbs: peer.run(pbs, mal)))
        seconds = {name: [] for name, _ in systems}
        preds: dict[str, dict] = {}
        floor_times: list[dict] = []
        for rnd in range(args.repeats):
            floor_times.append(floor.run())  # first: its last layout runs right before ours
            print(
                f"  round {rnd + 1} floor: " + ", ".join(f"{k} {v:.1f} s" for k, v in floor_times[-1].items()),
                flush=True,
            )
            for name, fn in systems:
                secs, pr = fn()
                seconds[name].append(secs)
                if name in preds and pr != preds[name]:
                    raise SystemExit(f"{name}: its answers changed between rounds")
                preds[name] = pr
                print(f"  round {rnd + 1} {name}: {len(records) / secs:.2f} q/s ({secs:.1f} s)", flush=True)

        # once, after the rounds: rows that never count towards the ratios
        extra = []
        other = next(s for s in SPAN_SCORES if s != args.span_score)
        if args.other_rule_row:
            o = Ours(model, tok, kw | {"span_score": other}, engine, records)
            extra.append(
                (f"indicipr predict_answers (batch {bs}, {engine}, {other})", "ours-decoding", *o.run(records), {})
            )
        if args.compile:
            c = Ours(torch.compile(model, dynamic=True), tok, kw, "torch", records)
            extra.append(
                (
                    f"indicipr predict_answers (batch {bs}, torch.compile)",
                    "ours-compiled",
                    *c.run(records),
                    {"compile_seconds": c.warmup_seconds},
                )
            )
        if args.int8:
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch.ao's notice that it moves to torchao
                q8 = torch.ao.quantization.quantize_dynamic(
                    finetune.load_finetuned(model_dir)[0].eval(), {torch.nn.Linear}, dtype=torch.qint8
                )
            extra.append(
                (
                    f"indicipr predict_answers (batch {bs}, int8 dynamic quantization)",
                    "ours-approx",
                    *Ours(q8, tok, kw, "torch", records).run(records),
                    {},
                )
            )
        if args.peer_default_len and mal != 15:
            peer.run(1, 15, warmup=True)
            extra.append(
                (
                    f"transformers {peer.versions['transformers']} pipeline (batch_size=1, max_answer_len=15)",
                    "peer-default",
                    *peer.run(1, 15),
                    {"max_answer_len": 15},
                )
            )
    finally:
        peer.close()

    # the logit check: OpenVINO's window logits against torch's
    n_check = min(args.logit_questions or len(records), len(records))
    logit_diff = None
    if engine != "torch":
        t0 = time.perf_counter()
        lt = QM.window_logits(model, tok, records[:n_check], kw["window"], bs, device="cpu", engine="torch")
        lo = QM.window_logits(model, tok, records[:n_check], kw["window"], bs, device="cpu", engine=engine)
        logit_diff = max_logit_difference(lt, lo)
        print(
            f"logit check: {len(lt)} windows of {n_check} questions, max |{engine} - torch| = {logit_diff:.2e} "
            f"({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )

    # the table
    floor_best = [min(t.values()) for t in floor_times]
    labels = {
        "ours": f"indicipr predict_answers (batch {bs}, fp32, engine {args.engine} -> {engine}, {args.span_score})",
        "ours-torch": f"indicipr predict_answers (batch {bs}, fp32, engine torch, {args.span_score})",
    }
    rows, row_of = [], {}
    for name, secs in seconds.items():
        kind = "peer" if name.startswith("peer") else name
        label = (
            labels.get(name) or f"transformers {peer.versions['transformers']} pipeline (batch_size={name.split()[-1]})"
        )
        rows.append(
            {
                "system": label,
                "kind": kind,
                "max_answer_len": mal,
                "runs": len(secs),
                "seconds": spread(secs),
                "q/s": spread([len(records) / s for s in secs]),
                **score(records, preds[name]),
            }
        )
        row_of[name] = rows[-1]
    for label, kind, secs, pr, more in extra:
        rows.append(
            {
                "system": label,
                "kind": kind,
                "max_answer_len": more.pop("max_answer_len", mal),
                "runs": 1,
                "seconds": spread([secs]),
                "q/s": spread([len(records) / secs]),
                **score(records, pr),
                **more,
            }
        )
    best_peer_name = max((n for n in seconds if n.startswith("peer")), key=lambda n: row_of[n]["q/s"]["median"])
    best_peer = row_of[best_peer_name]
    ratio_rounds = [p / o for o, p in zip(seconds["ours"], seconds[best_peer_name])]
    floor_share = {n: spread([f / s for f, s in zip(floor_best, seconds[n])]) for n in seconds}
    for n, r in row_of.items():
        r["floor / system"] = floor_share[n]
    same_answers = preds["ours"] == preds["ours-torch"]
    n_diff = sum(preds["ours"][k] != preds["ours-torch"][k] for k in preds["ours"])
    load = {
        "start": [round(x, 2) for x in load_start],
        "end": [round(x, 2) for x in os.getloadavg()],
        "cores": os.cpu_count(),
    }
    result = {
        "questions": len(records),
        "windows": len(lengths),
        "threads": args.threads,
        "rounds": args.repeats,
        "load": load,
        "checkpoint": str(model_dir),
        "max_answer_len": mal,
        "torch": torch.__version__,
        "engine": engine,
        "openvino": _version("openvino"),
        "peer_versions": peer.versions,
        "rows": rows,
        "batch_sweep": sweep,
        "floor": {
            "gflop_products_padded": product_flops / 1e9,
            "gflop_forward_unpadded": useful_flops / 1e9,
            "batches": len(shapes),
            "rounds": floor_times,
            "seconds": spread(floor_best),
            "gflops": spread([product_flops / 1e9 / f for f in floor_best]),
        },
        "ratio_ours_best_peer": spread(ratio_rounds),
        "floor_share_ours": floor_share["ours"],
        "floor_share_ours_torch": floor_share["ours-torch"],
        "answers_identical_to_torch": same_answers,
        "answers_differing": n_diff,
        "logit_check": {"questions": n_check, "max_abs_diff": logit_diff},
    }
    basics.write_text_atomic(out / "qa_inference.json", json.dumps(result, indent=2) + "\n")

    import pandas as pd

    table = pd.DataFrame(
        [
            {
                "system": r["system"],
                "kind": r["kind"],
                "runs": r["runs"],
                "max_answer_len": r["max_answer_len"],
                "q/s median [min-max]": fmt(r["q/s"]),
                "floor / system": fmt(r["floor / system"]) if "floor / system" in r else "",
                "em": round(r["em"], 2),
                "f1": round(r["f1"], 2),
                **({"compile_seconds": round(r["compile_seconds"], 1)} if "compile_seconds" in r else {}),
            }
            for r in rows
        ]
    )
    print(table.to_markdown(index=False))
    fl = result["floor"]
    print(
        f"\nfloor: {fl['gflop_products_padded']:.0f} GFLOP (2·m·k·n over the Q/K/V/output and feed-forward projections, "
        f"the attention products and the QA head, at ours' {fl['batches']} padded batches of up to {bs} windows) in "
        f"{fmt(fl['seconds'], 1)} s = {fmt(fl['gflops'], 0)} GFLOP/s (the faster layout each round; "
        + "; ".join(f"{k}: {fmt(spread([t[k] for t in floor_times]), 1)} s" for k in floor_times[0])
        + ")"
    )
    print(f"ours / best peer ({best_peer['system']}), round by round: {fmt(result['ratio_ours_best_peer'])}x")
    print(
        f"floor / ours: {fmt(floor_share['ours'])} (ours-torch: {fmt(floor_share['ours-torch'])}); "
        f"ours at {fmt({k: v * fl['gflop_products_padded'] for k, v in spread([1 / s for s in seconds['ours']]).items()}, 0)} GFLOP/s"
    )
    print(
        f"F1 ours {row_of['ours']['f1']:.2f} vs ours-torch {row_of['ours-torch']['f1']:.2f} vs best peer "
        f"{best_peer['f1']:.2f}; answers identical to the torch path: {same_answers} ({n_diff} differ)"
    )
    print(
        f"timings from a shared machine (load average 1/5/15 min: {load['start']} at the start, {load['end']} at the end, "
        f"{load['cores']} cores): every figure is the median [min-max] of the interleaved rounds"
    )
    failed = []
    if not same_answers:
        failed.append(f"{n_diff} answers of ours differ from the torch path's")
    if logit_diff is not None and not logit_diff < 1e-5:
        failed.append(f"logits differ from torch's by {logit_diff:.2e} (> 1e-5)")
    for f in failed:
        print(f"CHECK FAILED: {f}", file=sys.stderr)
    return 1 if failed else 0


def _version(name: str) -> str | None:
    import importlib.metadata as md

    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


if __name__ == "__main__":
    sys.exit(main())
