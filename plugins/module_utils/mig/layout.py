# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""MIG profiles of the MIG-capable GPU models, validation of mig-parted configs, and what the NVIDIA device
plugin and GPU feature discovery (GFD) publish for a partitioned node. Pure logic, no cluster access.

Units: compute and memory slices (the A100, H100 and H200 have 7 compute and 8 memory slices, the A30 4 and 4),
memory in MiB, instance counts per GPU. Models are keyed by their GFD ``nvidia.com/gpu.product`` label, as in
``gpu_catalog.GPU_MODELS``.

A *layout* says what a node's GPUs carry: None (MIG disabled on every GPU), ``{profile: count}`` (these MIG
instances on every GPU) or a list with one of those per GPU index (``{}``: MIG enabled without instances).

Upstream rules used here:

- Profiles, profile IDs, max instances and placements: NVIDIA MIG User Guide ("Supported MIG Profiles" and the
  ``nvidia-smi mig -lgipp`` examples). A set of instances fits one GPU when its compute slices add up to at most
  the GPU's and its GPU instances can sit on allowed start slices without sharing a memory slice. So 3 x 2g.20gb
  + 1g.10gb fits an H100, and 2 x 3g.40gb + 1g.10gb does not although the compute slices add up to 7.
- Config format: NVIDIA/mig-parted ``api/spec/v1/spec.go``: ``version: v1``; an entry needs ``devices`` ("all" or
  a list of indices) and ``mig-enabled``; ``mig-devices`` maps a profile to a count, is required when MIG is
  enabled and must be empty when it is not; ``device-filter`` (a PCI device ID or a list) limits an entry to
  GPUs of those models. fairgpu also rejects what mig-parted accepts but leaves a node useless: MIG enabled with
  no instances, and a GPU covered by two entries of one config.
- Resources and labels: the device plugin's and GFD's MIG strategies. ``single``: every MIG device of the node
  has the same profile and no GPU is MIG-disabled or empty, otherwise GFD labels the node
  ``<model>-MIG-INVALID`` with count 0 and the plugin exposes no GPUs; MIG devices count as ``nvidia.com/gpu``.
  ``mixed``: ``nvidia.com/mig-<profile>`` per profile (``+`` becomes ``.``, so ``1g.10gb+me`` is
  ``nvidia.com/mig-1g.10gb.me``) and MIG-disabled GPUs stay ``nvidia.com/gpu``.

Errors: ``mig_config_errors`` returns every problem it finds as a list of messages and never raises;
``validate_mig_config`` raises MigLayoutError carrying all of them. The other functions raise MigLayoutError
for an unknown model or a layout that does not fit.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import GPU_RESOURCE, MIG_CONFIG_LABEL, MIG_STATE_LABEL
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.catalog import (
    GPU_MODELS,
    MIG_STRATEGIES,
    GpuCatalogError,
    gfd_labels,
)
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import resources

PROFILE_NAME = re.compile(r"^([1-8])g\.[0-9]+gb")
# The shape of a MIG profile name whatever the model (go-nvlib's ParseMigProfile, used by mig-parted's
# pkg/types/mig_profile.go AssertValidMigProfileFormat at v0.13.1): [<C>c.]<G>g.<M>gb with attributes such as
# +me, +me.all, +gfx, -me.
PROFILE_FORMAT = re.compile(r"^([0-9]+c\.)?[0-9]+g\.[0-9]+gb(\+[a-z]+(\.all)?)*(-[a-z]+)?$")
# -lgip's attribute columns in the order it prints them: SM DEC ENC on a profile's first line, CE JPEG OFA below.
ATTRIBUTES = ("sm", "dec", "enc", "ce", "jpeg", "ofa")
# GFD's engine labels (nvidia.com/mig-<profile>.engines.<name>) -> -lgip attribute.
ENGINE_LABELS = (("copy", "ce"), ("decoder", "dec"), ("encoder", "enc"), ("jpeg", "jpeg"), ("ofa", "ofa"))
ENTRY_FIELDS = ("devices", "mig-enabled", "mig-devices", "device-filter")

# (profile ID, max instances, allowed starts, memory slices) in -lgip order, from `nvidia-smi mig -lgipp` on an
# A100 / H100 (MIG User Guide; the H200 shares IDs and placements) and on an A30 (4 memory slices).
SEVEN_SLICE = ((19, 7, range(7), 1), (20, 1, range(7), 1), (15, 4, (0, 2, 4, 6), 2), (14, 3, (0, 2, 4), 2),
               (9, 2, (0, 4), 4), (5, 1, (0,), 4), (0, 1, (0,), 8))
FOUR_SLICE = ((14, 4, range(4), 1), (21, 1, range(4), 1), (5, 2, (0, 2), 2), (6, 1, (0, 2), 2), (0, 1, (0,), 4))

