# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)
"""One PNG of one matplotlib plot, for the report modules: the backend, the figure, the grid, the legend and the
save in one place. matplotlib is optional: without it nothing is written and the caller says so."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def write_png(path, draw, grid_axis="both", legend_loc="best", figsize=(10, 4.5)):
    """Draw with ``draw(ax)`` on a ``figsize`` (inches; default 10 x 4.5), 100 dpi figure (headless Agg backend),
    add a light grid on ``grid_axis`` and a legend at ``legend_loc``, and save it to ``path``. Returns False when matplotlib is
    missing (nothing written), True otherwise."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=figsize, dpi=100)
    try:
        draw(ax)
        ax.grid(True, axis=grid_axis, alpha=0.3)
        ax.legend(loc=legend_loc, fontsize=8)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return True
