"""Nothing lost, keys nowhere: an output never replaces an input, a secret never reaches a file or the terminal, every
mistake is one sentence (exit 2, no traceback), runs never collide, scoring stays linear in the predictions."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from helpers import BIN, QA_SMALL, ROOT, tiny_bert_config

from indicipr.data import basics, benchmark, config, core, qa_files
from indicipr.run import cli, runner
from indicipr.analysis import error_analysis, error_taxonomy
from indicipr.llm import client as llm, servers as llm_servers

KEY = "SECRETKEY"
GOLD = QA_SMALL / "test_squad.jsonl"


def gold_records() -> list[dict]:
    return qa_files.load_qa_file(GOLD, strict=True).records


def write_preds(path: Path, records=None, text=lambda r: r["answers"]["text"][0]) -> Path:
    path.write_text(
        "".join(json.dumps({"id": r["id"], "prediction_text": text(r)}) + "\n" for r in (records or gold_records()))
    )
    return path


def run_main(capsys, *argv) -> tuple[int, str, str]:
    "`indicipr ARGV` in this process: (exit status, stdout, stderr); argparse's own exit counts as its status."
    try:
        rc = cli.main([str(a) for a in argv])
    except SystemExit as e:
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def refused(rc: int, err: str, *needles: str) -> None:
    "Exit 2 with one sentence on stderr (no traceback) holding each needle."
    assert rc == 2, err
    assert "Traceback" not in err and err.strip(), err
    for n in needles:
        assert n in err, (n, err)


def run_cli(*args, env=None, cwd=None, timeout=300, stdin=None):
    r = subprocess.run(
        [str(BIN / "indicipr"), *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout
    )
    return r.returncode, r.stdout, r.stderr


def tree_with(root: Path, needle: str) -> list[Path]:
    "Every file under `root` whose bytes hold `needle`."
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and needle.encode() in p.read_bytes()]


def project_copy(tmp_path: Path, notebooks: list[str]) -> Path:
    "A project root (`INDICIPR_ROOT`) with the sample and the named notebooks: what a run writes stays in it."
    root = tmp_path / "project"
    (root / "notebooks").mkdir(parents=True)
    for nb in notebooks:
        shutil.copy(ROOT / "notebooks" / f"{nb}.ipynb", root / "notebooks")
    shutil.copytree(
        ROOT / "data" / "sample", root / "data" / "sample", ignore=shutil.ignore_patterns("statutes", "recorded")
    )
    shutil.copy(ROOT / "settings.ini", root / "settings.ini")
    return root


def clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INDICIPR_", "HF_ENDPOINT"))}
    return {**env, **extra}


# ------------------------------------------------------------------ 1. no input is ever an output
@pytest.mark.parametrize(
    "which", ["pred", "against", "gold", "symlink to pred", "hard link to pred", "dotted path to pred"]
)
def test_evaluate_refuses_an_out_that_is_an_input(tmp_path, capsys, which):
    pred = write_preds(tmp_path / "p.jsonl")
    other = write_preds(tmp_path / "q.jsonl", text=lambda r: r["question"])
    gold = shutil.copy(GOLD, tmp_path / "gold.jsonl")
    out = {"pred": pred, "against": other, "gold": gold, "dotted path to pred": tmp_path / "x" / ".." / "p.jsonl"}.get(
        which
    )
    if which == "symlink to pred":
        out = tmp_path / "link.jsonl"
        out.symlink_to(pred)
    if which == "hard link to pred":
        out = tmp_path / "hard.jsonl"
        os.link(pred, out)
    before = {p: p.read_bytes() for p in (pred, other, Path(gold))}
    rc, _, err = run_main(
        capsys, "evaluate", "--gold", gold, "--pred", pred, "--against", other, "--out", out, "--resamples", 10
    )
    refused(rc, err, "--out", "is the input")
    assert {p: p.read_bytes() for p in before} == before


def test_evaluate_out_through_a_symlink_writes_its_target(tmp_path, capsys):
    pred = write_preds(tmp_path / "p.jsonl")
    (tmp_path / "report.md").write_text("old")
    os.chmod(tmp_path / "report.md", 0o640)
    (tmp_path / "link.md").symlink_to(tmp_path / "report.md")
    rc, out, err = run_main(capsys, "evaluate", "--gold", GOLD, "--pred", pred, "--out", tmp_path / "link.md")
    assert rc == 0, err
    assert (tmp_path / "link.md").is_symlink() and (tmp_path / "report.md").read_text() == out.rstrip("\n") + "\n"
    assert (tmp_path / "report.md").stat().st_mode & 0o777 == 0o640


def test_predict_and_audit_refuse_outputs_on_their_inputs(tmp_path, capsys):
    bench = shutil.copytree(QA_SMALL, tmp_path / "bench")
    before = (bench / "test_squad.jsonl").read_bytes()
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    rc, _, err = run_main(
        capsys, "predict", "--model", model, "--data-source", bench, "--out", bench / "test_squad.jsonl"
    )
    refused(rc, err, "--out", "is the input --data-source")
    rc, _, err = run_main(capsys, "predict", "--model", model, "--data-source", bench, "--out", model / "config.json")
    refused(rc, err, "is the input --model")
    rc, _, err = run_main(capsys, "audit", "export", "--data-source", bench, "--out", bench / "test_squad.jsonl")
    refused(rc, err, "--out", "is the input --data-source")
    assert (bench / "test_squad.jsonl").read_bytes() == before


def test_audit_score_does_not_write_its_table_over_a_sheet(tmp_path, capsys):
    sheets = [tmp_path / "a.csv", tmp_path / "b.csv"]
    for s in sheets:
        s.write_text("id,question,answer\n")
    (tmp_path / "figs" / "tables").mkdir(parents=True)
    (tmp_path / "figs" / "tables" / "audit_results.csv").symlink_to(sheets[0])
    rc, _, err = run_main(capsys, "audit", "score", *sheets, "--figures-dir", tmp_path / "figs")
    refused(rc, err, "--figures-dir", "is the input SHEET")
    assert sheets[0].read_text() == "id,question,answer\n"


def test_an_out_under_a_regular_file_is_a_sentence(tmp_path, capsys):
    pred = write_preds(tmp_path / "p.jsonl")
    rc, _, err = run_main(capsys, "evaluate", "--gold", GOLD, "--pred", pred, "--out", tmp_path / "p.jsonl" / "r.md")
    refused(rc, err, "is a file, not a folder")


# ------------------------------------------------------------------ 2. secrets never reach a file or the terminal
@pytest.mark.parametrize(
    "raw, secret",
    [
        ("http://user:SECRETKEY@host/v1", KEY),
        ("https://SECRETKEY@host/v1", KEY),
        ("ftp://user:SECRETKEY@files.example/x", KEY),
        ("http://user:SECR@ETKEY@host/v1", "ETKEY"),
        ("http://user:SECRET?KEY@host/v1", "KEY@"),
        ("http://host/v1?api_key=SECRETKEY&x=1", KEY),
        ("http://host/v1?key=SECRETKEY", KEY),
        ("http://host/v1?access_token=SECRETKEY", KEY),
        ("Authorization: Bearer SECRETKEY123", KEY),
    ],
)
def test_one_function_masks_every_secret(raw, secret):
    assert secret not in basics.mask_secrets(raw) and secret not in llm.mask_url(raw)
    assert secret not in repr(llm.Endpoint(raw if "://" in raw else "http://h", "m"))


def test_a_malformed_endpoint_spec_is_not_echoed():
    for spec in ["m=ftp://user:SECRETKEY@host/v1", "m=bogus+http://user:SECRETKEY@host/v1"]:
        with pytest.raises(llm.LLMConfigError) as e:
            llm_servers.parse_routes(spec)
        assert KEY not in str(e.value) and "***" in str(e.value)


def test_hf_endpoint_is_masked_by_info_and_fetch(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", f"http://user:{KEY}@127.0.0.1:9")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for argv in (["info", "--data-source", "hub"], ["fetch", "--dest", tmp_path / "bench"]):
        rc, out, err = run_main(capsys, *argv)
        refused(rc, err, "http://user:***@127.0.0.1:9")
        assert KEY not in out + err


@pytest.mark.slow
@pytest.mark.parametrize(
    "url, shown",
    [
        (f"http://user:{KEY}@127.0.0.1:9/v1", "http://user:***@127.0.0.1:9/v1"),
        (f"http://127.0.0.1:9/v1?hf_token={KEY}", "http://127.0.0.1:9/v1?hf_token=***"),
        (f"http://127.0.0.1:9/v1?x-api-key={KEY}", "http://127.0.0.1:9/v1?x-api-key=***"),
        (f"http://127.0.0.1:9/v1?api-version=1#access_token={KEY}", "http://127.0.0.1:9/v1?api-version=***#***"),
        (f"http://127.0.0.1:9/v1?code={KEY}&{KEY}", "http://127.0.0.1:9/v1?code=***&***"),
    ],
)
def test_a_key_in_a_parameter_reaches_the_kernel_but_no_file(tmp_path, url, shown):
    """`reproduce --only 09_systems.llm_qa` with a key in `llm_endpoints` (as URL userinfo or a query value; the model is routed
    to a closed port, so the run fails fast after the kernel has read the real value) and in `HF_ENDPOINT`: the run
    folder, data/ and figures/, and everything printed, hold no key."""
    root = project_copy(tmp_path, ["09_systems.llm_qa"])
    env = clean_env(INDICIPR_ROOT=str(root), HF_ENDPOINT=f"http://user:{KEY}@127.0.0.1:9")
    run = root / "runs" / "r"
    rc, out, err = run_cli(
        "reproduce",
        "--only",
        "09_systems.llm_qa",
        "-p",
        "llm_endpoints",
        f"m={url}",
        "-p",
        "qa_models",
        '["m"]',
        "--run-dir",
        run,
        env=env,
        timeout=600,
    )
    assert rc == 1 and "09_systems.llm_qa" in err, out + err  # it ran, reached the model's server, failed there
    nb = json.loads((run / "notebooks" / "09_systems.llm_qa.ipynb").read_text())
    injected = "".join(next(c for c in nb["cells"] if "injected-parameters" in c["metadata"].get("tags", []))["source"])
    assert shown in injected and "INDICIPR_PARAMETER_llm_endpoints" in injected
    assert "127.0.0.1:9" in json.dumps(nb["cells"])  # the kernel used the endpoint (masked in its error)
    assert (run / "report" / "run.json").exists() and (run / "report" / "index.html").exists()
    assert shown in (run / "report" / "run.json").read_text()
    assert KEY not in out + err
    assert tree_with(root, KEY) == []
    rc, out, err = run_cli("info", "--data-source", "hub", env=env)
    assert rc == 2 and KEY not in out + err


# ------------------------------------------------------------------ 3. every mistake a sentence
@pytest.mark.parametrize(
    "content",
    [
        "",
        "[]",
        '{"data": [{"title": "t"}]}',
        '{"data": []}',
        json.dumps({"id": "x", "title": "t", "context": "", "question": "q"}) + "\n",
    ],
)
def test_a_gold_file_without_a_usable_record_is_a_sentence(tmp_path, capsys, content):
    gold = tmp_path / "gold.jsonl"
    gold.write_text(content)
    pred = write_preds(tmp_path / "p.jsonl")
    rc, _, err = run_main(capsys, "evaluate", "--gold", gold, "--pred", pred)
    assert rc == 2 and "Traceback" not in err and str(gold) in err, err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--resamples", "100000000"], "--resamples 100000000"),
        (["--resamples", "0"], "--resamples 0"),
        (["--seed", "-1"], "--seed -1"),
        (["--seed", str(2**40)], "--seed"),
    ],
)
def test_evaluate_numbers_out_of_range_are_sentences(tmp_path, capsys, argv, needle):
    pred = write_preds(tmp_path / "p.jsonl")
    rc, _, err = run_main(
        capsys, "evaluate", "--gold", GOLD, "--pred", pred, "--against", write_preds(tmp_path / "q.jsonl"), *argv
    )
    refused(rc, err, needle)


def test_pred_against_itself_is_refused(tmp_path, capsys):
    pred = write_preds(tmp_path / "p.jsonl")
    rc, _, err = run_main(capsys, "evaluate", "--gold", GOLD, "--pred", pred, "--against", pred)
    refused(rc, err, "--against", "--pred file itself")


def test_predictions_of_records_left_out_are_counted_apart(tmp_path, capsys):
    recs = gold_records()
    bad = [{**r, "question": ""} if i < 3 else r for i, r in enumerate(recs)]  # 3 records left out as problems
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps(r) + "\n" for r in bad))
    pred = write_preds(tmp_path / "p.jsonl", recs)
    rc, out, err = run_main(capsys, "evaluate", "--gold", gold, "--pred", pred)
    assert rc == 0, err
    assert "3 prediction(s) answer records left out" in err and "not in the gold split" not in err
    assert f"{len(recs) - 3} questions of" in out
    extra = write_preds(tmp_path / "x.jsonl", recs + [{**recs[0], "id": "zzz_999999"}])
    rc, _, err = run_main(capsys, "evaluate", "--gold", gold, "--pred", extra)
    refused(rc, err, "1 prediction id(s) not in the gold split: zzz_999999")


@pytest.mark.parametrize(
    "value, strict", [("on", True), ("off", False), ("yes", True), ("0", False), ("TRUE", True), ("", False)]
)
def test_indicipr_strict_reads_every_switch_word(monkeypatch, value, strict):
    monkeypatch.setenv(benchmark.STRICT_ENV, value)
    assert config.run_environment()["strict"] is strict


def test_indicipr_strict_refuses_other_words(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(benchmark.STRICT_ENV, "maybe")
    rc, _, err = run_main(capsys, "evaluate", "--gold", GOLD, "--pred", write_preds(tmp_path / "p.jsonl"))
    refused(rc, err, "INDICIPR_STRICT='maybe'", "on/off")


def test_audit_export_n_must_be_positive(capsys, tmp_path):
    rc, _, err = run_main(capsys, "audit", "export", "--data-source", QA_SMALL, "-n", "-5", "--out", tmp_path / "kit")
    refused(rc, err, "-n -5")
    assert not (tmp_path / "kit").exists()


@pytest.mark.parametrize("content", [b"\x00\xff\xfe binary \x00" * 50, b'{"not": "a section"}\n', b"just some words\n"])
def test_cleaner_check_on_a_file_that_is_not_sections(tmp_path, capsys, content):
    src = tmp_path / "odd.jsonl"
    src.write_bytes(content)
    rc, _, err = run_main(capsys, "cleaner-check", src)
    refused(rc, err, "odd.jsonl")


def test_train_an_unknown_model_offline_is_refused_at_once(capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t0 = time.time()
    rc, _, err = run_main(capsys, "train", "--models", "no-such-model", "--data-source", QA_SMALL)
    refused(rc, err, "--models no-such-model")
    assert time.time() - t0 < 30


# predict: a tiny random BERT, saved as the fine-tuning writes it
@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    import torch
    from transformers import BertConfig, BertForQuestionAnswering, BertModel

    from indicipr.systems import qa_model

    tok = qa_model.load_tokenizer("minilm-l6")
    torch.manual_seed(0)
    cfg = tiny_bert_config(num_hidden_layers=1)
    root = tmp_path_factory.mktemp("models")
    for name, cls in (("qa", BertForQuestionAnswering), ("base", BertModel)):
        cls(cfg).save_pretrained(root / name)
        tok.save_pretrained(root / name)
    wide = BertConfig(**{**cfg.to_dict(), "hidden_size": 64, "intermediate_size": 128})
    BertForQuestionAnswering(wide).save_pretrained(root / "wide")
    return root


def _model_copy(tiny_models, tmp_path, name="qa") -> Path:
    return Path(shutil.copytree(tiny_models / name, tmp_path / name))


def test_predict_refuses_a_model_without_a_qa_head(tiny_models, tmp_path, capsys):
    rc, _, err = run_main(
        capsys, "predict", "--model", tiny_models / "base", "--data-source", QA_SMALL, "--out", tmp_path / "p.jsonl"
    )
    refused(rc, err, "not a fine-tuned QA model", "indicipr train")
    assert not (tmp_path / "p.jsonl").exists()


@pytest.mark.parametrize("damage", ["corrupt", "truncated", "wrong shape"])
def test_predict_on_damaged_weights_is_a_sentence(tiny_models, tmp_path, capsys, damage):
    model = _model_copy(tiny_models, tmp_path)
    weights = model / "model.safetensors"
    data = weights.read_bytes()
    if damage == "corrupt":
        weights.write_bytes(b"\x13\x00\x00\x00\x00\x00\x00\x00{garbage" + data[20:])
    if damage == "truncated":
        weights.write_bytes(data[: len(data) // 2])
    if damage == "wrong shape":
        shutil.copy(tiny_models / "wide" / "model.safetensors", weights)
    rc, _, err = run_main(capsys, "predict", "--model", model, "--data-source", QA_SMALL, "--out", tmp_path / "p.jsonl")
    refused(rc, err, str(model))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_predict_on_unreadable_weights_says_so(tiny_models, tmp_path, capsys):
    model = _model_copy(tiny_models, tmp_path)
    os.chmod(model / "model.safetensors", 0)
    rc, _, err = run_main(capsys, "predict", "--model", model, "--data-source", QA_SMALL)
    refused(rc, err, "cannot be read (permission denied)")


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--batch-size", "-1"], "--batch-size -1"),
        (["--batch-size", "0"], "--batch-size 0"),
        (["--device", "bogus"], "--device 'bogus'"),
        (["--device", "cuda:7"], "--device cuda:7"),
    ],
)
def test_predict_options_are_checked(tiny_models, tmp_path, capsys, argv, needle):
    rc, _, err = run_main(capsys, "predict", "--model", tiny_models / "qa", "--data-source", QA_SMALL, *argv)
    refused(rc, err, needle)


def test_predict_device_cuda_without_a_gpu(tiny_models, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    rc, _, err = run_main(
        capsys, "predict", "--model", tiny_models / "qa", "--data-source", QA_SMALL, "--device", "cuda"
    )
    refused(rc, err, "--device cuda", "no such CUDA device")


def test_predict_with_a_qa_model_still_works(tiny_models, tmp_path, capsys):
    rc, out, err = run_main(
        capsys,
        "predict",
        "--model",
        tiny_models / "qa",
        "--data-source",
        QA_SMALL,
        "--out",
        tmp_path / "p.jsonl",
        "--batch-size",
        "8",
        "--device",
        "cpu",
    )
    assert rc == 0 and "F1" in out, err


# parameters: every -p value against its declared type, None defaults included
@pytest.mark.parametrize(
    "notebook, name, value, needle",
    [
        (
            "00h_data.benchmark_tables",
            "strict",
            "maybe",
            "strict of 00h_data.benchmark_tables takes true or false or null",
        ),
        (
            "11_analysis.error_analysis",
            "n_resamples",
            "abc",
            "n_resamples of 11_analysis.error_analysis takes an integer",
        ),
        ("04_build.split", "seed", "1.5", "seed of 04_build.split takes an integer"),
        ("06_scoring.metrics", "figures_dir", "5", "figures_dir of 06_scoring.metrics takes a string"),
    ],
)
def test_parameters_with_none_defaults_are_type_checked(tmp_path, capsys, notebook, name, value, needle):
    run = tmp_path / "run"
    rc, _, err = run_main(capsys, "reproduce", "--only", notebook, "-p", name, value, "--run-dir", run)
    refused(rc, err, needle)
    assert not run.exists()


def test_command_line_paths_are_the_users(tmp_path, monkeypatch):
    seen = {}
    monkeypatch.setattr(
        cli,
        "run_pipeline",
        lambda params, run_dir=None, notebooks=None, **_: seen.update(params, run_dir=run_dir) or [],
    )
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mybench").mkdir()
    assert (
        cli.main(
            [
                "reproduce",
                "--only",
                "05_build.stats",
                "--figures-dir",
                "out/figs",
                "--data-source",
                "mybench",
                "--run-dir",
                "r",
            ]
        )
        == 0
    )
    assert seen["figures_dir"] == str(tmp_path / "out/figs") and seen["data_source"] == str(tmp_path / "mybench")
    assert seen["run_dir"] == str(tmp_path / "r")


def test_build_with_a_bad_parameter_leaves_no_build_folder(root, capsys):
    rc, _, err = run_main(capsys, "build", "--tag", "t9", "-p", "bogus", "1", "--run-dir", root / "run")
    refused(rc, err, "bogus")
    assert not (root / "data" / "build" / "t9").exists()


@pytest.mark.slow
def test_hub_without_the_merged_file_or_the_repo_is_a_sentence(tmp_path):
    sys.path.insert(0, str(ROOT / "tests"))
    from standins.hub import serve_folders

    hub_root = tmp_path / "hub"
    data = hub_root / "datasets" / core.HUB_ID / "data"
    data.mkdir(parents=True)
    for split in ("train", "validation", "test"):
        shutil.copy(QA_SMALL / core.OFFICIAL_FILES[split], data)
    (tmp_path / "empty" / "datasets").mkdir(parents=True)
    for folder, needle in ((hub_root, "merged_ip_qa.jsonl"), (tmp_path / "empty", "has no dataset")):
        with serve_folders(folder) as hub:
            endpoint = hub.endpoint.replace("http://", f"http://user:{KEY}@")
            env = clean_env(HF_ENDPOINT=endpoint, HF_HOME=str(tmp_path / "hf"), HF_HUB_DISABLE_TELEMETRY="1")
            env.pop("HF_HUB_OFFLINE", None)
            for argv in (["fetch", "--dest", tmp_path / "bench"], ["info", "--data-source", "hub"]):
                rc, out, err = run_cli(*argv, env=env)
                assert rc == 2 and "Traceback" not in err and needle in err, err
                assert KEY not in out + err
    assert not (tmp_path / "bench").exists()


# ------------------------------------------------------------------ 4. runs never collide, nothing half-written stays
def test_run_folders_are_created_exclusively(tmp_path):
    got, barrier = [], threading.Barrier(8)

    def take():
        barrier.wait()
        got.append(runner.new_run_dir(tmp_path, "20260101-000000"))

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 8 and all(p.is_dir() for p in got)


@pytest.mark.slow
def test_two_runs_at_once_and_a_closed_pipe(tmp_path):
    "Two `reproduce --only 00h_data.benchmark_tables` at once write two run folders; the one whose reader left (`| head -1`) still reports."
    root = project_copy(tmp_path, ["00h_data.benchmark_tables"])
    env = clean_env(INDICIPR_ROOT=str(root))
    exe = BIN / "indicipr"
    piped = subprocess.Popen(
        f"'{exe}' reproduce --only 00h_data.benchmark_tables | head -1",
        shell=True,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    plain = subprocess.Popen(
        [str(exe), "reproduce", "--only", "00h_data.benchmark_tables"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out1, err1 = piped.communicate(timeout=600)
    out2, err2 = plain.communicate(timeout=600)
    assert plain.returncode == 0, err2
    assert len(out1.splitlines()) == 1 and "Traceback" not in err1, err1
    runs = sorted(
        p for p in (root / "runs").iterdir() if p.name != "interactive"
    )  # interactive: the scratch folder of direct runs
    assert len(runs) == 2, runs
    for run in runs:
        assert (run / "report" / "run.json").exists() and (run / "report" / "index.html").exists(), run
        assert json.loads((run / "report" / "run.json").read_text())["results"][0]["status"] == "ok"


KILLED_WRITER = textwrap.dedent("""
    import os, sys, time
    from indicipr.data import basics
    real_fsync = os.fsync
    def slow_fsync(fd): print("written", flush=True); time.sleep(60)
    os.fsync = slow_fsync
    basics.write_text_atomic(sys.argv[1], "new text")
