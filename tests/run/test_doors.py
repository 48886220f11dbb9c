"""The doors besides the runner: plain papermill, nbdev's docs tools, the command line's own conventions, and the
sync check's notebook metadata. Each test goes through the tool as a user would (a subprocess from the checkout)."""

import argparse
import json
import shutil
import subprocess

import pytest
from helpers import BIN, QA_SMALL, ROOT, sync_check_repo, user_env

from indicipr.run import cli, notebook_files, runner, stages


def git_status(repo=ROOT) -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


def run_as_user(*args, cwd=ROOT, timeout=600) -> subprocess.CompletedProcess:
    "A command of the venv run as a user's shell runs it (`user_env`), from the checkout by default; it must succeed."
    out = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, env=user_env(), timeout=timeout
    )
    assert out.returncode == 0, (args, out.stderr[-3000:])
    return out


@pytest.mark.slow
def test_plain_papermill_runs_a_notebook_and_leaves_git_status_clean(tmp_path):
    "No -k, no -l: the notebook's kernelspec (python3) and language; tables go under runs/interactive/, not figures/."
    before = git_status()
    run_as_user(
        BIN / "papermill", "notebooks/06_scoring.metrics.ipynb", tmp_path / "out.ipynb", "-p", "split", "validation"
    )
    assert git_status() == before, git_status()
    table = ROOT / "runs" / "interactive" / "figures" / "tables" / "metrics_definitions_examples.md"
    assert table.is_file()
    executed = json.loads((tmp_path / "out.ipynb").read_text())
    assert any('split = "validation"' in "".join(c["source"]) for c in executed["cells"])


@pytest.mark.slow  # over 8 s on 2 cores
def test_papermill_help_notebook_lists_every_parameter_with_its_type():
    "Three notebooks through papermill's CLI (every notebook through the same reader: test_every_notebook_names_the_one_kernel)."
    for name in ("06_scoring.metrics", "08_systems.encoders", "12_analysis.quality"):
        nb = ROOT / "notebooks" / f"{name}.ipynb"
        out = run_as_user(BIN / "papermill", "--help-notebook", nb, timeout=120)
        for param in stages.notebook_parameters(nb):
            assert f"  {param}: " in out.stdout, (name, param, out.stdout)
        assert "  data_source: str " in out.stdout, (name, out.stdout)
        assert "  figures_dir: Optional[str] " in out.stdout, (name, out.stdout)


def test_every_notebook_names_the_one_kernel():
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert json.loads(nb.read_text(encoding="utf-8"))["metadata"] == notebook_files.NOTEBOOK_METADATA, nb.name
    assert notebook_files.notebook_door_problems() == []


