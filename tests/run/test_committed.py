"""One guard for committed files: every write of the package resolves its real path (symlinks followed, every parent)
and refuses a file the checkout tracks (`git ls-files`; without git, the committed folders) and the main job's
protected folders, unless the main job writes its own outputs; the main job is proven by its run folder's token, not
by a variable a user sets. Each case runs in a copy of the project (a git checkout of its own), so that a write that
slips through changes the copy, never this checkout."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import QA_SMALL, ROOT

from indicipr.data import basics, core
from indicipr.run import cli, doctor

GOLD = QA_SMALL / "test_squad.jsonl"
NOTEBOOK = "06_scoring.metrics"


def snapshot(folder: Path) -> dict:
    "Every file under `folder` (links not followed) with its bytes, and every link with its target."
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_symlink():
            out[p] = ("link", str(p.readlink()))
        elif p.is_file() and ".git" not in p.relative_to(folder).parts:
            out[p] = p.read_bytes()
    return out


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    "A git checkout holding a notebook, the committed figures' canary and tables, and the sample: the project root."
    root = tmp_path / "checkout"
    (root / "notebooks").mkdir(parents=True)
    (root / "figures" / "tables").mkdir(parents=True)
    for name in ("settings.ini",):
        (root / name).write_bytes((ROOT / name).read_bytes())
    (root / "notebooks" / f"{NOTEBOOK}.ipynb").write_bytes((ROOT / "notebooks" / f"{NOTEBOOK}.ipynb").read_bytes())
    (root / "figures" / doctor.CANARY_FILE).write_bytes((ROOT / "figures" / doctor.CANARY_FILE).read_bytes())
    (root / "figures" / "tables" / "results.csv").write_text("System,F1\nbm25,26.65\n")
    (root / "data" / "sample").mkdir(parents=True)
    for name in ("train_squad.jsonl", "val_squad.jsonl"):  # the canary's records
        (root / "data" / "sample" / name).write_bytes((ROOT / "data" / "sample" / name).read_bytes())
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env={**os.environ, **env})
    monkeypatch.setenv(core.ROOT_ENV, str(root))
    for name in (core.MAIN_JOB_ENV, "INDICIPR_RUN_DIR"):
        monkeypatch.delenv(name, raising=False)
    return root


def run_main(capsys, *argv) -> tuple[int, str]:
    "`indicipr ARGV` in this process: (exit status, stderr)."
    try:
        rc = cli.main([str(a) for a in argv])
    except SystemExit as e:
        rc = e.code
    return rc, capsys.readouterr().err


def refused(rc: int, err: str, *needles: str) -> None:
    "Exit 2 with one sentence on stderr (no traceback) holding each needle."
    assert rc == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for n in needles:
        assert n in err, (n, err)


@pytest.mark.parametrize("linked", ["notebooks", "figures"])
def test_a_run_folder_linking_into_the_checkout_is_refused(checkout, tmp_path, capsys, linked):
    "`reproduce --run-dir X` whose `X/notebooks` or `X/figures` is a symlink into the checkout: exit 2, nothing written."
    run = tmp_path / "run"
    run.mkdir()
    (run / linked).symlink_to(checkout / linked)
    before, run_before = snapshot(checkout), snapshot(run)
    rc, err = run_main(capsys, "reproduce", "--only", NOTEBOOK, "--run-dir", run)
    refused(rc, err, f"--run-dir {run / linked}", "(nothing was written)")
    assert snapshot(checkout) == before and snapshot(run) == run_before


def test_a_run_folder_linking_a_tracked_notebook_is_refused(checkout, tmp_path, capsys):
    "A real `X/notebooks` folder whose executed copy is a link to the committed notebook: refused by the same guard."
    run = tmp_path / "run"
    (run / "notebooks").mkdir(parents=True)
    (run / "notebooks" / f"{NOTEBOOK}.ipynb").symlink_to(checkout / "notebooks" / f"{NOTEBOOK}.ipynb")
    before = snapshot(checkout)
    rc, err = run_main(capsys, "reproduce", "--only", NOTEBOOK, "--run-dir", run)
    refused(rc, err, "a file the checkout commits")
    assert snapshot(checkout) == before


@pytest.mark.parametrize("out", [f"notebooks/{NOTEBOOK}.ipynb", "settings.ini"])
def test_evaluate_never_writes_a_tracked_file(checkout, tmp_path, capsys, monkeypatch, out):
    "`evaluate --out` naming any file the checkout tracks: exit 2, the file unchanged."
    pred = tmp_path / "p.jsonl"
    pred.write_text(json.dumps({"id": json.loads(GOLD.read_text().splitlines()[0])["id"], "prediction_text": "x"}))
    monkeypatch.chdir(checkout)
    before = snapshot(checkout)
    rc, err = run_main(capsys, "evaluate", "--gold", GOLD, "--pred", pred, "--out", out)
    refused(rc, err, f"--out {out}", "a file the checkout commits")
    assert snapshot(checkout) == before


@pytest.mark.parametrize(
    "variable, value, needle",
    [
        (core.MAIN_JOB_ENV, "1", "INDICIPR_MAIN_JOB is set, but not by a running main job"),
        ("INDICIPR_RUN_DIR", "figures", "INDICIPR_RUN_DIR figures: lies in figures"),
        ("INDICIPR_RUN_DIR", "notebooks", "INDICIPR_RUN_DIR notebooks: holds notebooks/"),
    ],
)
@pytest.mark.parametrize("command", [["info"], ["reproduce", "--only", NOTEBOOK, "--run-dir", "RUN"]])
def test_a_run_variable_set_by_a_user_is_refused_on_any_command(
    checkout, tmp_path, capsys, monkeypatch, variable, value, needle, command
):
    "`INDICIPR_MAIN_JOB=1` or `INDICIPR_RUN_DIR=figures` set by a user: exit 2 before any command runs, nothing written."
    monkeypatch.chdir(checkout)
    monkeypatch.setenv(variable, value)
    before = snapshot(checkout)
    rc, err = run_main(capsys, *[str(tmp_path / "run") if a == "RUN" else a for a in command])
    refused(rc, err, needle)
    assert snapshot(checkout) == before and not (tmp_path / "run").exists()


def test_doctor_record_refuses_a_record_without_the_tokens_digest(checkout, capsys):
    "`doctor --record --no-llm` would record no tokens digest: refused before the canary runs, the record kept."
    canary = checkout / "figures" / doctor.CANARY_FILE
    before = canary.read_bytes()
    rc, err = run_main(capsys, "doctor", "--record", "--no-llm")
    refused(rc, err, "--record", "--no-llm")
    assert canary.read_bytes() == before


def test_doctor_record_writes_a_whole_record_or_nothing(checkout, monkeypatch):
    "A canary that measured only some digests records nothing; a whole one is written (the one committed file a command writes)."
    canary = checkout / "figures" / doctor.CANARY_FILE
    before = canary.read_bytes()
    monkeypatch.setattr(doctor, "encoder_canary", lambda *a: {"weights": "w" * 64, "logits": "l" * 64, "windows": 1})
    monkeypatch.setattr(doctor, "llama_canary", lambda: {})
    with pytest.raises(core.InputError, match="measured no tokens digest"):
        doctor.run_doctor(record=True, echo=lambda *a: None)
    assert canary.read_bytes() == before
    monkeypatch.setattr(doctor, "llama_canary", lambda: {"tokens": "t" * 64})
    assert doctor.run_doctor(record=True, echo=lambda *a: None) == 0
    written, kept = json.loads(canary.read_text()), json.loads(before)
    # this maker's digests are the ones measured; the file's `digests` and other makers' records are kept
    assert written["by_maker"][doctor.cpu_maker()] == {"weights": "w" * 64, "logits": "l" * 64, "tokens": "t" * 64}
    assert written["digests"] == kept["digests"]
    assert {k: v for k, v in written["by_maker"].items() if k != doctor.cpu_maker()} == {
        k: v for k, v in kept.get("by_maker", {}).items() if k != doctor.cpu_maker()
    }


def test_the_main_job_writes_its_own_outputs_and_no_other_committed_file(checkout, main_job):
    "In the main job's run (its token proven) the figures, the sample and the notebooks' outputs are written; nothing else."
    basics.write_text_atomic(checkout / "figures" / "tables" / "results.csv", "System,F1\n")
    basics.write_text_atomic(checkout / "data" / "sample" / "new.jsonl", "")
    basics.write_text_atomic(checkout / "notebooks" / f"{NOTEBOOK}.ipynb", "{}")
    with pytest.raises(core.InputError, match="a file the checkout commits"):
        basics.write_text_atomic(checkout / "settings.ini", "x")
    token = main_job / core.MAIN_JOB_TOKEN
    token.write_text(token.read_text().replace(" ", " x"))  # another token: the same variable proves nothing
    with pytest.raises(core.InputError, match="lies in figures"):
        basics.write_text_atomic(checkout / "figures" / "tables" / "results.csv", "System,F1\n")


def test_without_git_the_committed_folders_are_kept(checkout, tmp_path):
    "A copy without git (an archive): what lies in the committed folders is refused, through a link too."
    shutil.rmtree(checkout / ".git")
    core._tracked.cache_clear()
    (tmp_path / "nbs").symlink_to(checkout / "notebooks")
    for path in (tmp_path / "nbs" / "new.ipynb", checkout / "tests" / "x.py", checkout / "figures" / "x.md"):
        with pytest.raises(core.InputError, match="lies in"):
            basics.write_text_atomic(path, "x")
        assert not Path(path).exists()
    assert basics.write_text_atomic(checkout / "runs" / "x" / "a.md", "x").read_text() == "x"


# ---------------------------------------------------------------- every write through the guard
PACKAGE = ROOT / "indicipr"
PATH_WRITERS = {"write_text", "write_bytes", "savefig", "save_pretrained", "to_csv", "to_parquet", "to_json"}
MODULE_WRITERS = {"os.replace", "os.rename", "os.fdopen", "shutil.copy", "shutil.copy2", "shutil.copyfile"}
MODULE_WRITERS |= {"shutil.copytree", "shutil.move", "torch.save", "json.dump"}
GUARDED = {"write_target", "write_text_atomic", "replace_atomic", "swap_folder", "check_output", "check_not_protected"}
# the functions that write without the guard, each for a reason: a path no user or run chooses, or one checked before
DIRECT_WRITES = {
    "llm.client._drop_incomplete_tail": "cuts a torn last line off the LLM cache, which `append_jsonl` wrote",
    "llm.servers._one_llama_server": "the server's log: a fresh `mkstemp` file in the system's temporary folder",
    "run.report._copy_explorers": "into the run's report folder, which the runner checks before the run",
    "run.runner._kernel_manager_for": "a kernel's log in the run folder, which the runner checks before the run",
    "run.runner._async_launch_kernel": "a kernel's log in the run folder, which the runner checks before the run",
    "systems.training._save_loop_checkpoint": "into the checkpoint folder `train_encoder` passed through the guard",
    "systems.training.save_model": "into the checkpoint folder `train_encoder` passed through the guard",
}


def _mode_writes(call: ast.Call, at: int) -> bool:
    mode = call.args[at] if len(call.args) > at else next((k.value for k in call.keywords if k.arg == "mode"), None)
    return isinstance(mode, ast.Constant) and bool(set(str(mode.value)) & set("wax+"))


def direct_writes(fn: ast.AST) -> list[int]:
    "The lines of `fn`'s own calls (not its nested functions') that write a file without the package's writers."
    lines, nested = [], [n for n in ast.walk(fn) if n is not fn and isinstance(n, ast.FunctionDef)]
    skip = {id(c) for f in nested for c in ast.walk(f)}
    for n in ast.walk(fn):
        if not isinstance(n, ast.Call) or id(n) in skip:
            continue
        f = n.func
        if isinstance(f, ast.Name) and f.id == "open" and _mode_writes(n, 1):
            lines.append(n.lineno)
        elif (
            isinstance(f, ast.Attribute)
            and isinstance(f.value, ast.Name)
            and f"{f.value.id}.{f.attr}" in MODULE_WRITERS
        ):
            if f.attr != "fdopen" or _mode_writes(n, 1):
                lines.append(n.lineno)
        elif isinstance(f, ast.Attribute) and f.attr in ("replace", "rename") and len(n.args) == 1 and not n.keywords:
            lines.append(n.lineno)  # `Path.replace(target)`: a move (`str.replace` takes two)
        elif isinstance(f, ast.Attribute) and f.attr in PATH_WRITERS and n.args:
            lines.append(n.lineno)
    return lines


def calls_the_guard(fn: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) in GUARDED
        for n in ast.walk(fn)
    )


def unguarded_writes() -> dict[str, list[int]]:
    "`{floor.module.function: lines}` of the functions that write directly and never call the guard or a guarded writer."
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in ("basics.py", "_modidx.py"):  # basics holds the guarded writers themselves
            continue
        module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and not calls_the_guard(fn):
                if lines := direct_writes(fn):
                    found[f"{module}.{fn.name}"] = lines
    return found


def test_the_scan_finds_a_direct_write():
    tree = ast.parse(
        "def a(p):\n    open(p, 'a').write('x')\n"
        "def b(p, q):\n    p.replace(q)\n"
        "def c(p):\n    write_target(p)\n    open(p, 'w')\n"
        "def d(p):\n    open(p).read()\n    'x'.replace('a', 'b')\n"
    )
    fns = {f.name: f for f in tree.body}
    assert direct_writes(fns["a"]) == [2] and direct_writes(fns["b"]) == [4]
    assert calls_the_guard(fns["c"]) and direct_writes(fns["d"]) == []


def test_every_write_of_the_package_passes_the_guard():
    """Every function that writes a file goes through `basics.write_target` (the writers `write_text_atomic`,
    `replace_atomic`, `swap_folder`, or the checks `check_output`), or is one of `DIRECT_WRITES`, for its reason."""
    found = unguarded_writes()
    assert set(found) == set(DIRECT_WRITES), {k: v for k, v in found.items() if k not in DIRECT_WRITES}


def test_only_doctor_record_writes_a_committed_file_on_purpose():
    "`committed=True` (a committed file written on purpose, past the guard) is passed by `doctor.run_doctor` alone."
    passing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for n in ast.walk(fn):
                    if isinstance(n, ast.Call) and any(
                        k.arg == "committed" and not (isinstance(k.value, ast.Name) and k.value.id == "committed")
                        for k in n.keywords
                    ):
                        passing.append(f"{module}.{fn.name}")
    assert passing == ["run.doctor.run_doctor"], passing


# ---------------------------------------------------------------- the main job's kernels
def _probe_notebook(folder: Path, name: str) -> Path:
    "A stage notebook's stand-in: its context must be the main job's, and it writes a table among the committed ones."
    import nbformat

    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('data_source = "sample"\nprofile = "offline"\nfigures_dir = None')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [
        params,
        nbformat.v4.new_code_cell(
            "from indicipr.data import basics, config, core\n"
            "ctx = config.run_context(data_source, profile, figures_dir)\n"
            'basics.write_text_atomic(core.project_root() / "figures" / "tables" / "probe.md", str(ctx.main_job))'
        ),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / f"{name}.ipynb")
    return folder


def test_the_main_jobs_kernels_are_proven_and_no_other_runs(checkout, tmp_path):
    """A kernel of the main job's run (`runner.main_job_run`) writes the committed tables; a kernel of any other run,
    the same notebook, is refused by the guard (its stage fails, nothing written)."""
    from indicipr.run import runner

    name = runner.NOTEBOOKS[0]
    nbs = _probe_notebook(tmp_path / "nbs", name)
    probe = checkout / "figures" / "tables" / "probe.md"
    with runner.main_job_run() as run_dir:
        runner.run_pipeline(run_dir=run_dir, notebooks=[name], nbs_dir=nbs, report=False, echo=lambda *a: None)
        assert not (run_dir / core.MAIN_JOB_TOKEN).is_symlink()
    assert probe.read_text() == "True" and not (run_dir / core.MAIN_JOB_TOKEN).exists()
    probe.unlink()
    with pytest.raises(runner.PipelineError, match="lies in figures"):
        runner.run_pipeline(
            run_dir=tmp_path / "other", notebooks=[name], nbs_dir=nbs, report=False, echo=lambda *a: None
        )
    assert not probe.exists()
