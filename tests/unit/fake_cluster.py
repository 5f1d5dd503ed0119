"""A fake of what the cheating tenant meets on the embedded cluster, for unit tests of the isolation probe's
executor: kubernetes' dynamic client (``resource``, ``get``, ``create``, ``patch``, ``delete``, errors as
``DynamicApiError`` with a Status body), RBAC of the tenants' Role, fairgpu's admission policies, the LimitRange,
the ResourceQuota, Pod Security, and a small Kueue (one Workload per queued Job, quota with borrowing and
reclamation, Jobs' pods Running once admitted) on a fake clock (fake_clock.py).

The refusal messages are the real ones' shapes (tests/integration/test_60_isolation.py asserts those on the
embedded cluster). ``FakeCluster.leaks`` opens a hole (an admission rule switched off, or Kueue admitting what it
should hold), so a test can see the probe judge the attempt as not held.
"""

import json

from kubernetes.dynamic.exceptions import DynamicApiError, NotFoundError

GPU = "nvidia.com/gpu"
KUEUE = "kueue.x-k8s.io/v1beta2"
NODE_GPUS, NODE_PODS, NODES = 8, 110, 2


class _Answer(object):
    def __init__(self, status, reason, message):
        self.status, self.reason, self.headers = status, reason, {"Content-Type": "application/json"}
        self.body = json.dumps({"kind": "Status", "status": "Failure", "message": message, "code": status})


def _error(status, message, cls=DynamicApiError):
    return cls(_Answer(status, {403: "Forbidden", 404: "Not Found", 422: "Invalid"}.get(status, "Error"), message))


class _Instance(object):
    def __init__(self, value):
        self.value = value

    def to_dict(self):
        return json.loads(json.dumps(self.value))


class _Resource(object):
    def __init__(self, kind, api_version, subresource=None):
        self.kind, self.api_version, self.subresource = kind, api_version, subresource
        self.subresources = {} if subresource else {"status": _Resource(kind, api_version, "status")}


def _plural(kind):
    kind = kind.lower()
    return kind[:-1] + "ies" if kind.endswith("y") else kind + ("es" if kind.endswith("s") else "s")


def _group(api_version):
    return api_version.split("/")[0] if "/" in api_version else ""


def _selected(obj, selector):
    labels = obj["metadata"].get("labels") or {}
    for term in filter(None, (selector or "").split(",")):
        key, _sep, value = term.partition("=")
        if key not in labels or (_sep and labels[key] != value):
            return False
    return True


def _fields_selected(obj, selector):
    """The API server's field selector terms ``path=value`` and ``path!=value`` on dotted paths (``spec.nodeName``,
    ``status.phase``); a missing field reads as ""."""
    for term in filter(None, (selector or "").split(",")):
        negated = "!=" in term
        path, _sep, value = term.partition("!=" if negated else "=")
        found = obj
        for key in path.split("."):
            found = (found or {}).get(key) if isinstance(found, dict) else None
        if ((found or "") == value) == negated:
            return False
    return True


def _pod_gpus(spec):
    return sum(int((c.get("resources") or {}).get("requests", {}).get(GPU, 0)) for c in spec.get("containers", []))


def _condition(kind, status, reason, message=""):
    return {"type": kind, "status": status, "reason": reason, "message": message}


# Who may do what in a tenant namespace: the tenant Role of kueue/objects.py (tenant_role).
_TENANT_VERBS = {"jobs": ("get", "list", "create", "delete"), "pods": ("get", "list"), "events": ("get", "list"),
                 "localqueues": ("get", "list"), "workloads": ("get", "list"), "resourcequotas": ("get", "list"),
                 "limitranges": ("get", "list")}
# What the built-in edit ClusterRole adds for the probe's editors group (the probe binds it in the tenant's namespace):
# pods, Deployments, StatefulSets, ConfigMaps, and every write of Jobs (Kubernetes RBAC bootstrap policy).
_EDIT_VERBS = {"pods": ("get", "list", "create", "patch", "delete"), "deployments": ("create",), "statefulsets": ("create",),
               "configmaps": ("get", "list", "create"),
               "jobs": ("get", "list", "create", "patch", "delete", "deletecollection")}
_EDITORS = "fairgpu-probe-editors"
_BASELINE = ("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "SETFCAP",
             "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT")


