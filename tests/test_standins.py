"""Tests of the dress rehearsal's stand-ins (`tests/standins/`): each is checked against the card or against
the real clients that will talk to it."""

import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from standins import card_benchmark as cb  # noqa: E402
from standins.hub import serve_folders  # noqa: E402
from standins.openai_server import PAPER_MODELS, Faults, OpenAIStandIn, request_kind  # noqa: E402

from indicipr.data import benchmark, core, qa_files  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STATUTES = ROOT / "data" / "sample" / "statutes" / "sections.jsonl"
HUB_ID = "niloycste68/IndicIPRExtractiveQA"


# -- card benchmark ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def card_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("card")
    t0 = time.perf_counter()
    cb.build_card_benchmark(STATUTES, out)
    return out, time.perf_counter() - t0


@pytest.fixture(scope="module")
def card(card_dir):
    out, _ = card_dir
    return {
        s: qa_files.load_qa_file(out / f, strict=True).records for s, f in cb.OFFICIAL_FILES.items()
    }  # every record validated


def _act(rec):
    prefix = rec["id"].rsplit("_", 1)[0]
    return {p: a for a, p in cb.PREFIXES.items()}[prefix]


def test_card_counts_and_per_act_table(card):
    assert {s: len(r) for s, r in card.items()} == {"train": 3710, "validation": 408, "test": 344, "merged": 4462}
    card_table = core.CARD["per_act"]  # the card's (full dataset, test set) counts per Act
    full, test = Counter(map(_act, card["merged"])), Counter(map(_act, card["test"]))
    assert {a: (full[a], test[a]) for a in card_table} == card_table
    assert sorted(r["id"] for r in card["merged"]) == sorted(
        r["id"] for s in ("train", "validation", "test") for r in card[s]
    )
    assert all(re.fullmatch(r"[a-z]{2,6}_\d{6}", r["id"]) for r in card["merged"])


def test_card_means_and_question_patterns(card):
    m = card["merged"]
    contexts = list(dict.fromkeys(r["context"] for r in m))
    assert len(contexts) == 1116
    assert round(statistics.mean(len(c.split()) for c in contexts), 1) == 171.3
    assert round(statistics.mean(len(r["question"].split()) for r in m), 1) == 11.9
    answers = [len(r["answers"]["text"][0].split()) for r in m]
    assert round(statistics.mean(answers), 1) == 35.6
    assert statistics.median(answers) == 33
    norm = [re.sub(r"\W+", " ", r["question"].lower()).strip() for r in m]
    assert len(set(norm)) == 4118

    def opens(o):
        return sum(n == o or n.startswith(o + " ") for n in norm)

    assert (opens("what does"), opens("under section"), opens("what is")) == (1157, 960, 875)


def test_card_answers_vary_in_structure_and_position(card):
    from indicipr.analysis.error_analysis import is_multi_clause

    test = card["test"]
    multi = sum(is_multi_clause(r["answers"]["text"][0]) for r in test)
    assert 0.1 * len(test) < multi < 0.9 * len(test)
    rel = [r["answers"]["answer_start"][0] / len(r["context"]) for r in test]
    assert min(rel) < 0.1
    assert max(rel) > 0.5


def test_card_split_is_by_section(card):
    for split in ("validation", "test"):
        for a in cb.ACT_ORDER:
            train = {(r["title"], r["context"]) for r in card["train"] if _act(r) == a}
            other = {(r["title"], r["context"]) for r in card[split] if _act(r) == a}
            assert other
            assert not {c for _, c in train} & {c for _, c in other}
            assert not {t for t, _ in train} & {t for t, _ in other}  # no section in two splits
    assert all(re.fullmatch(r"Section \d+[A-Z]*(: .+)?", r["title"]) for r in card["merged"])


