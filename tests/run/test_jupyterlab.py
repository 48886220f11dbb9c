"""JupyterLab as its users meet it, in a real browser: JupyterLab started from the project's venv on 127.0.0.1 with a
token, serving a fresh clone of the checkout, driven in Debian's Chromium by Playwright (no browser download).
A notebook opens straight onto the project's kernel (no "Select Kernel" dialog) and is not marked modified; saving it
leaves `git status` clean (nbdev's pre-save hook, `jupyter_hooks = True`); Run All runs it top to bottom without an
error, and saving then changes nothing but outputs."""

import json
import os
import secrets
import subprocess
import time
import urllib.request

import pytest
from helpers import BIN, CHROMIUM_ARGS, ROOT, chromium_or_skip, unused_port

pytestmark = pytest.mark.slow
NOTEBOOK = "notebooks/06_scoring.metrics.ipynb"


def git(repo, *args) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def lab(tmp_path):
    "JupyterLab on a fresh clone of the checkout's last commit; yields (base URL with token, clone, server log path)."
    repo = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(repo)], check=True, capture_output=True)
    port, token = unused_port(), secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if k not in ("INDICIPR_MAIN_JOB", "INDICIPR_RUN_DIR", "INDICIPR_ROOT")}
    env.update(
        PATH=f"{BIN}:{env['PATH']}",
        JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"),  # no user-level config
        JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"),
    )
    log = tmp_path / "lab.log"
    proc = subprocess.Popen(
        [
            str(BIN / "jupyter"),
            "lab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={token}",
            "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            f"--ServerApp.root_dir={repo}",
            *(["--allow-root"] if os.geteuid() == 0 else []),
        ],
        cwd=repo,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"jupyter lab exited: {log.read_text()[-3000:]}")
                time.sleep(0.5)
        else:
            pytest.fail(f"jupyter lab did not start: {log.read_text()[-3000:]}")
        yield base, token, repo, log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_notebook_opens_on_the_kernel_runs_and_saves_clean(lab):
    exe = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    base, token, repo, log = lab
    committed = json.loads((repo / NOTEBOOK).read_text())
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page()
            page.goto(f"{base}/lab/tree/{NOTEBOOK}?token={token}")
            tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="06_scoring.metrics.ipynb")
            tab.wait_for(timeout=120_000)
            # the kernel of the notebook's own kernelspec starts, with no dialog asking for one
            page.wait_for_function(
                """() => [...document.querySelectorAll('.jp-Toolbar-kernelName, .jp-KernelStatus')]
                                           .some(e => /Python 3/.test(e.textContent))""",
                timeout=120_000,
            )
            page.wait_for_function(
                """() => [...document.querySelectorAll('.jp-Notebook-ExecutionIndicator')]
                                           .some(e => /Idle/i.test(e.getAttribute('data-status') || e.title || ''))
                                     || [...document.querySelectorAll('.jp-KernelStatus')].some(e => /Idle/.test(e.textContent))""",
                timeout=120_000,
            )
            assert page.locator(".jp-Dialog").count() == 0, page.locator(".jp-Dialog").inner_text()
            page.wait_for_timeout(2_000)
            assert "jp-mod-dirty" not in (tab.get_attribute("class") or ""), (
                "the notebook is marked modified on opening"
            )
            # save as it is: nbdev's pre-save hook keeps the file as committed
            page.locator(".jp-Notebook").first.click()
            page.keyboard.press("Control+s")
            page.wait_for_timeout(3_000)
            assert git(repo, "status", "--porcelain") == "", git(repo, "diff")
            # Run All, top to bottom, without an error output
            page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
            page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
            page.wait_for_function(
                """() => {
                const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(e => e.textContent.trim());
                return prompts.length > 0 && prompts.every(p => /^\\[\\d+\\]:$/.test(p));
            }""",
                timeout=300_000,
            )
            errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.error']")
            assert errors.count() == 0, errors.first.inner_text()
            page.keyboard.press("Control+s")
            page.wait_for_timeout(3_000)
        finally:
            browser.close()
    saved = json.loads((repo / NOTEBOOK).read_text())
    # what changed is outputs only: metadata, sources and cell metadata as committed
    assert saved["metadata"] == committed["metadata"]
    assert [(c["source"], c["metadata"]) for c in saved["cells"]] == [
        (c["source"], c["metadata"]) for c in committed["cells"]
    ]
    assert any(c.get("outputs") for c in saved["cells"])
    assert "hook failed" not in log.read_text(errors="replace"), log.read_text(errors="replace")[
        -3000:
    ]  # nbdev's pre-save hook ran
