"""Cleaner check: for any set of raw statute sections, the editorial leftovers after cleaning and the
statutory words lost against the raw text. Both must be 0 on every statute the project holds.

For each source (a section JSONL file, or a folder of India Code PDFs named `<act>.pdf`) it prints a
per-Act table with a Total row: sections, leftovers, lost statutory words and the lost words by word type
(word / number / enumerator / symbol; see `indicipr.corpus.statutory_tokens`), then the findings. Without
arguments it checks every source the project holds, each section batch on its own: `data/sample/statutes/sections.jsonl`
and `sections-batch2.jsonl`, the same batches in `../shared/statutes/`, and `data/statutes/pdf/` where present.
Exit status 1 when any count > 0.

    python benchmarks/cleaner_check.py [SOURCE ...] [--show N]      (the same as `indicipr cleaner-check`)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from indicipr.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["cleaner-check", *sys.argv[1:]]))
