"""indicipr.llm against a fault-injecting OpenAI-compatible server on loopback: retries (5xx, 429 with
Retry-After, timeouts), unreachable servers, parse-failure results, the cache, bounded concurrency,
API keys that never leak; and the real local llama.cpp server when it is installed."""
import importlib.util
import json
import logging
import os
import pickle
import socket
import time

import pytest

from fake_llm_server import FakeLLM, error_body
from indicipr import llm
from indicipr.llm import (ChatResult, Endpoint, LLMConfigError, LLMRequestError, LLMUnreachableError, ResponseCache,
                          chat_json, local_llm_server, request_key, run_requests)

MSGS = [{"role": "system", "content": "Return JSON."}, {"role": "user", "content": "Give me an object."}]
SCHEMA = {"type": "object", "properties": {"items": {"type": "array"}}, "required": ["items"]}
OK = json.dumps({"items": [1, 2]})


def ep(fake, **kw):
    "A fast-retrying endpoint for the fake server."
    return Endpoint(fake.base_url, "fake-model", **{"timeout": 5, "max_retries": 3, "backoff_s": 0.01, **kw})


def constant(text):
    return lambda body: text


def test_server_errors_are_retried_then_succeed(caplog):
    with FakeLLM([("status", 500, {}, error_body("boom")), ("status", 503, {}, error_body("busy"))],
                 reply=constant(OK)) as fake, caplog.at_level(logging.WARNING, "indicipr.llm"):
        res = chat_json(ep(fake), MSGS, SCHEMA)
    assert res == ChatResult({"items": [1, 2]}, OK, None)
    assert len(fake.requests) == 3
    assert sum("server error; retry" in r.getMessage() for r in caplog.records) == 2


def test_429_retry_after_is_honoured():
    with FakeLLM([("status", 429, {"Retry-After": "1"}, error_body("slow down"))], reply=constant(OK)) as fake:
        t0 = time.monotonic()
        res = chat_json(ep(fake, backoff_s=0.01), MSGS, SCHEMA)
    assert res.parsed == {"items": [1, 2]} and len(fake.requests) == 2
    gap = fake.requests[1]["t"] - fake.requests[0]["t"]
    assert gap >= 0.95, f"the retry came {gap:.2f} s after a 429 asking for 1 s"
    assert time.monotonic() - t0 < 5


def test_timeouts_are_retried():
    with FakeLLM([("sleep", 3)], reply=constant(OK)) as fake:
        t0 = time.monotonic()
        res = chat_json(ep(fake, timeout=0.5), MSGS, SCHEMA)
    assert res.parsed == {"items": [1, 2]} and len(fake.requests) == 2
    assert time.monotonic() - t0 < 2.5


def test_retries_are_bounded_and_the_error_is_clear():
    with FakeLLM([("status", 500, {}, error_body("boom"))] * 10) as fake:
        with pytest.raises(LLMRequestError, match=r"kept failing after 3 attempts: .*500 server error"):
            chat_json(ep(fake, max_retries=2), MSGS, SCHEMA)
    assert len(fake.requests) == 3


def test_client_errors_are_not_retried():
    with FakeLLM([("status", 400, {}, error_body("bad schema"))]) as fake:
        with pytest.raises(LLMRequestError, match="answered 400: .*bad schema"):
            chat_json(ep(fake), MSGS, SCHEMA)
    assert len(fake.requests) == 1


def test_unreachable_server_gives_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    dead = Endpoint(f"http://127.0.0.1:{port}/v1", "m", max_retries=2, backoff_s=0.01, timeout=2)
    with pytest.raises(LLMUnreachableError, match=rf"cannot reach the LLM server at http://127.0.0.1:{port}/v1 .*after 3 attempts"):
        chat_json(dead, MSGS, SCHEMA)


def test_broken_json_is_a_parse_failure_not_a_crash(tmp_path):
    broken = '{"items": [{"question": "What is'
    cache = ResponseCache(tmp_path / "c.jsonl")
    with FakeLLM([("finish", broken, "length"), ("content", "Sure! no JSON here")]) as fake:
        res = chat_json(ep(fake), MSGS, SCHEMA, cache)
        assert res.parsed is None and res.raw == broken
        assert res.error.startswith("invalid JSON") and "cut off at max_tokens" in res.error
        again = chat_json(ep(fake), MSGS, SCHEMA, ResponseCache(tmp_path / "c.jsonl"))   # a rerun: cached
        assert again == res and len(fake.requests) == 1
        other = chat_json(ep(fake), MSGS[:1] + [{"role": "user", "content": "other"}], SCHEMA, cache)
        assert other.parsed is None and other.error.startswith("invalid JSON") and len(fake.requests) == 2
        wrong = chat_json(ep(fake), MSGS[:1] + [{"role": "user", "content": "third"}], {"type": "array"}, cache)
    assert wrong.parsed is None and "does not match the schema" in wrong.error


