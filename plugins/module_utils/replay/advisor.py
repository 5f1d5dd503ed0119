# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)
"""The quota advisor (issue 17, item 4): search per-tenant guarantees (nominalQuota), borrowing limits and
fair-sharing weights that meet per-tenant wait targets with the smallest sum of guarantees, ranked by the fast
model (``model.predict``). Pure logic, no cluster access; the recommendation is then proven by a replay through
the real Kueue (``make replay-advise``). Units: GPUs; targets in trace seconds.

The search goes up from the smallest sum of guarantees (the largest single Job's GPUs: below that it is not
admitted at all) to the cluster's GPUs. Stage 1 simulates every split of each sum between the tenants with the
first of ``weights`` and of ``borrowing_limits`` (None: unlimited) for all, up to the first sum where a split
meets every target. Stage 2 goes through the sums again up to that one and tries every combination of weights
and borrowing limits per tenant on the ``refine`` splits of each sum nearest the targets; the first sum with a
candidate meeting the targets wins. Candidates are ranked by their margin (the largest wait / target over the
targets, lower first), then fewer preemptions. ``max_candidates`` bounds the simulations (``truncated``).
Guarantees below the cluster's GPUs leave the rest unused: fairgpu's Cohort holds no quota of its own."""

import itertools

from ansible_collections.fairgpu.tenancy.plugins.module_utils.replay import model


class AdvisorError(ValueError):
    """Targets or choices the advisor cannot search; the message names the field."""


def target_errors(targets, tenants):
    """Messages for ``targets`` (``{tenant: {"p95": s, "p50": s}}``, trace seconds) against the tenant names."""
    errors = []
    if not targets:
        errors.append("targets: give at least one tenant's target, for example {tenant-0: {p95: 600}}")
    for tenant, target in sorted((targets or {}).items()):
        if tenant not in tenants:
            errors.append("targets.%s: no such tenant (tenants: %s)" % (tenant, ", ".join(sorted(tenants))))
            continue
        if not isinstance(target, dict) or not set(target) <= {"p50", "p95", "max"} or not target:
            errors.append("targets.%s: give p50, p95 and/or max in trace seconds, got %r" % (tenant, target))
            continue
        for key, value in sorted(target.items()):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                errors.append("targets.%s.%s: a number of trace seconds >= 0, got %r" % (tenant, key, value))
    return errors


def meets(prediction, targets):
    """``(met, margin)``: every tenant with a target has all its Jobs admitted and each waited figure within the
    target; margin is the largest figure / target over the targets (0 target: 0 if met, else infinite)."""
    margin = 0.0
    met = True
    for tenant, target in targets.items():
        row = prediction["tenants"].get(tenant)
        if row is None or row["not_admitted"]:
            return False, float("inf")
        for key, limit in target.items():
            value = row["trace_" + key] or 0.0
            ratio = (value / float(limit)) if limit else (0.0 if value == 0 else float("inf"))
            margin = max(margin, ratio)
            met = met and value <= limit
    return met, margin


def splits(total, names, least):
    """Every split of ``total`` GPUs between ``names`` (sorted), each at least ``least[name]``."""
    names = list(names)
    if len(names) == 1:
        if total >= least.get(names[0], 0):
            yield (total,)
        return
    for first in range(least.get(names[0], 0), total + 1):
        for rest in splits(total - first, names[1:], least):
            yield (first,) + rest


