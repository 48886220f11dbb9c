"""Property-based tests of what users feed the project: random bytes and records to the JSON/JSONL, QA and predictions
readers, random option values to the command line. The property: a reader returns or raises an `InputError` (one
sentence); a command exits 0 or 2 with a message and no traceback, and changes no file but its output."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from unittest import mock

from helpers import QA_SMALL
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indicipr.data import basics, core, qa_files
from indicipr.run import cli, stages
from indicipr.scoring import predictions

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GOLD_RECORDS = qa_files.load_qa_file(QA_SMALL / "test_squad.jsonl", strict=True).records
IDS = [r["id"] for r in GOLD_RECORDS]

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), st.text(max_size=30)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=12,
)
field_values = st.one_of(
    json_values, st.sampled_from(IDS), st.just({"text": ["the patent office"], "answer_start": [0]})
)
qa_like = st.fixed_dictionaries(
    {},
    optional={
        k: field_values
        for k in ("id", "title", "context", "question", "answers", "prediction_text", "answer", "answer_start")
    },
)
deep_json = st.one_of(  # nested deeper than the parser recurses: a RecursionError unless read as bad JSON
    st.integers(1_000, 60_000).map(lambda n: ("[" * n + "]" * n).encode()),
    st.integers(1_000, 60_000).map(lambda n: ('{"id": "x", "answers": ' + "[" * n + "]" * n + "}\n").encode()),
    st.integers(1_000, 60_000).map(lambda n: ('{"a": ' * n + "1" + "}" * n).encode()),
)
file_bytes = st.one_of(
    st.binary(max_size=400),
    deep_json,
    st.lists(qa_like, max_size=5).map(lambda rs: "".join(json.dumps(r) + "\n" for r in rs).encode()),
    st.lists(qa_like, max_size=5).map(lambda rs: json.dumps(rs).encode()),
    st.dictionaries(st.sampled_from(IDS + ["x", ""]), json_scalars, max_size=5).map(lambda d: json.dumps(d).encode()),
    st.builds(
        lambda b, crlf: (
            ("\ufeff" if b else "")
            + json.dumps({"data": [{"title": "t", "paragraphs": []}]})
            + ("\r\n" if crlf else "")
        ).encode(),
        st.booleans(),
        st.booleans(),
    ),
)


def _read_with(reader, data: bytes, suffix: str):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"f{suffix}"
        path.write_bytes(data)
        try:
            return reader(path)
        except core.InputError as e:
            assert str(e).strip()
            return e


@FUZZ
@given(data=file_bytes, suffix=st.sampled_from([".jsonl", ".json", ".txt"]))
def test_readers_return_or_name_the_problem(data, suffix):
    _read_with(lambda p: list(qa_files.read_jsonl(p)), data, suffix)
    got = _read_with(qa_files.load_qa_file, data, suffix)
    if isinstance(got, qa_files.QAFile):
        assert all(qa_files.check_qa_record(r)[0] is not None for r in got.records)
    got = _read_with(predictions.read_predictions, data, suffix)
    if isinstance(got, dict):
        assert got and all(isinstance(k, str) and isinstance(v, str) for k, v in got.items())


def _main(argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = cli.main([str(a) for a in argv])
        except SystemExit as e:
            rc = e.code  # argparse's own refusals: exit 2 with its usage line
    return rc, out.getvalue(), err.getvalue()


def _snapshot(folder: Path) -> dict:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


valid_preds = st.one_of(
    st.dictionaries(st.sampled_from(IDS), st.text(max_size=40), min_size=1, max_size=12).map(
        lambda d: json.dumps(d).encode()
    ),
    st.lists(
        st.tuples(st.sampled_from(IDS), st.sampled_from(["the patent office", "", "x" * 3000, "(1) For"])),
        min_size=1,
        max_size=8,
        unique_by=lambda t: t[0],
    ).map(lambda rs: "".join(json.dumps({"id": i, "prediction_text": t}) + "\n" for i, t in rs).encode()),
)
option_ints = st.one_of(st.integers(-5, 300), st.integers(-(2**40), 2**40), st.sampled_from([0, 1, 10**8, 2**32]))


@FUZZ
@given(
    pred=st.one_of(valid_preds, file_bytes),
    resamples=st.one_of(st.integers(1, 40), option_ints),
    seed=st.one_of(st.integers(0, 9), option_ints),
    variant=st.sampled_from(["multiset", "lcs", "bogus"]),
    out=st.sampled_from(
        ["report.md", "pred.jsonl", "gold.jsonl", "sub/report.md", "pred.jsonl/x.md", ".", "link.md", None]
    ),
    against=st.sampled_from([[], ["pred.jsonl"], ["other.jsonl"]]),
    gold=st.sampled_from(["gold.jsonl", "test", "nope", "."]),
)
def test_evaluate_exits_0_or_2_and_changes_only_its_output(pred, resamples, seed, variant, out, against, gold):
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        shutil.copy(QA_SMALL / "test_squad.jsonl", d / "gold.jsonl")
        (d / "pred.jsonl").write_bytes(pred)
        (d / "other.jsonl").write_text(
            "".join(json.dumps({"id": r["id"], "prediction_text": r["question"]}) + "\n" for r in GOLD_RECORDS)
        )
        (d / "link.md").symlink_to(d / "pred.jsonl")
        before = _snapshot(d)
        argv = [
            "evaluate",
            "--gold",
            d / gold if gold in ("gold.jsonl", ".") else gold,
            "--data-source",
            QA_SMALL,
            "--pred",
            d / "pred.jsonl",
            "--resamples",
            resamples if resamples <= 300 else resamples,
            "--seed",
            seed,
            "--char-f1",
            variant,
        ]
        if against:
            argv += ["--against", *[d / a for a in against]]
        if out is not None:
            argv += ["--out", d / out]
        if 300 < resamples <= 10**6:
            return  # valid but slow: not what this property is about
        rc, stdout, stderr = _main(argv)
        assert rc in (0, 2), (rc, stderr)
        assert "Traceback" not in stderr
        if rc == 2:
            assert stderr.strip()
        after = _snapshot(d)
        changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
        allowed = {(d / out).resolve()} if rc == 0 and out is not None else set()
        assert {p.resolve() for p in changed} <= allowed, (changed, rc, stderr)


@FUZZ
@given(
    n=option_ints,
    seed=option_ints,
    annotators=st.lists(st.text(min_size=0, max_size=5), min_size=1, max_size=3),
    out=st.sampled_from(["kit", "gold.jsonl", "gold.jsonl/kit"]),
)
def test_audit_export_exits_0_or_2_and_changes_only_its_output(n, seed, annotators, out):
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        shutil.copy(QA_SMALL / "test_squad.jsonl", d / "gold.jsonl")
        before = _snapshot(d)
        rc, _, stderr = _main(
            [
                "audit",
                "export",
                "--data-source",
                QA_SMALL,
                "-n",
                n,
                "--seed",
                seed,
                "--out",
                d / out,
                "--annotators",
                *annotators,
            ]
        )
        assert rc in (0, 2) and "Traceback" not in stderr, (rc, stderr)
        if rc == 2:
            assert stderr.strip()
        assert _snapshot(d).items() >= {k: v for k, v in before.items()}.items()  # nothing there before was changed


@FUZZ
@given(
    name=st.sampled_from(["seed", "n_resamples", "strict", "figures_dir", "split", "no_such"]),
    value=st.one_of(st.text(max_size=8), json_values.map(json.dumps)),
)
def test_reproduce_parameters_are_checked_before_anything_runs(name, value):
    with tempfile.TemporaryDirectory() as d:
        run = Path(d) / "run"
        only = {
            "seed": "11_analysis.error_analysis",
            "n_resamples": "11_analysis.error_analysis",
            "strict": "00h_data.benchmark_tables",
            "split": "11_analysis.error_analysis",
        }.get(name, "06_scoring.metrics")
        parsed = cli.parse_parameter_value(value)
        types = {
            **stages.notebook_parameter_types(core.project_root() / "notebooks" / f"{only}.ipynb"),
            **stages.COMMON_PARAMETER_TYPES,
        }
        if name in types and stages.types_admit(types[name], parsed):
            return  # a valid value would start the notebook: not here
        rc, _, stderr = _main(["reproduce", "--only", only, "-p", name, value, "--run-dir", run])
        assert rc == 2 and stderr.strip() and "Traceback" not in stderr, (rc, stderr)
        assert not run.exists()


numbers = st.one_of(
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1, 2**32, float("nan")]),
)
cell_text = st.text(alphabet="ab ,.;()\u00e9", max_size=25)
csv_rows = st.lists(
    st.tuples(st.sampled_from(IDS), cell_text, st.booleans()), min_size=1, max_size=6, unique_by=lambda t: t[0]
)


@FUZZ
@given(
    seeds=st.lists(st.integers(-5, 2**33), min_size=1, max_size=3),
    epochs=numbers,
    max_steps=st.one_of(st.none(), st.integers(-5, 10**6)),
    workers=st.one_of(st.none(), st.sampled_from(["auto", "abc", "0", "-2", "3", "1.5", ""])),
)
def test_train_options_are_in_range_or_a_sentence(seeds, epochs, max_steps, workers):
    "`indicipr train`'s numbers (notebook 08's parameters) come back in range or are refused, before any training."
    argv = ["train", "--seeds", *map(str, seeds), f"--epochs={epochs}"]  # `=`: argparse reads -inf as an option
    argv += ["--max-steps", str(max_steps)] if max_steps is not None else []
    argv += ["--workers", workers] if workers is not None else []
    try:
        values = cli.train_options(cli.build_parser().parse_args(argv))
    except core.InputError as e:
        assert str(e).startswith(("--seeds", "--epochs", "--max-steps", "--workers")), str(e)
        return
    assert all(0 <= s < 2**32 for s in values["seeds"]) and values["epochs"] > 0
    assert values["max_steps"] is None or values["max_steps"] >= 1
    assert values["workers"] in (None, "auto") or values["workers"] >= 1


@FUZZ
@given(name=st.sampled_from(sorted(basics.PARAMETER_RANGES)), value=st.one_of(json_values, numbers))
def test_a_parameter_is_in_range_or_named_in_one_sentence(name, value):
    problem = basics.parameter_problem(name, value)
    assert problem is None or (problem.startswith(f"parameter {name} must be ") and "\n" not in problem)


@FUZZ
@given(
    lead=st.sampled_from(["", "x-", "hf_", "X-Amz-", "client_", "my.", "access_"]),
    word=st.sampled_from(["key", "token", "Secret", "auth", "password", "pwd", "sig", "Signature", "credential"]),
    tail=st.sampled_from(["", "_id", "-v2", "s"]),
    value=st.from_regex(r"[A-Za-z0-9_\-]{8,24}", fullmatch=True),
)
def test_a_query_value_under_a_credential_name_never_shows(lead, word, tail, value):
    url = f"https://host/v1?model=gpt&{lead}{word}{tail}={value}#f"
    assert value not in basics.mask_secrets(url) and "model=***" in basics.mask_secrets(url)
    assert value not in basics.mask_secrets(f"https://host/v1?region={value}")


url_value = st.text(
    st.characters(blacklist_categories=["Cs", "Zs", "Zl", "Zp", "Cc"], blacklist_characters="&;#\"'<>`\\"), min_size=4
)


@FUZZ
@given(
    host=st.sampled_from(["https://host/v1", "http://u@127.0.0.1:9/v1/", "gpu1:8000/v1", "example.org/cb"]),
    query=st.sampled_from(["", "?", "?a=1", "?api-version=2024&"]),
    name=st.sampled_from(["", "token=", "access_token=", "state=1&k=", "x=y&", "=", "code="]),
    value=url_value,
)
def test_a_fragment_never_shows(host, query, name, value):
    "Whatever a fragment holds (a key under any name, or none) is masked, in text around it too, and named by `secret_parts`."
    url = f"{host}{query}#{name}{value}"
    for text in (url, f"GET {url} failed", f"['{url}']", json.dumps({"u": url})):
        assert value not in basics.mask_secrets(text), (text, basics.mask_secrets(text))
    assert any(value in part for part in basics.secret_parts(url))


@FUZZ
@given(
    host=st.sampled_from(["https://host/v1", "http://u:p@127.0.0.1:9/v1", "localhost/x", "ftp://files.example/a"]),
    before=st.sampled_from(["", "a=1&", "k&", "=&", "model=gpt;"]),
    name=st.sampled_from(["", "=", "k=", "code=", "sv=", "sig=", "é="]),
    after=st.sampled_from(["", "&z=2", "#f", ";t"]),
    value=url_value.filter(lambda v: "=" not in v and "?" not in v),
)
def test_a_query_value_under_any_name_or_none_never_shows(host, before, name, value, after):
    "A query value is masked whatever its name, an unnamed one (`?KEY`, `?=KEY`) as a whole, in every message."
    url = f"{host}?{before}{name}{value}{after}"
    for text in (url, f"cannot reach {url}: refused", f"'{url}'"):
        assert value not in basics.mask_secrets(text), (text, basics.mask_secrets(text))
    assert value in basics.secret_parts(url)


@FUZZ
@given(name=st.text(min_size=1))
def test_what_is_printed_of_a_name_holds_no_control_character(name):
    "Any name (a file name read with surrogateescape included) is printed without C0 or C1 characters but tab and newline."
    shown = basics.terminal_text(f"{name}: no such file")
    assert not any(ord(ch) < 32 and ch not in "\t\n" or 0x7F <= ord(ch) <= 0x9F for ch in shown), repr(shown)
    shown.encode("utf-8")  # printable on a UTF-8 terminal


@FUZZ
@given(rows=csv_rows, tsv=st.booleans())
def test_csv_answers_are_read_whole_or_the_row_is_named(rows, tsv):
    "A ragged row (an answer holding the delimiter, unquoted) is refused naming file and line, never read cut short."
    sep = "\t" if tsv else ","
    lines = [sep.join(["id", "prediction_text"])]
    for qid, text, quoted in rows:
        lines.append(f"{qid}{sep}" + ('"' + text.replace('"', '""') + '"' if quoted else text))
    got = _read_with(predictions.read_predictions, ("\n".join(lines) + "\n").encode(), ".tsv" if tsv else ".csv")
    if isinstance(got, dict):
        assert got == {qid: text for qid, text, _ in rows}  # every answer whole
    else:
        line = next(i for i, (_, text, quoted) in enumerate(rows, 2) if not quoted and sep in text)
        assert f"f.{'tsv' if tsv else 'csv'}:{line}: " in str(got) and "must be quoted" in str(got), got


@FUZZ
@given(
    data=st.one_of(
        valid_preds,
        file_bytes,
        csv_rows.map(lambda rs: "".join(f"{q},{t}\n" for q, t, _ in rs).encode()).map(lambda b: b"id,prediction\n" + b),
    )
)
def test_a_pipe_reads_as_the_same_file_does(data):
    "`--pred <(cat f)` and `/dev/stdin` can be read once: what a regular file gives, a pipe of its bytes gives."
    as_file = _read_with(predictions.read_predictions, data, ".txt")
    import threading

    r, w = os.pipe()

    def feed():  # from a thread: an input larger than the pipe's buffer (deeply nested JSON) would block a plain write
        with os.fdopen(w, "wb") as f:
            f.write(data)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        as_pipe = predictions.read_predictions(f"/dev/fd/{r}")
    except core.InputError as e:
        as_pipe = e
    finally:
        writer.join(timeout=30)
        os.close(r)
    if isinstance(as_file, dict):
        assert as_pipe == as_file
    else:
        assert isinstance(as_pipe, core.InputError) and type(as_pipe) is type(as_file), (as_pipe, as_file)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(max_size=300_000), kind=st.sampled_from(["fifo", "null"]))
def test_an_output_that_is_no_regular_file_is_written_into_never_replaced(text, kind):
    "Whatever the writers write (small or beyond a pipe's buffer), a FIFO gets it whole and stays a FIFO; `/dev/null` stays a device."
    import stat
    import threading

    if kind == "null":
        basics.write_text_atomic("/dev/null", text)
        assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
        return
    folder = Path(tempfile.mkdtemp())
    fifo = folder / "out"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    try:
        basics.write_text_atomic(fifo, text)
        reader.join(timeout=30)
        assert got == [text.encode("utf-8")] and stat.S_ISFIFO(os.stat(fifo).st_mode)
        assert sorted(p.name for p in folder.iterdir()) == ["out"]  # no temporary file left beside it
    finally:
        shutil.rmtree(folder)


_LINKED_RUN_PARTS = ["notebooks", "figures", "figures/tables", "predictions", "report", "timings.jsonl"]
_LINKED_RUN_PARTS += ["notebooks/06_scoring.metrics.ipynb", "notebooks/06_scoring.metrics.kernel.log"]
_COMMITTED_TARGETS = ["notebooks", "figures", "figures/tables", "data/sample", "settings.ini", "."]
_COMMITTED_TARGETS += ["notebooks/06_scoring.metrics.ipynb", "figures/tables/results.csv"]


def _git_checkout_copy() -> Path:
    "A git checkout of a few committed files (a notebook, a table, the sample's test split): where a run may not write."
    root = Path(tempfile.mkdtemp()) / "checkout"
    for rel in ("settings.ini", "notebooks/06_scoring.metrics.ipynb", "data/sample/test_squad.jsonl"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(core.project_root() / rel, root / rel)
    (root / "figures" / "tables").mkdir(parents=True)
    (root / "figures" / "tables" / "results.csv").write_text("System,F1\nbm25,26.65\n")
    who = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env={**os.environ, **who})
    return root


LONG_NAME_ARGS = {  # where a user's path goes in: `{L}` is a name longer than a file system holds
    "evaluate --pred": ["evaluate", "--gold", "{d}/gold.jsonl", "--pred", "{d}/{L}"],
    "evaluate --gold": ["evaluate", "--gold", "{d}/{L}", "--pred", "{d}/pred.jsonl"],
    "evaluate --against": ["evaluate", "--gold", "{d}/gold.jsonl", "--pred", "{d}/pred.jsonl", "--against", "{d}/{L}"],
    "evaluate --out": ["evaluate", "--gold", "{d}/gold.jsonl", "--pred", "{d}/pred.jsonl", "--out", "{d}/{L}"],
    "info --data-source": ["info", "--data-source", "{d}/{L}"],
    "audit export --out": ["audit", "export", "--out", "{d}/{L}"],
    "audit score": ["audit", "score", "{d}/{L}", "{d}/gold.jsonl"],
    "fetch --dest": ["fetch", "--dest", "{d}/{L}"],
    "reproduce --run-dir": ["reproduce", "--only", "06_scoring.metrics", "--run-dir", "{d}/{L}"],
    "reproduce --figures-dir": ["reproduce", "--only", "06", "--figures-dir", "{d}/{L}", "--run-dir", "{d}/run"],
    "build --statutes": ["build", "--tag", "t", "--statutes", "{d}/{L}", "--run-dir", "{d}/run"],
    "build --figures-dir": ["build", "--tag", "t", "--figures-dir", "{d}/{L}", "--run-dir", "{d}/run"],
    "cleaner-check": ["cleaner-check", "{d}/{L}"],
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    door=st.sampled_from(sorted(LONG_NAME_ARGS)),
    char=st.sampled_from(["x", "é", "€", "日"]),
    extra=st.integers(0, 200),
    inner=st.sampled_from(["", "/inner.jsonl", ".jsonl", ".html"]),
)
def test_an_over_long_file_name_is_one_sentence(door, char, extra, inner):
    "A name over 255 bytes wherever a user's path is read or written: exit 2, one sentence, nothing written or run."
    name = char * (256 // len(char.encode()) + 1 + extra) + inner
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        shutil.copy(QA_SMALL / "test_squad.jsonl", d / "gold.jsonl")
        (d / "pred.jsonl").write_text(json.dumps({IDS[0]: "the patent office"}))
        before = _snapshot(d)
        rc, _, stderr = _main([a.format(d=d, L=name) for a in LONG_NAME_ARGS[door]])
        said = [line for line in stderr.strip().splitlines() if ": warning: " not in line]
        assert rc == 2 and "Traceback" not in stderr and len(said) == 1, (rc, stderr)
        assert "file name too long" in said[0].lower() and name.split("/")[0][:100] in said[0], said
        assert _snapshot(d) == before and sorted(p.name for p in d.iterdir()) == ["gold.jsonl", "pred.jsonl"]


@contextlib.contextmanager
def _endless(kind: str):
    "A path that never ends: a device, or a FIFO a thread writes into until its reader leaves."
    if kind != "fifo":
        yield kind
        return
    import threading

    with tempfile.TemporaryDirectory() as d:
        fifo = Path(d) / "endless.jsonl"
        os.mkfifo(fifo)

        def feed():
            line = (json.dumps({"id": IDS[0], "prediction_text": "x"}) + "\n").encode()
            with contextlib.suppress(BrokenPipeError, OSError), open(fifo, "wb") as f:
                while True:
                    f.write(line * 1000)

        writer = threading.Thread(target=feed, daemon=True)
        writer.start()
        try:
            yield str(fifo)
        finally:
            with contextlib.suppress(OSError):  # a reader that never came: let the writer's open return
                os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
            writer.join(timeout=30)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["/dev/zero", "/dev/urandom", "fifo"]),
    option=st.sampled_from(["--pred", "--against"]),
    cap=st.sampled_from([256, 4096, 3 << 20]),  # above the regular file beside the endless one
    page=st.booleans(),
)
def test_an_endless_input_is_refused_naming_the_cap(kind, option, cap, page):
    "`--pred /dev/zero` (or `--against`, or a FIFO fed for ever) is read up to the cap and refused naming it."
    # the project's cap is 512 MiB: a smaller one takes the same code path in less time
    with mock.patch.object(predictions, "MAX_PREDICTION_BYTES", cap), tempfile.TemporaryDirectory() as d:
        with _endless(kind) as endless:
            d = Path(d)
            (d / "pred.jsonl").write_text(json.dumps({IDS[0]: "the patent office"}))
            pred, against = (endless, d / "pred.jsonl") if option == "--pred" else (d / "pred.jsonl", endless)
            argv = ["evaluate", "--gold", QA_SMALL / "test_squad.jsonl", "--pred", pred, "--against", against]
            argv += ["--resamples", 10] + (["--out", d / "page.html"] if page else [])
            rc, _, stderr = _main(argv)
    assert rc == 2 and "Traceback" not in stderr, (rc, stderr)
    assert f"{endless}: more than {cap:,} bytes, the cap of a predictions file" in stderr, stderr


def _gold_cap_sentence(path, cap: int) -> str:
    return (
        f"indicipr evaluate: {path}: more than {cap:,} bytes, the cap of a QA file; "
        "a device or stream that does not end is no QA file"
    )


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["/dev/zero", "/dev/urandom", "fifo"]), cap=st.sampled_from([256, 3 << 20]), page=st.booleans()
)
def test_an_endless_gold_is_refused_naming_the_cap(kind, cap, page):
    "`--gold /dev/zero` (or a FIFO fed for ever) is read up to the cap of a QA file and refused naming it; nothing written."
    # the project's cap is 512 MiB: a smaller one takes the same code path in less time
    with mock.patch.object(qa_files, "MAX_QA_FILE_BYTES", cap), tempfile.TemporaryDirectory() as d:
        with _endless(kind) as endless:
            d = Path(d)
            (d / "pred.jsonl").write_text(json.dumps({IDS[0]: "the patent office"}))
            argv = ["evaluate", "--gold", endless, "--pred", d / "pred.jsonl", "--resamples", 10]
            rc, _, stderr = _main(argv + (["--out", d / "page.html"] if page else []))
            written = sorted(p.name for p in d.iterdir())
    said = [line for line in stderr.strip().splitlines() if ": warning: " not in line]
    assert rc == 2 and said == [_gold_cap_sentence(endless, cap)], (rc, stderr)
    assert written == ["pred.jsonl"]


def test_gold_from_dev_zero_stops_at_the_cap(tmp_path):
    "`indicipr evaluate --gold /dev/zero`, the project's own cap: one sentence naming the file and the cap, exit 2."
    import sys

    (tmp_path / "pred.jsonl").write_text(json.dumps({IDS[0]: "the patent office"}))
    argv = ["evaluate", "--gold", "/dev/zero", "--pred", str(tmp_path / "pred.jsonl")]
    p = subprocess.run(
        [sys.executable, "-m", "indicipr.run.cli", *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    said = [line for line in p.stderr.strip().splitlines() if ": warning: " not in line]
    assert p.returncode == 2 and "Traceback" not in p.stderr, (p.returncode, p.stderr[-3000:])
    assert said == [_gold_cap_sentence("/dev/zero", qa_files.MAX_QA_FILE_BYTES)], p.stderr


def test_a_gold_pipe_is_read_once_for_the_report_and_the_page(tmp_path):
    "`--gold <(cat gold.jsonl)` with an `.html` `--out`: the report and the error explorer both read what the pipe held."
    import threading

    read_end, write_end = os.pipe()
    gold = (QA_SMALL / "test_squad.jsonl").read_bytes()

    def feed():
        with open(write_end, "wb") as f:
            f.write(gold)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    (tmp_path / "pred.jsonl").write_text(json.dumps({IDS[0]: "the patent office"}))
    try:
        argv = ["evaluate", "--gold", f"/dev/fd/{read_end}", "--pred", tmp_path / "pred.jsonl", "--resamples", 10]
        rc, out, stderr = _main([*argv, "--out", tmp_path / "page.html"])
    finally:
        writer.join(timeout=30)
        os.close(read_end)
    assert rc == 0 and "no usable QA record" not in stderr, (rc, stderr)
    assert (tmp_path / "page.html").stat().st_size > len(gold) and "error explorer:" in stderr, stderr


URL_OUTPUT_ARGS = {  # where a user names an output: `{U}` a URL
    "evaluate --out": ["evaluate", "--gold", "{d}/gold.jsonl", "--pred", "{d}/pred.jsonl", "--out", "{U}/report.md"],
    "evaluate --out .html": ["evaluate", "--gold", "{d}/gold.jsonl", "--pred", "{d}/pred.jsonl", "--out", "{U}/a.html"],
    "predict --out": ["predict", "--model", "{d}", "--out", "{U}/p.jsonl"],
    "audit export --out": ["audit", "export", "--out", "{U}/kit"],
    "audit score --figures-dir": ["audit", "score", "{d}/pred.jsonl", "{d}/pred.jsonl", "--figures-dir", "{U}/t"],
    "fetch --dest": ["fetch", "--dest", "{U}/bench"],
    "reproduce --figures-dir": ["reproduce", "--only", "06", "--figures-dir", "{U}/figs", "--run-dir", "{d}/run"],
    "build --figures-dir": ["build", "--tag", "t", "--figures-dir", "{U}/figs", "--run-dir", "{d}/run"],
}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    door=st.sampled_from(sorted(URL_OUTPUT_ARGS)),
    url=st.sampled_from(["http://user:SECRETKEY@host", "https://host/x?token=SECRETKEY", "s3://bucket"]),
)
def test_an_output_named_by_a_url_is_refused(door, url):
    "A URL where an output is named: exit 2, one sentence naming the option and the URL masked, nothing made (no `http:`)."
    option = next(word for word in door.split() if word.startswith("--"))
    with tempfile.TemporaryDirectory() as d, contextlib.chdir(d):
        d = Path(d)
        shutil.copy(QA_SMALL / "test_squad.jsonl", d / "gold.jsonl")
        (d / "pred.jsonl").write_text(json.dumps({IDS[0]: "the patent office"}))
        rc, _, stderr = _main([a.format(d=d, U=url) for a in URL_OUTPUT_ARGS[door]])
        said = [line for line in stderr.strip().splitlines() if ": warning: " not in line]
        assert rc == 2 and "Traceback" not in stderr and len(said) == 1, (rc, stderr)
        assert f": {option} " in said[0] and "is a local path, not a URL" in said[0], said
        assert "SECRETKEY" not in stderr and sorted(p.name for p in d.iterdir()) == ["gold.jsonl", "pred.jsonl"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    part=st.sampled_from(_LINKED_RUN_PARTS),
    target=st.sampled_from(_COMMITTED_TARGETS),
    hops=st.integers(0, 2),
    git=st.booleans(),
)
def test_a_run_folder_linked_into_the_checkout_writes_nothing(part, target, hops, git):
    """`reproduce --run-dir X` where a part of X (a folder, an executed copy, a log) is a symlink, through `hops` more
    links, to anything the checkout commits (with git: what it tracks; without: its committed folders): exit 2 with one
    sentence, and neither the checkout nor X changes."""
    root = _git_checkout_copy()
    if not git:
        shutil.rmtree(root / ".git")
    run = root.parent / "run"
    (run / part).parent.mkdir(parents=True, exist_ok=True)
    link = root.parent / "hop0"
    (root.parent / f"hop{hops}").symlink_to(root / target)
    for n in range(hops, 0, -1):
        (root.parent / f"hop{n - 1}").symlink_to(root.parent / f"hop{n}")
    (run / part).symlink_to(link)
    before, run_before = _snapshot_links(root), _snapshot_links(run)
    saved = {k: os.environ.get(k) for k in (core.ROOT_ENV, core.MAIN_JOB_ENV, "INDICIPR_RUN_DIR")}
    os.environ[core.ROOT_ENV] = str(root)
    for k in (core.MAIN_JOB_ENV, "INDICIPR_RUN_DIR"):
        os.environ.pop(k, None)
    try:
        rc, _, err = _main(["reproduce", "--only", "06_scoring.metrics", "--run-dir", run])
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        core._tracked.cache_clear()
    try:
        assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert "(nothing was written)" in err, err
        assert _snapshot_links(root) == before and _snapshot_links(run) == run_before
    finally:
        shutil.rmtree(root.parent)


def _snapshot_links(folder: Path) -> dict:
    "Every file under `folder` (links not followed, git's own files aside) with its bytes; every link with its target."
    out = {}
    for p in folder.rglob("*"):
        if p.is_symlink():
            out[p] = str(p.readlink())
        elif p.is_file() and ".git" not in p.relative_to(folder).parts:
            out[p] = p.read_bytes()
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    where=st.sampled_from(
        [
            ("reproduce", "indicipr.run.cli.run_pipeline"),
            ("fetch", "indicipr.data.benchmark.fetch_benchmark"),
            ("train", "indicipr.systems.encoders.run_encoders"),
            ("fetch", "indicipr.data.numerics.pin"),
            ("train", "indicipr.data.config.run_context"),
        ]
    )
)
def test_ctrl_c_is_one_line_and_exit_130(where):
    "SIGINT (Ctrl-C) while `reproduce`, `fetch` or `train` works: `indicipr CMD: interrupted` and exit 130, no traceback."
    import importlib
    import signal

    command, target = where
    module_name, _, attr = target.rpartition(".")
    module = importlib.import_module(module_name)
    saved = getattr(module, attr)

    def interrupted(*args, **kwargs):
        signal.raise_signal(signal.SIGINT)  # Python's own handler: KeyboardInterrupt here, as at a terminal
        raise AssertionError("SIGINT was not delivered")

    setattr(module, attr, interrupted)
    try:
        with tempfile.TemporaryDirectory() as d:
            argv = {
                "reproduce": ["reproduce", "--only", "06_scoring.metrics", "--run-dir", Path(d) / "run"],
                "fetch": ["fetch", "--dest", Path(d) / "bench"],
                "train": ["train", "--seeds", "0", "--max-steps", "1"],
            }[command]
            rc, _, stderr = _main(argv)
    finally:
        setattr(module, attr, saved)
    said = [line for line in stderr.strip().splitlines() if ": warning: " not in line]
    assert rc == 130 and said == [f"indicipr {command}: interrupted"], (rc, stderr)


canary_files = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"digests": st.dictionaries(st.sampled_from(["weights", "logits", "tokens", "x"]), json_scalars, max_size=3)},
        optional={
            "settings": st.one_of(
                json_values,
                st.fixed_dictionaries(
                    {},
                    optional={k: json_values for k in ("caps", "threads", "versions", "mode", "llama_build")},
                ),
            )
        },
    ),
)


@FUZZ
@given(data=canary_files)
def test_a_canary_file_of_any_shape_is_read_or_refused_before_the_canary_runs(data):
    "`indicipr doctor` against a digest file of any JSON: a verdict, or one sentence naming the file before the run."
    from indicipr.run import doctor

    ran = []

    def canary(train, evalset, workdir):  # the 40 s encoder run, in no time
        ran.append(1)
        return {"weights": "a" * 64, "logits": "b" * 64, "windows": 1}

    saved = doctor.encoder_canary, doctor.canary_records
    doctor.encoder_canary, doctor.canary_records = canary, lambda: ([], [])
    try:
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "numerics_canary.json"
            path.write_text(json.dumps(data))
            try:
                rc = doctor.run_doctor(llm=False, path=path, echo=lambda line: None)
            except core.InputError as e:
                assert str(e).startswith(f"{path}: not a canary digest file (") and not ran, e
                return
    finally:
        doctor.encoder_canary, doctor.canary_records = saved
    assert rc in (0, 1) and ran
