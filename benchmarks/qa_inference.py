#!/usr/bin/env python
"""Benchmark: the project's batched sliding-window QA inference vs transformers 4.x `pipeline("question-answering")`.

Both answer the same 300+ questions with long contexts with the same saved checkpoint, the same
windows (384 tokens, stride 128) and the same maximum answer length, on the same number of CPU
threads; the peer runs in its own virtual environment because transformers 5 removed the task:

    python -m venv benchmarks/.peer-venv
    benchmarks/.peer-venv/bin/pip install torch==2.13.0 "transformers<5"
    .venv/bin/python benchmarks/qa_inference.py            # --help for the options

Reported: questions/second of each system, the measured ratio to the peer's best throughput, and
EM/F1 of each against the gold answers; no target ratio is assumed. Rows that change the numerics (int8 dynamic quantization)
are reported separately with their own F1 and never count towards the ratio; so are the
torch.compile row (`--compile`, its compile time apart) and ours with the other decoding rule.

Ours compares spans across windows with the library's default rule (the default of
`indicipr.encoders.predict_answers`'s `span_score`, read from its signature, so the benchmark times
what the pipeline runs); `--span-score` picks either rule (`window_probs`: per-window
probabilities, as the transformers pipeline does; `logits`: `run_qa.py`'s start + end logit), and
the rule not chosen is the extra `ours-decoding` row (`--no-other-rule-row` drops it). `--batch-sweep 1 2 4 8 16` first times ours at several batch sizes
(where the CPU default of 4 windows per batch comes from).

Last, the script prints the compute floor: the forward passes' floating-point operations (counted
from the model's shape and the windows' lengths) divided by the best fp32 matrix-multiply rate
this machine sustains. No fp32 implementation that runs the same windows can be faster, so it
bounds the ratio any such system can reach against the peer on this machine.

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
    from indicipr.core import act_for_id
    by_act: dict[str, list[str]] = {}
    for r in records:
        ctxs = by_act.setdefault(act_for_id(r["id"]).key, [])
        if r["context"] not in ctxs: ctxs.append(r["context"])
    out = []
    for r in records:
        ctxs = by_act[act_for_id(r["id"]).key]
        i = ctxs.index(r["context"])
        for variant, step in (("first", 1), ("last", -1)):
            parts, k = [r["context"]], i
            while sum(len(p.split()) for p in parts) < min_words and len(parts) < len(ctxs):
                k = (k + step) % len(ctxs)
                parts = parts + [ctxs[k]] if step == 1 else [ctxs[k]] + parts
            if len(parts) == 1:                                    # an Act with a single context: repeat nothing
                parts = [r["context"]]
            context = " ".join(parts)
            offset = 0 if step == 1 else len(" ".join(parts[:-1])) + (1 if len(parts) > 1 else 0)
            start = r["answers"]["answer_start"][0] + offset
            text = r["answers"]["text"][0]
            assert context[start:start + len(text)] == text, (r["id"], variant)
            out.append({"id": f"{r['id']}#{variant}", "question": r["question"], "context": context,
                        "answers": {"text": [text], "answer_start": [start]}})
    return out


def find_checkpoint(data_source: str) -> Path | None:
    "A fine-tuned MiniLM folder written by notebook 08 (the data source's first, then any)."
    from indicipr import core
    models = core.data_dir() / "models"
    first = models / core.source_tag(data_source) / "minilm-l6_seed0"
    if (first / "qa_config.json").exists(): return first
    found = sorted(models.glob("*/minilm-l6_seed*/qa_config.json"))
    return found[0].parent if found else None


def train_checkpoint(data_source: str, out: Path) -> Path:
    "Fine-tune MiniLM-L6 for one epoch on the training split (when no notebook-08 checkpoint exists)."
    from indicipr import core, encoders
    train = [dict(r) for r in core.load_benchmark(data_source)["train"]]
    tok = encoders.load_tokenizer("minilm-l6")
    mal = encoders.suggest_max_answer_length(train, tok)
    cfg = encoders.TrainConfig(epochs=1, learning_rate=1e-4, batch_size=16, seed=0, save_checkpoints=False)
    return encoders.train_encoder("minilm-l6", train, cfg, out, mal)


def score(records, preds) -> dict:
    from indicipr.metrics import exact_match, token_f1
    n = len(records)
    return {"em": 100 * sum(exact_match(preds[r["id"]], r["answers"]["text"]) for r in records) / n,
            "f1": 100 * sum(token_f1(preds[r["id"]], r["answers"]["text"]) for r in records) / n}


def library_span_score() -> str:
    "The span-scoring rule `indicipr.encoders.predict_answers` uses when none is given (what the pipeline runs)."
    import inspect
    from indicipr import encoders
    return inspect.signature(encoders.predict_answers).parameters["span_score"].default


def run_ours(model_dir: Path, records, batch_size: int | None, max_answer_length: int, quantize: bool = False,
             warmup: int = 4, span_score: str | None = None, compile: bool = False, repeats: int = 1) -> dict:
    "Time the project's inference (`indicipr.encoders.predict_answers`) on `records`: the fastest of `repeats` runs."
    import torch
    from indicipr import encoders
    model, tok, cfg = encoders.load_finetuned(model_dir)
    model.eval()
    if quantize:
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    if compile:
        model = torch.compile(model, dynamic=True)
    kw = dict(max_length=cfg.get("max_length", 384), stride=cfg.get("stride", 128), span_score=span_score or library_span_score(),
              max_answer_length=max_answer_length, batch_size=batch_size, device="cpu")
    t0 = time.perf_counter()
    encoders.predict_answers(model, tok, records[:warmup], **kw)
    warm = time.perf_counter() - t0
    secs = float("inf")
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        answers = encoders.predict_answers(model, tok, records, **kw)
        secs = min(secs, time.perf_counter() - t0)
    return {"seconds": secs, "warmup_seconds": warm, "predictions": {r["id"]: a.text for r, a in zip(records, answers)}}


def window_lengths(model_dir: Path, records) -> np.ndarray:
    "Token lengths of the sliding windows the checkpoint's inference runs over `records` (its max_length and stride)."
    from indicipr import encoders
    cfg = encoders.qa_config(model_dir)
    tok = encoders.load_tokenizer(str(model_dir))
    return encoders.encode_windows(records, tok, cfg.get("max_length", 384), cfg.get("stride", 128)).lengths


def model_config(model_dir: Path) -> dict:
    "The encoder's shape (layers, hidden size, feed-forward size) from its config.json."
    c = json.loads((Path(model_dir) / "config.json").read_text())
    return {"layers": c["num_hidden_layers"], "hidden": c["hidden_size"], "intermediate": c["intermediate_size"]}


def forward_flops(lengths, layers: int, hidden: int, intermediate: int) -> float:
    """Floating-point operations of one encoder forward pass over windows of `lengths` tokens
    (multiply-add = 2): Q/K/V/output projections and the feed-forward block per token, the
    attention products per token pair, and the 2-unit QA head."""
    n = np.asarray(lengths, dtype=np.float64)
    per_token = 2 * (4 * hidden * hidden + 2 * hidden * intermediate)
    attention = 2 * 2 * n * n * hidden
    return float((layers * (n * per_token + attention) + n * 2 * hidden * 2).sum())


def matmul_gflops(threads: int, shapes=((2048, 2048, 2048), (384, 384, 1536), (384, 1536, 384), (1536, 384, 1536)),
                  repeats: int = 20) -> float:
    """The best fp32 matrix-multiply rate this machine sustains with `threads` threads (GFLOP/s): the
    fastest of `repeats` runs of a large square product and of products shaped like a window's layers."""
    import torch
    torch.set_num_threads(threads)
    best = 0.0
    for m, k, n in shapes:
        a, b = torch.randn(m, k), torch.randn(k, n)
        for _ in range(3): a @ b
        for _ in range(repeats):
            t0 = time.perf_counter(); a @ b; dt = time.perf_counter() - t0
            best = max(best, 2 * m * k * n / dt / 1e9)
    return best


