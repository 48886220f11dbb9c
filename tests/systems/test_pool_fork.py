"""A CPU pool forks its workers from a forkserver that has their function's module imported (`pool.warm_pool`): the
same runs as spawned workers give, workers that are the server's children and not the pool process's, spawned
workers again once the environment the server started with has changed, and a worker that imported another copy of
the module says so instead of running it. Each scenario runs in a fresh process, which starts its own forkserver."""

import json
import os
import queue
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT
from indicipr.systems import pool

JOB = """
import os


def whose(job, callbacks=None):
    "A run: its job doubled, this worker's parent, and the file this module came from."
    return job * 2, os.getppid(), __file__
"""

PARENT = """
import json
import os
import sys

from indicipr.systems.pool import run_pool, warm_pool
from forkjob import whose

if __name__ == "__main__":
    out = {"pid": os.getpid(), "warm": warm_pool(whose, 3, 2)}
    out["forked"] = dict(run_pool(whose, [1, 2, 3], workers=2))
    os.environ["INDICIPR_POOL_TEST"] = "changed"
    out["warm_after_change"] = warm_pool(whose, 3, 2)
    out["spawned"] = dict(run_pool(whose, [1, 2, 3], workers=2))
    del os.environ["INDICIPR_POOL_TEST"]
    sys.modules["forkjob"].__file__ = "/elsewhere/forkjob.py"  # as if the server had found another copy
    try:
        list(run_pool(whose, [1, 2], workers=2))
    except RuntimeError as e:
        out["other_copy"] = str(e)
    print(json.dumps(out))
"""


def _scenario(tmp_path: Path) -> dict:
    (tmp_path / "forkjob.py").write_text(JOB)
    (tmp_path / "parent.py").write_text(PARENT)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), str(tmp_path), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, str(tmp_path / "parent.py")], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not pool._pidfd_works(), reason="workers are forked under Linux 5.3 and later only")
def test_a_cpu_pool_forks_its_workers_from_the_warm_server_while_the_environment_holds(tmp_path):
    got = _scenario(tmp_path)
    assert got["warm"] is True and got["warm_after_change"] is False
    job_file = str(tmp_path / "forkjob.py")
    for kind in ("forked", "spawned"):
        runs = got[kind]
        assert sorted(runs) == ["0", "1", "2"]
        assert [runs[k][0] for k in ("0", "1", "2")] == [2, 4, 6], kind  # the same runs either way
        assert {r[2] for r in runs.values()} == {job_file}, kind
    assert got["pid"] not in {r[1] for r in got["forked"].values()}  # the server's children
    assert {r[1] for r in got["spawned"].values()} == {got["pid"]}  # this process's own
    assert "could not run: the worker imported forkjob from" in got["other_copy"], got["other_copy"]
    assert "the pool's process from /elsewhere/forkjob.py" in got["other_copy"], got["other_copy"]


def test_a_worker_whose_module_came_from_another_file_runs_nothing():
    "The check itself, in this process: the worker puts its sentence on the results and ends before any run."
    results = queue.Queue()
    with pytest.raises(SystemExit):
        pool._pool_worker(pool.run_pool, (), None, 1, None, results, None, None, origin="/elsewhere/pool.py")
    kind, i, message, pid = results.get_nowait()
    assert (kind, i, pid) == ("error", -1, os.getpid())
    assert (
        message
        == f"the worker imported indicipr.systems.pool from {pool.__file__}, the pool's process from /elsewhere/pool.py"
    )
