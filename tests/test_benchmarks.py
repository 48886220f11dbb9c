"""Smoke tests of the benchmark scripts (tiny inputs; the real runs are documented in their docstrings)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import QA_SMALL as FIXTURE
from helpers import ROOT, tiny_bert_config

from indicipr.data import benchmark

sys.path.insert(0, str(ROOT / "benchmarks"))


def _bench(name: str):
    "The script `benchmarks/<name>.py` loaded as a module (`<name>_bench`), its `main` not run."
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"{name}_bench", ROOT / "benchmarks" / f"{name}.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


@pytest.mark.slow
def test_every_benchmark_script_imports_and_answers_help():
    "Each script under benchmarks/ imports the project's names it uses (a renamed or moved name fails here) and prints its usage."
    scripts = sorted((ROOT / "benchmarks").glob("*.py"))
    assert len(scripts) >= 5
    for script in scripts:
        proc = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"{script.name}: {proc.stderr[-1500:]}"
        assert "usage" in proc.stdout, f"{script.name}: {proc.stderr[-1500:]}"


@pytest.mark.slow
def test_gpu_finetune_tiny_runs_every_part(tmp_path):
    """The one device script, --tiny on the CPU: (a) plain Trainer, Trainer with packing and the loop on the same windows
    at the table's recipe; the table sequential, pooled (2 worker processes) and a rerun alone, through the hub stand-in;
    inference. On a CPU a pooled run is its sequential twin exactly, and so is a rerun."""
    out = tmp_path / "g.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_finetune.py"), "--tiny", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    res = json.loads(out.read_text())
    a = res["speed"]
    assert a["windows"] == 64
    assert a["batch_size"] == 12
    assert a["epochs"] == 1.0
    sy = a["systems"]
    assert set(sy) == {"plain", "trainer+packing", "loop"}  # no CUDA graphs on a CPU
    assert len({r["steps"] for r in sy.values()}) == 1
    assert sy["loop"]["steps"] == 6  # ⌈64 / 12⌉: the same recipe
    assert sy["plain"]["padding"] == "all to 384"
    assert sy["loop"]["padding"].startswith("length-grouped")
    for r in sy.values():
        assert r["examples_per_s"] == 64 / r["train_runtime"]
        assert r["x_plain"] == r["examples_per_s"] / sy["plain"]["examples_per_s"]
    assert res["table_train_options"] == {"engine": "loop", "cuda_graphs": False}
    seq, pooled, rerun = res["sequential"], res["pooled"], res["rerun"]
    assert (
        [r["system"] for r in seq["runs"]]
        == [r["system"] for r in pooled["runs"]]
        == ["inlegalbert_seed0", "inlegalbert_seed1"]
    )
    assert pooled["pool"]["plan"]["workers"] == 2
    assert len({r["worker"] for r in pooled["pool"]["runs"].values()}) == 2
    assert seq["pool"]["plan"]["limited_by"] == "sequential"
    assert all(r["steps"] == 2 for r in seq["runs"])
    c = res["pooled_vs_sequential"]
    assert c["twins"] == 2
    assert c["max_abs_f1_diff"] == 0
    assert all(r["identical_curve"] for r in c["runs"])
    assert res["rerun_vs_sequential"]["runs"][0]["identical_curve"]
    assert rerun["runs"][0]["system"] == "inlegalbert_seed0"
    st = seq["settings"]
    assert st["checkpoint"] == "law-ai/InLegalBERT"
    assert st["revision"]  # downloaded from the stand-in
    assert (st["layers"], st["hidden"], st["eval_questions"], st["batch_size"]) == (2, 128, 344, 12)
    i = rerun["inference"]
    assert i["questions"] == 344
    assert i["questions_per_s"] > 0
    assert i["windows"] >= 344
    summary = proc.stdout[proc.stdout.index("== gpu_finetune summary") :]
    assert all(f"({k})" in summary for k in "abcde")
    assert "questions/s" in summary
    assert "pooled vs sequential" in summary


def test_gpu_finetune_writes_under_out_when_set(tmp_path, monkeypatch):
    import importlib

    sys.path.insert(0, str(ROOT / "benchmarks"))
    gpu_finetune = importlib.import_module("gpu_finetune")
    monkeypatch.setenv("OUT", str(tmp_path))
    assert gpu_finetune.default_out() == tmp_path / "gpu_finetune.json"
    monkeypatch.delenv("OUT")
    assert gpu_finetune.default_out() == ROOT / "benchmarks" / "out" / "gpu_finetune.json"
    command = [
        line.strip() for line in gpu_finetune.__doc__.splitlines() if "python3 benchmarks/gpu_finetune.py" in line
    ]
    assert len(command) == 1
    assert len(command[0]) < 2000  # the device command: one line


def test_long_context_questions_keep_exact_gold_spans():
    import qa_inference

    recs = [dict(r) for s in ("train", "validation", "test") for r in benchmark.load_benchmark(str(FIXTURE))[s]]
    qs = qa_inference.long_context_questions(recs, min_words=350)
    assert len(qs) == 2 * len(recs)
    assert len({q["id"] for q in qs}) == len(qs)
    for q in qs:
        a, s = q["answers"]["text"][0], q["answers"]["answer_start"][0]
        assert q["context"][s : s + len(a)] == a
    long = [q for q in qs if len(q["context"].split()) >= 350]
    assert len(long) / len(qs) > 0.9
    assert any(q["answers"]["answer_start"][0] > 1500 for q in qs if q["id"].endswith("#last"))


def test_forward_flops_matches_torch_flop_counter():
    "The compute floor counts what torch's own FLOP counter counts for a BERT QA forward pass."
    import qa_inference
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import BertConfig, BertForQuestionAnswering

    cfg = BertConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        attn_implementation="eager",
    )  # the counter sees eager attention's matmuls
    model = BertForQuestionAnswering(cfg).eval()
    total = 0
    for n in (17, 40):
        with FlopCounterMode(display=False) as fc, torch.inference_mode():
            model(input_ids=torch.randint(0, 100, (1, n)))
        total += fc.get_total_flops()
    assert qa_inference.forward_flops([17, 40], layers=2, hidden=32, intermediate=64) == total
    assert qa_inference.forward_flops([40], 2, 32, 64) > 2 * qa_inference.forward_flops(
        [20], 2, 32, 64
    )  # attention is quadratic


def test_floor_counts_the_products_at_ours_padded_batch_shapes():
    "The floor's products are predict_answers' own batches (as `_pad_batch` pads them), and their FLOPs the counter's."
    import numpy as np
    import qa_inference

    from indicipr.systems import qa_model as QM
    from indicipr.data.config import Window

    tok = QM.load_tokenizer("minilm-l6")
    recs = [dict(r) for r in benchmark.load_benchmark(str(FIXTURE))["test"]]
    w = QM.encode_windows(recs, tok, Window(128, 32))
    want = [tuple(QM._pad_batch(w, idx, 0, 8, 128)["input_ids"].shape) for idx in QM._batches_by_length(w.lengths, 3)]
    assert qa_inference.batch_shapes(w.lengths, 3, 8, 128) == want
    assert len(set(want)) > 1
    dims = dict(layers=2, hidden=32, intermediate=64)
    padded = [L for B, L in want for _ in range(B)]
    assert qa_inference.products_flops(want, heads=4, **dims) == qa_inference.forward_flops(padded, **dims)
    assert qa_inference.products_flops(want, heads=4, **dims) > qa_inference.forward_flops(
        w.lengths, **dims
    )  # padding counts
    floor = qa_inference.MatmulFloor(want[:4], heads=4, threads=2, **dims)
    times = floor.run()
    assert sorted(times) == ["1 process x 2 threads", "2 workers x 1 thread"]
    assert all(t > 0 for t in times.values())
    assert list(floor.run(limit=1)) == list(times)
    assert np.isfinite(list(times.values())).all()


FAKE_PEER = """
import argparse, json, sys, time
p = argparse.ArgumentParser(); p.add_argument("script"); p.add_argument("--serve", action="store_true")
p.add_argument("--model"); p.add_argument("--questions"); p.add_argument("--threads")
a = p.parse_args()
ids = [json.loads(l)["id"] for l in open(a.questions) if l.strip()]
print("not a protocol line", flush=True)                     # the pipeline may print; only READY/RESULT lines count
print("READY " + json.dumps({"transformers": "fake", "torch": "none", "threads": 1}), flush=True)
for line in sys.stdin:
    req = json.loads(line); time.sleep(0.01)
    print("RESULT " + json.dumps({"batch_size": req["batch_size"], "max_answer_len": req["max_answer_len"],
                                  "seconds": 0.5, "predictions": {i: "" for i in ids}}), flush=True)
