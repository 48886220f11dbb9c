#!/usr/bin/env python
"""Benchmark: what the pinned numerics cost, side by side with the same code under `INDICIPR_NUMERICS=native`.

    .venv/bin/python benchmarks/numerics_cost.py              # --help for the options

Each round starts two fresh processes, one with the pinned numerics (AVX2 kernels, `numerics.THREADS` threads, fp32 on
the CPU) and one native (the CPU's own kernels, PyTorch's default threads, and the recipe's bf16 autocast where the CPU
computes bf16 natively), in alternating order, and times in each the offline recipe's fine-tuning steps: MiniLM-L6 with
its embeddings frozen, batch 8, on windows of the sample's training questions (the first `--records` by id, 384 tokens,
stride 128), `--steps` optimiser steps after `--warmup` untimed ones, through the project's own training loop
(`indicipr.systems.training.fit`). It prints each mode's seconds per step (median and min-max of the rounds), its precision and
PyTorch's capability, and the ratio pinned / native taken round by round: the factor by which pinning slows the
encoder stage, which is most of the main job.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from main_job import positive_int  # the script beside this one (its folder is on the path)

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, tempfile, time
from pathlib import Path
from indicipr.data import numerics
numerics.pin()
from indicipr.data.config import settings_for
from indicipr.data.core import OFFICIAL_FILES, project_root, seed_everything
from indicipr.data.qa_files import load_qa_file, training_records
from indicipr.systems.qa_model import encode_windows, load_qa_model, load_tokenizer
from indicipr.systems.training import PackedWindows, TrainConfig, fit
import torch

records, steps, warmup = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
s = settings_for("encoders", "offline")
recs = sorted(load_qa_file(project_root() / "data" / "sample" / OFFICIAL_FILES["train"]).records, key=lambda r: r["id"])
train, _, _ = training_records(recs[:records])
seed_everything(0)
tok, model = load_tokenizer(s.models[0]), load_qa_model(s.models[0])
packed = PackedWindows(encode_windows(train, tok, s.window, labels=True), tok.pad_token_id or 0)
times = {}

class Clock:
    def on_step_end(self, args, state, control, **kw):
        times[state.global_step] = time.perf_counter()

cfg = TrainConfig(max_steps=steps + warmup, batch_size=s.batch_size, learning_rate=s.learning_rate, seed=0,
                  save_checkpoints=False, logging_steps=steps + warmup, freeze_embeddings=s.freeze_embeddings,
                  cpu_bf16=s.cpu_bf16)
with tempfile.TemporaryDirectory() as d:
    precision = fit(model, packed, cfg, Path(d), callbacks=[Clock()], disable_tqdm=True).precision
print("RESULT", json.dumps({"s_per_step": (times[steps + warmup] - times[warmup]) / steps, "precision": precision,
                            "capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
                            "windows": len(packed)}))
"""


def one(mode: str, args) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "INDICIPR_NUMERICS"}
    if mode == "native":
        env["INDICIPR_NUMERICS"] = "native"
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(args.records), str(args.steps), str(args.warmup)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"numerics_cost.py: the {mode} run failed:\n{out.stderr[-2000:]}")
    return json.loads(line.split(" ", 1)[1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rounds", type=positive_int, default=3, help="rounds of the pair (default 3)")
    ap.add_argument("--steps", type=positive_int, default=20, help="timed optimiser steps a run (default 20)")
    ap.add_argument("--warmup", type=positive_int, default=3, help="untimed steps first (default 3)")
    ap.add_argument("--records", type=positive_int, default=60, help="training questions (default 60)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from indicipr.data import numerics

    print(f"# Pinned vs native numerics: {args.steps} steps of the offline recipe, {args.rounds} rounds")
    cpu = numerics.cpu_info()
    print(f"CPU {cpu['model']} ({cpu['cores']} cores; {' '.join(cpu['kernel_flags'])})")
    runs = {"pinned": [], "native": []}
    for r in range(args.rounds):
        for mode in ("pinned", "native") if r % 2 == 0 else ("native", "pinned"):
            runs[mode].append(one(mode, args))
    print("\n| numerics | precision | kernels | threads | s / step (median) | min–max |")
    print("|---|---|---|---|---|---|")
    for mode, rs in runs.items():
        t = [x["s_per_step"] for x in rs]
        print(
            f"| {mode} | {rs[0]['precision']} | {rs[0]['capability']} | {rs[0]['threads']} | "
            f"{statistics.median(t):.3f} | {min(t):.3f}–{max(t):.3f} |"
        )
    ratios = [p["s_per_step"] / n["s_per_step"] for p, n in zip(runs["pinned"], runs["native"])]
    print(
        f"\npinned / native, round by round: median {statistics.median(ratios):.2f} "
        f"(min {min(ratios):.2f}, max {max(ratios):.2f}); {runs['pinned'][0]['windows']} training windows"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
