# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Parsers for the nvidia-smi outputs that describe a GPU node's MIG state. Pure logic, no cluster access.

Every parser takes the command's stdout as text and returns plain lists and dicts (JSON-serialisable).
Units: memory in MiB (``memory_gib`` keeps the GiB figure nvidia-smi prints), placements in memory slices.
A line that does not fit the format raises NvidiaSmiParseError naming its line number (1-based) and text.

- ``parse_list``: ``nvidia-smi -L``, MIG devices in the modern ``MIG-<uuid>`` and the R450-era
  ``MIG-GPU-<gpu uuid>/<gi>/<ci>`` forms.
- ``parse_gpu_instance_profiles``: ``nvidia-smi mig -lgip``.
- ``parse_gpu_instances``: ``nvidia-smi mig -lgi``.
- ``parse_compute_instances``: ``nvidia-smi mig -lci`` (with or without the Placement column).
- ``parse_query_gpu``: ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]``.
- ``parse_table``: the full ``nvidia-smi`` table; ``parse_mig_devices`` and ``parse_processes``: its "MIG devices" and
  "Processes" boxes given on their own.
- ``mig_tree`` and ``profile_counts`` combine them.

The three ``mig`` tables are read by words, not by column positions: their widths differ between driver
generations (the R525 and R570 ``-lgip`` layouts in ``shared/fixtures/nvidia-smi/`` are an example).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# The query of the GPUs' MIG modes and memory the readers ask nvidia-smi (and the lab's nvidia-smi answers).
QUERY_GPU = "--query-gpu=index,name,uuid,mig.mode.current,mig.mode.pending,memory.total --format=csv"

GPU_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9A-Fa-f-]+)\)$")
MIG_LINE = re.compile(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-(?:GPU-)?[0-9A-Fa-f-]+)(?:/(\d+)/(\d+))?\)$")
# Answers of `nvidia-smi mig -lgi|-lci|-lgip` when there is nothing to list, e.g. "No GPU instances found: Not Found"
NOTHING_FOUND = re.compile(r"^No .*(found|Found)")
# Values --query-gpu prints for a field the GPU or driver does not report, or the caller may not read: inside a
# container given only MIG devices, memory.* is "[Insufficient Permissions]" (ollama/ollama#932; the device plugin
# hits the same NVML answer, NVIDIA/k8s-device-plugin#1683).
MISSING_VALUES = ("[N/A]", "N/A", "[Not Supported]", "Not Supported", "[Insufficient Permissions]",
                  "Insufficient Permissions", "")
# --query-gpu fields whose values are whole numbers even without a unit.
INTEGER_FIELDS = ("index", "count")
QUERY_FIELD = re.compile(r"^[a-z_][a-z0-9_.]*( \[[^\]]+\])?$")
PLACEMENT_LINE = re.compile(r"^GPU\s+(\d+) Profile ID\s+(\d+) Placements?\s*: \{([0-9,]+)\}:(\d+)(?:\s.*)?$")
BANNER = re.compile(r"NVIDIA-SMI (\S+)\s+Driver Version: (\S+)\s+CUDA Version: (\S+)")


class NvidiaSmiParseError(ValueError):
    """Raised for nvidia-smi output that does not have the expected format, naming the offending line."""


def _fail(number, line, why):
    raise NvidiaSmiParseError("line %d: %s: %r" % (number, why, line))


