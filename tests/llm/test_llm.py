"""indicipr.llm.client, llm_runs and llm_servers against a fault-injecting OpenAI-compatible server on loopback: retries (5xx, 429 with
Retry-After, timeouts), unreachable servers, parse-failure results, the cache, bounded concurrency,
API keys that never leak, Ollama's native API with a context window sized for the prompts, the
models preflight, the cost estimate printed before a paid endpoint is called, the one JSON-reply
parser; and the real local llama.cpp server when it is installed."""

import base64
import importlib.util
import io
import json
import logging
import pickle
import sys
import time

import pytest
from helpers import needs_llama_cpp, port_open, unused_port
from standins.openai_server import OpenAIStandIn, constant, error_body

from indicipr.data import config
from indicipr.llm import runs as llm_runs
from indicipr.llm.client import (
    ChatResult,
    Endpoint,
    LLMConfigError,
    LLMCostError,
    LLMRequestError,
    LLMUnreachableError,
    ResponseCache,
    chat_json,
    parse_json_reply,
    request_key,
)
from indicipr.llm.runs import run_requests
from indicipr.llm.servers import check_models_available, llm_config, local_llm_server, open_endpoints

MSGS = [{"role": "system", "content": "Return JSON."}, {"role": "user", "content": "Give me an object."}]
SCHEMA = {"type": "object", "properties": {"items": {"type": "array"}}, "required": ["items"]}
OK = json.dumps({"items": [1, 2]})
MODEL = "fake-model"  # the model `ep` asks for, served by the stand-in of each test


def ep(fake, **kw):
    "A fast-retrying endpoint for the fake server."
    return Endpoint(fake.base_url, MODEL, **{"timeout": 5, "max_retries": 3, "backoff_s": 0.01, **kw})


def test_server_errors_are_retried_then_succeed(caplog):
    with (
        OpenAIStandIn(
            [MODEL],
            script=[("status", 500, {}, error_body("boom")), ("status", 503, {}, error_body("busy"))],
            reply=constant(OK),
        ) as fake,
        caplog.at_level(logging.WARNING, "indicipr.llm.client"),
    ):
        res = chat_json(ep(fake), MSGS, SCHEMA)
    assert res == ChatResult({"items": [1, 2]}, OK, None)
    assert len(fake.requests) == 3
    assert sum("server error; retry" in r.getMessage() for r in caplog.records) == 2


def test_429_retry_after_is_honoured():
    with OpenAIStandIn(
        [MODEL], script=[("status", 429, {"Retry-After": "1"}, error_body("slow down"))], reply=constant(OK)
    ) as fake:
        t0 = time.monotonic()
        res = chat_json(ep(fake, backoff_s=0.01), MSGS, SCHEMA)
    assert res.parsed == {"items": [1, 2]} and len(fake.requests) == 2
    gap = fake.requests[1]["t"] - fake.requests[0]["t"]
    assert gap >= 0.95, f"the retry came {gap:.2f} s after a 429 asking for 1 s"
    assert time.monotonic() - t0 < 5


def test_timeouts_are_retried():
    with OpenAIStandIn([MODEL], script=[("sleep", 3)], reply=constant(OK)) as fake:
        t0 = time.monotonic()
        res = chat_json(ep(fake, timeout=0.5), MSGS, SCHEMA)
    assert res.parsed == {"items": [1, 2]} and len(fake.requests) == 2
    assert time.monotonic() - t0 < 2.5


def test_retries_are_bounded_and_the_error_is_clear():
    with OpenAIStandIn([MODEL], script=[("status", 500, {}, error_body("boom"))] * 10) as fake:
        with pytest.raises(LLMRequestError, match=r"kept failing after 3 attempts: .*500 server error"):
            chat_json(ep(fake, max_retries=2), MSGS, SCHEMA)
    assert len(fake.requests) == 3


def test_client_errors_are_not_retried():
    with OpenAIStandIn([MODEL], script=[("status", 400, {}, error_body("bad schema"))]) as fake:
        with pytest.raises(LLMRequestError, match="answered 400: .*bad schema"):
            chat_json(ep(fake), MSGS, SCHEMA)
    assert len(fake.requests) == 1


