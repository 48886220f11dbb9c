"""The pinned numerics reach every process that computes a number (the runner's kernels, the training pool's workers,
the llama.cpp server, the command line), the run records them and its tables' verdict, and the canary
(`indicipr doctor`) names the digest that a removed pin changes."""

import json
import os
import subprocess
import sys

import pytest
from helpers import BIN, ROOT, user_env
from test_core import write_nb

from indicipr.data import numerics
from indicipr.systems import pool
from indicipr.run import runner

PROBE = (
    "import json, os, torch\n"
    "from indicipr.data import numerics\n"
    "print('PROBE', json.dumps({'caps': {k: os.environ.get(k) for k in numerics.PINS}, "
    "'capability': torch.backends.cpu.get_cpu_capability(), 'threads': torch.get_num_threads()}))"
)


def _probe(text: str) -> dict:
    return json.loads(next(line for line in text.splitlines() if line.startswith("PROBE ")).split(" ", 1)[1])


def _env_without_pins(**extra) -> dict:
    env = user_env(**extra)
    for k in (*numerics.PINS, *numerics.THREAD_VARIABLES, numerics.NUMERICS_ENV):
        env.pop(k, None)
    return {**env, **extra}


@pytest.mark.slow
def test_the_runner_starts_its_kernels_pinned_and_records_it(tmp_path, monkeypatch):
    for k in (*numerics.PINS, *numerics.THREAD_VARIABLES, numerics.NUMERICS_ENV):
        monkeypatch.delenv(k, raising=False)
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    write_nb(nbs / "00h_data.benchmark_tables.ipynb", PROBE)
    lines = []
    runner.run_pipeline(
        run_dir=tmp_path / "run", notebooks=["00h_data.benchmark_tables"], nbs_dir=nbs, echo=lines.append
    )
    executed = (tmp_path / "run" / "notebooks" / "00h_data.benchmark_tables.ipynb").read_text()
    probe_cell = next(c for c in json.loads(executed)["cells"] if "PROBE" in "".join(c["source"]))
    texts = [o.get("text", "") for o in probe_cell["outputs"]]
    seen = _probe("".join("".join(t) if isinstance(t, list) else t for t in texts))
    if numerics.x86_64():
        assert seen["caps"] == numerics.PINS and seen["capability"].lower() == "avx2"
    assert seen["threads"] == numerics.THREADS
    run = json.loads((tmp_path / "run" / "report" / "run.json").read_text())
    assert run["numerics"]["mode"] == "pinned" and run["numerics"]["cpu"]["kernel_flags"]
    assert run["verdict"]["compared"] is True  # the offline profile on the sample: compared with the committed tables
    assert any(line.startswith("numerics pinned") for line in lines)
    assert any(line.startswith("tables: ") for line in lines)
    index = (tmp_path / "run" / "report" / "index.html").read_text()
    assert "Same numbers?" in index and "ATEN_CPU_CAPABILITY" in index


def test_native_numerics_set_nothing_and_say_so(monkeypatch):
    monkeypatch.setenv(numerics.NUMERICS_ENV, "native")
    assert numerics.child_environment() == {}
    assert "native" in numerics.status_line(numerics.numerics_status())
    monkeypatch.setenv(numerics.NUMERICS_ENV, "fastest")
    out = subprocess.run([str(BIN / "indicipr"), "doctor"], capture_output=True, text=True, env=user_env())
    assert out.returncode == 2 and "INDICIPR_NUMERICS='fastest' is not a numerics mode" in out.stderr
    assert "Traceback" not in out.stderr


def _worker_threads(job, callbacks=None):
    import torch

    return torch.get_num_threads()


def test_pool_workers_run_the_pinned_thread_count(monkeypatch):
    monkeypatch.delenv(numerics.NUMERICS_ENV, raising=False)
    results = dict(pool.run_pool(_worker_threads, [0, 1, 2], workers=2))
    assert set(results.values()) == {numerics.WORKER_THREADS}


def test_the_llama_server_runs_the_pinned_thread_count(monkeypatch):
    "The command line of the project's llama.cpp server names the fixed thread count (the server is not started here)."
    from indicipr.llm import servers as llm_servers

    seen = {}

    class _Stop(Exception):
        pass

    def fake_popen(cmd, **kw):
        seen["cmd"] = cmd
        raise _Stop

    monkeypatch.delenv(numerics.NUMERICS_ENV, raising=False)
    monkeypatch.setattr(llm_servers.subprocess, "Popen", fake_popen)
    monkeypatch.setattr(llm_servers, "_require_llama_cpp_server", lambda: None)
    with pytest.raises(_Stop), llm_servers.local_llm_server(model_path=__file__):
        pass
    cmd = seen["cmd"]
    assert cmd[cmd.index("--n_threads") + 1] == cmd[cmd.index("--n_threads_batch") + 1] == str(numerics.LLAMA_THREADS)


def test_the_command_line_pins_itself_before_torch():
    "`indicipr` pins its own process (a command that trains or predicts computes in it)."
    code = "from indicipr.run import cli\nassert cli.main(['info', '--data-source', '/no/such/folder']) == 2\n" + PROBE
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env_without_pins(), cwd=ROOT
    )
    seen = _probe(out.stdout)
    if numerics.x86_64():
        assert seen["caps"] == numerics.PINS and seen["capability"].lower() == "avx2"
    assert seen["threads"] == numerics.THREADS


@pytest.mark.slow
def test_doctor_passes_pinned_and_names_the_digest_a_removed_pin_changes():
    "The canary: the committed digests hold here; with PyTorch's cap flipped, the weights and logits digests differ."
    ok = subprocess.run([str(BIN / "indicipr"), "doctor"], capture_output=True, text=True, env=_env_without_pins())
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "this machine reproduces the committed numbers" in ok.stdout
    flipped = subprocess.run(
        [str(BIN / "indicipr"), "doctor", "--no-llm"],
        capture_output=True,
        text=True,
        env=_env_without_pins(ATEN_CPU_CAPABILITY="default"),
    )
    assert flipped.returncode == 1, flipped.stdout + flipped.stderr
    assert "does NOT reproduce" in flipped.stdout
    assert "  weights: fine-tuning" in flipped.stdout and "  logits: inference" in flipped.stdout
    assert "ATEN_CPU_CAPABILITY default (recorded: avx2)" in flipped.stdout


def test_doctor_record_refuses_native_numerics(tmp_path):
    out = subprocess.run(
        [str(BIN / "indicipr"), "doctor", "--record"],
        capture_output=True,
        text=True,
        env=_env_without_pins(INDICIPR_NUMERICS="native"),
    )
    assert out.returncode == 2 and "pinned numerics" in out.stderr and "Traceback" not in out.stderr
    assert not os.environ.get("INDICIPR_NUMERICS")
