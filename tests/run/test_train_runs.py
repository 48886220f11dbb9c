"""`indicipr train` keeps to its own checkpoints folder: the main job's checkpoints (`data/models/<source>/`) are the
main job's alone, and `indicipr predict` reads what `train` wrote from the `model_dir` of its output line."""

import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from helpers import QA_SMALL  # noqa: E402

from indicipr.data import benchmark, config, core  # noqa: E402
from indicipr.run import cli  # noqa: E402
from indicipr.systems import finetune, qa_model  # noqa: E402


def test_train_leaves_the_main_jobs_checkpoint_alone_and_predict_reads_what_it_wrote(
    tiny_model_dir, root, monkeypatch, capsys
):
    "The main job's seed-0 checkpoint of another recipe sits where `train` would have replaced it; it stays as it was."
    for name in (core.MAIN_JOB_ENV, "INDICIPR_RUN_DIR"):
        monkeypatch.delenv(name, raising=False)
    tag = benchmark.source_tag(str(QA_SMALL))
    main = config.main_job_models(tag) / f"{qa_model.model_short_name(tiny_model_dir)}_seed0"
    main.mkdir(parents=True)
    (main / "qa_config.json").write_text(json.dumps({"base_model": "the main job's", "epochs": 9.0}) + "\n")
    (main / "model.safetensors").write_bytes(b"the main job's weights")
    before = {p.name: p.read_bytes() for p in main.iterdir()}
    argv = ["train", "--models", tiny_model_dir, "--seeds", "0", "--max-steps", "2", "--workers", "1"]
    assert cli.main([*argv, "--no-intermediate", "--data-source", str(QA_SMALL)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {p.name: p.read_bytes() for p in main.iterdir()} == before  # not replaced, not added to
    (row,) = lines
    model_dir = row["model_dir"]
    assert model_dir.startswith(str(core.scratch_dir() / "models" / tag))  # the run's own folder
    assert finetune.qa_config(model_dir)["max_steps"] == 2
    assert cli.main(["predict", "--model", model_dir, "--data-source", str(QA_SMALL)]) == 0
    assert "predictions; EM" in capsys.readouterr().out