def parse_list(text):
    """Parse ``nvidia-smi -L``.

    Returns a list of GPUs in output order: ``{"index": int, "name": str, "uuid": "GPU-...",
    "mig_devices": [{"index": int, "profile": str, "uuid": "MIG-...", "gi_id": int|None, "ci_id": int|None}]}``.
    ``gi_id``/``ci_id`` come from legacy ``MIG-GPU-<uuid>/<gi>/<ci>`` UUIDs (whose GPU part must be the parent's);
    modern UUIDs do not carry them (None). Output concatenated from several containers lists a GPU once per
    container; ``profile_counts`` and ``mig_tree`` merge such repeats by UUID.
    """
    gpus = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or (not gpus and NOTHING_FOUND.match(line.strip())):
            continue  # "No devices were found": no GPU, a state
        gpu = GPU_LINE.match(line.strip())
        if gpu:
            gpus.append({"index": int(gpu.group(1)), "name": gpu.group(2), "uuid": gpu.group(3), "mig_devices": []})
            continue
        mig = MIG_LINE.match(line.rstrip())
        if not mig:
            _fail(number, line, "not nvidia-smi -L output: expected 'GPU <n>: <name> (UUID: GPU-...)' or "
                                "'  MIG <profile> Device <n>: (UUID: MIG-...)'%s" % _other_format(text))
        if not gpus:
            _fail(number, line, "MIG device before any GPU line")
        uuid, gi_id, ci_id = mig.group(3), mig.group(4), mig.group(5)
        if gi_id is not None:
            if uuid[len("MIG-"):] != gpus[-1]["uuid"]:
                _fail(number, line, "legacy MIG UUID names another GPU than %s" % gpus[-1]["uuid"])
            gi_id, ci_id = int(gi_id), int(ci_id)
            uuid = "%s/%d/%d" % (uuid, gi_id, ci_id)
        gpus[-1]["mig_devices"].append(
            {"index": int(mig.group(2)), "profile": mig.group(1), "uuid": uuid, "gi_id": gi_id, "ci_id": ci_id}
        )
    return gpus


def _other_format(text):
    """A hint naming the format ``text`` does have, when it is another nvidia-smi output, else ''."""
    if BANNER.search(text):
        return " (this is the full nvidia-smi table: give it as the nvidia-smi output)"
    for title, command in (("GPU instance profiles:", "mig -lgip"), ("GPU instances:", "mig -lgi"),
                           ("Compute instances:", "mig -lci")):
        if re.search(r"^\|\s*%s" % re.escape(title), text, re.M):
            return " (this is nvidia-smi %s output)" % command
    if PLACEMENT_LINE.match(text.strip()):
        return " (this is nvidia-smi mig -lgipp output)"
    if GPU_LINE.match(text.strip().splitlines()[0].strip() if text.strip() else ""):
        return " (this is nvidia-smi -L output)"
    return ""


