#!/usr/bin/env bash
# Fails when the notebooks and the exported library are out of sync, or the notebooks are not clean:
# runs nbdev_export and nbdev_clean and fails if either changed anything under indicipr/ or
# notebooks/ (compared with the state before it ran, so uncommitted work elsewhere does not count).
# Then fails when a notebook's metadata is not the project's one kernel (python3) or papermill --help-notebook cannot
# list its parameters with their types (indicipr.run.notebook_files.notebook_door_problems), or an nbdev directive
# sits below a cell's first line of code or a stage-run cell lacks a test flag (notebook_files.directive_problems).
# Run from the repository root with the project's venv on PATH.
set -euo pipefail
state() { { git status --porcelain --untracked-files=all -- indicipr notebooks; git diff -- indicipr notebooks; } | md5sum; }
before=$(state)
nbdev_export
nbdev_clean
if [ "$(state)" != "$before" ]; then
  echo "OUT OF SYNC: nbdev_export / nbdev_clean changed files under indicipr/ or notebooks/:"
  git status --porcelain --untracked-files=all -- indicipr notebooks
  git --no-pager diff --stat -- indicipr notebooks || true
  echo "Run 'nbdev_export && nbdev_clean' and commit the result."
  exit 1
fi
python -c 'import sys; from indicipr.run.notebook_files import directive_problems as d, notebook_door_problems as p; bad = p("notebooks") + d("notebooks"); bad and print(*bad, sep="\n"); sys.exit(bool(bad))' || {
  echo "NOTEBOOK DOORS: the notebooks above do not all name the one kernel, papermill cannot read their parameters, or"
  echo "nbdev misses a directive below a cell's first line of code or runs a stage-run cell under nbdev_test."
  exit 1
}
echo "notebooks and indicipr/ are in sync and clean"
