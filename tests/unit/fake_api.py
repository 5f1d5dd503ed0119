"""A fake API server for unit tests of fairgpu's modules: the part of kubernetes.core's client they use (resource,
get with a label or field selector, create, apply, merge patch, delete, a pod's eviction subresource), objects kept
by (kind, namespace, name), and the server-side dry run of check mode (``dry_run``: nothing is stored). ``served``:
the kinds the server knows (None: every kind); another kind raises ResourceNotFoundError, as the discovery of a CRD
that is not installed."""

import copy
import json

from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

CLUSTER_SCOPED = {"Namespace", "Node", "ClusterRole", "ClusterRoleBinding", "ClusterQueue", "ResourceFlavor", "Cohort",
                  "WorkloadPriorityClass", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
                  "PriorityClass"}


class Resource(object):
    def __init__(self, kind, api_version, subresource=None):
        self.kind, self.group_version, self.namespaced = kind, api_version, kind not in CLUSTER_SCOPED
        self.subresource = subresource
        self.subresources = {} if subresource or kind != "Pod" else {"eviction": Resource(kind, api_version, "eviction")}


class Instance(object):
    def __init__(self, value):
        self.value = value

    def to_dict(self):
        return copy.deepcopy(self.value)

    def __getitem__(self, key):
        return self.value[key]

    def get(self, key, default=None):
        return self.value.get(key, default)


class Response(object):
    def __init__(self, value):
        self.data, self.headers = json.dumps(value).encode("utf8"), {}


def not_found():
    return NotFoundError(type("E", (), {"status": 404, "reason": "NotFound", "body": "{}", "headers": {}})())


def merged(target, patch):
    """``target`` with the JSON merge patch ``patch`` (RFC 7386: null removes a field)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merged(result.get(key), value)
    return result


def fields_selected(obj, selector):
    """The API server's field selector terms ``path=value`` and ``path!=value`` on dotted paths; a missing field
    reads as ""."""
    for term in filter(None, (selector or "").split(",")):
        negated = "!=" in term
        path, _sep, value = term.partition("!=" if negated else "=")
        found = obj
        for key in path.split("."):
            found = found.get(key) if isinstance(found, dict) else None
        if ((found or "") == value) == negated:
            return False
    return True


class FakeApi(object):
    def __init__(self, objects=(), served=None):
        self.objects, self.served, self.dry_run, self.writes = {}, served, False, []
        for obj in objects:
            self.objects[self.key(obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))] = \
                copy.deepcopy(obj)

    def key(self, kind, name, namespace):
        return (kind, None if kind in CLUSTER_SCOPED else namespace, name)

    def resource(self, kind, api_version):
        if self.served is not None and kind not in self.served:
            raise ResourceNotFoundError("the server does not serve %s" % kind)
        return Resource(kind, api_version)

    def get(self, resource, name=None, namespace=None, label_selector=None, field_selector=None):
        if name is not None:
            key = self.key(resource.kind, name, namespace)
            if key not in self.objects:
                raise not_found()
            return Instance(self.objects[key])
        wanted = [s.partition("=") for s in (label_selector or "").split(",") if s]
        items = [o for (kind, ns, _n), o in sorted(self.objects.items(), key=lambda i: str(i[0]))
                 if kind == resource.kind and (namespace is None or ns == namespace)
                 and all((o["metadata"].get("labels") or {}).get(k) == v if sep else k in (o["metadata"].get("labels") or {})
                         for k, sep, v in wanted) and fields_selected(o, field_selector)]
        return Instance({"items": items})

    def _store(self, key, value, params):
        if not (self.dry_run or params.get("dry_run")):
            self.objects[key] = value
            self.writes.append("/".join(k for k in key if k))
        return Response(value)

    def _namespace_exists(self, resource, namespace):
        if resource.namespaced and ("Namespace", None, namespace) not in self.objects:
            raise AssertionError("namespace %s not found (the API server cannot dry-run into it)" % namespace)

    def create(self, resource, definition, namespace=None, serialize=False, **params):
        if resource.subresource == "eviction":
            return self.evict(definition["metadata"]["name"], namespace, params)
        self._namespace_exists(resource, namespace)
        return self._store(self.key(resource.kind, definition["metadata"]["name"], namespace),
                           dict(copy.deepcopy(definition), kind=resource.kind), params)

    def apply(self, resource, definition, namespace=None, serialize=False, **params):
        assert params.get("server_side") and params["field_manager"] == "fairgpu" and params["force_conflicts"]
        self._namespace_exists(resource, namespace)
        return self._store(self.key(resource.kind, definition["metadata"]["name"], namespace),
                           copy.deepcopy(definition), params)

    def patch(self, resource, definition, name=None, namespace=None, serialize=False, content_type=None, **params):
        assert content_type == "application/merge-patch+json"
        obj = merged(self.objects[self.key(resource.kind, name, namespace)], definition)
        return self._store(self.key(resource.kind, name, namespace), obj, params)

    def evict(self, name, namespace, params):
        """The Eviction API on an existing pod: its DisruptionTarget condition and deletion timestamp (kubernetes
        ``pkg/registry/core/pod/storage/eviction.go``); a kubelet of the test's removes it later. Recorded in
        ``writes`` as ``evict:<namespace>/<name>``."""
        key = self.key("Pod", name, namespace)
        if key not in self.objects:
            raise not_found()
        if not (self.dry_run or params.get("dry_run")):
            pod = copy.deepcopy(self.objects[key])
            pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
            pod.setdefault("status", {}).setdefault("conditions", []).append(
                {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"})
            self.objects[key] = pod
            self.writes.append("evict:%s/%s" % (namespace, name))
        return Response({"kind": "Status", "status": "Success"})

    def delete(self, resource, name=None, namespace=None, **params):
        key = self.key(resource.kind, name, namespace)
        if not (self.dry_run or params.get("dry_run")):
            self.writes.append("-" + "/".join(k for k in key if k))
            return Instance(self.objects.pop(key))
        return Instance(self.objects[key])

    def named(self, kind):
        return sorted("/".join(k for k in key[1:] if k) for key in self.objects if key[0] == kind)
