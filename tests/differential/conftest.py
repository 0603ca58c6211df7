"""tools/differential is not an installed package: its tests import it from tools/."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
