"""The official files as the hub may really serve them, and the mistakes a user makes: each is named in one
sentence (file, line, record, option or parameter), exits 2 without a traceback, and loses nothing.

The files are the `qa_small` fixture (real statute text), reshaped the way releases and editors reshape files: columns
beyond the schema, a UTF-8 byte-order mark, CRLF line ends, SQuAD v1.1's nested JSON, flat `answer` records, one record
whose `answer_start` is off by one."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))  # tests/, where standins/ lives
from helpers import BIN, QA_SMALL, ROOT, read_qa_small_all, write_prediction_file  # noqa: E402
from standins.hub import serve_folders  # noqa: E402

from indicipr.data import benchmark, core, qa_files  # noqa: E402
from indicipr.run import cli, runner

HUB_ID = core.HUB_ID


def run_cli(*args, env=None, cwd=None, timeout=300, umask=None):
    "`indicipr ARGS` in a subprocess: (exit status, stdout, stderr)."
    cmd = [str(BIN / "indicipr"), *map(str, args)]
    pre = (lambda: os.umask(umask)) if umask is not None else None
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout, preexec_fn=pre)
    return r.returncode, r.stdout, r.stderr


def copy_official(dest: Path) -> Path:
    "The fixture's four official files in `dest`."
    dest.mkdir(parents=True, exist_ok=True)
    for name in core.OFFICIAL_FILES.values():
        shutil.copy(QA_SMALL / name, dest / name)
    return dest


def write_records(path: Path, records, bom=False, eol="\n") -> Path:
    path.write_text(
        ("\ufeff" if bom else "") + "".join(json.dumps(r, ensure_ascii=False) + eol for r in records), encoding="utf-8"
    )
    return path


def off_by_one(folder: Path, split: str = "train", index: int = 1) -> dict:
    "Shift one record's `answer_start` by one in `folder`'s file of `split`; returns the record as it was."
    path = folder / core.OFFICIAL_FILES[split]
    recs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rec = recs[index]
    recs[index] = {**rec, "answers": {**rec["answers"], "answer_start": [rec["answers"]["answer_start"][0] + 1]}}
    write_records(path, recs)
    return rec


def no_traceback(err: str) -> bool:
    return "Traceback" not in err and 'File "' not in err


# ---------------------------------------------------------------- the hub's files
def test_the_merged_file_with_extra_columns_loads_from_the_hub_standin(tmp_path):
    "load_benchmark('hub', merged=True) through the hub stand-in, the merged file carrying columns the split files lack."
    repo = tmp_path / "hub" / "datasets" / HUB_ID / "data"
    copy_official(repo)
    merged = [
        {**r, "act": core.act_label(core.record_act(r)), "question_type": "definition", "split": s, "section": "1"}
        for s in ("train", "validation", "test")
        for r in read_qa_small_all()[s]
    ]
    write_records(repo / core.OFFICIAL_FILES["merged"], merged)
    for s in ("train", "validation"):
        write_records(repo / core.OFFICIAL_FILES[s], read_qa_small_all()[s], bom=True)
    script = (
        "import json; from indicipr.data import benchmark\n"
        "dd = benchmark.load_benchmark('hub', merged=True)\n"
        "print('SIZES', json.dumps({k: len(v) for k, v in dd.items()}))"
    )
    with serve_folders(tmp_path / "hub") as hub:
        env = {
            **os.environ,
            "HF_ENDPOINT": hub.endpoint,
            "HF_HOME": str(tmp_path / "hf"),
            "HF_HUB_DISABLE_TELEMETRY": "1",
        }
        for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
            env.pop(k, None)
        r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
        seen = hub.paths_seen()
    assert r.returncode == 0, r.stderr[-3000:]
    sizes = json.loads(r.stdout.split("SIZES ", 1)[1])
    want = {s: len(v) for s, v in read_qa_small_all().items()}
    assert sizes == want, (sizes, want)
    assert "merged_ip_qa.jsonl has columns beyond the schema: act, question_type, section, split" in r.stderr, r.stderr
    assert any("merged_ip_qa.jsonl" in p for p in seen), seen[-10:]  # its own download


def test_an_act_column_is_the_act(tmp_path):
    "When every record carries the Act (by the card's name), it is read, better than inference from unknown prefixes."
    folder = copy_official(tmp_path / "bench")
    for split, name in core.OFFICIAL_FILES.items():
        recs = read_qa_small_all()[split]
        write_records(
            folder / name,
            [{**r, "id": r["id"].replace("pat_", "zzz_"), "Act": core.act_label(core.record_act(r))} for r in recs],
        )
    b = benchmark.load_benchmark(folder, merged=True, strict=False, verbose=False, as_dataset=False)
    assert b.acts_how == "the files' Act column"
    assert {r["act"] for r in b.splits["merged"] if r["id"].startswith("zzz_")} == {"patents"}


# ---------------------------------------------------------------- validate, report, go on
@pytest.mark.slow
def test_an_off_by_one_offset_in_train_still_scores_the_test_split(tmp_path):
    folder = copy_official(tmp_path / "bench")
    rec = off_by_one(folder)
    test = read_qa_small_all()["test"]
    preds = write_prediction_file(tmp_path / "p.jsonl", {r["id"]: r["answers"]["text"][0] for r in test})
    rc, out, err = run_cli("evaluate", "--gold", "test", "--data-source", folder, "--pred", preds)
    assert rc == 0 and "# Evaluation of p" in out, err
    right = rec["answers"]["answer_start"][0]
    assert f"train_squad.jsonl:2 (id {rec['id']!r})" in err and f"(the text occurs at {right})" in err, err
    assert "train_squad.jsonl" not in out  # diagnostics on stderr, results on stdout
    rc, out, err = run_cli("evaluate", "--gold", "test", "--data-source", folder, "--pred", preds, "--strict")
    assert rc == 2 and "train_squad.jsonl:2" in err and no_traceback(err), err


def test_training_repairs_an_offset_that_occurs_once_and_leaves_the_rest_out():
    recs = read_qa_small_all()["train"][:3]
    shifted = [{**r, "answers": {**r["answers"], "answer_start": [r["answers"]["answer_start"][0] + 1]}} for r in recs]
    lost = {**recs[0], "answers": {"text": ["no such words anywhere"], "answer_start": [0]}}
    kept, repaired, left_out = qa_files.training_records([*shifted, lost])
    assert (len(kept), left_out) == (3, 1) and repaired == 3
    assert [r["answers"]["answer_start"] for r in kept] == [r["answers"]["answer_start"] for r in recs]


@pytest.mark.slow
def test_leaks_and_a_merged_file_that_is_not_the_union_are_reported(tmp_path, capsys):
    folder = copy_official(tmp_path / "bench")
    splits = read_qa_small_all()
    write_records(folder / core.OFFICIAL_FILES["test"], splits["test"] + splits["train"][:1])  # a train record in test
    write_records(folder / core.OFFICIAL_FILES["merged"], splits["merged"][:-2])  # two records short
    benchmark.load_benchmark(folder, merged=True)
    err = capsys.readouterr().err
    assert "the same id is in train and test" in err and "also in train" in err and "not the union" in err, err
    rc, out, err = run_cli("info", "--data-source", folder)
    assert rc == 0 and "leak" in err and "the same id is in train and test" not in out and "test" in out, (out, err)
    rc, _, err = run_cli("info", "--data-source", folder, "--strict")
    assert rc == 2 and no_traceback(err)


# ---------------------------------------------------------------- ordinary file shapes
def test_bom_and_crlf_files_load_and_score(tmp_path):
    folder = copy_official(tmp_path / "bench")
    for split, name in core.OFFICIAL_FILES.items():
        write_records(folder / name, read_qa_small_all()[split], bom=True, eol="\r\n")
    dd = benchmark.load_benchmark(folder, merged=True)
    assert {k: len(v) for k, v in dd.items()} == {s: len(v) for s, v in read_qa_small_all().items()}
    test = read_qa_small_all()["test"]
    preds = tmp_path / "p.jsonl"
    preds.write_bytes(
        b"\xef\xbb\xbf"
        + "".join(
            json.dumps({"id": r["id"], "prediction_text": r["answers"]["text"][0]}) + "\r\n" for r in test
        ).encode()
    )
    rc, out, err = run_cli("evaluate", "--gold", folder / "test_squad.jsonl", "--pred", preds)
    assert rc == 0 and "| p " in out and "100.00" in out, err


def test_a_squad_v11_nested_gold_file_scores(tmp_path):
    test = read_qa_small_all()["test"]
    data = [
        {
            "title": r["title"],
            "paragraphs": [
                {
                    "context": r["context"],
                    "qas": [
                        {
                            "id": r["id"],
                            "question": r["question"],
                            "answers": [
                                {"text": t, "answer_start": s}
                                for t, s in zip(r["answers"]["text"], r["answers"]["answer_start"])
                            ],
                        }
                    ],
                }
            ],
        }
        for r in test
    ]
    gold = tmp_path / "dev-v1.1.json"
    gold.write_text(json.dumps({"version": "1.1", "data": data}))
    preds = write_prediction_file(tmp_path / "p.json", {r["id"]: r["answers"]["text"][0] for r in test})
    rc, out, err = run_cli("evaluate", "--gold", gold, "--pred", preds)
    assert rc == 0 and f"{len(test)} questions of" in out and "100.00" in out, err


def test_flat_records_and_jsonl_named_json_are_read(tmp_path):
    test = read_qa_small_all()["test"]
    flat = tmp_path / "gold.json"  # JSONL content under a .json name, flat answer fields
    flat.write_text(
        "".join(
            json.dumps(
                {
                    **{k: v for k, v in r.items() if k != "answers"},
                    "answer": r["answers"]["text"][0],
                    "answer_start": r["answers"]["answer_start"][0],
                }
            )
            + "\n"
            for r in test
        )
    )
    preds = write_prediction_file(tmp_path / "p.json", {r["id"]: r["answers"]["text"][0] for r in test})
    rc, out, err = run_cli("evaluate", "--gold", flat, "--pred", preds)
    assert rc == 0 and "100.00" in out, err


def test_a_file_of_no_known_form_names_the_forms(tmp_path):
    odd = tmp_path / "gold.json"
    odd.write_text(json.dumps({"version": 2, "rows": [1, 2]}))
    rc, _, err = run_cli("evaluate", "--gold", odd, "--pred", odd)
    assert rc == 2 and "cannot tell the form" in err and "SQuAD v1.1" in err and no_traceback(err), err


# ---------------------------------------------------------------- every mistake gets a sentence
@pytest.fixture
def gold_and_preds(tmp_path):
    test = read_qa_small_all()["test"]
    return QA_SMALL / "test_squad.jsonl", write_prediction_file(
        tmp_path / "p.jsonl", {r["id"]: r["answers"]["text"][0] for r in test}
    )


@pytest.mark.parametrize(
    "content,needle",
    [
        ("", "no predictions"),
        ("[]", "no predictions"),
        ("{}", "no predictions"),
        (b"\x89PNG\r\n\x1a\n\xff\xfe\x00", "not UTF-8 text"),
    ],
)
def test_empty_or_binary_predictions_exit_2_naming_the_file(tmp_path, gold_and_preds, content, needle):
    gold, _ = gold_and_preds
    bad = tmp_path / "preds.json"
    bad.write_bytes(content if isinstance(content, bytes) else content.encode())
    rc, _, err = run_cli("evaluate", "--gold", gold, "--pred", bad)
    assert rc == 2 and str(bad) in err and needle in err and no_traceback(err), err


@pytest.mark.parametrize("encoding", ["utf-16-be", "utf-16-le"])
@pytest.mark.parametrize("name", ["preds.csv", "preds.jsonl", "gold.jsonl"])
def test_utf16_without_a_byte_order_mark_is_named_not_read_as_nuls(tmp_path, gold_and_preds, encoding, name):
    "UTF-16 text without a BOM decodes as UTF-8 with a NUL beside each ASCII letter: refused, naming the file."
    gold, preds = gold_and_preds
    source = gold if name == "gold.jsonl" else preds
    text = Path(source).read_text(encoding="utf-8")
    if name == "preds.csv":
        text = "id,prediction\n" + "".join(
            f"{r['id']},{json.dumps(r['prediction_text'])}\n" for r in map(json.loads, text.split("\n")[:-1])
        )
    bad = tmp_path / name
    bad.write_bytes(text.encode(encoding))
    args = ["--gold", bad, "--pred", preds] if name == "gold.jsonl" else ["--gold", gold, "--pred", bad]
    rc, _, err = run_cli("evaluate", *args)
    assert rc == 2 and no_traceback(err), err
    assert f"{bad}: not UTF-8 text (a NUL character" in err and encoding.upper() in err, err


@pytest.mark.parametrize("gold_form,pred_form", [("NFC", "NFD"), ("NFD", "NFC")])
def test_an_id_in_another_unicode_form_is_the_same_id(tmp_path, gold_form, pred_form):
    "Ids with an accent: the gold file in one normal form, the predictions in the other; every question is answered."
    import unicodedata

    test = read_qa_small_all()["test"]
    ids = {r["id"]: f"café_{r['id']}" for r in test}
    gold = write_records(
        tmp_path / "gold.jsonl", [{**r, "id": unicodedata.normalize(gold_form, ids[r["id"]])} for r in test]
    )
    preds = write_prediction_file(
        tmp_path / "p.jsonl", {unicodedata.normalize(pred_form, ids[r["id"]]): r["answers"]["text"][0] for r in test}
    )
    rc, out, err = run_cli("evaluate", "--gold", gold, "--pred", preds, "--resamples", "20")
    assert rc == 0 and "no prediction" not in err and "not in the gold split" not in err, err
    assert "| 100.00 |" in out, out


def test_partial_predictions_warn_with_the_count(tmp_path, gold_and_preds):
    gold, _ = gold_and_preds
    test = read_qa_small_all()["test"]
    part = write_prediction_file(tmp_path / "part.jsonl", {r["id"]: r["answers"]["text"][0] for r in test[:3]})
    rc, out, err = run_cli("evaluate", "--gold", gold, "--pred", part)
    assert rc == 0 and f"{len(test) - 3} of {len(test)} questions" in err and "warning" in err and "warning" not in out


def test_unknown_ids_are_reported_under_the_file(tmp_path, gold_and_preds):
    gold, _ = gold_and_preds
    other = write_prediction_file(tmp_path / "other_run.jsonl", {"zz_000001": "x"})
    rc, _, err = run_cli("evaluate", "--gold", gold, "--pred", other)
    assert rc == 2 and str(other) in err and "zz_000001" in err


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--pred", "{dir}"], "Is a directory"),
        (["--pred", "{preds}", "--out", "{dir}"], "--out"),
        (["--pred", "{preds}", "--resamples", "0"], "--resamples 0"),
        (["--pred", "{preds}", "--resamples", "-5"], "--resamples -5"),
        (["--pred", "{dir}/none.jsonl"], "none.jsonl"),
    ],
)
def test_evaluate_options_get_a_sentence(tmp_path, gold_and_preds, args, needle):
    gold, preds = gold_and_preds
    filled = [a.format(dir=tmp_path, preds=preds) for a in args]
    rc, _, err = run_cli("evaluate", "--gold", gold, *filled)
    assert rc == 2 and needle in err and no_traceback(err), err


@pytest.mark.slow
def test_predict_on_a_folder_that_is_not_a_model(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{broken")
    rc, _, err = run_cli("predict", "--model", model, "--data-source", QA_SMALL)
    assert rc == 2 and "config.json: not valid JSON" in err and no_traceback(err), err
    (model / "config.json").write_text("{}")
    rc, _, err = run_cli("predict", "--model", model, "--data-source", QA_SMALL)
    assert rc == 2 and "no model weights" in err and no_traceback(err), err


@pytest.mark.slow  # torch and transformers imported for train: tens of seconds on a loaded machine
def test_a_model_config_nested_too_deeply_is_named(tmp_path):
    "`predict --model` and `train --models` on a folder whose config.json nests deeper than the reader goes."
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    for command in (["predict", "--model", model], ["train", "--models", model, "--max-steps", "1"]):
        rc, _, err = run_cli(*command, "--data-source", QA_SMALL)
        assert rc == 2 and no_traceback(err), err
        assert f"{model / 'config.json'}: not valid JSON (nested too deeply to read" in err, err


def test_output_piped_into_head_is_not_an_error(tmp_path, gold_and_preds):
    gold, preds = gold_and_preds
    r = subprocess.run(
        f"'{BIN / 'indicipr'}' evaluate --gold '{gold}' --pred '{preds}' --resamples 50 | head -n 1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.stdout.startswith("# Evaluation of p") and "BrokenPipe" not in r.stderr and no_traceback(r.stderr), (
        r.stderr
    )


def test_a_parameter_of_the_wrong_type_stops_the_run_before_it_starts(tmp_path):
    rc, out, err = run_cli(
        "reproduce", "--only", "05_build.stats", "-p", "top_n_openings", "abc", "--run-dir", tmp_path / "run"
    )
    assert (
        rc == 2
        and "top_n_openings of 05_build.stats takes an integer, got 'abc'" in err
        and not (tmp_path / "run").exists()
    ), err


def test_a_key_in_a_url_is_masked_in_the_preflight_error(tmp_path):
    env = {**os.environ, "INDICIPR_LLM_ENDPOINTS": "smollm2x=http://user:sk-SECRET-KEY-1@127.0.0.1:9/v1"}
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "from indicipr.data import config\n"
            "from indicipr.llm import client as llm, servers as llm_servers\n"
            "routes = config.run_environment()['llm_endpoints']\n"  # what a run's context reads
            "try: llm_servers.check_models_available(llm_servers.llm_config(routes), ['smollm2x'], timeout=1)\n"
            "except llm.LLMConfigError as e: print('ERR', e)",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "ERR" in r.stdout and "sk-SECRET-KEY-1" not in r.stdout + r.stderr and "user:***@127.0.0.1:9" in r.stdout, (
        r.stdout
    )


def test_an_audit_sheet_against_itself_and_a_semicolon_sheet(tmp_path):
    kit = tmp_path / "kit"
    assert cli.main(["audit", "export", "--data-source", str(QA_SMALL), "-n", "4", "--out", str(kit)]) == 0
    sheet = kit / "blank" / "sheet_A.csv"
    rc, _, err = run_cli("audit", "score", sheet, sheet)
    assert rc == 2 and "the same sheet given twice" in err and no_traceback(err), err


# ---------------------------------------------------------------- nothing lost, nothing hidden
@pytest.mark.slow
def test_every_file_the_project_writes_is_0644_under_umask_022(tmp_path, gold_and_preds):
    "Tables, figures, the report, run.json, evaluate --out, the audit kit, predictions: all readable by others."
    gold, preds = gold_and_preds
    figs, run = tmp_path / "figs", tmp_path / "run"
    rc, _, err = run_cli(
        "reproduce",
        "--only",
        "00h_data.benchmark_tables,06_scoring.metrics",
        "--figures-dir",
        figs,
        "--run-dir",
        run,
        umask=0o022,
        timeout=600,
    )
    assert rc == 0, err
    rc, _, err = run_cli(
        "evaluate",
        "--gold",
        gold,
        "--pred",
        preds,
        "--out",
        tmp_path / "eval" / "report.md",
        "--resamples",
        "50",
        umask=0o022,
    )
    assert rc == 0, err
    rc, _, err = run_cli(
        "audit", "export", "--data-source", QA_SMALL, "-n", "4", "--out", tmp_path / "kit", umask=0o022
    )
    assert rc == 0, err
    env = {**os.environ, "INDICIPR_ROOT": str(tmp_path / "root")}
    (tmp_path / "root").mkdir()
    shutil.copy(ROOT / "settings.ini", tmp_path / "root")
    (tmp_path / "root" / "indicipr").mkdir()
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "from indicipr.scoring import predictions\nfrom indicipr.data.config import run_context\npredictions.write_predictions({'a_1': 'x'}, 'demo', run_context().predictions, family='t')",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: os.umask(0o022),
    )
    assert r.returncode == 0, r.stderr
    written = [
        p
        for d in (
            figs,
            run,
            tmp_path / "eval",
            tmp_path / "kit",
            tmp_path / "root" / "data",
            tmp_path / "root" / "runs",
        )
        for p in d.rglob("*")
        if p.is_file()
    ]
    assert len(written) > 20
    wrong = {
        str(p.relative_to(tmp_path)): oct(p.stat().st_mode & 0o777)
        for p in written
        if p.stat().st_mode & 0o777 != 0o644
    }
    assert not wrong, wrong


def test_fetch_verifies_in_a_temporary_folder_before_it_replaces_a_good_copy(tmp_path):
    repo = tmp_path / "hub" / "datasets" / HUB_ID / "data"
    copy_official(repo)  # the fixture: not the card's counts, so verification fails
    dest = copy_official(tmp_path / "good")
    before = {p.name: p.read_bytes() for p in dest.iterdir()}
    with serve_folders(tmp_path / "hub") as hub:
        env = {**os.environ, "HF_ENDPOINT": hub.endpoint, "HF_HOME": str(tmp_path / "hf")}
        env.pop("HF_HUB_OFFLINE", None)
        rc, _, err = run_cli("fetch", "--dest", dest, env=env)
    assert rc == 2 and "counts differ from the official release" in err and no_traceback(err), err
    assert {p.name: p.read_bytes() for p in dest.iterdir()} == before  # untouched
    assert not [p for p in tmp_path.iterdir() if ".fetch." in p.name]  # no temporary folder left behind


@pytest.mark.parametrize("fault", ["redirect_loop", "cut_short"])
def test_fetch_names_a_download_that_loops_or_is_cut_short(tmp_path, fault):
    "A hub that redirects a file to itself, or ends its body early: one sentence naming the file, exit 2, dest untouched."
    repo = tmp_path / "hub" / "datasets" / HUB_ID / "data"
    copy_official(repo)
    dest = copy_official(tmp_path / "good")
    before = {p.name: p.read_bytes() for p in dest.iterdir()}
    name = core.OFFICIAL_FILES["test"]
    with serve_folders(tmp_path / "hub", faults={f"data/{name}": fault}) as hub:
        env = {**os.environ, "HF_ENDPOINT": hub.endpoint, "HF_HOME": str(tmp_path / "hf")}
        env.pop("HF_HUB_OFFLINE", None)
        rc, _, err = run_cli("fetch", "--dest", dest, env=env)
    assert rc == 2 and no_traceback(err), err
    last = err.strip().splitlines()[-1]  # before it, the hub client's own lines about its retries
    assert last.startswith(f"indicipr fetch: data/{name} of {HUB_ID} could not be downloaded"), err
    assert {p.name: p.read_bytes() for p in dest.iterdir()} == before
    assert not [p for p in tmp_path.iterdir() if ".fetch." in p.name]


def test_ctrl_c_in_fetch_is_one_line_and_exit_130(tmp_path):
    "Ctrl-C (SIGINT to the process group, as a terminal sends it) halfway through a download: dest untouched."
    import signal
    import time

    repo = tmp_path / "hub" / "datasets" / HUB_ID / "data"
    copy_official(repo)
    dest = copy_official(tmp_path / "good")
    before = {p.name: p.read_bytes() for p in dest.iterdir()}
    name = core.OFFICIAL_FILES["test"]
    with serve_folders(tmp_path / "hub", faults={f"data/{name}": "stall"}) as hub:
        env = {**os.environ, "HF_ENDPOINT": hub.endpoint, "HF_HOME": str(tmp_path / "hf")}
        env.pop("HF_HUB_OFFLINE", None)
        p = subprocess.Popen(
            [str(BIN / "indicipr"), "fetch", "--dest", str(dest)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while not any(m == "GET" and p_.endswith(name) for m, p_, _ in list(hub.requests)):
            assert time.monotonic() < deadline and p.poll() is None, p.communicate()
            time.sleep(0.1)
        time.sleep(0.5)  # in the middle of the body
        os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=120)
    assert p.returncode == 130 and no_traceback(err), (p.returncode, err)
    assert err.strip().splitlines()[-1] == "indicipr fetch: interrupted", err
    assert {p.name: p.read_bytes() for p in dest.iterdir()} == before
    assert not [p for p in tmp_path.iterdir() if ".fetch." in p.name]


def test_a_partial_run_leaves_the_committed_tables_alone(tmp_path):
    "`reproduce --only 05_build.stats` (offline, sample) writes its tables into its run folder, never into figures/."
    assert runner.run_figures_dir(
        {"profile": "offline", "data_source": "sample", "figures_dir": None}, tmp_path, partial=True
    ) == str(tmp_path / "figures")
