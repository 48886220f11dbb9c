"""Fixtures shared by the test files. Plain helpers (paths, readers, loopback servers, skip guards) are in helpers.py."""

import copy
import shutil
import tempfile
from pathlib import Path

import pytest
from helpers import QA_SMALL

from indicipr.data import numerics

numerics.pin()  # the tests compute as the pipeline does (pinned kernels, fixed threads), set before torch is loaded

from indicipr.data import benchmark, core  # noqa: E402


@pytest.fixture
def root(tmp_path, monkeypatch):
    "Run with the project root (data/, figures/) in a temporary folder (`INDICIPR_ROOT`)."
    monkeypatch.setenv("INDICIPR_ROOT", str(tmp_path))
    return tmp_path


@pytest.fixture
def main_job(monkeypatch):
    """This process proven the main job, as `indicipr reproduce` makes its own: a run folder of the project's `runs/`
    (under `root` when a test asks for that fixture first) with its token (`core.main_job_token`), named in
    `INDICIPR_MAIN_JOB`; the run folder."""
    runs = core.project_root() / "runs"
    runs.mkdir(exist_ok=True)
    run = Path(tempfile.mkdtemp(dir=runs))
    with core.main_job_token(run) as proof:
        monkeypatch.setenv(core.MAIN_JOB_ENV, proof)
        yield run
    shutil.rmtree(run, ignore_errors=True)


@pytest.fixture
def tmp_data_dir(tmp_path, monkeypatch):
    """`data_dir()` (the main job's predictions, caches) and the scratch folder of a run outside the main job (where its
    predictions go: `RunContext.predictions`) in a temporary folder; the rest of the project stays where it is."""
    from indicipr.data import artifacts
    from indicipr.scoring import predictions

    for module in (core, predictions):
        monkeypatch.setattr(module, "data_dir", lambda: tmp_path)  # predictions reads the main job's prediction files
    monkeypatch.setattr(core, "scratch_dir", lambda: tmp_path / "runs" / "interactive")
    for name in (core.MAIN_JOB_ENV, artifacts.RUN_DIR_ENV):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
def no_llm_api_key(monkeypatch):
    "No `INDICIPR_LLM_API_KEY` in the environment: endpoints configured by the tests are asked without a key."
    monkeypatch.delenv("INDICIPR_LLM_API_KEY", raising=False)


@pytest.fixture(scope="module")
def splits():
    "The qa_small fixture as `load_benchmark` gives it: `{train, validation, test: [record, ...]}` (one load per module)."
    return {k: [dict(r) for r in v] for k, v in benchmark.load_benchmark(str(QA_SMALL)).items()}


@pytest.fixture
def qa_test_records(splits):
    "A fresh copy of the qa_small test split (a test may change its records)."
    return copy.deepcopy(splits["test"])


@pytest.fixture(scope="module")
def statute_sections():
    "The real statute sections the project holds, every batch (../shared/statutes, else the committed copies), checked."
    from indicipr.build.sections import read_sections_jsonl, statutes_jsonl_paths

    return read_sections_jsonl(statutes_jsonl_paths())


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    "A tiny random BERT with MiniLM's tokenizer, saved like a hub checkpoint."
    import torch
    from helpers import tiny_bert_config
    from transformers import BertForQuestionAnswering

    from indicipr.systems.qa_model import load_tokenizer

    torch.manual_seed(0)
    d = tmp_path_factory.mktemp("tiny_bert")
    BertForQuestionAnswering(tiny_bert_config()).save_pretrained(d)
    load_tokenizer("minilm-l6").save_pretrained(d)
    return str(d)