def test_card_acts_recoverable_but_prefixes_not_all_registered(card):
    registered = {n.lower() for a in core.ACTS.values() for n in (a.prefix, a.key, *a.aliases)}
    assert cb.PREFIXES["copyright"] == "cop"
    assert not set(cb.PREFIXES.values()) <= registered
    for a, prefix in cb.PREFIXES.items():
        name = cb.ACT_TITLES[a][len("The ") :]
        recs = [r for r in card["merged"] if r["id"].startswith(prefix + "_")]
        assert any(f"This Act may be called the {name}." in r["context"] for r in recs), a
    first = card["merged"][[r["id"] for r in card["merged"]].index("cop_000001")]
    assert first["title"] == "Section 1: Short title, extent and commencement"
    assert first["answers"] == {"text": ["This Act may be called the Copyright Act, 1957."], "answer_start": [4]}


@pytest.mark.slow  # over 8 s on 2 cores
def test_card_benchmark_is_deterministic_and_fast(card_dir, tmp_path):
    out, seconds = card_dir
    assert seconds < 10, f"build took {seconds:.1f} s"
    cb.build_card_benchmark(STATUTES, tmp_path)
    for name in [*cb.OFFICIAL_FILES.values(), "README.md"]:
        assert (tmp_path / name).read_bytes() == (out / name).read_bytes(), name
    cb.build_card_benchmark(STATUTES, tmp_path / "seed1", seed=1)
    assert (tmp_path / "seed1" / "test_squad.jsonl").read_bytes() != (out / "test_squad.jsonl").read_bytes()


# -- checkpoints + hub ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def hub_root(tmp_path_factory, card_dir):
    from standins.checkpoints import build_checkpoint

    root = tmp_path_factory.mktemp("hub")
    build_checkpoint("law-ai/InLegalBERT", root / "models" / "law-ai" / "InLegalBERT")
    build_checkpoint("bert-base-uncased", root / "models" / "bert-base-uncased")
    data = root / "datasets" / HUB_ID / "data"
    data.mkdir(parents=True)
    for name in cb.OFFICIAL_FILES.values():
        (data / name).write_bytes((card_dir[0] / name).read_bytes())
    return root


def test_checkpoint_is_a_small_uncased_bert_for_qa(hub_root):
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    folder = hub_root / "models" / "law-ai" / "InLegalBERT"
    model = AutoModelForQuestionAnswering.from_pretrained(folder)
    tok = AutoTokenizer.from_pretrained(folder)
    assert type(model).__name__ == "BertForQuestionAnswering"
    assert model.config.num_hidden_layers == 2
    assert len(tok) == 30522
    assert tok.tokenize("Controller PATENT") == ["controller", "patent"]
    other = json.loads((hub_root / "models" / "bert-base-uncased" / "config.json").read_text())
    assert other["hidden_size"] == 128
    assert (folder / "model.safetensors").read_bytes() != (
        hub_root / "models" / "bert-base-uncased" / "model.safetensors"
    ).read_bytes()


CLIENT_SCRIPT = r"""
import json, os, sys
from huggingface_hub import hf_hub_download, snapshot_download
from datasets import load_dataset
from transformers import AutoModelForQuestionAnswering, AutoTokenizer
hub_id = sys.argv[1]
p = hf_hub_download(hub_id, filename="data/test_squad.jsonl", repo_type="dataset")
out = {"hf_hub_download": sum(1 for _ in open(p))}
out["snapshot_download"] = sorted(os.listdir(snapshot_download("law-ai/InLegalBERT")))
ds = load_dataset(hub_id, data_files={"train": "data/train_squad.jsonl", "validation": "data/val_squad.jsonl",
                                      "test": "data/test_squad.jsonl"})
out["load_dataset"] = {k: len(v) for k, v in ds.items()}
m = AutoModelForQuestionAnswering.from_pretrained("law-ai/InLegalBERT")
out["from_pretrained"] = [type(m).__name__, len(AutoTokenizer.from_pretrained("law-ai/InLegalBERT"))]
print("RESULT", json.dumps(out))
"""


def _client_env(endpoint, home):
    env = dict(os.environ, HF_ENDPOINT=endpoint, HF_HOME=str(home), HF_HUB_DISABLE_TELEMETRY="1")
    for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        env.pop(k, None)
    return env


