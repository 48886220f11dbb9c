"""QA generation: the card's prompt byte for byte, the replay rebuild of the recorded sample,
parse-failure records, bad context records, and a generation run killed mid-way (SIGKILL, in a
subprocess) that resumes to exactly the output of an uninterrupted run without repeating a call."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from helpers import ROOT, SHARED, recorded_generations
from standins.openai_server import OpenAIStandIn, two_item_reply

from indicipr.build.generate import (
    CANDIDATE_FIELDS,
    SYSTEM_MESSAGE,
    ContextFormatError,
    build_prompt,
    ensure_recorded_sample,
    generate_candidates,
    read_contexts,
    recorded_contexts,
    recorded_replay,
)
from indicipr.llm.client import Endpoint, ResponseCache, request_key
from indicipr.data.qa_files import read_jsonl, write_jsonl

CARD = SHARED / "seed" / "IndicIPR-QA-dataset-card.txt" if SHARED else None


def card_prompt_template() -> str:
    "The prompt as printed in the dataset card: from 'You are creating' to the context line."
    if CARD is None or not CARD.exists():
        pytest.skip("the dataset card (../shared/seed) is not beside this checkout")
    lines = CARD.read_text(encoding="utf-8").splitlines()
    start = lines.index("You are creating an EXTRACTIVE legal QA dataset from Indian legal text.")
    end = lines.index('"""{context}"""', start)
    return "\n".join(lines[start : end + 1])


def test_prompt_is_the_cards_byte_for_byte():
    rec = next(r for r in recorded_generations() if r["context_id"] == "copyright_s17_c1")
    template = card_prompt_template()
    expected = (
        template.replace("{questions_per_context}", "5")
        .replace("{act}", rec["act_title"])
        .replace("{title}", rec["title"])
        .replace("{context}", rec["context"])
    )
    assert build_prompt(5, rec["act_title"], rec["title"], rec["context"]) == expected
    assert f"System Message\n\n{SYSTEM_MESSAGE}\n" in CARD.read_text(encoding="utf-8")


def test_rendered_prompt_is_pinned():
    "Holds without the card: the rendering of a real context, pinned by hash."
    rec = next(r for r in recorded_generations() if r["context_id"] == "copyright_s17_c1")
    prompt = build_prompt(5, rec["act_title"], rec["title"], rec["context"])
    assert len(prompt) == 2657
    assert (
        hashlib.sha256(prompt.encode("utf-8")).hexdigest()
        == "d3c7502d1b71c0bf30720aef085e868504171de274c2c0ffcebd2dd7d77cf2a9"
    )


def test_replay_rebuilds_the_recorded_candidates(tmp_path):
    path = ensure_recorded_sample()
    out = generate_candidates(recorded_contexts(path), recorded_replay(path), out_dir=tmp_path, progress=False)
    recs = recorded_generations()
    assert [g["response"] for g in out["generations"]] == [r["response"] for r in recs]
    expected = [
        (r["context_id"], it["question"], it["answer"]) for r in recs for it in json.loads(r["response"])["items"]
    ]
    got = [(c["context_id"], c["question"], c["answer"]) for c in read_jsonl(tmp_path / "candidates.jsonl")]
    assert got == expected and len(got) == 271 + 219  # both batches (../shared/sample/README.md, ../shared/BATCH2.md)
    assert all(tuple(c) == CANDIDATE_FIELDS and c["parse_error"] is None for c in out["candidates"])


def test_unparseable_reply_becomes_one_raw_record(tmp_path):
    contexts = recorded_contexts(ensure_recorded_sample())[:3]
    broken = '{"items": [{"question": "Who may'
    with OpenAIStandIn(["fake-model"], script=["ok", ("finish", broken, "length")], reply=two_item_reply) as fake:
        endpoint = Endpoint(fake.base_url, "fake-model", backoff_s=0.01)
        out = generate_candidates(
            contexts, endpoint, ResponseCache(tmp_path / "c.jsonl"), out_dir=tmp_path, concurrency=1, progress=False
        )
    by_ctx = Counter(c["context_id"] for c in out["candidates"])
    assert by_ctx == {contexts[0]["context_id"]: 2, contexts[1]["context_id"]: 1, contexts[2]["context_id"]: 2}
    bad = [c for c in out["candidates"] if c["parse_error"]]
    assert len(bad) == 1 and bad[0]["context_id"] == contexts[1]["context_id"]
    assert bad[0]["question"] is None and bad[0]["answer"] is None and bad[0]["raw"] == broken
    assert "cut off at max_tokens" in bad[0]["parse_error"]
    assert (
        out["generations"][1]["parse_error"] == bad[0]["parse_error"] and out["generations"][0]["parse_error"] is None
    )


def test_bad_context_record_names_file_and_line(tmp_path):
    recs = [
        {k: v for k, v in r.items() if k not in ("model", "response", "questions_per_context")}
        for r in recorded_generations()[:3]
    ]
    del recs[1]["title"]
    write_jsonl(tmp_path / "contexts.jsonl", recs)
    with pytest.raises(
        ContextFormatError, match=rf"contexts.jsonl:2 \(context_id '{recs[1]['context_id']}'\): missing field 'title'"
    ):
        read_contexts(tmp_path / "contexts.jsonl")


RUNNER = """
import sys
from indicipr.llm.client import Endpoint, ResponseCache
from indicipr.build.generate import generate_candidates, read_contexts
contexts_path, base_url, cache_path, out_dir = sys.argv[1:5]
endpoint = Endpoint(base_url, "fake-model", backoff_s=0.01)
generate_candidates(read_contexts(contexts_path), endpoint, ResponseCache(cache_path), out_dir=out_dir,
                    concurrency=2, params={"temperature": 0}, progress=False)