def test_a_parameter_without_a_type_is_a_door_problem(tmp_path):
    "`reader_k = None` was listed by papermill as 'Unknown type' and let through by the runner's type check."
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert None not in stages.notebook_parameter_types(nb).values(), nb.name  # each parameter has a type
    grounded = stages.notebook_parameter_types(ROOT / "notebooks" / "09a_systems.grounded.ipynb")
    assert grounded["reader_k"] == (int, type(None)) and grounded["llm_endpoints"] == (str, dict, type(None))
    folder = tmp_path / "nbs"
    folder.mkdir()
    nb = json.loads((ROOT / "notebooks" / "09a_systems.grounded.ipynb").read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", []))
    cell["source"] = "".join(cell["source"]).replace("reader_k: Optional[int] = None", "reader_k = None")
    (folder / "09a_systems.grounded.ipynb").write_text(
        json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    problems = notebook_files.notebook_door_problems(folder)
    assert problems and "09a_systems.grounded.ipynb: parameter(s) reader_k have no type annotation" in problems[0], (
        problems
    )


def test_every_nbdev_directive_is_read_and_nbdev_test_skips_every_stage_run(tmp_path):
    "nbdev reads directives only at a cell's top: a `#| notest` on the run cell's fourth line leaves the stage to nbdev_test."
    assert notebook_files.directive_problems() == []
    folder = tmp_path / "nbs"
    folder.mkdir()
    nb = json.loads((ROOT / "notebooks" / "09a_systems.grounded.ipynb").read_text(encoding="utf-8"))
    at = next(n for n, c in enumerate(nb["cells"]) if "parameters" in c["metadata"].get("tags", [])) + 1
    lines = "".join(nb["cells"][at]["source"]).splitlines(True)
    assert lines[0] == "#| notest\n" and "run_context" in lines[1] + lines[2], lines[:3]
    nb["cells"][at]["source"] = "".join(lines[1:3] + ["\n", lines[0]] + lines[3:])
    (folder / "09a_systems.grounded.ipynb").write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    problems = notebook_files.directive_problems(folder)
    assert len(problems) == 2, problems
    assert f"cell {at + 1}, line 4: the directive `#| notest` is below the cell's first line of code" in problems[0]
    assert f"cell {at + 1} comes after the parameters cell (the stage run) but has no test flag" in problems[1]


def test_doctor_names_each_installed_version_that_differs_from_constraints(tmp_path, monkeypatch):
    "Matching digests and another PyTorch than constraints.txt's: the doctor says it reproduces and names the version."
    import functools
    from importlib import metadata

    from indicipr.run import doctor

    canary = tmp_path / "canary.json"
    canary.write_text(json.dumps({"digests": {"weights": "w", "logits": "l", "tokens": "t"}, "settings": {}}))
    pins = (ROOT / "constraints.txt").read_text(encoding="utf-8")
    assert "\ntorch==" in pins
    constraints = tmp_path / "constraints.txt"
    constraints.write_text(pins.replace("\ntorch==", "\ntorch==0.0.1\n# torch=="), encoding="utf-8")
    monkeypatch.setattr(doctor, "encoder_canary", lambda *a: {"windows": 1, "weights": "w", "logits": "l"})
    monkeypatch.setattr(doctor.numerics, "pin", lambda: [])
    monkeypatch.setattr(doctor, "version_warnings", functools.partial(doctor.version_warnings, constraints))
    lines = []
    assert doctor.run_doctor(llm=False, path=canary, echo=lines.append) == 0, lines
    assert any("this machine reproduces the committed numbers" in line for line in lines), lines
    warning = next((line for line in lines if line.startswith("warning: ") and "constraints.txt" in line), None)
    assert warning and f"torch {metadata.version('torch')} (constraints.txt: ==0.0.1)" in warning, lines


def test_sync_check_fails_on_a_notebook_without_the_kernel(tmp_path):
    repo, git, check = sync_check_repo(tmp_path)
    nb_path = repo / "notebooks" / "00b_data.core.ipynb"
    nb = json.loads(nb_path.read_text())
    nb["metadata"] = {}  # what nine notebooks once were: no kernelspec
    nb_path.write_text(json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n")
    git("commit", "-qam", "drop the kernelspec")
    bad = check()
    assert bad.returncode == 1
    assert "00b_data.core.ipynb: metadata {}" in bad.stdout, bad.stdout
    assert "NOTEBOOK DOORS" in bad.stdout, bad.stdout


def test_nbdev_clean_keeps_the_kernel_and_the_outputs(tmp_path):
    "nbdev_clean (settings.ini) leaves the project's metadata and a cell's committed outputs as they are."
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "indicipr").mkdir()
    shutil.copy(ROOT / "settings.ini", tmp_path / "settings.ini")
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": "c1",
                "metadata": {"tags": ["parameters"]},
                "outputs": [{"name": "stdout", "output_type": "stream", "text": "F1 43.62\n"}],
                "source": ["x = 1"],
            }
        ],
        "metadata": notebook_files.NOTEBOOK_METADATA,
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    text = json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    (tmp_path / "notebooks" / "a.ipynb").write_text(text)
    subprocess.run([str(BIN / "nbdev_clean")], cwd=tmp_path, check=True, env=user_env(), capture_output=True)
    assert (tmp_path / "notebooks" / "a.ipynb").read_text() == text