"""


def _fake_peer(tmp_path) -> Path:
    "A `--peer-python` that answers the --serve protocol with empty answers (the real peer needs transformers 4)."
    (tmp_path / "fake_peer.py").write_text(FAKE_PEER)
    exe = tmp_path / "fake-python"
    exe.write_text(f'#!/bin/sh\nexec {sys.executable} {tmp_path / "fake_peer.py"} "$@"\n')
    exe.chmod(0o755)
    return exe


@pytest.mark.slow  # over 8 s on 2 cores
def test_qa_inference_interleaves_rounds_and_checks_answers_and_logits(tmp_path, monkeypatch):
    "A smoke run on a tiny model: every system once a round, spreads, the floor's two layouts, and both checks."
    import pytest
    import qa_inference
    from transformers import BertForQuestionAnswering

    from indicipr.systems import qa_model as QM

    tok = QM.load_tokenizer("minilm-l6")
    model_dir = tmp_path / "tiny"
    BertForQuestionAnswering(tiny_bert_config()).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    engine = "openvino" if QM.openvino_available() else "torch"
    argv = [
        "--model",
        str(model_dir),
        "--data-source",
        str(FIXTURE),
        "--limit",
        "6",
        "--repeats",
        "2",
        "--threads",
        "2",
        "--peer-batch-sizes",
        "1",
        "8",
        "--engine",
        engine,
        "--no-int8",
        "--no-peer-default-len",
        "--peer-python",
        str(_fake_peer(tmp_path)),
        "--out",
        str(tmp_path / "out"),
    ]
    assert qa_inference.main(argv) == 0
    res = json.loads((tmp_path / "out" / "qa_inference.json").read_text())
    kinds = [r["kind"] for r in res["rows"]]
    assert kinds == ["ours", "peer", "ours-torch", "peer", "ours-decoding"]
    assert res["rounds"] == 2
    assert [r["runs"] for r in res["rows"]] == [2, 2, 2, 2, 1]
    for r in res["rows"][:4]:
        assert r["seconds"]["min"] <= r["seconds"]["median"] <= r["seconds"]["max"]
        assert r["floor / system"]["median"] > 0
    assert res["rows"][1]["seconds"] == {"median": 0.5, "min": 0.5, "max": 0.5}  # the peer's own timing is used
    assert len(res["floor"]["rounds"]) == 2
    assert all(len(t) == 2 for t in res["floor"]["rounds"])
    assert res["answers_identical_to_torch"]
    assert res["answers_differing"] == 0
    assert res["engine"] == engine
    if engine == "openvino":
        assert res["logit_check"]["max_abs_diff"] < 1e-5
    # answers that differ from the torch path fail the run (after the figures are printed)
    import functools

    real = QM.predict_answers

    @functools.wraps(real)
    def off_by_one(model, tok, records, engine="auto", **kw):
        ans = real(model, tok, records, engine=engine, **kw)
        if engine != "torch":
            ans[0].text += "!"
        return ans

    monkeypatch.setattr(QM, "predict_answers", off_by_one)
    assert qa_inference.main(argv[:-1] + [str(tmp_path / "out2")]) == 1
    assert not json.loads((tmp_path / "out2" / "qa_inference.json").read_text())["answers_identical_to_torch"]
    with pytest.raises(SystemExit):
        qa_inference.main(argv + ["--engine", "onnx"])
    assert qa_inference.main(argv + ["--repeats", "0"]) == 2


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--sizes", "1000", "0"], "--sizes 0: a number of contexts, at least 1"),
        (["--queries", "0"], "--queries 0: the queries timed per size, at least 1"),
        (["--peer-queries", "0"], "--peer-queries 0: the queries timed per size for rank-bm25, at least 1"),
        (["--k", "0"], "--k 0: the length of the top-k list searched, at least 1"),
        (["--threads", "0"], "--threads 0: the threads torch and numpy use, at least 1"),
        (["--queries", "5", "--peer-queries", "6"], "--peer-queries 6: at most --queries (5)"),
    ],
)
def test_retrieval_benchmark_refuses_counts_that_trace_back_or_time_nothing(args, needle, capsys):
    import retrieval as bench

    with pytest.raises(SystemExit) as stop:
        bench.main(args)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and needle in err and "Traceback" not in err, err


def test_retrieval_benchmark_pins_and_prints_its_threads(capsys):
    import retrieval as bench
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    try:
        with threadpool_limits(limits=None):  # numpy's BLAS threads as they were, afterwards
            args = [
                "--sizes",
                "40",
                "--queries",
                "3",
                "--peer-queries",
                "2",
                "--k",
                "5",
                "--no-encoder",
                "--threads",
                "1",
            ]
            assert bench.main(args) == 0
            assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert "; top-5; 1 threads on " in capsys.readouterr().out
    assert bench.DEFAULT_THREADS == 2


def test_main_job_durations_read_as_minutes_and_seconds():
    "`benchmarks/main_job.py` writes 156.8 s as 2m36.8s (whole minutes, never rounded up) and 895.3 s as 14m55.3s."
    bench = _bench("main_job")
    assert [bench.fmt_s(s) for s in (None, 59.0, 60.0, 156.76, 895.34, 414.7)] == [
        "—",
        "59.0s",
        "1m00.0s",
        "2m36.8s",
        "14m55.3s",
        "6m54.7s",
    ]


def test_main_job_floor_is_a_best_case():
    """`benchmarks/main_job.py` never prints a time below its floor as a ratio: a ratio under 1 says the floor was
    measured on a busy machine. The grid measured before the job is read between its points in log(rows)."""
    bench = _bench("main_job")
    assert bench.ratio_text(150.0, 100.0) == "1.50"
    assert bench.ratio_text(100.0, 100.0) == "1.00"
    below = bench.ratio_text(54.0, 100.0)
    assert below.startswith("—") and "busy machine" in below and "0.54" in below
    grid = [(1024, 10.0), (2048, 20.0), (4096, 30.0)]
    assert bench.from_grid(grid, 512) == 10.0 and bench.from_grid(grid, 8192) == 30.0
    assert bench.from_grid(grid, 2048) == 20.0
    assert abs(bench.from_grid(grid, 2896) - 25.0) < 0.01  # the geometric middle of 2048 and 4096
    # the best round counts: a machine that slows one round down does not lower the throughput
    tp = bench.matmul_throughput(64, 32, 64, threads=1, repeats=3)
    assert tp > 0


def test_main_job_floor_times_the_products_with_the_trainings_allocator(monkeypatch):
    """Every product of the floor's measurement, warm-up and rounds, runs inside `fast_paths.reused_heap`, as the
    training steps do: outside it a large output lands in fresh pages the kernel zeroes, and the floor comes out slow."""
    import contextlib

    from indicipr.systems import fast_paths

    bench, inside, calls = _bench("main_job"), [False], []

    @contextlib.contextmanager
    def heap():
        inside[0] = True
        try:
            yield True
        finally:
            inside[0] = False

    monkeypatch.setattr(fast_paths, "reused_heap", heap)
    assert bench.best_rate([lambda: calls.append(inside[0])] * 2, 1.0, threads=1, repeats=2) > 0
    assert calls == [True] * (2 + 2 * 3 * 2) and not inside[0]  # the warm-up, then 2 rounds of 3 passes over both


def test_main_job_floor_times_each_kind_of_product_at_its_own_throughput():
    """The floor adds the linear layers' products at their throughput and the attention's at its own: 3 × the forward's
    `2·m·k·n`, the attention's two products `2·L·L·width` a window each."""
    bench = _bench("main_job")
    shape = {"layers": 2, "hidden": 8, "intermediate": 32}
    assert bench.linear_flops(10, **shape) == 3 * 2 * 2 * (4 * 8 * 8 + 2 * 8 * 32) * 10
    assert bench.attention_flops(10, 5.0, 1, 4) == 3 * 2 * 2 * 5 * 4 * 10  # 2 windows of 5 tokens: 2·(2·5·5·4)·2 ×3
    lin, att = bench.linear_flops(100, **shape), bench.attention_flops(100, 10.0, 2, 8)
    assert bench.floor_seconds(100, 10.0, shape, linear_tp=lin, attention_tp=att / 2) == 3.0  # 1 s + 2 s
    assert bench.attention_throughput(2, 16, 32, 4, threads=1, repeats=2) > 0