@pytest.mark.slow  # over 8 s on 2 cores
def test_real_clients_download_from_the_hub_standin(hub_root, tmp_path):
    with serve_folders(hub_root) as hub:
        r = subprocess.run(
            [sys.executable, "-c", CLIENT_SCRIPT, HUB_ID],
            env=_client_env(hub.endpoint, tmp_path),
            capture_output=True,
            text=True,
            timeout=300,
        )
        seen = hub.paths_seen()
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.split("RESULT", 1)[1])
    assert out["hf_hub_download"] == 344
    assert {"config.json", "model.safetensors", "vocab.txt"} <= set(out["snapshot_download"])
    assert out["load_dataset"] == {"train": 3710, "validation": 408, "test": 344}
    assert out["from_pretrained"] == ["BertForQuestionAnswering", 30522]
    assert any(s.startswith("GET /datasets/") and "/resolve/" in s for s in seen)
    assert not [s for s in seen if s.endswith("-> 500")], seen


def test_hub_standin_errors_and_ranges(hub_root, tmp_path):
    script = r"""
import sys, httpx
from huggingface_hub import hf_hub_download
from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError
cases = {"repo": dict(repo_id="nobody/nothing", filename="config.json"),
         "entry": dict(repo_id="law-ai/InLegalBERT", filename="no_such_file.json"),
         "revision": dict(repo_id="law-ai/InLegalBERT", filename="config.json", revision="v9")}
for name, kw in cases.items():
    try: hf_hub_download(**kw); print(name, "no error")
    except (EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError) as e:
        print(name, next(c.__name__ for c in (RevisionNotFoundError, EntryNotFoundError, RepositoryNotFoundError) if isinstance(e, c)))
r = httpx.get(sys.argv[1] + "/law-ai/InLegalBERT/resolve/main/vocab.txt", headers={"Range": "bytes=0-4"})
print("range", r.status_code, r.content, r.headers["content-range"].split("/")[0])
"""
    with serve_folders(hub_root) as hub:
        r = subprocess.run(
            [sys.executable, "-c", script, hub.endpoint],
            env=_client_env(hub.endpoint, tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert "repo RepositoryNotFoundError" in lines
    assert "entry EntryNotFoundError" in lines
    assert "revision RevisionNotFoundError" in lines
    assert "range 206 b'[PAD]' bytes 0-4" in lines


def test_indicipr_fetch_through_the_hub_standin(hub_root, tmp_path):
    with serve_folders(hub_root) as hub:
        env = _client_env(hub.endpoint, tmp_path / "hf")
        r = subprocess.run(
            [str(Path(sys.executable).parent / "indicipr"), "fetch", "--dest", str(tmp_path / "bench")],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert r.returncode == 0, r.stderr[-2000:]
    assert benchmark.verify_benchmark(tmp_path / "bench") == {
        "train": 3710,
        "validation": 408,
        "test": 344,
        "merged": 4462,
    }


# -- OpenAI-compatible stand-in ------------------------------------------------------------------------------
def _endpoint(url, model, **kw):
    from indicipr.llm import client as llm

    return llm.Endpoint(url, model, **{"backoff_s": 0.05, "max_retries": 3, **kw})


def test_openai_standin_models_and_unknown_model():
    import openai

    with OpenAIStandIn() as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
        assert [m.id for m in client.models.list()] == list(PAPER_MODELS)
        with pytest.raises(openai.NotFoundError, match="does not exist"):
            client.chat.completions.create(model="gpt-5-nope", messages=[{"role": "user", "content": "hi"}])


def test_openai_standin_answers_qa_judge_and_generation(card):
    from indicipr.build import filters, generate
    from indicipr.llm import client as llm
    from indicipr.systems import llm_qa
    from indicipr.analysis import quality

    rec = card["test"][0]
    with OpenAIStandIn() as srv:
        qa = llm.chat_json(_endpoint(srv.base_url, "qwen2.5:7b"), llm_qa.qa_messages(rec), llm_qa.ANSWER_SCHEMA, None)
        answer = qa.parsed["answer"] if isinstance(qa.parsed, dict) else qa.raw
        assert answer
        assert answer.lower() in rec["context"].lower()
        again = llm.chat_json(
            _endpoint(srv.base_url, "qwen2.5:7b"), llm_qa.qa_messages(rec), llm_qa.ANSWER_SCHEMA, None
        )
        assert again.raw == qa.raw  # deterministic
        msgs = quality.judge_messages({**rec, "id": "cop_000001"})
        assert request_kind(msgs) == "judge"
        j = llm.chat_json(_endpoint(srv.base_url, "gemma3:12b"), msgs, quality.JUDGE_SCHEMA, None, validate=False)
        scores, err = quality.parse_judge_reply(j.raw)
        assert err is None
        assert {getattr(scores, c) for c in quality.JUDGE_CRITERIA} <= {1, 2, 3}
        failed = Counter()
        contexts = list(dict.fromkeys((r["title"], r["context"]) for r in card["merged"]))[:60]
        for title, ctx in contexts:
            res = llm.chat_json(
                _endpoint(srv.base_url, "gpt-4o"),
                generate.build_messages(5, "The Patents Act, 1970", title, ctx),
                None,
                None,
                validate=False,
            )
            for item in res.parsed["items"]:
                cand = {
                    "context_id": "c",
                    "act": "patents",
                    "section": "1",
                    "title": title,
                    "context": ctx,
                    "question": item.get("question"),
                    "answer": item.get("answer"),
                    "parse_error": None,
                }
                failed[filters.first_failure(cand)[0]] += 1
    # most items are good (F7 judges the context, not the item: the card contexts are word windows)
    assert failed[None] > sum(v for k, v in failed.items() if k not in (None, "F7"))
    assert {"F1", "F2", "F3", "F5", "F6"} <= set(failed), failed


@pytest.mark.parametrize("kind", ["429", "500", "timeout"])
def test_openai_standin_faults_are_retried(kind):
    from indicipr.llm import client as llm

    msgs = [
        {"role": "user", "content": 'Context:\n"""The Controller shall grant the patent."""\n\nQuestion: Who grants?'}
    ]
    with OpenAIStandIn(faults=Faults(rate=1.0, kinds=(kind,), retry_after_s=0.1, delay_s=1.5)) as srv:
        res = llm.chat_json(_endpoint(srv.base_url, "mistral:7b", timeout=0.5), msgs, None, None)
        assert res.error is None
        assert "Controller" in res.parsed["answer"]
        assert srv.summary()["faults"] == {kind: 1}
        assert sum(srv.calls.values()) == 2


def test_openai_standin_broken_json_and_no_repeat_after_resume(tmp_path):
    from indicipr.llm import client as llm, runs as llm_runs

    reqs = [
        {
            "messages": [
                {
                    "role": "user",
                    "content": f'Context:\n"""Clause {i} applies to every registered proprietor."""\n\nQuestion: What applies {i}?',
                }
            ]
        }
        for i in range(30)
    ]
    with OpenAIStandIn(faults=Faults(rate=0.3, kinds=("broken_json",), seed=1)) as srv:

        def run():  # the same requests into the same cache: a second call resumes the first
            return llm_runs.run_requests(
                _endpoint(srv.base_url, "llama3.1:8b"),
                reqs,
                llm.ResponseCache(tmp_path / "c.jsonl"),
                concurrency=4,
                validate=False,
                progress=False,
            )

        first = run()
        broken = sum(r.parsed is None for r in first)
        assert 0 < len(srv.fault_log) <= broken < 30  # (a few replies are plain text by design)
        run()  # the resumed run: all from the cache
        assert sum(srv.calls.values()) == 30 and srv.repeated() == {}


def test_openai_standin_drops_a_request_cut_off_mid_body_and_refuses_broken_json():
    "A client killed while sending leaves a short body: the stand-in neither answers nor records it, like a server."
    import socket
    import urllib.error
    import urllib.request

    with OpenAIStandIn(["fake-model"]) as srv:
        host, port = srv.base_url.split("//")[1].split("/")[0].split(":")
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b'Content-Length: 400\r\n\r\n{"model": "fake-model", "messa'
            )
            s.shutdown(socket.SHUT_WR)
            assert s.recv(1024) == b""  # closed without a reply
        request = urllib.request.Request(
            srv.base_url + "/chat/completions", data=b"{not json", headers={"Content-Type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(request, timeout=5)
        assert err.value.code == 400 and "parse the JSON" in err.value.read().decode()
        assert srv.requests == [] and sum(srv.calls.values()) == 0
