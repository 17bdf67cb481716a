"""``python -m disembed.cli ...`` runs the command line (the same as the ``disembed`` script)."""

import sys

from . import main

sys.exit(main())
