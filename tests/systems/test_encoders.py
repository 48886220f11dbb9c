"""Fine-tuning, resuming, sliding-window labels and inference of `indicipr.systems.encoders` (tiny models, CPU)."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from indicipr.data import benchmark, config, core, qa_files  # noqa: E402
from indicipr.run import cli
from indicipr.scoring import metrics, predictions
from indicipr.systems import encoders as E
from indicipr.systems import finetune as FT
from indicipr.systems import qa_model as QM
from indicipr.systems import training as TR
from indicipr.data.config import Window

FIXTURE = Path(__file__).parents[1] / "fixtures" / "qa_small"


@pytest.fixture(scope="module")
def splits():
    return {k: [dict(r) for r in v] for k, v in benchmark.load_benchmark(str(FIXTURE)).items()}


@pytest.fixture(scope="module")
def tok():
    return QM.load_tokenizer("minilm-l6")


def test_labels_decode_to_gold_in_every_window_that_holds_it(splits, tok):
    recs = splits["train"]
    w = QM.encode_windows(recs, tok, Window(96, 32), labels=True)
    assert len(w) > len(recs)  # long contexts overflow at 96 tokens
    exact = holding = 0
    for i in range(len(w)):
        rec = recs[w.example_index[i]]
        s, e = w.start_positions[i], w.end_positions[i]
        if s == 0:
            continue  # [CLS]: the window lacks the whole answer
        holding += 1
        text = rec["context"][w.offsets[i][s, 0] : w.offsets[i][e, 1]]
        assert rec["answers"]["text"][0] in text  # never cuts the gold span
        exact += text == rec["answers"]["text"][0]
    assert exact / holding > 0.97
    # every example whose answer fits in a window has at least one window with a label
    labelled = {w.example_index[i] for i in range(len(w)) if w.start_positions[i] > 0}
    short = [k for k, r in enumerate(recs) if len(tok(r["answers"]["text"][0])["input_ids"]) < 40]
    assert set(short) <= labelled


def test_inference_does_not_depend_on_batching_or_padding(splits, tiny_model_dir):
    model, tok, _ = FT.load_finetuned(tiny_model_dir)
    recs = splits["test"]
    kw = dict(window=Window(128, 32), max_answer_length=24)
    a = QM.predict_answers(model, tok, recs, batch_size=1, pad_multiple=1, **kw)
    b = QM.predict_answers(model, tok, recs, batch_size=16, pad_multiple=64, **kw)
    assert [x.text for x in a] == [x.text for x in b]
    assert all(np.isclose(x.score, y.score, atol=1e-4) for x, y in zip(a, b))
    for x, r in zip(a, recs):
        assert x.text and r["context"][x.start : x.end] == x.text
        assert len(tok(x.text, add_special_tokens=False)["input_ids"]) <= 24 + 2  # cap (word pieces at the edges)


def test_window_probs_matches_a_brute_force_of_the_pipeline_rule(splits, tiny_model_dir):
    "span_score='window_probs': softmax per window over context + [CLS], best p_start * p_end over all windows."
    model, tok, _ = FT.load_finetuned(tiny_model_dir)
    recs, M = splits["test"][:12], 8
    got = QM.predict_answers(model, tok, recs, Window(96, 32), max_answer_length=M, span_score="window_probs")
    w = QM.encode_windows(recs, tok, Window(96, 32))
    best = {}
    for i in range(len(w)):
        ids = torch.tensor(w.input_ids[i])[None]
        with torch.no_grad():
            out = model(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                token_type_ids=torch.tensor(w.token_type_ids[i])[None],
            )
        ctx = w.offsets[i][:, 0] >= 0
        keep = ctx | (w.input_ids[i] == tok.cls_token_id)
        ps, pe = (
            np.where(keep, np.exp(x[0].numpy() - x[0].numpy()[keep].max()), 0)
            for x in (out.start_logits, out.end_logits)
        )
        ps, pe = ps / ps.sum(), pe / pe.sum()
        for a in np.flatnonzero(ctx):
            for b in range(a, min(a + M, len(ctx))):
                if ctx[b]:
                    cand = (ps[a] * pe[b], w.offsets[i][a, 0], w.offsets[i][b, 1])
                    ex = w.example_index[i]
                    if ex not in best or cand[0] > best[ex][0]:
                        best[ex] = cand
    assert len(w) > len(recs)  # some examples do span several windows
    for k, (x, r) in enumerate(zip(got, recs)):
        assert (x.start, x.end) == best[k][1:], r["id"]
        assert np.isclose(np.exp(x.score), best[k][0], rtol=1e-4)


def test_best_window_wins_across_windows(tok):
    "An example split into windows gets the span of the window with the highest start+end logit."

    class Fake(torch.nn.Module):
        "Logits peak on the token 'registrar' (start) and 'register' (end) wherever they are."

        def __init__(self):
            super().__init__()
            self.p = torch.nn.Parameter(torch.zeros(1))
            self.s, self.e = tok.convert_tokens_to_ids("registrar"), tok.convert_tokens_to_ids("register")

        def forward(self, input_ids, attention_mask=None, token_type_ids=None):
            from types import SimpleNamespace

            return SimpleNamespace(
                start_logits=(input_ids == self.s).float() * 5, end_logits=(input_ids == self.e).float() * 5
            )

    filler = " ".join(["The Controller shall publish the notice."] * 30)
    ctx = filler + " The Registrar shall keep a register of trade marks. " + filler
    rec = {
        "id": "tm_000001",
        "question": "Who keeps it?",
        "context": ctx,
        "answers": {"text": ["x"], "answer_start": [0]},
    }
    ans = QM.predict_answers(Fake(), tok, [rec], Window(64, 16), max_answer_length=10)[0]
    assert ans.text == "Registrar shall keep a register"


@pytest.mark.slow
def test_openvino_logits_within_1e5_of_torch_and_the_same_answers(splits):
    "engine='openvino' (fp32): every window's logits within 1e-5 of torch's, so the answers (and EM/F1) are identical."
    pytest.importorskip("openvino")
    model, tok = QM.load_qa_model("minilm-l6"), QM.load_tokenizer("minilm-l6")
    recs, kw = splits["test"][:16], dict(window=Window(128, 32), batch_size=3)
    lt = QM.window_logits(model, tok, recs, engine="torch", **kw)
    lo = QM.window_logits(model, tok, recs, engine="openvino", **kw)
    assert len(lt) == len(lo) > len(recs) and [a[0].shape for a in lt] == [b[0].shape for b in lo]
    assert max(float(np.abs(a - b).max()) for wt, wo in zip(lt, lo) for a, b in zip(wt, wo)) < 1e-5
    for rule in QM.SPAN_SCORES:
        a = QM.predict_answers(model, tok, recs, max_answer_length=24, span_score=rule, engine="torch", **kw)
        b = QM.predict_answers(model, tok, recs, max_answer_length=24, span_score=rule, engine="openvino", **kw)
        assert [(x.start, x.end) for x in a] == [(y.start, y.end) for y in b]
        assert all(abs(x.score - y.score) < 1e-4 for x, y in zip(a, b))
    n_tokens = int(QM.encode_windows(recs, tok, Window(128, 32)).lengths.sum())
    from indicipr.data import numerics

    # compiled already: auto reuses it (with native numerics; pinned, `auto` stays on torch)
    assert QM.resolve_engine("auto", model, "cpu", n_tokens) == ("torch" if numerics.pinned() else "openvino")


@pytest.mark.slow  # over 8 s on 2 cores
def test_openvino_model_is_rebuilt_when_a_weight_changes(tiny_model_dir):
    pytest.importorskip("openvino")
    model, tok, _ = FT.load_finetuned(tiny_model_dir)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    first = QM.openvino_model(model, names)
    assert QM.openvino_model(model, names) is first  # reused while nothing changes
    with torch.no_grad():
        model.qa_outputs.bias.add_(1.0)  # an optimiser step would do the same in place
    second = QM.openvino_model(model, names)
    assert second is not first
    rec = [
        {
            "id": "x",
            "question": "Who keeps the register?",
            "context": "The Registrar shall keep a register.",
            "answers": {"text": ["The Registrar"], "answer_start": [0]},
        }
    ]
    lt, lo = (QM.window_logits(model, tok, rec, engine=e)[0] for e in ("torch", "openvino"))
    assert np.abs(lt[0] - lo[0]).max() < 1e-5


def test_auto_engine_is_torch_without_the_openvino_extra(splits, tiny_model_dir, monkeypatch):
    model, tok, _ = FT.load_finetuned(tiny_model_dir)
    want = [a.text for a in QM.predict_answers(model, tok, splits["test"][:6], Window(96, 32), engine="torch")]
    monkeypatch.setattr(QM, "openvino_available", lambda: False)
    assert QM.resolve_engine("auto", model, "cpu", 10**9) == "torch"
    assert [a.text for a in QM.predict_answers(model, tok, splits["test"][:6], Window(96, 32))] == want
    with pytest.raises(ImportError, match=r"indicipr\[openvino\]"):
        QM.predict_answers(model, tok, splits["test"][:1], engine="openvino")
    with pytest.raises(ValueError, match="engine must be one of"):
        QM.predict_answers(model, tok, splits["test"][:1], engine="onnx")


def test_auto_engine_runs_torch_when_openvino_cannot_compile_the_model(splits, tiny_model_dir, monkeypatch):
    model, tok, _ = FT.load_finetuned(tiny_model_dir)
    recs, kw = splits["test"][:6], dict(window=Window(96, 32))
    want = [a.text for a in QM.predict_answers(model, tok, recs, engine="torch", **kw)]

    def fail(*a, **k):
        raise RuntimeError("unsupported operation")

    monkeypatch.setenv("INDICIPR_NUMERICS", "native")  # pinned numerics keep `auto` on torch (OpenVINO picks by CPU)
    monkeypatch.setattr(QM, "openvino_available", lambda: True)
    monkeypatch.setattr(QM, "_AUTO_MIN_TOKENS", 0)
    monkeypatch.setattr(QM, "openvino_model", fail)
    assert QM.resolve_engine("auto", model, "cpu", 1) == "openvino"
    with pytest.warns(UserWarning, match="could not compile BertForQuestionAnswering .*unsupported operation"):
        assert [a.text for a in QM.predict_answers(model, tok, recs, **kw)] == want
    with pytest.raises(RuntimeError, match="unsupported operation"):
        QM.predict_answers(model, tok, recs, engine="openvino", **kw)


def _train(model_dir, recs, out, epochs=2, callbacks=None):
    cfg = TR.TrainConfig(
        epochs=epochs, batch_size=8, learning_rate=1e-3, max_length=128, stride=32, seed=0, logging_steps=1
    )
    return FT.train_encoder(model_dir, recs, cfg, out, max_answer_length=32, callbacks=callbacks)


@pytest.mark.slow  # over 8 s on 2 cores
def test_train_save_reuse_and_predict_cli(splits, tiny_model_dir, tmp_path, monkeypatch, capsys):
    recs = splits["train"][:24]
    out = _train(tiny_model_dir, recs, tmp_path / "run")
    cfg = json.loads((out / "qa_config.json").read_text())
    assert cfg["max_answer_length"] == 32 and cfg["train_windows"] >= 24 and cfg["resumed_from"] is None
    assert cfg["scoring_cpu_seconds"] == 0.0  # no callback scored anything
    lengths = {int(n): c for n, c in cfg["train_window_lengths"].items()}  # the windows by length, each once
    assert sum(lengths.values()) == cfg["train_windows"] and max(lengths) <= 128
    assert not (out / "checkpoints").exists() and (out / "config.json").exists()
    first_loss = cfg["final_loss"]
    mtime = (out / "qa_config.json").stat().st_mtime
    assert _train(tiny_model_dir, recs, out) == out and (out / "qa_config.json").stat().st_mtime == mtime  # reused
    # `indicipr predict` on the fixture's test split, to a given file
    pred_file = tmp_path / "preds.jsonl"
    assert (
        cli.main(
            ["predict", "--model", str(out), "--split", "test", "--data-source", str(FIXTURE), "--out", str(pred_file)]
        )
        == 0
    )
    preds = predictions.read_predictions(pred_file)
    test = {r["id"]: r for r in splits["test"]}
    assert set(preds) == set(test) and all(p in test[k]["context"] for k, p in preds.items())
    assert "F1" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:
        cli.main(["predict", "--model", str(out), "--split", "nope", "--data-source", str(FIXTURE)])
    assert stop.value.code == 2 and "invalid choice: 'nope'" in capsys.readouterr().err  # argparse names the option
    # other settings: trained again
    from transformers import TrainerCallback

    class Scored(TrainerCallback):
        cpu_seconds = 1.5  # the CPU time its points took, as `F1Curve` reports it

    out2 = _train(tiny_model_dir, recs, out, epochs=1, callbacks=[Scored()])
    cfg2 = json.loads((out2 / "qa_config.json").read_text())
    assert cfg2["epochs"] == 1 and first_loss is not None
    assert cfg2["scoring_cpu_seconds"] == 1.5 and cfg2["train_cpu_seconds"] >= 0  # recorded apart from training's


def test_predict_names_what_is_wrong_with_a_model_folder_or_a_source(tiny_model_dir, tmp_path, capsys):
    """Each of these ran silently and scored other numbers, or traced back: a folder without its tokenizer, of a decoder
    model type, with NaN weights, with a qa_config.json of wrong types, and an empty data source."""
    import shutil

    from transformers import BertForQuestionAnswering

    def predict(folder, source=FIXTURE) -> str:
        argv = ["predict", "--model", folder, "--data-source", source, "--out", tmp_path / "p.jsonl"]
        rc = cli.main([str(a) for a in argv])
        err = capsys.readouterr().err
        assert rc == 2 and "Traceback" not in err and not (tmp_path / "p.jsonl").exists(), (rc, err)
        return err

    def copy(name: str) -> Path:
        return Path(shutil.copytree(tiny_model_dir, tmp_path / name))

    folder = copy("no_tokenizer")
    for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        (folder / name).unlink(missing_ok=True)
    assert f"{folder}: no tokenizer files" in predict(folder)
    folder = copy("decoder")
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "model_type": "gpt2"}))
    assert "config.json: model_type 'gpt2' is not an encoder question-answering model" in predict(folder)
    folder = copy("qa_config")
    (folder / "qa_config.json").write_text(json.dumps({"max_length": "384", "stride": 128}))
    assert "qa_config.json: max_length should be a positive integer, got '384'" in predict(folder)
    for length, stride in ((128, 128), (128, 64), (64, 1000)):
        (folder / "qa_config.json").write_text(json.dumps({"max_length": length, "stride": stride}))
        assert f"qa_config.json: stride {stride} must be below half of max_length {length}" in predict(folder)
    folder = copy("nan")
    model = BertForQuestionAnswering.from_pretrained(folder)
    with torch.no_grad():
        model.qa_outputs.weight[0, 0] = float("nan")
    model.save_pretrained(folder)
    assert f"{folder}: its weight qa_outputs.weight holds NaN or infinite values" in predict(folder)
    empty = tmp_path / "empty_source"
    empty.mkdir()
    for name in core.OFFICIAL_FILES.values():
        (empty / name).write_text("")
    err = predict(tiny_model_dir, empty)
    assert str(empty) in err and err.count("\n") <= 3, err


def test_train_refuses_a_model_folder_predict_would_refuse(tiny_model_dir, tmp_path, capsys):
    """`train --models FOLDER` with a decoder's model type (predict refuses what training it writes) or with weights cut
    short: one sentence naming the folder, exit 2, before any training."""
    import shutil

    def train(folder) -> str:
        argv = ["train", "--models", folder, "--seeds", "0", "--max-steps", "1", "--data-source", FIXTURE]
        rc = cli.main([str(a) for a in argv])
        err = capsys.readouterr().err
        assert rc == 2 and "Traceback" not in err and str(folder) in err, (rc, err)
        return err

    decoder = Path(shutil.copytree(tiny_model_dir, tmp_path / "decoder"))
    cfg = json.loads((decoder / "config.json").read_text())
    (decoder / "config.json").write_text(json.dumps({**cfg, "model_type": "gpt2"}))
    assert "config.json's model_type 'gpt2' is not an encoder question-answering model" in train(decoder)
    cut = Path(shutil.copytree(tiny_model_dir, tmp_path / "cut"))
    weights = cut / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    assert "model.safetensors is not a readable weights file, corrupt or cut short" in train(cut)
    (cut / "config.json").write_text("{" * 100_000)
    assert "cut/config.json: not valid JSON" in train(cut)  # the file named, as predict names it


@pytest.mark.slow  # over 8 s on 2 cores
def test_interrupted_run_resumes_from_its_checkpoint(splits, tiny_model_dir, tmp_path):
    from transformers import TrainerCallback

    recs = splits["train"][:24]

    class Interrupt(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if state.global_step == self.stop_at:
                raise KeyboardInterrupt("simulated interruption")

    w = QM.encode_windows(recs, QM.load_tokenizer(tiny_model_dir), Window(128, 32), labels=True)
    steps_per_epoch = int(np.ceil(len(w) / 8))
    cb = Interrupt()
    cb.stop_at = steps_per_epoch + 1  # during epoch 2, after the epoch-1 checkpoint
    with pytest.raises(KeyboardInterrupt):
        _train(tiny_model_dir, recs, tmp_path / "run", callbacks=[cb])
    run = tmp_path / "run"
    assert not (run / "qa_config.json").exists()
    assert TR.last_checkpoint(run / "checkpoints").endswith(f"checkpoint-{steps_per_epoch}")
    out = _train(tiny_model_dir, recs, run)
    cfg = json.loads((out / "qa_config.json").read_text())
    assert cfg["resumed_from"] == f"checkpoint-{steps_per_epoch}" and cfg["global_steps"] == 2 * steps_per_epoch


def test_answer_length_cap_covers_training_answers(splits, tok):
    cap = QM.suggest_max_answer_length(splits["train"], tok)
    n = QM.answer_token_lengths(splits["train"], tok)
    assert cap % 8 == 0 and (n <= cap).mean() >= 0.99 and cap - 8 < np.quantile(n, 0.99)


# -- the paper profile's hub path, against the hub stand-in ---------------------------------------------------------
HUB_RUN = """
import json, sys
from indicipr.data.config import run_context
from indicipr.systems import encoders as E, qa_model as QM, training as TR
ctx = run_context(sys.argv[1], "paper", stage="encoders", models=["inlegalbert"], seeds=[0], epochs=0.1)
rows, _ = E.run_encoders(ctx)
print("ROWS " + json.dumps([r["settings"] for r in rows]))
"""


@pytest.mark.slow
def test_paper_profile_downloads_the_hub_checkpoint_and_predicts_every_test_question(tmp_path):
    "`run_encoders` on a folder under the paper profile fetches law-ai/InLegalBERT through `from_pretrained` from `HF_ENDPOINT`."
    import subprocess
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1]))  # tests/, where standins/ lives
    try:
        from standins.checkpoints import build_checkpoint
        from standins.hub import HubStandIn
    except ImportError as e:
        pytest.skip(f"the hub stand-in (tests/standins/hub.py) is not usable here: {e}")
    repo = "law-ai/InLegalBERT"
    build_checkpoint(repo, tmp_path / "hub" / repo, size="tiny")
    root = tmp_path / "root"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
    }
    with HubStandIn({("model", repo): tmp_path / "hub" / repo}) as hub:
        env.update(
            HF_ENDPOINT=hub.endpoint,
            HF_HOME=str(tmp_path / "hf_home"),
            INDICIPR_ROOT=str(root),
            TOKENIZERS_PARALLELISM="false",
        )
        proc = subprocess.run(
            [sys.executable, "-c", HUB_RUN, str(FIXTURE)], env=env, capture_output=True, text=True, timeout=240
        )
        seen = hub.paths_seen()
        sha = hub.repos[("model", repo)].sha
    assert proc.returncode == 0, proc.stderr[-3000:]
    weights = [
        s for s in seen if "/law-ai/InLegalBERT/resolve/" in s and "model.safetensors" in s and s.startswith("GET")
    ]
    assert weights and all(s.endswith(("-> 200", "-> 206")) for s in weights), seen  # the real download path
    settings = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("ROWS "))[5:])
    assert len(settings) == 1
    s = settings[0]
    assert (s["checkpoint"], s["revision"], s["layers"], s["hidden"]) == (repo, sha, 2, 128)
    assert s["epochs"] == 0.1 and s["steps"] >= 1 and s["shrink"] == "epochs 0.1 (profile 2.0)" and s["device"] == "cpu"
    test_ids = {r["id"] for r in qa_files.load_qa_file(FIXTURE / "test_squad.jsonl", strict=True).records}
    assert s["eval_questions"] == len(test_ids)
    preds = predictions.read_predictions(
        root / "runs" / "interactive" / "predictions" / "qa_small" / "inlegalbert_seed0.jsonl"
    )
    assert set(preds) == test_ids  # the whole test split


@pytest.mark.slow
def test_two_phase_recipe_trains_phase_one_once_and_the_settings_say_so(tiny_model_dir, tmp_path, monkeypatch):
    "The offline profile's recipe on the qa_small fixture: synthetic questions from its training sections, then two seeds."
    monkeypatch.setenv("INDICIPR_ROOT", str(tmp_path))
    spec = config.IntermediateTraining(
        kinds=("clause", "gap"), per_piece=1, crop_words=40, epochs=0.5, learning_rate=1e-3, batch_size=8, seed=0
    )
    kw = dict(
        models=[tiny_model_dir],
        seeds=[0, 1],
        epochs=0.5,
        learning_rate=1e-3,
        max_length=128,
        stride=32,
        intermediate=spec,
        curve_every=2,
        rehearsal=0.5,
    )
    assert config.ENCODERS["offline"].freeze_embeddings  # what the runs below inherit
    ctx = config.run_context(str(FIXTURE), "offline", stage="encoders", **kw)
    rows, _ = E.run_encoders(ctx)
    folder = E.intermediate_dir(ctx.models, tiny_model_dir)
    phase1 = FT.qa_config(folder)
    assert phase1["phase"] == "intermediate" and phase1["train_ids_head"][0].startswith("syn_")
    assert phase1["synthetic"]["questions"] == phase1["train_examples"] > 0 and phase1["freeze_embeddings"]
    n_train = len(qa_files.training_records(benchmark.load_benchmark(str(FIXTURE), verbose=False)["train"])[0])
    replay = []
    for r in rows:  # every seed starts from phase 1 and the settings table says what it was
        cfg = FT.qa_config(FT.checkpoint_dir(ctx.models, tiny_model_dir, r["seed"]))
        assert cfg["base_model"] == str(folder) and cfg["intermediate"]["digest"] == phase1["synthetic"]["digest"]
        assert cfg["rehearsal"]["questions"] == round(
            0.5 * phase1["synthetic"]["questions"]
        )  # phase 2 replays half of phase 1
        assert cfg["train_examples"] == n_train + cfg["rehearsal"]["questions"]
        replay.append(cfg["rehearsal"]["digest"])
        assert r["settings"]["rehearsal"].startswith(f"{cfg['rehearsal']['questions']} of phase 1's questions")
        s = r["settings"]
        assert s["checkpoint"] == tiny_model_dir and str(tmp_path) not in json.dumps(s)
        assert s["intermediate"].startswith(f"{phase1['synthetic']['questions']} synthetic questions (clause, gap)")
    curve = E.learning_curve(rows[0]["curve"])  # the first seed carries the learning curve of both phases
    assert list(dict.fromkeys(curve.phase)) == ["phase 1: synthetic questions", "fine-tuning on the training split"]
    assert curve.total_step.is_monotonic_increasing and "curve" not in rows[1]
    runs, settings, _ = E.encoder_tables(rows)
    assert (
        "curve" not in runs.columns
        and settings["intermediate"].nunique() == 1
        and "cut to 40 words" in settings["intermediate"][0]
    )
    assert len(set(replay)) == 2  # each seed draws its own share
    import torch  # frozen embeddings: both phases left them as the base model had them
    from transformers import AutoModelForQuestionAnswering

    base = AutoModelForQuestionAnswering.from_pretrained(tiny_model_dir).get_input_embeddings().weight
    tuned = AutoModelForQuestionAnswering.from_pretrained(FT.checkpoint_dir(ctx.models, tiny_model_dir, 0))
    assert torch.equal(base, tuned.get_input_embeddings().weight)
    assert not torch.equal(
        AutoModelForQuestionAnswering.from_pretrained(tiny_model_dir).qa_outputs.weight, tuned.qa_outputs.weight
    )
    mtime = (folder / "qa_config.json").stat().st_mtime
    E.run_encoders(
        config.run_context(str(FIXTURE), "offline", stage="encoders", **kw)
    )  # a second run reuses both phases
    assert (folder / "qa_config.json").stat().st_mtime == mtime


def test_boundary_aware_decoding_writes_its_own_system_beside_the_plain_one(tiny_model_dir, tmp_path, monkeypatch):
    "`boundary_runs` decodes a finished run again (weights tuned on validation) and writes `<model>_boundary_seed<k>` with its provenance."
    monkeypatch.setenv("INDICIPR_ROOT", str(tmp_path))
    short = dict(seeds=[0], max_steps=3, max_length=128, stride=32, intermediate=False, curve_every=0)
    rows, _ = E.run_encoders(
        config.run_context(str(FIXTURE), "offline", stage="encoders", models=[tiny_model_dir], **short)
    )
    ctx = config.run_context(  # the same settings: a run by hand finds its checkpoints in its settings' own folder
        str(FIXTURE), "offline", stage="encoders", models=[tiny_model_dir], **short
    )
    assert ctx.settings.boundary_models == "all" and ctx.settings.boundary_tune_split == "validation"
    b = E.boundary_runs(ctx, rows)
    assert len(b) == 1 and b[0]["plain_system"] == rows[0]["system"] and b[0]["system"].endswith("_boundary_seed0")
    assert b[0]["tune_f1"] >= b[0]["tune_f1_plain"]  # the grid holds the plain decoding (all weights 0)
    assert b[0]["zero_differs_tune"] == b[0]["zero_differs"] == 0  # and weights 0 answer as the plain decoding
    path = config.run_context(str(FIXTURE)).predictions / f"{b[0]['system']}.jsonl"
    preds, meta = predictions.read_predictions(path), predictions.read_prediction_meta(path)
    test = [dict(r) for r in benchmark.load_benchmark(str(FIXTURE), verbose=False)["test"]]
    assert set(preds) == {r["id"] for r in test}
    assert meta["plain_system"] == rows[0]["system"] and meta["decoding"]["tuned_on"] == "validation"
    assert meta["setting"] == "fine-tuned, boundary-aware decoding"
    assert abs(metrics.score_predictions(test, preds)[1]["f1"] - b[0]["f1"]) < 1e-9
    table = E.boundary_table(b)
    assert table.loc[0, "plain system"] == rows[0]["system"]
    assert (
        E.boundary_runs(
            config.run_context(str(FIXTURE), "offline", stage="encoders", boundary_models=["inlegalbert"]), rows
        )
        == []
    )  # not a model of these rows


def test_boundary_decoding_at_zero_weights_is_the_plain_decoding(tiny_model_dir, splits):
    """With all weights 0, boundary-aware decoding answers exactly as `predict_answers` on contexts of several windows
    (max_length 64, stride 16): the same score across windows, the same spans, the same ties; a bonus then moves answers."""
    from indicipr.systems import boundary

    model, tok = QM.load_qa_model(tiny_model_dir), QM.load_tokenizer(tiny_model_dir)
    recs = splits["validation"] + splits["test"]
    w = QM.encode_windows(recs, tok, Window(64, 16))
    assert (np.bincount(w.example_index) > 1).mean() > 0.9  # nearly every context spans several windows
    plain = QM.predict_answers(model, tok, recs, Window(64, 16), 30, batch_size=4, engine="torch")
    cands = boundary.span_candidates(
        model, tok, recs, boundary.LengthPrior(2.0, 1.0), Window(64, 16), 30, batch_size=4, engine="torch"
    )
    zero = boundary.boundary_decode(recs, cands, boundary.BoundaryParams())
    assert zero == {r["id"]: a.text for r, a in zip(recs, plain)}
    kept = QM.model_pass(model, tok, recs, Window(64, 16), batch_size=4, engine="torch")  # one pass, decoded both ways
    again = boundary.span_candidates(
        model, tok, recs, boundary.LengthPrior(2.0, 1.0), Window(64, 16), 30, computed=kept
    )
    assert boundary.boundary_decode(recs, again, boundary.BoundaryParams()) == zero
    assert boundary.zero_weight_differences(model, tok, recs, again, Window(64, 16), 30, computed=kept) == 0
    moved = boundary.boundary_decode(
        recs, cands, boundary.BoundaryParams(start_weight=4.0, end_weight=4.0, length_weight=2.0)
    )
    assert moved != zero
