"""``python -m disembed ...`` runs the command line (the same as the ``disembed`` script)."""

import sys

from .cli import main

sys.exit(main())
