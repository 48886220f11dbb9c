"""The one command line's entry by its old name: `indicipr=indicipr.cli:main` of an environment installed before the
floors, and `python -m indicipr.cli` / `accelerate launch -m indicipr.cli train`. The command line is
`indicipr.run.cli` (notebook `12h_run.cli`); this file is not generated and defines nothing."""

import sys

from .run.cli import main

if __name__ == "__main__":
    sys.exit(main())
