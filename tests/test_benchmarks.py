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
    "The one device script, --tiny on the CPU: (a) both training paths, (b) the encoder table through the hub stand-in, (c) inference."
    out = tmp_path / "g.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_finetune.py"), "--tiny", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["windows"] == 64 and res["plain"]["examples_per_s"] > 0 and res["project"]["examples_per_s"] > 0
    assert res["ratio"] == res["project"]["examples_per_s"] / res["plain"]["examples_per_s"]
    assert "length-grouped" in res["project"]["padding"] and res["plain"]["padding"] == "all to 64"
    t = res["table"]
    assert [r["system"] for r in t["runs"]] == ["inlegalbert_seed0"] and t["runs"][0]["steps"] == 2
    assert t["settings"]["checkpoint"] == "law-ai/InLegalBERT" and t["settings"]["revision"]      # downloaded from the stand-in
    assert (t["settings"]["layers"], t["settings"]["hidden"], t["settings"]["eval_questions"]) == (2, 128, 344)
    assert t["table_s"] > 0 and t["inference"]["questions"] == 344 and t["inference"]["questions_per_s"] > 0
    assert t["inference"]["windows"] >= 344
    summary = proc.stdout[proc.stdout.index("== gpu_finetune summary"):]
    assert all(f"({k})" in summary for k in "abc") and "questions/s" in summary


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
