import sys
from pathlib import Path

# The repository root (for `codegen`) and tests/ (for `support`) are importable in tests.
ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))
