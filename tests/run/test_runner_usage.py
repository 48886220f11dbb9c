"""What the runner records of a stage's kernel: its CPU seconds with those of every process it started."""


def test_a_stages_cpu_counts_the_work_of_a_descendant_still_running_and_of_what_it_reaped():
    """A kernel's CPU seconds include a process it started that is still running at shutdown, with the children that
    process waited for, not only the children the kernel itself waited for."""
    import subprocess
    import sys

    import psutil

    from indicipr.run.runner import _process_cpu_seconds

    tree = (  # a child that forks a grandchild burning about a second of CPU, reaps it, says so, then waits
        "import os, sys, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    t = time.process_time()\n"
        "    while time.process_time() - t < 1.0: pass\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0); print('reaped', flush=True); time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", tree], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "reaped"
        own = psutil.Process().cpu_times()
        alone = own.user + own.system + own.children_user + own.children_system  # what the kernel itself waited for
        assert _process_cpu_seconds(psutil.Process().pid) >= alone + 0.9
    finally:
        child.kill()
        child.wait()
