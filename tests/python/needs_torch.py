"""Exit 77 (meson's SKIP) where PyTorch or NumPy is missing.

The PyTorch suites call skip_without_torch() before importing either, so on
a machine without them the suite is reported as skipped, with the reason,
instead of failing with an ImportError or silently not existing.
"""

import importlib.util
import sys


def skip_without_torch():
    missing = [m for m in ("numpy", "torch") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"SKIP: {' and '.join(missing)} not importable by {sys.executable} "
              "(Debian: apt-get install python3-torch python3-numpy)")
        sys.exit(77)
