# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Series read from Prometheus drawn into one PNG for the validation report (matplotlib, headless): the flood
scenarios' GPUs held against the guarantees and pending workloads per tenant, with the alert's spans. Module
prometheus_plot and the validation's executor draw with it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def draw(path, title, start, panels, spans):
    """Write the PNG; returns False when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 3.2 * len(panels)), dpi=100, sharex=True, squeeze=False)
    names = sorted({name for panel in panels for name in list(panel.get("series") or {}) + list(panel.get("dashed") or {})})
    colours = {name: "C%d" % index for index, name in enumerate(names)}
    for ax, panel in zip(axes[:, 0], panels):
        for index, (name, points) in enumerate(sorted((panel.get("series") or {}).items())):
            points = sorted((float(t) - start, float(v)) for t, v in points)
            if points:
                ax.step([p[0] for p in points], [p[1] for p in points], where="post", color=colours[name],
                        label=name, linewidth=max(3.0 - 1.2 * index, 1.0))
        for name, value in sorted((panel.get("dashed") or {}).items()):
            ax.axhline(float(value), color=colours[name], linestyle="--", linewidth=1, label="%s guaranteed" % name)
        for span in spans:
            ax.axvspan(float(span["start"]) - start, float(span["end"]) - start, color=span.get("color") or "red",
                       alpha=0.12, label=span["label"])
        ax.set_title(panel["title"], fontsize=10)
        ax.set_ylabel(panel.get("ylabel", ""))
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("seconds since the flood started")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True
