"""Smoke tests of the benchmark scripts (tiny inputs; the real runs are documented in their docstrings)."""
import json
import subprocess
import sys
from pathlib import Path

from indicipr import core

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "qa_small"
sys.path.insert(0, str(ROOT / "benchmarks"))


def test_gpu_finetune_tiny_runs_every_part(tmp_path):
    """The one device script, --tiny on the CPU: (a) plain Trainer, Trainer with packing and the loop on the same windows
    at the table's recipe; the table sequential, pooled (2 worker processes) and a rerun alone, through the hub stand-in;
    inference. On a CPU a pooled run is its sequential twin exactly, and so is a rerun."""
    out = tmp_path / "g.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_finetune.py"), "--tiny", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    res = json.loads(out.read_text())
    a = res["speed"]
    assert a["windows"] == 64 and a["batch_size"] == 12 and a["epochs"] == 1.0
    sy = a["systems"]
    assert set(sy) == {"plain", "trainer+packing", "loop"}                        # no CUDA graphs on a CPU
    assert len({r["steps"] for r in sy.values()}) == 1 and sy["loop"]["steps"] == 6      # ⌈64 / 12⌉: the same recipe
    assert sy["plain"]["padding"] == "all to 384" and sy["loop"]["padding"].startswith("length-grouped")
    for r in sy.values():
        assert r["examples_per_s"] == 64 / r["train_runtime"] and r["x_plain"] == r["examples_per_s"] / sy["plain"]["examples_per_s"]
    assert res["table_train_options"] == {"engine": "loop", "cuda_graphs": False}
    seq, pooled, rerun = res["sequential"], res["pooled"], res["rerun"]
    assert [r["system"] for r in seq["runs"]] == [r["system"] for r in pooled["runs"]] == ["inlegalbert_seed0", "inlegalbert_seed1"]
    assert pooled["pool"]["plan"]["workers"] == 2 and len({r["worker"] for r in pooled["pool"]["runs"].values()}) == 2
    assert seq["pool"]["plan"]["limited_by"] == "sequential" and all(r["steps"] == 2 for r in seq["runs"])
    c = res["pooled_vs_sequential"]
    assert c["twins"] == 2 and c["max_abs_f1_diff"] == 0 and all(r["identical_curve"] for r in c["runs"])
    assert res["rerun_vs_sequential"]["runs"][0]["identical_curve"] and rerun["runs"][0]["system"] == "inlegalbert_seed0"
    st = seq["settings"]
    assert st["checkpoint"] == "law-ai/InLegalBERT" and st["revision"]                    # downloaded from the stand-in
    assert (st["layers"], st["hidden"], st["eval_questions"], st["batch_size"]) == (2, 128, 344, 12)
    i = rerun["inference"]
    assert i["questions"] == 344 and i["questions_per_s"] > 0 and i["windows"] >= 344
    summary = proc.stdout[proc.stdout.index("== gpu_finetune summary"):]
    assert all(f"({k})" in summary for k in "abcde") and "questions/s" in summary and "pooled vs sequential" in summary


def test_gpu_finetune_writes_under_out_when_set(tmp_path, monkeypatch):
    import importlib
    sys.path.insert(0, str(ROOT / "benchmarks"))
    gpu_finetune = importlib.import_module("gpu_finetune")
    monkeypatch.setenv("OUT", str(tmp_path))
    assert gpu_finetune.default_out() == tmp_path / "gpu_finetune.json"
    monkeypatch.delenv("OUT")
    assert gpu_finetune.default_out() == ROOT / "benchmarks" / "out" / "gpu_finetune.json"
    command = [l.strip() for l in gpu_finetune.__doc__.splitlines() if "python3 benchmarks/gpu_finetune.py" in l]
    assert len(command) == 1 and len(command[0]) < 2000       # the device command: one line


def test_long_context_questions_keep_exact_gold_spans():
    import qa_inference
    recs = [dict(r) for s in ("train", "validation", "test") for r in core.load_benchmark(str(FIXTURE))[s]]
    qs = qa_inference.long_context_questions(recs, min_words=350)
    assert len(qs) == 2 * len(recs) and len({q["id"] for q in qs}) == len(qs)
    for q in qs:
        a, s = q["answers"]["text"][0], q["answers"]["answer_start"][0]
        assert q["context"][s:s + len(a)] == a
    long = [q for q in qs if len(q["context"].split()) >= 350]
    assert len(long) / len(qs) > 0.9
    assert any(q["answers"]["answer_start"][0] > 1500 for q in qs if q["id"].endswith("#last"))


def test_forward_flops_matches_torch_flop_counter():
    "The compute floor counts what torch's own FLOP counter counts for a BERT QA forward pass."
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import BertConfig, BertForQuestionAnswering
    import qa_inference
    cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                     max_position_embeddings=64, attn_implementation="eager")  # the counter sees eager attention's matmuls
    model = BertForQuestionAnswering(cfg).eval()
    total = 0
    for n in (17, 40):
        with FlopCounterMode(display=False) as fc, torch.inference_mode():
            model(input_ids=torch.randint(0, 100, (1, n)))
        total += fc.get_total_flops()
    assert qa_inference.forward_flops([17, 40], layers=2, hidden=32, intermediate=64) == total
    assert qa_inference.forward_flops([40], 2, 32, 64) > 2 * qa_inference.forward_flops([20], 2, 32, 64)  # attention is quadratic
