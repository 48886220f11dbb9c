#!/usr/bin/env python
"""Benchmark: the project's encoder training path vs a plain Hugging Face Trainer (GPU).

Same BERT-base-sized QA model (random init: only speed is measured), same synthetic training
windows (3,710 × 2 epochs by default, the size of the official training split):

* **plain**: `Trainer` with every window padded to 384 tokens (`default_data_collator`),
  bf16, the default optimiser, batch 64 — what a straightforward script does;
* **project**: `indicipr.encoders.fit` — pre-tokenised tensors sliced per batch (no Python
  collation), length-grouped batches padded to a multiple of 64 (a few static shapes),
  bf16, fused AdamW, batch 128.

Prints examples/second of each and the ratio, and writes `benchmarks/out/gpu_finetune.json`.
Window lengths are synthetic: question ≈ 16 tokens, context tokens log-normal around the card's
average context (171 words ≈ 230 tokens), capped at 384 like the sliding windows.

`--tiny` runs the same code on a tiny model and a few windows on the CPU in seconds (a smoke
test of the script, e.g. in CI); its figures mean nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def synthetic_windows(n: int, max_length: int, vocab: int, seed: int = 0, q_tokens: int = 16, ctx_median: float = 230.0):
    "Labelled `Windows` with realistic lengths and random token ids."
    import numpy as np
    from indicipr.encoders import Windows
    rng = np.random.default_rng(seed)
    ctx = np.clip(rng.lognormal(np.log(ctx_median), 0.5, n).astype(int), 8, None)
    lengths = np.minimum(3 + q_tokens + ctx, max_length)
    ids, tts, offs, starts, ends = [], [], [], [], []
    for L in lengths:
        x = rng.integers(1000, vocab, L); x[0], x[q_tokens + 1], x[-1] = 101, 102, 102
        tt = np.zeros(L, dtype=np.int64); tt[q_tokens + 2:] = 1
        ids.append(x.astype(np.int64)); tts.append(tt)
        o = np.full((L, 2), -1, dtype=np.int64); o[q_tokens + 2:L - 1] = 0
        offs.append(o)
        s = int(rng.integers(q_tokens + 2, L - 1)); starts.append(s); ends.append(int(min(L - 2, s + rng.integers(0, 48))))
    return Windows(ids, tts, offs, np.arange(n), np.array(starts), np.array(ends))


def bert_qa_model(tiny: bool, seed: int = 0):
    "A randomly initialised BERT-base-sized (or tiny) `BertForQuestionAnswering`."
    import torch
    from transformers import BertConfig, BertForQuestionAnswering
    torch.manual_seed(seed)
    cfg = (BertConfig(vocab_size=2000, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                      max_position_embeddings=128) if tiny else BertConfig())      # BertConfig() = bert-base
    return BertForQuestionAnswering(cfg)


class PaddedDataset:
    "Every window padded to `max_length` (what a plain script feeds the Trainer)."
    def __init__(self, windows, max_length: int, pad_id: int = 0):
        import torch
        self.items = []
        for x, tt, s, e in zip(windows.input_ids, windows.token_type_ids, windows.start_positions, windows.end_positions):
            n = len(x)
            pad = max_length - n
            self.items.append({"input_ids": torch.tensor(list(x) + [pad_id] * pad),
                               "token_type_ids": torch.tensor(list(tt) + [0] * pad),
                               "attention_mask": torch.tensor([1] * n + [0] * pad),
                               "start_positions": torch.tensor(int(s)), "end_positions": torch.tensor(int(e))})

    def __len__(self): return len(self.items)
    def __getitem__(self, i): return self.items[i]


def common_args(tiny: bool) -> dict:
    import torch
    cuda = torch.cuda.is_available()
    return dict(report_to="none", save_strategy="no", logging_steps=50, disable_tqdm=True, seed=0,
                bf16=cuda and torch.cuda.is_bf16_supported(), use_cpu=not cuda, learning_rate=3e-5)


def run_plain(windows, max_length: int, epochs: float, batch: int, tiny: bool, out_dir: str) -> dict:
    "Plain `Trainer`, windows padded to `max_length`."
    from transformers import Trainer, TrainingArguments, default_data_collator
    model = bert_qa_model(tiny)
    args = TrainingArguments(output_dir=out_dir, per_device_train_batch_size=batch, num_train_epochs=epochs,
                             **common_args(tiny))
    trainer = Trainer(model=model, args=args, train_dataset=PaddedDataset(windows, max_length),
                      data_collator=default_data_collator)
    t0 = time.perf_counter()
    m = trainer.train().metrics
    wall = time.perf_counter() - t0
    return {"batch": batch, "optim": str(args.optim), "padding": f"all to {max_length}", "train_runtime": m["train_runtime"],
            "wall": wall, "examples_per_s": len(windows) * epochs / m["train_runtime"], "loss": m.get("train_loss")}


def run_project(windows, epochs: float, batch: int, tiny: bool, out_dir: str, pad_multiple: int) -> dict:
    "The project's path: `indicipr.encoders.fit` on packed, length-grouped windows."
    from indicipr.encoders import PackedWindows, TrainConfig, fit, resolved_pad_multiple
    model = bert_qa_model(tiny)
    cfg = TrainConfig(epochs=epochs, batch_size=batch, learning_rate=3e-5, pad_multiple=pad_multiple, seed=0,
                      save_checkpoints=False, logging_steps=50)
    packed = PackedWindows(windows, 0, resolved_pad_multiple(cfg))
    overrides = {k: v for k, v in common_args(tiny).items() if k in ("use_cpu", "disable_tqdm")}
    t0 = time.perf_counter()
    trainer = fit(model, packed, cfg, out_dir, **overrides)
    wall = time.perf_counter() - t0
    m = next(h for h in reversed(trainer.state.log_history) if "train_runtime" in h)
    return {"batch": batch, "optim": str(trainer.args.optim), "padding": f"length-grouped, multiple of {packed.pad_multiple}",
            "train_runtime": m["train_runtime"], "wall": wall,
            "examples_per_s": len(windows) * epochs / m["train_runtime"], "loss": m.get("train_loss")}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tiny", action="store_true", help="tiny model, few windows, CPU: a smoke test of the script")
    p.add_argument("--examples", type=int, default=None, help="training windows (default 3710; --tiny: 64)")
    p.add_argument("--epochs", type=float, default=None, help="default 2 (--tiny: 1)")
    p.add_argument("--plain-batch", type=int, default=None, help="default 64 (--tiny: 8)")
    p.add_argument("--project-batch", type=int, default=None, help="default 128 (--tiny: 16)")
    p.add_argument("--pad-multiple", type=int, default=None, help="default 64 on GPU, 8 on CPU")
    p.add_argument("--skip-plain", action="store_true")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "out" / "gpu_finetune.json"))
    args = p.parse_args(argv)
    import torch
    tiny = args.tiny
    if tiny: os.environ["CUDA_VISIBLE_DEVICES"] = ""
    elif not torch.cuda.is_available():
        print("warning: no GPU here; the figures below are CPU figures (use --tiny for a smoke test)", file=sys.stderr)
    n = args.examples or (64 if tiny else 3710)
    epochs = args.epochs or (1.0 if tiny else 2.0)
    max_length = 64 if tiny else 384
    windows = synthetic_windows(n, max_length, 2000 if tiny else 30522, q_tokens=6 if tiny else 16,
                                ctx_median=30.0 if tiny else 230.0)
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() and not tiny else "cpu"
    print(f"{n} windows x {epochs:g} epochs, mean length {windows.lengths.mean():.0f} tokens, device {device}", flush=True)
    res = {"device": device, "windows": n, "epochs": epochs, "mean_length": float(windows.lengths.mean()),
           "model": "tiny BERT" if tiny else "BERT-base (random init)", "torch": torch.__version__}
    import transformers
    res["transformers"] = transformers.__version__
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_plain:
            res["plain"] = run_plain(windows, max_length, epochs, args.plain_batch or (8 if tiny else 64), tiny, f"{tmp}/plain")
            print(f"plain Trainer: {res['plain']['examples_per_s']:.1f} examples/s", flush=True)
        res["project"] = run_project(windows, epochs, args.project_batch or (16 if tiny else 128), tiny, f"{tmp}/project",
                                     args.pad_multiple)
        print(f"project path: {res['project']['examples_per_s']:.1f} examples/s", flush=True)
    if "plain" in res:
        res["ratio"] = res["project"]["examples_per_s"] / res["plain"]["examples_per_s"]
        print(f"ratio project / plain: {res['ratio']:.2f}x")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
