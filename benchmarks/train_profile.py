#!/usr/bin/env python
"""Benchmark: where a phase-2 training step of the offline encoder spends its time, operator group by group, against
the matrix products it must compute (its arithmetic floor).

    .venv/bin/python benchmarks/train_profile.py                 # 40 steps of the offline recipe on one thread
    .venv/bin/python benchmarks/train_profile.py --steps 80 --threads 1 --top 25
    .venv/bin/python benchmarks/train_profile.py --fast-paths --rounds 3  # the step with and without `fast_paths`
    .venv/bin/python benchmarks/train_profile.py --at-once 3 --rounds 2   # a step alone and beside two others

The step is the offline profile's (notebook 08: MiniLM-L6, its batch size, learning rate, frozen embeddings, the pinned
numerics) on the windows a phase-2 seed trains on (the sample's training split and seed 0's rehearsal of phase 1's
questions), trained by the project's own loop (`training.fit`, the same call the encoder stage makes), with one thread
as each phase-2 worker has. torch's profiler records every operator; each operator's own CPU time (its children's
excluded) is put in one group:

| group | operators |
|---|---|
| matmul | the linear layers' products and the attention products, forward and backward (`addmm`, `mm`, `bmm`, ...) |
| attention (rest) | softmax and its backward, the attention mask, scaled-dot-product attention's own work |
| elementwise | GELU, layer norm, dropout, residual adds, scaling, copies and their backward |
| optimiser | AdamW's update and `zero_grad` (`_foreach_*`, `lerp`, `addcdiv`, ...; in `fast_paths`, `indicipr::adamw_step`) and gradient clipping |
| loss | the start/end cross-entropy and its backward |
| embedding | the (frozen) embedding look-up |
| batch assembly | slicing the packed windows, the mask, index and copy work of the loop |
| Python and the rest | the step's wall time that no operator accounts for: the interpreter, autograd's engine, the callbacks |

The floor is the matrix products of exactly the steps timed (as `benchmarks/main_job.py` counts them), each kind at
this machine's best throughput for its shapes on the same thread count: the linear layers' products at those steps'
mean batch of tokens, the attention's batched products of each of their windows at its own length
(`main_job.floor_seconds`). The length-grouped batches of a few steps may be shorter or longer than the data's mean, so
each run's windows are recorded as it trains them (`step_windows`). So `step / floor` is what a faster loop could win at
most; the matmul group's own time against the floor says how close the products themselves run to the BLAS.

Last, one layer's attention (forward and backward, `scaled_dot_product_attention` with the padding mask, at the step's
batch and mean window) is timed with the model's attention dropout and without it: with dropout, PyTorch's CPU attention
takes its unfused path (the scores, a random mask and the softmax materialised), without it the fused kernel. The
difference, over the layers, is what the recipe's attention dropout costs a step.

The profile is of the step as `fit` runs it by default, in `fast_paths` (notebook 06b: large tensors kept on glibc's
heap, dropout's mask compiled). `--fast-paths` instead times the same steps both ways, side by side: in each round, one
fresh process trains the steps as torch runs them (`cpu_fast_paths=False`) and one in `fast_paths`, in alternating
order; it prints each run's milliseconds a step (the first two steps left out), its multiple of the floor, its peak
memory and the SHA-256 of its final weights, which must be the same for the two.

`--at-once K` times what sharing the machine costs a step: in each round, one fresh process trains the steps in
`fast_paths` alone, then K fresh processes train the same steps at once, as the main job's phase-2 seeds do (three on
two cores); it prints each run's CPU milliseconds a step (the first two steps left out: a process's own CPU, which
time slicing does not lengthen) and its multiple of the floor. The floor's products lose nothing when two run at once,
so what the step gains beside its neighbours is the rest of its work, which shares the caches and the memory.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from indicipr.data import numerics  # noqa: E402

GROUPS = {  # first match wins, on the operator's name (aten::, autograd's backward nodes)
    "matmul": ("addmm", "aten::mm", "bmm", "matmul", "linear", "MmBackward", "AddmmBackward", "BmmBackward"),
    "loss": ("cross_entropy", "log_softmax", "nll_loss", "LogSoftmax", "NllLoss"),
    "attention (rest)": ("softmax", "Softmax", "scaled_dot_product", "baddbmm", "masked_fill"),
    "optimiser": (
        "_foreach",
        "adam",
        "Adam",
        "lerp",
        "addcdiv",
        "addcmul",
        "sqrt",
        "zero_",
        "clip_grad",
        "vector_norm",
    ),
    "embedding": ("embedding", "Embedding"),
    "elementwise": (
        "gelu",
        "Gelu",
        "layer_norm",
        "LayerNorm",
        "dropout",
        "Dropout",
        "bernoulli",
        "aten::add",
        "aten::mul",
        "aten::div",
        "aten::sub",
        "AddBackward",
        "MulBackward",
        "DivBackward",
        "tanh",
        "erf",
        "aten::sum",
        "SumBackward",
    ),
    "batch assembly": (
        "index",
        "slice",
        "select",
        "aten::lt",
        "unsqueeze",
        "copy_",
        "aten::to",
        "_to_copy",
        "cat",
        "arange",
        "expand",
        "view",
        "reshape",
        "permute",
        "transpose",
        "contiguous",
        "clone",
        "empty",
        "zeros",
        "fill_",
    ),
}


def group_of(name: str) -> str:
    "The group of an operator (see the module's table); 'other operators' when no pattern matches."
    for group, patterns in GROUPS.items():
        if any(p in name for p in patterns):
            return group
    return "other operators"


def phase2_records(settings, seed: int = 0) -> list[dict]:
    """What a phase-2 seed of the main job trains on (notebook 08, `encoders.run_encoders`): the stage's training split
    and, when the recipe rehearses, the seed's draw of phase 1's synthetic questions."""
    from indicipr.data.benchmark import load_benchmark
    from indicipr.systems.encoders import intermediate_records, rehearsal_records, stage_records

    ds = load_benchmark("sample")
    train, _ = stage_records(ds, settings.split)
    if not settings.intermediate:
        return train
    held_out = [dict(r) for s in ("validation", "test") for r in ds[s]]
    synthetic = intermediate_records(train, held_out, settings.intermediate)
    return [*train, *rehearsal_records(synthetic, settings.rehearsal or 0.0, seed)]


def step_setup():
    "The offline recipe's settings, its model, and the packed windows a phase-2 seed trains on (`phase2_records`)."
    from indicipr.data.config import settings_for
    from indicipr.data.core import seed_everything
    from indicipr.systems.qa_model import encode_windows, load_qa_model, load_tokenizer
    from indicipr.systems.training import PackedWindows

    settings = settings_for("encoders", "offline")
    model_name = settings.models[0]
    seed_everything(0)
    records = phase2_records(settings)
    tok, model = load_tokenizer(model_name), load_qa_model(model_name)
    windows = encode_windows(records, tok, settings.window, labels=True)
    packed = PackedWindows(windows, tok.pad_token_id or 0)
    return settings, model, packed


def step_windows(model) -> list[list[int]]:
    """Record, for every forward pass of `model` from now on (one a training step), the lengths of its windows: the
    attention mask's kept positions, row by row. Returns the list the steps are appended to."""
    import torch

    steps: list[list[int]] = []

    def hook(module, args, kwargs):
        mask = kwargs["attention_mask"]
        kept = mask if mask.dtype == torch.bool else (mask == 0) if mask.is_floating_point() else mask.bool()
        steps.append([int(n) for n in kept.reshape(kept.shape[0], -1).sum(1)])

    model.register_forward_pre_hook(hook, with_kwargs=True)
    return steps


