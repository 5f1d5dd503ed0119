"""The validation's load Jobs (plugins/module_utils/validation/load.py, job_manifest) of the Job descriptions of
validation.load_jobs, with the validate role's defaults, checked against the Pod Security Standards.

The tenant namespaces enforce ``baseline`` and warn ``restricted``; the load pods must pass ``restricted``. The rules
below are the controls of https://kubernetes.io/docs/concepts/security/pod-security-standards/ (Baseline and
Restricted tables, the restricted policy as of v1.25+), each written as a check over the pod spec."""

import os

import pytest
import yaml

from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.load import POD_DEFAULTS, job_manifest
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.scenarios import load_jobs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLE = os.path.join(ROOT, "roles", "validate")
TENANT = {"name": "team-a", "namespaces": ["team-a"], "gpu_resource": "nvidia.com/gpu"}
MIG_TENANT = {"name": "team-b", "namespaces": ["team-b"], "gpu_resource": "nvidia.com/mig-2g.20gb"}

# Baseline: capabilities a container may add (besides the restricted profile's stricter rule below).
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
                         "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
BASELINE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                    "net.ipv4.tcp_keepalive_probes"}
BASELINE_SELINUX_TYPES = {None, "", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
# Restricted: the only volume types allowed.
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected",
                      "secret"}


def pod_security_violations(pod):
    """Messages (list of str) for each Baseline or Restricted control ``pod`` (a PodSpec dict) fails."""
    out = []
    psc = pod.get("securityContext") or {}
    containers = [c for key in ("containers", "initContainers", "ephemeralContainers") for c in pod.get(key) or []]

    def contexts():
        return [(c["name"], c.get("securityContext") or {}) for c in containers]

    # --- Baseline ---
    for where, sc in [("pod", psc)] + contexts():
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            out.append("%s: HostProcess" % where)
        selinux = sc.get("seLinuxOptions") or {}
        if selinux.get("type") not in BASELINE_SELINUX_TYPES or selinux.get("user") or selinux.get("role"):
            out.append("%s: SELinux options" % where)
        if (sc.get("seccompProfile") or {}).get("type") == "Unconfined":
            out.append("%s: seccomp Unconfined" % where)
        if (sc.get("appArmorProfile") or {}).get("type") not in (None, "RuntimeDefault", "Localhost"):
            out.append("%s: AppArmor profile" % where)
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            out.append("pod: %s" % key)
    for name, sc in contexts():
        if sc.get("privileged"):
            out.append("%s: privileged" % name)
        if set((sc.get("capabilities") or {}).get("add") or []) - BASELINE_CAPABILITIES:
            out.append("%s: capabilities added beyond the baseline set" % name)
        if sc.get("procMount") not in (None, "Default"):
            out.append("%s: procMount" % name)
    for c in containers:
        if any(p.get("hostPort") for p in c.get("ports") or []):
            out.append("%s: hostPort" % c["name"])
    for volume in pod.get("volumes") or []:
        if "hostPath" in volume:
            out.append("volume %s: hostPath" % volume["name"])
    for sysctl in psc.get("sysctls") or []:
        if sysctl["name"] not in BASELINE_SYSCTLS:
            out.append("pod: sysctl %s" % sysctl["name"])
    # --- Restricted ---
    for volume in pod.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            out.append("volume %s: type %s" % (volume["name"], sorted(kinds)))
    for name, sc in contexts():
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append("%s: allowPrivilegeEscalation must be false" % name)
        # runAsNonRoot: true on the pod or on every container, and no container sets it false.
        if sc.get("runAsNonRoot") is False or not (sc.get("runAsNonRoot") is True or psc.get("runAsNonRoot") is True):
            out.append("%s: runAsNonRoot must be true" % name)
        if sc.get("runAsUser") == 0:
            out.append("%s: runAsUser 0" % name)
        seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append("%s: seccompProfile must be RuntimeDefault or Localhost" % name)
        capabilities = sc.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            out.append("%s: capabilities must drop ALL" % name)
        if set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}:
            out.append("%s: only NET_BIND_SERVICE may be added" % name)
    if psc.get("runAsUser") == 0:
        out.append("pod: runAsUser 0")
    return out


