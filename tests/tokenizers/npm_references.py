"""What the checks against the npm references share: their command line and the
skip (exit 77) when a reference is missing.

tests/tokenizers/install_references puts the packages outside the tree, in
$PDLAB_NPM_DIR or ~/.cache/pdlab-npm; --modules names their node_modules.
"""
import argparse
import os
import shutil
import sys

DEFAULT_MODULES = os.path.join(os.environ.get("PDLAB_NPM_DIR", os.path.expanduser("~/.cache/pdlab-npm")),
                               "node_modules")


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def command_line():
    """--pdlab (the program under test) and --modules (the references' node_modules)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--pdlab", required=True)
    ap.add_argument("--modules", default=DEFAULT_MODULES)
    return ap.parse_args()


def need_references(modules, packages, node=True):
    """Skips unless node runs (where the check runs it) and each package is installed."""
    if node and not shutil.which("node"):
        skip("node is not installed")
    for package in packages:
        if not os.path.isdir(os.path.join(modules, package)):
            skip("%s is not in %s; run tests/tokenizers/install_references" % (package, modules))
