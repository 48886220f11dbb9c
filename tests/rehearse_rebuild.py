"""The rebuild part of the dress rehearsal: `indicipr build` at the card's scale, offline.

    .venv/bin/python tests/rehearse_rebuild.py                  # exit 1 when a check fails
    .venv/bin/python tests/rehearse_rebuild.py --work /tmp/rb --kill-at 400 --concurrency 8

1. copies the checkout (tracked + untracked-not-ignored files, `rehearse.copy_checkout`) to `<work>/checkout` and runs
   there (`INDICIPR_ROOT`), so nothing of the real checkout's data/ or figures/ is written;
2. typesets PDFs of all seven Acts in the India Code layout (`standins.india_code_pdf`) from the statute text the
   project holds, cut to about 1,173 contexts: the project holds fewer sections than the Acts have, so sections are
   REUSED with varied numbering (…, 158, 158A, 159, …) until the Acts together give the card's number of contexts;
3. starts the OpenAI-compatible stand-in (answering as `gpt-4o`, generation replies of which some fail each filter)
   and runs `indicipr build --profile paper --statutes <pdfs> --tag <tag>`; once the response cache holds `--kill-at`
   replies it kills the build's process group (SIGKILL) in the middle of 02's generation, then runs the same command
   again, which resumes from the cache;
4. checks, from the stand-in's request counters, that no reply that had reached the cache was requested again (the
   only repeats allowed are the requests in flight at the kill, at most `--concurrency`), that every context got a
   reply, and that the four official files are complete and valid;
5. runs the score job (`indicipr reproduce --profile paper --data-source data/build/<tag> --only 01,02,03,04`) on
   the new folder, and prints each stage's count beside the card's and the filter table; `data/sample/` (checkout and
   copy) must be byte-identical afterwards.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from helpers import paper_build_args  # noqa: E402
from rehearse import LLM_ENV, checkout_env, copy_checkout  # noqa: E402
from standins.india_code_pdf import typeset_acts  # noqa: E402
from standins.openai_server import Faults, OpenAIStandIn, prompt_hash  # noqa: E402

from indicipr.data import core  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CARD_CONTEXTS = core.CARD["construction"]["initial_contexts"]


def digests(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def cache_keys(path: Path) -> set[str]:
    "Keys of the complete lines of a response cache (a line cut by the kill is not a reply)."
    keys = set()
    if not path.exists():
        return keys
    for line in path.read_bytes().split(b"\n"):
        try:
            keys.add(json.loads(line)["key"])
        except (ValueError, KeyError):
            pass
    return keys


def build_env(checkout: Path) -> dict:
    return checkout_env({k: v for k, v in os.environ.items() if k not in LLM_ENV}, checkout)


def run_build(cmd: list[str], env: dict, cache: Path | None = None, kill_at: int | None = None) -> tuple[int, bool]:
    "Run the build in its own process group; with `kill_at`, SIGKILL the group once the cache has that many replies."
    print("$", " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    while proc.poll() is None:
        if kill_at and len(cache_keys(cache)) >= kill_at:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return proc.returncode, True
        time.sleep(0.2)
    return proc.returncode, False


def request_prompts(contexts: list[dict], model: str, questions_per_context: int = 5) -> dict[str, str]:
    "Cache key -> the stand-in's prompt hash, for the generation requests 02 makes under the paper profile."
    from indicipr.build import generate
    from indicipr.llm import client as llm
    from indicipr.data.config import present, settings_for

    settings = settings_for("generate", "paper")
    out = {}
    for c in contexts:
        messages = generate.build_messages(questions_per_context, c["act_title"], c["title"], c["context"])
        schema = generate.context_schema(c, questions_per_context, present(settings.schema_limits))
        out[llm.request_key(model, messages, schema, present(settings.params))] = prompt_hash(messages)
    return out


class Checks:
    def __init__(self):
        self.failed = []

    def __call__(self, name: str, ok: bool, detail: str = "") -> bool:
        print(f"  [{'ok' if ok else 'FAIL'}] {name}{': ' + detail if detail else ''}", flush=True)
        if not ok:
            self.failed.append(name)
        return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default=None, help="work folder (default: a new temp folder)")
    ap.add_argument("--tag", default="rehearsal")
    ap.add_argument("--target-contexts", type=int, default=CARD_CONTEXTS)
    ap.add_argument("--kill-at", type=int, default=400, help="kill the build once the cache holds this many replies")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--fault-rate", type=float, default=0.0)
    args = ap.parse_args(argv)
    t_start = time.time()
    work = Path(args.work or tempfile.mkdtemp(prefix="indicipr-rebuild-"))
    work.mkdir(parents=True, exist_ok=True)
    checkout = copy_checkout(work / "checkout")
    exe = str(Path(sys.executable).parent / "indicipr")
    real_sample, copy_sample = digests(ROOT / "data" / "sample"), digests(checkout / "data" / "sample")
    check = Checks()

    from indicipr.build.corpus import section_contexts
    from indicipr.build.sections import read_sections_jsonl

    records = read_sections_jsonl(ROOT / "data" / "sample" / "statutes" / "sections.jsonl")
    t0 = time.time()
    typeset = typeset_acts(records, work / "pdfs", target_contexts=args.target_contexts)
    n_typeset = sum(len(section_contexts(s)) for secs in typeset.values() for s in secs)
    n_sections = sum(len(v) for v in typeset.values())
    print(
        f"typeset {len(typeset)} Acts: {n_sections} sections ({n_sections - len(records)} of them REUSED from the "
        f"{len(records)} sections the project holds, with varied numbering), {n_typeset} contexts "
        f"(card: {CARD_CONTEXTS}) in {time.time() - t0:.0f}s",
        flush=True,
    )

    env = build_env(checkout)
    cache = checkout / "data" / "cache" / "llm" / "generate.jsonl"
    folder = checkout / "data" / "build" / args.tag
    with OpenAIStandIn(faults=Faults(rate=args.fault_rate), keep_requests=False) as server:
        cmd = [
            exe,
            *paper_build_args(args.tag, work / "pdfs", server.base_url),
            "-p",
            "concurrency",
            str(args.concurrency),
        ]
        t0 = time.time()
        rc, killed = run_build([*cmd, "--run-dir", str(work / "run1")], env, cache, args.kill_at)
        at_kill = cache_keys(cache)
        served_at_kill = sum(server.served.values())
        check(
            "the build was killed mid-generation",
            killed and 0 < len(at_kill),
            f"killed={killed}, {len(at_kill)} replies cached, {served_at_kill} served, after {time.time() - t0:.0f}s",
        )
        rc, _ = run_build([*cmd, "--run-dir", str(work / "run2")], env)
        check("the resumed build finished", rc == 0, f"exit {rc} after {time.time() - t0:.0f}s in all")
        stats = server.summary()
        repeated = server.repeated()
    if rc != 0:
        print("rebuild rehearsal: FAILED (the build did not finish)")
        return 1

    from indicipr.data.core import OFFICIAL_FILES
    from indicipr.data.qa_files import load_qa_file, read_jsonl

    contexts = list(read_jsonl(folder / "contexts.jsonl"))
    by_prompt = request_prompts(contexts, "gpt-4o")
    cached_prompts = {by_prompt[k] for k in at_kill if k in by_prompt}
    again = {h for (_, h) in repeated}
    check(
        "contexts at the card's scale",
        abs(len(contexts) - CARD_CONTEXTS) <= 0.02 * CARD_CONTEXTS,
        f"{len(contexts)} vs {CARD_CONTEXTS}",
    )
    check(
        "no cached reply was requested again", not (again & cached_prompts), f"{len(again & cached_prompts)} repeated"
    )
    check(
        "repeats only for the requests in flight at the kill",
        len(again) <= args.concurrency,
        f"{len(again)} re-sent (at most {args.concurrency} were in flight)",
    )
    check(
        "every context got exactly one stored reply",
        len(cache_keys(cache) & set(by_prompt)) == len(contexts)
        and stats["by_model_kind"].get("gpt-4o generation") == len(contexts) + len(again),
        f"{stats['by_model_kind']}",
    )
    generations = list(read_jsonl(folder / "generations.jsonl"))
    check("generations.jsonl complete", len(generations) == len(contexts) and all(g["response"] for g in generations))
    splits = {s: load_qa_file(folder / n, strict=True).records for s, n in OFFICIAL_FILES.items()}
    check(
        "four valid official files",
        len(splits["merged"]) > 0
        and len(splits["merged"]) == sum(len(splits[s]) for s in ("train", "validation", "test")),
        ", ".join(f"{s} {len(v)}" for s, v in splits.items()),
    )

    t0 = time.time()
    score = [
        exe,
        "reproduce",
        "--profile",
        "paper",
        "--data-source",
        str(folder),
        "--only",
        "01,02,03,04",
        "--figures-dir",
        str(work / "score_figures"),
        "--run-dir",
        str(work / "score_run"),
    ]
    print("$", " ".join(score), flush=True)
    rc = subprocess.run(score, env=env).returncode
    check("the score job ran on the rebuilt folder", rc == 0, f"exit {rc} in {time.time() - t0:.0f}s")

    import pandas as pd

    tables = folder / "figures" / "tables"
    print("\nconstruction stages, this build beside the card:")
    print(pd.read_csv(tables / f"construction_counts_{args.tag}.csv").to_string(index=False))
    print("\nthe nine filters on this build:")
    print(pd.read_csv(tables / f"filters_{args.tag}.csv").to_string(index=False))
    check(
        "data/sample/ untouched (checkout and copy)",
        digests(ROOT / "data" / "sample") == real_sample and digests(checkout / "data" / "sample") == copy_sample,
    )
    print(
        f"\nstand-in: {stats}\nwork folder: {work}\nrebuild rehearsal: "
        f"{'FAILED: ' + ', '.join(check.failed) if check.failed else 'all checks passed'} in {time.time() - t_start:.0f}s"
    )
    return 1 if check.failed else 0


if __name__ == "__main__":
    sys.exit(main())
