"""Foundation tests: the official schema, benchmark loading, errors that name file:line, the
runner, and the nbdev/papermill plumbing (parameters tag survives nbdev_clean; the sync check
fails when a notebook is edited without export)."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import BIN, CHROMIUM_ARGS, ROOT, chromium_or_skip, sync_check_repo
from helpers import QA_SMALL as FIXTURE

from indicipr.data import artifacts, benchmark, core, qa_files
from indicipr.analysis import error_analysis, error_taxonomy
from indicipr.run import report, runner, stages


@pytest.fixture
def official_folder(tmp_path, statute_sections):
    "Four official-format files built from real statute text (first sentence of each of 6 sections): (folder, records)."
    recs = []
    for sec in statute_sections[:6]:
        ctx = " ".join(sec["text"].split())
        answer = ctx[:60].rsplit(" ", 1)[0]
        prefix = core.ACTS[sec["act"]].prefix
        recs.append(
            qa_files.make_qa_record(
                f"{prefix}_{len(recs) + 1:06d}",
                f"Section {sec['section']}: {sec['title']}",
                ctx,
                f"What does Section {sec['section']} begin with?",
                answer,
            )
        )
    folder = tmp_path / "official"
    parts = {"train": recs[:3], "validation": recs[3:4], "test": recs[4:], "merged": recs}
    for split, rs in parts.items():
        qa_files.write_jsonl(folder / core.OFFICIAL_FILES[split], rs)
    return folder, recs


def test_load_benchmark_local_folder(official_folder, statute_sections):
    folder, recs = official_folder
    dd = benchmark.load_benchmark(folder, merged=True)
    assert set(dd) == {"train", "validation", "test", "merged"}
    assert len(dd["merged"]) == len(recs)
    row = dd["train"][0]
    assert (
        row["context"][row["answers"]["answer_start"][0] :][: len(row["answers"]["text"][0])]
        == row["answers"]["text"][0]
    )
    assert core.act_for_id(row["id"]).key == statute_sections[0]["act"]


def test_load_benchmark_committed_fixture():
    dd = benchmark.load_benchmark(FIXTURE)
    assert len(dd["train"]) > 100 and len(dd["test"]) > 10
    train_ctx, test_ctx = set(dd["train"]["context"]), set(dd["test"]["context"])
    assert not train_ctx & test_ctx


@pytest.mark.parametrize(
    "kind,mutate,needle",
    [
        ("malformed JSON", lambda line, rec: line[:-5], "malformed JSON"),
        (
            "missing field",
            lambda line, rec: json.dumps({k: v for k, v in rec.items() if k != "context"}),
            "missing field 'context'",
        ),
        ("wrong type", lambda line, rec: json.dumps({**rec, "question": ["q"]}), "field 'question' should be str"),
        (
            "answer_start not int",
            lambda line, rec: json.dumps({**rec, "answers": {"text": rec["answers"]["text"], "answer_start": ["0"]}}),
            "should be an int",
        ),
        (
            "offset mismatch",
            lambda line, rec: json.dumps(
                {
                    **rec,
                    "answers": {
                        "text": rec["answers"]["text"],
                        "answer_start": [rec["answers"]["answer_start"][0] + 3],
                    },
                }
            ),
            "does not match context",
        ),
        (
            "answer not in context",
            lambda line, rec: json.dumps(
                {**rec, "answers": {"text": ["no such words here at all"], "answer_start": [0]}}
            ),
            "does not occur in the context",
        ),
        ("empty context", lambda line, rec: json.dumps({**rec, "context": "  "}), "empty context"),
        ("duplicate id", lambda line, rec: json.dumps({**rec, "id": "DUP"}), "duplicate id"),
    ],
)
def test_malformed_line_names_file_and_line(official_folder, kind, mutate, needle):
    folder, _ = official_folder
    path = folder / "train_squad.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    if kind == "duplicate id":
        lines[0] = mutate(lines[0], json.loads(lines[0]))
    lines[1] = mutate(lines[1], json.loads(lines[1]))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(qa_files.QAFormatError) as err:  # --strict: any problem is an error naming file, line and what
        benchmark.load_benchmark(folder, strict=True)
    msg = str(err.value)
    assert "train_squad.jsonl:2" in msg, msg
    assert needle in msg, msg
    listed = "\n".join(
        str(p) for p in benchmark.load_benchmark(folder, strict=False, verbose=False, as_dataset=False).problems
    )  # by default: listed once, the rest loads
    assert "train_squad.jsonl:2" in listed and needle in listed, listed
    kept = len(benchmark.load_benchmark(folder, verbose=False)["train"])
    assert kept == len(lines) - (
        0 if kind in ("offset mismatch", "answer not in context") else 1
    )  # only an offset's record is kept


def test_missing_file_is_named(official_folder):
    folder, _ = official_folder
    (folder / "val_squad.jsonl").unlink()
    with pytest.raises(benchmark.BenchmarkUnavailable, match="val_squad.jsonl"):
        benchmark.load_benchmark(folder)


def test_hub_fails_fast_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(benchmark.BenchmarkUnavailable) as err:
        benchmark.load_benchmark("hub")
    assert "data/benchmark" in str(err.value) and core.HUB_ID in str(err.value)


def test_verify_counts(official_folder):
    folder, recs = official_folder
    assert benchmark.verify_benchmark(
        folder, expected={"train": 3, "validation": 1, "test": len(recs) - 4, "merged": len(recs)}
    )
    with pytest.raises(benchmark.BenchmarkUnavailable, match="expected 3710"):
        benchmark.verify_benchmark(folder)


def test_write_jsonl_is_atomic(tmp_path):
    path = tmp_path / "x.jsonl"
    qa_files.write_jsonl(path, [{"a": 1}])

    def boom():
        yield {"a": 2}
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError):
        qa_files.write_jsonl(path, boom())
    assert list(qa_files.read_jsonl(path)) == [{"a": 1}]
    assert [p.name for p in tmp_path.iterdir()] == ["x.jsonl"]


@pytest.mark.slow
def test_cli_info_and_errors(official_folder):
    folder, _ = official_folder
    out = subprocess.run([str(BIN / "indicipr"), "info", "--data-source", str(folder)], capture_output=True, text=True)
    assert out.returncode == 0 and "train" in out.stdout
    (folder / "test_squad.jsonl").write_text('{"id": 1}\n')
    out = subprocess.run([str(BIN / "indicipr"), "info", "--data-source", str(folder)], capture_output=True, text=True)
    assert (
        out.returncode == 0 and "test_squad.jsonl:1" in out.stderr and "test_squad.jsonl:1" not in out.stdout
    )  # reported, go on
    out = subprocess.run(
        [str(BIN / "indicipr"), "info", "--data-source", str(folder), "--strict"], capture_output=True, text=True
    )
    assert out.returncode == 2 and "test_squad.jsonl:1" in out.stderr and "Traceback" not in out.stderr


# --- nbdev / papermill plumbing -------------------------------------------------------------


def notebook_with_parameters_cell():
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("#| default_exp scratch_mod"),
        nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"], "collapsed": True, "scrolled": True}),
        nbformat.v4.new_code_cell("y = x + 1", execution_count=3, outputs=[nbformat.v4.new_output("stream", text="2")]),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


@pytest.mark.slow
def test_parameters_tag_survives_nbdev_clean(tmp_path):
    import nbformat

    shutil.copy(ROOT / "settings.ini", tmp_path / "settings.ini")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "indicipr").mkdir()
    path = tmp_path / "notebooks" / "scratch.ipynb"
    nbformat.write(notebook_with_parameters_cell(), path)
    subprocess.run([str(BIN / "nbdev_clean"), "--fname", str(path)], cwd=tmp_path, check=True)
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[1].metadata.get("tags") == ["parameters"]
    assert "collapsed" not in nb.cells[1].metadata  # other metadata is still cleaned
    assert nb.cells[2].execution_count is None  # execution counts are cleaned
    # and papermill still finds the cell to inject after
    import papermill as pm

    out = tmp_path / "out.ipynb"
    pm.execute_notebook(
        str(path),
        str(out),
        parameters={"x": 41},
        kernel_name=runner.ensure_kernel(),
        language="python",
        progress_bar=False,
    )
    executed = nbformat.read(out, as_version=4)
    assert "injected-parameters" in executed.cells[2].metadata.get("tags", [])
    assert "x = 41" in executed.cells[2].source


def test_sync_check_fails_when_notebook_edited_without_export(tmp_path):
    "Copy the project into a fresh git repo, edit an exported cell, and run the CI sync check."
    repo, git, check = sync_check_repo(tmp_path)
    nb_path = repo / "notebooks" / "00b_data.core.ipynb"
    nb = json.loads(nb_path.read_text())
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code" and "def seed_everything" in "".join(c["source"]))
    cell["source"] = "".join(cell["source"]).replace("def seed_everything", "def seed_everything_renamed")
    nb_path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    git("commit", "-qam", "edit notebook without export")
    bad = check()
    assert bad.returncode != 0
    assert "indicipr/data/core.py" in bad.stdout + bad.stderr


# --- runner -------------------------------------------------------------------------------


def write_nb(path, *sources, params="data_source = 'sample'\nprofile = 'offline'\nfigures_dir = None"):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(params, metadata={"tags": ["parameters"]})] + [
        nbformat.v4.new_code_cell(s) for s in sources
    ]
    nbformat.write(nb, path)


def test_a_kernel_killed_in_a_cell_is_named_with_that_cell(tmp_path):
    "A kernel that dies (SIGKILL, the out-of-memory killer) leaves no error output: the runner names the cell it died in."
    (tmp_path / "notebooks").mkdir()
    nb = tmp_path / "05_build.stats.ipynb"
    write_nb(nb, "x = 1", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "never = True")
    result = runner._run_one(nb, tmp_path, {}, "python3")
    assert result.status == "failed" and "before any cell ran" not in result.error, result.error
    assert result.error.startswith(
        "notebook 05_build.stats.ipynb failed at cell 3 of 4 (`import os, signal`): the kernel died while the cell ran"
    ), result.error


@pytest.mark.slow
def test_runner_reports_missing_and_stops_at_failure(tmp_path, capfd):
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    figs = tmp_path / "figs"
    write_nb(
        nbs / "00h_data.benchmark_tables.ipynb",
        "import pandas as pd\nfrom indicipr.data.config import run_context\n"
        "ctx = run_context(data_source, profile, figures_dir)\n"
        "ctx.save_table(pd.DataFrame({'profile': [profile]}), 'runner_demo')\n"
        "print('chatter that belongs to the executed copy')\n"
        "ctx.record_timings('00h_data.benchmark_tables', demo=1.25)",
        "from ipykernel.kernelapp import IPKernelApp\nIPKernelApp.instance().log.warning('kernel plumbing note')",
    )
    write_nb(nbs / "02_build.generate.ipynb", "a = 1", "raise ValueError('boom in cell two')", "never = True")
    write_nb(nbs / "03_build.filters.ipynb", "x = 1")
    lines = []
    with pytest.raises(runner.PipelineError) as err:
        runner.run_pipeline(
            {"profile": "paper", "figures_dir": str(figs)},
            run_dir=tmp_path / "run",
            notebooks=["00h_data.benchmark_tables", "01_build.corpus", "02_build.generate", "03_build.filters"],
            nbs_dir=nbs,
            echo=lines.append,
        )
    msg = str(err.value)
    assert "02_build.generate.ipynb" in msg and "cell 3 of 4" in msg and "boom in cell two" in msg
    text = "\n".join(lines)
    assert "[2/4] 01_build.corpus: MISSING" in text and "[1/4] 00h_data.benchmark_tables: ok" in text
    assert "03_build.filters" not in text.split("FAILED")[1].split("report:")[0] or "not run" in text
    assert (figs / "tables" / "runner_demo.csv").read_text().strip().endswith("paper")
    index = (tmp_path / "run" / "report" / "index.html").read_text()
    assert "runner_demo" in index and "missing" in index and "failed" in index
    run = json.loads((tmp_path / "run" / "report" / "run.json").read_text())
    assert [r["status"] for r in run["results"]] == ["ok", "missing", "failed", "not run"]
    # the duration recorded inside the notebook reached the run (and only the run), attributed to its notebook
    assert run["timings"] == [
        {"notebook": "00h_data.benchmark_tables", "stage": "00h_data.benchmark_tables", "name": "demo", "seconds": 1.25}
    ]
    assert "INDICIPR_RUN_DIR" not in os.environ
    # quiet: nothing but the runner's own lines reached the terminal (no kernel transport/debugger warnings)
    out, err_text = capfd.readouterr()
    assert out == "" and err_text == "", (out, err_text)
    assert (
        "kernel plumbing note" in (tmp_path / "run" / "notebooks" / "00h_data.benchmark_tables.kernel.log").read_text()
    )  # kept, in the run
    assert not (tmp_path / "run" / "notebooks" / "02_build.generate.kernel.log").exists()  # quiet: removed


@pytest.mark.slow  # two kernels
def test_a_stage_that_skipped_every_input_is_reported_and_fails_the_run(tmp_path, monkeypatch, capsys):
    "Notebook 10 given only another split's predictions printed its reason in the executed copy, and the run said '1 ok'."
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    write_nb(
        nbs / "10_analysis.significance.ipynb",
        "from indicipr.data.config import run_context\n"
        "run_context().record_skipped('10_analysis.significance', 'none of the 2 prediction files answers the test split')",
    )
    write_nb(nbs / "11_analysis.error_analysis.ipynb", "x = 1")
    lines = []
    with pytest.raises(runner.StagesSkipped) as err:
        runner.run_pipeline(
            {"figures_dir": str(tmp_path / "figs")},
            run_dir=tmp_path / "run",
            notebooks=["10_analysis.significance", "11_analysis.error_analysis"],
            nbs_dir=nbs,
            echo=lines.append,
        )
    assert "notebook 10_analysis.significance skipped every input it was given: none of the 2 prediction files" in str(
        err.value
    )
    text = "\n".join(lines)
    assert (
        "[1/2] 10_analysis.significance: SKIPPED every input" in text and "[2/2] 11_analysis.error_analysis: ok" in text
    )  # the rest still ran
    assert "1 ok, 0 missing, 1 skipped every input (10_analysis.significance)" in text
    run = json.loads((tmp_path / "run" / "report" / "run.json").read_text())
    assert [r["status"] for r in run["results"]] == ["skipped", "ok"]

    def skipping(*a, **k):
        raise runner.StagesSkipped(
            "notebook 10_analysis.significance skipped every input it was given: no prediction files"
        )

    from indicipr.run import cli

    monkeypatch.setattr(cli, "run_pipeline", skipping)
    assert cli.main(["reproduce", "--only", "10_analysis.significance", "--run-dir", str(tmp_path / "run2")]) == 1
    assert "indicipr reproduce: notebook 10_analysis.significance skipped every input" in capsys.readouterr().err


def test_reproduce_unknown_only_exits_2_before_running(tmp_path):
    run_dir = tmp_path / "run"
    out = subprocess.run(
        [str(BIN / "indicipr"), "reproduce", "--only", "00h_data.benchmark_tables,99_nope", "--run-dir", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2, out.stdout + out.stderr
    assert "99_nope" in out.stderr and "Valid names: " + ", ".join(runner.NOTEBOOKS) in out.stderr
    assert "[1/" not in out.stdout and not run_dir.exists()  # nothing ran, nothing was written


def test_unknown_parameter_is_refused_before_running(tmp_path):
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    write_nb(nbs / "00h_data.benchmark_tables.ipynb", "raise SystemExit('must not run')")
    with pytest.raises(runner.RunnerUsageError, match="sedes"):
        runner.run_pipeline(
            {"sedes": [0]}, run_dir=tmp_path / "run", notebooks=["00h_data.benchmark_tables"], nbs_dir=nbs, echo=print
        )
    assert not (tmp_path / "run").exists()


def test_table_and_figure_writers_are_byte_identical_on_rewrite(tmp_path):
    "A rerun that computes the same numbers must leave git status clean: same table, same figure, same bytes."
    import time

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    frame = pd.DataFrame({"Act": ["Designs", "Patents"], "F1": [100.0, 98.4], "EM": ["63.66 ± 0.10", "65.12"]})

    def write(figs):
        artifacts.save_table(frame, "per_act_demo", figs, caption="Per-Act F1")
        fig, ax = plt.subplots(figsize=(4, 3))
        ax.bar(["Designs", "Patents"], [100.0, 98.4])
        ax.set_title("Per-Act F1")
        artifacts.save_figure(fig, "per_act_demo", figs)
        plt.close(fig)
        return {p.relative_to(figs): p.read_bytes() for p in sorted(figs.rglob("*")) if p.is_file()}

    first = write(tmp_path / "a")
    time.sleep(1.2)  # PDF dates have one-second resolution
    second = write(tmp_path / "a")
    assert sorted(map(str, first)) == [
        "per_act_demo.pdf",
        "per_act_demo.png",
        "tables/per_act_demo.csv",
        "tables/per_act_demo.md",
        "tables/per_act_demo.tex",
    ]
    assert [k for k in first if first[k] != second[k]] == []
    assert b"/CreationDate" not in first[Path("per_act_demo.pdf")]
    with pytest.raises(ValueError, match="record_timings"):
        artifacts.save_table(frame.assign(train_s=[1.0, 2.0]), "timed", tmp_path / "a")


def headless(exe, profile_dir, *args, timeout=120):
    return subprocess.run(
        [exe, *CHROMIUM_ARGS, "--disable-quic", "--no-first-run", f"--user-data-dir={profile_dir}", *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def paper_shaped_tables(figs):
    "A small run's tables and figures under the names the stages write, plus one table the report spec does not name."
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    acts = ["Designs", "Patents", "Copyright"]

    def t(name, **cols):
        return artifacts.save_table(pd.DataFrame(cols), name, figs, caption=f"{name} caption")

    t("dataset_at_a_glance", Property=["Total QA pairs", "Test samples"], Value=[191, 36])
    t("per_act_distribution", Act=acts, **{"Full dataset": [28, 32, 28], "Test set": [4, 8, 4]})
    t("split_sizes_replay", Split=["train", "test"], **{"QA pairs": [128, 36]})
    t("question_patterns", Pattern=["Questions"], Count=[191])
    t(
        "results",
        System=["bm25_retrieval", "minilm-l6", "smollm2_3-shot"],
        Family=["lexical", "encoder", "llm"],
        Setting=["clause retrieval", "fine-tuned", "3-shot"],
        EM=["0.00", "0.00 ± 0.00", "11.11"],
        F1=["26.65", "17.28 ± 0.57", "34.82"],
        **{"Char-F1": ["37.87", "55.78 ± 1.90", "63.55"]},
    )
    t("llm_results", system=["smollm2_3-shot"], f1=[34.82])
    t("encoder_results", model=["MiniLM-L6"], F1=["17.28 ± 0.57"])
    t("bm25_results", system=["bm25_retrieval"], F1=[26.65])
    t("significance", **{"System A": ["a"], "System B": ["b"], "p": [0.5]})
    t("per_act_focus", Act=acts, F1=[100.0, 98.4, 79.41])
    t("error_taxonomy_focus", **{"Error type": ["Span-boundary errors"], "Count": [5]})
    t("answer_structure_focus", Group=["Short answers"], F1=[30.5])
    t("answer_structure", System=[f"s{i}" for i in range(40)], F1=[float(i) for i in range(40)])
    t("judge_status", judge=["smollm2"], ok=[6])
    t("zz_not_in_the_spec", x=[1])
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.barh(acts, [100.0, 98.4, 79.41], color="#1f77b4")
    artifacts.save_figure(fig, "per_act_focus", figs)
    plt.close(fig)


@pytest.mark.slow
def test_report_first_screen_in_headless_chromium(tmp_path):
    """The report as a reader meets it in headless Chromium (1280×800): the headline results and the whole table of
    contents on the first screen, the sections in the card's order, each figure beside its table."""
    exe = chromium_or_skip()
    figs = tmp_path / "figs"
    paper_shaped_tables(figs)
    index = report.write_report(
        tmp_path / "run",
        [report.StageResult(n, "ok", 1.0) for n in runner.NOTEBOOKS],
        {"data_source": "sample", "profile": "offline", "figures_dir": str(figs)},
        13.0,
    )
    probe = index.with_name("probe.html")  # the page plus a script that reports the layout into the DOM
    probe.write_text(
        index.read_text().replace(
            "</body>",
            """<script>
window.addEventListener('load', () => {      // after the images loaded
  const box = s => { const b = document.querySelector(s).getBoundingClientRect(); return {top: b.top, bottom: b.bottom}; };
  const img = document.querySelector('#f-per_act_focus img');
  document.body.setAttribute('data-layout', JSON.stringify({height: innerHeight, width: innerWidth,
    headline: box('#headline'), toc: box('#toc'), first_section: box('section.card-section'),
    figure_loaded: img.complete && img.naturalWidth > 0,
    figure_beside_table: box('#f-per_act_focus').top < box('#t-per_act_focus table').bottom}));
});
</script></body>""",
        )
    )
    dom = headless(
        exe, tmp_path / "profile", "--window-size=1280,800", "--virtual-time-budget=3000", "--dump-dom", probe.as_uri()
    ).stdout
    import html as html_mod
    import re

    layout = json.loads(html_mod.unescape(re.search(r'data-layout="([^"]*)"', dom).group(1)))
    sections = re.findall(r'<section class="card-section" id="([a-z]+)"', dom)
    entries = re.findall(r'<section class="entry" id="t-([^"]+)"', dom)
    headline = dom.split('id="headline"', 1)[1].split('<nav id="toc"', 1)[0]
    toc = dom.split('id="toc"', 1)[1].split("</nav>", 1)[0]
    # the card's order: the benchmark, construction, the data, results (BM25 → encoders → LLMs → significance →
    # per-Act → errors → answer structure), quality; what the spec does not name comes after them
    assert sections == ["benchmark", "construction", "data", "results", "quality"], sections
    assert entries == [
        "dataset_at_a_glance",
        "per_act_distribution",
        "split_sizes_replay",
        "question_patterns",
        "results",
        "bm25_results",
        "encoder_results",
        "llm_results",
        "significance",
        "per_act_focus",
        "error_taxonomy_focus",
        "answer_structure_focus",
        "answer_structure",
        "judge_status",
        "zz_not_in_the_spec",
    ], entries
    assert re.findall(r'<b><a href="#([a-z]+)"', toc)[:5] == sections  # the contents in the same order
    assert "smollm2_3-shot" in headline and "34.82" in headline and "63.55" in headline  # best system by F1
    assert "<b>sample</b> (embedded sample) · profile <b>offline</b>" in headline
    # the first screen: headline, then the whole table of contents, and the first section starts below them
    assert 0 <= layout["headline"]["top"] < layout["toc"]["top"] and layout["toc"]["bottom"] <= layout["height"], layout
    assert layout["first_section"]["top"] >= layout["toc"]["bottom"], layout
    assert layout["figure_loaded"] and layout["figure_beside_table"], layout
    assert "<details><summary>40 rows" in dom  # long per-system table folded
    # and the pixels agree: the headline's blue panel fills the top of the screenshot
    shot = tmp_path / "shot.png"
    headless(exe, tmp_path / "profile", "--window-size=1280,800", f"--screenshot={shot}", index.as_uri())
    from PIL import Image

    img = Image.open(shot).convert("RGB")
    top = img.crop((0, int(layout["headline"]["top"]), img.width, int(layout["headline"]["bottom"])))
    panel = sum(n for n, (r, g, b) in top.getcolors(1 << 20) if (r, g, b) == (0xE8, 0xF0, 0xFB))
    assert panel > 0.5 * top.width * top.height * 0.6, "the headline panel is not on the first screen"


