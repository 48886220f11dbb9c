"""The project's training loop and the pool of runs (`indicipr.systems.training`, `indicipr.systems.pool`, through `indicipr.systems.encoders`), on tiny models on the CPU:

* the loop computes the `Trainer`'s recipe (same losses step by step, same weights);
* its hot path asks the host for no tensor value (what is a device sync on a GPU);
* an interrupted run resumed from its checkpoint is the uninterrupted run;
* a run in the pool is the same run as alone (same loss curve, same predictions);
* `accelerate launch` with 2 processes (gloo) gives the loss of one process with the same global batch;
* training with dropout through `dropout_attention` gives the bits of PyTorch's own attention;
* training in `fast_paths` (the heap reused, dropout's mask compiled, AdamW's step in three passes) gives the bits of
  torch's own step.
"""

import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from helpers import QA_SMALL, ROOT, tiny_bert_config  # noqa: E402

from indicipr.systems import encoders as E  # noqa: E402
from indicipr.systems import finetune as FT
from indicipr.systems import fast_paths as FP
from indicipr.systems import pool as P
from indicipr.scoring import predictions
from indicipr.systems import qa_model as QM
from indicipr.systems import training as TR
from indicipr.data import config
from indicipr.data.config import Window

# The training entry point `accelerate launch` starts (python -m ...): `indicipr.run.cli train`.
TRAIN_ENTRY = ["-m", "indicipr.run.cli", "train"]
# `accelerate launch --cpu --num_processes 2` starts ONE process in accelerate 1.15 (several CPU processes need mpirun);
# `--multi_gpu` on a machine without a GPU starts 2 (torchrun), and `Accelerator(cpu=True)` joins them over gloo.
ACCELERATE_2_CPU = [
    "launch",
    "--multi_gpu",
    "--num_processes",
    "2",
    "--num_machines",
    "1",
    "--mixed_precision",
    "no",
    "--dynamo_backend",
    "no",
    "--main_process_port",
    "29517",
]


