"""``python -m lev_nb.cli``: the ``lev`` command without its console script."""

import sys

from lev_nb.cli import main

sys.exit(main())
