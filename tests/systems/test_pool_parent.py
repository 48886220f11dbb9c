"""The pool's workers end with the process that started them (`indicipr.systems.pool`): a parent killed with `kill -9`
leaves no worker running, however long its runs would have gone on."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import ROOT

PARENT = """
import os
import sys
import time
from pathlib import Path


def hold(job, callbacks=None):
    "A run that never ends: write this worker's pid, then wait."
    Path(job).write_text(str(os.getpid()))
    while True:
        time.sleep(0.2)


if __name__ == "__main__":
    from indicipr.systems.pool import run_pool

    out = Path(sys.argv[1])
    for _ in run_pool(hold, [str(out / "worker-a"), str(out / "worker-b")], workers=2):
        pass
"""


def _running(pid: int) -> bool:
    "Whether process `pid` exists and has not ended (a zombie waiting for its new parent to reap it has ended)."
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_pool_whose_parent_is_killed_leaves_no_worker_running(tmp_path):
    "Two workers of `run_pool` holding runs that never end; `kill -9` of their parent: both are gone within seconds."
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    with open(tmp_path / "parent.log", "wb") as log:
        parent = subprocess.Popen([sys.executable, str(script), str(tmp_path)], env=env, stdout=log, stderr=log)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 240  # two spawned workers import torch and transformers first
        while len(pids) < 2 and time.monotonic() < deadline and parent.poll() is None:
            time.sleep(0.2)
            pids = [
                int(t)
                for f in ("worker-a", "worker-b")
                if (t := (tmp_path / f).read_text() if (tmp_path / f).exists() else "")
            ]
        assert len(pids) == 2, (tmp_path / "parent.log").read_text()
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 5
        while any(map(_running, pids)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in pids if _running(p)], "pool workers outlived their killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid in pids:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