def test_main_job_floor_counts_each_windows_attention_at_its_own_length():
    """Windows of 2 and 8 tokens, stepped through 5 times: the attention's products are `2·L·L·width` a window, so 68
    token pairs an epoch, not the 50 of two windows at the mean length (5); each length at its own throughput."""
    bench = _bench("main_job")
    shape = {"layers": 1, "hidden": 4, "intermediate": 16}
    lin = bench.linear_flops(50, **shape)
    pair = bench.attention_flops(1, 1.0, 1, 4)  # the products of one token pair
    exact = bench.floor_seconds(50, 5.0, shape, lin, pair, lengths={"2": 1, "8": 1})
    assert exact == 1.0 + 5 * (4 + 64)
    assert bench.floor_seconds(50, 5.0, shape, lin, pair) == 1.0 + 5 * 2 * 25  # at the mean: counted short
    per_length = bench.floor_seconds(50, 5.0, shape, lin, lambda n: pair * n, lengths={"2": 1, "8": 1})
    assert per_length == 1.0 + 5 * (4 / 2 + 64 / 8)
    grids = [[(2, 1.0), (8, 4.0)], [(2, 3.0), (8, 2.0)]]  # measured before the job and after it
    assert bench.best_of_grids(grids, 2) == 3.0 and bench.best_of_grids(grids, 8) == 4.0