class FakeCluster(object):
    """Two tenants (``tenants``: normalised tenant dicts, each guaranteed half of the GPUs and pod slots and free to
    borrow the rest), two GPU nodes. ``judge_after``: seconds before Kueue's decision on a Workload shows (and its
    pods run). ``leaks``: names of holes to open (see ``_admit_pod``, ``_admit_job``, ``_kueue``).
    ``quota_conflicts``: ``{Job name: n}``, the first n creates of that Job answer 409 as the quota admission does
    when its update of the ResourceQuota's status loses a race (kubernetes/kubernetes#67761)."""

    def __init__(self, tenants, clock, judge_after=0.0, leaks=(), quota_conflicts=None):
        self.tenants = {t["namespaces"][0]: t for t in tenants}
        self.clock, self.judge_after, self.leaks = clock, judge_after, set(leaks)
        self.quota_conflicts = dict(quota_conflicts or {})
        self.objects, self.requests, self.serial = {}, [], 0
        for index in range(NODES):
            labels = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
            allocatable = {GPU: str(NODE_GPUS), "pods": str(NODE_PODS), "cpu": "64", "memory": "512Gi"}
            self._put({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-node-%d" % index, "labels": labels},
                       "status": {"allocatable": allocatable}})
        for tenant in tenants:
            namespace = tenant["namespaces"][0]
            self._put({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": tenant["name"]},
                       "spec": {"cohortName": "fairgpu"}})
            self._put({"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {
                "name": tenant["name"] + "-queue", "namespace": namespace}, "spec": {"clusterQueue": tenant["name"]}})
            self._put({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {
                "name": "fairgpu-gpu-quota", "namespace": namespace}})
        for kind in ("Cohort", "ResourceFlavor", "WorkloadPriorityClass"):
            self._put({"apiVersion": KUEUE, "kind": kind, "metadata": {"name": "fairgpu-" + kind.lower()}})
        self._put({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "cluster-admin"}})

    def client(self, user=None, groups=()):
        return FakeClient(self, user, groups)

    # -- the store -------------------------------------------------------------------------------------------
    def _put(self, obj):
        meta = obj["metadata"]
        self.serial += 1
        meta.setdefault("uid", "uid-%d" % self.serial)
        self.objects[(obj["kind"], meta.get("namespace"), meta["name"])] = obj
        return obj

    def items(self, kind, namespace=None):
        return [o for (k, ns, _n), o in sorted(self.objects.items()) if k == kind and (namespace is None or ns == namespace)]

    def remove(self, kind, namespace, name):
        obj = self.objects.pop((kind, namespace, name), None)
        if obj is not None and kind == "Job":
            for workload in self.items("Workload", namespace):
                if workload["metadata"]["ownerReferences"][0]["name"] == name:
                    self.remove("Workload", namespace, workload["metadata"]["name"])
            for pod in self.items("Pod", namespace):
                if (pod["metadata"].get("labels") or {}).get("job-name") == name:
                    self.remove("Pod", namespace, pod["metadata"]["name"])
        return obj

    def visible(self, obj):
        """An object as a read shows it: a Workload's status, and a Job's pods, only once Kueue's decision shows."""
        if obj["kind"] == "Workload" and self.clock.monotonic() < obj["metadata"]["judged_at"]:
            return dict(obj, status={})
        return obj

    # -- admission -------------------------------------------------------------------------------------------
    def forbid(self, user, verb, kind, api_version, namespace, subresource=None, groups=()):
        if user is None:
            return None
        plural = _plural(kind) + ("/" + subresource if subresource else "")
        tenant = self.tenants.get(namespace)
        if tenant is not None and "fairgpu-probe@" + tenant["name"] == user and verb in _TENANT_VERBS.get(plural, ()):
            return None
        if tenant is not None and _EDITORS in groups and verb in _EDIT_VERBS.get(plural, ()):
            return None
        where = ' in the namespace "%s"' % namespace if namespace else " at the cluster scope"
        return '%s is forbidden: User "%s" cannot %s resource "%s" in API group "%s"%s' % (
            plural, user, verb, plural, _group(api_version), where)

    def _policy(self, name, kind, body, message):
        return '%s "%s" is forbidden: ValidatingAdmissionPolicy \'%s\' with binding \'%s\' denied request: %s' % (
            _plural(kind), body["metadata"]["name"], name, name, message)

    def admit(self, user, body, namespace):
        """The admission a create of ``body`` in a tenant namespace meets (None: admitted)."""
        kind = body["kind"]
        if kind in ("Deployment", "StatefulSet") and "round-three" not in self.leaks:
            return self._policy("fairgpu-tenant-workloads", kind, body, "tenant namespaces run work as Jobs that Kueue "
                                "admits: a %s would run pods outside the tenant's ClusterQueue" % kind)
        if kind == "ConfigMap" and sum(len(k) + len(v) for k, v in body.get("data", {}).items()) > 256 * 1024 and \
                "round-three" not in self.leaks:
            return self._policy("fairgpu-tenant-object-size", kind, body, "a ConfigMap in a tenant namespace may hold "
                                "at most 256 KiB (data, binaryData)")
        if kind == "Pod":
            if user is not None and "round-three" not in self.leaks:
                return self._policy("fairgpu-tenant-pods", kind, body, "pods in a tenant namespace are created by the "
                                    "Job controller for Jobs that Kueue admitted; %s may not create them" % user)
            return self._admit_pod(body, namespace)
        if kind == "Job":
            return self._admit_job(body, namespace)
        return None

    def admit_delete(self, body, name):
        """The deletion policy on a Job's DeleteOptions ``body`` (None: admitted)."""
        policy = (body or {}).get("propagationPolicy")
        if policy in ("Background", "Foreground") or "round-three" in self.leaks:
            return None
        return self._policy("fairgpu-tenant-job-deletions", "Job", {"metadata": {"name": name}},
                            "a tenant Job is deleted with its pods (DeleteOptions propagationPolicy Background or "
                            "Foreground)")

    def _admit_pod(self, body, namespace):
        spec, name = body["spec"], body["metadata"]["name"]
        for container in spec["containers"]:
            limit = int((container.get("resources") or {}).get("limits", {}).get(GPU, 0))
            if limit > NODE_GPUS:
                return 'pods "%s" is forbidden: maximum %s usage per Container is %d, but limit is %d' % (
                    name, GPU, NODE_GPUS, limit)
        if spec.get("priorityClassName") == "system-node-critical" and "round-three" not in self.leaks:
            return ('pods "%s" is forbidden: exceeded quota: fairgpu-denied-priority, requested: pods=1, used: pods=0, '
                    'limited: pods=0' % name)
        ratio = [c for c in spec["containers"] if (c.get("resources") or {}).get("limits", {}).get("cpu") == "96"]
        if ratio and "round-three" not in self.leaks:
            return 'pods "%s" is forbidden: cpu max limit to request ratio per Container is 4, but provided ratio is 9600' % name
        if _pod_gpus(spec) > NODE_GPUS:
            return 'pods "%s" is forbidden: maximum %s usage per Pod is %d, but limit is %d' % (
                name, GPU, NODE_GPUS, _pod_gpus(spec))
        if any((c.get("securityContext") or {}).get("privileged") for c in spec["containers"]) and "pod-security" not in self.leaks:
            return ('pods "%s" is forbidden: violates PodSecurity "baseline:latest": privileged (container "%s" must not '
                    'set securityContext.privileged=true)' % (name, spec["containers"][0]["name"]))
        owners = [o for o in body["metadata"].get("ownerReferences") or [] if o.get("controller")]
        if _pod_gpus(spec) and not owners and "gpu-pods" not in self.leaks:
            return self._policy("fairgpu-tenant-gpu-pods", "Pod", body, "a pod that requests GPUs in a tenant namespace "
                                "must belong to a Job, so that Kueue admits it against the tenant's ClusterQueue")
        return None

    def _admit_job(self, body, namespace):
        template = body["spec"]["template"]
        spec, labels = template["spec"], body["metadata"].get("labels") or {}
        tenant = self.tenants[namespace]
        routes = []
        if labels.get("kueue.x-k8s.io/priority-class") not in (None,) + tuple(tenant["priority_classes"]):
            routes.append("WorkloadPriorityClass %s is not allowed in namespace %s; use one of: %s" % (
                labels["kueue.x-k8s.io/priority-class"], namespace, ", ".join(tenant["priority_classes"])))
        if "priorityClassName" in spec:
            routes.append("pod priority (priorityClassName, priority) is not allowed in tenant Jobs")
        if any(o.get("controller") for o in body["metadata"].get("ownerReferences") or []) and "child-jobs" not in self.leaks:
            routes.append("a tenant Job may not name a controller owner: Kueue would run it as a child of that Job, "
                          "outside the tenant's ClusterQueue; submit it with a queue instead")
        containers = spec["containers"] + spec.get("initContainers", [])
        if "device-door" not in self.leaks:
            if any(spec.get(f) for f in ("hostPID", "hostNetwork", "hostIPC")):
                routes.append("tenant Jobs may not use the node's namespaces (hostNetwork, hostPID, hostIPC); remove them")
            if any((c.get("securityContext") or {}).get("privileged") for c in containers):
                routes.append("tenant Jobs may not run privileged containers (securityContext.privileged)")
            if any(x not in _BASELINE for c in containers
                   for x in ((c.get("securityContext") or {}).get("capabilities") or {}).get("add", [])):
                routes.append("tenant Jobs may add only the capabilities Pod Security baseline allows")
            if any("hostPath" in v for v in spec.get("volumes", [])):
                routes.append("tenant Jobs may not mount hostPath volumes (such as /dev)")
            if spec.get("resourceClaims"):
                routes.append("tenant Jobs may not claim devices through dynamic resource allocation")
            if spec.get("runtimeClassName"):
                routes.append("tenant Jobs may not choose a runtime class (runtimeClassName)")
            if any(e["name"].startswith("NVIDIA_") for c in containers for e in c.get("env", [])) or any(
                    e.get("prefix", "").startswith("NVIDIA_") for c in containers for e in c.get("envFrom", [])):
                routes.append("tenant Jobs may not set NVIDIA_* environment variables")
            if any(k.startswith(("cdi.k8s.io/", "nvidia.cdi.k8s.io/")) for k in (template.get("metadata") or {}).get(
                    "annotations", {})):
                routes.append("tenant Jobs may not name CDI devices in pod annotations")
            if spec.get("terminationGracePeriodSeconds", 30) > 30:
                routes.append("tenant Jobs may ask for at most 30 s of terminationGracePeriodSeconds")
        if "round-three" not in self.leaks:
            routes.extend(_round_three_routes(body))
        if routes:
            return self._policy("fairgpu-tenant-jobs", "Job", body, routes[0])
        used = len(self.items("Job", namespace))
        if used >= tenant["max_jobs"] + (6 if "job-quota" in self.leaks else 0):
            return ('jobs.batch "%s" is forbidden: exceeded quota: fairgpu-gpu-quota, requested: count/jobs.batch=1, '
                    'used: count/jobs.batch=%d, limited: count/jobs.batch=%d' % (body["metadata"]["name"], used, tenant["max_jobs"]))
        return None

    def quota_status(self, namespace):
        tenant = self.tenants[namespace]
        return {"hard": {"count/jobs.batch": str(tenant["max_jobs"])},
                "used": {"count/jobs.batch": str(len(self.items("Job", namespace)))}}

    # -- Kueue -----------------------------------------------------------------------------------------------
    def _held(self, queue, shown=False):
        """GPUs and pod slots the admitted Workloads of ``queue`` hold (``shown``: only those whose decision shows)."""
        gpus = pods = 0
        for workload in self.items("Workload"):
            meta = workload["metadata"]
            if meta["queue"] == queue and meta["admitted"] and (not shown or meta["judged_at"] <= self.clock.monotonic()):
                gpus += workload["metadata"]["gpus"]
                pods += workload["metadata"]["pods"]
        return gpus, pods

    def _kueue(self, job, namespace):
        """Kueue's decision on a new Job's Workload: ``(True, None)`` or ``(False, (reason, message))``."""
        tenant = self.tenants[namespace]
        queue = (job["metadata"].get("labels") or {}).get("kueue.x-k8s.io/queue-name")
        if queue != tenant["name"] + "-queue":
            return False, ("Inadmissible", "LocalQueue %s doesn't exist" % queue)
        if "kueue" in self.leaks:
            return True, None
        spec, pods = job["spec"]["template"]["spec"], job["spec"]["parallelism"]
        per_pod = _pod_gpus(spec)
        if per_pod > NODE_GPUS:
            what = "requests must not be above the limitRange max" if len(spec["containers"]) == 1 else \
                "didn't satisfy LimitRange constraints"
            return False, ("Pending", "couldn't assign flavors to pod set main: %s" % what)
        other = [t for t in self.tenants.values() if t is not tenant][0]
        mine, theirs = self._held(tenant["name"]), self._held(other["name"])
        gpus, slots = per_pod * pods, pods
        if gpus > tenant["max_gpus"]:
            return False, ("Pending", "couldn't assign flavors to pod set main: insufficient quota for %s in flavor "
                           "nvidia-h100-80gb-hbm3, previously considered podsets requests (0) + current podset request "
                           "(%d) > maximum capacity (%d)" % (GPU, gpus, tenant["max_gpus"]))
        if slots > tenant["max_pods"]:
            return False, ("Pending", "couldn't assign flavors to pod set main: insufficient quota for pods in flavor "
                           "nvidia-h100-80gb-hbm3, request (%d) > maximum capacity (%d)" % (slots, tenant["max_pods"]))
        total_gpus, total_pods = NODES * NODE_GPUS, tenant["pods"] + other["pods"]
        if mine[0] + gpus + theirs[0] <= total_gpus and mine[1] + slots + theirs[1] <= total_pods:
            return True, None
        # Reclamation: within its guarantee, the tenant takes back what the other borrowed.
        if mine[0] + gpus <= tenant["gpus"] and mine[1] + slots <= tenant["pods"]:
            for workload in reversed(self.items("Workload")):
                meta = workload["metadata"]
                if meta["queue"] == other["name"] and meta["admitted"] and (
                        self._held(other["name"])[1] > other["pods"] or self._held(other["name"])[0] > other["gpus"]):
                    self._preempt(workload)
            theirs = self._held(other["name"])
            if mine[0] + gpus + theirs[0] <= total_gpus and mine[1] + slots + theirs[1] <= total_pods:
                return True, None
        return False, ("Pending", "couldn't assign flavors to pod set main: insufficient unused quota for %s in flavor "
                       "nvidia-h100-80gb-hbm3, %d more needed" % (GPU, gpus))

    def _preempt(self, workload):
        meta, namespace = workload["metadata"], workload["metadata"]["namespace"]
        meta["admitted"] = False
        workload["status"]["conditions"] = [
            _condition("QuotaReserved", "False", "Pending", "Preempted"),
            _condition("Evicted", "True", "Preempted", "Preempted to accommodate a workload due to reclamation within the cohort"),
            _condition("Preempted", "True", "InCohortReclamation", "Preempted to accommodate a workload")]
        job = self.objects[("Job", namespace, meta["ownerReferences"][0]["name"])]
        job["spec"]["suspend"] = True
        for pod in self.items("Pod", namespace):
            if pod["metadata"]["labels"].get("job-name") == job["metadata"]["name"]:
                self.remove("Pod", namespace, pod["metadata"]["name"])

    def create_job(self, job, namespace):
        job["spec"]["suspend"] = True
        self._put(job)
        admitted, why = self._kueue(job, namespace)
        tenant = self.tenants[namespace]
        pods = job["spec"]["parallelism"]
        name = "job-%s-%05d" % (job["metadata"]["name"], self.serial)
        conditions = [_condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue " + tenant["name"]),
                      _condition("Admitted", "True", "Admitted", "The workload is admitted")] if admitted else [
            _condition("QuotaReserved", "False", why[0], why[1])]
        self._put({"apiVersion": KUEUE, "kind": "Workload", "metadata": {
            "name": name, "namespace": namespace, "ownerReferences": [{"kind": "Job", "name": job["metadata"]["name"]}],
            "queue": tenant["name"], "admitted": admitted, "gpus": _pod_gpus(job["spec"]["template"]["spec"]) * pods,
            "pods": pods, "judged_at": self.clock.monotonic() + self.judge_after},
            "status": {"conditions": conditions}})
        if admitted:
            job["spec"]["suspend"] = False
            template = job["spec"]["template"]
            for index in range(pods):
                labels = dict((template.get("metadata") or {}).get("labels") or {}, **{"job-name": job["metadata"]["name"]})
                self._put({"apiVersion": "v1", "kind": "Pod", "metadata": {
                    "name": "%s-%d" % (job["metadata"]["name"], index), "namespace": namespace, "labels": labels,
                    "running_at": self.clock.monotonic() + self.judge_after},
                    "spec": template["spec"], "status": {"phase": "Running"}})

    def cluster_queue(self, queue):
        """A ClusterQueue as Kueue's status shows it (flavorsReservation of GPUs)."""
        tenant = [t for t in self.tenants.values() if t["name"] == queue["metadata"]["name"]][0]
        gpus, _pods = self._held(tenant["name"], shown=True)
        flavor = [{"name": "nvidia-h100-80gb-hbm3", "resources": [{"name": GPU, "nominalQuota": str(tenant["gpus"])}]}]
        status = {"flavorsReservation": [{"name": "f", "resources": [{"name": GPU, "total": str(gpus),
                                                                      "borrowed": str(max(0, gpus - tenant["gpus"]))}]}],
                  "flavorsUsage": [{"name": "f", "resources": [{"name": GPU, "total": str(gpus)}]}],
                  "conditions": [{"type": "Active", "status": "True"}]}
        return dict(queue, spec=dict(queue["spec"], resourceGroups=[{"flavors": flavor}]), status=status)