def test_schema_goes_into_response_format_per_endpoint_kind():
    with FakeLLM(reply=constant(OK)) as fake:
        chat_json(ep(fake, kind="llama_cpp"), MSGS, SCHEMA, temperature=0, max_tokens=20, top_k=5)
        chat_json(ep(fake), MSGS, SCHEMA)
    first, second = (r["body"] for r in fake.requests)
    assert first["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert first["temperature"] == 0 and first["max_tokens"] == 20 and first["top_k"] == 5
    assert second["response_format"]["type"] == "json_schema" and second["response_format"]["json_schema"]["schema"] == SCHEMA


def test_run_requests_bounded_concurrency_in_order_and_cached(tmp_path):
    reqs = [{"messages": [{"role": "user", "content": f"item {i}"}], "schema": None, "params": {"temperature": 0}}
            for i in range(8)]
    reqs.append(reqs[3])                                  # a duplicate: sent once
    echo = lambda body: json.dumps({"echo": body["messages"][0]["content"]})
    cache = ResponseCache(tmp_path / "c.jsonl")
    with FakeLLM(reply=echo, delay=0.2) as fake:
        res = run_requests(ep(fake), reqs, cache, concurrency=3, progress=False)
        assert [r.parsed["echo"] for r in res] == [f"item {i}" for i in range(8)] + ["item 3"]
        assert len(fake.requests) == 8 and 2 <= fake.max_in_flight <= 3
        rerun_cache = ResponseCache(tmp_path / "c.jsonl")
        again = run_requests(ep(fake), reqs, rerun_cache, concurrency=3, progress=False)
        assert again == res and len(fake.requests) == 8          # zero calls on the rerun
    assert rerun_cache.hits == 8 and rerun_cache.stores == 0 and len(rerun_cache) == 8


def test_run_requests_raises_after_caching_what_finished(tmp_path):
    reqs = [{"messages": [{"role": "user", "content": f"q{i}"}]} for i in range(4)]
    cache = ResponseCache(tmp_path / "c.jsonl")
    with FakeLLM([ "ok", ("status", 401, {}, error_body("no"))], reply=constant(OK)) as fake:
        with pytest.raises(LLMRequestError, match="401"):
            run_requests(ep(fake), reqs, cache, concurrency=1, progress=False)
    # what finished is cached; what was still queued when the error surfaced was cancelled
    assert 2 <= len(fake.requests) <= 3 and len(cache) == len(fake.requests) - 1


FAKE_KEY = "sk-test-FAKE0123456789abcdefSECRET"


def test_api_key_never_reaches_cache_logs_errors_or_output(tmp_path, monkeypatch, caplog, capsys):
    monkeypatch.setenv("INDICIPR_TEST_LLM_KEY", FAKE_KEY)
    caplog.set_level(logging.DEBUG)                       # every logger, openai's and httpx's included
    cache = ResponseCache(tmp_path / "c.jsonl")
    with FakeLLM([("status", 500, {}, error_body("boom")), "ok",
                  ("status", 401, {}, error_body(f"Incorrect API key provided: {FAKE_KEY}. See your account."))],
                 reply=constant(OK)) as fake:
        endpoint = ep(fake, api_key_env="INDICIPR_TEST_LLM_KEY")
        assert chat_json(endpoint, MSGS, SCHEMA, cache).parsed == {"items": [1, 2]}
        with pytest.raises(LLMRequestError) as err:
            chat_json(endpoint, [{"role": "user", "content": "again"}], SCHEMA, cache)
    assert all(r["auth"] == f"Bearer {FAKE_KEY}" for r in fake.requests)    # the key was really used
    assert FAKE_KEY not in str(err.value) and "Incorrect API key provided: ***" in str(err.value)
    out = capsys.readouterr()
    seen = {"cache": (tmp_path / "c.jsonl").read_text(), "logs": caplog.text, "stdout": out.out, "stderr": out.err,
            "repr": repr(endpoint), "pickle": pickle.dumps(endpoint).decode("latin-1")}
    for where, text in seen.items():
        assert "SECRET" not in text, f"the API key leaked into the {where}"


def test_openai_key_in_env_is_not_sent_to_other_servers(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    with FakeLLM(reply=constant(OK)) as fake:
        chat_json(ep(fake), MSGS, SCHEMA)
    assert FAKE_KEY not in fake.requests[0]["auth"]


def test_missing_llama_cpp_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llama_cpp" else real(name, *a))
    with pytest.raises(LLMConfigError, match=r"pip install 'llama-cpp-python\[server\]'"):
        with local_llm_server(): pass


needs_llama = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None and not os.environ.get("CI"),
                                 reason="llama-cpp-python is not installed (pip install 'llama-cpp-python[server]')")


def port_open(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@needs_llama
def test_local_llm_server_answers_under_a_schema_and_stops(tmp_path):
    schema = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 40}}, "required": ["answer"]}
    msgs = [{"role": "user", "content": "What is the capital of France? Reply in JSON."}]
    with pytest.raises(RuntimeError, match="body failed"):
        with local_llm_server(n_ctx=512) as endpoint:
            port = int(endpoint.base_url.rsplit(":", 1)[1].split("/")[0])
            assert endpoint.kind == "llama_cpp" and endpoint.base_url.startswith("http://127.0.0.1:")
            res = chat_json(endpoint, msgs, schema, ResponseCache(tmp_path / "c.jsonl"), temperature=0, max_tokens=30)
            assert res.error is None and isinstance(res.parsed["answer"], str), res
            raise RuntimeError("body failed")                # the server must stop on exceptions too
    assert not port_open(port)
