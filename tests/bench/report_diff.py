"""Compare two validation reports (report.json) of runs on the same inputs, the timings aside: what each scenario
checked, what it expected, whether it passed, and what it observed, with what moves from run to run (MOVING) masked. Prints
the differences (none: "same") and exits 1 when there are any. Not a test: how issue 26 showed that the refactor
kept every scenario's report (docs/measurements.md).

Usage: python tests/bench/report_diff.py BEFORE/report.json AFTER/report.json
"""

import json
import re
import sys

# What moves from run to run: seconds, timestamps and shares measured at a moment; how many times a sampler read; the
# generated part of a name (a pod's generateName suffix, five of the API server's consonants and digits,
# apimachinery's util/rand; the hash Kueue ends a Workload's name with).
MOVING = [(re.compile(r"\d+\.\d+|\d{4}-\d\d-\d\dT[\d:.]+Z?"), "<t>"),
          (re.compile(r"\(\d+ samples\)"), "(<n> samples)"),
          (re.compile(r"(?<=-)[bcdfghjklmnpqrstvwxz2456789]{5}\b"), "<id>"),
          (re.compile(r"(job-[a-z0-9-]+?-)[0-9a-f]{5}\b"), r"\1<id>")]


def steady(value):
    """``value`` with what moves from run to run replaced (strings: each pattern of MOVING; numbers: floats)."""
    if isinstance(value, float):
        return "<t>"
    if isinstance(value, str):
        for pattern, replacement in MOVING:
            value = pattern.sub(replacement, value)
        return value
    if isinstance(value, list):
        return [steady(v) for v in value]
    if isinstance(value, dict):
        return dict((k, steady(v)) for k, v in value.items())
    return value


def outline(report):
    """``{scenario: [(check, expected, observed, passed)]}`` plus the report's verdict, cluster and tenants."""
    scenarios = {}
    for scenario in report.get("scenarios") or []:
        scenarios[scenario["name"]] = [
            (c.get("check"), steady(c.get("expected")), steady(c.get("observed")), c.get("passed"))
            for c in scenario.get("checks") or []]
    return {"passed": report.get("passed"), "failed_checks": steady(report.get("failed_checks")),
            "tenants": steady(report.get("tenants")), "capacity": steady(report.get("capacity")),
            "scenarios": scenarios}


def differences(before, after):
    lines = []
    for key in ("passed", "failed_checks", "tenants", "capacity"):
        if before[key] != after[key]:
            lines.append("%s: %s -> %s" % (key, json.dumps(before[key]), json.dumps(after[key])))
    for name in sorted(set(before["scenarios"]) | set(after["scenarios"])):
        old, new = before["scenarios"].get(name), after["scenarios"].get(name)
        if old is None or new is None:
            lines.append("scenario %s: %s" % (name, "only after" if old is None else "only before"))
            continue
        for index in range(max(len(old), len(new))):
            a = old[index] if index < len(old) else None
            b = new[index] if index < len(new) else None
            if a != b:
                lines.append("scenario %s check %d: %s -> %s" % (name, index, json.dumps(a), json.dumps(b)))
    return lines


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    reports = []
    for path in argv[1:]:
        with open(path) as handle:
            reports.append(outline(json.load(handle)))
    lines = differences(*reports)
    scenarios = reports[1]["scenarios"]
    checks = sum(len(c) for c in scenarios.values())
    print("\n".join(lines) if lines else "same: %d scenarios, %d checks (timings aside)" % (len(scenarios), checks))
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