def steps_floor(model, steps: list[list[int]], threads: int, repeats: int) -> float:
    """Seconds a step of the matrix products of exactly the windows `steps` trained on (`step_windows`), on `threads`
    threads, each kind at this machine's best throughput for its shapes (`main_job.floor_seconds`): the linear layers'
    at these steps' mean batch of tokens, each window's attention at its own length. The floor of the steps timed, so a
    run of a few steps, whose length-grouped batches may be shorter or longer than the mean, is set against its own."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from main_job import attention_grid, floor_seconds, from_grid, matmul_throughput

    cfg = model.config
    lengths = collections.Counter(n for step in steps for n in step)  # each window of each step at its own length
    tokens = sum(n * w for n, w in lengths.items())
    rows = max(round(tokens / len(steps)), 1)
    shape = {"layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size, "intermediate": cfg.intermediate_size}
    shape["heads"] = cfg.num_attention_heads
    linear_tp = matmul_throughput(rows, cfg.hidden_size, cfg.intermediate_size, threads, repeats)
    grid = attention_grid(shape, threads, repeats)
    mean_len = tokens / sum(lengths.values())
    return floor_seconds(tokens, mean_len, shape, linear_tp, functools.partial(from_grid, grid), lengths) / len(steps)


def profile_steps(settings, model, packed, steps: int, warmup: int):
    """Train `warmup` steps, then `steps` more under torch's profiler; (profiler, wall seconds of the profiled steps, the
    windows' lengths of each profiled step)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    from transformers import TrainerCallback

    from indicipr.systems.training import fit, fixed_steps_config

    class Window(TrainerCallback):
        "Starts the profiler after the warm-up steps and stops it after the profiled ones."

        def __init__(self):
            self.prof, self.t0, self.wall = profile(activities=[ProfilerActivity.CPU]), None, None

        def on_step_end(self, args, state, control, **kw):
            if state.global_step == warmup:
                self.prof.__enter__()
                self.t0 = time.perf_counter()
            elif state.global_step == warmup + steps:
                self.wall = time.perf_counter() - self.t0
                self.prof.__exit__(None, None, None)

    cfg = fixed_steps_config(settings, warmup + steps)
    window, trained = Window(), step_windows(model)
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(0)
        fit(model, packed, cfg, Path(tmp) / "train", callbacks=[window], disable_tqdm=True)
    return window.prof, window.wall, trained[warmup : warmup + steps]