# product label: (nvidia-smi name, PCI device ID as mig-parted's device-filter writes it, geometry,
#   profile names in geometry order, {profile: (memory MiB, (SM, DEC, ENC, CE, JPEG, OFA))} where a real
#   capture gives them; the figures change with the driver, so a node's own -lgip wins, see catalogue_from_lgip).
MODEL_DATA = {
    # Figures: MIG User Guide, `nvidia-smi mig -lgip` on an A100-SXM4-40GB (4.75 / 9.62 / 19.50 / 39.25 GiB).
    "NVIDIA-A100-SXM4-40GB": ("NVIDIA A100-SXM4-40GB", "0x20B010DE", SEVEN_SLICE,
                              ("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
                              {"1g.5gb": (4864, (14, 0, 0, 1, 0, 0)), "1g.5gb+me": (4864, (14, 1, 0, 1, 1, 1)),
                               "1g.10gb": (9856, (14, 1, 0, 1, 0, 0)), "2g.10gb": (9856, (28, 1, 0, 2, 0, 0)),
                               "3g.20gb": (19968, (42, 2, 0, 3, 0, 0)), "4g.20gb": (19968, (56, 2, 0, 4, 0, 0)),
                               "7g.40gb": (40192, (98, 5, 0, 7, 1, 1))}),
    "NVIDIA-A100-SXM4-80GB": ("NVIDIA A100-SXM4-80GB", "0x20B210DE", SEVEN_SLICE,
                              ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"), {}),
    # Figures: GFD labels of a real H100 80GB HBM3 node, driver 550 (shared/fixtures/node-labels/).
    "NVIDIA-H100-80GB-HBM3": ("NVIDIA H100 80GB HBM3", "0x233010DE", SEVEN_SLICE,
                              ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
                              {"1g.10gb": (9984, (16, 1, 0, 1, 1, 0)), "2g.20gb": (20096, (32, 2, 0, 2, 2, 0)),
                               "3g.40gb": (40320, (60, 3, 0, 3, 3, 0))}),
    # Figures: `nvidia-smi mig -lgip` on an H100 PCIe, driver 570 (shared/fixtures/nvidia-smi/).
    "NVIDIA-H100-PCIe": ("NVIDIA H100 PCIe", "0x233110DE", SEVEN_SLICE,
                         ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
                         {"1g.10gb": (9984, (14, 1, 0, 1, 1, 0)), "1g.10gb+me": (9984, (14, 1, 0, 1, 1, 1)),
                          "1g.20gb": (20096, (14, 1, 0, 1, 1, 0)), "2g.20gb": (20096, (30, 2, 0, 2, 2, 0)),
                          "3g.40gb": (40448, (46, 3, 0, 3, 3, 0)), "4g.40gb": (40448, (62, 4, 0, 4, 4, 0)),
                          "7g.80gb": (81152, (114, 7, 0, 8, 7, 1))}),
    "NVIDIA-H200": ("NVIDIA H200", "0x233510DE", SEVEN_SLICE,
                    ("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"), {}),
    "NVIDIA-A30": ("NVIDIA A30", "0x20B710DE", FOUR_SLICE, ("1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb"),
                   {}),
}


class MigLayoutError(ValueError):
    """Raised for an unknown MIG model, an invalid mig-parted config or a layout that does not fit a GPU.

    ``errors`` holds every message (one per line of the exception's text).
    """

    def __init__(self, errors):
        self.errors = [errors] if isinstance(errors, str) else list(errors)
        super(MigLayoutError, self).__init__("\n".join(self.errors))


def compute_slices(profile):
    """Compute slices of a profile name such as ``3g.40gb`` or ``1g.10gb+me`` (3 and 1); None if not a profile."""
    match = PROFILE_NAME.match(profile) if isinstance(profile, str) else None
    return int(match.group(1)) if match else None


def mig_resource(profile):
    """The mixed-strategy resource name of a profile: ``nvidia.com/mig-2g.20gb``, ``nvidia.com/mig-1g.10gb.me``
    (``mig.resources.resource_name``, which cites the device plugin's rule). Raises MigLayoutError for a profile
    the device plugin advertises no resource for."""
    name = resources.resource_name(profile)
    if name is None:
        raise MigLayoutError("%r is not a GPU instance profile the device plugin advertises (it names a resource "
                             "only for <G>g.<N>gb profiles whose compute instance spans the GPU instance)" % (profile,))
    return name


def product_label(name):
    """GFD's ``nvidia.com/gpu.product`` value for an nvidia-smi GPU name (spaces become dashes, as GFD does)."""
    return name.replace(" ", "-")


def profile_resource(profile, product=None, catalogue=None):
    """The device plugin's resource for ``profile`` of ``product``: the catalogue entry's ``resource`` where it
    has one (a node's own -lgip, see ``catalogue_from_lgip``), else ``mig_resource(profile)``."""
    model = catalogue if catalogue is not None else MIG_MODELS.get(product)
    entry = (model or {}).get("profiles", {}).get(profile) or {}
    return entry.get("resource") or mig_resource(profile)


def placement_starts(compute, memory, total_compute, total_memory):
    """Start slices a GPU instance of ``compute`` compute and ``memory`` memory slices may take: a multiple of its
    memory size, inside the memory slices, and not past the last compute slice. Every placement nvidia-smi
    -lgipp prints for the built-in models follows this rule (tested); ``catalogue_from_lgip`` uses it for
    profiles the built-in catalogue does not know."""
    return [start for start in range(0, total_memory, memory)
            if start + memory <= total_memory and start + compute <= total_compute]


def _build(product, name, pci_device_id, geometry, names, known):
    profiles = {}
    for (profile_id, most, starts, memory), profile in zip(geometry, names):
        memory_mib, attributes = known.get(profile, (None, None))
        profiles[profile] = {
            "id": profile_id, "compute_slices": compute_slices(profile), "memory_slices": memory,
            "max_instances": most, "starts": list(starts), "memory_mib": memory_mib,
            "attributes": dict(zip(ATTRIBUTES, attributes)) if attributes else None,
            # The built-in names are go-nvlib's (tested in test_mig_resources against the catalogue's memory).
            "resource": resources.resource_name(profile),
        }
    return {"product": product, "name": name, "pci_device_id": pci_device_id,
            "compute_slices": compute_slices(names[-1]), "memory_slices": geometry[-1][3], "profiles": profiles}


# product label -> {"product", "name" (nvidia-smi), "pci_device_id", "compute_slices", "memory_slices",
#   "profiles": {profile: {"id", "compute_slices", "memory_slices", "max_instances", "starts" (memory slice
#   indices), "memory_mib" (int or None: unknown), "attributes" ({"sm", "dec", "enc", "ce", "jpeg", "ofa"}
#   or None: unknown), "resource" (the device plugin's resource name)}}}
MIG_MODELS = {product: _build(product, *data) for product, data in MODEL_DATA.items()}


def mig_model(product, catalogue=None):
    """The catalogue entry of ``product``: ``catalogue`` when given (e.g. from ``catalogue_from_lgip``), else the
    built-in one. Raises MigLayoutError naming the known products for a product without MIG data."""
    if catalogue is not None:
        return catalogue
    try:
        return MIG_MODELS[product]
    except (KeyError, TypeError):
        raise MigLayoutError("no MIG profiles known for GPU product %r: use one of %s"
                             % (product, ", ".join(sorted(MIG_MODELS))))


def catalogue_from_lgip(profiles, product, placements=None, device_memory_mib=None):
    """Build ``product``'s catalogue entry from the node's own ``nvidia-smi mig -lgip`` rows
    (``nvidia_smi.parse_gpu_instance_profiles`` output; the first GPU's rows are used) and, when given, its
    ``nvidia-smi mig -lgipp`` rows (``nvidia_smi.parse_gpu_instance_placements``).

    The node is the authority for profile names, IDs, max instances (the Total column), memory and attributes:
    they vary by driver (7g.79gb against 7g.80gb; 9.62 against 9.75 GiB). Placements come from -lgipp; without
    it, from the built-in profile with the same ID, or for a profile the built-in model lacks, memory slices in
    proportion to its memory and the starts of ``placement_starts``. A model the built-in catalogue lacks needs
    -lgipp (its slice counts and placements are known nowhere else). Raises MigLayoutError saying which.

    Each profile also gets the ``resource`` the device plugin names it by (``resources.device_plugin_profile``:
    go-nvlib's memory figure from ``device_memory_mib``, the GPU's total memory, by default the catalogue's), so a
    driver's ``7g.79gb`` on an 80 GiB A100 is advertised as ``nvidia.com/mig-7g.80gb``.
    """
    if device_memory_mib is None:
        device_memory_mib = GPU_MODELS.get(product, {}).get("memory_mib")
    rows = [row for row in profiles if row["gpu"] == profiles[0]["gpu"]] if profiles else []
    if not rows:
        raise MigLayoutError("no GPU instance profiles in the -lgip output: is MIG enabled on the GPU?")
    placed = {row["profile_id"]: row for row in (placements or []) if row["gpu"] == rows[0]["gpu"]}
    if product in MIG_MODELS:
        base = MIG_MODELS[product]
    elif placed:
        base = {"product": product, "name": None, "pci_device_id": None,
                # A profile's Total is the most instances of it the GPU holds, so G x Total never exceeds the
                # GPU's compute slices and reaches them at the 1g profile (MIG User Guide, supported profiles):
                # an -lgip excerpt without the full-GPU profile still counts them.
                "compute_slices": max((compute_slices(row["profile"]) or 0) * max(1, row["instances_total"])
                                      for row in rows),
                "memory_slices": max(max(row["starts"]) + row["size"] for row in placed.values()), "profiles": {}}
    else:
        raise MigLayoutError("%s is not in the built-in MIG catalogue (%s) and no nvidia-smi mig -lgipp output was "
                             "given: its -lgip rows name the profiles but not their placements"
                             % (product, ", ".join(sorted(MIG_MODELS))))
    by_id = {profile["id"]: profile for profile in base["profiles"].values()}
    full = max(rows, key=lambda row: row["memory_mib"])
    catalogue = dict(base, profiles={})
    for row in rows:
        known = by_id.get(row["profile_id"])
        compute = compute_slices(row["profile"])
        if compute is None:
            raise MigLayoutError("-lgip lists %r, which is not a MIG profile name" % row["profile"])
        if row["profile_id"] in placed:
            memory, starts = placed[row["profile_id"]]["size"], placed[row["profile_id"]]["starts"]
        elif placed:
            raise MigLayoutError("-lgipp has no placements for profile ID %d (%s) that -lgip lists"
                                 % (row["profile_id"], row["profile"]))
        elif known is not None:
            memory, starts = known["memory_slices"], known["starts"]
        else:
            memory = max(1, int(round(row["memory_mib"] * base["memory_slices"] / full["memory_mib"])))
            starts = placement_starts(compute, memory, base["compute_slices"], base["memory_slices"])
        catalogue["profiles"][row["profile"]] = {
            "id": row["profile_id"], "compute_slices": compute, "memory_slices": memory,
            "max_instances": row["instances_total"], "starts": list(starts), "memory_mib": row["memory_mib"],
            "attributes": {name: row[name] for name in ATTRIBUTES},
            "resource": resources.resource_name(
                resources.device_plugin_profile(row["profile"], row["memory_mib"], device_memory_mib)
                if device_memory_mib else row["profile"]),
        }
    return catalogue


def profile_memory_mib(product, profile, catalogue=None):
    """Memory of one ``profile`` instance in MiB: the catalogue's figure, or where it has none an estimate, the
    GPU's memory (``gpu_catalog``) shared by memory slices and rounded down to 64 MiB."""
    model = mig_model(product, catalogue)
    entry = model["profiles"][profile]
    if entry["memory_mib"] is not None:
        return entry["memory_mib"]
    share = GPU_MODELS[product]["memory_mib"] * entry["memory_slices"] // model["memory_slices"]
    return share // 64 * 64


def _search(model, instances):
    """Starts for ``instances`` (profile names, placed in this order) on free memory slices, or None."""
    failed = set()

    def place(index, used):
        if index == len(instances):
            return []
        if (index, used) in failed:
            return None
        profile = model["profiles"][instances[index]]
        for start in profile["starts"]:
            mask = ((1 << profile["memory_slices"]) - 1) << start
            if not used & mask:
                rest = place(index + 1, used | mask)
                if rest is not None:
                    return [start] + rest
        failed.add((index, used))
        return None

    return place(0, 0)


def placement(mig_devices, product, catalogue=None):
    """Where the instances ``{profile: count}`` go on one GPU of ``product``, or None if they do not fit (more
    than a profile's max instances, more compute slices than the GPU has, or no placement on allowed starts).

    Returns ``[{"profile", "start", "size"}]`` sorted by start (start and size in memory slices). Smaller
    instances are placed first, each at the lowest free allowed start (with backtracking): that reproduces the
    placements in the fixtures (``-cgi 9,19,19,19`` on an H100 PCIe puts 1g.10gb at 0, 1, 2 and 3g.40gb at 4).
    Raises MigLayoutError for a profile the model does not offer.
    """
    model = mig_model(product, catalogue)
    for profile in mig_devices:
        if profile not in model["profiles"]:
            raise MigLayoutError("%s does not offer MIG profile %r; valid profiles are %s"
                                 % (model["product"], profile, ", ".join(model["profiles"])))
    profiles = model["profiles"]
    if any(count > profiles[profile]["max_instances"] for profile, count in mig_devices.items()):
        return None
    if sum(profiles[profile]["compute_slices"] * count for profile, count in mig_devices.items()) > \
            model["compute_slices"]:
        return None
    instances = sorted((profile for profile, count in mig_devices.items() for _copy in range(count)),
                       key=lambda profile: (profiles[profile]["memory_slices"], profiles[profile]["compute_slices"],
                                            profile))
    starts = _search(model, instances)
    if starts is None:
        return None
    return sorted(({"profile": profile, "start": start, "size": profiles[profile]["memory_slices"]}
                   for profile, start in zip(instances, starts)), key=lambda instance: instance["start"])


def free_instances(profile, placed, product, catalogue=None):
    """How many more ``profile`` instances fit next to ``placed`` (``placement`` output) on one GPU: the Free
    column of ``nvidia-smi mig -lgip``."""
    model = mig_model(product, catalogue)
    entry = model["profiles"][profile]
    used = 0
    for instance in placed:
        used |= ((1 << instance["size"]) - 1) << instance["start"]
    free_starts = sum(1 for start in entry["starts"] if not used & (((1 << entry["memory_slices"]) - 1) << start))
    compute_left = model["compute_slices"] - sum(model["profiles"][i["profile"]]["compute_slices"] for i in placed)
    taken = sum(1 for instance in placed if instance["profile"] == profile)
    return max(0, min(free_starts, compute_left // entry["compute_slices"], entry["max_instances"] - taken))


def _whole(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _mentions(value, key):
    if isinstance(value, dict):
        return key in value or any(_mentions(item, key) for item in value.values())
    if isinstance(value, list):
        return any(_mentions(item, key) for item in value)
    return False


def _wrong_format(entry):
    """True for the shape ``mig-devices: {"0": {"gi-profile": "2g.20gb", ...}}`` (keyed by GPU index)."""
    mig_devices = entry.get("mig-devices")
    if isinstance(mig_devices, list) or _mentions(entry, "gi-profile"):
        return True
    return isinstance(mig_devices, dict) and any(
        _whole(key) or (isinstance(key, str) and key.isdigit()) or isinstance(value, (dict, list))
        for key, value in mig_devices.items())


def _filters(entry):
    value = entry.get("device-filter")
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    return None


def _applies(entry, model):
    filters = _filters(entry)
    # A model known only from its node report has no PCI device ID here: a filtered entry is taken not to apply.
    return not filters or (model["pci_device_id"] or "").lower() in [item.lower() for item in filters]


def _fit_errors(where, mig_devices, model):
    """Messages for ``mig_devices`` ({profile: whole count >= 0}) that do not fit one GPU of ``model``."""
    product, profiles = model["product"], model["profiles"]
    unknown = [profile for profile in mig_devices if profile not in profiles]
    if unknown:
        return ["%s: %s does not offer MIG profile %r; valid profiles are %s"
                % (where, product, profile, ", ".join(profiles)) for profile in unknown]
    errors = ["%s: %d x %s, but one %s GPU holds at most %d of that profile"
              % (where, count, profile, product, profiles[profile]["max_instances"])
              for profile, count in mig_devices.items() if count > profiles[profile]["max_instances"]]
    used = sum(profiles[profile]["compute_slices"] * count for profile, count in mig_devices.items())
    if not errors and used > model["compute_slices"]:
        errors.append("%s: the instances need %d compute slices but one %s GPU has %d"
                      % (where, used, product, model["compute_slices"]))
    if not errors and placement(mig_devices, product, model) is None:
        errors.append(
            "%s: the instances cannot be placed on the %d memory slices of one %s GPU: they need %d, and a GPU "
            "instance may start only at its profile's allowed slices (%s)"
            % (where, model["memory_slices"], product,
               sum(profiles[profile]["memory_slices"] * count for profile, count in mig_devices.items()),
               ", ".join("%s at {%s} size %d" % (profile, ",".join(map(str, profiles[profile]["starts"])),
                                                 profiles[profile]["memory_slices"]) for profile in mig_devices)))
    return errors


def _entry(where, entry, model, gpu_count, errors):
    """Check one mig-parted entry; return ``(GPU indices it sets or None, {profile: count} or None)``. With
    ``model`` None only the format is checked (what mig-parted's parser refuses in any config of the file)."""
    if _wrong_format(entry):
        errors.append('%s.mig-devices: maps a profile name to a count, e.g. {"2g.20gb": 2}; it is not keyed by GPU '
                      "index and has no gi-profile field: put the GPU indices in devices" % where)
    for field in sorted(str(key) for key in entry if key not in ENTRY_FIELDS and key != "gi-profile"):
        errors.append("%s.%s: unknown field; mig-parted knows %s" % (where, field, ", ".join(ENTRY_FIELDS)))
    for field in ("devices", "mig-enabled"):
        if field not in entry:
            errors.append("%s: the required field %s is missing" % (where, field))
    devices, indices = entry.get("devices"), None
    if devices == "all":
        indices = list(range(gpu_count)) if model else None
    elif isinstance(devices, list) and devices and all(_whole(index) for index in devices) and not model:
        if len(set(devices)) != len(devices):
            errors.append("%s.devices: %r lists a GPU twice" % (where, devices))
    elif isinstance(devices, list) and devices and all(_whole(index) for index in devices):
        indices = sorted(set(index for index in devices if 0 <= index < gpu_count))
        for index in sorted(set(devices) - set(indices)):
            errors.append("%s.devices: GPU index %d does not exist; the node has %d GPUs (indices 0-%d)"
                          % (where, index, gpu_count, gpu_count - 1))
        if len(set(devices)) != len(devices):
            errors.append("%s.devices: %r lists a GPU twice" % (where, devices))
    elif "devices" in entry:
        errors.append('%s.devices: %r is neither "all" nor a non-empty list of GPU indices (write devices: all or '
                      "devices: [%s])" % (where, devices, devices if _whole(devices) else 0))
    if _filters(entry) is None:
        errors.append("%s.device-filter: give a PCI device ID such as %s or a list of them, got %r"
                      % (where, model["pci_device_id"] if model else "0x233010DE", entry.get("device-filter")))
    enabled, mig_devices = entry.get("mig-enabled"), entry.get("mig-devices")
    if "mig-enabled" in entry and not isinstance(enabled, bool):
        errors.append("%s.mig-enabled: must be true or false, got %r" % (where, enabled))
    if enabled is False and mig_devices:
        errors.append("%s.mig-devices: given although mig-enabled is false; mig-parted rejects that" % where)
    layout = None
    if enabled is True and not _wrong_format(entry):
        layout = _instances(where, mig_devices, model, bool(model) and _applies(entry, model), errors)
    if not model:
        return None, layout
    usable = (isinstance(enabled, bool) and _filters(entry) is not None and _applies(entry, model)
              and (layout is not None or not enabled))
    return (indices if usable else None), layout


def _instances(where, mig_devices, model, applies, errors):
    """Check an enabled entry's ``mig-devices``; return ``{profile: count > 0}`` when valid, else None."""
    if mig_devices is not None and not isinstance(mig_devices, dict):
        errors.append("%s.mig-devices: must map profile names to counts, got %r" % (where, mig_devices))
        return None
    bad = [(profile, count) for profile, count in (mig_devices or {}).items()
           if not isinstance(profile, str) or not _whole(count) or count < 0]
    for profile, count in bad:
        errors.append("%s.mig-devices: %r: the count must be a whole number >= 0, got %r" % (where, profile, count))
    if bad:
        return None
    malformed = [profile for profile in mig_devices or {} if not PROFILE_FORMAT.match(profile)]
    for profile in malformed:
        errors.append("%s.mig-devices: %r is not a MIG profile name (<compute>g.<memory>gb, e.g. 2g.20gb or "
                      "1g.10gb+me); mig-parted cannot read the file" % (where, profile))
    if malformed:
        return None
    layout = {profile: count for profile, count in (mig_devices or {}).items() if count}
    if not layout:
        errors.append("%s.mig-devices: MIG is enabled but no instances are listed; such a GPU serves no pods (and "
                      "GFD labels the node %s-MIG-INVALID under the single strategy): list instances or set "
                      "mig-enabled: false" % (where, model["product"] if model else "<model>"))
        return None
    fit = _fit_errors("%s.mig-devices" % where, layout, model) if applies else []
    errors.extend(fit)
    return None if fit else layout


def _config_errors(name, entries, model, gpu_count, strategy):
    where = "mig-configs.%s" % (name,)
    if not isinstance(entries, list) or not entries:
        return ["%s: give a non-empty list of entries (devices, mig-enabled, mig-devices)" % where]
    errors, owners, overlaps, layouts = [], {}, {}, {}
    for number, entry in enumerate(entries):
        at = "%s[%d]" % (where, number)
        if not isinstance(entry, dict):
            errors.append("%s: must be a mapping with devices, mig-enabled and (when enabled) mig-devices" % at)
            continue
        indices, layout = _entry(at, entry, model, gpu_count, errors)
        for index in indices or []:
            if index in owners:
                overlaps.setdefault((owners[index], number), []).append(index)
            else:
                owners[index] = number
                layouts[index] = layout
    for (first, second), indices in sorted(overlaps.items()):
        errors.append("%s: GPU %s set by both entry %d and entry %d; each GPU may be covered by one entry"
                      % (where, ", ".join(map(str, indices)), first, second))
    enabled = {index: layout for index, layout in layouts.items() if layout is not None}
    if model and strategy == "single" and enabled:
        profiles = sorted(set(profile for layout in enabled.values() for profile in layout))
        disabled = sorted(set(layouts) - set(enabled))
        if len(profiles) > 1:
            errors.append("%s: the single MIG strategy needs one profile on the whole node but this config creates "
                          "%s; GFD would label the node %s-MIG-INVALID and the device plugin would expose no GPU: "
                          "use one profile or the mixed strategy" % (where, ", ".join(profiles), model["product"]))
        if disabled:
            errors.append("%s: the single MIG strategy needs MIG on every GPU but it is disabled on GPU %s; GFD would "
                          "label the node %s-MIG-INVALID" % (where, ", ".join(map(str, disabled)), model["product"]))
    return errors


def mig_config_errors(config, product, gpu_count, strategy="single", catalogue=None, selected=None):
    """Every problem of a mig-parted ``config`` (the parsed ``config.yaml`` of the MIG manager's ConfigMap) for a
    node with ``gpu_count`` GPUs of ``product`` under the GPU Operator's ``mig.strategy`` ``strategy``.

    Every config in ``mig-configs`` is checked for format: mig-parted parses the whole file before it selects a
    config (``api/spec/v1/spec.go`` Spec/MigConfigSpec UnmarshalJSON and ``pkg/types/mig_config.go``
    AssertValidFormat, v0.13.1), so a malformed config anywhere fails every node. Whether a config fits the
    model is decided when it is applied (``pkg/mig/reconfigure/reconfigure.go`` Run, v0.13.1: only the config
    the node's label selects): with ``selected`` only that config is checked against the model, each entry when
    its ``device-filter`` (if any) names the model; without it every config is. ``catalogue``: the node's own
    catalogue entry (``catalogue_from_lgip``), which is then the
    authority over the built-in one. Returns a list of messages, each naming the config, entry, field, model
    and profile concerned and what to change; [] when valid. Never raises, whatever the input.
    """
    try:
        model = mig_model(product, catalogue)
    except MigLayoutError as exc:
        return exc.errors
    if not _whole(gpu_count) or gpu_count < 1:
        return ["the node's GPU count must be a whole number >= 1, got %r" % (gpu_count,)]
    if strategy not in MIG_STRATEGIES:
        return ["unknown MIG strategy %r: use one of %s" % (strategy, ", ".join(MIG_STRATEGIES))]
    if not isinstance(config, dict):
        return ["the mig-parted config must be a mapping with version: v1 and mig-configs, got %r" % (config,)]
    errors = ["%s: unknown top-level field; mig-parted knows version and mig-configs" % (key,)
              for key in config if key not in ("version", "mig-configs")]
    if config.get("version") != "v1":
        errors.append("version: %r is not supported; mig-parted reads version: v1" % (config.get("version"),))
    configs = config.get("mig-configs")
    if not isinstance(configs, dict) or not configs:
        return errors + ["mig-configs: give a mapping of config name -> list of entries"]
    for name, entries in configs.items():
        fit = selected is None or name == selected
        errors.extend(_config_errors(name, entries, model if fit else None, gpu_count, strategy))
    return errors


def validate_mig_config(config, product, gpu_count, strategy="single", catalogue=None):
    """Raise MigLayoutError with every message of ``mig_config_errors`` unless ``config`` is valid."""
    errors = mig_config_errors(config, product, gpu_count, strategy, catalogue)
    if errors:
        raise MigLayoutError(errors)


def applied_layout(config, name, product, gpu_count, catalogue=None):
    """The per-GPU layout mig-parted applies with config ``name`` of ``config``: a list of ``gpu_count`` items,
    ``{profile: count}`` for a GPU with MIG enabled and None for one with MIG disabled or not covered by an
    entry (mig-parted leaves those alone; fairgpu's GPUs start with MIG disabled). Raises MigLayoutError
    when ``config`` is invalid or has no config ``name``."""
    errors = mig_config_errors(config, product, gpu_count, "mixed", catalogue, selected=name)
    if errors:
        raise MigLayoutError(errors)
    model = mig_model(product, catalogue)
    if name not in config["mig-configs"]:
        raise MigLayoutError("the mig-parted config has no config %r; it has %s"
                             % (name, ", ".join(map(str, config["mig-configs"]))))
    layout = [None] * gpu_count
    for entry in config["mig-configs"][name]:
        if _applies(entry, model):
            devices = range(gpu_count) if entry["devices"] == "all" else entry["devices"]
            for index in devices:
                layout[index] = ({profile: count for profile, count in entry["mig-devices"].items() if count}
                                 if entry["mig-enabled"] else None)
    return layout


def fairgpu_config_name(profile="2g.20gb", per_gpu=2):
    """Name of fairgpu's MIG config: ``fairgpu-<per_gpu>x<profile>`` with ``+`` as ``.`` (a label value)."""
    return "fairgpu-%dx%s" % (per_gpu, profile.replace("+", "."))


def fairgpu_mig_config(profile="2g.20gb", per_gpu=2):
    """fairgpu's default MIG layout as a mig-parted config: ``fairgpu_config_name(profile, per_gpu)`` puts
    ``per_gpu`` instances of ``profile`` on every GPU and ``all-disabled`` turns MIG off. Pure; check it against
    a model with ``validate_mig_config`` (2g.20gb exists on the A100-80GB and the H100)."""
    return {
        "version": "v1",
        "mig-configs": {
            fairgpu_config_name(profile, per_gpu): [
                {"devices": "all", "mig-enabled": True, "mig-devices": {profile: per_gpu}},
            ],
            "all-disabled": [{"devices": "all", "mig-enabled": False}],
        },
    }


def per_gpu_layout(layout, product, gpu_count, catalogue=None):
    """Normalise a layout (see the module docstring) to a list of ``gpu_count`` items, None or {profile: count}
    without zero counts. Raises MigLayoutError for a malformed layout or one that does not fit a GPU."""
    if layout is None or isinstance(layout, dict):
        layout = [layout] * gpu_count
    if not isinstance(layout, list) or len(layout) != gpu_count:
        raise MigLayoutError("a layout is None, {profile: count} or a list of %d of those, got %r"
                             % (gpu_count, layout))
    result = []
    for index, gpu in enumerate(layout):
        if gpu is not None:
            if not isinstance(gpu, dict) or not all(_whole(count) and count >= 0 for count in gpu.values()):
                raise MigLayoutError("GPU %d: %r is not {profile: whole count}" % (index, gpu))
            gpu = {profile: count for profile, count in gpu.items() if count}
            if placement(gpu, product, catalogue) is None:
                raise MigLayoutError("GPU %d: %s does not fit a %s" % (index, gpu, product))
        result.append(gpu)
    return result


def _single_profile(layout):
    """The profile of a valid single-strategy layout (MIG on every GPU, one profile, no empty GPU), else None."""
    profiles = set(profile for gpu in layout if gpu for profile in gpu)
    if len(profiles) == 1 and all(layout):
        return profiles.pop()
    return None


def device_plugin_resources(product, gpu_count, layout, strategy, catalogue=None):
    """Extended resources the NVIDIA device plugin advertises on the node: ``{resource name: count}``.

    ``none``: every GPU as ``nvidia.com/gpu``. ``single``: the MIG devices as ``nvidia.com/gpu`` when the layout
    is valid for it, 0 when not (GFD then labels ``<model>-MIG-INVALID``), the whole GPUs when no GPU has MIG.
    ``mixed``: ``nvidia.com/gpu`` for the MIG-disabled GPUs (0 included: kubelet keeps a resource it has seen)
    plus ``nvidia.com/mig-<profile>`` for each profile present. Raises MigLayoutError for an unknown model or
    strategy or a layout that does not fit.
    """
    layout = per_gpu_layout(layout, product, gpu_count, catalogue)
    mig = [gpu for gpu in layout if gpu is not None]
    if strategy not in MIG_STRATEGIES:
        raise MigLayoutError("unknown MIG strategy %r: use one of %s" % (strategy, ", ".join(MIG_STRATEGIES)))
    if strategy == "none" or not mig:
        return {GPU_RESOURCE: gpu_count}
    if strategy == "single":
        profile = _single_profile(layout)
        return {GPU_RESOURCE: sum(gpu[profile] for gpu in layout) if profile else 0}
    resources = {GPU_RESOURCE: gpu_count - len(mig)}
    for gpu in mig:
        for profile, count in sorted(gpu.items()):
            name = profile_resource(profile, product, catalogue)
            resources[name] = resources.get(name, 0) + count
    return resources


def _mig_labels(resource, product, profile, count, catalogue):
    entry = mig_model(product, catalogue)["profiles"][profile]
    labels = {
        # GFD names the MIG device as the device plugin does (internal/resource/nvml-mig-device.go, v0.20.0).
        "product": "%s-MIG-%s" % (product, profile_resource(profile, product, catalogue)[len(resources.PREFIX):]),
        "count": count,
        "replicas": 1,
        "memory": profile_memory_mib(product, profile, catalogue),
        "slices.gi": entry["compute_slices"],
        "slices.ci": entry["compute_slices"],
    }
    if entry["attributes"]:
        labels["multiprocessors"] = entry["attributes"]["sm"]
        labels.update(("engines." + label, entry["attributes"][name]) for label, name in ENGINE_LABELS)
    return {"%s.%s" % (resource, key): str(value) for key, value in labels.items()}


def gfd_mig_labels(product, gpu_count, layout, strategy, mig_config=None, catalogue=None):
    """Labels GFD (and, with ``mig_config``, the MIG manager) set on a node with this layout: ``{name: value}``.

    GFD's labeller (NVIDIA/k8s-device-plugin v0.20.0, ``internal/lm/mig-strategy.go`` and ``resource.go``): the
    whole-GPU labels count MIG-enabled and MIG-disabled GPUs of the model alike (``nvidia.com/gpu.count``); a
    MIG-enabled GPU's labeller has no sharing config, so ``replicas`` is 0, but a MIG-disabled GPU of the same
    model overrides it with 1. Under ``single`` the MIG labeller then overwrites the ``nvidia.com/gpu.*`` labels.

    Starts from ``gpu_catalog.gfd_labels``. With MIG on every GPU ``nvidia.com/gpu.replicas`` is 0. ``single``
    and a valid layout: ``nvidia.com/gpu.product`` becomes ``<model>-MIG-<profile>``, ``.count`` the number of MIG
    devices and ``.memory`` etc. describe one device; an invalid layout gives ``<model>-MIG-INVALID`` with count,
    replicas and memory 0. ``mixed``: ``nvidia.com/mig-<profile>.{count,product,replicas,sharing-strategy,memory,
    slices.gi,slices.ci}`` per profile, plus ``multiprocessors`` and ``engines.*`` where the catalogue knows them.
    ``mig_config``: the applied config's name, giving ``nvidia.com/mig.config`` and ``mig.config.state=success``.
    Raises MigLayoutError for an unknown model, strategy or count or a layout that does not fit.
    """
    try:
        labels = gfd_labels(product, gpu_count, mig_strategy=strategy)
    except GpuCatalogError as exc:
        raise MigLayoutError(str(exc))
    layout = per_gpu_layout(layout, product, gpu_count, catalogue)
    mig = [gpu for gpu in layout if gpu is not None]
    if mig and len(mig) == gpu_count:
        labels[GPU_RESOURCE + ".replicas"] = "0"
    if strategy == "single" and mig:
        profile = _single_profile(layout)
        if profile is None:
            # newInvalidMigStrategyLabeler (k8s-device-plugin v0.20.0 internal/lm/mig-strategy.go) also empties
            # sharing-strategy.
            labels.update({GPU_RESOURCE + ".product": product + "-MIG-INVALID", GPU_RESOURCE + ".count": "0",
                           GPU_RESOURCE + ".replicas": "0", GPU_RESOURCE + ".memory": "0",
                           GPU_RESOURCE + ".sharing-strategy": ""})
        else:
            labels.update(_mig_labels(GPU_RESOURCE, product, profile, sum(gpu[profile] for gpu in mig), catalogue))
    elif strategy == "mixed":
        counts = {}
        for gpu in mig:
            for profile, count in gpu.items():
                counts[profile] = counts.get(profile, 0) + count
        for profile, count in counts.items():
            resource = profile_resource(profile, product, catalogue)
            labels.update(_mig_labels(resource, product, profile, count, catalogue))
            labels[resource + ".sharing-strategy"] = "none"
    if mig_config is not None:
        labels[MIG_CONFIG_LABEL] = mig_config
        labels[MIG_STATE_LABEL] = "success"
    return labels