""")


def test_a_killed_write_leaves_the_old_file_and_its_leftover_goes(tmp_path):
    victim = tmp_path / "victim.md"
    victim.write_text("old text")
    p = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(victim)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "written"
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert victim.read_text() == "old text" and len(list(tmp_path.glob(".victim.md.*.tmp"))) == 1
    basics.write_text_atomic(victim, "next")
    assert victim.read_text() == "next" and list(tmp_path.glob(".victim.md.*.tmp")) == []


def _fake_hub(monkeypatch, folder: Path):
    monkeypatch.setattr(benchmark, "hub_reachable", lambda *a, **k: True)
    monkeypatch.setattr(benchmark, "_hub_file", lambda name: (folder / name, f"hub:{name}"))


def _bench_state(dest: Path, old: Path, new: Path) -> str:
    "`old` or `new` when the official files of `dest` are all of one fetch, else `mixed` (or `missing`)."
    if not dest.exists():
        return "missing"
    names = list(core.OFFICIAL_FILES.values())
    for label, src in (("old", old), ("new", new)):
        if all((dest / n).read_bytes() == (src / n).read_bytes() for n in names):
            return label
    return "mixed"


@pytest.mark.parametrize("kill_at", [1, 2, 3])
def test_fetch_killed_while_moving_leaves_all_old_or_all_new(tmp_path, monkeypatch, kill_at):
    "A fetch killed at any rename after its verification leaves the folder all old or all new, and the next start tidies up."
    dest = shutil.copytree(QA_SMALL, tmp_path / "bench", ignore=shutil.ignore_patterns("*.py"))
    (dest / "notes.txt").write_text("mine")
    old = shutil.copytree(dest, tmp_path / "old")
    new = tmp_path / "new"
    new.mkdir()
    for name in core.OFFICIAL_FILES.values():
        (new / name).write_text((QA_SMALL / name).read_text().replace("patent office", "Patent Office"))
    _fake_hub(monkeypatch, new)
    moving, real_replace = [], os.replace

    def verified(folder, expected=None):
        moving.append(0)
        return {"test": 35}

    def killed_at(src, dst):
        if moving:
            moving.append(dst)
            if len(moving) - 1 == kill_at:
                raise KeyboardInterrupt("killed")
        return real_replace(src, dst)

    monkeypatch.setattr(benchmark, "verify_benchmark", verified)
    monkeypatch.setattr(benchmark.os, "replace", killed_at)
    try:
        benchmark.fetch_benchmark(dest)
    except KeyboardInterrupt:
        pass
    monkeypatch.setattr(benchmark.os, "replace", real_replace)
    for p in tmp_path.iterdir():  # as if the killed process were gone: its pid is free
        if p.name.startswith(".bench.") and f".{os.getpid()}." in p.name:
            p.rename(p.with_name(p.name.replace(f".{os.getpid()}.", ".999999999.")))
    getattr(basics, "tidy_swap_leftovers", lambda d: None)(dest)  # what the next start does first
    assert _bench_state(dest, old, new) in ("old", "new")
    assert (dest / "notes.txt").read_text() == "mine"
    moving.clear()
    benchmark.fetch_benchmark(dest)  # the next fetch: all new, the user's file kept, no leftover
    assert _bench_state(dest, old, new) == "new" and (dest / "notes.txt").read_text() == "mine"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".bench.")] == []


# ------------------------------------------------------------------ 5. linear in the predictions
def test_error_analysis_builds_no_pattern_from_a_prediction(monkeypatch):
    "`error_taxonomy._occurrences` finds texts with string search: no regular expression is compiled from a prediction."

    def no_pattern(*a, **k):
        raise AssertionError("a regular expression built from a prediction")

    for name in ("compile", "finditer", "search", "match", "findall", "escape"):
        monkeypatch.setattr(re, name, no_pattern)
    ctx = "The Registrar of Trade Marks (the Registrar) shall keep a register."
    assert error_taxonomy._occurrences("registrar of   TRADE marks", ctx) == [(4, 28)]
    assert error_taxonomy._occurrences("(the Registrar)", ctx) == [(29, 44)]
    assert error_taxonomy.locate_span("x" * 100_000, ctx) is None


def test_a_bootstrap_too_large_for_memory_is_refused(tmp_path, monkeypatch):
    "Resamples × questions beyond what the bootstrap can hold in memory is a sentence, not a MemoryError."
    monkeypatch.setattr(error_analysis, "MAX_BOOTSTRAP_CELLS", 35 * 100)
    pred, other = write_preds(tmp_path / "p.jsonl"), write_preds(tmp_path / "q.jsonl", text=lambda r: r["question"])
    with pytest.raises(core.InputError) as e:
        error_analysis.evaluate_files(GOLD, pred, [other], n_resamples=101)
    assert "--resamples 101: 35 questions allow at most 100 resamples" in str(e.value)
    assert "Paired bootstrap" in error_analysis.evaluate_files(GOLD, pred, [other], n_resamples=100)


# ------------------------------------------------------------------ 6. outputs that are not regular files; kept folders
def test_a_fifo_out_is_written_into_not_replaced(tmp_path, capsys):
    "`--out FIFO`: the report goes through the pipe to its reader; the FIFO stays a FIFO (no rename over it)."
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    rc, out, err = run_main(
        capsys, "evaluate", "--gold", GOLD, "--pred", write_preds(tmp_path / "p.jsonl"), "--out", fifo
    )
    reader.join(30)
    assert rc == 0, err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and got == [out.rstrip("\n") + "\n"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.jsonl", "pipe.md"]


def test_a_char_device_out_stays_a_device(tmp_path, capsys):
    "`--out /dev/null` as root: a rename would turn the device into a regular file. Checked on a /dev/null of our own."
    null = tmp_path / "null"
    try:
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError):
        pytest.skip("cannot make a device node here (not root, or no CAP_MKNOD)")
    basics.write_text_atomic(null, "nothing")
    rc, _, err = run_main(
        capsys, "evaluate", "--gold", GOLD, "--pred", write_preds(tmp_path / "p.jsonl"), "--out", null
    )
    assert rc == 0, err
    assert stat.S_ISCHR(os.stat(null).st_mode) and os.stat(null).st_rdev == os.makedev(1, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null", "p.jsonl"]  # no temporary file left
    # only now, with our own device kept, the machine's: a regression must not turn the real /dev/null into a file
    basics.write_text_atomic("/dev/null", "nothing")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_socket_out_is_a_sentence(tmp_path):
    import socket

    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        with pytest.raises(core.InputError, match="a socket, not a file"):
            basics.write_text_atomic(path, "x")
        assert stat.S_ISSOCK(os.stat(path).st_mode)


def _failing(monkeypatch, errno_: int, where: str = "fsync"):
    "Make the atomic writer's `where` (fsync: the disk fills; mkstemp: the folder is read-only) fail with `errno_`."
    import tempfile

    def fail(*a, **k):
        raise (
            OSError(errno_, os.strerror(errno_))
            if where == "fsync"
            else PermissionError(errno_, os.strerror(errno_), str(a[0] if a else k.get("dir")))
        )

    if where == "fsync":
        monkeypatch.setattr(basics.os, "fsync", fail)
    else:
        monkeypatch.setattr(tempfile, "mkstemp", fail)


def test_a_full_disk_is_one_sentence_and_keeps_the_old_report(tmp_path, capsys, monkeypatch):
    import errno

    report = tmp_path / "report.md"
    report.write_text("the earlier report\n")
    pred = write_preds(tmp_path / "p.jsonl")
    _failing(monkeypatch, errno.ENOSPC)
    rc, _, err = run_main(capsys, "evaluate", "--gold", GOLD, "--pred", pred, "--out", report)
    assert rc == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"{report}: No space left on device" in err and "nothing was written" in err
    assert report.read_text() == "the earlier report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.jsonl", "report.md"]  # no temporary file left


def test_a_full_device_as_out_is_a_sentence_naming_it(tmp_path, capsys):
    "`--out /dev/full`: the write fails when the report is flushed into the device; the sentence names the device."
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    pred = write_preds(tmp_path / "p.jsonl")
    rc, _, err = run_main(capsys, "evaluate", "--gold", GOLD, "--pred", pred, "--out", "/dev/full")
    assert rc == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "indicipr evaluate: /dev/full: No space left on device" in err, err
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode) and not os.path.exists("/dev/full.tmp")


def test_a_read_only_out_folder_is_a_sentence_naming_the_out(tmp_path, capsys, monkeypatch):
    import errno

    pred = write_preds(tmp_path / "p.jsonl")
    _failing(monkeypatch, errno.EACCES, "mkstemp")
    rc, _, err = run_main(capsys, "evaluate", "--gold", GOLD, "--pred", pred, "--out", tmp_path / "ro" / "r.md")
    refused(rc, err, f"{tmp_path / 'ro' / 'r.md'}: Permission denied")
    assert ".tmp" not in err


def test_audit_export_keeps_a_folder_that_holds_files(tmp_path, capsys):
    kit = tmp_path / "kit"
    kit.mkdir()
    (kit / "README.md").write_text("my notes")
    args = ("audit", "export", "--data-source", QA_SMALL, "-n", 4, "--out", kit)
    rc, _, err = run_main(capsys, *args)
    refused(rc, err, f"--out {kit}: already holds files", "--force")
    assert [p.name for p in kit.iterdir()] == ["README.md"] and (kit / "README.md").read_text() == "my notes"
    rc, _, err = run_main(capsys, *args, "--force")
    assert rc == 0, err
    assert (kit / "blank").is_dir() and (kit / "README.md").read_text() != "my notes"
    rc, _, err = run_main(capsys, "audit", "export", "--data-source", QA_SMALL, "-n", 4, "--out", tmp_path / "new")
    assert rc == 0 and (tmp_path / "new" / "manifest.json").is_file(), err


def test_no_command_writes_the_committed_sample_or_figures(tmp_path, capsys, monkeypatch):
    "`data/sample/` and `figures/` are the main job's: every output option refuses them, through a symlink too."
    monkeypatch.delenv(core.MAIN_JOB_ENV, raising=False)
    sample, figures = core.data_dir() / "sample", core.project_root() / "figures"
    (tmp_path / "link").symlink_to(sample)
    before = {p: p.read_bytes() for d in (sample, figures) for p in d.rglob("*") if p.is_file()}
    pred = write_preds(tmp_path / "p.jsonl")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    for argv in [
        ("fetch", "--dest", sample),
        ("fetch", "--dest", tmp_path / "link"),
        ("fetch", "--dest", core.data_dir()),  # holds data/sample/
        ("audit", "export", "--data-source", QA_SMALL, "--out", sample / "statutes", "--force"),
        ("evaluate", "--gold", GOLD, "--pred", pred, "--out", figures / "tables" / "x.md"),
        ("evaluate", "--gold", GOLD, "--pred", pred, "--out", tmp_path / "link" / "report.md"),
        ("predict", "--model", model, "--data-source", QA_SMALL, "--out", sample / "test.jsonl"),
        ("audit", "score", pred, pred, "--figures-dir", figures),
        ("reproduce", "--only", "06_scoring.metrics", "--run-dir", figures / "run"),
        ("reproduce", "--only", "06_scoring.metrics", "--figures-dir", sample / "figs", "--run-dir", tmp_path / "r"),
        ("build", "--tag", "t", "--figures-dir", figures, "--run-dir", tmp_path / "b"),
    ]:
        rc, _, err = run_main(capsys, *argv)
        refused(rc, err, "which only the sample's own rebuild (indicipr reproduce, the main job) writes")
    assert {p: p.read_bytes() for d in (sample, figures) for p in d.rglob("*") if p.is_file()} == before
    assert not (tmp_path / "r").exists() and not (tmp_path / "b").exists()


def test_fetch_into_a_folder_above_the_working_folder_is_a_sentence(tmp_path, capsys, monkeypatch):
    here = tmp_path / "a" / "b"
    here.mkdir(parents=True)
    monkeypatch.chdir(here)
    _fake_hub(monkeypatch, QA_SMALL)
    for dest in ("..", ".", str(tmp_path)):
        rc, _, err = run_main(capsys, "fetch", "--dest", dest)
        refused(rc, err, "--dest", f"holds {here}", "a folder of its own")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "b"]


# ------------------------------------------------------------------ 7. inputs no reader expects; numbers out of range
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("form", ["pred json", "pred jsonl", "gold jsonl", "gold json", "data source"])
def test_deeply_nested_json_is_a_sentence(tmp_path, capsys, form):
    pred = write_preds(tmp_path / "p.jsonl")
    gold = shutil.copy(GOLD, tmp_path / "gold.jsonl")
    bad = tmp_path / ("x.json" if form.endswith("json") else "x.jsonl")
    bad.write_text(DEEP if form.endswith("json") else Path(GOLD).read_text().splitlines()[0] + "\n" + DEEP + "\n")
    if form == "data source":
        bench = shutil.copytree(QA_SMALL, tmp_path / "bench")
        (bench / "test_squad.jsonl").write_text(bad.read_text())
        rc, _, err = run_main(capsys, "info", "--data-source", bench, "--strict")
        name = "test_squad.jsonl:2: malformed JSON: nested too deeply to read"
    else:
        argv = ["--gold", bad, "--pred", pred] if form.startswith("gold") else ["--gold", gold, "--pred", bad]
        rc, _, err = run_main(capsys, "evaluate", *argv)
        name = bad.name
    refused(rc, err, name)
    assert "RecursionError" not in err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["audit", "export", "--seed", "-1"], "--seed -1"),
        (["train", "--seeds", "-1"], "--seeds must be from 0"),
        (["train", "--seeds", "0", "-1"], "--seeds must be from 0"),
        (["train", "--epochs", "-1"], "--epochs must be > 0, got -1.0"),
        (["train", "--epochs", "nan"], "--epochs must be > 0, got nan"),
        (["train", "--max-steps", "0"], "--max-steps must be ≥ 1, got 0"),
        (["train", "--max-answer-length", "-4"], "--max-answer-length must be ≥ 1, got -4"),
        (["train", "--workers", "abc"], "--workers abc: give a count"),
        (["train", "--workers", "0"], "--workers must be from 1 to 256, 'auto'"),
        (["cleaner-check", "--show", "-1"], "--show -1"),
        (
            ["reproduce", "--only", "09_systems.llm_qa", "-p", "max_questions", "-3"],
            "parameter max_questions must be ≥ 1 or None",
        ),
        (["reproduce", "--only", "08", "-p", "max_steps", "0"], "parameter max_steps must be ≥ 1 or None"),
        (["reproduce", "--only", "08", "-p", "seeds", "[0, -2]"], "parameter seeds must be from 0"),
        (
            ["reproduce", "--only", "08", "-p", "workers", "0"],
            "parameter workers must be from 1 to 256, 'auto' or None",
        ),
        (["reproduce", "--only", "12", "-p", "audit_pairs", "-1"], "parameter audit_pairs must be ≥ 1 or None"),
    ],
)
def test_numbers_out_of_range_are_refused_before_any_work(tmp_path, capsys, monkeypatch, argv, needle):
    monkeypatch.setattr(runner, "ensure_kernel", lambda *a: pytest.fail("a kernel was started"))
    extra = ["--run-dir", tmp_path / "run"] if argv[0] == "reproduce" else []
    extra += ["--out", tmp_path / "kit"] if argv[:2] == ["audit", "export"] else []
    t0 = time.time()
    rc, _, err = run_main(capsys, *argv, *extra)
    refused(rc, err, needle)
    assert time.time() - t0 < 30 and not (tmp_path / "run").exists() and not (tmp_path / "kit").exists()


def test_a_negative_llm_timeout_is_refused_before_a_kernel_starts(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("INDICIPR_LLM_TIMEOUT", "-5")
    monkeypatch.setattr(runner, "ensure_kernel", lambda *a: pytest.fail("a kernel was started"))
    rc, _, err = run_main(capsys, "reproduce", "--only", "09_systems.llm_qa", "--run-dir", tmp_path / "run")
    refused(rc, err, "INDICIPR_LLM_TIMEOUT", "'-5'")
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------ 8. keys in query names and in URL-like paths
@pytest.mark.parametrize(
    "name",
    ["hf_token", "auth", "x-api-key", "access_token", "sig", "X-Amz-Signature", "client_secret", "pwd", "apiKey"],
)
def test_a_key_under_any_credential_query_name_is_masked(name):
    url = f"http://host/v1?model=m&{name}={KEY}&x=1"
    assert KEY not in basics.mask_secrets(url) and "model=***" in basics.mask_secrets(url)
    assert KEY in {p for p in basics.secret_parts(url)}


def test_what_is_stored_of_an_endpoint_masks_every_query_value():
    ep = llm.Endpoint(f"http://host/v1?deployment=gpt&opaque={KEY}", "m")
    assert KEY not in ep.stored_url and "deployment=***" in ep.stored_url
    shown, env = runner.kernel_parameters({"llm_endpoints": f"m=http://h/v1?opaque={KEY}"})
    assert KEY not in str(shown) and KEY in json.dumps(env)


@pytest.mark.parametrize(
    "argv",
    [
        ["info", "--data-source", f"http://user:{KEY}@127.0.0.1:9/data"],
        ["evaluate", "--gold", GOLD, "--pred", f"http://user:{KEY}@127.0.0.1:9/p.jsonl"],
        ["predict", "--model", f"http://user:{KEY}@127.0.0.1:9/model"],
        ["evaluate", "--gold", GOLD, "--pred", f"http:/user:{KEY}@127.0.0.1:9/p.jsonl"],
    ],
)
def test_a_key_in_a_url_like_path_is_never_printed(argv):
    rc, out, err = run_cli(*argv, env=clean_env(HF_HUB_OFFLINE="1"))
    assert rc == 2 and "Traceback" not in err, err
    assert KEY not in out + err and "***" in err, err


def test_a_key_in_a_url_like_out_is_masked_in_what_is_printed(tmp_path):
    "A URL given where a folder belongs is refused, masked in the sentence, and makes no local folder `http:`."
    rc, out, err = run_cli(
        "audit", "export", "--data-source", QA_SMALL, "-n", 4, "--out", f"http://user:{KEY}@h/kit", cwd=tmp_path
    )
    assert rc == 2 and KEY not in out + err, err
    assert err.startswith("indicipr audit: --out http://user:***@h/kit: a folder is a local path, not a URL"), err
    assert list(tmp_path.iterdir()) == []
