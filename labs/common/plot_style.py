"""What every lab's plot.py shares: its one argument, matplotlib without a
display, the CSV files the lab program wrote, the look of an axis, and a figure
saved as PNG and SVG next to those files.

The lab programs run plot.py by its path in the source tree (labs/common/plot.cpp),
so Python finds this file only through the path plot.py puts first:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
    import plot_style  # noqa: E402  (labs/common/plot_style.py)
"""
import csv
import os
import sys


def out_folder(usage):
    """The folder named on the command line (the lab's --out, holding its CSV
    files); without exactly one argument, the usage and exit 2."""
    if len(sys.argv) != 2:
        print(usage.strip(), file=sys.stderr)
        sys.exit(2)
    return sys.argv[1]


def pyplot():
    """matplotlib.pyplot drawing into files (no display needed); without
    matplotlib, how to install it and exit 4."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot.py: matplotlib is missing. Install it (Debian/Ubuntu: apt-get install python3-matplotlib; "
              f"elsewhere: pip install matplotlib), then run:\n  python3 {' '.join(sys.argv)}", file=sys.stderr)
        sys.exit(4)
    return plt


def read_csv(path, text=()):
    """The rows of a CSV file as dicts, every column a float but those named in `text`."""
    with open(path, newline="") as f:
        return [{k: (v if k in text else float(v)) for k, v in row.items()} for row in csv.DictReader(f)]


def read_groups(path, key):
    """The rows of a CSV file (as read_csv) by their text in column `key`, e.g.
    {"static": [rows...], "continuous": [rows...]}."""
    groups = {}
    for row in read_csv(path, text=(key,)):
        groups.setdefault(row[key], []).append(row)
    return groups


def style(ax, legend=True):
    """The kit's look: a light grid (minor lines too on a log y axis) and, where
    there are labelled lines, a legend."""
    ax.grid(True, alpha=0.3, which="both" if ax.get_yscale() == "log" else "major")
    if legend:
        ax.legend(fontsize=8)


def save(fig, folder, name):
    """folder/name.png and folder/name.svg, laid out tight, then one line saying so."""
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(folder, f"{name}.{ext}"), dpi=120, bbox_inches="tight")
    print(f"  {name}.png, {name}.svg")
