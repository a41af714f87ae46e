"""``python -m warren_sim.cli ARGS`` = ``warren ARGS``."""

import sys

from . import main

sys.exit(main())
