# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""MIG resource names as the NVIDIA device plugin writes them. Pure logic, no cluster access.

Upstream rules (read in the sources, not copied):

- NVIDIA/k8s-device-plugin v0.20.0, ``internal/rm/rm.go`` (mixed strategy): for every MIG profile the device
  offers, the resource is ``"mig-" + profile.String()`` with every ``+`` replaced by ``.``, under the
  ``nvidia.com/`` prefix; a profile whose compute-instance slice count differs from its GPU-instance slice count
  (``info.C != info.G``, e.g. ``1c.3g.20gb``) gets no resource.
- NVIDIA/go-nvlib v0.12.0, ``pkg/nvlib/device/mig_profile.go``: ``String()`` is ``<G>g.<GB>gb`` (``<C>c.`` in
  front when C != G) followed by ``+<attributes>`` (``me``, ``me.all``, ``gfx``) or ``-<negative attributes>``
  (``-me``). So ``1g.10gb+me`` -> ``mig-1g.10gb.me``, ``1g.10gb+me.all`` -> ``mig-1g.10gb.me.all``,
  ``1g.24gb+gfx`` -> ``mig-1g.24gb.gfx``, ``1g.24gb-me`` -> ``mig-1g.24gb-me``.
- The same file, ``getMigMemorySizeGB``: the ``<GB>`` figure is not the one nvidia-smi prints but is computed
  from the profile's memory (NVML ``MemorySizeMB``) and the device's total memory: the profile's share of the
  device, rounded up to eighths, times the device memory in GiB rounded up, rounded to the nearest integer.
  That is why an A100-80GB whose nvidia-smi prints ``7g.79gb`` advertises ``nvidia.com/mig-7g.80gb``. Rows of
  ``nvidia-smi mig -lgip`` are therefore matched to resources by profile ID (``lgip_resources``), never by the
  printed name.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import MIG_RESOURCE_PREFIX

PREFIX = MIG_RESOURCE_PREFIX
# go-nvlib's profile string: [<C>c.]<G>g.<GB>gb[+attr[,attr]|-attr]
PROFILE = re.compile(r"^(?:(?P<c>[1-8])c\.)?(?P<g>[1-8])g\.(?P<gb>[0-9]+)gb(?:(?P<sign>[+-])(?P<attrs>[a-z][a-z.]*(?:,[a-z][a-z.]*)*))?$")
# The resource forms the device plugin writes (a resource name cannot hold ","; no profile has two attributes).
RESOURCE = re.compile(r"^nvidia\.com/mig-[1-8]g\.[0-9]+gb(?:\.me|\.me\.all|\.gfx|-me)?$")


def parse_profile(profile):
    """``{"c", "g", "gb", "attributes" (list), "negative" (list)}`` of a profile name such as ``3g.40gb``,
    ``1c.3g.40gb``, ``1g.10gb+me`` or ``1g.24gb-me`` (``c`` equals ``g`` when not written); None otherwise."""
    match = PROFILE.match(profile) if isinstance(profile, str) else None
    if not match:
        return None
    attrs = match.group("attrs").split(",") if match.group("attrs") else []
    g = int(match.group("g"))
    return {"c": int(match.group("c")) if match.group("c") else g, "g": g, "gb": int(match.group("gb")),
            "attributes": attrs if match.group("sign") == "+" else [],
            "negative": attrs if match.group("sign") == "-" else []}


def resource_name(profile):
    """The device plugin's resource for ``profile`` (a go-nvlib profile string), or None for a profile the plugin
    does not advertise (compute slices != GPU instance slices) or a string that is no MIG profile."""
    info = parse_profile(profile)
    if info is None or info["c"] != info["g"]:
        return None
    return PREFIX + profile.replace("+", ".")


def is_mig_resource(name):
    """True for every form of ``nvidia.com/mig-<profile>`` the device plugin writes (``.me``, ``.me.all``,
    ``.gfx``, ``-me`` included)."""
    return isinstance(name, str) and bool(RESOURCE.match(name))


def memory_gb(profile_memory_mib, device_memory_mib):
    """go-nvlib's ``getMigMemorySizeGB`` with both figures in MiB (NVML's MemorySizeMB is MiB; the device total
    is ``nvidia-smi --query-gpu=memory.total`` or GFD's ``nvidia.com/gpu.memory``)."""
    fraction = math.ceil(float(profile_memory_mib) / device_memory_mib * 8) / 8.0
    total_gb = (int(device_memory_mib) + 1023) // 1024
    # Go's math.Round rounds half away from zero; Python's round() rounds half to even.
    return int(math.floor(fraction * total_gb + 0.5))


def device_plugin_profile(profile, profile_memory_mib, device_memory_mib):
    """The profile string go-nvlib builds for the profile nvidia-smi prints as ``profile`` (whose attributes and
    slice counts it keeps) with the memory figure recomputed: ``7g.79gb`` of 79.25 GiB on an 80 GiB A100 is
    ``7g.80gb``. Raises ValueError for a string that is not a MIG profile."""
    info = parse_profile(profile)
    if info is None:
        raise ValueError("%r is not a MIG profile name" % (profile,))
    name = "%dg.%dgb" % (info["g"], memory_gb(profile_memory_mib, device_memory_mib))
    if info["c"] != info["g"]:
        name = "%dc.%s" % (info["c"], name)
    if info["attributes"]:
        name += "+" + ",".join(info["attributes"])
    if info["negative"]:
        name += "-" + ",".join(info["negative"])
    return name


def lgip_resources(rows, device_memory_mib=None):
    """``{profile_id: resource name}`` for the ``nvidia-smi mig -lgip`` rows of one GPU
    (``nvidia_smi.parse_gpu_instance_profiles``; the first GPU's rows are used). With ``device_memory_mib`` the
    name carries go-nvlib's memory figure; without it, the printed one (right on every capture in the fixtures
    but not on every driver: see the module docstring)."""
    if not rows:
        return {}
    first = rows[0]["gpu"]
    names = {}
    for row in rows:
        if row["gpu"] != first:
            continue
        profile = row["profile"]
        if device_memory_mib:
            profile = device_plugin_profile(profile, row["memory_mib"], device_memory_mib)
        names[row["profile_id"]] = resource_name(profile)
    return names
