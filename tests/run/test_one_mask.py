"""One mask for every string that leaves the process: whatever is URL-like loses its user part's key, every query value
and every fragment, whatever their names, in what is printed, stored and raised; a run folder is never a URL; an
endpoint keeps the query string it needs; a name the user gave reaches the terminal with its control characters
escaped."""

from __future__ import annotations

import json

import pytest
from helpers import QA_SMALL
from standins.openai_server import OpenAIStandIn, constant, error_body

from indicipr.data import basics
from indicipr.llm import client as llm
from indicipr.llm.servers import check_models_available, llm_config
from indicipr.run import cli, notebook_files, runner

KEY = "SECRETKEY"
GOLD = QA_SMALL / "test_squad.jsonl"
FORMS = [
    f"https://h/v1#token={KEY}",
    f"https://h/cb#access_token={KEY}&state=1",
    f"https://h/v1?code={KEY}",
    f"https://h/v1?k={KEY}",
    f"https://h/blob?sv=2020&sig=x&se={KEY}",
    f"https://h/v1?sv={KEY}",
    f"https://h/v1?{KEY}",
    f"https://h/v1?={KEY}",
    f"http://127.0.0.1:9/v1?api-version=1#{KEY}",
]


def run_main(capsys, *argv) -> tuple[int, str, str]:
    try:
        rc = cli.main([str(a) for a in argv])
    except SystemExit as e:
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("url", FORMS)
def test_every_masker_hides_fragments_and_query_values_of_any_name(url):
    ep = llm.Endpoint(url, "m")
    shown = [basics.mask_secrets(url), llm.mask_url(url), llm.redact(f"error at {url}"), repr(ep), ep.stored_url]
    shown += [notebook_files.scrub_text(f"served by {url}\n")]
    assert all(KEY not in s for s in shown), shown
    assert KEY in "".join(basics.secret_parts(url)) and KEY not in basics.terminal_text(url)


@pytest.mark.parametrize("url", FORMS)
def test_a_parameter_with_a_fragment_or_any_query_value_reaches_the_kernel_only(url, tmp_path):
    "What papermill writes (and run.json and the report keep) is masked; the kernel's environment has the real value."
    shown, env = runner.kernel_parameters({"llm_endpoints": f"m={url}", "seed": 1})
    assert KEY not in json.dumps(shown) and KEY in json.dumps(env)
    log = tmp_path / "x.kernel.log"
    log.write_text(f"GET {url} -> 401\n")  # what a kernel printed of a URL it built itself
    assert basics.scrub_file(log, set()) and KEY not in log.read_text()


@pytest.mark.parametrize("url", FORMS)
def test_an_error_message_holding_a_url_is_printed_masked(url, capsys):
    rc, out, err = run_main(capsys, "evaluate", "--gold", GOLD, "--pred", url)
    assert rc == 2 and "Traceback" not in err and err.strip(), err
    assert KEY not in out + err, err


@pytest.mark.parametrize("run_dir", [f"http://user:{KEY}@127.0.0.1:9/runs/x", f"https://h/runs#token={KEY}"])
def test_a_url_as_run_dir_is_refused_without_echoing_the_key(run_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(runner, "ensure_kernel", lambda *a: pytest.fail("a kernel was started"))
    rc, out, err = run_main(capsys, "reproduce", "--only", "06_scoring.metrics", "--run-dir", run_dir)
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("indicipr reproduce: --run-dir ") and KEY not in out + err, err
    assert list(tmp_path.iterdir()) == []


def test_a_base_url_with_a_query_keeps_it_on_every_path(no_llm_api_key):
    "Azure-style `?api-version=`: /chat/completions, /models and Ollama's /api/chat go before the query, which is sent."
    reply = json.dumps({"items": [1]})
    with OpenAIStandIn(["m"], reply=constant(reply)) as fake:
        url = f"{fake.base_url}?api-version=2024-06-01&k={KEY}"
        msgs = [{"role": "user", "content": "hi"}]
        assert llm.chat_json(llm.Endpoint(url, "m", timeout=5, max_retries=0), msgs, None).parsed == {"items": [1]}
        check_models_available(llm_config({"*": url}), ["m"])
        ollama = llm.Endpoint(url, "m", kind="ollama", timeout=5, max_retries=0)
        assert llm.chat_json(ollama, msgs, None).parsed == {"items": [1]}
    query = f"?api-version=2024-06-01&k={KEY}"
    assert [r["path"] for r in fake.requests] == [f"/v1/chat/completions{query}", f"/api/chat{query}"]
    assert fake.gets == [f"/v1/models{query}"]


def test_a_server_error_naming_the_url_is_raised_masked(no_llm_api_key):
    with OpenAIStandIn(["m"], script=[("status", 400, {}, error_body("bad"))]) as fake:
        url = f"{fake.base_url}?k={KEY}#token={KEY}"
        with pytest.raises(llm.LLMRequestError) as e:
            llm.chat_json(llm.Endpoint(url, "m", timeout=5, max_retries=0), [{"role": "user", "content": "x"}], None)
    assert KEY not in str(e.value) and "?k=***" in str(e.value), str(e.value)


@pytest.mark.parametrize(
    "name, shown",
    [
        ("a\x1b[2Jb.jsonl", r"a\x1b[2Jb.jsonl"),
        ("t\x1b]0;pwned\x07.jsonl", r"t\x1b]0;pwned\x07.jsonl"),
        ("c\x9bd", r"c\x9bd"),
    ],
)
def test_a_control_character_in_a_file_name_is_printed_escaped(name, shown, tmp_path, capsys):
    rc, out, err = run_main(capsys, "evaluate", "--gold", GOLD, "--pred", tmp_path / name)
    assert rc == 2 and shown in err, err
    assert not any(ch in err for ch in "\x1b\x07\x9b"), repr(err)


def test_the_runner_echo_escapes_control_characters_and_masks():
    said = []
    runner.tolerant_echo(said.append)(f"[1/1] x\x1b[31m: see https://h/v1#{KEY}")
    assert said == [r"[1/1] x\x1b[31m: see https://h/v1#***"]
