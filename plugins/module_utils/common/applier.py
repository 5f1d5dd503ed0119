# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""How fairgpu's modules write their objects: server-side apply through kubernetes.core's service (field manager
``fairgpu``, ``force_conflicts``, so that a field another manager took is taken back), with the drift of each object
listed before it is applied and every change recorded for the result (``changed``, and ``diffs`` in diff mode).

Check mode is kubernetes.core's server-side dry run. An object in a namespace the run creates cannot be dry-run (the
API server answers NotFound for the namespace, the field report of kubernetes-sigs/kustomize#1957): it is recorded as
one the run would create, and not sent.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

from ansible_collections.kubernetes.core.plugins.module_utils.k8s.service import K8sService, diff_objects
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common import drift

try:
    from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError
except ImportError:
    # AnsibleK8SModule reports the missing library.
    NotFoundError = ResourceNotFoundError = Exception

# How kubernetes.core's service applies (it reads this from the module's parameters: service.py ``apply``).
SERVER_SIDE_APPLY = {"field_manager": "fairgpu", "force_conflicts": True}


def api_message(exc):
    """The ``message`` of the Status object the API server answered a refused request with (the error's ``body``), or
    None when ``exc`` carries no such answer (a connection refused, an error of the client itself)."""
    try:
        return json.loads(exc.body).get("message")
    except (AttributeError, TypeError, ValueError):
        return None


def listed(client, kind, api_version="v1", **selectors):
    """The items of ``kind`` as dicts (``label_selector``, ``namespace`` passed on); none when the kind is not served."""
    try:
        return client.get(client.resource(kind, api_version), **selectors).to_dict().get("items") or []
    except (NotFoundError, ResourceNotFoundError):
        return []


class Applier(object):
    """Writes objects for one module run: ``client`` kubernetes.core's (a server-side dry run in check mode)."""

    def __init__(self, module, client):
        self.module, self.client = module, client
        module.params["server_side_apply"] = SERVER_SIDE_APPLY
        self.service = K8sService(client, module)
        self.changed, self.diffs = [], []

    def resource(self, definition):
        return self.service.find_resource(definition["kind"], definition["apiVersion"], fail=True)

    def live(self, definition):
        """The live object of ``definition`` as a dict, or None."""
        existing = self.service.retrieve(self.resource(definition), definition)
        return existing.to_dict() if existing else None

    def apply(self, definition, new_namespaces=()):
        """Compare ``definition`` with its live object, then server-side apply it. Returns the differences in the
        fields fairgpu sets (``drift.object_differences``) and records the object when the apply changed it (would, in
        check mode). ``new_namespaces``: the namespaces this run creates (nothing in them to compare)."""
        key = drift.object_key(definition)
        existing = None
        if (definition.get("metadata") or {}).get("namespace") in new_namespaces:
            if self.module.check_mode:
                self.changed.append(key)
                return []
        else:
            existing = self.service.retrieve(self.resource(definition), definition)
        live = existing.to_dict() if existing else {}
        differences = drift.object_differences(live, definition) if existing else []
        instance, _warnings = self.service.apply(self.resource(definition), copy.deepcopy(definition), existing)
        same, diff = diff_objects(live, instance)
        if not same:
            self.changed.append(key)
            if self.module._diff:
                self.diffs.append(dict(diff, before_header=key, after_header=key))
        return differences

    def delete(self, definition):
        """Delete the object of ``definition`` when it is there (a dry run in check mode); records it."""
        existing = self.service.retrieve(self.resource(definition), definition)
        if existing:
            self.service.delete(self.resource(definition), definition, existing)
            self.changed.append(drift.object_key(definition))