def test_readme_has_the_two_commands_and_notices():
    text = (ROOT / "README.md").read_text()
    block = text.split("## Two commands", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make reproduce", "make test"]
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    for needle in ["Research use notice", "## Disclaimer", "@inproceedings{islam2026indiciprqa"]:
        assert needle in text


def test_fetch_offline_fails_fast_with_instructions(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [str(BIN / "indicipr"), "fetch", "--dest", str(tmp_path / "b")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 2
    assert "data/benchmark" in out.stderr and "indicipr fetch" in out.stderr
    assert not (tmp_path / "b").exists()


def _card_leaves(value, path=()):
    "Every (path, number) of a nested CARD value (bools and None are not numbers of the card)."
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _card_leaves(v, (*path, k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _card_leaves(v, (*path, i))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield path, value


def _as_written(number) -> set[str]:
    "The ways the card writes a number: 1,173 / 1173, 0.00 / 77.10, -0.008, 99.0%."
    if isinstance(number, int):
        return {f"{number:,}", str(number)}
    return {f"{number:.2f}", f"{number:.1f}", f"{number:.3f}", repr(number)}


def test_every_number_of_core_card_is_written_in_the_dataset_card():
    "core.CARD holds the card's numbers: each one occurs in the card's text (a typo or an invented figure fails)."
    shared = core.shared_dir()
    card_txt = shared / "seed" / "IndicIPR-QA-dataset-card.txt" if shared else None
    if card_txt is None or not card_txt.exists():
        pytest.skip("the dataset card (../shared/seed) is not beside this checkout")
    text = card_txt.read_text(encoding="utf-8")
    missing = [
        (".".join(map(str, p)), n)
        for p, n in _card_leaves(core.CARD)
        if p[0] != "errors" and not any(w in text for w in _as_written(n))
    ]
    assert not missing, f"numbers of core.CARD not in the dataset card: {missing}"
    # the error counts are small integers: check them against their own table rows
    for (label, _, share), n in zip(report.CARD_TABLES["errors"][1], core.CARD["errors"].values()):
        assert f"{label}\t{n}\t{share}%" in text, (label, n, share)


def test_modules_read_the_card_from_core_and_the_report_is_built_from_it(monkeypatch):
    "One source: stage modules hold no card number of their own, and CARD_TABLES is formatting of core.CARD only."
    from indicipr.systems import bm25
    from indicipr.data import config
    from indicipr.analysis import significance
    from indicipr.build import split, stats

    for mod in (bm25, error_analysis, error_taxonomy, significance, split, stats):
        assert mod.CARD is core.CARD, mod.__name__
    assert stats.CARD_OPENINGS == tuple(core.CARD["question_patterns"]["openings"])
    assert dict(split.CARD_CONSTRUCTION)["Raw QA candidates"] == core.CARD["construction"]["raw_candidates"]
    assert core.OFFICIAL_COUNTS == {**core.CARD["splits"], "merged": core.CARD["construction"]["final_qa_pairs"]}
    assert config.SIGNIFICANCE["paper"].n_resamples == core.CARD["significance"]["n_resamples"]
    # change a number in CARD: the rebuilt report tables follow it
    changed = {**core.CARD, "bm25": {**core.CARD["bm25"], "bm25_retrieval": {"EM": 1.0, "F1": 2.5, "Char-F1": 3.0}}}
    monkeypatch.setattr(report, "CARD", changed)
    assert report.build_card_tables()["bm25"][1][0] == ("BM25 Retrieval", "1.00", "2.50", "3.00")
    assert report.CARD_TABLES["bm25"][1][0] == (
        "BM25 Retrieval",
        "0.00",
        "20.21",
        "77.10",
    )  # the module's view is untouched


def test_report_sections_name_current_tables_once():
    "No stale or duplicated report entries; every card key resolves; the new tables have their place."
    items = [it for sec in report.REPORT_SECTIONS for it in sec.items]
    names = [it.table for it in items]
    assert len(names) == len(set(names)) and not [n for n in names if n.endswith("_best")]
    assert all(report.card_table(it.card) is not None for it in items if it.card)
    where = {it.table: sec.id for sec in report.REPORT_SECTIONS for it in sec.items}
    construction = [it.table for sec in report.REPORT_SECTIONS if sec.id == "construction" for it in sec.items]
    assert construction[0] == "construction_counts_*" and "generation_qa_per_act_*" in construction
    assert where["encoder_settings"] == "results" and names.index("encoder_settings") == names.index("encoder_runs") + 1


def test_no_parameter_shadows_a_name_its_notebook_defines():
    "papermill assigns the parameters in the notebook's namespace: a parameter named like one of the notebook's functions would replace it."
    import ast
    import re

    for nb in (
        ROOT / "notebooks" / f"{name}.ipynb" for name in runner.NOTEBOOKS
    ):  # the stage notebooks, 09a_systems.grounded too
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        module = next(
            re.search(r"#\| default_exp ([\w.]+)", "".join(c["source"])).group(1)
            for c in cells
            if "#| default_exp" in "".join(c["source"])
        )
        tree = ast.parse((ROOT / "indicipr" / f"{module.replace('.', '/')}.py").read_text(encoding="utf-8"))
        defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
        params = set(stages.notebook_parameters(nb))
        assert not params & defined, (
            f"{nb.name}: parameter(s) {sorted(params & defined)} shadow the notebook's own definitions"
        )


def test_committed_per_act_tables_follow_the_cards_act_order():
    "One Act order: every committed table with an Act column lists the Acts in the card's per-Act order (Unknown, Total last), within each group of the columns left of Act."
    import csv

    order = [core.act_label(k) for k in core.act_keys_in_card_order()]
    checked = 0
    for path in sorted((ROOT / "figures" / "tables").glob("*.csv")):
        rows = list(csv.DictReader(path.open(encoding="utf-8")))
        if (
            not rows or "Act" not in rows[0] or path.stem.startswith("per_act_focus")
        ):  # per_act_focus: sorted by F1, best first
            continue
        # a long table (model × setting × Act) lists the Acts in order within each group of the columns left of Act
        keys = list(rows[0])[: list(rows[0]).index("Act")]
        groups: dict = {}
        for r in rows:
            if r["Act"] in order:
                groups.setdefault(tuple(r[k] for k in keys), []).append(r["Act"])
        for group, acts in groups.items():
            assert acts == sorted(acts, key=order.index), f"{path.name} {group}: {acts}"
        checked += 1
    assert checked >= 4