def test_main_job_sets_a_seeds_training_against_its_floor_without_the_curves_scoring(tmp_path, monkeypatch, capsys):
    """Each phase-2 seed's line sets its CPU time, less the learning curve's scoring (`scoring_cpu_seconds`), against
    its floor; phase 1 (two threads) gets no CPU ratio; the group line sets the last seed's end against the seeds' floor
    on the cores they shared."""
    bench = _bench("main_job")
    run = tmp_path / "runs" / "20261205-000000"
    (run / "report").mkdir(parents=True)
    stages = [{"name": "08_systems.encoders", "seconds": 600.0, "cpu_seconds": 1100.0}]
    (run / "report" / "run.json").write_text(json.dumps({"duration_s": 600.0, "results": stages}))
    config = {"model_type": "bert", "num_hidden_layers": 2, "hidden_size": 8, "intermediate_size": 32}
    config["num_attention_heads"] = 2
    shape = {"layers": 2, "hidden": 8, "intermediate": 32, "heads": 2}
    floor = bench.floor_seconds(1_000_000, 100.0, shape, 1e9, 1e9)  # every run below: 10,000 steps of 100 tokens
    runs = {  # folder: (seed, wall, CPU, of it scoring)
        "minilm_intermediate": (0, 2.0 * floor, 3.5 * floor, 0.0),
        "minilm_seed0": (0, 2.0 * floor, 1.5 * floor, 0.3 * floor),
        "minilm_seed1": (1, 1.8 * floor, 1.2 * floor, 0.0),
    }
    for folder, (seed, wall, cpu, scoring) in runs.items():
        (tmp_path / "data" / "models" / folder).mkdir(parents=True)
        (tmp_path / "data" / "models" / folder / "config.json").write_text(json.dumps(config))
        meta = {"seed": seed, "train_tokens": 1_000_000, "global_steps": 10_000, "batch_size": 1, "train_windows": 50}
        meta.update(train_seconds=wall, train_cpu_seconds=cpu, scoring_cpu_seconds=scoring)
        if folder.endswith("seed1"):  # its windows' lengths recorded: all of 100 tokens, the floor as at the mean
            meta["train_window_lengths"] = {"100": 50}
        (tmp_path / "data" / "models" / folder / "qa_config.json").write_text(json.dumps(meta))
    monkeypatch.setattr(bench.numerics, "pin", lambda *a, **k: [])
    monkeypatch.setattr(bench, "wait_until_quiet", lambda *a, **k: 0.0)
    monkeypatch.setattr(bench, "matmul_throughput", lambda *a, **k: 1e9)
    monkeypatch.setattr(bench, "attention_throughput", lambda *a, **k: 1e9)
    monkeypatch.setattr(bench, "attention_grid", lambda *a, **k: [(64, 1e9), (384, 1e9)])
    assert bench.main(["--from-run", str(run), "--root", str(tmp_path), "--repeats", "1"]) == 0
    lines = {line.split(" | ")[0]: line.split(" | ") for line in capsys.readouterr().out.splitlines()}
    phase1, seed0, seed1 = lines["| phase 1"], lines["| phase 2, seed 0"], lines["| phase 2, seed 1"]
    assert phase1[-2:] == ["2.00", "— |"]  # wall against the two threads' floor; no CPU ratio
    assert seed0[-2:] == ["2.00", "1.20 |"]  # (1.5 - 0.3) × the floor: the curve's scoring left out
    assert seed1[-2:] == ["1.80", "1.20 |"]
    group = lines["| phase 2, the 2 seeds at once"]
    assert group[-2] == "2.00"  # the last seed's end against two seeds' floor on the two cores they shared