class FakeClient(object):
    """kubernetes' DynamicClient as kubernetes.core's ``get_api_client`` returns it, for one identity."""

    def __init__(self, cluster, user, groups):
        self.cluster, self.user, self.groups = cluster, user, list(groups)

    def resource(self, kind, api_version):
        return _Resource(kind, api_version)

    def _check(self, verb, resource, namespace):
        self.cluster.requests.append((self.user, verb, resource.kind, namespace))
        refused = self.cluster.forbid(self.user, verb, resource.kind, resource.api_version, namespace, resource.subresource,
                                      self.groups)
        if refused:
            raise _error(403, refused)

    def get(self, resource, name=None, namespace=None, label_selector=None, field_selector=None):
        self._check("get" if name else "list", resource, namespace)
        cluster = self.cluster
        if name:
            obj = cluster.objects.get((resource.kind, namespace, name))
            if obj is None:
                raise _error(404, '%s "%s" not found' % (_plural(resource.kind), name), NotFoundError)
            if resource.kind == "ResourceQuota":
                obj = dict(obj, status=cluster.quota_status(namespace))
            return _Instance(cluster.visible(obj))
        items = [o for o in cluster.items(resource.kind, namespace)
                 if _selected(o, label_selector) and _fields_selected(o, field_selector)]
        if resource.kind == "ClusterQueue":
            items = [cluster.cluster_queue(q) for q in items]
        if resource.kind == "Pod":
            items = [p for p in items if p["metadata"].get("running_at", 0) <= cluster.clock.monotonic()]
        return _Instance({"items": [cluster.visible(o) for o in items]})

    def create(self, resource, body, namespace=None, dry_run=None):
        self._check("create", resource, namespace)
        cluster, body = self.cluster, json.loads(json.dumps(body))
        refused = cluster.admit(self.user, body, namespace) if namespace in cluster.tenants else None
        if refused:
            raise _error(403, refused)
        name = body["metadata"]["name"]
        if resource.kind == "Job" and not dry_run and cluster.quota_conflicts.get(name):
            cluster.quota_conflicts[name] -= 1
            # The Status the API server answers (kubernetes/kubernetes#67761, helm/helm#9710).
            raise _error(409, 'Operation cannot be fulfilled on resourcequotas "fairgpu-gpu-quota": the object has been modified; please '
                              'apply your changes to the latest version and try again')
        if (resource.kind, namespace, body["metadata"]["name"]) in cluster.objects:
            raise _error(409, '%s "%s" already exists' % (_plural(resource.kind), body["metadata"]["name"]))
        if dry_run:
            return _Instance(body)
        if resource.kind == "Job":
            cluster.create_job(body, namespace)
        else:
            cluster._put(body)
        return _Instance(body)

    def patch(self, resource, body, name=None, namespace=None, content_type=None, dry_run=None):
        self._check("patch", resource, namespace)
        obj = self.cluster.objects.get((resource.kind, namespace, name))
        if obj is None:
            raise _error(404, '%s "%s" not found' % (_plural(resource.kind), name), NotFoundError)
        if resource.kind == "Pod" and self.user is not None and "round-three" not in self.cluster.leaks:
            raise _error(403, self.cluster._policy("fairgpu-tenant-pods", "Pod", obj, "pods in a tenant namespace are "
                                                   "created and changed by the Job controller"))
        changed = resource.kind == "Job" and any(obj["spec"].get(k) != v for k, v in body.get("spec", {}).items())
        if changed and self.user is not None and "round-three" not in self.cluster.leaks:
            raise _error(403, self.cluster._policy("fairgpu-tenant-jobs", "Job", obj, "only Kueue changes a tenant Job "
                                                   "once it is created"))
        if not dry_run and resource.kind == "Job" and "suspend" in body.get("spec", {}):
            obj["spec"]["suspend"] = body["spec"]["suspend"]
        return _Instance(obj)

    def delete(self, resource, name=None, namespace=None, body=None, dry_run=None, label_selector=None):
        self._check("delete" if name else "deletecollection", resource, namespace)
        names = [name] if name else [o["metadata"]["name"] for o in self.cluster.items(resource.kind, namespace)
                                     if _selected(o, label_selector)]
        if name and (resource.kind, namespace, name) not in self.cluster.objects:
            raise _error(404, '%s "%s" not found' % (_plural(resource.kind), name), NotFoundError)
        for each in names:
            refused = self.cluster.admit_delete(body, each) if (
                resource.kind == "Job" and namespace in self.cluster.tenants and self.user is not None) else None
            if refused:
                raise _error(403, refused)
            if not dry_run:
                self.cluster.remove(resource.kind, namespace, each)
        return _Instance({})


