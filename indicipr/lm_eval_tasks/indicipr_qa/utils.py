"""lm-evaluation-harness hooks of the IndicIPR-QA tasks (the YAML files beside this one).

What decides a prompt, a few-shot draw, a prediction or a score is indicipr's own and is only called here:
`indicipr.systems.llm_qa` (notebook 09: `user_message`, `answer_message`, `draw_shots`, `reply_predictions`) and
`indicipr.scoring.metrics` (notebook 06: `score_question`). This file adapts their signatures to lm-eval's hooks.
"""
from __future__ import annotations

import sys

from indicipr.data import benchmark, config
from indicipr.systems import llm_qa
from indicipr.scoring import metrics

DEFAULT_SOURCE = "sample"


def load_dataset(data_source: str = DEFAULT_SOURCE, **_metadata):
    """The benchmark as a `datasets.DatasetDict` (`custom_dataset`). lm-eval passes every `--metadata` key (and the
    model arguments) here; `data_source` is ours: `sample`, `hub` or a folder of the official files."""
    if not isinstance(data_source, str) or not data_source:
        _bad_input(f"--metadata data_source: expected 'sample', 'hub' or a folder of the official files, got {data_source!r}")
    try:
        return benchmark.load_benchmark(data_source)
    except (benchmark.BenchmarkUnavailable, ValueError) as e:     # a missing folder or file, a malformed record
        _bad_input(f"--metadata data_source={data_source!r}: {e}")


def _bad_input(sentence: str):
    "One sentence on stderr and exit status 2 (the project's rule for bad input), no traceback."
    print(f"indicipr_qa: {sentence}", file=sys.stderr)
    raise SystemExit(2)


def doc_to_text(doc: dict) -> str:
    "The user turn of notebook 09: the context, then the question."
    return llm_qa.user_message(doc["question"], doc["context"])


def doc_to_target(doc: dict) -> str:
    "A few-shot example's assistant turn of notebook 09: its first gold answer as the JSON reply."
    return llm_qa.answer_message(doc["answers"]["text"][0])


def three_shots(train) -> list[dict]:
    "The 3-shot examples of notebook 09: drawn once from the training split with the stage's seed."
    return llm_qa.draw_shots(train, llm_qa.SETTINGS["3-shot"], config.LLM_QA["paper"].shot_seed)


def raw_answers(resps, docs) -> list[list[str]]:
    "Filter `raw`: each reply read as notebook 09 reads it (the JSON `answer`, else the text)."
    return [[llm_qa.reply_predictions(r, doc["context"])[0] for r in rs] for rs, doc in zip(resps, docs)]


def snapped_answers(resps, docs) -> list[list[str]]:
    "Filter `snap`: that answer snapped to the closest span of its context (notebook 09's `_snap` rows)."
    return [[llm_qa.reply_predictions(r, doc["context"])[1] for r in rs] for rs, doc in zip(resps, docs)]


def process_results(doc: dict, results: list[str]) -> dict[str, float]:
    "EM, F1 and Char-F1 (percent) of the filtered prediction against the gold answers, by `indicipr.scoring.metrics`."
    return metrics.score_question(results[0], list(doc["answers"]["text"]))