"""


def run_generation(args, kill_after_cached_lines=None):
    "Run the generation in a subprocess; SIGKILL it once the cache holds `kill_after_cached_lines` lines."
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER, *map(str, args)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    if kill_after_cached_lines is None:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out.decode()
        return
    cache = Path(args[2])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if cache.exists() and cache.read_text().count("\n") >= kill_after_cached_lines:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.slow  # over 8 s on 2 cores
def test_killed_run_resumes_to_the_uninterrupted_output(tmp_path):
    contexts = [
        {k: v for k, v in r.items() if k not in ("model", "response", "questions_per_context")}
        for r in recorded_generations()[:10]
    ]
    write_jsonl(tmp_path / "contexts.jsonl", contexts)
    # the reference: one uninterrupted run
    with OpenAIStandIn(["fake-model"], reply=two_item_reply, delay=0.05) as fake:
        run_generation([tmp_path / "contexts.jsonl", fake.base_url, tmp_path / "ref_cache.jsonl", tmp_path / "ref"])
    assert len(fake.requests) == 10
    # the same run, killed after 4 replies were cached, then rerun
    with OpenAIStandIn(["fake-model"], reply=two_item_reply, delay=0.3) as fake:
        cache = tmp_path / "cache.jsonl"
        run_generation([tmp_path / "contexts.jsonl", fake.base_url, cache, tmp_path / "out"], kill_after_cached_lines=4)
        assert not (tmp_path / "out" / "candidates.jsonl").exists()  # outputs are written atomically, at the end
        time.sleep(0.5)  # let the server log requests that were on the wire at the kill
        done_before_kill = {json.loads(line)["key"] for line in cache.read_text().splitlines() if line.strip()}
        requests_before_kill = len(fake.requests)
        run_generation([tmp_path / "contexts.jsonl", fake.base_url, cache, tmp_path / "out"])
    for name in ("candidates.jsonl", "generations.jsonl"):
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes(), name
    # the cache holds each request once, and no request answered before the kill was sent again
    keys = [json.loads(line)["key"] for line in cache.read_text().splitlines()]
    assert len(keys) == 10 and len(set(keys)) == 10
    sent = Counter(
        request_key(
            "fake-model",
            r["body"]["messages"],
            r["body"]["response_format"]["json_schema"]["schema"],
            {"temperature": 0},
        )
        for r in fake.requests
    )
    assert done_before_kill <= set(sent) and all(sent[k] == 1 for k in done_before_kill)
    assert len(fake.requests) <= 10 + 2  # at most the 2 in flight at the kill are repeated
    assert len(fake.requests) - requests_before_kill == 10 - len(done_before_kill)
    # and a third run is served entirely from the cache
    with OpenAIStandIn(["fake-model"], reply=two_item_reply) as fake:
        run_generation([tmp_path / "contexts.jsonl", fake.base_url, cache, tmp_path / "again"])
    assert fake.requests == []
    assert (tmp_path / "again" / "candidates.jsonl").read_bytes() == (
        tmp_path / "ref" / "candidates.jsonl"
    ).read_bytes()