def test_train_profile_groups_operators():
    "`benchmarks/train_profile.py` puts each operator in its group: products, dropout's masks, AdamW, the loss."
    bench = _bench("train_profile")
    assert bench.group_of("aten::addmm") == bench.group_of("aten::bmm") == "matmul"
    assert bench.group_of("aten::bernoulli_") == bench.group_of("aten::gelu_backward") == "elementwise"
    assert bench.group_of("aten::_foreach_lerp_") == bench.group_of("aten::linalg_vector_norm") == "optimiser"
    assert bench.group_of("aten::native_layer_norm_backward") == "elementwise"  # a layer norm, not the clipping's norm
    assert bench.group_of("aten::nll_loss_backward") == "loss"
    assert bench.group_of("aten::_softmax") == "attention (rest)"
    assert bench.group_of("aten::something_new") == "other operators"


def test_train_profile_clocks_the_optimiser_either_way(monkeypatch):
    """`optimiser_clock` counts the CPU time of the loop's optimiser step whichever path makes it: torch's clipping and
    `AdamW.step`, or `adamw_step` in `fast_paths`; the wrapped functions still do their work."""
    import torch

    from indicipr.systems import fast_paths as FP
    from indicipr.systems import training

    bench = _bench("train_profile")
    for owner, name in ((training, "adamw_step"), (torch.nn.utils, "clip_grad_norm_"), (torch.optim.AdamW, "step")):
        monkeypatch.setattr(owner, name, getattr(owner, name))  # put back after the test
    clock = bench.optimiser_clock()
    param = torch.nn.Parameter(torch.ones(300_000))
    opt = torch.optim.AdamW([param], lr=0.1)
    param.grad = torch.full_like(param, 0.5)
    torch.nn.utils.clip_grad_norm_([param], 1.0)
    opt.step()
    torch_s = clock()
    assert torch_s > 0 and not torch.equal(param, torch.ones(300_000))
    param.grad = torch.full_like(param, 0.5)
    with FP.fast_paths(torch.nn.Linear(2, 2)):
        assert training.adamw_step(opt, [param], 1.0)
    assert clock() > torch_s