def optimiser_clock():
    """From now on in this process, the CPU seconds the training loop spends in its optimiser step: `adamw_step` (in
    `fast_paths`) and torch's `clip_grad_norm_` and `AdamW.step` (as torch runs it; `adamw_step` then returns at once).
    Returns a function that reads the running total. A benchmark process's own instrument: it wraps those functions."""
    import torch

    from indicipr.systems import training

    spent = [0.0]

    def timed(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            t0 = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[0] += time.process_time() - t0

        return wrapper

    training.adamw_step = timed(training.adamw_step)
    torch.nn.utils.clip_grad_norm_ = timed(torch.nn.utils.clip_grad_norm_)
    torch.optim.AdamW.step = timed(torch.optim.AdamW.step)
    return lambda: spent[0]


def timed_run(settings, model, packed, steps: int, fast: bool) -> dict:
    """Train `steps` steps of the offline recipe (fresh weights, seed 0), with or without `fast_paths`: milliseconds a
    step, CPU milliseconds a step and of them the optimiser's (`optimiser_clock`; the first two steps left out), the
    lengths of those steps' windows, the final weights' SHA-256 and the process's peak memory."""
    import torch
    from transformers import TrainerCallback

    from indicipr.run.doctor import digest_arrays
    from indicipr.systems.training import fit, fixed_steps_config

    ends, cpu, opt = [], [], []
    optimiser = optimiser_clock()

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            ends.append(time.perf_counter())
            cpu.append(time.process_time())
            opt.append(optimiser())

    cfg = fixed_steps_config(settings, steps, cpu_fast_paths=fast)
    trained = step_windows(model)
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(0)
        fit(model, packed, cfg, Path(tmp) / "train", callbacks=[Clock()], disable_tqdm=True)
    gaps = [b - a for a, b in zip(ends, ends[1:])][1:]
    return {
        "ms": 1e3 * sum(gaps) / len(gaps),
        "cpu_ms": 1e3 * (cpu[-1] - cpu[1]) / len(gaps),
        "optimiser_ms": 1e3 * (opt[-1] - opt[1]) / len(gaps),
        "windows": trained[2:],  # the timed steps'
        "sha256": digest_arrays(t for _, t in sorted(model.state_dict().items())),
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _side_by_side_floor_ms(results: dict[str, list], threads: int, repeats: int) -> float:
    """The floor in milliseconds a step of the timed steps of the side-by-side benchmarks' runs, which trained the same
    windows (fresh processes, the same seed; a run that did not is refused)."""
    runs = [res for v in results.values() for res in v]
    if any(res["windows"] != runs[0]["windows"] for res in runs):
        raise SystemExit("train_profile.py: the runs trained different windows, so their steps have no common floor")
    from indicipr.data.config import settings_for
    from indicipr.systems.qa_model import load_qa_model

    model = load_qa_model(settings_for("encoders", "offline").models[0])  # its shapes: no windows to encode
    return 1e3 * steps_floor(model, runs[0]["windows"], threads, repeats)


def _start_run(kind: str, steps: int, threads: int) -> subprocess.Popen:
    "A fresh process training `steps` steps (`--one-run kind`); `_run_result` reads what it timed."
    cmd = [sys.executable, __file__, "--one-run", kind, "--steps", str(steps), "--threads", str(threads)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _run_result(proc: subprocess.Popen) -> dict | None:
    "What a run of `_start_run` timed (`timed_run`'s record), or None, the end of its errors written out, if it failed."
    out, err = proc.communicate()
    if proc.returncode:
        sys.stderr.write(err[-2000:])
        return None
    return json.loads(out.strip().splitlines()[-1])


def compare_fast_paths(args, threads: int) -> int:
    """`--fast-paths`: rounds of a run as torch runs it and one in `fast_paths`, each in a fresh process; then the floor
    of the steps they timed, and a table."""
    results: dict[str, list] = {"torch": [], "fast": []}
    order = []
    for r in range(args.rounds):
        for kind in ("torch", "fast") if r % 2 == 0 else ("fast", "torch"):
            print(f"round {r + 1}: {kind} ...", file=sys.stderr, flush=True)
            proc = _start_run(kind, args.steps, threads)
            res = _run_result(proc)
            if res is None:
                return proc.returncode
            results[kind].append(res)
            order.append((r, kind, res))
    floor_ms = _side_by_side_floor_ms(results, threads, args.repeats)
    print(f"# A phase-2 step of the offline recipe, as torch runs it and in `fast_paths`: {args.steps} steps a run")
    print(numerics.status_line(numerics.numerics_status()))
    print(
        f"{threads} thread(s); the floor (the timed steps' matrix products at this machine's best throughput): "
        f"{floor_ms:.0f} ms a step\n"
    )
    print(
        "| round | run | ms a step | × floor | of it the optimiser (CPU ms) | peak memory | final weights (SHA-256) |"
    )
    print("|---|---|---|---|---|---|---|")
    for r, kind, res in order:
        label = "as torch runs it" if kind == "torch" else "`fast_paths`"
        print(
            f"| {r + 1} | {label} | {res['ms']:.0f} | {times_floor(res['ms'], floor_ms)} | {res['optimiser_ms']:.1f} | "
            f"{res['peak_mb']:.0f} MB | "
            f"`{res['sha256'][:16]}…` |"
        )
    mean, same = _summary(results, "ms")
    opt, _ = _summary(results, "optimiser_ms")
    print(
        f"\nmean: {mean['torch']:.0f} ms as torch runs it ({times_floor(mean['torch'], floor_ms)} × the floor), "
        f"{mean['fast']:.0f} ms in `fast_paths` ({times_floor(mean['fast'], floor_ms)} ×): "
        f"{100 * (1 - mean['fast'] / mean['torch']):.1f} % less; the optimiser {opt['torch']:.1f} and "
        f"{opt['fast']:.1f} ms of CPU a step; the final weights {'the same in every run' if same else 'DIFFER'}"
    )
    return 0 if same else 1


def times_floor(ms: float, floor_ms: float) -> str:
    """`ms / floor_ms` (any one unit of time), or why there is none: the floor is of the very steps timed, so a time
    under it says that the floor was measured at a busier moment than the steps ran, not that they beat it."""
    ratio = ms / floor_ms
    return f"{ratio:.2f}" if ratio >= 1 else f"— ({ratio:.2f}: below the floor, which was measured on a busier machine)"


def _summary(results: dict[str, list], key: str) -> tuple[dict[str, float], bool]:
    "Each kind's mean `key` over its runs, and whether every run ended with the same weights."
    mean = {k: sum(x[key] for x in v) / len(v) for k, v in results.items()}
    return mean, len({x["sha256"] for v in results.values() for x in v}) == 1


def compare_at_once(args, threads: int) -> int:
    """`--at-once K`: rounds of a run in `fast_paths` alone, then K at once, each a fresh process; then the floor of the
    steps they timed, and a table of CPU a step."""
    results: dict[str, list] = {"alone": [], "at once": []}
    order = []
    for r in range(args.rounds):
        for label, k in (("alone", 1), ("at once", args.at_once)):
            print(f"round {r + 1}: {label} ...", file=sys.stderr, flush=True)
            procs = [_start_run("fast", args.steps, threads) for _ in range(k)]
            for i, proc in enumerate(procs):
                res = _run_result(proc)
                if res is None:
                    return proc.returncode
                results[label].append(res)
                order.append((r, label if k == 1 else f"{label}, {i + 1} of {k}", res))
    floor_ms = _side_by_side_floor_ms(results, threads, args.repeats)
    print(
        f"# A phase-2 step of the offline recipe alone and beside {args.at_once - 1} others: {args.steps} steps a run"
    )
    print(numerics.status_line(numerics.numerics_status()))
    print(f"{threads} thread(s) a run; the floor of the timed steps: {floor_ms:.0f} ms a step\n")
    print("| round | run | CPU ms a step | × floor | final weights (SHA-256) |")
    print("|---|---|---|---|---|")
    for r, name, res in order:
        print(
            f"| {r + 1} | {name} | {res['cpu_ms']:.0f} | {times_floor(res['cpu_ms'], floor_ms)} | "
            f"`{res['sha256'][:16]}…` |"
        )
    mean, same = _summary(results, "cpu_ms")
    print(
        f"\nmean CPU a step: {mean['alone']:.0f} ms alone ({times_floor(mean['alone'], floor_ms)} × the floor), "
        f"{mean['at once']:.0f} ms {args.at_once} at once ({times_floor(mean['at once'], floor_ms)} ×): "
        f"{100 * (mean['at once'] / mean['alone'] - 1):+.1f} %; the final weights "
        f"{'the same in every run' if same else 'DIFFER'}"
    )
    return 0 if same else 1


def attention_ms(
    batch: int,
    heads: int,
    length: int,
    head_dim: int,
    dropout: float,
    threads: int,
    repeats: int,
    project: bool = False,
) -> float:
    """Milliseconds of one layer's attention, forward and backward, at the step's shape through PyTorch's
    `scaled_dot_product_attention` with a padding mask (`project`: through `training.sdpa_dropout_attention` in
    `fast_paths`, as the project's training runs call it): the best of `repeats` rounds."""
    import torch

    from indicipr.systems.fast_paths import fast_paths
    from indicipr.systems.training import sdpa_dropout_attention

    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(batch, heads, length, head_dim, generator=gen, requires_grad=True) for _ in range(3))
    lens = torch.randint(length // 2, length + 1, (batch,), generator=gen)
    keep = (torch.arange(length)[None] < lens[:, None])[:, None, None, :]
    layer = torch.nn.Module().train()  # what the attention function reads of its module: training, no key groups
    best = float("inf")
    for _ in range(repeats + 1):  # the first round warms up
        t0 = time.perf_counter()
        if project:
            with fast_paths(layer):  # as `fit` runs it: the compiled mask, the reused heap
                out = sdpa_dropout_attention(layer, q, k, v, keep, dropout=dropout)[0]
        else:
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=dropout)
        out.sum().backward()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--steps", type=int, default=40, help="profiled optimiser steps (default 40)")
    ap.add_argument("--warmup", type=int, default=5, help="steps trained before the profiler starts (default 5)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: a phase-2 worker's)")
    ap.add_argument("--top", type=int, default=15, help="operators listed by own CPU time (default 15)")
    ap.add_argument("--repeats", type=int, default=5, help="rounds of the matmul floor measurement (default 5)")
    ap.add_argument(
        "--fast-paths", action="store_true", help="time the steps as torch runs them and in `fast_paths`, side by side"
    )
    ap.add_argument(
        "--at-once",
        type=int,
        metavar="K",
        help="time the steps in `fast_paths` alone and K runs at once, side by side (the seeds: 3)",
    )
    ap.add_argument("--rounds", type=int, default=3, help="--fast-paths, --at-once: rounds (default 3)")
    ap.add_argument("--one-run", choices=("torch", "fast"), help=argparse.SUPPRESS)  # one run of --fast-paths
    args = ap.parse_args(argv)
    for name in ("steps", "top", "repeats", "rounds"):
        if getattr(args, name) < 1:
            ap.exit(2, f"train_profile.py: --{name} must be at least 1, got {getattr(args, name)}\n")
    if args.at_once is not None and args.at_once < 2:
        ap.exit(2, f"train_profile.py: --at-once must be at least 2 (runs beside each other), got {args.at_once}\n")
    if args.fast_paths and args.at_once is not None:
        ap.exit(2, "train_profile.py: --fast-paths and --at-once are two benchmarks: give one\n")
    if (args.fast_paths or args.at_once or args.one_run) and args.steps < 3:
        flag = "--at-once" if args.at_once else "--fast-paths"
        ap.exit(
            2,
            f"train_profile.py: --steps must be at least 3 with {flag} (the first two are left out), got {args.steps}\n",
        )
    if args.warmup < 1:
        ap.exit(2, f"train_profile.py: --warmup must be at least 1, got {args.warmup}\n")
    numerics.pin()
    import torch

    threads = args.threads or numerics.WORKER_THREADS
    torch.set_num_threads(threads)
    if args.fast_paths:
        return compare_fast_paths(args, threads)
    if args.at_once:
        return compare_at_once(args, threads)
    settings, model, packed = step_setup()
    if args.one_run:
        print(json.dumps(timed_run(settings, model, packed, args.steps, args.one_run == "fast")))
        return 0
    prof, wall, trained = profile_steps(settings, model, packed, args.steps, args.warmup)
    if wall is None:
        ap.exit(2, f"train_profile.py: the run ended before {args.warmup + args.steps} steps (too few windows?)\n")

    by_group: dict[str, float] = {}
    ops = []
    for evt in prof.key_averages():
        own = evt.self_cpu_time_total / 1e6  # seconds
        if own <= 0:
            continue
        ops.append((own, evt.key, evt.count))
        g = group_of(evt.key)
        by_group[g] = by_group.get(g, 0.0) + own
    accounted = sum(by_group.values())
    by_group["Python and the rest"] = max(wall - accounted, 0.0)

    cfg = model.config
    floor = args.steps * steps_floor(model, trained, threads, args.repeats)

    print(f"# A phase-2 step of the offline recipe, {args.steps} steps profiled on {threads} thread(s)")
    print(numerics.status_line(numerics.numerics_status()))
    print(
        f"batch {settings.batch_size} windows, mean window {packed.lengths.mean():.0f} tokens (the profiled steps': "
        f"{sum(map(sum, trained)) / sum(map(len, trained)):.0f}); "
        f"{wall / args.steps * 1e3:.0f} ms a step, floor {floor / args.steps * 1e3:.0f} ms a step: "
        f"{times_floor(wall, floor)} times the floor\n"
    )
    print("| operator group | seconds | share of the step |")
    print("|---|---|---|")
    for g, s in sorted(by_group.items(), key=lambda kv: -kv[1]):
        print(f"| {g} | {s:.2f} | {100 * s / wall:.1f} % |")
    print(f"| **step (wall)** | {wall:.2f} | 100 % |")
    print(f"\nmatmul group against the floor: {times_floor(by_group.get('matmul', 0.0), floor)}")
    layers, heads = cfg.num_hidden_layers, cfg.num_attention_heads
    p = cfg.attention_probs_dropout_prob
    shape = (settings.batch_size, heads, int(round(packed.lengths.mean())), cfg.hidden_size // heads)
    with_dropout = attention_ms(*shape, p, threads, args.repeats)
    without = attention_ms(*shape, 0.0, threads, args.repeats)
    ours = attention_ms(*shape, p, threads, args.repeats, project=True)
    step_ms = wall / args.steps * 1e3
    print(
        f"\nattention of one layer, forward and backward, at the mean window ({shape[2]} tokens): {with_dropout:.1f} ms "
        f"in PyTorch's SDPA with the recipe's attention dropout ({p:g}), {ours:.1f} ms through the project's "
        f"`sdpa_dropout_attention` (the same bits; what the step above ran), {without:.1f} ms without dropout; over the "
        f"{layers} layers the dropout takes {layers * (ours - without):.0f} ms of a {step_ms:.0f} ms step "
        f"({100 * layers * (ours - without) / step_ms:.0f} %)"
    )
    print(f"\n## The {args.top} operators with the most own CPU time\n")
    print("| operator | group | calls | seconds | share |")
    print("|---|---|---|---|---|")
    for own, key, count in sorted(ops, reverse=True)[: args.top]:
        print(f"| `{key}` | {group_of(key)} | {count} | {own:.2f} | {100 * own / wall:.1f} % |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
