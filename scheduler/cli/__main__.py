"""`python -m scheduler.cli ...`: the same as the `volcano-py` command."""

import sys

from scheduler.cli import main

sys.exit(main())