@pytest.mark.slow
def test_nbdev_proc_nbs_succeeds_and_leaves_no_untracked_file(tmp_path):
    """nbdev's docs step before Quarto, on a copy of the checkout. A `quarto` that does nothing is first on PATH: without
    one, nbdev_proc_nbs tries to install Quarto with sudo and then runs `pip install -e .` in the environment."""
    repo = tmp_path / "repo"
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True).stdout.split()
    for f in files:
        if f.startswith(("notebooks/", "indicipr/")) or f in ("settings.ini", "setup.py", ".gitignore", "README.md"):
            (repo / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, repo / f)
    stub = tmp_path / "bin" / "quarto"
    stub.parent.mkdir()
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    env = user_env(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    env["PATH"] = f"{stub.parent}:{env['PATH']}"
    for a in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True, env=env)
    out = subprocess.run([str(BIN / "nbdev_proc_nbs")], cwd=repo, capture_output=True, text=True, env=env, timeout=900)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert git_status(repo) == "", git_status(repo)
    assert (repo / "_proc" / "index.ipynb").is_file()
    assert (repo / "_proc" / "06_scoring.metrics.ipynb").is_file()


def walk_parser(p, path="indicipr"):
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from walk_parser(sub, f"{path} {name}")
        else:
            yield path, a


def test_every_option_has_a_help_string():
    actions = list(walk_parser(cli.build_parser()))
    assert len(actions) > 60
    missing = [
        f"{path} {'/'.join(a.option_strings) or a.dest}"
        for path, a in actions
        if not a.help or a.help == argparse.SUPPRESS
    ]
    assert missing == [], missing


def subcommand_parsers(p, words=()):
    "Every subcommand's parser (subcommands of subcommands too) with its words, e.g. `('audit', 'export')`."
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield (*words, name), sub
                yield from subcommand_parsers(sub, (*words, name))