def tiny_bert_dir(folder: Path, dropout: float = 0.1, seed: int = 0) -> str:
    "A tiny random BERT QA checkpoint with MiniLM's tokenizer, saved like a hub checkpoint."
    from transformers import BertForQuestionAnswering

    tok = QM.load_tokenizer("minilm-l6")
    torch.manual_seed(seed)
    cfg = tiny_bert_config(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    BertForQuestionAnswering(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    base = tmp_path_factory.mktemp("tiny")
    return {
        "dropout": tiny_bert_dir(base / "tiny-drop"),
        "no_dropout": tiny_bert_dir(base / "tiny-nodrop", dropout=0.0),
    }


@pytest.fixture(scope="module")
def packed(splits):
    tok = QM.load_tokenizer("minilm-l6")
    return TR.PackedWindows(
        QM.encode_windows(splits["train"][:40], tok, Window(128, 32), labels=True), tok.pad_token_id, 8
    )


@pytest.fixture
def one_thread():
    "One intra-op thread: on a shared 2-core machine two threads can wait on each other far longer than they compute."
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _cfg(**kw):
    base = dict(
        epochs=2,
        batch_size=8,
        learning_rate=1e-3,
        max_length=128,
        stride=32,
        seed=0,
        logging_steps=1,
        save_checkpoints=False,
    )
    return TR.TrainConfig(**{**base, **kw})


def _model(folder):
    return QM.load_qa_model(folder)


def test_loop_computes_the_trainer_recipe(tiny_dirs, packed, tmp_path, one_thread):
    "Without dropout the loop and the Trainer (the same TrainingArguments, the same batches) give the same run."
    m_loop, m_tr = _model(tiny_dirs["no_dropout"]), _model(tiny_dirs["no_dropout"])
    loop = TR.fit(m_loop, packed, _cfg(engine="loop"), tmp_path / "loop", disable_tqdm=True)
    tr = TR.fit(m_tr, packed, _cfg(engine="trainer"), tmp_path / "trainer", disable_tqdm=True)
    tr_losses = [h["loss"] for h in tr.state.log_history if "loss" in h]
    assert loop.state.global_step == tr.state.global_step == len(tr_losses) == 2 * int(np.ceil(len(packed) / 8))
    np.testing.assert_allclose(loop.step_losses, tr_losses, rtol=2e-5)
    assert loop.step_losses[-1] < loop.step_losses[0] - 0.05  # it learns
    for (name, a), b in zip(m_loop.named_parameters(), m_tr.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)
    final = loop.state.log_history[-1]
    assert final["train_loss"] == pytest.approx(np.mean(loop.step_losses)) and final["train_runtime"] > 0
    assert [h["step"] for h in loop.state.log_history if "loss" in h] == list(range(1, loop.state.global_step + 1))


@pytest.mark.parametrize("engine", ["loop", "trainer"])
def test_dropout_attention_trains_the_bits_of_pytorchs_attention(
    tiny_dirs, packed, tmp_path, one_thread, monkeypatch, engine
):
    """With dropout, a run through `dropout_attention` (`fit`'s) and one through PyTorch's own SDPA (the block replaced by
    one that changes nothing) end with the same weights, bit for bit, and the model is on SDPA again afterwards."""
    import contextlib

    swapped = []
    real = TR.sdpa_dropout_attention

    def counting(module, *a, **kw):
        swapped.append(module.training)
        return real(module, *a, **kw)

    monkeypatch.setattr(TR, "sdpa_dropout_attention", counting)
    ours = _model(tiny_dirs["dropout"])
    TR.fit(ours, packed, _cfg(engine=engine, epochs=1), tmp_path / "ours", disable_tqdm=True)
    assert swapped and all(swapped)  # the registered attention ran, in training
    assert ours.config._attn_implementation == "sdpa"
    monkeypatch.setattr(TR, "dropout_attention", contextlib.nullcontext)
    plain = _model(tiny_dirs["dropout"])
    TR.fit(plain, packed, _cfg(engine=engine, epochs=1), tmp_path / "plain", disable_tqdm=True)
    for (name, a), b in zip(ours.state_dict().items(), plain.state_dict().values()):
        assert torch.equal(a, b), name


def test_fast_paths_train_the_bits_of_torchs_own_step(tiny_dirs, packed, tmp_path, one_thread, monkeypatch):
    """A run in `fast_paths` (the heap reused, dropout's mask compiled: `fit`'s default) and one as torch runs it end
    with the same weights, bit for bit; the compiled mask drew the run's dropouts, the attention's among them, and the
    model's layers are plain `Dropout` again afterwards."""
    assert FP.mt_dropout_matches()  # probed before the count starts
    drawn = []
    real = FP.mt_dropout

    def counting(x, p):
        drawn.append(x.dim())
        return real(x, p)

    monkeypatch.setattr(FP, "mt_dropout", counting)
    stepped = []
    real_step = TR.adamw_step
    monkeypatch.setattr(TR, "adamw_step", lambda *a: stepped.append(real_step(*a)) or stepped[-1])
    fast = _model(tiny_dirs["dropout"])
    run = TR.fit(fast, packed, _cfg(epochs=1), tmp_path / "fast", disable_tqdm=True)
    n = len(drawn)
    assert 4 in drawn and 3 in drawn  # the attention's probabilities (batch, heads, query, key), the hidden states
    assert stepped == [True] * run.state.global_step  # every optimiser step through the compiled passes
    assert not any(isinstance(m, FP._MTDropout) for m in fast.modules())
    plain = _model(tiny_dirs["dropout"])
    TR.fit(plain, packed, _cfg(epochs=1, cpu_fast_paths=False), tmp_path / "plain", disable_tqdm=True)
    assert len(drawn) == n  # torch drew every mask of this one
    assert stepped.count(True) == run.state.global_step  # and made every step
    for (name, a), b in zip(fast.state_dict().items(), plain.state_dict().values()):
        assert torch.equal(a, b), name


@pytest.fixture
def fresh_probe():
    "`mt_dropout_matches` asked again in the test, and again after it."
    FP.mt_dropout_matches.cache_clear()
    yield
    FP.mt_dropout_matches.cache_clear()


def test_the_probe_checks_the_backward_from_a_block_without_gradients(fresh_probe):
    "The probe runs a backward pass, so it computes gradients even when it is first asked under `torch.no_grad()`."
    with torch.no_grad():
        assert FP.mt_dropout_matches()
        assert not torch.is_grad_enabled()  # and leaves the block as it was


def test_where_the_compiled_mask_is_not_torchs_dropout_stays_torchs(fresh_probe, monkeypatch):
    """A kernel that draws one element otherwise (as another torch might) fails the probe, with a warning, and dropout
    inside `fast_paths` is then torch's own; so it is without numba."""
    kernel = FP._mt_kernel()

    def one_flipped(mt, left, nxt, x, out, keep, thresh, scale):
        counters = kernel(mt, left, nxt, x, out, keep, thresh, scale)
        keep[0] = not keep[0]
        out[0] = x[0] * (scale if keep[0] else 0)
        return counters

    monkeypatch.setattr(FP, "_mt_kernel", lambda: one_flipped)
    with pytest.warns(UserWarning, match="draws dropout's mask otherwise"):
        assert not FP.mt_dropout_matches()
    net = torch.nn.Sequential(torch.nn.Dropout(0.5)).train()
    x = torch.ones(1000)
    with FP.fast_paths(net):
        assert type(net[0]) is torch.nn.Dropout
        torch.manual_seed(0)
        got = net(x), FP.train_dropout(x, 0.5)
    torch.manual_seed(0)
    assert all(torch.equal(a, torch.nn.functional.dropout(x, 0.5)) for a in got)
    monkeypatch.setattr(FP, "_mt_kernel", lambda: None)
    FP.mt_dropout_matches.cache_clear()
    with pytest.warns(UserWarning, match="numba is not installed"):
        assert not FP.mt_dropout_matches()


@pytest.fixture
def fresh_step_probe():
    "`adamw_step_matches` asked again in the test, and again after it."
    FP.adamw_step_matches.cache_clear()
    yield
    FP.adamw_step_matches.cache_clear()


def test_where_the_compiled_step_is_not_torchs_the_step_stays_torchs(fresh_step_probe, monkeypatch):
    """A kernel that updates one weight otherwise (as another torch might round it) fails the probe, with a warning,
    and `adamw_step` inside `fast_paths` then leaves the step to torch; so it does without numba."""
    moments, apply = FP._adamw_kernels()

    def one_off(p, m, root, bc2, eps, step):
        apply(p, m, root, bc2, eps, step)
        p[0] = np.nextafter(p[0], np.float32(np.inf))

    monkeypatch.setattr(FP, "_adamw_kernels", lambda: (moments, one_off))
    with pytest.warns(UserWarning, match="steps AdamW otherwise"):
        assert not FP.adamw_step_matches()
    param = torch.nn.Parameter(torch.ones(40))
    param.grad = torch.full((40,), 0.5)
    with FP.fast_paths(torch.nn.Linear(2, 2)):
        assert not FP.adamw_step(torch.optim.AdamW([param]), [param], 1.0)
    assert torch.equal(param, torch.ones(40))  # nothing was done: the caller steps
    monkeypatch.setattr(FP, "_adamw_kernels", lambda: None)
    FP.adamw_step_matches.cache_clear()
    with pytest.warns(UserWarning, match="numba is not installed"):
        assert not FP.adamw_step_matches()


def test_a_step_the_kernels_cannot_take_is_left_to_torch(fresh_step_probe):
    """Inside `fast_paths`, `adamw_step` takes torch's AdamW on contiguous float32 CPU tensors and nothing else: another
    optimiser, AdamW's other options, a float64 or strided parameter are left to torch, untouched."""

    def case(make, param=None):
        param = torch.nn.Parameter(torch.ones(4, 6)) if param is None else param
        param.grad = torch.ones_like(param)
        before = param.detach().clone()
        with FP.fast_paths(torch.nn.Linear(2, 2)):
            took = FP.adamw_step(make([param]), [param], 1.0)
        return took, torch.equal(param, before)

    assert case(torch.optim.AdamW) == (True, False)
    for make in (
        lambda ps: torch.optim.SGD(ps, lr=0.1),
        lambda ps: torch.optim.Adam(ps),
        lambda ps: torch.optim.AdamW(ps, amsgrad=True),
        lambda ps: torch.optim.AdamW(ps, maximize=True),
        lambda ps: torch.optim.AdamW(ps, foreach=True),
        lambda ps: torch.optim.AdamW(ps, lr=torch.tensor(1e-3)),
    ):
        assert case(make) == (False, True)
    assert case(torch.optim.AdamW, torch.nn.Parameter(torch.ones(4, 6, dtype=torch.float64))) == (False, True)
    assert case(torch.optim.AdamW, torch.nn.Parameter(torch.ones(6, 4).t())) == (False, True)


def test_loop_hot_path_asks_the_host_for_no_tensor_value(tiny_dirs, packed, tmp_path, one_thread, monkeypatch):
    """No `.item()`, `bool(tensor)`, `.tolist()` ... from the loop or the model code between the first and the last step
    (on a GPU each is a host sync). transformers' own check `mask.all()` is one such call; the 4-D mask avoids it.
    `fast_paths`' compiled dropout reads its CPU tensors on the host, which is where they are: those reads are not syncs."""
    from transformers import TrainerCallback

    calls = []

    def spy(name):
        orig = getattr(torch.Tensor, name)

        def wrapper(self, *a, **kw):
            caller = sys._getframe(1).f_code.co_filename
            host = caller.endswith("fast_paths.py") and self.device.type == "cpu"  # the CPU path's own reads: no sync
            if counting[0] and ("transformers" in caller or "indicipr" in caller) and not host:
                calls.append((name, caller))
            return orig(self, *a, **kw)

        return wrapper

    counting = [False]

    class Window(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            counting[0] = 1 <= state.global_step < state.max_steps

    for name in ("item", "tolist", "__bool__", "__int__", "__float__", "__index__", "numpy", "cpu"):
        monkeypatch.setattr(torch.Tensor, name, spy(name))
    run = TR.fit(
        _model(tiny_dirs["dropout"]),
        packed,
        _cfg(engine="loop"),
        tmp_path / "loop",
        callbacks=[Window()],
        disable_tqdm=True,
    )
    assert run.state.global_step > 4 and not calls, calls[:5]
    # the spy sees such calls where there are some: the same model given a 2-D mask asks `mask.all()`
    counting[0] = True
    batch = packed.__getitems__([0, 1])
    _model(tiny_dirs["dropout"])(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    counting[0] = False
    assert any(name == "__bool__" for name, _ in calls)


def test_callbacks_get_the_model_not_its_ddp_wrapper():
    """As the `Trainer` does, the loop gives its callbacks the model itself: a learning curve scored aside through
    DistributedDataParallel's forward would join the processes' collectives out of step with training, and hang."""
    inner = torch.nn.Linear(2, 2)
    seen = []

    class Seen:
        def on_step_end(self, args, state, control, model=None, **kw):
            seen.append(model)

    TR._callback([Seen()], "on_step_end", None, None, None, model=types.SimpleNamespace(module=inner), optimizer=None)
    TR._callback([Seen()], "on_step_end", None, None, None, model=inner)
    assert seen == [inner, inner]


def test_a_resumed_run_is_the_uninterrupted_run(tiny_dirs, packed, tmp_path, one_thread):
    "With dropout: interrupted after epoch 1's checkpoint, resumed → every step's loss and the weights as uninterrupted."
    from transformers import TrainerCallback

    cfg = _cfg(engine="loop", save_checkpoints=True)
    whole = TR.fit(_model(tiny_dirs["dropout"]), packed, cfg, tmp_path / "whole", disable_tqdm=True)
    per_epoch = whole.state.global_step // 2

    class Interrupt(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if state.global_step == per_epoch + 2:
                raise KeyboardInterrupt("simulated")

    with pytest.raises(KeyboardInterrupt):
        TR.fit(_model(tiny_dirs["dropout"]), packed, cfg, tmp_path / "cut", callbacks=[Interrupt()], disable_tqdm=True)
    assert [p.name for p in (tmp_path / "cut").iterdir()] == [f"checkpoint-{per_epoch}"]  # whole, and only the newest
    m = _model(tiny_dirs["dropout"])
    resumed = TR.fit(m, packed, cfg, tmp_path / "cut", disable_tqdm=True)
    assert resumed.resumed_from.endswith(f"checkpoint-{per_epoch}")
    assert resumed.step_losses == whole.step_losses
    for a, b in zip(m.parameters(), whole.model.parameters()):
        assert torch.equal(a, b)


def _table(data_source, model_dir, root, monkeypatch, workers, seeds=(0, 1)):
    monkeypatch.setenv("INDICIPR_ROOT", str(root))
    ctx = config.run_context(
        data_source,
        "offline",
        stage="encoders",
        models=[model_dir],
        seeds=list(seeds),
        epochs=1.0,
        batch_size=8,
        workers=workers,
    )
    rows, pool = E.run_encoders(ctx)
    logs = {
        r["system"]: json.loads((FT.checkpoint_dir(ctx.models, model_dir, r["seed"]) / "train_log.json").read_text())
        for r in rows
    }
    preds = {
        r["system"]: predictions.read_predictions(config.run_context(data_source).predictions / f"{r['system']}.jsonl")
        for r in rows
    }
    return rows, logs, preds, pool


@pytest.mark.slow
def test_a_pooled_run_is_the_run_alone(tiny_dirs, tmp_path, monkeypatch, one_thread):
    "Two runs one after another in this process, then the same two in a pool of 2 processes: identical, run by run."
    alone = _table(str(QA_SMALL), tiny_dirs["dropout"], tmp_path / "alone", monkeypatch, workers=1)
    pooled = _table(str(QA_SMALL), tiny_dirs["dropout"], tmp_path / "pooled", monkeypatch, workers=2)
    assert alone[3]["plan"]["limited_by"] == "sequential" and pooled[3]["plan"]["workers"] == 2
    assert len({r["worker"] for r in pooled[3]["runs"].values()}) == 2  # two processes did the work
    assert [r["system"] for r in alone[0]] == [r["system"] for r in pooled[0]] == ["tiny-drop_seed0", "tiny-drop_seed1"]
    for a, b in zip(alone[0], pooled[0]):
        assert (a["em"], a["f1"], a["char_f1"]) == (b["em"], b["f1"], b["char_f1"])
        assert {k: v for k, v in a["settings"].items()} == {k: v for k, v in b["settings"].items()}
    for system in alone[1]:
        assert alone[1][system]["step_losses"] == pooled[1][system]["step_losses"], system
        assert alone[2][system] == pooled[2][system], system
    s0, s1 = alone[1]["tiny-drop_seed0"]["step_losses"], alone[1]["tiny-drop_seed1"]["step_losses"]
    assert s0 != s1  # the seeds differ


def _failing_run(job, callbacks=None):
    if job == "bad":
        raise ValueError("this run fails")
    return job


@pytest.mark.slow
def test_a_failing_pooled_run_names_itself(one_thread):
    with pytest.raises(RuntimeError, match=r"(?s)run 1 of 2 failed in a worker process.*ValueError: this run fails"):
        list(P.run_pool(_failing_run, ["good", "bad"], workers=2))


def _fake_gpu_run(job, callbacks=None):
    "A job that, as the probe run, reports a footprint that leaves room for one more run; then it takes a while."
    import time

    if callbacks:
        gib = 2**30
        callbacks[0].queue.put(
            ("probe", None, {"footprint": 4 * gib, "free": 8 * gib, "total": 80 * gib, "busy": 10.0}, os.getpid())
        )
    t0 = time.time()
    time.sleep(1.5)
    return {"job": job, "start": t0, "end": time.time(), "pid": os.getpid()}


@pytest.mark.slow
def test_the_auto_pool_starts_with_a_probe_and_keeps_to_its_plan(monkeypatch):
    """The 'auto' pool as on a GPU (here faked: one device, 4 CPUs): the first run alone reports its footprint, the plan
    allows 2 at once (90% of 8 GiB free holds one more 4 GiB run), and no more than 2 ever run together."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    pool = P.run_pool(_fake_gpu_run, list(range(5)), workers="auto")
    out = dict(pool)
    assert sorted(out) == list(range(5)) and [out[i]["job"] for i in range(5)] == list(range(5))
    plan = pool.plan
    assert plan["workers"] == 2 and plan["per_device"] == [2] and plan["limited_by"] == "memory"
    assert plan["probe"]["footprint"] == 4 * 2**30 and plan["footprint_mib"] == 4096
    events = sorted([(r["start"], 1) for r in out.values()] + [(r["end"], -1) for r in out.values()])
    running = peak = 0
    for _, d in events:
        running += d
        peak = max(peak, running)
    assert peak == 2  # the plan, never more
    first = out[0]
    assert all(r["start"] >= first["start"] for r in out.values())  # the probe went first


def test_pool_size(monkeypatch):
    assert P._pool_size(1, 4) == 1 and P._pool_size(5, 3) == 3 and P._pool_size(2, 8) == 2
    assert P._pool_size(12, None) == ("auto" if torch.cuda.is_available() else 1)
    assert P._pool_size(12, "2") == 2  # `indicipr train --workers 2`
    monkeypatch.setenv("INDICIPR_TRAIN_WORKERS", "2")  # not a setting: the count comes from `workers` only
    assert P._pool_size(12, None) == ("auto" if torch.cuda.is_available() else 1)
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert P._pool_size(12, 4) == 1  # one run at a time, in step
    with pytest.raises(ValueError, match="workers must be"):
        monkeypatch.delenv("WORLD_SIZE")
        P._pool_size(3, "many")


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("accelerate", path=str(Path(sys.executable).parent)) is None,
    reason="accelerate's launcher is not installed beside this Python",
)
def test_accelerate_two_cpu_processes_give_the_one_process_loss(tiny_dirs, tmp_path, monkeypatch, one_thread):
    """`accelerate launch` (2 processes, gloo) at batch 8 per process and one process at batch 16: the same global
    batches, the same losses step by step (dropout off, so that the random draws do not differ)."""
    model_dir = tiny_dirs["no_dropout"]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(
        INDICIPR_ROOT=str(tmp_path / "two"),
        CUDA_VISIBLE_DEVICES="",
        OMP_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
        TQDM_DISABLE="1",
    )
    launcher = str(Path(sys.executable).parent / "accelerate")
    proc = subprocess.run(
        [
            launcher,
            *ACCELERATE_2_CPU,
            *TRAIN_ENTRY,
            "--data-source",
            str(QA_SMALL),
            "--profile",
            "offline",
            "--models",
            model_dir,
            "--seeds",
            "0",
            "--max-steps",
            "5",
            "--no-intermediate",
            "--fp32",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    # `indicipr train` is a run by hand: its checkpoints go to its settings' own folder, never the main job's
    (run,) = (tmp_path / "two" / "runs" / "interactive" / "models" / "qa_small").glob("settings-*/tiny-nodrop_seed0")
    two = json.loads((run / "train_log.json").read_text())
    two_cfg = json.loads((run / "qa_config.json").read_text())
    assert two_cfg["world_size"] == 2 and two_cfg["batch_size"] == 8 and two_cfg["global_steps"] == 5
    assert two_cfg["precision"] == "fp32" and two_cfg["base_model"] == model_dir  # --fp32, --no-intermediate
    monkeypatch.setenv("INDICIPR_ROOT", str(tmp_path / "one"))
    one_ctx = config.run_context(
        str(QA_SMALL),
        "offline",
        stage="encoders",
        models=[model_dir],
        seeds=[0],
        max_steps=5,
        batch_size=16,
        intermediate=False,
        cpu_bf16=False,
        workers=1,
    )
    E.run_encoders(one_ctx)
    one_dir = one_ctx.models / "tiny-nodrop_seed0"
    one = json.loads((one_dir / "train_log.json").read_text())
    assert json.loads((one_dir / "qa_config.json").read_text())["world_size"] == 1
    assert len(one["step_losses"]) == len(two["step_losses"]) == 5
    np.testing.assert_allclose(two["step_losses"], one["step_losses"], rtol=1e-5)
    assert one["step_losses"][0] != one["step_losses"][-1]


def test_a_pool_of_a_notebooks_own_function_runs_in_process_and_says_why(monkeypatch, capsys):
    "A function defined in a notebook's cell (module `__main__`, no file) cannot reach spawned workers: the runs go in this process, with a sentence."
    import sys as _sys

    def twice(job, *shared, callbacks=None):
        return job * 2 + sum(shared)

    twice.__module__ = "__main__"
    monkeypatch.delattr(_sys.modules["__main__"], "__file__", raising=False)
    pool = P.run_pool(twice, [1, 2, 3], (10,), workers=3)
    assert list(pool) == [(0, 12), (1, 14), (2, 16)]
    assert pool.plan["limited_by"] == "sequential" and "cannot import" in capsys.readouterr().err
    assert P._importable(P.run_pool) and not P._importable(twice)
