"""IndicIPR-QA in lm-evaluation-harness (indicipr/lm_eval_tasks, notebook 09's section "In lm-evaluation-harness").

The task folder ships in the wheel; lm-eval loads its four tasks with notebook 09's prompt, generation parameters,
answer schema and 3-shot draw, on the data source `--metadata data_source` names; and `lm_eval` run against the
project's llama.cpp server through lm-eval's OpenAI-compatible chat model sends the requests notebook 09 sends and
scores the replies as notebook 09 and `indicipr.scoring.metrics` score them."""

from __future__ import annotations

import glob
import json
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile

import pytest
from helpers import BIN, QA_SMALL, ROOT, needs_llama_cpp, needs_lm_eval
from standins.loopback import JSONHandler, LoopbackServer
from standins.openai_server import OpenAIStandIn

from indicipr.data import benchmark, config
from indicipr.llm import client as llm, servers as llm_servers
from indicipr.scoring import metrics, predictions
from indicipr.systems import llm_qa as Q

pytestmark = pytest.mark.slow  # lm-evaluation-harness (its import alone is long), a wheel build, llama.cpp
TASK_DIR = Q.lm_eval_tasks_dir()
LLAMACPP_TASKS = ["indicipr_qa_zeroshot_llamacpp", "indicipr_qa_3shot_llamacpp"]


def request_key(messages: list[dict]) -> str:
    return json.dumps(messages, sort_keys=True, ensure_ascii=False)


def response_format_of(task: str) -> dict:
    "What notebook 09 sends as `response_format` to the kind of server a task is meant for."
    kind = "llama_cpp" if task.endswith("_llamacpp") else "openai_compatible"
    return llm._response_format_for(llm.Endpoint("http://127.0.0.1:1/v1", "m", kind=kind), Q.ANSWER_SCHEMA)


def test_the_task_folder_ships_in_the_wheel(tmp_path):
    "pip users get every file of the task folder (YAML, the template, the hooks) inside the installed package."
    src = tmp_path / "src"
    src.mkdir()
    for name in ("setup.py", "settings.ini", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "indicipr", src / "indicipr", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path / "whl"),
            str(src),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "whl").glob("indicipr-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    files = {
        p.relative_to(ROOT).as_posix() for p in TASK_DIR.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    }
    assert {f"indicipr/lm_eval_tasks/indicipr_qa/{t}.yaml" for t in Q.LM_EVAL_TASKS} <= files
    assert files <= shipped, f"not in the wheel: {sorted(files - shipped)}"


@pytest.fixture(scope="module")
def qa_small_tasks():
    "The four tasks as lm-eval loads them, pointed at the qa_small fixture (`--metadata data_source`)."
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(TASK_DIR), include_defaults=False, metadata={"data_source": str(QA_SMALL)})
    return manager.load(list(Q.LM_EVAL_TASKS))["tasks"]


@needs_lm_eval
def test_tasks_carry_the_prompt_and_generation_parameters_of_notebook_09(qa_small_tasks, splits):
    "System message, number of shots, answer schema (in the form the task's server takes), temperature, seed, token cap."
    assert set(qa_small_tasks) == set(Q.LM_EVAL_TASKS)
    cap = config.LLM_QA["paper"].max_tokens
    params = Q.qa_requests(splits["test"][:1], [], cap)[0]["params"]  # notebook 09's, under the paper's cap
    for name, task in qa_small_tasks.items():
        cfg = task.config
        assert cfg.description == Q.QA_SYSTEM and cfg.num_fewshot == Q.SETTINGS[Q.LM_EVAL_TASKS[name]], name
        gen = cfg.generation_kwargs
        assert gen["response_format"] == response_format_of(name), name
        assert {"temperature": gen["temperature"], "max_tokens": gen["max_gen_toks"], "seed": gen["seed"]} == params
        assert gen["until"] == [] and gen["do_sample"] is False


@needs_lm_eval
def test_tasks_build_the_messages_of_notebook_09_on_the_chosen_data_source(qa_small_tasks, splits):
    "The eval docs are the data source's test split in order; the 3 shots are draw_shots'; the chat is qa_messages'."
    shots = Q.draw_shots(splits["train"], 3, 0)
    for name, task in qa_small_tasks.items():
        docs = list(task.eval_docs)
        assert [d["id"] for d in docs] == [r["id"] for r in splits["test"]]
        k = Q.SETTINGS[Q.LM_EVAL_TASKS[name]]
        for doc in docs[:3]:
            chat = task.fewshot_context(
                doc,
                k,
                apply_chat_template=True,
                fewshot_as_multiturn=True,
                chat_template=lambda msgs, add_generation_prompt=True: msgs,
            )
            assert chat == Q.qa_messages(dict(doc), shots if k else []), name


@needs_lm_eval
def test_the_tags_run_both_settings_for_one_kind_of_server():
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(TASK_DIR), include_defaults=False, metadata={"data_source": str(QA_SMALL)})
    assert set(manager.load(["indicipr_qa"])["tasks"]) == {"indicipr_qa_zeroshot", "indicipr_qa_3shot"}
    assert set(manager.load(["indicipr_qa_llamacpp"])["tasks"]) == set(LLAMACPP_TASKS)


@needs_lm_eval
def test_a_missing_data_source_is_one_sentence_and_exit_2(tmp_path, capsys):
    from lm_eval.tasks import TaskManager

    manager = TaskManager(
        include_path=str(TASK_DIR), include_defaults=False, metadata={"data_source": str(tmp_path / "nowhere")}
    )
    with pytest.raises(SystemExit) as stop:
        manager.load(["indicipr_qa_zeroshot"])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1
    assert (
        err[0].startswith("indicipr_qa: --metadata data_source=") and "nowhere" in err[0] and "no such folder" in err[0]
    )