def test_every_subcommand_help_starts_with_a_line_and_ends_with_examples():
    "`indicipr X --help`: usage, a one-line description, the options, then two or three examples of `indicipr X`."
    found = dict(subcommand_parsers(cli.build_parser()))
    assert {" ".join(w) for w in found} >= {"reproduce", "build", "fetch", "info", "evaluate", "predict", "train"} | {
        "audit",
        "audit export",
        "audit score",
        "cleaner-check",
    }
    for words, parser in found.items():
        text = parser.format_help()
        description = text.split("\n\n")[1]
        assert description.strip() and "\n" not in description.strip(), (words, description)
        head, _, examples = text.rstrip().rpartition("\nexamples:\n")
        lines = examples.splitlines()
        assert head and 2 <= len(lines) <= 3, (words, text[-400:])
        assert all(line.startswith(f"  indicipr {' '.join(words)}") for line in lines), (words, lines)
    out = subprocess.run([str(BIN / "indicipr"), "audit", "export", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.rstrip().splitlines()[-1].startswith("  indicipr audit export")


def test_the_readme_keeps_papermill_under_runs_and_nbdev_docs_behind_make_docs():
    "The docs' papermill line writes under runs/ (gitignored); nbdev's docs tools are reached through `make docs` only."
    text = (ROOT / "notebooks" / "running.md").read_text()
    block = text.split("## Every notebook on its own", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    outputs = [  # the word after the notebook: papermill's output path
        words[i + 1]
        for words in map(str.split, block.splitlines())
        for i, w in enumerate(words)
        if w.startswith("notebooks/")
    ]
    assert outputs and all(o.startswith("runs/") for o in outputs if not o.startswith("#")), outputs
    assert "make docs" in text and "pip install -e" in text
    for bare in ("nbdev_docs", "nbdev_proc_nbs", "nbdev_preview"):
        assert f"`{bare}`" in text.split("nbdev's docs site has one door, `make docs`", 1)[1][:1200], bare
    assert not [
        line
        for line in text.splitlines()
        if line.lstrip().startswith((".venv/bin/nbdev_docs", "nbdev_docs", "nbdev_proc_nbs"))
    ]


def test_version():
    from indicipr import __version__

    out = subprocess.run([str(BIN / "indicipr"), "--version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out
    assert out.stdout.strip() == f"indicipr {__version__}", out


@pytest.mark.slow
def test_reproduce_prints_only_results_on_stdout(tmp_path):
    "Progress and the kernels' chatter on stderr; `indicipr reproduce … 2>/dev/null` shows the report, the tables' verdict, the summary."
    before = git_status()
    out = run_as_user(BIN / "indicipr", "reproduce", "--only", "06_scoring.metrics", "--run-dir", tmp_path / "run")
    lines = out.stdout.splitlines()
    assert [line.split(":")[0].split(" in ")[0] for line in lines] == ["report", "tables", "done"], out.stdout
    assert "[1/1] 06_scoring.metrics: ok" in out.stderr
    assert git_status() == before  # a partial run: its tables went to the run folder
    assert (tmp_path / "run" / "figures" / "tables" / "metrics_definitions_examples.md").is_file()


def second_cell_outputs_under_papermill(tmp_path, *sources: str) -> list:
    "Run a notebook of these code cells with plain papermill (the project's kernel): the outputs of its second cell."
    import nbformat

    nb = nbformat.v4.new_notebook(metadata=notebook_files.NOTEBOOK_METADATA)
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, tmp_path / "in.ipynb")
    run_as_user(BIN / "papermill", tmp_path / "in.ipynb", tmp_path / "out.ipynb", cwd=tmp_path, timeout=300)
    return nbformat.read(tmp_path / "out.ipynb", as_version=4).cells[1].outputs


@pytest.mark.slow
def test_a_saved_figure_is_shown_in_the_notebook_under_agg(tmp_path):
    "The stage notebooks select Agg; a figure they save still appears among the cell's outputs (and so in the committed ones)."
    outputs = second_cell_outputs_under_papermill(
        tmp_path,
        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nfrom indicipr.data.artifacts import save_figure",
        f"fig, ax = plt.subplots(); ax.plot([0, 1])\n_ = save_figure(fig, 'shown', {str(tmp_path / 'figs')!r})",
    )
    shown = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(shown) == 1
    import base64

    assert base64.b64decode(shown[0]["data"]["image/png"]) == (tmp_path / "figs" / "shown.png").read_bytes()


@pytest.mark.slow
def test_progress_bars_are_widgets_in_a_notebook(tmp_path):
    "tqdm.auto (the stages' progress bars) draws a widget in a kernel: ipywidgets is installed, no 'IProgress not found'."
    outputs = second_cell_outputs_under_papermill(
        tmp_path, "from tqdm.auto import tqdm", "_ = list(tqdm(range(3), desc='demo'))"
    )
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs), outputs
    assert not any("IProgress" in str(o) for o in outputs)
    assert notebook_files.scrub_outputs(outputs) == []  # and none of it reaches the committed outputs


REFUSED_BEFORE_ANY_KERNEL = [  # (command line, variables, the sentence's start after "indicipr reproduce: ")
    (["-p", "split", "testt"], {}, "parameter split 'testt' is neither a split name"),
    (["--only", "07_systems.bm25", "-p", "split", "testt"], {}, "parameter split: 'testt' is not one of train,"),
    (["--only", "10_analysis.significance", "-p", "n_resamples", "99999999999"], {}, "parameter n_resamples must be"),
    (["--only", "09_systems.llm_qa", "-p", "qa_models", '""'], {}, "parameter qa_models: '' is not a model name"),
    (["--only", "09a_systems.grounded", "-p", "qa_models", '[["x"]]'], {}, "parameter qa_models: [['x']] is not"),
    (["--only", "12_analysis.quality", "-p", "judge_models", "[]"], {}, "parameter judge_models: [] is not a model"),
    (["--only", "09_systems.llm_qa", "-p", "llm_endpoints", "gpu1:8000"], {}, "parameter llm_endpoints: 'gpu1:8000'"),
    (["--only", "06_scoring.metrics"], {"INDICIPR_LLM_ENDPOINTS": "gpu1:8000"}, "INDICIPR_LLM_ENDPOINTS: 'gpu1:8000'"),
    (["--only", "06_scoring.metrics"], {"INDICIPR_LLM_BASE_URL": "h:1"}, "INDICIPR_LLM_BASE_URL: 'h:1' names no LLM"),
    (["--only", "06_scoring.metrics"], {"INDICIPR_ACT_MAP": "garbage"}, "INDICIPR_ACT_MAP item 'garbage'"),
    (["--only", "06_scoring.metrics"], {"INDICIPR_YES": "maybe"}, "INDICIPR_YES='maybe': use 1/0"),
    (["--only", "06_scoring.metrics", "--at-once", "0"], {}, "--at-once 0: give a number at least 1"),
]


@pytest.mark.parametrize("args,environ,said", REFUSED_BEFORE_ANY_KERNEL)
def test_reproduce_refuses_a_bad_parameter_or_variable_before_any_kernel(
    tmp_path, monkeypatch, capsys, args, environ, said
):
    "What a notebook would refuse in its first cells is refused by the runner: one sentence, exit 2, nothing started."

    def started(*a, **k):
        raise AssertionError("a kernel was asked for")

    monkeypatch.setattr(runner, "ensure_kernel", started)
    monkeypatch.setattr(runner, "run_notebook", started)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["reproduce", "--run-dir", str(tmp_path / "run"), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"indicipr reproduce: {said}") and len(err.splitlines()) == 1, err
    assert not (tmp_path / "run").exists()


def test_every_command_refuses_a_bad_run_variable_it_does_not_read(monkeypatch, capsys):
    "`indicipr info` on the sample (whose Acts need no mapping) refuses a garbage Act mapping all the same."
    monkeypatch.setenv("INDICIPR_ACT_MAP", "garbage")
    assert cli.main(["info"]) == 2
    assert capsys.readouterr().err == "indicipr info: INDICIPR_ACT_MAP item 'garbage': expected prefix=act_key\n"


def test_a_count_out_of_bounds_is_one_sentence_from_the_command_line(tmp_path):
    "As a user runs it: exit 2, the sentence, no traceback, no run folder."
    out = subprocess.run(
        [str(BIN / "indicipr"), "reproduce", "--only", "10_analysis.significance", "--run-dir", str(tmp_path / "run")]
        + ["-p", "n_resamples", "99999999999"],
        capture_output=True,
        text=True,
        env=user_env(),
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr == (
        "indicipr reproduce: parameter n_resamples must be from 1 to 1,000,000 or None, got 99999999999\n"
    )
    assert not (tmp_path / "run").exists()


def test_train_refuses_an_empty_model_name_as_its_flag(capsys):
    "Before torch is imported and any model is looked for: the flag the user typed, in the settings' sentence."
    assert cli.main(["train", "--models", "minilm-l6", ""]) == 2
    err = capsys.readouterr().err
    assert err.startswith("indicipr train: --models: ['minilm-l6', ''] is not a model name"), err


@pytest.mark.slow
def test_ctrl_c_in_reproduce_is_one_line_and_exit_130(tmp_path):
    "Ctrl-C at a terminal (SIGINT to the process group: the kernel too) while a notebook runs: one line, exit 130."
    import os
    import signal
    import time

    p = subprocess.Popen(
        [str(BIN / "indicipr"), "reproduce", "--only", "06_scoring.metrics", "--run-dir", str(tmp_path / "run")],
        cwd=ROOT,
        env=user_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    lines = []
    for line in p.stderr:  # progress goes to stderr: wait for the notebook to start
        lines.append(line)
        if ": running" in line:
            break
    time.sleep(2)
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=300)
    err = "".join(lines) + err
    assert p.returncode == 130 and "Traceback" not in err, (p.returncode, err[-3000:])
    assert err.strip().splitlines()[-1] == "indicipr reproduce: interrupted", err[-3000:]


@pytest.mark.slow
def test_ctrl_c_in_a_two_worker_train_is_one_line_and_exit_130(tiny_model_dir, tmp_path):
    """Ctrl-C at a terminal (SIGINT to the process group: the pool's workers too) while two workers train: one line and
    exit 130, no worker's traceback, no semaphore left behind for the resource tracker to call leaked."""
    import os
    import signal
    import time

    argv = ["train", "--models", tiny_model_dir, "--seeds", "0", "1", "--max-steps", "100000", "--workers", "2"]
    p = subprocess.Popen(
        [str(BIN / "indicipr"), *argv, "--no-intermediate", "--data-source", str(QA_SMALL)],
        cwd=tmp_path,
        env=user_env(INDICIPR_ROOT=str(tmp_path), HF_HUB_OFFLINE="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    lines = []
    for line in p.stderr:  # a worker's progress bar: it trains, and holds tqdm's lock (a named semaphore)
        lines.append(line)
        if line.startswith("training:"):
            break
    time.sleep(2)
    os.killpg(p.pid, signal.SIGINT)
    try:
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    err = "".join(lines) + err
    assert p.returncode == 130 and "Traceback" not in err and "leaked" not in err, (p.returncode, err[-3000:])
    assert err.strip().splitlines()[-1] == "indicipr train: interrupted", err[-3000:]