def _past_gpu_share(requests):
    """More CPU or memory than the fake nodes' share per GPU (64 CPUs and 512Gi per 8 GPUs: 8 CPUs, 64Gi), one GPU's
    share without GPUs; quantities as the probe writes them (cores or millicores, Mi)."""
    gpus = max(1, int(requests.get(GPU, 0)))
    cpu, memory = requests.get("cpu", "0"), requests.get("memory", "0Mi")
    cores = float(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu)
    mebibytes = int(memory[:-2]) if memory.endswith("Mi") else 0
    return cores > 8 * gpus or mebibytes > 65536 * gpus


def _round_three_routes(job):
    """The Job policy's round-three refusals (kueue/admission.py), by the fields the probe's Jobs set."""
    template = job["spec"]["template"]
    spec, meta = template["spec"], template.get("metadata") or {}
    containers = spec["containers"] + spec.get("initContainers", [])
    checks = [
        (job["metadata"].get("finalizers") or meta.get("finalizers"), "tenant Jobs may not carry finalizers"),
        (spec.get("affinity") or "kubernetes.io/hostname" in spec.get("nodeSelector", {}),
         "tenant Jobs' pod affinity and anti-affinity terms may name pods of their own namespace only"),
        (any(_past_gpu_share((c.get("resources") or {}).get("requests") or {}) for c in spec["containers"]),
         "a tenant pod may request at most 8 CPUs of cpu per device it asks for"),
        (spec.get("nodeName") or spec.get("schedulerName") or spec.get("schedulingGates") or job["spec"].get("managedBy"),
         "tenant Jobs may not set nodeName, schedulerName, schedulingGates or spec.managedBy"),
        (spec.get("resources") or any("limits" not in (c.get("resources") or {}) or
                                      c["resources"]["limits"] != c["resources"].get("requests") for c in containers),
         "tenant Jobs' cpu limits may be at most 4 times their requests"),
        (sum(len(k) + len(v) for m in (job["metadata"], meta) for k, v in (m.get("annotations") or {}).items()) +
         sum(64 + len(e["name"]) + len(e.get("value", "")) for c in containers for e in c.get("env", [])) > 256 * 1024,
         "a tenant Job may carry at most 256 KiB"),
        (spec.get("securityContext", {}).get("seccompProfile", {}).get("type") == "Unconfined" or
         spec.get("securityContext", {}).get("sysctls") or
         any(set(c.get("securityContext") or {}) & {"appArmorProfile", "seLinuxOptions"} or "livenessProbe" in c
             for c in containers), "tenant Jobs may not run Unconfined by seccomp (Pod Security baseline)"),
    ]
    return [message for hit, message in checks if hit]


def tenants():
    """team-a and team-b as the tenants role plans them on the default inventory (8 of 16 GPUs each, borrowing 8)."""
    def tenant(name):
        return {"name": name, "namespaces": [name], "gpu_resource": GPU, "groups": [name], "gpus": 8, "max_gpus": 16,
                "max_gpus_per_pod": 8, "pods": 100, "max_pods": 200, "max_jobs": 100,
                "priority_classes": ["fairgpu-low", "fairgpu-normal"]}
    return [tenant("team-a"), tenant("team-b")]


PRIORITY_CLASSES = [{"name": "fairgpu-low", "value": 100}, {"name": "fairgpu-normal", "value": 1000},
                    {"name": "fairgpu-high", "value": 10000}]
