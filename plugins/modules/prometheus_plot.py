#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: prometheus_plot
short_description: Draw series read from Prometheus into one PNG for the validation report
version_added: 0.1.0
description:
  - Writes one PNG with one plot per entry of O(panels), stacked, sharing the time axis in seconds since O(start).
  - The series come from Prometheus's HTTP API (C(/api/v1/query_range)), read by the C(validate) role; this module
    only draws them. It does not talk to Prometheus or a cluster.
  - Needs matplotlib on the host that runs the module; without it nothing is written and RV(written) is false.
author:
  - fairgpu maintainers (!UNKNOWN)
options:
  path:
    description: The PNG file to write (its directory is created when missing).
    type: path
    required: true
  title:
    description: Title of the figure.
    type: str
    required: true
  start:
    description: Unix time (seconds) that is 0 on the time axis.
    type: float
    required: true
  panels:
    description:
      - "One plot each, C({title, ylabel, series, dashed}): C(series) maps a line's name to C([[unix seconds, value],
        ...]) drawn as steps; C(dashed) maps a line's name to a constant drawn dashed in the same colour as the
        series of the same name (for example a tenant's guarantee)."
    type: list
    elements: dict
    required: true
  spans:
    description:
      - Time ranges shaded on every plot, C({label, start, end, color}) in Unix seconds (for example while an alert was
        pending or fired); C(color) is a matplotlib colour name, red when missing.
    type: list
    elements: dict
    default: []
"""

EXAMPLES = r"""
- name: Plot GPUs held per tenant from Prometheus
  fairgpu.tenancy.prometheus_plot:
    path: results/embedded/flood-prometheus.png
    title: "flood: GPUs held per tenant (Prometheus)"
    start: 1796032681.0
    panels:
      - title: GPUs held vs guaranteed
        ylabel: GPUs
        series: {team-a: [[1796032681.0, 16], [1796032686.0, 8]]}
        dashed: {team-a: 8}
"""

RETURN = r"""
written:
  description: Whether the PNG was written (false in check mode and without matplotlib).
  returned: always
  type: bool
path:
  description: The PNG file.
  returned: always
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule


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


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            title=dict(type="str", required=True),
            start=dict(type="float", required=True),
            panels=dict(type="list", elements="dict", required=True),
            spans=dict(type="list", elements="dict", default=[]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    written = False
    if not module.check_mode:
        os.makedirs(os.path.dirname(params["path"]) or ".", exist_ok=True)
        written = draw(params["path"], params["title"], params["start"], params["panels"], params["spans"])
    module.exit_json(changed=written, written=written, path=params["path"])


if __name__ == "__main__":
    main()