def render(jobs, simulated, **pod):
    """The Jobs as module validation_scenario creates them, with the role's pod settings."""
    return [job_manifest(job, dict(pod, simulated=simulated)) for job in jobs]


def test_the_pod_defaults_are_the_roles():
    with open(os.path.join(ROLE, "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    assert (POD_DEFAULTS["image"], POD_DEFAULTS["memory_fraction"], POD_DEFAULTS["user"], POD_DEFAULTS["group"]) == (
        defaults["validate_image"], defaults["validate_load_memory_fraction"], defaults["validate_load_user"],
        defaults["validate_load_group"])


@pytest.mark.parametrize("simulated", [True, False])
def test_load_jobs_pass_the_restricted_profile(simulated):
    jobs = render(load_jobs(TENANT, 2, "flood", 30) + load_jobs(MIG_TENANT, 1, "mig", 20), simulated)
    assert [j["metadata"]["name"] for j in jobs] == ["fairgpu-val-flood-team-a-0", "fairgpu-val-flood-team-a-1",
                                                     "fairgpu-val-mig-team-b-0"]
    for job in jobs:
        pod = job["spec"]["template"]["spec"]
        assert pod_security_violations(pod) == [], job["metadata"]["name"]
        assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000,
                                          "seccompProfile": {"type": "RuntimeDefault"}}
        (container,) = pod["containers"]
        assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
        # HOME on a writable emptyDir: the user has no home directory in the image.
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["HOME"] == "/tmp"
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes[mounts["/tmp"]] == {"name": mounts["/tmp"], "emptyDir": {}}
        # Nothing in the pod asks the runtime for devices: only the resource request brings GPUs.
        assert "NVIDIA_VISIBLE_DEVICES" not in env and "runtimeClassName" not in pod
    assert jobs[2]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/mig-2g.20gb"] == "1"


def test_user_and_group_are_settings():
    (job,) = render(load_jobs(TENANT, 1, "baseline", 10), False, user=2000, group="3000")
    psc = job["spec"]["template"]["spec"]["securityContext"]
    assert (psc["runAsUser"], psc["runAsGroup"]) == (2000, 3000)


@pytest.mark.parametrize("change, message", [
    (lambda p: p["containers"][0].update(securityContext={"privileged": True}), "load: privileged"),
    (lambda p: p["containers"][0]["securityContext"].pop("allowPrivilegeEscalation"), "allowPrivilegeEscalation"),
    (lambda p: p["containers"][0]["securityContext"].update(capabilities={"drop": ["NET_RAW"]}), "drop ALL"),
    (lambda p: p["containers"][0]["securityContext"].update(capabilities={"drop": ["ALL"], "add": ["SYS_ADMIN"]}),
     "beyond the baseline set"),
    (lambda p: p["securityContext"].pop("runAsNonRoot"), "runAsNonRoot must be true"),
    (lambda p: p["containers"][0]["securityContext"].update(runAsNonRoot=False), "runAsNonRoot must be true"),
    (lambda p: p["securityContext"].update(runAsUser=0), "pod: runAsUser 0"),
    (lambda p: p["securityContext"].pop("seccompProfile"), "seccompProfile must be"),
    (lambda p: p["volumes"].append({"name": "dev", "hostPath": {"path": "/dev"}}), "volume dev: hostPath"),
    (lambda p: p.update(hostPID=True), "pod: hostPID"),
])
def test_the_checks_see_each_violation(change, message):
    """The rules are not vacuous: each control fails on a pod that breaks it (the device door's own tricks
    among them: privileged, a hostPath of /dev)."""
    (job,) = render(load_jobs(TENANT, 1, "baseline", 10), False)
    pod = job["spec"]["template"]["spec"]
    change(pod)
    assert any(message in v for v in pod_security_violations(pod)), pod_security_violations(pod)