def parse_gpu_instance_placements(text):
    """Parse ``nvidia-smi mig -lgipp``: ``[{"gpu", "profile_id", "starts": [memory slice], "size": memory slices}]``
    in output order, from lines such as ``GPU  0 Profile ID 19 Placements: {0,1,2,3,4,5,6}:1`` (``Placement :``
    when there is one start; the MIG User Guide's example); [] for "No MIG-enabled devices found."."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or (not rows and NOTHING_FOUND.match(line.strip())):
            continue
        match = PLACEMENT_LINE.match(line.strip())
        if not match:
            _fail(number, line, "not nvidia-smi mig -lgipp output: expected 'GPU <n> Profile ID <id> Placements: "
                                "{<starts>}:<size>'%s" % _other_format(text))
        rows.append({"gpu": int(match.group(1)), "profile_id": int(match.group(2)),
                     "starts": [int(start) for start in match.group(3).split(",")], "size": int(match.group(4))})
    return rows


def _cells(line):
    return [cell.strip() for cell in line.strip()[1:-1].split("|")]


def _mib(value):
    match = re.match(r"^(\d+)\s*MiB$", value.strip())
    return int(match.group(1)) if match else None


def _records(lines, start):
    """Box-table records after the '====' line at or after ``start``: lists of (number, line) split at borders,
    up to the first line that is not inside the box. Returns (records, index of the next line)."""
    index = start
    while index < len(lines) and set(lines[index][1].strip()) - set("|+") != {"="}:
        index += 1
    records, current = [], []
    index += 1
    while index < len(lines) and lines[index][1].lstrip().startswith(("|", "+")):
        number, line = lines[index]
        if line.lstrip().startswith("|") and _cells(line)[0].split()[:2] in (["MIG", "devices:"], ["Processes:"]):
            break  # the next section's box
        if set(line.strip()) <= set("|+-"):
            if current:
                records.append(current)
            current = []
        else:
            current.append((number, line))
        index += 1
    if current:
        records.append(current)
    return records, index


def _gpu_record(record):
    (number, first), rest = record[0], record[1:]
    cells = _cells(first)
    head = re.match(r"^(\d+)\s+(.+?)\s+(On|Off)$", cells[0]) if len(cells) >= 3 else None
    if not head:
        _fail(number, first, "not a GPU row of the nvidia-smi table: expected '| <index> <name> <On|Off> | ...'")
    gpu = {"index": int(head.group(1)), "name": head.group(2), "persistence_mode": head.group(3),
           "bus_id": cells[1].split()[0] if cells[1] else None, "ecc": cells[2] or None, "memory_used_mib": None,
           "memory_total_mib": None, "utilization": None, "compute_mode": None, "mig_mode": None}
    if rest:
        number, second = rest[0]
        cells = _cells(second)
        memory = re.match(r"^(\d+)MiB\s*/\s*(\d+)MiB$", cells[1]) if len(cells) >= 3 else None
        if memory:
            gpu["memory_used_mib"], gpu["memory_total_mib"] = int(memory.group(1)), int(memory.group(2))
        elif len(cells) < 3 or cells[1] != "N/A":
            # N/A: in a pod given only MIG devices the parent GPU's memory is not readable (ollama/ollama#1500,
            # NVIDIA/DCGM#152): not reported, left None.
            _fail(number, second, "not a GPU row of the nvidia-smi table: expected '<used>MiB / <total>MiB' or 'N/A'")
        util = re.match(r"^(\d+%|N/A)\s+(.+)$", cells[2])
        if util:
            # Under MIG the GPU's utilisation is not reported: N/A, never 0.
            gpu["utilization"] = None if util.group(1) == "N/A" else int(util.group(1)[:-1])
            gpu["compute_mode"] = util.group(2)
    if len(rest) > 1:
        mode = _cells(rest[1][1])[-1]
        gpu["mig_mode"] = mode if mode in ("Enabled", "Disabled") else None
    return gpu


def _mig_records(records):
    """The MIG devices of a 'MIG devices' box's records; none for "No MIG devices found", what R580 prints in the box
    when MIG is on without instances (a state, not an error; a real capture in fixtures/nvidia-smi/)."""
    if len(records) == 1 and NOTHING_FOUND.match(_cells(records[0][0][1])[0]):
        return []
    return [_mig_record(record) for record in records]


def _mig_record(record):
    number, first = record[0]
    cells = _cells(first)
    ids = re.match(r"^(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$", cells[0]) if cells else None
    memory = re.match(r"^(\d+)MiB\s*/\s*(\d+)MiB$", cells[1]) if len(cells) > 1 else None
    if not ids or not memory:
        _fail(number, first, "not a row of the nvidia-smi 'MIG devices' table: expected '| <gpu> <gi> <ci> <mig dev> "
                             "| <used>MiB / <total>MiB | ...'")
    sm = re.match(r"^(\d+)", cells[2]) if len(cells) > 2 else None
    return {"gpu": int(ids.group(1)), "gi_id": int(ids.group(2)), "ci_id": int(ids.group(3)),
            "mig_device": int(ids.group(4)), "memory_used_mib": int(memory.group(1)),
            "memory_total_mib": int(memory.group(2)), "sm": int(sm.group(1)) if sm else None}


def _process_row(number, line, with_instances):
    body = line.strip()[1:-1].strip()
    if NOTHING_FOUND.match(body):
        return None
    pattern = (r"^(\d+)\s+(\S+)\s+(\S+)\s+(\d+)\s+(\S+)\s+(.*?)\s*(\d+MiB|N/A)$" if with_instances
               else r"^(\d+)\s+()()(\d+)\s+(\S+)\s+(.*?)\s*(\d+MiB|N/A)$")
    match = re.match(pattern, body)
    if not match:
        _fail(number, line, "not a row of the nvidia-smi Processes table")
    gi, ci = match.group(2), match.group(3)
    return {"gpu": int(match.group(1)), "gi_id": int(gi) if gi.isdigit() else None,
            "ci_id": int(ci) if ci.isdigit() else None, "pid": int(match.group(4)), "type": match.group(5),
            "name": match.group(6), "memory_mib": _mib(match.group(7))}


def parse_mig_devices(text):
    """Parse the "MIG devices" box of the ``nvidia-smi`` table given on its own (as users paste it): the
    ``mig_devices`` list of ``parse_table``. Raises NvidiaSmiParseError for text without that box."""
    lines = [(number, line.rstrip()) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    for index, (number, line) in enumerate(lines):
        if line.lstrip().startswith("|") and _cells(line)[0].split()[:2] == ["MIG", "devices:"]:
            records, _end = _records(lines, index + 1)
            return _mig_records(records)
    raise NvidiaSmiParseError("not the 'MIG devices' box of the nvidia-smi table: no '| MIG devices:' line%s"
                              % _other_format(text))


def _processes(lines, index):
    """The process rows of the Processes box whose title line is ``lines[index]``; (rows, index after the box)."""
    header = _cells(lines[index + 1][1])[0].split() if index + 1 < len(lines) else []
    records, end = _records(lines, index)
    rows = [_process_row(n, l, "GI" in header) for record in records for n, l in record]
    return [row for row in rows if row is not None], end


def parse_processes(text):
    """Parse the "Processes" box of the ``nvidia-smi`` table given on its own (as users paste it): the
    ``processes`` list of ``parse_table``. Raises NvidiaSmiParseError for text without that box."""
    lines = [(number, line.rstrip()) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    for index, (number, line) in enumerate(lines):
        if line.lstrip().startswith("|") and _cells(line)[0].split()[:1] == ["Processes:"]:
            return _processes(lines, index)[0]
    raise NvidiaSmiParseError("not the 'Processes' box of the nvidia-smi table: no '| Processes:' line%s"
                              % _other_format(text))


def parse_table(text):
    """Parse the full ``nvidia-smi`` table (the boxed layouts of driver branches 470 to 580).

    Returns ``{"nvidia_smi_version", "driver_version", "cuda_version", "gpus": [{"index", "name",
    "persistence_mode", "bus_id", "ecc", "memory_used_mib", "memory_total_mib" (None: N/A, as in a pod given only
    MIG devices), "utilization" (int % or None: N/A under MIG), "compute_mode", "mig_mode" ("Enabled" | "Disabled" | None: N/A)}], "mig_devices": [{"gpu",
    "gi_id", "ci_id", "mig_device", "memory_used_mib", "memory_total_mib", "sm"}], "processes": [{"gpu", "gi_id",
    "ci_id" (None: N/A, not a MIG device), "pid", "type", "name", "memory_mib"}]}``. Sections the output lacks are
    empty lists; a capture cut short after the GPU rows keeps what it has. Raises NvidiaSmiParseError for text
    without the ``NVIDIA-SMI <version> Driver Version: ...`` banner (another format) or a row that does not fit.
    """
    lines = [(number, line.rstrip()) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    banner = None
    for index, (number, line) in enumerate(lines):
        banner = BANNER.search(line)
        if banner:
            break
    if banner is None:
        raise NvidiaSmiParseError("not the full nvidia-smi table: no 'NVIDIA-SMI <version>  Driver Version: <version>"
                                  "  CUDA Version: <version>' banner%s" % _other_format(text))
    result = {"nvidia_smi_version": banner.group(1), "driver_version": banner.group(2),
              "cuda_version": banner.group(3), "gpus": [], "mig_devices": [], "processes": []}
    index += 1
    while index < len(lines):
        number, line = lines[index]
        words = _cells(line)[0].split() if line.lstrip().startswith("|") else []
        if words[:2] == ["GPU", "Name"]:
            records, index = _records(lines, index)
            result["gpus"] = [_gpu_record(record) for record in records]
        elif words[:2] == ["MIG", "devices:"]:
            records, index = _records(lines, index + 1)
            result["mig_devices"] = _mig_records(records)
        elif words[:1] == ["Processes:"]:
            result["processes"], index = _processes(lines, index)
        else:
            index += 1
    return result


def _placement(value):
    start, size = value.split(":")
    return {"start": int(start), "size": int(size)}


def _yes_no(value):
    return {"Yes": True, "No": False}[value]


def _instances(value):
    free, total = value.split("/")
    return int(free), int(total)


def _memory_mib(gib):
    # nvidia-smi prints MIG memory in GiB with two decimals (+-5 MiB). Every MIG memory size in the fixtures and
    # in GFD's labels (9984, 20096, 40320 MiB on an H100) is a multiple of 64 MiB, so rounding to 64 MiB gives it.
    return int(round(gib * 16)) * 64


# Header word -> (key, converter) for the words of the first header line, in their order. The second
# "GPU" of -lci is the GPU instance ID column (its header spans three lines: "GPU / Instance / ID").
LGIP_COLUMNS = {"GPU": ("gpu", int), "Name": ("profile", str), "ID": ("profile_id", int),
                "Instances": ("instances", _instances), "Memory": ("memory_gib", float), "P2P": ("p2p", _yes_no),
                "SM": ("sm", int), "DEC": ("dec", int), "ENC": ("enc", int)}
LGIP_SECOND_LINE = {"CE": ("ce", int), "JPEG": ("jpeg", int), "OFA": ("ofa", int)}
LGI_COLUMNS = {"GPU": ("gpu", int), "Name": ("profile", str), "Profile": ("profile_id", int),
               "Instance": ("id", int), "Placement": ("placement", _placement)}
LCI_COLUMNS = {"GPU": ("gpu", int), "GPU#2": ("gi_id", int), "Name": ("profile", str),
               "Profile": ("profile_id", int), "Instance": ("id", int), "Placement": ("placement", _placement)}


def _words(line):
    words = line.strip().strip("|").split()
    # A MIG profile name cell reads "MIG 1g.10gb": one value in two words.
    for i, word in enumerate(words[:-1]):
        if word == "MIG":
            words[i:i + 2] = [words[i + 1]]
            break
    return words


def _columns(number, line, known, required):
    names = []
    for word in _words(line):
        names.append(word + "#2" if word in names else word)
    missing = [name for name in required if name not in names]
    unknown = [name for name in names if name not in known]
    if missing or unknown:
        _fail(number, line, "header without columns %s or with unknown columns %s" % (missing, unknown))
    return [known[name] for name in names]


def _table(text, title, columns, required, second_line=None, command="nvidia-smi"):
    """Rows of one nvidia-smi box table. The words of the first header line name the values of a record's
    first line; ``second_line`` (header word -> (key, converter)) names the values of a record's second line,
    which are the last words of the second header line (``CE JPEG OFA`` in ``-lgip``)."""
    lines = [(number, line.rstrip()) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines or (len(lines) == 1 and NOTHING_FOUND.match(lines[0][1].strip())):
        return []  # "No MIG-enabled devices found." / "No GPU instances found.": a state, not an error
    if len(lines) < 4 or not lines[0][1].startswith("+-") or _words(lines[1][1]) != title.split():
        _fail(lines[0][0], lines[0][1], "not %s output: expected its box table titled %r%s"
              % (command, title, _other_format(text)))
    header_end = next((i for i, (_number, line) in enumerate(lines) if set(line.strip("|")) == {"="}), None)
    if header_end is None:
        _fail(lines[1][0], lines[1][1], "no '=====' line ends the header")
    specs = [_columns(lines[2][0], lines[2][1], columns, required)]
    if second_line:
        number, line = lines[3]
        if _words(line)[-len(second_line):] != list(second_line):
            _fail(number, line, "the second header line should end with %s" % " ".join(second_line))
        specs.append(list(second_line.values()))
    records = [[]]
    for number, line in lines[header_end + 1:]:
        if line.startswith("+-"):
            records.append([])
        elif line.startswith("|"):
            records[-1].append((number, line))
        else:
            _fail(number, line, "not a line of the %r table" % title)
    rows = []
    for record in filter(None, records):
        if len(record) != len(specs):
            _fail(record[0][0], record[0][1], "a record has %d lines, expected %d" % (len(record), len(specs)))
        row = {}
        for (number, line), spec in zip(record, specs):
            words = _words(line)
            if len(words) != len(spec):
                _fail(number, line, "expected %d values, found %d" % (len(spec), len(words)))
            try:
                row.update((key, convert(word)) for (key, convert), word in zip(spec, words))
            except (KeyError, ValueError):
                _fail(number, line, "a value does not have its column's format")
        rows.append(row)
    return rows


def parse_gpu_instance_profiles(text):
    """Parse ``nvidia-smi mig -lgip`` (GPU instance profiles; each profile spans two lines).

    Returns ``[{"gpu", "profile" (e.g. "1g.10gb+me"), "profile_id", "instances_free", "instances_total",
    "memory_gib" (float, as printed), "memory_mib" (int), "p2p" (bool), "sm", "dec", "enc", "ce", "jpeg",
    "ofa"}]`` (ints unless noted) in output order; [] for "No MIG-enabled devices found".
    """
    rows = _table(text, "GPU instance profiles:", LGIP_COLUMNS, list(LGIP_COLUMNS), LGIP_SECOND_LINE,
                  "nvidia-smi mig -lgip")
    for row in rows:
        row["instances_free"], row["instances_total"] = row.pop("instances")
        row["memory_mib"] = _memory_mib(row["memory_gib"])
    return rows


def parse_gpu_instances(text):
    """Parse ``nvidia-smi mig -lgi``: ``[{"gpu", "profile", "profile_id", "id", "placement": {"start", "size"}}]``
    (placement in memory slices) in output order; [] for "No GPU instances found"."""
    return _table(text, "GPU instances:", LGI_COLUMNS, list(LGI_COLUMNS), command="nvidia-smi mig -lgi")


def parse_compute_instances(text):
    """Parse ``nvidia-smi mig -lci``: ``[{"gpu", "gi_id", "profile" (e.g. "1c.3g.20gb"), "profile_id", "id",
    "placement": {"start", "size"} | None}]``; older drivers print the placement, newer ones do not."""
    rows = _table(text, "Compute instances:", LCI_COLUMNS, ["GPU", "GPU#2", "Name", "Profile", "Instance"],
                  command="nvidia-smi mig -lci")
    for row in rows:
        row.setdefault("placement", None)
    return rows


def _query_value(field, unit, value):
    if value in MISSING_VALUES:
        return None
    if unit is None and field not in INTEGER_FIELDS:
        number = re.match(r"^(-?[0-9.]+) (\S+)$", value)
        if not number:
            return value
        value, unit = number.groups()
    elif unit is not None and value.endswith(" " + unit):
        value = value[:-len(unit) - 1]
    number = float(value)
    return int(number) if number.is_integer() and "." not in value else number


def parse_query_gpu(text, fields=None):
    """Parse ``nvidia-smi --query-gpu=<fields> --format=csv`` output, one dict per GPU keyed by field name.

    The header line (``memory.total [MiB]``) names the fields and their units; with ``noheader`` pass the
    queried ``fields`` instead. Values with a unit, in the header or after the number (``81559 MiB``), and the
    ``index`` field become numbers (int when whole); ``[N/A]``, ``N/A`` and ``Not Supported`` become None, never
    0; other values stay strings (``Enabled``, ``00000000:01:00.0``). Raises NvidiaSmiParseError for a line with
    the wrong number of values.
    """
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    if fields is None:
        if not lines:
            raise NvidiaSmiParseError("no header line: pass fields= for --format=csv,noheader output")
        number, header = lines.pop(0)
        fields = [name.strip() for name in header.split(",")]
        if not all(QUERY_FIELD.match(name) for name in fields):
            _fail(number, header, "not nvidia-smi --query-gpu=... --format=csv output: expected a header of field "
                                  "names such as 'index, memory.total [MiB]'%s" % _other_format(text))
    columns = []
    for name in fields:
        unit = re.match(r"^(\S+) \[(.+)\]$", name)
        columns.append(unit.groups() if unit else (name, None))
    rows = []
    for number, line in lines:
        values = [value.strip() for value in line.split(",")]
        if len(values) != len(columns):
            _fail(number, line, "expected %d comma-separated values, found %d" % (len(columns), len(values)))
        try:
            rows.append({field: _query_value(field, unit, value) for (field, unit), value in zip(columns, values)})
        except ValueError:
            _fail(number, line, "a value is not a number although its field has a unit")
    return rows


def _merged(gpus):
    merged = {}
    for gpu in gpus:
        entry = merged.setdefault(gpu["uuid"], dict(gpu, mig_devices=[]))
        entry["mig_devices"].extend(gpu["mig_devices"])
    return list(merged.values())


def profile_counts(gpus):
    """MIG devices per profile of each GPU of ``parse_list`` output (repeated GPUs merged by UUID).

    Returns ``[{"index", "uuid", "name", "profiles": {profile: count}}]`` in first-seen order.
    """
    counts = []
    for gpu in _merged(gpus):
        profiles = {}
        for device in gpu["mig_devices"]:
            profiles[device["profile"]] = profiles.get(device["profile"], 0) + 1
        counts.append({"index": gpu["index"], "uuid": gpu["uuid"], "name": gpu["name"], "profiles": profiles})
    return counts


def _gi_profile(profile):
    # A compute instance smaller than its GPU instance is named "<c>c.<gi profile>", e.g. 1c.3g.20gb.
    return re.sub(r"^\d+c\.", "", profile)


def mig_tree(gpus, gpu_instances=None, compute_instances=None):
    """The GPU -> GPU instance -> compute instance tree of a node.

    ``gpus``: ``parse_list`` output; ``gpu_instances``: ``parse_gpu_instances`` output; ``compute_instances``:
    ``parse_compute_instances`` output (both optional). Returns ``[{"index", "name", "uuid", "gpu_instances":
    [{"id", "profile", "profile_id", "placement": {"start", "size"} | None, "compute_instances": [{"id",
    "profile", "profile_id", "uuid"}]}]}]`` with instances sorted by ID.

    nvidia-smi -L lists MIG devices in (GPU instance ID, compute instance ID) order (see the H100 PCIe fixtures:
    GI 2 first, then 7, 8, 9), so the devices are matched to the compute instances in that order. Without -lci
    each GPU instance is taken to hold one compute instance (what ``-cgi ... -C`` and mig-parted create), with
    the IDs of legacy UUIDs or None. Without -lgi the GPU instances come from the MIG devices (profile_id and
    placement None). Raises NvidiaSmiParseError when the outputs disagree (counts or profile names).
    """
    tree = []
    for gpu in _merged(gpus):
        where = "GPU %d (%s)" % (gpu["index"], gpu["uuid"])
        devices = gpu["mig_devices"]
        gis = None
        if gpu_instances is not None:
            gis = sorted((dict(gi, compute_instances=[]) for gi in gpu_instances if gi["gpu"] == gpu["index"]),
                         key=lambda gi: gi["id"])
        if compute_instances is not None:
            cis = sorted((ci for ci in compute_instances if ci["gpu"] == gpu["index"]),
                         key=lambda ci: (ci["gi_id"], ci["id"]))
        elif gis is not None and all(device["gi_id"] is None for device in devices):
            if len(devices) != len(gis):
                raise NvidiaSmiParseError("%s: -L lists %d MIG devices for %d GPU instances; give the -lci output"
                                          % (where, len(devices), len(gis)))
            cis = [{"gi_id": gi["id"], "id": None, "profile": gi["profile"], "profile_id": None} for gi in gis]
        else:
            cis = [{"gi_id": d["gi_id"], "id": d["ci_id"], "profile": d["profile"], "profile_id": None}
                   for d in devices]
        if len(cis) != len(devices):
            raise NvidiaSmiParseError("%s: -L lists %d MIG devices but there are %d compute instances"
                                      % (where, len(devices), len(cis)))
        if gis is None:
            gis = []
            for ci in cis:
                if ci["gi_id"] is None or not gis or gis[-1]["id"] != ci["gi_id"]:
                    gis.append({"id": ci["gi_id"], "profile": _gi_profile(ci["profile"]), "profile_id": None,
                                "placement": None, "compute_instances": []})
        by_id = {gi["id"]: gi for gi in gis}
        for position, (ci, device) in enumerate(zip(cis, devices)):
            if ci["profile"] != device["profile"]:
                raise NvidiaSmiParseError("%s: MIG device %d is %s but compute instance %s of GPU instance %s is %s"
                                          % (where, device["index"], device["profile"], ci["id"], ci["gi_id"],
                                             ci["profile"]))
            gi = by_id.get(ci["gi_id"]) if ci["gi_id"] is not None else gis[position]
            if gi is None:
                raise NvidiaSmiParseError("%s: compute instance %s belongs to GPU instance %s, which -lgi does not list"
                                          % (where, ci["id"], ci["gi_id"]))
            gi["compute_instances"].append({"id": ci["id"], "profile": ci["profile"],
                                            "profile_id": ci["profile_id"], "uuid": device["uuid"]})
        tree.append({"index": gpu["index"], "name": gpu["name"], "uuid": gpu["uuid"],
                     "gpu_instances": [{key: gi[key] for key in ("id", "profile", "profile_id", "placement",
                                                                 "compute_instances")} for gi in gis]})
    return tree