def test_unreachable_server_gives_a_clear_error():
    port = unused_port()
    dead = Endpoint(f"http://127.0.0.1:{port}/v1", "m", max_retries=2, backoff_s=0.01, timeout=2)
    with pytest.raises(
        LLMUnreachableError, match=rf"cannot reach the LLM server at http://127.0.0.1:{port}/v1 .*after 3 attempts"
    ):
        chat_json(dead, MSGS, SCHEMA)


def test_broken_json_is_a_parse_failure_not_a_crash(tmp_path):
    broken = '{"items": [{"question": "What is'
    cache = ResponseCache(tmp_path / "c.jsonl")
    with OpenAIStandIn([MODEL], script=[("finish", broken, "length"), ("content", "Sure! no JSON here")]) as fake:
        res = chat_json(ep(fake), MSGS, SCHEMA, cache)
        assert res.parsed is None and res.raw == broken
        assert res.error.startswith("invalid JSON") and "cut off at max_tokens" in res.error
        again = chat_json(ep(fake), MSGS, SCHEMA, ResponseCache(tmp_path / "c.jsonl"))  # a rerun: cached
        assert again == res and len(fake.requests) == 1
        other = chat_json(ep(fake), MSGS[:1] + [{"role": "user", "content": "other"}], SCHEMA, cache)
        assert other.parsed is None and other.error.startswith("no JSON in the reply") and len(fake.requests) == 2
        wrong = chat_json(ep(fake), MSGS[:1] + [{"role": "user", "content": "third"}], {"type": "array"}, cache)
    assert wrong.parsed is None and "does not match the schema" in wrong.error


