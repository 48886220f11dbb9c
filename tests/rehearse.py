"""The dress rehearsal: `indicipr reproduce --profile paper --data-source hub` for real, offline, at the card's
full scale, against stand-ins on 127.0.0.1 that this script starts and stops itself.

    .venv/bin/python tests/rehearse.py                 # the whole rehearsal, then the check (exit 1 on failure)
    .venv/bin/python tests/rehearse.py --only 00h_data.benchmark_tables,05_build.stats --no-check-all
    .venv/bin/python tests/rehearse.py --check-only WORKDIR   # re-check a finished rehearsal

What it does:

1. builds, in a work folder (default: a new temp folder; `--work`), the card-shaped benchmark
   (`standins.card_benchmark`) as the dataset repo `niloycste68/IndicIPRExtractiveQA` and four random-init BERT
   checkpoints (`standins.checkpoints`, size `--size`) as bert-base-uncased, nlpaueb/legal-bert-base-uncased,
   law-ai/InCaseLawBERT and law-ai/InLegalBERT;
2. copies the checkout's tracked and untracked-but-not-ignored files to `<work>/checkout` and runs there
   (`INDICIPR_ROOT`), so that the rehearsal's caches and predictions (data/cache, data/predictions/hub, ...)
   never mix with a real paper run's (`--in-place` runs in the checkout itself, e.g. in CI);
3. starts the hub stand-in (`HF_ENDPOINT`, `HF_HOME` in the work folder) and the OpenAI-compatible stand-in
   (every model name routed to it with the notebook parameter `llm_endpoints='*=<url>'`; the INDICIPR_LLM_*
   variables are removed from the environment), with a low rate of injected faults (`--fault-rate`);
4. runs the stage notebooks (`runner.NOTEBOOKS`) with the paper profile, sampling the memory of the runner's process tree, and prints
   wall time and peak memory per notebook;
5. runs `check_rehearsal`, which fails loudly, by name, unless every card table is there with the card's rows,
   counts and groups (see `EXPECTED`), and no committed file (nor anything under data/sample/) changed.

Shrink parameters (the CPU run; data, inference, scoring and analyses stay at full scale): the encoders are
`--size tiny` (2 layers, hidden 128) random-init checkpoints trained for `--epochs 0.1` epochs (notebook
parameter `epochs`); `--size base` gives BERT-base for a GPU. The notebooks' other parameters are passed with
`-p NAME VALUE` (repeatable), as `indicipr reproduce -p`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from standins import card_benchmark as cb  # noqa: E402
from standins.checkpoints import HUB_ENCODERS, build_hub_encoders  # noqa: E402
from standins.hub import serve_folders  # noqa: E402
from standins.openai_server import PAPER_MODELS, Faults, OpenAIStandIn  # noqa: E402

from indicipr.analysis.significance import FOCUS_FAMILY, TWIN_FAMILY  # noqa: E402
from indicipr.data import benchmark, core  # noqa: E402
from indicipr.run import runner
from indicipr.systems import llm_qa  # noqa: E402
from indicipr.systems.llm_qa import llm_short_name  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HUB_ID = "niloycste68/IndicIPRExtractiveQA"
NOTEBOOKS = runner.NOTEBOOKS  # the runner's own list: the stage notebooks


# -- building the stand-ins' content ------------------------------------------------------------------------
def build_hub_content(work: Path, size: str = "tiny", seed: int = 0) -> Path:
    "`<work>/hub/datasets/<HUB_ID>/data/*.jsonl` (+ README) and `<work>/hub/models/<id>/` for the four encoders."
    hub = work / "hub"
    repo = hub / "datasets" / HUB_ID
    cb.build_card_benchmark(ROOT / "data" / "sample" / "statutes" / "sections.jsonl", repo / "data", seed=seed)
    dressed = cb.dress_as_released(repo / "data")  # extra columns, BOMs, CRLF, one off-by-one offset
    (work / "dressed.json").write_text(json.dumps(dressed))
    shutil.move(str(repo / "data" / "README.md"), repo / "README.md")
    build_hub_encoders(hub / "models", size=size, seed=seed)
    return hub


# -- the scratch checkout and the "untouched" check ---------------------------------------------------------
def git(*args, cwd=ROOT, **kw) -> str:
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True, **kw).stdout


def copy_checkout(dest: Path) -> Path:
    "Copy the working tree (tracked + untracked-not-ignored files) to `dest`."
    files = [f for f in git("ls-files", "-co", "--exclude-standard", "-z").split("\0") if f]
    for f in files:
        src = ROOT / f
        if src.is_file() and not src.is_symlink():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)
    return dest


def tree_status(work_tree: Path) -> dict[str, str]:
    "`git status --porcelain` of `work_tree` against the checkout's HEAD and index: {path: status}."
    out = git(
        f"--git-dir={ROOT / '.git'}",
        f"--work-tree={work_tree}",
        "status",
        "--porcelain",
        "-z",
        "--untracked-files=all",
        cwd=work_tree,
    )
    entries = [e for e in out.split("\0") if e]
    return {e[3:]: e[:2] for e in entries}


def file_digests(folder: Path, paths) -> dict[str, str]:
    import hashlib

    return {
        p: hashlib.sha256((folder / p).read_bytes()).hexdigest() if (folder / p).is_file() else "missing" for p in paths
    }


# -- memory sampling -----------------------------------------------------------------------------------------
class TreeMemory:
    "Samples the summed RSS of a process and its descendants; `peak(tag)` per tag set with `.tag`."

    def __init__(self, pid: int, every: float = 0.5):
        import psutil

        self.proc, self.every, self.tag, self.peaks = psutil.Process(pid), every, None, {}
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        import psutil

        while not self._stop.is_set():
            try:
                procs = [self.proc, *self.proc.children(recursive=True)]
                rss = 0
                for p in procs:
                    try:
                        rss += p.memory_info().rss
                    except psutil.Error:
                        pass
                if self.tag:
                    self.peaks[self.tag] = max(self.peaks.get(self.tag, 0), rss)
            except psutil.Error:
                pass
            self._stop.wait(self.every)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self.thread.join(timeout=5)


# -- running -------------------------------------------------------------------------------------------------
# the LLM settings of the caller's shell: a rehearsal talks to its own stand-in only
LLM_ENV = (
    "INDICIPR_LLM_ENDPOINTS",
    "INDICIPR_LLM_BASE_URL",
    "INDICIPR_LLM_API_KEY",
    "INDICIPR_LLM_MODEL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
)


def rehearsal_env(work: Path, checkout: Path, hub_endpoint: str, llm_url: str, llm_timeout: float = 3.0) -> dict:
    env = dict(os.environ)
    for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", *LLM_ENV):
        env.pop(k, None)
    env.update(
        {
            "HF_ENDPOINT": hub_endpoint,
            "HF_HOME": str(work / "hf_home"),
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "INDICIPR_LLM_TIMEOUT": f"{llm_timeout:g}",
        }
    )
    return checkout_env(env, checkout)


def checkout_env(env: dict, checkout: Path) -> dict:
    "`env` for the project's commands on `checkout`: its root, no prompts, Agg, unbuffered, ../shared when there is one."
    env.update(
        {
            "INDICIPR_ROOT": str(checkout),
            "INDICIPR_YES": "1",
            "MPLBACKEND": "Agg",
            "PYTHONUNBUFFERED": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
    )
    shared = ROOT.parent / "shared"
    if shared.is_dir() and "INDICIPR_SHARED" not in env:
        env["INDICIPR_SHARED"] = str(shared)
    return env


def run_reproduce(args, work: Path, checkout: Path, env: dict, llm_url: str) -> tuple[int, dict, float]:
    "Run `indicipr reproduce` (streaming its output), return (exit code, peak bytes per notebook, seconds)."
    exe = Path(sys.executable).parent / "indicipr"
    source = (
        "hub" if args.data_source == "hub" else str(work / "hub" / "datasets" / HUB_ID / "data")
    )  # the same four files
    cmd = [
        str(exe),
        "reproduce",
        "--profile",
        "paper",
        "--data-source",
        source,
        "--figures-dir",
        str(work / "figures"),
        "--run-dir",
        str(work / "run"),
    ]
    selected = args.only.split(",") if args.only else NOTEBOOKS  # the runner refuses undeclared parameters
    if "08_systems.encoders" in selected:
        cmd += ["-p", "epochs", str(args.epochs)]
    # the hub stand-in serves the card's four encoders only: the grounded stage's dense retriever starts from one of them
    if "09a_systems.grounded" in selected:
        cmd += ["-p", "dense_model", "bert-base-uncased"]
    if {"02_build.generate", "09_systems.llm_qa", "09a_systems.grounded", "12_analysis.quality"} & set(selected):
        cmd += ["-p", "llm_endpoints", f"*={llm_url}"]
    if args.statutes_path and "01_build.corpus" in selected:
        cmd += ["-p", "statutes_path", str(args.statutes_path)]
    for name, value in args.parameter:
        cmd += ["-p", name, value]
    if args.only:
        cmd += ["--only", args.only]
    print("$", " ".join(cmd), flush=True)
    t0 = time.time()
    proc = subprocess.Popen(cmd, cwd=checkout, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with TreeMemory(proc.pid) as mem:
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            m = re.match(r"\[\d+/\d+\] (\S+): running", line)
            if m:
                mem.tag = m.group(1)
        rc = proc.wait()
    return rc, dict(mem.peaks), time.time() - t0


def print_timings(work: Path, peaks: dict) -> list[dict]:
    "Wall time (from the runner's run.json) and peak memory per notebook."
    run_json = work / "run" / "report" / "run.json"
    results = json.loads(run_json.read_text())["results"] if run_json.exists() else []
    rows = [
        {
            "notebook": r["name"],
            "status": r["status"],
            "seconds": round(r["seconds"], 1),
            "peak_mb": round(peaks.get(r["name"], 0) / 2**20),
        }
        for r in results
    ]
    print("\nper notebook: wall time, peak memory (runner + kernel processes)")
    for r in rows:
        print(f"  {r['notebook']:<16} {r['status']:<8} {r['seconds']:>8.1f} s {r['peak_mb']:>7} MB")
    return rows


# -- the check -----------------------------------------------------------------------------------------------
CARD_ROWS_ONLY = ["Initial statutory contexts"]  # rows the card has whose value the stand-in does not fix
_NOT_COMPUTED = ["Generation model", "Human audit (test QA pairs)"]  # card rows no computed glance row stands for
CARD_GLANCE = {k: v for k, v in core.CARD_GLANCE.items() if k not in CARD_ROWS_ONLY + _NOT_COMPUTED}
CARD_ENCODERS = {core.CARD["system_names"][k]: k for k in core.CARD["encoders"]}
CARD_LLMS = {core.CARD["system_names"][m]: m for m in core.CARD["models"]["qa"]}
CARD_SETTINGS = ("zero-shot", "3-shot")
SEEDS = 3
JUDGES = tuple(core.CARD["models"]["judge"])

# one spec of the expected tables: name -> columns that must be there (the checks below read the values)
EXPECTED = {
    "00_benchmark_splits": ["Split", "QA pairs"],
    "dataset_at_a_glance": ["Property", "Value"],
    "per_act_distribution": ["Act", "Full dataset", "Test set"],
    "question_patterns": ["Pattern", "Count"],
    "unseen_vocabulary": ["Field", "Unseen (%)"],
    "bm25_results": ["system", "questions", "EM", "F1", "Char-F1"],
    "encoder_runs": ["model", "seed", "system", "em", "f1", "char_f1"],
    "encoder_results": ["model", "seeds", "EM", "F1", "Char-F1"],
    "llm_results": ["model name", "setting", "postprocess", "system", "questions"],
    "results": ["System", "Setting", "Questions", "EM", "F1", "Char-F1"],
    "results_runs": ["System", "EM", "F1", "Char-F1", "Missing"],
    "significance": ["System A", "System B", "Family", "Questions", "p (Holm)"],
    "significance_all_pairs": ["System A", "System B", "p (Holm)"],
    "per_act_focus": ["Act", "Test samples", "F1"],
    "error_taxonomy_focus": ["Error type", "Count", "Percentage"],
    "answer_structure_groups": ["Analysis", "Group", "Questions"],
    "answer_structure_focus": ["Analysis", "Group", "EM", "F1"],
    "encoder_settings": [
        "model",
        "seed",
        "checkpoint",
        "epochs",
        "max_steps",
        "steps",
        "device",
        "eval_questions",
        "shrink",
    ],
    "grounded_protocol": ["what", "value"],
    "grounded_retrieval": ["index", "retriever", "questions", "R@1", "R@5", "R@20", "MRR@10", "nDCG@10"],
    "grounded_bm25_agreement": ["index", "questions", "same top-20 (%)"],
    "grounded_end_to_end": [
        "reader",
        "setting",
        "questions",
        "EM",
        "F1",
        "Char-F1",
        "answer from a wrong provision (%)",
    ],
    "grounded_retrieval_tax": ["reader", "Act", "questions", "tax (F1)", "tax 2.5%", "tax 97.5%"],
    "closed_book": [
        "model name",
        "setting",
        "system",
        "EM",
        "F1",
        "Char-F1",
        "verbatim in the gold context (%)",
        "reading gain (F1)",
        "gain 2.5%",
        "gain 97.5%",
    ],
    "closed_book_per_act": ["model name", "setting", "Act", "questions", "F1", "reading gain (F1)"],
    "judge_status": ["judge", "ok", "invalid", "error"],
    "judge_score_distribution": ["rater", "criterion", "pairs", "missing"],
    "judge_flagged_by_act_single": ["Act"],
    "judge_flagged_by_act_ensemble": ["Act"],
    "judge_agreement": ["criterion", "pairs scored by all"],
    "audit_kit_per_act": ["Act", "pairs"],
}


class Check:
    "Collects named results; `ok(name, cond, detail)`; `report()` prints them and returns the failures."

    def __init__(self):
        self.results: list[tuple[str, bool, str]] = []

    def ok(self, name: str, cond: bool, detail: str = "") -> bool:
        self.results.append((name, bool(cond), detail))
        return bool(cond)

    def has_all(self, name: str, want: set, got: set) -> bool:
        "`got` holds every item of `want` (the detail names the missing ones)."
        return self.ok(name, want <= got, f"missing {sorted(want - got)}")

    def all_rows(self, name: str, table, column: str, value, detail: str | None = None) -> bool:
        "Every row of `table` holds `value` in `column` (the detail: that column, unless given)."
        return self.ok(name, (table[column] == value).all(), str(list(table[column])) if detail is None else detail)

    def on_every_test_question(self, name: str, table, column: str = "questions") -> bool:
        "Every row of `table` counts the card's 344 test questions in `column`."
        return self.all_rows(name, table, column, 344)

    def report(self) -> list[tuple[str, str]]:
        fails = [(n, d) for n, c, d in self.results if not c]
        print(f"\nrehearsal check: {len(self.results) - len(fails)} passed, {len(fails)} FAILED")
        for n, c, d in self.results:
            print(f"  [{'ok' if c else 'FAIL'}] {n}" + (f": {d}" if d and not c else ""))
        return fails


def _table(chk: Check, tables: Path, name: str):
    import pandas as pd

    path = tables / f"{name}.csv"
    if not chk.ok(f"table {name} rendered", path.is_file(), f"{path} missing"):
        return None
    df = pd.read_csv(path)
    missing = [c for c in EXPECTED.get(name, []) if c not in df.columns]
    chk.ok(f"table {name} has columns {EXPECTED.get(name)}", not missing, f"missing {missing}; has {list(df.columns)}")
    return None if missing else df


def _num(x):
    try:
        return float(str(x).replace(",", ""))
    except ValueError:
        return None


def _norm(s) -> str:
    return re.sub(r"[^a-z0-9]+", "", str(s).lower())


def check_rehearsal(
    run_dir, figures_dir, checkout=None, status_before=None, digests_before=None, llm_summary=None
) -> list:
    "Assert the rehearsal's outputs against the card; returns the failures (printed, by name)."
    run_dir, figures_dir = Path(run_dir), Path(figures_dir)
    tables = figures_dir / "tables"
    total = core.CARD["construction"]["final_qa_pairs"]
    chk = Check()
    if llm_summary is not None:  # the score job needs no generation LLM: nothing may have asked for one
        generation = {
            k: n
            for k, n in llm_summary["by_model_kind"].items()
            if k.endswith(" generation") or k.startswith("gpt-4o ")
        }
        chk.ok("score job: no generation request reached an LLM", not generation, str(generation))
        slow = llm_summary["faults"].get("timeout", 0)
        if slow:  # each one a real client-side timeout, then asked again
            chk.ok(
                f"LLM client: the {slow} 'timeout' faults timed out and were asked again",
                llm_summary["timeout_faults_asked_again"] == slow,
                str(llm_summary["timeout_faults_asked_again"]),
            )
    run_json = run_dir / "report" / "run.json"
    source_tag = "hub"
    if chk.ok("runner wrote run.json", run_json.is_file(), str(run_json)):
        run = json.loads(run_json.read_text())
        source_tag = benchmark.source_tag(run["parameters"]["data_source"])  # where the run wrote its audit kit
        results = run["results"]
        for r in results:
            chk.ok(f"notebook {r['name']} ran", r["status"] == "ok", f"{r['status']}: {(r.get('error') or '')[:600]}")
        chk.ok(
            f"all {len(NOTEBOOKS)} stage notebooks in the run",
            [r["name"] for r in results] == NOTEBOOKS,
            str([r["name"] for r in results]),
        )

    t = _table(chk, tables, "00_benchmark_splits")
    if t is not None:
        got = {str(r["Split"]): _num(r["QA pairs"]) for _, r in t.iterrows()}
        want = {**core.CARD["splits"], "merged": core.CARD["construction"]["final_qa_pairs"]}
        chk.ok("splits 3,710 / 408 / 344 / 4,462", all(got.get(k) == v for k, v in want.items()), str(got))

    t = _table(chk, tables, "00_benchmark_problems")  # the release's real-world shapes (cb.dress_as_released)
    dressed_path = run_dir.parent / "dressed.json"
    if t is not None and dressed_path.is_file():
        d = json.loads(dressed_path.read_text())
        rows = [r for _, r in t.iterrows()]
        named = [r for r in rows if str(r["Id"]) == d["id"] and f"{d['file']}:{d['line']}" in str(r["Where"])]
        chk.ok(
            f"the off-by-one record {d['id']} is named with its right offset {d['right']}, and only it",
            len(rows) == 1 and len(named) == 1 and f"(the text occurs at {d['right']})" in str(named[0]["Problem"]),
            str([dict(r) for r in rows][:3]),
        )

    t = _table(chk, tables, "dataset_at_a_glance")
    if t is not None:
        got = {str(r["Property"]): _num(r["Value"]) for _, r in t.iterrows()}
        for k, v in CARD_GLANCE.items():
            chk.ok(f"glance: {k} = {v}", got.get(k) == v, f"got {got.get(k)}")
        for k in CARD_ROWS_ONLY:
            chk.ok(f"glance: row {k!r} present", k in got, f"rows: {list(got)}")

    t = _table(chk, tables, "per_act_distribution")
    if t is not None:
        got = {str(r["Act"]): (_num(r["Full dataset"]), _num(r["Test set"])) for _, r in t.iterrows()}
        for key, (full, test) in cb.CARD_PER_ACT.items():
            name = cb.CARD_SHORT[key]
            chk.ok(
                f"per-Act: {name} = ({full}, {test})",
                got.get(name) == (full, test),
                f"got {got.get(name)}; rows {list(got)}",
            )
        unknown = [a for a in got if a not in cb.CARD_SHORT.values() and a != "Total"]
        chk.ok("per-Act: no unknown Act rows", not unknown, str(unknown))

    t = _table(chk, tables, "question_patterns")
    if t is not None:
        got = {_norm(r["Pattern"]): _num(r["Count"]) for _, r in t.iterrows()}
        qp = core.CARD["question_patterns"]
        for label, v in [
            ("questions", total),
            ("uniqueafternormalization", qp["unique"]),
            *((_norm(f"begin with {o}"), n) for o, n in qp["openings"].items()),
        ]:
            chk.ok(f"question patterns: {label} = {v}", got.get(label) == v, f"got {got}")

    _table(chk, tables, "unseen_vocabulary")

    t = _table(chk, tables, "bm25_results")
    if t is not None:
        chk.ok("BM25: both rows on all 344 questions", len(t) == 2 and (t["questions"] == 344).all(), t.to_string())

    t = _table(chk, tables, "encoder_runs")
    if t is not None:
        runs = {(str(r["model"]), int(r["seed"])) for _, r in t.iterrows()}
        want = {(k, s) for k in CARD_ENCODERS.values() for s in range(SEEDS)}
        chk.ok("encoders: 4 models x 3 seeds", want <= runs, f"missing {sorted(want - runs)}")
    t = _table(chk, tables, "encoder_results")
    if t is not None:
        names = set(map(str, t["model"]))
        chk.ok("encoder results: the card's four names", set(CARD_ENCODERS) <= names, f"got {sorted(names)}")

    t = _table(chk, tables, "encoder_boundary_decoding")
    if t is not None:
        plain = {str(s) for s in t["plain system"]}
        want = {f"inlegalbert_seed{s}" for s in range(SEEDS)}
        chk.ok(
            "boundary-aware decoding: every InLegalBERT seed decoded again, beside its plain run",
            want <= plain,
            f"missing {sorted(want - plain)}",
        )
        chk.ok(
            "boundary-aware decoding: weights tuned on validation never below the plain decoding there",
            (t["validation F1 tuned"] >= t["validation F1 plain"]).all(),
            t.to_string(),
        )

    t = _table(chk, tables, "llm_results")
    if t is not None:
        raw = t[t["postprocess"] == "raw"] if "postprocess" in t else t
        got = {(str(r["model name"]), str(r["setting"])) for _, r in raw.iterrows()}
        want = {(n, s) for n in CARD_LLMS for s in CARD_SETTINGS}
        chk.has_all("LLMs: 6 rows (3 models x zero-/3-shot), raw", want, got)
        chk.on_every_test_question("LLMs: every row on 344 questions", t)

    t = _table(chk, tables, "closed_book")
    if t is not None:
        got = {(str(r["model name"]), str(r["setting"])) for _, r in t.iterrows()}
        want = {
            (n, s)
            for n in CARD_LLMS
            for s in [f"gold context ({llm_qa.CLOSED_BOOK_STYLE})", *llm_qa.CLOSED_BOOK.values()]
        }
        chk.has_all("closed-book probe: every LLM in its twin's setting and the three without the context", want, got)
        chk.on_every_test_question("closed-book probe: every row on 344 questions", t)
    _table(chk, tables, "closed_book_per_act")

    t = _table(chk, tables, "results_runs")
    if t is not None:
        missing = t[t["Missing"] != 0][["System", "Missing"]].to_string()
        chk.all_rows("results: every run scored on all questions (Missing 0)", t, "Missing", 0, missing)
    t = _table(chk, tables, "results")
    if t is not None:
        systems = {_norm(s) for s in t["System"]}
        want = ["BM25 Retrieval", "BM25 Oracle Window", *CARD_ENCODERS]
        # LLM systems are named <model>_<setting>[_snap] (llm_qa.llm_short_name): each card model × setting, raw
        want += [f"{llm_short_name(m)}_{setting}" for m in CARD_LLMS.values() for setting in CARD_SETTINGS]
        chk.ok(
            "results: the card's systems (BM25 ×2, 4 encoders, 3 LLMs × zero-/3-shot)",
            all(_norm(w) in systems for w in want),
            f"missing {[w for w in want if _norm(w) not in systems]}; has {sorted(t['System'])}",
        )
        chk.on_every_test_question(
            "results: every row on 344 questions (the paper profile asks every setting)", t, "Questions"
        )

    t = _table(chk, tables, "significance")
    if t is not None:
        pairs = {(_norm(r["System A"]), _norm(r["System B"])) for _, r in t[t["Family"] == FOCUS_FAMILY].iterrows()}
        want = [("inlegalbert", _norm(b)) for b in ("BERT-base", "LegalBERT-US", "InCaseLawBERT")]
        chk.ok(
            "significance: the card's layout (InLegalBERT vs BERT-base, LegalBERT-US, InCaseLawBERT)",
            all(p in pairs or p[::-1] in pairs for p in want),
            f"pairs: {sorted(pairs)[:12]}",
        )
        chk.ok("significance: Holm-corrected p-values in [0, 1]", t["p (Holm)"].between(0, 1).all(), "")
        twins = {(_norm(r["System A"]), _norm(r["System B"])) for _, r in t[t["Family"] == TWIN_FAMILY].iterrows()}
        want = {
            (_norm(f"{llm_short_name(m)}_{s}"), _norm(f"{llm_short_name(m)}_{llm_qa.CLOSED_BOOK_STYLE}"))
            for m in CARD_LLMS.values()
            for s in llm_qa.CLOSED_BOOK
        }
        chk.has_all("significance: every LLM's closed-book settings against its gold-context twin", want, twins)

    t = _table(chk, tables, "per_act_focus")
    if t is not None:
        acts = {str(a) for a in t["Act"]}
        chk.ok("per-Act F1: the card's seven Acts", set(cb.CARD_SHORT.values()) <= acts, f"got {sorted(acts)}")
        col = next((c for c in t.columns if _norm(c) in ("testsamples", "questions", "n")), None)
        if chk.ok("per-Act F1: a test-samples column", col is not None, f"columns {list(t.columns)}"):
            got = {str(r["Act"]): _num(r[col]) for _, r in t.iterrows()}
            chk.ok(
                "per-Act F1: test samples = the card's",
                all(got.get(cb.CARD_SHORT[k]) == v[1] for k, v in cb.CARD_PER_ACT.items()),
                str(got),
            )

    _table(chk, tables, "error_taxonomy_focus")
    t = _table(chk, tables, "answer_structure_groups")
    if t is not None:
        groups = " | ".join(map(str, t["Group"]))
        for g in ("Short answers", "Long answers", "Single-clause", "Multi-clause", "Earlier answers", "Later answers"):
            chk.ok(f"answer structure: group {g!r}", g in groups, groups)
        chk.ok("answer structure: median split at 33 words", "33 words" in groups, groups)
    _table(chk, tables, "answer_structure_focus")
    _table(chk, tables, "significance_all_pairs")
    t = _table(chk, tables, "encoder_settings")
    if t is not None:
        chk.ok(
            "encoder settings: every run states its shrink parameters",
            t["shrink"].astype(str).str.len().gt(0).all() and len(t) >= 12,
            t[["model", "seed", "shrink"]].to_string(),
        )
        chk.on_every_test_question("encoder settings: inference on all 344 questions", t, "eval_questions")

    t = _table(chk, tables, "grounded_protocol")
    if t is not None:
        got = {str(r["what"]): str(r["value"]) for _, r in t.iterrows()}
        n_contexts = core.CARD["construction"]["retained_contexts"]
        chk.ok(
            f"grounded: the corpus is the {n_contexts:,} retained contexts",
            got.get("contexts in the corpus (all splits)") == str(n_contexts),
            str(got),
        )
    t = _table(chk, tables, "grounded_retrieval")
    if t is not None:
        got = {(str(r["index"]), str(r["retriever"])) for _, r in t.iterrows()}
        want = {
            (v, n)
            for v in ("text only", "with section titles")
            for n in (
                "BM25 (rank-bm25)",
                "BM25 (bm25s)",
                "dense",
                "dense, fine-tuned",
                "RRF (BM25 + fine-tuned dense)",
                "weighted sum (BM25 + fine-tuned dense)",
            )
        }
        chk.has_all("grounded retrieval: 6 retrievers x 2 indexes", want, got)
        chk.on_every_test_question("grounded retrieval: every row on all 344 questions", t)
    t = _table(chk, tables, "grounded_bm25_agreement")
    if t is not None:
        same = "grounded: bm25s and rank-bm25 give the same top-20 on every test question"
        chk.all_rows(same, t, "same top-20 (%)", 100, t.to_string())
    t = _table(chk, tables, "grounded_end_to_end")
    if t is not None:
        readers = set(map(str, t["reader"]))
        want = {"InLegalBERT (seed 0)", *(f"{n} (zero-shot)" for n in CARD_LLMS)}
        chk.ok(
            "grounded end to end: InLegalBERT and the card's 3 LLMs, gold context and retrieved",
            want <= readers and len(t) == 2 * len(readers),
            f"readers {sorted(readers)}; rows {len(t)}",
        )
        chk.on_every_test_question("grounded end to end: every row on all 344 questions", t)
    t = _table(chk, tables, "grounded_retrieval_tax")
    if t is not None:
        acts = set(map(str, t["Act"]))
        chk.ok(
            "grounded retrieval tax: all and the seven Acts",
            {"all", *cb.CARD_SHORT.values()} <= acts,
            str(sorted(acts)),
        )
    t = _table(chk, tables, "judge_status")
    if t is not None:
        got = {str(r["judge"]): int(r["ok"] + r["invalid"] + r["error"]) for _, r in t.iterrows()}
        for j in JUDGES:
            chk.ok(f"judge {j}: all {total:,} pairs", got.get(j) == total, f"got {got}")
    t = _table(chk, tables, "judge_score_distribution")
    if t is not None:
        for rater in (JUDGES[0], "ensemble (majority)"):
            part = t[t["rater"] == rater]
            chk.ok(
                f"judge table: {rater} covers {total:,} pairs on 4 criteria",
                len(part) == 4 and (part["pairs"] == total).all(),
                part[["criterion", "pairs"]].to_string() if len(part) else f"no rows for {rater}",
            )
    for name in ("judge_flagged_by_act_single", "judge_flagged_by_act_ensemble"):
        t = _table(chk, tables, name)
        if t is not None:
            chk.ok(
                f"{name}: the seven Acts", set(cb.CARD_SHORT.values()) <= set(map(str, t["Act"])), str(list(t["Act"]))
            )
    _table(chk, tables, "judge_agreement")

    t = _table(chk, tables, "audit_kit_per_act")
    if t is not None:
        chk.ok("audit kit: 200 pairs over 7 Acts", int(t["pairs"].sum()) == 200 and len(t) == 7, t.to_string())
    if checkout is not None:
        manifest = Path(checkout) / "data" / "audit" / source_tag / "manifest.json"
        if chk.ok("audit kit: manifest written", manifest.is_file(), str(manifest)):
            m = json.loads(manifest.read_text())
            ids = m.get("ids", [])
            chk.ok("audit kit: 200 distinct test ids", len(ids) == 200 == len(set(ids)), f"{len(ids)} ids")

    for fig in (
        "question_openings",
        "length_distributions",
        "answer_structure_gold",
        "grounded_recall_at_k",
        "grounded_retrieval_tax",
    ):
        chk.ok(f"figure {fig}.png", (figures_dir / f"{fig}.png").is_file(), "")

    if checkout is not None and status_before is not None:
        after = tree_status(Path(checkout))
        changed = {p: s for p, s in after.items() if status_before.get(p) != s}
        sample = [p for p in changed if p.startswith("data/sample/")]
        chk.ok("nothing new or changed under data/sample/", not sample, str(sample[:20]))
        committed = [p for p, s in changed.items() if s != "??"]
        chk.ok("no committed file changed", not committed, str(committed[:20]))
        untracked = [p for p, s in changed.items() if s == "??"]
        chk.ok("no new un-ignored file", not untracked, str(untracked[:20]))
    if checkout is not None and digests_before is not None:
        now = file_digests(Path(checkout), digests_before)
        edited = [p for p in digests_before if now[p] != digests_before[p]]
        chk.ok("no tracked file's content changed (hash)", not edited, str(edited[:20]))
    return chk.report()


# -- main ----------------------------------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--work", default=None, help="work folder (default: a new temp folder)")
    ap.add_argument(
        "--size", default="tiny", choices=["tiny", "small", "base"], help="encoder checkpoints (base on a GPU)"
    )
    ap.add_argument("--epochs", type=float, default=0.1, help="encoder fine-tuning epochs (notebook 08 `epochs`)")
    ap.add_argument("--fault-rate", type=float, default=0.01, help="share of first LLM attempts that fail")
    ap.add_argument(
        "--fault-delay", type=float, default=6.0, help="seconds of the 'timeout' fault (above --llm-timeout)"
    )
    ap.add_argument(
        "--llm-timeout",
        type=float,
        default=3.0,
        help="INDICIPR_LLM_TIMEOUT of the run: below --fault-delay, so each 'timeout' fault is a real client timeout",
    )
    ap.add_argument(
        "--statutes-path",
        default="",
        help="01_build.corpus `statutes_path`; '' (default): none, the score job reads no statute and no PDF",
    )
    ap.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    ap.add_argument(
        "--only", default=None, help="comma-separated notebooks (the check then reports the rest as missing)"
    )
    ap.add_argument("--in-place", action="store_true", help="run in the checkout itself (CI), not in a copy")
    ap.add_argument(
        "--data-source",
        default="hub",
        choices=["hub", "folder"],
        help="hub: the hub stand-in (HF_ENDPOINT); folder: the same four official files read from a local folder",
    )
    ap.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra environment for the run (diagnostics only, e.g. to step past a known failure)",
    )
    ap.add_argument(
        "--check-only", default=None, metavar="WORK", help="only re-run the check on a finished work folder"
    )
    args = ap.parse_args(argv)
    if args.fault_rate > 0 and not args.fault_delay > args.llm_timeout:
        ap.error(
            f"--fault-delay ({args.fault_delay:g} s) must exceed --llm-timeout ({args.llm_timeout:g} s), "
            "or the 'timeout' faults are only slow replies"
        )

    if args.check_only:
        work = Path(args.check_only)
        return (
            1
            if check_rehearsal(
                work / "run", work / "figures", work / "checkout" if (work / "checkout").is_dir() else None
            )
            else 0
        )

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="indicipr_rehearsal_"))
    work.mkdir(parents=True, exist_ok=True)
    t_all = time.time()
    print(f"rehearsal work folder: {work}", flush=True)
    t0 = time.time()
    hub_root = build_hub_content(work, args.size)
    print(
        f"stand-in content: card benchmark + {len(HUB_ENCODERS)} {args.size} checkpoints in {time.time() - t0:.1f} s",
        flush=True,
    )
    checkout = ROOT if args.in_place else copy_checkout(work / "checkout")
    tracked = [f for f in git("ls-files", "-z").split("\0") if f]
    status_before = tree_status(checkout)
    digests_before = file_digests(checkout, tracked)
    faults = Faults(rate=args.fault_rate, seed=0, retry_after_s=0.2, delay_s=args.fault_delay)
    with serve_folders(hub_root) as hub, OpenAIStandIn(PAPER_MODELS, faults, keep_requests=False) as llm:
        print(
            f"hub stand-in {hub.endpoint} ({len(hub.repos)} repos); LLM stand-in {llm.base_url} ({', '.join(llm.models)})",
            flush=True,
        )
        env = rehearsal_env(work, checkout, hub.endpoint, llm.base_url, args.llm_timeout)
        env.update(dict(e.split("=", 1) for e in args.env))
        rc, peaks, seconds = run_reproduce(args, work, checkout, env, llm.base_url)
        llm_summary = llm.summary()
        (work / "standins.json").write_text(
            json.dumps({"llm": llm.summary(), "hub_requests": hub.paths_seen()[-2000:]}, indent=1)
        )
        print(f"\nLLM stand-in: {json.dumps(llm.summary())}")
        print(
            f"hub stand-in: {len(hub.requests)} requests, {sum(1 for r in hub.requests if r[2] >= 400)} answered 4xx/5xx"
        )
    rows = print_timings(work, peaks)
    (work / "timings.json").write_text(json.dumps(rows, indent=1))
    print(
        f"indicipr reproduce: exit {rc} after {seconds / 60:.1f} min; rehearsal total {(time.time() - t_all) / 60:.1f} min"
    )
    fails = check_rehearsal(work / "run", work / "figures", checkout, status_before, digests_before, llm_summary)
    print(f"work folder kept: {work}")
    return 1 if (fails or rc) else 0


if __name__ == "__main__":
    sys.exit(main())