class RecordingProxy(LoopbackServer):
    "Passes chat requests on to `upstream` (a /v1 base URL) and keeps each request body with the reply it got."

    def __init__(self, upstream: str):
        self.upstream = upstream.rstrip("/")
        self.exchanges: list[dict] = []

    def __enter__(self):
        proxy = self

        class Handler(JSONHandler):
            def do_POST(self):
                data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                req = urllib.request.Request(
                    proxy.upstream + self.path.removeprefix("/v1"),
                    data=data,
                    headers={"Content-Type": "application/json"},
                )
                try:
                    with urllib.request.urlopen(req, timeout=300) as r:
                        code, out = r.status, r.read()
                except urllib.error.HTTPError as e:
                    code, out = e.code, e.read()
                proxy.exchanges.append(
                    {"path": self.path, "body": json.loads(data), "status": code, "reply": json.loads(out)}
                )
                self._send(code, out)

        self.base_url = f"http://127.0.0.1:{self._serve(Handler)}/v1"
        return self


@needs_llama_cpp
@needs_lm_eval
def test_lm_eval_on_the_local_server_sends_and_scores_as_notebook_09(tmp_path):
    """`lm_eval --include_path … --tasks …` (the CLI, local-chat-completions) on 3 questions of the sample's test split,
    zero-shot and 3-shot, against SmolLM2 on llama.cpp: its requests are notebook 09's (`predict_llm` sends the same
    bodies for the same questions, less lm-eval's empty `stop`), and its EM / F1 / Char-F1 of the raw and the snapped
    answers equal `indicipr.scoring.metrics` on notebook 09's predictions from the same replies."""
    n, max_tokens = 3, 24
    t0 = time.monotonic()
    with llm_servers.local_llm_server() as ep, RecordingProxy(ep.base_url) as proxy:
        cmd = [
            str(BIN / "lm_eval"),
            "--model",
            "local-chat-completions",
            "--model_args",
            f"model={ep.model},base_url={proxy.base_url}/chat/completions",
            "--include_path",
            str(TASK_DIR),
            "--tasks",
            ",".join(LLAMACPP_TASKS),
            "--apply_chat_template",
            "--metadata",
            json.dumps({"data_source": "sample"}),
            "--limit",
            str(n),
            "--gen_kwargs",
            f"max_gen_toks={max_tokens}",
            "--log_samples",
            "--output_path",
            str(tmp_path / "out"),
        ]
        run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]
    print(f"lm_eval on the local server: {time.monotonic() - t0:.1f} s")
    (results_path,) = glob.glob(str(tmp_path / "out" / "**" / "results_*.json"), recursive=True)
    results = json.loads(open(results_path, encoding="utf-8").read())["results"]

    ds = benchmark.load_benchmark("sample")
    records = [dict(r) for r in ds["test"]][:n]
    shots = Q.draw_shots([dict(r) for r in ds["train"]], 3, 0)
    sent = {request_key(x["body"]["messages"]): x for x in proxy.exchanges}
    assert len(proxy.exchanges) == len(sent) == 2 * n and all(x["status"] == 200 for x in proxy.exchanges)
    replies = {k: x["reply"]["choices"][0]["message"]["content"] for k, x in sent.items()}

    for task in LLAMACPP_TASKS:
        task_shots = shots if Q.SETTINGS[Q.LM_EVAL_TASKS[task]] else []
        # notebook 09's own path on the same questions, against a server that answers with the replies lm-eval got
        with OpenAIStandIn([ep.model], reply=lambda body: replies.get(request_key(body["messages"]), "")) as fake:
            nb_ep = llm.Endpoint(fake.base_url, ep.model, kind="llama_cpp", timeout=30, max_retries=0)
            raw, snapped, _ = Q.predict_llm(nb_ep, records, task_shots, None, max_tokens=max_tokens)
        assert len(fake.requests) == n
        for nb in fake.requests:  # the same request bodies
            assert request_key(nb["body"]["messages"]) in sent, (
                f"{task}: lm-eval sent no request with notebook 09's messages"
            )
            lm = sent[request_key(nb["body"]["messages"])]["body"]
            assert {k: v for k, v in lm.items() if k != "stop"} == nb["body"] and lm["stop"] == []
        assert nb["body"]["response_format"] == response_format_of(task) and nb["body"]["max_tokens"] == max_tokens

        (samples_path,) = glob.glob(str(tmp_path / "out" / "**" / f"samples_{task}_*.jsonl"), recursive=True)
        samples = [json.loads(line) for line in open(samples_path, encoding="utf-8")]
        for variant, preds in (("raw", raw), ("snap", snapped)):
            logged = {s["doc"]["id"]: s for s in samples if s["filter"] == variant}
            assert set(logged) == {r["id"] for r in records}
            for r in records:  # lm-eval kept the server's reply, and read it as notebook 09 does
                s = logged[r["id"]]
                assert s["resps"] == [[replies[request_key(Q.qa_messages(r, task_shots))]]]
                assert s["filtered_resps"] == [preds[r["id"]]]
            assert (
                predictions.read_predictions(samples_path, lm_eval_filter=variant) == preds
            )  # the samples file as `evaluate` reads it
            _, summary = metrics.score_predictions(records, preds)
            for m in metrics.SCORE_COLUMNS:
                assert results[task][f"{m},{variant}"] == pytest.approx(summary[m], abs=1e-9), (task, variant, m)