def test_train_profile_side_by_side_names_a_short_run(capsys):
    "`--fast-paths` leaves each run's first two steps out, so fewer than three is refused in a sentence (exit 2)."
    bench = _bench("train_profile")
    with pytest.raises(SystemExit) as stop:
        bench.main(["--fast-paths", "--steps", "2"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "--steps must be at least 3 with --fast-paths" in err and "Traceback" not in err


def test_train_profile_at_once_names_a_wrong_count(capsys):
    """`--at-once K` sets runs beside each other: K under 2, or with `--fast-paths`, or too few steps to leave the first
    two out, is refused in a sentence naming the option (exit 2), before any training. A run below its floor is no
    ratio: the floor is of the steps timed, so a time under it says the floor was measured at a busier moment."""
    bench = _bench("train_profile")
    cases = [
        (["--at-once", "1"], "--at-once must be at least 2 (runs beside each other), got 1"),
        (["--at-once", "3", "--fast-paths"], "--fast-paths and --at-once are two benchmarks"),
        (["--at-once", "3", "--steps", "2"], "--steps must be at least 3 with --at-once"),
    ]
    for argv, sentence in cases:
        with pytest.raises(SystemExit) as stop:
            bench.main(argv)
        err = capsys.readouterr().err
        assert stop.value.code == 2 and sentence in err and "Traceback" not in err, (argv, err)
    # a ratio under 1 is never printed: the floor is of the steps timed, so a time under it was a busier floor's
    assert bench.times_floor(1500.0, 1000.0) == "1.50" and bench.times_floor(1000.0, 1000.0) == "1.00"
    assert bench.times_floor(950.0, 1000.0).startswith("— (0.95: below the floor, which was measured on a busier")


def test_train_profile_floor_is_of_the_windows_the_timed_steps_trained(monkeypatch):
    """A few length-grouped steps may be shorter or longer than the data's mean, so the floor is of the windows the
    steps trained: `step_windows` reads each forward pass's window lengths from its attention mask (boolean, additive
    or 0/1), and `steps_floor` counts those windows, each at its own length, a step. Runs that trained different windows
    have no common floor: refused in a sentence."""
    import torch

    bench = _bench("train_profile")

    class Tiny(torch.nn.Module):
        config = type("Config", (), {"num_hidden_layers": 1, "hidden_size": 4, "intermediate_size": 16})()
        config.num_attention_heads = 1

        def forward(self, input_ids=None, attention_mask=None):
            return input_ids

    model = Tiny()
    steps = bench.step_windows(model)
    keep = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)
    model(input_ids=torch.zeros(2, 4), attention_mask=keep[:, None, None, :])  # as SDPA takes it
    additive = torch.zeros(2, 4).masked_fill_(~keep, torch.finfo(torch.float32).min)[:, None, None, :]
    model(input_ids=torch.zeros(2, 4), attention_mask=additive)  # as eager attention takes it
    model(input_ids=torch.zeros(2, 4), attention_mask=keep.long())  # a 2-D 0/1 mask
    assert steps == [[2, 4], [2, 4], [2, 4]]

    import main_job  # what steps_floor reads its measurements from

    monkeypatch.setattr(main_job, "matmul_throughput", lambda *a, **k: 1.0)
    monkeypatch.setattr(main_job, "attention_grid", lambda *a, **k: [(1, 1.0), (8, 1.0)])
    per_step = bench.steps_floor(model, [[2, 8], [8]], threads=1, repeats=1)
    shape = {"layers": 1, "hidden": 4, "intermediate": 16}
    tokens = 18  # 2 + 8 + 8: the linear layers' products at their tokens, the attention's window by window
    attention = main_job.attention_flops(2, 2, 1, 4) + 2 * main_job.attention_flops(8, 8, 1, 4)
    assert per_step == (main_job.linear_flops(tokens, **shape) + attention) / 2  # two steps

    same = {"alone": [{"windows": [[8, 8]]}], "at once": [{"windows": [[8, 8]]}, {"windows": [[2, 8]]}]}
    with pytest.raises(SystemExit, match="the runs trained different windows"):
        bench._side_by_side_floor_ms(same, 1, 1)


def test_llm_floor_evaluates_what_a_server_would_and_nothing_more():
    """`benchmarks/llm_floor.py`'s floor evaluates each prompt after the prefix it shares with the request before (its
    prompt and reply), at least one token of it, then the reply token by token without the last (sampled, never fed)."""
    bench = _bench("llm_floor")

    class Fake:
        "Records what it is asked to evaluate, from which position."

        def __init__(self):
            self.n_tokens, self.calls = 0, []

        def eval(self, tokens):
            self.calls.append((self.n_tokens, list(tokens)))
            self.n_tokens += len(tokens)

    assert bench.common_prefix([1, 2, 3], [1, 2, 4]) == 2 and bench.common_prefix([], [1]) == 0
    fake = Fake()
    out = bench.floor_seconds(fake, [[1, 2, 3, 4], [1, 2, 3, 5, 6], [1, 2, 3, 5, 6]], [[7, 8, 0], [9, 0], [0]])
    assert fake.calls == [
        (0, [1, 2, 3, 4]),
        (4, [7]),
        (5, [8]),
        (3, [5, 6]),  # the first three tokens are the previous prompt's
        (5, [9]),
        (4, [6]),  # the same prompt again: its last token is evaluated, for the logits
    ]
    assert out["prompt_evaluated"] == 4 + 2 + 1 and out["reply"] == 3 + 2 + 1 and out["seconds"] >= 0


def test_llm_floor_sends_the_grounded_requests_the_stage_would(monkeypatch):
    """The grounded setting's requests are each test question with the top context of the readers' retriever, less
    those that are notebook 09's zero-shot requests to the letter (the stage finds them in 09's cache): here the
    retriever finds every other question's own context, so only the others go to a server."""
    import numpy as np

    from indicipr.systems import grounded, retrieval

    bench = _bench("llm_floor")
    seen = {}

    def contexts(runs, tune_gold, run_settings):
        gold = seen["gold"]
        pos = np.array([[g if i % 2 == 0 else (g + 1) % seen["n"]] for i, g in enumerate(gold)])
        return "stub", (None, None), (pos, np.zeros(pos.shape))

    def stage(corpus, tune, test, run_settings, train, log=print):
        seen["gold"], seen["n"] = retrieval.open_queries(test, corpus)[1], len(corpus.texts)
        return {}

    monkeypatch.setattr(grounded, "retrieval_stage", stage)
    monkeypatch.setattr(grounded, "reader_contexts", contexts)
    sent = bench.grounded_requests(6)
    odd = [bench.stage_requests("zero-shot", 6)[i] for i in (1, 3, 5)]
    assert len(sent) == 3 and all(r != o for r, o in zip(sent, odd))  # another context than notebook 09's
    assert [r["messages"][-1]["content"].split("Question:")[-1] for r in sent] == [
        o["messages"][-1]["content"].split("Question:")[-1] for o in odd
    ]


def test_llm_floor_sends_every_judge_every_sampled_pair():
    """The judges' requests are notebook 12's first round: every judge of the offline profile on each sampled pair,
    pair-major, each with its own sampling parameters and the judges' schema."""
    from indicipr.analysis.quality import JUDGE_SCHEMA
    from indicipr.data.config import settings_for

    bench = _bench("llm_floor")
    judges = settings_for("quality", "offline").judges
    sent = bench.stage_requests("judges", 2)
    assert len(sent) == 2 * len(judges) and all(r["schema"] == JUDGE_SCHEMA for r in sent)
    assert [r["params"] for r in sent] == [dict(j.params) for j in judges] * 2
    assert sent[0]["messages"] == sent[len(judges) - 1]["messages"] != sent[len(judges)]["messages"]
