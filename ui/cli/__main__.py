"""``python -m ui.cli ...``: the ``paperchat`` command."""

import sys

from ui.cli.main import main

sys.exit(main())
