# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""fairgpu's ValidatingAdmissionPolicies on tenant namespaces (Kubernetes >= 1.30, admissionregistration.k8s.io/v1).

Pure logic, no cluster access. ``policies(isolation, limit_range)`` returns the policies and their bindings; the
``tenants`` role applies them with the rest of ``kueue/objects.py`` ``tenant_objects``. They run inside the API
server (no webhook, they hold while Kueue is down) and bind every namespace labelled ``fairgpu.io/tenant``, whoever
asks. Each refuses a *class* of request, named in its message, with the field:

- ``fairgpu-tenant-gpu-pods``: a pod that asks for an accelerator must be controlled by a Job (so Kueue admits
  it against the tenant's ClusterQueue).
- ``fairgpu-tenant-pods``: pods are created and changed by the Job controller, not by a user (the built-in
  ``edit`` role allows pods; a bare pod, one with a forged Job owner, or one relabelled off its Job would run
  outside Kueue).
- ``fairgpu-tenant-workloads``: no other pod-creating kind (Deployment, ReplicaSet, StatefulSet, DaemonSet,
  ReplicationController): its pods could never be created, so it is refused when it is.
- ``fairgpu-tenant-jobs``: what a Job may ask for (``job_rules``): priority, owners, finalizers, ``managedBy``,
  changes after creation by anyone but Kueue, and a pod template whose pods would run (``template_rules``): every field the
  namespace's Pod Security level refuses, the routes to the node's devices, scheduling that skips the scheduler
  or reaches into other namespaces, limits the LimitRange would refuse or that are out of proportion to the
  requests Kueue counts, and size.
- ``fairgpu-tenant-job-deletions``: a Job is deleted with its pods (DeleteOptions ``propagationPolicy``
  Background or Foreground); an orphaning delete would free the Job's quota while its pods run on.
- ``fairgpu-tenant-object-size``: ConfigMaps and Secrets hold at most ``max_object_kib``.

Why at creation: Pod Security ``enforce`` and the LimitRanger check pods, not Jobs. A Job whose pods they would
refuse is accepted, Kueue reserves its quota (borrowed GPUs included), and only its pods fail, until Kueue's
``waitForPodsReady`` gives up. Refusing the Job itself keeps that quota free.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import (
    ADMISSION_API,
    DELETION_POLICY,
    GPU_POD_POLICY,
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    GPU_SHARED_RESOURCE,
    JOB_POLICY,
    MANAGED_BY,
    MIG_RESOURCE_PREFIX,
    MULTIKUEUE_CONTROLLER,
    OBJECT_SIZE_POLICY,
    POD_CREATOR_POLICY,
    PRIORITY_CLASS_LABEL,
    PRIORITY_CLASSES_ANNOTATION,
    QUEUE_LABEL,
    TENANT_LABEL,
    WORKLOAD_KINDS_POLICY,
)

# Capabilities the Pod Security baseline profile allows a container to add (k8s.io/pod-security-admission v0.36,
# policy/check_capabilities_baseline.go).
BASELINE_CAPABILITIES = ("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT")
# The "safe" sysctls of Pod Security baseline at latest (policy/check_sysctls.go, sysctlsAllowedV1Dot32).
SAFE_SYSCTLS = ("kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
                "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                "net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")
# SELinux types baseline allows (policy/check_seLinuxOptions.go, selinuxAllowedTypes1_31).
SELINUX_TYPES = ("", "container_t", "container_init_t", "container_kvm_t", "container_engine_t")
# Volume types restricted allows (policy/check_restrictedVolumes.go).
RESTRICTED_VOLUMES = ("configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim",
                      "projected", "secret")
# The Job controller's own managedBy value (batch/v1 JobSpec.managedBy; an empty field means the same).
JOB_CONTROLLER = "kubernetes.io/job-controller"
# Kinds whose controllers create pods, other than Jobs: (API group, resource, kind).
WORKLOAD_KINDS = (("apps", "deployments", "Deployment"), ("apps", "replicasets", "ReplicaSet"),
                  ("apps", "statefulsets", "StatefulSet"), ("apps", "daemonsets", "DaemonSet"),
                  ("", "replicationcontrollers", "ReplicationController"))
# Bytes of one entry of a counted list (``template_rules``, size): a cost of its own, whatever its strings.
ENTRY_BYTES = 64


# The pod template of a Job, its metadata, and every container the node runs (init containers included).
SPEC = "object.spec.template.spec"
META = "object.spec.template.metadata"
# The policy's variable "containers" (containers and init containers are different types to CEL's type check, so
# they are joined as dyn).
CONTAINERS = "variables.containers"
CONTAINERS_VARIABLE = {"name": "containers", "expression": "dyn(%s.containers) + (has(%s.initContainers) ? "
                       "dyn(%s.initContainers) : [])" % ((SPEC,) * 3)}
# The policy's variable "podResources": the pod-level resources (spec.resources, cpu and memory), {} when unset (dyn:
# CEL's type check knows no limits or requests of the field at v1.36).
POD_RESOURCES = "variables.podResources"
POD_RESOURCES_VARIABLE = {"name": "podResources",
                          "expression": "has(%s.resources) ? dyn(%s.resources) : dyn({})" % (SPEC, SPEC)}
ANNOTATIONS = "(has(%(m)s) && has(%(m)s.annotations) ? %(m)s.annotations : {})" % {"m": META}
# A pod in a user namespace (hostUsers: false), which Pod Security relaxes some controls for
# (policy/helpers.go relaxPolicyForUserNamespacePod).
USER_NAMESPACE = "(has(%(s)s.hostUsers) && !%(s)s.hostUsers)" % {"s": SPEC}
WINDOWS = "(has(%(s)s.os) && has(%(s)s.os.name) && %(s)s.os.name == 'windows')" % {"s": SPEC}


def _list(values):
    return "[%s]" % ", ".join("'%s'" % v for v in values)


def _has(root, path):
    """``has()`` of every step of ``path`` below ``root``: ``_has("c", "securityContext.procMount")`` ->
    ``has(c.securityContext) && has(c.securityContext.procMount)``."""
    parts = path.split(".")
    return " && ".join("has(%s.%s)" % (root, ".".join(parts[:n + 1])) for n in range(len(parts)))


def _set(root, path):
    """``root.path`` is set (every step present): the guard and the value, for a boolean field."""
    return "(%s && %s.%s)" % (_has(root, path), root, path)


def _pod_or_container(path, bad):
    """Neither the pod's nor any container's ``securityContext.<path>`` is ``bad`` (a CEL predicate over the value
    ``v``)."""
    field = "securityContext." + path
    return ("!(%s && [%s.%s].exists(v, %s)) && !%s.exists(c, %s && [c.%s].exists(v, %s))"
            % (_has(SPEC, field), SPEC, field, bad, CONTAINERS, _has("c", field), field, bad))


def baseline_rules():
    """Pod Security baseline, every control (https://kubernetes.io/docs/concepts/security/pod-security-standards/
    #baseline; the checks of k8s.io/pod-security-admission v0.36 ``policy/``), as ``[(expression, message)]`` on a
    Job's pod template. HostProcess, host namespaces, privileged, capabilities, hostPath and host ports reach the host
    or its devices; AppArmor, SELinux, /proc mount type, seccomp, sysctls and probe hosts complete the profile."""
    probe_host = " || ".join(
        "(%s && c.%s.%s.host != '')" % (_has("c", "%s.%s.host" % (probe, handler)), probe, handler)
        for probe in ("livenessProbe", "readinessProbe", "startupProbe", "lifecycle.postStart", "lifecycle.preStop")
        for handler in ("httpGet", "tcpSocket"))
    selinux = ("!(v.type in %s) || (has(v.user) && v.user != '') || (has(v.role) && v.role != '')"
               % _list(SELINUX_TYPES))
    return [
        ("!%s && !%s && !%s" % (_set(SPEC, "hostNetwork"), _set(SPEC, "hostPID"), _set(SPEC, "hostIPC")),
         "tenant Jobs may not use the node's namespaces (hostNetwork, hostPID, hostIPC); remove them"),
        ("!%s.exists(c, %s)" % (CONTAINERS, _set("c", "securityContext.privileged")),
         "tenant Jobs may not run privileged containers (securityContext.privileged), which see every device of "
         "the node; remove it"),
        ("!%s.exists(c, %s && c.securityContext.capabilities.add.exists(x, !(x in %s)))"
         % (CONTAINERS, _has("c", "securityContext.capabilities.add"), _list(BASELINE_CAPABILITIES)),
         "tenant Jobs may add only the capabilities Pod Security baseline allows (%s); remove the others, such as "
         "SYS_ADMIN" % ", ".join(BASELINE_CAPABILITIES)),
        ("!has(%(s)s.volumes) || !%(s)s.volumes.exists(v, has(v.hostPath))" % {"s": SPEC},
         "tenant Jobs may not mount hostPath volumes (such as /dev); use emptyDir, a ConfigMap or a "
         "PersistentVolumeClaim"),
        ("!%s.exists(c, has(c.ports) && c.ports.exists(p, has(p.hostPort) && p.hostPort != 0))" % CONTAINERS,
         "tenant Jobs may not use host ports; remove hostPort"),
        (_pod_or_container("windowsOptions.hostProcess", "v"),
         "tenant Jobs may not run Windows host processes; remove windowsOptions.hostProcess"),
        ("%s && !%s.exists(k, k.startsWith('container.apparmor.security.beta.kubernetes.io/') && !(%s[k] == '' || "
         "%s[k] == 'runtime/default' || %s[k].startsWith('localhost/')))"
         % (_pod_or_container("appArmorProfile.type", "!(v in ['RuntimeDefault', 'Localhost'])"),
            ANNOTATIONS, ANNOTATIONS, ANNOTATIONS, ANNOTATIONS),
         "tenant Jobs may use only the AppArmor profiles RuntimeDefault and Localhost (Pod Security baseline); "
         "remove the Unconfined profile or annotation"),
        (_pod_or_container("seLinuxOptions", selinux),
         "tenant Jobs may set seLinuxOptions only to the types %s, with no user or role (Pod Security baseline)"
         % ", ".join(t for t in SELINUX_TYPES if t)),
        ("%s || !%s.exists(c, %s && c.securityContext.procMount != 'Default')"
         % (USER_NAMESPACE, CONTAINERS, _has("c", "securityContext.procMount")),
         "tenant Jobs may not set securityContext.procMount other than Default (Pod Security baseline)"),
        (_pod_or_container("seccompProfile.type", "v == 'Unconfined'"),
         "tenant Jobs may not run Unconfined by seccomp (Pod Security baseline); use RuntimeDefault"),
        ("!(%s) || %s.securityContext.sysctls.all(x, x.name in %s)"
         % (_has(SPEC, "securityContext.sysctls"), SPEC, _list(SAFE_SYSCTLS)),
         "tenant Jobs may set only the sysctls Pod Security baseline calls safe (%s)" % ", ".join(SAFE_SYSCTLS)),
        ("!%s.exists(c, %s)" % (CONTAINERS, probe_host),
         "tenant Jobs may not point probes or lifecycle hooks at another host (httpGet.host, tcpSocket.host; Pod "
         "Security baseline); leave host empty"),
    ]


def restricted_rules():
    """Pod Security restricted beyond baseline (policy/check_allowPrivilegeEscalation.go,
    check_capabilities_restricted.go, check_runAsNonRoot.go, check_runAsUser.go, check_seccompProfile_restricted.go,
    check_restrictedVolumes.go, v0.36), for namespaces that enforce restricted. As upstream: Windows pods are exempt
    from privilege escalation, capabilities and seccomp, pods in a user namespace from runAsNonRoot and runAsUser."""
    pod_non_root = _set(SPEC, "securityContext.runAsNonRoot")
    pod_seccomp = "(%s && %s.securityContext.seccompProfile.type in ['RuntimeDefault', 'Localhost'])" % (
        _has(SPEC, "securityContext.seccompProfile.type"), SPEC)
    return [
        ("%s || %s.all(c, %s && !c.securityContext.allowPrivilegeEscalation)"
         % (WINDOWS, CONTAINERS, _has("c", "securityContext.allowPrivilegeEscalation")),
         "tenant Jobs must set securityContext.allowPrivilegeEscalation: false in every container (Pod Security "
         "restricted)"),
        ("%s || %s.all(c, %s && 'ALL' in c.securityContext.capabilities.drop && (!has(c.securityContext.capabilities"
         ".add) || c.securityContext.capabilities.add.all(x, x == 'NET_BIND_SERVICE')))"
         % (WINDOWS, CONTAINERS, _has("c", "securityContext.capabilities.drop")),
         "tenant Jobs must drop ALL capabilities and may add only NET_BIND_SERVICE (Pod Security restricted)"),
        ("%s || (!(%s && !%s.securityContext.runAsNonRoot) && %s.all(c, %s ? c.securityContext.runAsNonRoot : %s))"
         % (USER_NAMESPACE, _has(SPEC, "securityContext.runAsNonRoot"), SPEC, CONTAINERS,
            _has("c", "securityContext.runAsNonRoot"), pod_non_root),
         "tenant Jobs must set securityContext.runAsNonRoot: true (Pod Security restricted)"),
        ("%s || (%s)" % (USER_NAMESPACE, _pod_or_container("runAsUser", "v == 0")),
         "tenant Jobs may not set securityContext.runAsUser: 0 (Pod Security restricted)"),
        ("%s || (%s && %s.all(c, %s ? c.securityContext.seccompProfile.type in ['RuntimeDefault', 'Localhost'] : %s))"
         % (WINDOWS, _pod_or_container("seccompProfile.type", "!(v in ['RuntimeDefault', 'Localhost'])"),
            CONTAINERS, _has("c", "securityContext.seccompProfile.type"), pod_seccomp),
         "tenant Jobs must set securityContext.seccompProfile.type RuntimeDefault or Localhost (Pod Security "
         "restricted)"),
        ("!has(%s.volumes) || %s.volumes.all(v, %s)" % (SPEC, SPEC, " || ".join("has(v.%s)" % t for t in RESTRICTED_VOLUMES)),
         "tenant Jobs may use only the volume types Pod Security restricted allows (%s)" % ", ".join(RESTRICTED_VOLUMES)),
    ]


def device_rules(isolation):
    """What Pod Security does not look at but reaches devices: a runtime class picks the container runtime (the
    NVIDIA runtime hands devices to any container that names them), ``NVIDIA_*`` variables ask the NVIDIA
    container runtime for devices, CDI annotations name devices, resource claims take devices through dynamic
    resource allocation, and a long grace period keeps a preempted pod on its GPUs (it keeps them until it is
    gone)."""
    grace = isolation["termination_grace_max_seconds"]
    return [
        ("!has(%(s)s.runtimeClassName) || %(s)s.runtimeClassName == ''" % {"s": SPEC},
         "tenant Jobs may not choose a runtime class (runtimeClassName): the platform's runtime decides which "
         "devices a pod gets; remove it"),
        ("!%s.exists(c, (has(c.env) && c.env.exists(e, e.name.startsWith('NVIDIA_'))) || "
         "(has(c.envFrom) && c.envFrom.exists(e, has(e.prefix) && e.prefix.startsWith('NVIDIA_'))))" % CONTAINERS,
         "tenant Jobs may not set NVIDIA_* environment variables (NVIDIA_VISIBLE_DEVICES asks the NVIDIA runtime "
         "for GPUs outside the pod's request); request nvidia.com/gpu instead"),
        # The NVIDIA toolkit's NRI plugin (GPU Operator v26, cdi.nriPluginEnabled) injects the CDI devices a pod's
        # annotations name (NVIDIA/nvidia-container-toolkit#1498); CRI runtimes read cdi.k8s.io/ annotations too.
        ("!%s.exists(k, k.startsWith('cdi.k8s.io/') || k.startsWith('nvidia.cdi.k8s.io/'))" % ANNOTATIONS,
         "tenant Jobs may not name CDI devices in pod annotations (cdi.k8s.io/, nvidia.cdi.k8s.io/): they would reach "
         "GPUs outside the pod's request; request nvidia.com/gpu instead"),
        # Dynamic resource allocation: the built-in edit role writes ResourceClaims and ResourceClaimTemplates
        # (bootstrap policy, v1.36), and Kueue counts claims only with its DRA support configured (pkg/dra, v0.19.2).
        ("(!has(%s.resourceClaims) || size(%s.resourceClaims) == 0) && !%s.exists(c, %s)"
         % (SPEC, SPEC, CONTAINERS, _has("c", "resources.claims")),
         "tenant Jobs may not claim devices through dynamic resource allocation (resourceClaims, resources.claims): "
         "Kueue's quota counts nvidia.com/gpu requests; request nvidia.com/gpu instead"),
        ("!has(%(s)s.terminationGracePeriodSeconds) || %(s)s.terminationGracePeriodSeconds <= %(g)d"
         % {"s": SPEC, "g": grace},
         "tenant Jobs may ask for at most %d s of terminationGracePeriodSeconds: a preempted pod keeps its GPUs "
         "until it is gone; lower it" % grace),
    ]


def scheduling_rules(isolation):
    """Work that Kueue would admit and nothing would run, and scheduling that reaches other tenants:

    - ``nodeName`` binds the pod without the scheduler (nothing checks the node's devices; the kubelet then
      refuses it), ``schedulerName`` hands it to a scheduler that may not exist, ``schedulingGates`` keep it
      unscheduled: Kueue reserves the quota either way, until ``waitForPodsReady`` gives up minutes later.
    - Pod affinity and anti-affinity terms, required and preferred, may name pods of the pod's own namespace only.
      kube-scheduler honours an existing pod's required anti-affinity against every incoming pod it matches
      (symmetry: pkg/scheduler/framework/plugins/interpodaffinity, v1.36), so a term whose ``namespaceSelector``
      or ``namespaces`` reaches another tenant's namespace lets one tiny pod lock that tenant out of every node
      that shares the topology key. Topology spread constraints count pods of the pod's own namespace only
      (plugins/podtopologyspread), so they cannot reach another tenant.
    """
    schedulers = isolation["scheduler_names"]
    terms = []
    for kind in ("podAffinity", "podAntiAffinity"):
        for mode, term in (("required", "t"), ("preferred", "t.podAffinityTerm")):
            field = "affinity.%s.%sDuringSchedulingIgnoredDuringExecution" % (kind, mode)
            terms.append("(%s ? dyn(%s.%s.map(t, %s)) : [])" % (_has(SPEC, field), SPEC, field, term))
    node_terms = "%s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms" % SPEC
    preferred = "%s.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution" % SPEC
    names_node = ("(has(t.matchExpressions) && t.matchExpressions.exists(e, e.key == '%s')) || "
                  "(has(t.matchFields) && size(t.matchFields) > 0)" % HOSTNAME_LABEL)
    return [
        ("!has(%(s)s.nodeName) || %(s)s.nodeName == ''" % {"s": SPEC},
         "tenant Jobs may not set nodeName: it skips the scheduler, so nothing checks that the node has the "
         "devices; use a nodeSelector or node affinity"),
        ("!has(%(s)s.schedulerName) || %(s)s.schedulerName == '' || %(s)s.schedulerName in %(n)s"
         % {"s": SPEC, "n": _list(schedulers)},
         "tenant Jobs may name only the scheduler %s (schedulerName)" % " or ".join(schedulers)),
        ("!has(%(s)s.schedulingGates) || size(%(s)s.schedulingGates) == 0" % {"s": SPEC},
         "tenant Jobs may not set schedulingGates: Kueue would reserve the quota for pods that never schedule; "
         "remove them"),
        # A node of the tenant's choosing: with its own share of CPU or memory on one GPU node, a tenant leaves that
        # node's GPUs unusable while borrowing nothing (Kueue counts CPU and memory cluster-wide).
        ("!(has(%(s)s.nodeSelector) && '%(h)s' in %(s)s.nodeSelector) && !(%(r)s && %(t)s.exists(t, %(n)s)) && "
         "!(%(p)s && %(pt)s.exists(w, [w.preference].exists(t, %(n)s)))"
         % {"s": SPEC, "h": HOSTNAME_LABEL, "r": _has(SPEC, node_terms[len(SPEC) + 1:]), "t": node_terms,
            "n": names_node, "p": _has(SPEC, preferred[len(SPEC) + 1:]), "pt": preferred},
         "tenant Jobs may not choose their node (nodeSelector or node affinity on %s, matchFields): the scheduler "
         "places pods where their devices are; select by GPU product or node pool instead" % HOSTNAME_LABEL),
        ("(%s).all(t, !has(t.namespaceSelector) && (!has(t.namespaces) || t.namespaces.all(n, n == "
         "namespaceObject.metadata.name)))" % " + ".join(terms),
         "tenant Jobs' pod affinity and anti-affinity terms may name pods of their own namespace only: remove "
         "namespaceSelector and other namespaces from podAffinity and podAntiAffinity"),
    ]


def resource_rules(isolation, limit_range):
    """CPU and memory as the LimitRanger will give them to each container (plugin/pkg/admission/limitranger,
    v1.36): the request is the container's request, else its limit (pod defaulting copies limits to unset
    requests, pkg/apis/core/v1/defaults.go), else the LimitRange's ``defaultRequest``; the limit is the container's
    limit, else the LimitRange's ``default`` (both ``limit_range``: ``{"cpu", "memory"}``). The pod would be refused
    with a request above its limit, or a limit more than ``<resource>_limit_request_ratio`` (``isolation``) times
    its request (the LimitRange's ``maxLimitRequestRatio``): Kueue and the scheduler count requests, a node gives
    up to the limits. Pod-level resources (``spec.resources``) keep the same ratio."""
    rules = []
    for resource in ("cpu", "memory"):
        ratio, default = isolation["%s_limit_request_ratio" % resource], "quantity('%s')" % limit_range[resource]

        def given(field, otherwise):
            return ("(has(c.resources) && has(c.resources.%(f)s) && '%(r)s' in c.resources.%(f)s ? "
                    "quantity(string(c.resources.%(f)s['%(r)s'])) : %(o)s)" % {"f": field, "r": resource, "o": otherwise})
        limit = given("limits", default)
        request = given("requests", limit)
        # Pod-level resources (spec.resources, cpu and memory only): an unset request is the limit (KEP-2837), and
        # no LimitRange default applies.
        pod_limit = "quantity(string(%s.limits['%s']))" % (POD_RESOURCES, resource)
        pod_request = ("(has(%(p)s.requests) && '%(r)s' in %(p)s.requests ? quantity(string(%(p)s.requests['%(r)s'])) "
                       ": %(l)s)" % {"p": POD_RESOURCES, "r": resource, "l": pod_limit})
        pod_level = ("!(has(%s.limits) && '%s' in %s.limits) || %s.asApproximateFloat() <= %d.0 * "
                     "%s.asApproximateFloat()" % (POD_RESOURCES, resource, POD_RESOURCES, pod_limit, ratio, pod_request))
        rules.append((
            "%s.all(c, %s.compareTo(%s) <= 0 && %s.asApproximateFloat() <= %d.0 * %s.asApproximateFloat()) && (%s)"
            % (CONTAINERS, request, limit, limit, ratio, request, pod_level),
            "tenant Jobs' %(r)s limits may be at most %(n)d times their requests, and no request above its limit "
            "(a container without a %(r)s limit gets %(d)s): Kueue counts requests, a node gives limits"
            % {"r": resource, "n": ratio, "d": limit_range[resource]}))
    return rules


def share_rules(limit_range, per_gpu):
    """A pod takes no more of its node's CPU and memory than its devices' share: at most ``per_gpu`` (the GPU
    nodes' least CPU and memory per physical GPU, ``tenants.plan.cluster_capacity``) times the devices it asks for,
    one GPU's share for a pod with none. Kueue counts CPU and memory per ClusterQueue, cluster-wide: a tenant that
    put its whole share of either on one GPU node (a tenant's share can be a node's allocatable) left that node's
    GPUs unusable while borrowing nothing, and the other tenant's admitted pods stayed Pending until
    ``waitForPodsReady`` evicted them. The pod's request is its pod-level request where set, else its containers'
    (each as the LimitRanger gives it, ``resource_rules``); its devices, its containers' accelerator requests or
    limits, whichever is more. A MIG slice or a time-sliced replica counts as a GPU here (a one-slice pod still
    gets a GPU's worth)."""
    if not per_gpu:
        return []
    devices = ("dyn(%s.containers).map(c, [has(c.resources) && has(c.resources.requests) ? c.resources.requests"
               ".filter(r, %s).map(r, quantity(string(c.resources.requests[r])).asInteger()).sum() : 0, "
               "has(c.resources) && has(c.resources.limits) ? c.resources.limits.filter(r, %s).map(r, "
               "quantity(string(c.resources.limits[r])).asInteger()).sum() : 0]).map(p, p[0] > p[1] ? p[0] : p[1])"
               ".sum()" % (SPEC, _ACCELERATOR, _ACCELERATOR))
    rules = []
    for resource, unit, shown in (("cpu", 1000.0, "%g CPUs"), ("memory", 1.0, "%d MiB")):
        default = "quantity('%s')" % limit_range[resource]
        limit = ("(has(c.resources) && has(c.resources.limits) && '%(r)s' in c.resources.limits ? "
                 "quantity(string(c.resources.limits['%(r)s'])) : %(d)s)" % {"r": resource, "d": default})
        request = ("(has(c.resources) && has(c.resources.requests) && '%(r)s' in c.resources.requests ? "
                   "quantity(string(c.resources.requests['%(r)s'])).asApproximateFloat() : %(l)s.asApproximateFloat())"
                   % {"r": resource, "l": limit})
        pod = ("(has(%(p)s.requests) && '%(r)s' in %(p)s.requests ? "
               "quantity(string(%(p)s.requests['%(r)s'])).asApproximateFloat() : "
               "dyn(%(s)s.containers).map(c, %(q)s).sum())" % {"p": POD_RESOURCES, "s": SPEC, "r": resource, "q": request})
        share = per_gpu[resource] / unit
        rules.append((
            "[%s].all(n, %s <= %r * (n > 0 ? double(n) : 1.0))" % (devices, pod, share),
            "a tenant pod may request at most %s of %s per device it asks for, and as much without devices (the GPU "
            "nodes' %s per GPU), so that no tenant fills a GPU node's %s while its GPUs stay free; ask for less, or "
            "for the devices that go with it"
            % (shown % (share if resource == "cpu" else share // 2 ** 20), resource, resource, resource)))
    return rules


def size_rule(isolation):
    """Bytes of a Job's free-text fields (the Job's and its pod template's labels and annotations, every
    container's command, args and environment values) plus ``ENTRY_BYTES`` per entry of the pod template's lists
    (containers, volumes, tolerations, host aliases; each container's env, envFrom, volume mounts and ports), at
    most ``max_object_kib`` KiB. The Job quota counts objects, not bytes: a loop of Jobs near the API server's
    1.5 MiB object limit slowed the API server and Kueue for every tenant. CEL cannot measure a request's bytes, so
    this bounds where the bulk of a Job can sit, and the API server's own request limit bounds the rest."""
    def text(meta):
        return ("(has(%(m)s.labels) ? %(m)s.labels.map(k, size(k) + size(%(m)s.labels[k])).sum() : 0) + "
                "(has(%(m)s.annotations) ? %(m)s.annotations.map(k, size(k) + size(%(m)s.annotations[k])).sum() : 0)"
                % {"m": meta})
    containers = ("%s.map(c, (has(c.command) ? c.command.map(x, size(x)).sum() : 0) + "
                  "(has(c.args) ? c.args.map(x, size(x)).sum() : 0) + "
                  "(has(c.env) ? c.env.map(e, size(e.name) + (has(e.value) ? size(e.value) : 0) + %d).sum() : 0) + "
                  "%d * (1 + (has(c.envFrom) ? size(c.envFrom) : 0) + (has(c.volumeMounts) ? size(c.volumeMounts) : 0) + "
                  "(has(c.ports) ? size(c.ports) : 0))).sum()" % (CONTAINERS, ENTRY_BYTES, ENTRY_BYTES))
    lists = " + ".join("(has(%s.%s) ? size(%s.%s) : 0)" % (SPEC, f, SPEC, f) for f in ("volumes", "tolerations", "hostAliases"))
    kib = isolation["max_object_kib"]
    return ("%s + (has(%s) ? %s : 0) + %s + %d * (%s) <= %d"
            % (text("object.metadata"), META, text(META), containers, ENTRY_BYTES, lists, kib * 1024),
            "a tenant Job may carry at most %d KiB of labels, annotations, commands, arguments and environment values "
            "(each list entry counts %d bytes): the Job quota counts objects, not bytes; put data in a volume or "
            "the image" % (kib, ENTRY_BYTES))


def template_rules(isolation, limit_range, per_gpu=None):
    """Every rule on a Job's pod template, ``[(expression, message)]``: its pods would run, on their own devices,
    within what Kueue counts (``baseline_rules``, ``restricted_rules`` where the namespaces enforce restricted,
    ``device_rules``, ``scheduling_rules``, ``resource_rules``, ``share_rules``, ``size_rule``), and carry no finalizer (a deleted
    pod that keeps one stays on its node, counted there by the scheduler, after Kueue released its quota)."""
    rules = baseline_rules()
    if isolation["pod_security_enforce"] == "restricted":
        rules += restricted_rules()
    rules += (device_rules(isolation) + scheduling_rules(isolation) + resource_rules(isolation, limit_range)
              + share_rules(limit_range, per_gpu))
    rules.append(("!has(%(m)s) || !has(%(m)s.finalizers) || size(%(m)s.finalizers) == 0" % {"m": META},
                  "tenant Jobs may not give their pods finalizers (template metadata.finalizers): a deleted pod that "
                  "keeps one stays on its node after Kueue has released its quota; remove them"))
    rules.append(size_rule(isolation))
    return rules


def job_rules(multikueue="none"):
    """The rules on the Job itself, ``[validation]``:

    - a WorkloadPriorityClass only from its namespace's ``fairgpu.io/workload-priority-classes`` annotation, and no
      pod priority (kube-scheduler would evict other tenants' pods for a higher one; the Priority admission plugin
      fills every pod's ``spec.priority`` before validation, so it is refused on the template);
    - no controller owner but a CronJob: Kueue treats a Job whose controller is a Job it manages as that Job's
      child, with no Workload of its own (jobframework reconciler ``shouldSuspendChildJob``, Kueue v0.19.2);
    - no ``spec.managedBy`` but the Job controller's: another controller's Job is admitted by Kueue and run by
      nobody here (batch/v1 JobSpec.managedBy). On a MultiKueue manager (``multikueue`` manager) the one value is
      MultiKueue's, which Kueue's Job webhook writes into a new Job of a ClusterQueue with the MultiKueue check
      (pkg/controller/jobframework/defaults.go, v0.19.2; mutating admission runs before this policy): the Job is
      then run by a worker's Job controller, and a tenant may not choose another;
    - no finalizer added: a deleted Job that keeps one stays, and Kueue releases its quota while its pods run;
    - only an identity that may write Workload status (Kueue) changes a Job's spec once it is created: the
      ``edit`` role allows tenants to patch Jobs, and an unsuspended Job's pods, or a Job scaled up past what its
      Workload was admitted for, start before Kueue suspends it again.
    """
    managed_by = MULTIKUEUE_CONTROLLER if multikueue == "manager" else JOB_CONTROLLER
    kueue = ("authorizer.group('kueue.x-k8s.io').resource('workloads').subresource('status')"
             ".namespace(namespaceObject.metadata.name).check('update').allowed()")
    return [
        {"expression": "variables.priorityClass == '' || variables.unchanged || "
                       "variables.priorityClass in variables.allowed",
         "reason": "Forbidden",
         "messageExpression": "'WorkloadPriorityClass ' + variables.priorityClass + ' is not allowed in namespace ' "
                              "+ namespaceObject.metadata.name + '; use one of: ' + "
                              "(variables.allowed.size() > 0 ? variables.allowed.join(', ') : 'none (omit the label)')"},
        {"expression": "(!has(%(s)s.priorityClassName) || %(s)s.priorityClassName == '') && !has(%(s)s.priority)"
                       % {"s": SPEC},
         "reason": "Forbidden",
         "message": "pod priority (priorityClassName, priority) is not allowed in tenant Jobs: kube-scheduler "
                    "would evict other tenants' pods for it; set the label %s instead" % PRIORITY_CLASS_LABEL},
        # Kueue and the garbage collector update Jobs; an owner that was there at creation stays allowed.
        {"expression": "!has(object.metadata.ownerReferences) || (request.operation == 'UPDATE' && "
                       "has(oldObject.metadata.ownerReferences) && "
                       "oldObject.metadata.ownerReferences == object.metadata.ownerReferences) || "
                       "!object.metadata.ownerReferences.exists(o, has(o.controller) && o.controller && "
                       "!(o.apiVersion == 'batch/v1' && o.kind == 'CronJob'))",
         "reason": "Forbidden",
         "message": "a tenant Job may not name a controller owner: Kueue would run it as a child of that Job, "
                    "outside the tenant's ClusterQueue; submit it as a Job of its own with the label " + QUEUE_LABEL},
        {"expression": "!has(object.spec.managedBy) || object.spec.managedBy == '%s'" % managed_by,
         "reason": "Forbidden",
         "message": ("tenant Jobs may not set spec.managedBy: Kueue would admit a Job that no controller here runs; "
                     "remove it") if managed_by == JOB_CONTROLLER else
                    ("tenant Jobs on a MultiKueue manager are managed by %s (Kueue sets it) and by nothing else: "
                     "another controller would run the Job outside the fleet's quota; remove spec.managedBy"
                     % managed_by)},
        # The garbage collector removes its own finalizers (orphan, foregroundDeletion) with an update; the API
        # server adds them on delete without admission.
        {"expression": "!has(object.metadata.finalizers) || object.metadata.finalizers.all(f, request.operation == "
                       "'UPDATE' && has(oldObject.metadata.finalizers) && f in oldObject.metadata.finalizers)",
         "reason": "Forbidden",
         "message": "tenant Jobs may not carry finalizers (metadata.finalizers): a deleted Job that keeps one stays, "
                    "and Kueue releases its quota while its pods run; remove them"},
        {"expression": "request.operation != 'UPDATE' || oldObject.spec == object.spec || %s" % kueue,
         "reason": "Forbidden",
         "message": "only Kueue changes a tenant Job once it is created (spec.suspend, parallelism, the pod "
                    "template): Kueue admitted its Workload for the spec it had; submit a new Job instead"},
    ]


def _binding(name):
    return {"apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name, "labels": dict(MANAGED_BY)},
            "spec": {"policyName": name, "validationActions": ["Deny"],
                     "matchResources": {"namespaceSelector": {"matchExpressions": [
                         {"key": TENANT_LABEL, "operator": "Exists"}]}}}}


def _policy(name, resources, operations, rules):
    """A policy on ``resources`` (``[(API group, resource)]``) for ``operations``, with the API server's defaults
    written out so that a client-side ``kubectl apply`` finds nothing to change, and its binding."""
    groups = {}
    for group, resource in resources:
        groups.setdefault(group, []).append(resource)
    spec = {"failurePolicy": "Fail",
            "matchConstraints": {"matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {},
                                 "resourceRules": [{"apiGroups": [group], "apiVersions": ["v1"],
                                                    "operations": list(operations), "resources": sorted(names),
                                                    "scope": "*"} for group, names in sorted(groups.items())]}}
    spec.update(rules)
    return [{"apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicy",
             "metadata": {"name": name, "labels": dict(MANAGED_BY)}, "spec": spec}, _binding(name)]


# An accelerator resource, as CEL over a resource name ``r`` (tenants/spec.py is_accelerator_resource; MIG devices
# by their resource prefix).
_ACCELERATOR = "(r == '%s' || r == '%s' || r.startsWith('%s'))" % (GPU_RESOURCE, GPU_SHARED_RESOURCE, MIG_RESOURCE_PREFIX)
# A container asks for an accelerator when it requests or limits more than 0 of one (the LimitRange gives every
# container an explicit 0).
_ASKS = ("has(c.resources.%%(f)s) && c.resources.%%(f)s.exists(r, %s && "
         "quantity(string(c.resources.%%(f)s[r])).isGreaterThan(quantity('0')))" % _ACCELERATOR)


def policies(isolation, limit_range, per_gpu=None, multikueue="none"):
    """Every policy and binding of the module docstring, in apply order. ``isolation``: the namespace policy in
    force (``kueue/objects.py`` ``isolation_policy``); ``limit_range``: the LimitRange's default container
    ``{"cpu", "memory"}``; ``per_gpu``: the GPU nodes' least ``{"cpu": millicores, "memory": bytes}`` per GPU
    (``share_rules``; None: no such bound); ``multikueue``: the cluster's part in MultiKueue (``job_rules``).
    Returns manifest dicts."""
    pod_containers = "(object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : []))"
    gpu_pods = {
        "variables": [{"name": "accelerators", "expression": pod_containers + ".exists(c, has(c.resources) && ((%s) "
                       "|| (%s)))" % (_ASKS % {"f": "requests"}, _ASKS % {"f": "limits"})}],
        "validations": [
            {"expression": "!variables.accelerators || (has(object.metadata.ownerReferences) && "
                           "object.metadata.ownerReferences.exists(o, o.apiVersion == 'batch/v1' && o.kind == 'Job' "
                           "&& has(o.controller) && o.controller))",
             "reason": "Forbidden",
             "message": "a pod that requests GPUs in a tenant namespace must belong to a Job, so that Kueue admits "
                        "it against the tenant's ClusterQueue: submit a Job with the label " + QUEUE_LABEL},
        ],
    }
    # The Job controller writes Job status; a tenant, even with the built-in edit role, does not. On update too: a
    # pod relabelled off its Job's selector is released by the Job controller and runs on, unowned, while the Job
    # makes a replacement (kube-controller-manager's ControllerRefManager), and the kubelet, the scheduler and
    # the garbage collector write pods through subresources or as controllers.
    pod_creators = {"validations": [
        {"expression": "authorizer.group('batch').resource('jobs').subresource('status')"
                       ".namespace(namespaceObject.metadata.name).check('update').allowed()",
         "reason": "Forbidden",
         "messageExpression": "'pods in a tenant namespace are created and changed by the Job controller for Jobs "
                              "that Kueue admitted; ' + request.userInfo.username + ' may not ' + "
                              "(request.operation == 'CREATE' ? 'create' : 'change') + ' them: submit a Job with "
                              "the label %s'" % QUEUE_LABEL}]}
    workloads = {"validations": [
        {"expression": "false", "reason": "Forbidden",
         "messageExpression": "'tenant namespaces run work as Jobs that Kueue admits: a ' + request.kind.kind + "
                              "' would run pods outside the tenant\\'s ClusterQueue (and its pods would be refused); "
                              "submit a Job with the label %s'" % QUEUE_LABEL}]}
    jobs = {
        "variables": [
            {"name": "priorityClass", "expression": "has(object.metadata.labels) && '%s' in object.metadata.labels ? "
             "object.metadata.labels['%s'] : ''" % (PRIORITY_CLASS_LABEL, PRIORITY_CLASS_LABEL)},
            {"name": "allowed", "expression": "has(namespaceObject.metadata.annotations) && '%s' in "
             "namespaceObject.metadata.annotations && namespaceObject.metadata.annotations['%s'] != '' ? "
             "namespaceObject.metadata.annotations['%s'].split(',') : []"
             % ((PRIORITY_CLASSES_ANNOTATION,) * 3)},
            # Kueue updates admitted Jobs; a class that was allowed at creation stays usable.
            {"name": "unchanged", "expression": "request.operation == 'UPDATE' && has(oldObject.metadata.labels) && "
             "'%s' in oldObject.metadata.labels && oldObject.metadata.labels['%s'] == variables.priorityClass"
             % (PRIORITY_CLASS_LABEL, PRIORITY_CLASS_LABEL)},
            # An update that leaves the pod template alone (the garbage collector removing a finalizer, Kueue
            # writing a label) is not judged again by rules that are the template's.
            {"name": "templateUnchanged", "expression": "request.operation == 'UPDATE' && "
             "oldObject.spec.template == object.spec.template"},
            CONTAINERS_VARIABLE,
            POD_RESOURCES_VARIABLE,
        ],
        "validations": job_rules(multikueue) + [
            {"expression": "variables.templateUnchanged || (%s)" % expression, "reason": "Forbidden", "message": message}
            for expression, message in template_rules(isolation, limit_range, per_gpu)],
    }
    # propagationPolicy Background or Foreground, or the deprecated orphanDependents: false. Without either, a
    # batch/v1 Job's delete orphans its pods (pkg/registry/batch/job/strategy.go DefaultGarbageCollectionPolicy,
    # v1.36); kubectl delete sends Background.
    deletions = {
        "variables": [{"name": "options", "expression": "request.options != null ? request.options : {}"}],
        "validations": [
            {"expression": "(has(variables.options.propagationPolicy) && variables.options.propagationPolicy in "
                           "['Background', 'Foreground']) || (!has(variables.options.propagationPolicy) && "
                           "has(variables.options.orphanDependents) && variables.options.orphanDependents == false)",
             "reason": "Forbidden",
             "message": "a tenant Job is deleted with its pods (DeleteOptions propagationPolicy Background or "
                        "Foreground; kubectl delete --cascade=background): an orphaning delete (--cascade=orphan, or "
                        "the API's default for batch/v1 Jobs) frees the Job's quota while its pods keep their GPUs"}]}
    budget = isolation["max_object_kib"] * 1024
    sizes = {"validations": [
        # dyn: a Secret has no binaryData, which CEL's type check would flag.
        {"expression": "[dyn(object)].all(o, (has(o.data) ? o.data.map(k, size(k) + size(o.data[k])).sum() : 0) + "
                       "(has(o.binaryData) ? o.binaryData.map(k, size(k) + size(o.binaryData[k])).sum() : 0) <= %d)"
                       % budget,
         "reason": "Forbidden",
         "messageExpression": "'a ' + request.kind.kind + ' in a tenant namespace may hold at most %d KiB (data, "
                              "binaryData): ResourceQuota counts objects, not bytes'" % isolation["max_object_kib"]}]}
    return (_policy(GPU_POD_POLICY, [("", "pods")], ["CREATE"], gpu_pods)
            + _policy(POD_CREATOR_POLICY, [("", "pods")], ["CREATE", "UPDATE"], pod_creators)
            + _policy(WORKLOAD_KINDS_POLICY, [(g, r) for g, r, _kind in WORKLOAD_KINDS], ["CREATE"], workloads)
            + _policy(JOB_POLICY, [("batch", "jobs")], ["CREATE", "UPDATE"], jobs)
            + _policy(DELETION_POLICY, [("batch", "jobs")], ["DELETE"], deletions)
            + _policy(OBJECT_SIZE_POLICY, [("", "configmaps"), ("", "secrets")], ["CREATE", "UPDATE"], sizes))
