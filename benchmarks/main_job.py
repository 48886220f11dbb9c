#!/usr/bin/env python
"""Benchmark: where the main job's time goes, stage by stage, against the arithmetic floor of its fine-tuning.

    .venv/bin/python benchmarks/main_job.py --run            # one fresh main job in a temporary clone, then the table
    .venv/bin/python benchmarks/main_job.py --run --at-once 1   # the same with one notebook at a time (the peer)
    .venv/bin/python benchmarks/main_job.py --from-run runs/20261202-102524   # the table of a finished main job

For every stage notebook of the run: its wall time and CPU time (the kernel's, with the training workers and the
llama.cpp server it waited for: `run.json`'s `cpu_seconds`), and the share of the machine's cores it kept busy; then
the job's own time (stages that read nothing of each other run at once, so their times add up to more). For
the encoder stage (notebook 08), phase 1 and every phase-2 seed on a line of their own, from each checkpoint's
`qa_config.json`: windows, tokens stepped through, tokens per second, and beside them the **floor**: the matrix
products of the training steps (forward and backward: three times the forward's `2·m·k·n` of every linear layer and
of the two attention products, `2·L·L·width` each for a window of `L` tokens), each kind at this machine's own
throughput at its shapes, measured here with the thread count the run used (one thread per training worker, the
kernel's count for phase 1): the linear layers' products at the step's batch of tokens, the attention's six batched
products (scores and weighted values, and the four of their backward) for a batch of windows at each length of a grid,
read between its points. The attention's products are narrow (a head's width) and run at about half the linear layers'
throughput, so each kind is timed at its own. They grow with the square of a window's length, so each window of the
training data (the checkpoint's `train_window_lengths`) is counted at its own length: at the mean length, the sample's
windows (90 to 384 tokens) would be counted about 15 % short. A checkpoint without the lengths is counted at the
mean.
No fp32 implementation with this BLAS on this CPU trains those tokens faster, so `wall / floor` is the factor a faster
loop could win at most. The seeds ran at once, so their group line divides the seeds' floor by the
cores they shared, and each seed's own line sets its CPU time against its floor (`CPU / floor`): three one-thread
seeds on two cores each take longer than their CPU time. Seed 0 also scores the learning curve in a thread of its own
while it trains; that scoring is evaluation, not training, so its CPU time (`of it scoring`, from the run's
`scoring_cpu_seconds`) is left out of the seed's `CPU / floor`.

The LLM stages get no floor here: llama.cpp's quantised kernels are not torch's matmul, and the run does not record
their token counts. `benchmarks/llm_floor.py` sets notebook 09's requests against the llama.cpp build evaluating
exactly their tokens.

`--run` clones the checkout's HEAD into a temporary folder (its `data/sample/` included; `../shared` named by
`INDICIPR_SHARED`) and runs `indicipr reproduce` there with this venv, so nothing of the checkout is written.

The floor is a best case, so it is measured as one: each throughput is the best of several rounds, taken when the
machine is quiet (the script waits up to `--quiet-wait` seconds for the load average to drop, and says so when it does
not), with the allocator the training runs with (`fast_paths.reused_heap`: outputs land in memory already touched, not
in fresh pages the kernel zeroes first). With `--run` the throughputs are measured before the job too, on a grid of
batch sizes, and the better of the measurement before and the one after counts. A time below its floor cannot be: a
ratio under 1 is never printed; the line says instead that the floor was measured on a busy machine.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from indicipr.data import numerics  # noqa: E402


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


def run_fresh(at_once: int | None = None) -> Path:
    """Run the main job in a temporary clone of HEAD (`at_once`: `indicipr reproduce --at-once`, else its default); the
    clone's root (its `runs/` holds the run)."""
    tmp = Path(tempfile.mkdtemp(prefix="indicipr-mainjob-"))
    clone = tmp / "indicipr"
    subprocess.run(["git", "clone", "-q", "--local", str(ROOT), str(clone)], check=True)
    shared = os.environ.get("INDICIPR_SHARED") or str(ROOT.parent / "shared")
    env = {**os.environ, "PYTHONPATH": str(clone), "INDICIPR_ROOT": str(clone), "INDICIPR_SHARED": shared}
    t0 = time.perf_counter()
    more = ["--at-once", str(at_once)] if at_once else []
    subprocess.run([str(ROOT / ".venv" / "bin" / "indicipr"), "reproduce", *more], cwd=clone, env=env, check=True)
    print(f"main job in {clone}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return clone


def latest_run(root: Path) -> Path:
    runs = sorted(p.parent.parent for p in (root / "runs").glob("*/report/run.json"))
    full = [r for r in runs if len(json.loads((r / "report" / "run.json").read_text())["results"]) == 14]
    if not full:
        raise SystemExit(f"{root / 'runs'}: no finished main job (run one with --run)")
    return full[-1]


def checkpoints(root: Path) -> list[dict]:
    "The qa_config.json of phase 1 and every phase-2 seed of the sample's encoder runs."
    out = []
    for path in sorted((root / "data" / "models").glob("**/qa_config.json")):
        meta = json.loads(path.read_text())
        if "train_tokens" in meta and "recipe_choice" not in path.parts:
            out.append({"path": path, **meta})
    return out


def model_shape(meta: dict | None = None) -> dict:
    "Layers and widths of a checkpoint (`meta`: its qa_config.json record), else of the offline encoder before training."
    from transformers import AutoConfig

    if meta is None:
        from indicipr.systems.qa_model import resolve_model

        folder = resolve_model("minilm-l6")
    else:
        folder = str(Path(meta["path"]).parent)
    cfg = AutoConfig.from_pretrained(folder)
    return {
        "layers": cfg.num_hidden_layers,
        "hidden": cfg.hidden_size,
        "intermediate": cfg.intermediate_size,
        "heads": cfg.num_attention_heads,
    }


def linear_flops(tokens: int, layers: int, hidden: int, intermediate: int) -> float:
    "The linear layers' forward and backward products for `tokens` tokens (3 × the forward's `2·m·k·n`)."
    return 3.0 * layers * 2 * (4 * hidden * hidden + 2 * hidden * intermediate) * tokens


def attention_flops(tokens: int, mean_len: float, layers: int, hidden: int) -> float:
    """The attention's forward and backward products for `tokens` tokens in windows of `mean_len` tokens: the scores
    (`q·kᵀ`) and the weighted values (`p·v`), `2·L·L·width` each a window, and twice as much backward."""
    return 3.0 * layers * 2 * 2 * mean_len * hidden * tokens


def floor_seconds(
    tokens: int, mean_len: float, shape: dict, linear_tp: float, attention_tp, lengths: dict | None = None
) -> float:
    """The training's floor: each kind of product at this machine's throughput for its shapes (FLOP/s; the attention's,
    `attention_tp`, a number or a function of the window length). With `lengths` (`{length: windows}` of the training
    data, stepped through `tokens / Σ length·windows` times) each window's attention products are counted at its own
    length and throughput: they grow with the square of the length, so at the mean length windows of unequal lengths
    would be counted short (by E[L²] / E[L]²). Without, every window at `mean_len`."""
    layers, hidden = shape["layers"], shape["hidden"]
    linear = linear_flops(tokens, layers, hidden, shape["intermediate"]) / linear_tp
    rate = attention_tp if callable(attention_tp) else lambda _: attention_tp
    if not lengths:
        return linear + attention_flops(tokens, mean_len, layers, hidden) / rate(mean_len)
    counts = {int(n): w for n, w in lengths.items()}
    times = tokens / sum(n * w for n, w in counts.items())  # the epochs
    return linear + sum(times * w * attention_flops(n, n, layers, hidden) / rate(n) for n, w in counts.items())


def best_rate(products: list, flops: float, threads: int, repeats: int) -> float:
    """FLOP/s of calling every one of `products` (`flops` in all) on `threads` threads: the best of `repeats` rounds.
    They run with the allocator the training runs with (`fast_paths.reused_heap`): an output above glibc's mmap
    threshold (a batch of long windows' scores, a large batch's linear outputs) is then written into memory already
    touched, as at every training step, not into fresh pages the kernel zeroes first, which would count that zeroing
    into the floor and make it too slow."""
    import torch

    from indicipr.systems.fast_paths import reused_heap

    torch.set_num_threads(threads)
    times = []
    with reused_heap():
        for f in products:  # warm-up
            f()
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(3):
                for f in products:
                    f()
            times.append((time.perf_counter() - t0) / 3)
    torch.set_num_threads(numerics.THREADS)
    return flops / min(times)  # anything slower than the best round is the machine's noise, not the arithmetic


def matmul_throughput(rows: int, hidden: int, intermediate: int, threads: int, repeats: int) -> float:
    "FLOP/s of the layer's linear products at `rows` tokens a batch on `threads` threads: the best of `repeats` rounds."
    import functools

    import torch

    shapes = [(hidden, hidden)] * 4 + [(hidden, intermediate), (intermediate, hidden)]
    products = [
        functools.partial(torch.nn.functional.linear, torch.randn(rows, k), torch.randn(n, k)) for k, n in shapes
    ]
    return best_rate(products, sum(2 * rows * k * n for k, n in shapes), threads, repeats)


def attention_throughput(windows: int, length: float, hidden: int, heads: int, threads: int, repeats: int) -> float:
    """FLOP/s of the attention's batched products for `windows` windows of `length` tokens with `heads` heads of
    `hidden / heads` each, forward and backward as autograd runs them, on `threads` threads: the best of `repeats`
    rounds."""
    import torch

    bh, n, d = windows * heads, max(int(round(length)), 1), hidden // heads
    q, k, v, g = (torch.randn(bh, n, d) for _ in range(4))
    p, ds = torch.randn(bh, n, n), torch.randn(bh, n, n)
    products = [
        lambda: torch.bmm(q, k.transpose(1, 2)),  # the scores
        lambda: torch.bmm(p, v),  # the weighted values
        lambda: torch.bmm(g, v.transpose(1, 2)),  # backward of the weighted values: to the probabilities
        lambda: torch.bmm(p.transpose(1, 2), g),  # ... and to the values
        lambda: torch.bmm(ds, k),  # backward of the scores: to the queries
        lambda: torch.bmm(ds.transpose(1, 2), q),  # ... and to the keys
    ]
    return best_rate(products, len(products) * 2 * bh * n * n * d, threads, repeats)


def load_per_core() -> float:
    "The one-minute load average per core."
    return os.getloadavg()[0] / max(os.cpu_count() or 1, 1)


QUIET_LOAD = 0.3  # load per core under which the machine counts as quiet (this script's own process adds about 1/cores)


def wait_until_quiet(limit_s: float, poll_s: float = 5.0) -> float:
    "Wait up to `limit_s` seconds for the load per core to fall under `QUIET_LOAD`; the load when the wait ended."
    deadline = time.monotonic() + limit_s
    load = load_per_core()
    while load >= QUIET_LOAD and time.monotonic() < deadline:
        time.sleep(poll_s)
        load = load_per_core()
    return load


GRID_ROWS = (
    1024,
    2048,
    4096,
    8192,
)  # tokens in one step's batch, measured before a fresh run (the shapes are not known yet)
GRID_LENGTHS = (64, 128, 256, 384)  # window lengths for the attention's products (read between them)
GRID_WINDOWS = 8  # windows a step for the attention's grid (its throughput hardly depends on them)


def attention_grid(shape: dict, threads: int, repeats: int) -> list[tuple[int, float]]:
    "`[(length, FLOP/s)]`: the attention's products of `GRID_WINDOWS` windows at each of `GRID_LENGTHS`."
    return [
        (n, attention_throughput(GRID_WINDOWS, n, shape["hidden"], shape["heads"], threads, repeats))
        for n in GRID_LENGTHS
    ]


def grid_throughputs(shape: dict, threads: tuple[int, ...], repeats: int) -> dict[int, dict[str, list]]:
    "Per thread count, `{'linear': [(rows, FLOP/s) of GRID_ROWS], 'attention': [(length, FLOP/s) of GRID_LENGTHS]}`."
    h = shape["hidden"]
    return {
        t: {
            "linear": [(r, matmul_throughput(r, h, shape["intermediate"], t, repeats)) for r in GRID_ROWS],
            "attention": attention_grid(shape, t, repeats),
        }
        for t in threads
    }


def from_grid(grid: list[tuple[int, float]], rows: int) -> float:
    "The throughput at `rows` (or a length) from the grid: linear in the log between its points, the end points outside."
    import math

    if rows <= grid[0][0]:
        return grid[0][1]
    for (r0, t0), (r1, t1) in zip(grid, grid[1:]):
        if rows <= r1:
            w = (math.log(rows) - math.log(r0)) / (math.log(r1) - math.log(r0))
            return t0 + w * (t1 - t0)
    return grid[-1][1]


def best_of_grids(grids: list[list[tuple[int, float]]], n: float) -> float:
    "The best throughput at `n` that any of `grids` (measured at different times) reads."
    return max(from_grid(g, n) for g in grids)


def ratio_text(wall: float, floor: float) -> str:
    "`wall / floor`, or why there is none: a time under its floor means the floor was measured on a busy machine."
    ratio = wall / floor
    return f"{ratio:.2f}" if ratio >= 1 else f"— (floor measured on a busy machine: {ratio:.2f} would be below it)"


def fmt_s(s: float | None) -> str:
    return "—" if s is None else f"{int(s // 60)}m{s % 60:04.1f}s" if s >= 60 else f"{s:.1f}s"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--run", action="store_true", help="run a fresh main job in a temporary clone first")
    src.add_argument("--from-run", type=Path, help="a finished main job's run folder (default: the latest under runs/)")
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout whose runs/ and data/models/ are read")
    ap.add_argument(
        "--at-once",
        type=positive_int,
        help="with --run: notebooks at once (1: one after another; default: the runner's)",
    )
    ap.add_argument("--repeats", type=positive_int, default=5, help="rounds of each matmul measurement (default 5)")
    ap.add_argument(
        "--quiet-wait",
        type=positive_int,
        default=120,
        help="seconds to wait for a quiet machine before each floor measurement (default 120)",
    )
    args = ap.parse_args(argv)
    numerics.pin()  # the throughput is measured with the run's kernels
    before, loads = {}, []
    if args.run:  # the floor before the job: the machine is as quiet now as it will be
        loads.append(wait_until_quiet(args.quiet_wait))
        before = grid_throughputs(
            model_shape(), tuple(sorted({numerics.THREADS, numerics.WORKER_THREADS})), args.repeats
        )
    root = run_fresh(args.at_once) if args.run else args.root
    run_dir = args.from_run or latest_run(root)
    run_json = run_dir / "report" / "run.json"
    if not run_json.is_file():
        ap.exit(2, f"main_job.py: {run_json}: no run.json (is {run_dir} a run folder of indicipr reproduce?)\n")
    run = json.loads(run_json.read_text())
    status = numerics.numerics_status()
    cores = status["cpu"]["cores"]
    print(f"# The main job, stage by stage ({run_dir})")
    print(f"{numerics.status_line(status)}")
    print(f"run numerics: {run.get('numerics', {}).get('mode', 'not recorded')}; duration {fmt_s(run['duration_s'])}\n")
    print("| stage | wall | CPU | cores busy | work | tokens/s | floor | wall / floor |")
    print("|---|---|---|---|---|---|---|---|")
    total_wall = total_cpu = 0.0
    for r in run["results"]:
        wall, cpu = r.get("seconds") or 0.0, r.get("cpu_seconds")
        total_wall += wall
        total_cpu += cpu or 0.0
        busy = f"{cpu / wall:.2f} of {cores}" if cpu and wall else "—"
        print(f"| {r['name']} | {fmt_s(wall)} | {fmt_s(cpu)} | {busy} | | | | |")
    job = run["duration_s"]
    print(f"| **the job** | {fmt_s(job)} | {fmt_s(total_cpu)} | {total_cpu / max(job, 1e-9):.2f} of {cores} | | | | |")
    if total_wall > 1.01 * job:  # the runner runs stages at once where one does not read the other's files
        print(f"\nstages ran at once: their times add up to {fmt_s(total_wall)}, the job took {fmt_s(job)}")

    metas = checkpoints(root)
    if not metas:
        print(f"\n{root / 'data' / 'models'}: no checkpoint records tokens (a run of this version writes them)")
        return 0
    shape = model_shape(metas[0])
    loads.append(wait_until_quiet(args.quiet_wait))
    print("\n## Notebook 08, phase by phase and seed by seed (training only)\n")
    print(
        "| run | threads | windows | steps | tokens | wall | CPU | of it scoring | tokens/s | floor | wall / floor | CPU / floor |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    seeds_floor, seeds_wall, phase1_floor, after = 0.0, [], 0.0, {}
    for m in metas:
        phase1 = Path(m["path"]).parent.name.endswith("_intermediate")  # encoders.intermediate_dir
        threads = numerics.THREADS if phase1 else numerics.WORKER_THREADS
        rows = max(int(m["train_tokens"] / max(m["global_steps"], 1)), 1)  # tokens of one step's batch
        mean_len, lengths = rows / m["batch_size"], m.get("train_window_lengths")
        tp = matmul_throughput(rows, shape["hidden"], shape["intermediate"], threads, args.repeats)
        if threads in before:  # the better of the measurement before the job and this one
            tp = max(tp, from_grid(before[threads]["linear"], rows))
        if threads not in after:  # the attention's grid of lengths, measured again now, once a thread count
            after[threads] = attention_grid(shape, threads, args.repeats)
        grids = [after[threads]] + ([before[threads]["attention"]] if threads in before else [])
        # each window at its own length; a checkpoint that does not record its windows' lengths: all at the mean
        floor = floor_seconds(m["train_tokens"], mean_len, shape, tp, functools.partial(best_of_grids, grids), lengths)
        if phase1:
            phase1_floor += floor
        else:
            seeds_floor += floor
            seeds_wall.append(m["train_seconds"])
        name = "phase 1" if phase1 else f"phase 2, seed {m['seed']}"
        cpu, scoring = m.get("train_cpu_seconds"), m.get("scoring_cpu_seconds") or 0.0
        # a one-thread seed shares the cores with its neighbours: its training's own CPU time is what it took
        per_cpu = ratio_text(cpu - scoring, floor) if cpu and not phase1 and threads == 1 else "—"
        print(
            f"| {name} | {threads} | {m['train_windows']} | {m['global_steps']} | {m['train_tokens']:,} | "
            f"{fmt_s(m['train_seconds'])} | {fmt_s(cpu)} | {fmt_s(scoring) if scoring else '—'} | "
            f"{m['train_tokens'] / max(m['train_seconds'], 1e-9):,.0f} | {fmt_s(floor)} | "
            f"{ratio_text(m['train_seconds'], floor)} | {per_cpu} |"
        )
    if seeds_wall:
        group_floor = seeds_floor / min(cores, len(seeds_wall))
        print(
            f"| phase 2, the {len(seeds_wall)} seeds at once | {numerics.WORKER_THREADS} each | | | | "
            f"{fmt_s(max(seeds_wall))} | | | | {fmt_s(group_floor)} | {ratio_text(max(seeds_wall), group_floor)} | |"
        )
        stage = next((r.get("seconds") for r in run["results"] if r["name"].startswith("08_")), None)
        if stage:
            floor = phase1_floor + group_floor
            print(
                f"\nthe encoder stage (notebook 08): {fmt_s(stage)} against the floor of its training, {fmt_s(floor)} "
                f"(phase 1, then the seeds at once): {ratio_text(stage, floor)} times the floor"
            )
    when = "before the job and after it, the better of the two" if before else "after the job"
    busy = max(loads) >= QUIET_LOAD
    print(
        f"\nfloor: {shape['layers']} layers of width {shape['hidden']} (feed-forward {shape['intermediate']}), fp32, "
        f"{shape['heads']} heads; this machine's throughput for the linear layers' products at each run's batch of "
        f"tokens and for the attention's at each window's length, the best of {args.repeats} rounds, measured "
        f"{when}; load per core when measured: {', '.join(f'{x:.2f}' for x in loads)}"
        + (" (a busy machine: the floor is too high and the ratios too low)" if busy else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