def batch_size_sweep(model_dir: Path, records, sizes, max_answer_length: int) -> list[dict]:
    "Milliseconds per window of the project's inference at each batch size (the CPU default comes from this)."
    rows, n_windows = [], len(window_lengths(model_dir, records))
    for bs in sizes:
        r = run_ours(model_dir, records, bs, max_answer_length, warmup=2)
        rows.append({"batch_size": bs, "ms/window": 1000 * r["seconds"] / n_windows, "q/s": len(records) / r["seconds"]})
        print(f"  batch {bs:3d}: {rows[-1]['ms/window']:.1f} ms/window", flush=True)
    return rows


def run_peer(peer_python: Path, model_dir: Path, questions: Path, out: Path, batch_sizes, max_answer_lens, threads,
             repeats: int = 1) -> dict:
    "Run `peer_qa_pipeline.py` in the peer environment; its JSON result."
    if not Path(peer_python).exists():
        raise SystemExit(f"peer environment not found: {peer_python}\ncreate it with:\n  python -m venv benchmarks/.peer-venv\n"
                         '  benchmarks/.peer-venv/bin/pip install torch==2.13.0 "transformers<5"')
    cmd = [str(peer_python), str(Path(__file__).with_name("peer_qa_pipeline.py")), "--model", str(model_dir),
           "--questions", str(questions), "--out", str(out), "--threads", str(threads),
           "--batch-sizes", *map(str, batch_sizes), "--max-answer-len", *map(str, max_answer_lens), "--repeats", str(repeats)]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    subprocess.run(cmd, check=True, env=env | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"})
    return json.loads(out.read_text())


def main(argv=None) -> int:
    from indicipr.encoders import SPAN_SCORES, default_eval_batch_size, qa_config
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None, help="fine-tuned checkpoint (default: notebook 08's minilm-l6_seed0; trained if absent)")
    p.add_argument("--data-source", default="sample")
    p.add_argument("--min-words", type=int, default=350)
    p.add_argument("--limit", type=int, default=None, help="use only the first N questions (smoke runs)")
    p.add_argument("--batch-size", type=int, default=None, help="windows per batch of the project's inference (default: the CPU default, 4)")
    p.add_argument("--span-score", default=library_span_score(), choices=SPAN_SCORES,
                   help="how ours compares spans across windows (default: indicipr.encoders.predict_answers's default, "
                        f"{library_span_score()!r})")
    p.add_argument("--other-rule-row", action=argparse.BooleanOptionalAction, default=True,
                   help="also report ours with the other span-scoring rule (same forward passes, other decoding)")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=False,
                   help="add a torch.compile row (fp32; its compile time is reported apart)")
    p.add_argument("--batch-sweep", type=int, nargs="*", default=None,
                   help="first time ours at these batch sizes on the first 60 questions (e.g. 1 2 4 8 16)")
    p.add_argument("--peer-batch-sizes", type=int, nargs="+", default=[1, 32])
    p.add_argument("--peer-default-len", action=argparse.BooleanOptionalAction, default=True,
                   help="also run the peer with its default max_answer_len=15 (batch 1), for reference")
    p.add_argument("--int8", action=argparse.BooleanOptionalAction, default=True, help="add the int8 dynamic-quantization row")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--repeats", type=int, default=2, help="time every row this many times and keep the fastest (shared machines are noisy)")
    p.add_argument("--peer-python", default=str(ROOT / "benchmarks" / ".peer-venv" / "bin" / "python"))
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "out"))
    args = p.parse_args(argv)

    import torch
    from indicipr import core
    torch.set_num_threads(args.threads)
    out = Path(args.out); out.mkdir(parents=True, exist_ok=True)
    model_dir = Path(args.model) if args.model else (find_checkpoint(args.data_source)
                                                     or train_checkpoint(args.data_source, out / "minilm-l6_bench"))
    mal = int(qa_config(model_dir).get("max_answer_length", 64))
    splits = core.load_benchmark(args.data_source)
    base = [dict(r) for s in ("train", "validation", "test") for r in splits[s]]
    records = long_context_questions(base, args.min_words)[: args.limit]
    qpath = out / "qa_inference_questions.jsonl"
    core.write_jsonl(qpath, records)
    words = sorted(len(r["context"].split()) for r in records)
    print(f"{len(records)} questions, context words median {words[len(words) // 2]}, max {words[-1]}; "
          f"checkpoint {model_dir}; max answer length {mal} tokens; {args.threads} threads", flush=True)

    bs = args.batch_size or default_eval_batch_size("cpu")
    sweep = None
    if args.batch_sweep:
        print(f"batch-size sweep on the first {min(60, len(records))} questions:", flush=True)
        sweep = batch_size_sweep(model_dir, records[:60], args.batch_sweep, mal)

    def add(label, kind, run, **extra):
        rows.append({"system": label, "kind": kind, "max_answer_len": mal, "seconds": run["seconds"],
                     **score(records, run["predictions"]), **extra})
        print(f"{label}: {len(records) / run['seconds']:.2f} q/s", flush=True)

    rows = []
    R = args.repeats
    ours = run_ours(model_dir, records, bs, mal, span_score=args.span_score, repeats=R)
    add(f"indicipr predict_answers (batch {bs}, fp32, {args.span_score})", "ours", ours)
    lengths = window_lengths(model_dir, records)
    print(f"  {len(lengths)} windows, {1000 * ours['seconds'] / len(lengths):.1f} ms/window", flush=True)
    other = next(s for s in SPAN_SCORES if s != args.span_score)
    if args.other_rule_row:
        add(f"indicipr predict_answers (batch {bs}, fp32, {other})", "ours-decoding",
            run_ours(model_dir, records, bs, mal, span_score=other, repeats=R))
    if args.compile:
        c = run_ours(model_dir, records, bs, mal, span_score=args.span_score, compile=True, repeats=R)
        add(f"indicipr predict_answers (batch {bs}, fp32, torch.compile)", "ours-compiled", c,
            compile_seconds=c["warmup_seconds"])
    if args.int8:
        add(f"indicipr predict_answers (batch {bs}, int8 dynamic quantization)", "ours-approx",
            run_ours(model_dir, records, bs, mal, quantize=True, span_score=args.span_score, repeats=R))
    lens = [mal] + ([15] if args.peer_default_len and mal != 15 else [])
    peer = run_peer(Path(args.peer_python), model_dir, qpath, out / "peer_result.json", args.peer_batch_sizes, [mal], args.threads, R)
    runs = peer["runs"]
    if len(lens) > 1:
        runs += run_peer(Path(args.peer_python), model_dir, qpath, out / "peer_default.json", [1], [15], args.threads, R)["runs"]
    for r in runs:
        rows.append({"system": f"transformers {peer['versions']['transformers']} pipeline (batch_size={r['batch_size']})",
                     "kind": "peer" if r["max_answer_len"] == mal else "peer-default", "max_answer_len": r["max_answer_len"],
                     "seconds": r["seconds"], **score(records, r["predictions"])})
    for r in rows: r["q/s"] = len(records) / r["seconds"]
    best_peer = max((r for r in rows if r["kind"] == "peer"), key=lambda r: r["q/s"])
    for r in rows: r["x best peer"] = r["q/s"] / best_peer["q/s"]
    ours_row = rows[0]

    # The compute floor: no fp32 implementation that runs these windows can beat flops / peak matmul rate.
    flops = forward_flops(lengths, **model_config(model_dir))
    peak = matmul_gflops(args.threads)
    floor_s = flops / (peak * 1e9)
    roofline = {"forward_gflop": flops / 1e9, "matmul_peak_gflops": peak, "floor_seconds": floor_s,
                "max_ratio_fp32": best_peer["seconds"] / floor_s,
                "ours_gflops": flops / 1e9 / ours_row["seconds"], "peer_gflops": flops / 1e9 / best_peer["seconds"]}
    result = {"questions": len(records), "windows": len(lengths), "threads": args.threads, "repeats": R, "checkpoint": str(model_dir),
              "max_answer_len": mal, "torch": torch.__version__, "peer_versions": peer["versions"], "rows": rows,
              "batch_sweep": sweep, "roofline": roofline,
              "ratio": ours_row["q/s"] / best_peer["q/s"], "f1_ours": ours_row["f1"], "f1_best_peer": best_peer["f1"]}
    (out / "qa_inference.json").write_text(json.dumps(result, indent=2))
    import pandas as pd
    cols = ["system", "kind", "max_answer_len", "seconds", "q/s", "x best peer", "em", "f1"]
    table = pd.DataFrame(rows)
    if "compile_seconds" in table: cols.append("compile_seconds")
    print(table[cols].round(2).to_markdown(index=False))
    print(f"\nratio ours / best peer: {result['ratio']:.2f}x; F1 ours {ours_row['f1']:.2f} vs best peer {best_peer['f1']:.2f}")
    print(f"compute floor: {flops / 1e9:.0f} GFLOP of forward passes; this machine's best fp32 matmul rate is {peak:.0f} GFLOP/s "
          f"with {args.threads} threads, so no fp32 run of these windows takes under {floor_s:.1f} s: at most "
          f"{roofline['max_ratio_fp32']:.2f}x the best peer. Ours runs at {roofline['ours_gflops']:.0f} GFLOP/s, "
          f"the peer at {roofline['peer_gflops']:.0f}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