def test_schema_goes_into_response_format_per_endpoint_kind():
    with OpenAIStandIn([MODEL], reply=constant(OK)) as fake:
        chat_json(ep(fake, kind="llama_cpp"), MSGS, SCHEMA, temperature=0, max_tokens=20, top_k=5)
        chat_json(ep(fake), MSGS, SCHEMA)
    first, second = (r["body"] for r in fake.requests)
    assert first["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert first["temperature"] == 0 and first["max_tokens"] == 20 and first["top_k"] == 5
    assert (
        second["response_format"]["type"] == "json_schema"
        and second["response_format"]["json_schema"]["schema"] == SCHEMA
    )


def test_run_requests_bounded_concurrency_in_order_and_cached(tmp_path):
    reqs = [
        {"messages": [{"role": "user", "content": f"item {i}"}], "schema": None, "params": {"temperature": 0}}
        for i in range(8)
    ]
    reqs.append(reqs[3])  # a duplicate: sent once

    def echo(body):
        return json.dumps({"echo": body["messages"][0]["content"]})

    cache = ResponseCache(tmp_path / "c.jsonl")
    with OpenAIStandIn([MODEL], reply=echo, delay=0.2) as fake:
        res = run_requests(ep(fake), reqs, cache, concurrency=3, progress=False)
        assert [r.parsed["echo"] for r in res] == [f"item {i}" for i in range(8)] + ["item 3"]
        assert len(fake.requests) == 8 and 2 <= fake.max_in_flight <= 3
        rerun_cache = ResponseCache(tmp_path / "c.jsonl")
        again = run_requests(ep(fake), reqs, rerun_cache, concurrency=3, progress=False)
        assert again == res and len(fake.requests) == 8  # zero calls on the rerun
    assert rerun_cache.hits == 8 and rerun_cache.stores == 0 and len(rerun_cache) == 8


def test_run_requests_raises_after_caching_what_finished(tmp_path):
    reqs = [{"messages": [{"role": "user", "content": f"q{i}"}]} for i in range(4)]
    cache = ResponseCache(tmp_path / "c.jsonl")
    with OpenAIStandIn([MODEL], script=["ok", ("status", 401, {}, error_body("no"))], reply=constant(OK)) as fake:
        with pytest.raises(LLMRequestError, match="401"):
            run_requests(ep(fake), reqs, cache, concurrency=1, progress=False)
    # what finished is cached; what was still queued when the error surfaced was cancelled
    assert 2 <= len(fake.requests) <= 3 and len(cache) == len(fake.requests) - 1


def test_run_requests_can_record_a_rejected_request_and_go_on(tmp_path):
    reqs = [{"messages": [{"role": "user", "content": f"q{i}"}]} for i in range(3)]
    with OpenAIStandIn(
        [MODEL], script=[("status", 400, {}, error_body("context length exceeded"))], reply=constant(OK)
    ) as fake:
        res = run_requests(
            ep(fake),
            reqs,
            ResponseCache(tmp_path / "c.jsonl"),
            concurrency=1,
            progress=False,
            record_request_errors=True,
        )
    assert res[0].raw is None and res[0].parsed is None and "context length exceeded" in res[0].error
    assert [r.parsed for r in res[1:]] == [{"items": [1, 2]}] * 2 and len(fake.requests) == 3


# ---------------------------------------------------------------- one parser for every caller's replies
@pytest.mark.parametrize(
    "raw,kwargs,expected",
    [
        ('```json\n{"items": [{"question": "Q?"}]}\n```', {}, {"items": [{"question": "Q?"}]}),  # generation, fenced
        ('Here you go: {"answer": "the Controller"} Thanks!', {}, {"answer": "the Controller"}),  # chatter
        ('{"answer": "the Central Gov', {"partial": True}, {"answer": "the Central Gov"}),  # cut by max_tokens (09)
        ('{"answer": "a \\"quoted\\" wo', {"partial": True}, {"answer": 'a "quoted" wo'}),
    ],
)
def test_one_parser_reads_every_reply_form(raw, kwargs, expected):
    assert parse_json_reply(raw, **kwargs) == (expected, None)


def test_one_parser_reports_why_a_reply_is_unusable():
    from indicipr.analysis.quality import JudgeScores

    assert parse_json_reply('{"answer": "the Central Gov', "length")[1].endswith("cut off at max_tokens")
    assert "required property" in parse_json_reply('{"x": 1}', schema={"type": "object", "required": ["items"]})[1]
    scores, err = parse_json_reply(
        '{"question_specificity": 3, "answer_sufficiency": "2", "answer_minimality": 1, "legal_relevance": 3}',
        schema=JudgeScores,
    )
    assert err is None and isinstance(scores, JudgeScores) and scores.answer_sufficiency == 2
    assert "legal_relevance" in parse_json_reply('{"question_specificity": 3}', schema=JudgeScores)[1]
    assert parse_json_reply("no json at all")[1].startswith("no JSON in the reply")


# ---------------------------------------------------------------- Ollama's native API and its context window
def test_ollama_endpoint_sends_num_ctx_sized_for_the_longest_prompt(tmp_path):
    short = [{"role": "user", "content": "short question"}]
    long = [{"role": "user", "content": "statute text " * 1500}]  # 19,500 characters: ~6,500 tokens at 3/token
    with OpenAIStandIn(["llama3.1:8b"], reply=constant('{"answer": "x"}')) as fake:
        ollama = Endpoint(fake.base_url, "llama3.1:8b", kind="ollama", timeout=5, max_retries=0)
        res = run_requests(
            ollama,
            [
                {"messages": short, "params": {"max_tokens": 64, "temperature": 0}},
                {"messages": long, "params": {"max_tokens": 64, "temperature": 0}},
            ],
            ResponseCache(tmp_path / "c.jsonl"),
            concurrency=1,
            progress=False,
        )
    assert [r.parsed for r in res] == [{"answer": "x"}] * 2
    assert [r["path"] for r in fake.requests] == ["/api/chat"] * 2  # the native API, not /v1
    bodies = [r["body"] for r in fake.requests]
    assert all(b["options"]["num_ctx"] == 8192 for b in bodies)  # one window for the run, holding the long prompt
    assert all(
        b["options"]["num_predict"] == 64 and b["options"]["temperature"] == 0 and b["stream"] is False for b in bodies
    )
    assert bodies[0]["format"] == "json"


def test_ollama_schema_and_finish_reason_and_errors(tmp_path):
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    with OpenAIStandIn(
        ["nope"],
        script=[("finish", '{"answer": "cut', "length"), ("status", 404, {}, {"error": "model 'nope' not found"})],
    ) as fake:
        ollama = Endpoint(fake.base_url, "nope", kind="ollama", timeout=5, max_retries=0, num_ctx=4096)
        res = chat_json(ollama, MSGS, schema)
        assert res.parsed is None and "cut off at max_tokens" in res.error
        assert fake.requests[0]["body"]["format"] == schema and fake.requests[0]["body"]["options"]["num_ctx"] == 4096
        with pytest.raises(LLMRequestError, match="answered 404: .*model 'nope' not found"):
            chat_json(ollama, [{"role": "user", "content": "again"}], schema)


def test_ollama_server_errors_are_retried():
    with OpenAIStandIn(["m"], script=[("status", 503, {}, {"error": "busy"})], reply=constant(OK)) as fake:
        res = chat_json(
            Endpoint(fake.base_url, "m", kind="ollama", timeout=5, max_retries=2, backoff_s=0.01), MSGS, SCHEMA
        )
    assert res.parsed == {"items": [1, 2]} and len(fake.requests) == 2


# ---------------------------------------------------------------- configured models: the preflight
def test_preflight_names_every_missing_model_asking_each_server_once(no_llm_api_key):
    dead_port = unused_port()
    with OpenAIStandIn(["llama3.1:8b", "mistral:7b"]) as a, OpenAIStandIn(["qwen2.5:7b"]) as b:
        config = llm_config(
            f"llama3.1:*={a.base_url}; mistral:7b={a.base_url}; gemma3:12b={a.base_url}; "
            f"qwen2.5:*={b.base_url}; phi3:mini={b.base_url}; dead:1=http://127.0.0.1:{dead_port}/v1"
        )
        t0 = time.monotonic()
        with pytest.raises(LLMConfigError) as err:
            check_models_available(
                config,
                [
                    "llama3.1:8b",
                    "mistral:7b",
                    "gemma3:12b",
                    "qwen2.5:7b",
                    "phi3:mini",
                    "dead:1",
                    "gemma3:12b",
                    "smollm2",
                ],
            )
        assert time.monotonic() - t0 < 10
        assert a.gets == ["/v1/models"] and b.gets == ["/v1/models"]  # each server asked once
    msg = str(err.value)
    assert msg.startswith("3 configured model(s) are not available")
    assert f"gemma3:12b at {a.base_url}: not served (it serves: llama3.1:8b, mistral:7b)" in msg
    assert f"phi3:mini at {b.base_url}: not served (it serves: qwen2.5:7b)" in msg
    assert f"dead:1 at http://127.0.0.1:{dead_port}/v1: unreachable" in msg
    assert "llama3.1:8b at" not in msg and "smollm2" not in msg  # served / the project's own server


def test_preflight_passes_and_open_endpoints_yields_each_model(no_llm_api_key):
    with OpenAIStandIn(["llama3.1:latest", "mistral:7b"]) as fake:
        config = llm_config({"*": f"ollama+{fake.base_url}"})
        with open_endpoints(config, ["llama3.1", "mistral:7b"]) as eps:
            assert set(eps) == {"llama3.1", "mistral:7b"} and eps["mistral:7b"].kind == "ollama"
            assert eps["llama3.1"].base_url == fake.base_url and fake.requests == []


def test_preflight_reports_a_missing_key_without_asking(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(
        LLMConfigError, match="gpt-4o at https://api.openai.com/v1: the environment variable OPENAI_API_KEY"
    ):
        check_models_available(llm_config({"gpt-*": "openai"}), ["gpt-4o"])


# ---------------------------------------------------------------- cost before calls
class _Timeline(io.StringIO):
    "stdout that logs each printed line into a shared timeline (with the fake server's requests)."

    def __init__(self, events):
        super().__init__()
        self.events = events

    def write(self, s):
        if s.strip():
            self.events.append(("print", s.strip()))
        return len(s)


def paid(fake, model="gpt-4o"):
    return Endpoint(fake.base_url, model, api_key_env="INDICIPR_TEST_PAID_KEY", kind="openai", timeout=5, max_retries=0)


def test_cost_line_is_printed_before_the_first_paid_request_and_cached_ones_are_not_counted(tmp_path, monkeypatch):
    monkeypatch.setenv("INDICIPR_TEST_PAID_KEY", "sk-test-paid")
    monkeypatch.delenv("INDICIPR_YES", raising=False)
    events = []
    reqs = [
        {"messages": [{"role": "user", "content": f"question {i} " + "x" * 400}], "params": {"max_tokens": 50}}
        for i in range(5)
    ]
    cache = ResponseCache(tmp_path / "c.jsonl")
    for r in reqs[:2]:  # two answered before: cached
        cache.put(
            {
                "key": request_key("gpt-4o", r["messages"], None, r["params"]),
                "model": "gpt-4o",
                "raw": OK,
                "finish_reason": "stop",
            }
        )

    def reply(body):
        events.append(("request", body["messages"][0]["content"][:11]))
        return OK

    with OpenAIStandIn(["gpt-4o"], reply=reply) as fake:
        monkeypatch.setattr(sys, "stdout", _Timeline(events))
        res = run_requests(paid(fake), reqs + reqs[2:3], cache, concurrency=2, progress=False)
        monkeypatch.undo()
    assert [r.parsed for r in res] == [{"items": [1, 2]}] * 6 and len(fake.requests) == 3
    kinds = [k for k, _ in events]
    assert kinds[0] == "print" and kinds.count("print") == 1 and kinds.count("request") == 3
    line = events[0][1]
    assert line.startswith("cost estimate for gpt-4o at") and "3 requests to send (2 cached, not counted)" in line
    assert "~150 output tokens" in line and "$0.00" in line and "OpenAI list prices of" in line


def test_cost_above_threshold_needs_confirmation(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("INDICIPR_TEST_PAID_KEY", "sk-test-paid")
    monkeypatch.delenv("INDICIPR_YES", raising=False)
    monkeypatch.setattr(llm_runs, "COST_CONFIRM_USD", 0.0001)
    reqs = [{"messages": [{"role": "user", "content": "y" * 4000}], "params": {"max_tokens": 200}}]
    with OpenAIStandIn(["gpt-4o"], reply=constant(OK)) as fake:
        with pytest.raises(LLMCostError, match=r"confirm_cost=True .*INDICIPR_YES=1"):
            run_requests(paid(fake), reqs, None, progress=False)
        assert fake.requests == []  # nothing was sent
        assert run_requests(paid(fake), reqs, None, progress=False, confirm_cost=True)[0].parsed == {"items": [1, 2]}
        monkeypatch.setenv("INDICIPR_YES", "1")  # read by the run's context as the stage's confirm_cost
        confirmed = config.run_environment()["confirm_cost"]
        res = run_requests(paid(fake), reqs, None, progress=False, confirm_cost=confirmed)
        assert res[0].parsed == {"items": [1, 2]}
    assert capsys.readouterr().out.count("cost estimate for gpt-4o") == 3


def test_free_endpoints_print_nothing(capsys):
    with OpenAIStandIn([MODEL], reply=constant(OK)) as fake:
        run_requests(ep(fake), [{"messages": MSGS}], None, progress=False)
    assert "cost estimate" not in capsys.readouterr().out


FAKE_KEY = "sk-test-FAKE0123456789abcdefSECRET"


def test_api_key_never_reaches_cache_logs_errors_or_output(tmp_path, monkeypatch, caplog, capsys):
    monkeypatch.setenv("INDICIPR_TEST_LLM_KEY", FAKE_KEY)
    caplog.set_level(logging.DEBUG)  # every logger, openai's and httpx's included
    cache = ResponseCache(tmp_path / "c.jsonl")
    with OpenAIStandIn(
        [MODEL],
        script=[
            ("status", 500, {}, error_body("boom")),
            "ok",
            ("status", 401, {}, error_body(f"Incorrect API key provided: {FAKE_KEY}. See your account.")),
        ],
        reply=constant(OK),
    ) as fake:
        endpoint = ep(fake, api_key_env="INDICIPR_TEST_LLM_KEY")
        assert chat_json(endpoint, MSGS, SCHEMA, cache).parsed == {"items": [1, 2]}
        with pytest.raises(LLMRequestError) as err:
            chat_json(endpoint, [{"role": "user", "content": "again"}], SCHEMA, cache)
    assert all(r["auth"] == f"Bearer {FAKE_KEY}" for r in fake.requests)  # the key was really used
    assert FAKE_KEY not in str(err.value) and "Incorrect API key provided: ***" in str(err.value)
    out = capsys.readouterr()
    seen = {
        "cache": (tmp_path / "c.jsonl").read_text(),
        "logs": caplog.text,
        "stdout": out.out,
        "stderr": out.err,
        "repr": repr(endpoint),
        "pickle": pickle.dumps(endpoint).decode("latin-1"),
    }
    for where, text in seen.items():
        assert "SECRET" not in text, f"the API key leaked into the {where}"


def test_openai_key_in_env_is_not_sent_to_other_servers(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    with OpenAIStandIn([MODEL], reply=constant(OK)) as fake:
        chat_json(ep(fake), MSGS, SCHEMA)
    assert FAKE_KEY not in fake.requests[0]["auth"]


def test_missing_llama_cpp_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llama_cpp" else real(name, *a))
    with pytest.raises(LLMConfigError, match=r"pip install 'llama-cpp-python\[server\]'"):
        with local_llm_server():
            pass


@pytest.mark.slow
@needs_llama_cpp
def test_local_llm_server_answers_under_a_schema_and_stops(tmp_path):
    schema = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 40}}, "required": ["answer"]}
    msgs = [{"role": "user", "content": "What is the capital of France? Reply in JSON."}]
    with pytest.raises(RuntimeError, match="body failed"):
        with local_llm_server(n_ctx=512) as endpoint:
            port = int(endpoint.base_url.rsplit(":", 1)[1].split("/")[0])
            assert endpoint.kind == "llama_cpp" and endpoint.base_url.startswith("http://127.0.0.1:")
            res = chat_json(endpoint, msgs, schema, ResponseCache(tmp_path / "c.jsonl"), temperature=0, max_tokens=30)
            assert res.error is None and isinstance(res.parsed["answer"], str), res
            raise RuntimeError("body failed")  # the server must stop on exceptions too
    assert not port_open(port)


@pytest.mark.parametrize(
    "userinfo, header",
    [
        ("user:SECRET%40KEY@", "Basic " + base64.b64encode(b"user:SECRET@KEY").decode()),
        ("SECRETKEY@", "Bearer SECRETKEY"),
    ],
)
def test_credentials_in_the_url_are_sent_as_the_client_sends_them(userinfo, header, caplog, no_llm_api_key):
    "`http://user:key@host/v1` reaches the server (no DNS lookup of `user:key@host`), with the key in the header only."
    caplog.set_level(logging.DEBUG)
    with OpenAIStandIn([MODEL], reply=constant(OK), authorization=header) as fake:
        url = fake.base_url.replace("http://", f"http://{userinfo}")
        assert chat_json(Endpoint(url, MODEL, timeout=5, max_retries=0), MSGS, SCHEMA).parsed == {"items": [1, 2]}
        check_models_available(llm_config({"*": url}), [MODEL])  # the preflight's GET /models too
        ollama = Endpoint(url, MODEL, kind="ollama", timeout=5, max_retries=0)
        assert chat_json(ollama, MSGS, SCHEMA).parsed == {"items": [1, 2]}
    assert [r["auth"] for r in fake.requests] == [header, header] and fake.gets == ["/v1/models"]
    assert "SECRET" not in caplog.text


def test_replicas_take_one_request_each_and_the_replies_keep_their_order(no_llm_api_key):
    "An endpoint with `replicas` sends each request to a copy no other request is using; results come back in order."
    busy, most = [0], [0]

    def slow_echo(body):  # how many requests the copies hold at once, and the question echoed
        busy[0] += 1
        most[0] = max(most[0], busy[0])
        time.sleep(0.05)
        busy[0] -= 1
        return json.dumps({"items": [body["messages"][-1]["content"]]})

    with OpenAIStandIn([MODEL], reply=slow_echo) as a, OpenAIStandIn([MODEL], reply=slow_echo) as b:
        endpoint = Endpoint(a.base_url, MODEL, timeout=5, max_retries=0, replicas=(b.base_url,))
        requests = [
            {"messages": [{"role": "user", "content": f"q{i}"}], "schema": None, "params": {}} for i in range(8)
        ]
        results = run_requests(endpoint, requests, None, concurrency=2, validate=False)
    assert [r.parsed for r in results] == [{"items": [f"q{i}"]} for i in range(8)]
    assert len(a.requests) >= 1 and len(b.requests) >= 1 and len(a.requests) + len(b.requests) == 8
    assert most[0] == 2  # two in flight, one on each copy
    assert endpoint == Endpoint(a.base_url, MODEL, timeout=5, max_retries=0)  # the copies are not what it is


def test_replicas_take_consecutive_requests_and_the_fast_one_helps(no_llm_api_key):
    """Each copy takes a run of consecutive requests in order (requests that share a prefix reach the copy that has
    just read it); a copy that finishes its run takes the others' from their ends, so a slow copy holds nobody up."""

    def echo(delay):
        def reply(body):
            time.sleep(delay)
            return json.dumps({"items": [body["messages"][-1]["content"]]})

        return reply

    def asked(server):
        return [r["body"]["messages"][-1]["content"] for r in server.requests]

    requests = [{"messages": [{"role": "user", "content": f"q{i}"}], "schema": None, "params": {}} for i in range(8)]
    with OpenAIStandIn([MODEL], reply=echo(0.02)) as a, OpenAIStandIn([MODEL], reply=echo(0.02)) as b:
        endpoint = Endpoint(a.base_url, MODEL, timeout=5, max_retries=0, replicas=(b.base_url,))
        results = run_requests(endpoint, requests, None, concurrency=2, validate=False, progress=False)
    assert [r.parsed for r in results] == [{"items": [f"q{i}"]} for i in range(8)]
    assert asked(a) == ["q0", "q1", "q2", "q3"] and asked(b) == ["q4", "q5", "q6", "q7"]
    with OpenAIStandIn([MODEL], reply=echo(0.3)) as slow, OpenAIStandIn([MODEL], reply=echo(0.01)) as fast:
        endpoint = Endpoint(slow.base_url, MODEL, timeout=5, max_retries=0, replicas=(fast.base_url,))
        results = run_requests(endpoint, requests, None, concurrency=2, validate=False, progress=False)
    assert [r.parsed for r in results] == [{"items": [f"q{i}"]} for i in range(8)]
    took = asked(slow)
    assert took == [f"q{i}" for i in range(len(took))] and len(took) < 4  # the front of its run, no more
    assert sorted(asked(fast)) == sorted(f"q{i}" for i in range(len(took), 8))


@pytest.mark.slow
@needs_llama_cpp
def test_local_llm_server_replicas_give_the_replies_of_one_server(tmp_path):
    "Two copies of the local server, two requests in flight: the replies of one server, request by request."
    prompts = [[{"role": "user", "content": f"Name {n} colours, as JSON."}] for n in (1, 2, 3, 4)]
    requests = [
        {"messages": m, "schema": None, "params": {"temperature": 0, "max_tokens": 24, "seed": 0}} for m in prompts
    ]
    with local_llm_server(n_ctx=512) as one:
        single = [r.raw for r in run_requests(one, requests, None, concurrency=1, validate=False)]
    with local_llm_server(n_ctx=512, replicas=2) as two:
        ports = [int(u.rsplit(":", 1)[1].split("/")[0]) for u in (two.base_url, *two.replicas)]
        assert len(set(ports)) == 2
        double = [r.raw for r in run_requests(two, requests, None, concurrency=2, validate=False)]
    assert double == single
    assert not any(port_open(p) for p in ports)


@pytest.mark.slow
@needs_llama_cpp
def test_greedy_first_gives_the_replies_of_llama_cpp_python():
    """The local server's model class, against llama-cpp-python's own on notebook 09's first test questions under
    their schema: greedy with the server's default repetition penalty, greedy without it, and sampled at a temperature;
    the same replies, byte for byte, with the grammar asked about one token for most of the greedy ones and the whole
    chain run where it refused the largest logit and for every sampled one."""
    from llama_cpp import Llama

    from indicipr.data.benchmark import load_benchmark
    from indicipr.data.config import settings_for
    from indicipr.llm.client import _response_format_for
    from indicipr.llm.servers import LOCAL_N_CTX, greedy_first_llama, smollm2_gguf
    from indicipr.systems.llm_qa import qa_requests

    s = settings_for("llm_qa", "offline")
    requests = qa_requests([dict(r) for r in load_benchmark("sample")[s.split]][:6], [], s.max_tokens)
    fmt = _response_format_for(Endpoint("http://127.0.0.1/v1", "local", kind="llama_cpp"), requests[0]["schema"])
    kw = dict(model_path=str(smollm2_gguf()), n_ctx=LOCAL_N_CTX, n_threads=1, n_threads_batch=1, verbose=False)
    library, ours = Llama(**kw), greedy_first_llama()(**kw)
    for extra in ({"repeat_penalty": 1.1}, {"repeat_penalty": 1.0}, {"temperature": 0.7, "seed": 3}):
        before = dict(ours.greedy_first)
        for r in requests:
            params = {**r["params"], **extra}
            want, got = (
                llm.create_chat_completion(messages=r["messages"], response_format=fmt, **params)["choices"][0]
                for llm in (library, ours)
            )
            assert got["message"]["content"] == want["message"]["content"], (extra, r["messages"][-1])
        took = {k: ours.greedy_first[k] - before[k] for k in before}
        if "temperature" in extra:
            assert took["taken"] == took["refused"] == 0 and took["whole chain"] > 0, took
        else:
            assert took["whole chain"] == 0 and took["taken"] > 4 * took["refused"] > 0, (extra, took)


def test_the_server_program_loads_the_greedy_first_class(monkeypatch):
    "`serve_llama_cpp` hands llama-cpp-python's server its own `Llama` replaced by the greedy-first class."
    pytest.importorskip("llama_cpp.server.__main__")
    import llama_cpp
    import llama_cpp.server.__main__ as server_main

    from indicipr.llm.servers import SERVER_PROGRAM, serve_llama_cpp

    seen = []
    monkeypatch.setattr(llama_cpp, "Llama", llama_cpp.Llama)  # restored after the test
    monkeypatch.setattr(server_main, "main", lambda: seen.append(llama_cpp.Llama))
    exec(SERVER_PROGRAM.replace("serve_llama_cpp()", "pass"))  # the program's import works
    serve_llama_cpp()
    assert [c.__name__ for c in seen] == ["GreedyFirstLlama"] and issubclass(seen[0], llama_cpp.Llama.__mro__[1])


def test_greedy_first_needs_the_sampler_functions_else_gives_the_library_class(monkeypatch):
    "A llama-cpp-python without the sampler functions the greedy-first class calls serves with its own `Llama`."
    llama_cpp = pytest.importorskip("llama_cpp")
    from indicipr.llm.servers import greedy_first_llama

    assert greedy_first_llama() is not llama_cpp.Llama
    monkeypatch.delattr(llama_cpp, "llama_sampler_chain_get")
    assert greedy_first_llama() is llama_cpp.Llama