def advise(jobs, tenants, capacity, targets, factor, weights=(1,), borrowing_limits=(None,), fair_sharing=True,
           start_delay=0.0, top=5, max_candidates=5000, refine=8):
    """Search as the module docstring says. ``tenants``: tenant names (a list) or a dict of them; ``jobs``:
    replay_plan's; ``factor``: the compression (trace seconds per wall second). Returns ``{"recommended":
    {"tenants": {t: {gpus, borrowing_limit, weight}}, "sum", "prediction", "margin"} or None, "candidates": [the
    ``top`` ranked], "evaluated", "sums_tried": [[sum, evaluated, met]], "truncated"}``."""
    names = sorted(tenants)
    errors = target_errors(targets, names)
    if not weights or any(isinstance(w, bool) or not isinstance(w, (int, float)) or w <= 0 for w in weights):
        errors.append("weights: a list of numbers > 0, got %r" % (list(weights or ()),))
    if not borrowing_limits or any(b is not None and (isinstance(b, bool) or not isinstance(b, int) or b < 0)
                                   for b in borrowing_limits):
        errors.append("borrowing_limits: a list of whole numbers >= 0 or null (unlimited), got %r"
                      % (list(borrowing_limits or ()),))
    if errors:
        raise AdvisorError("; ".join(errors))
    largest = max([int(j["gpus"]) for j in jobs] or [0])
    largest_of = dict((t, max([int(j["gpus"]) for j in jobs if j["tenant"] == t] or [0])) for t in names)
    evaluated = 0
    sums_tried = []
    weight_sets = list(itertools.product(sorted(set(weights)), repeat=len(names)))
    # Only relative weights matter: keep one of each proportion (1,1,1 and 2,2,2 are the same policy).
    seen, unique = set(), []
    for ws in weight_sets:
        key = tuple(round(w / float(min(ws)), 6) for w in ws)
        if key not in seen:
            seen.add(key)
            unique.append(ws)
    borrow_sets = list(itertools.product(list(dict.fromkeys(borrowing_limits)), repeat=len(names)))
    truncated = False
    base = (unique[0], borrow_sets[0])
    # Stage 1: every split of each sum with the first weight and borrowing limit for all; stage 2: at each sum up
    # to the first one met, the other weights and borrowing limits on the ``refine`` splits nearest the targets.
    scored = {}
    first_met = None

    def run(gpus, borrows, ws, total):
        policy = dict((t, {"gpus": g, "borrowing_limit": b, "weight": w})
                      for t, g, b, w in zip(names, gpus, borrows, ws))
        prediction = model.predict(jobs, policy, capacity, factor, fair_sharing=fair_sharing,
                                   start_delay=start_delay)
        ok, margin = meets(prediction, targets)
        return {"tenants": policy, "sum": total, "prediction": prediction, "margin": round(min(margin, 1e9), 4),
                "met": ok}

    for total in range(max(1, largest), capacity + 1):
        rows = []
        for gpus in splits(total, names, {}):
            if evaluated >= max_candidates:
                truncated = True
                break
            rows.append(run(gpus, base[1], base[0], total))
            evaluated += 1
        scored[total] = rows
        sums_tried.append([total, len(rows), len([r for r in rows if r["met"]])])
        if any(r["met"] for r in rows) or truncated:
            first_met = total
            break
    last = first_met if first_met is not None else capacity
    for total in sorted(scored):
        if total > last or truncated:
            continue
        nearest = sorted(scored[total], key=lambda r: r["margin"])[:refine]
        for row in nearest:
            gpus = tuple(row["tenants"][t]["gpus"] for t in names)
            for borrows in borrow_sets:
                if any(b is not None and g + b < largest_of[t] for t, g, b in zip(names, gpus, borrows)):
                    continue
                for ws in unique:
                    if (ws, borrows) == base or (not fair_sharing and ws != unique[0]):
                        continue
                    if evaluated >= max_candidates:
                        truncated = True
                        break
                    scored[total].append(run(gpus, borrows, ws, total))
                    evaluated += 1
        met = [r for r in scored[total] if r["met"]]
        sums_tried.append([total, len(scored[total]), len(met)])
        if met:
            met.sort(key=lambda c: (c["margin"], c["prediction"]["preemptions"],
                                    [c["tenants"][t]["borrowing_limit"] is not None for t in names],
                                    sorted((t, v["weight"]) for t, v in c["tenants"].items())))
            return {"recommended": met[0], "candidates": met[:top], "evaluated": evaluated,
                    "sums_tried": sums_tried, "truncated": truncated}
    return {"recommended": None, "candidates": [], "evaluated": evaluated, "sums_tried": sums_tried,
            "truncated": truncated}


def tenants_list(recommended, base=None):
    """The recommendation as a ``tenants_list`` for site.yml: each tenant's base entry (``base``: the inventory's
    tenants_list, for max_jobs and namespaces) with ``gpus``, ``borrowing_limit`` (left out when unlimited) and
    ``weight`` of the recommendation."""
    by_name = dict((t["name"], t) for t in (base or []))
    out = []
    for name, spec in sorted(recommended["tenants"].items()):
        entry = dict((k, v) for k, v in by_name.get(name, {"name": name}).items()
                     if k not in ("gpus", "borrowing_limit", "weight"))
        entry["name"] = name
        entry["gpus"] = spec["gpus"]
        if spec["borrowing_limit"] is not None:
            entry["borrowing_limit"] = spec["borrowing_limit"]
        entry["weight"] = spec["weight"]
        out.append(entry)
    return out
