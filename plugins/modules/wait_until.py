#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: wait_until
short_description: Wait until a condition on the cluster or Prometheus holds
version_added: 0.1.0
description:
  - Every wait of fairgpu's roles outside a module of their own desired state (C(tenants) and C(mig_layout) wait for
    what they apply) in one place - read, judge, sleep O(interval) seconds, until the O(condition) holds
    or O(timeout) seconds have passed (plugins/module_utils/common/waiter.py). It fails with O(fail_msg), the
    timeout and the last state it observed.
  - It changes nothing. The reads are gets and, for C(webhooks_admit), a server-side dry-run create, so the module
    waits in check mode as well; a role skips a wait whose object its check-mode run does not create.
  - C(api_answers) reads the Namespace C(default) (the API server's client is made afresh until it answers).
  - C(nodes_ready) lists the Nodes of O(label_selectors) until every one of O(names) is listed with its C(Ready)
    condition C(True).
  - C(resource_advertised) lists the Nodes of O(label_selectors) until there is one and each has O(resource) in
    C(status.allocatable).
  - C(secret_key) reads the Secret O(name) in O(namespace) until its C(data) has O(key) (a service-account-token
    Secret, filled by the controller-manager's token controller).
  - C(webhooks_admit) dry-runs the creation of O(definition) until the API server's admission passes it (a
    webhook that does not answer fails the request; C(AlreadyExists) means admission passed).
  - C(prometheus_ready) asks Prometheus at O(url) until every job of O(jobs) has a healthy target and its alerting
    rules are those of O(rules_text), each with its C(for:).
author:
  - fairgpu maintainers (!UNKNOWN)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
options:
  condition:
    description: What to wait for (see the description).
    type: str
    required: true
    choices: [api_answers, nodes_ready, resource_advertised, secret_key, webhooks_admit, prometheus_ready]
  timeout:
    description: Seconds to wait at most; the condition is read at least once.
    type: int
    default: 60
  interval:
    description: Seconds between two reads.
    type: float
    default: 2
  fail_msg:
    description:
      - What the failure message starts with (what did not happen, naming the setting to look at); the module adds
        C(within <timeout> s) and the last state it observed.
    type: str
    default: the condition did not hold
  label_selectors:
    description: The Nodes to read (C(nodes_ready), C(resource_advertised)), as kubernetes.core's.
    type: list
    elements: str
    default: []
  names:
    description: The Nodes that must be Ready (C(nodes_ready)).
    type: list
    elements: str
  resource:
    description: The extended resource every node must advertise (C(resource_advertised)).
    type: str
    default: nvidia.com/gpu
  namespace:
    description: The Secret's namespace (C(secret_key)).
    type: str
  name:
    description: The Secret's name (C(secret_key)).
    type: str
  key:
    description: The key of the Secret's C(data) that must be set (C(secret_key)).
    type: str
    default: token
  definition:
    description: The object whose creation is dry-run (C(webhooks_admit)).
    type: dict
  url:
    description: Prometheus's base URL (C(prometheus_ready)), e.g. C(http://127.0.0.1:19090).
    type: str
  jobs:
    description: The scrape jobs that must each have a healthy target (C(prometheus_ready)).
    type: list
    elements: str
  rules_text:
    description: The text of the rule file Prometheus must evaluate, every alerting rule with its C(for:) (C(prometheus_ready)).
    type: str
notes:
  - Sources of the judges - plugins/module_utils/common/readiness.py, plugins/module_utils/monitoring/prometheus.py
    (C(ready)).
"""

EXAMPLES = r"""
- name: Wait for the simulated nodes to be Ready
  fairgpu.tenancy.wait_until:
    condition: nodes_ready
    label_selectors: [fairgpu.io/node-pool]
    names: [gpu-node-0, gpu-node-1]
    timeout: 60
    fail_msg: Simulated nodes not Ready (see kwok-controller.log)

- name: Wait until Kueue's webhooks admit a ResourceFlavor
  fairgpu.tenancy.wait_until:
    condition: webhooks_admit
    definition: {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: fairgpu-readiness-probe}}
    timeout: 300
    interval: 3
"""

RETURN = r"""
elapsed:
  description: Seconds from the start of the wait to the end of the last read.
  returned: always
  type: float
  sample: 4.2
observed:
  description: One line of the last state read (the end of the failure message when the condition did not hold).
  returned: always
  type: str
  sample: "not Ready: gpu-node-1"
resources:
  description:
    - The objects of the last read, as API dicts - the Nodes (C(nodes_ready), C(resource_advertised)) or the Secret
      (C(secret_key), empty when it does not exist).
  returned: when the condition reads objects
  type: list
  elements: dict
"""

import copy

from ansible_collections.kubernetes.core.plugins.module_utils.ansiblemodule import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common import readiness
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.applier import api_message
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import GPU_RESOURCE
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.waiter import Waiter
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import objects as monitoring_objects
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import prometheus

try:
    from kubernetes.dynamic.exceptions import ConflictError, NotFoundError
except ImportError:
    # AnsibleK8SModule reports the missing library.
    ConflictError = NotFoundError = Exception

CONDITIONS = ["api_answers", "nodes_ready", "resource_advertised", "secret_key", "webhooks_admit", "prometheus_ready"]
# The options each condition needs.
REQUIRED = {
    "nodes_ready": ["names"],
    "secret_key": ["namespace", "name"],
    "webhooks_admit": ["definition"],
    "prometheus_ready": ["url", "jobs", "rules_text"],
}


def argspec():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(
        condition=dict(type="str", required=True, choices=CONDITIONS),
        timeout=dict(type="int", default=60),
        interval=dict(type="float", default=2),
        fail_msg=dict(type="str", default="the condition did not hold"),
        label_selectors=dict(type="list", elements="str", default=[]),
        names=dict(type="list", elements="str"),
        resource=dict(type="str", default=GPU_RESOURCE),
        namespace=dict(type="str"),
        name=dict(type="str"),
        key=dict(type="str", default="token", no_log=False),
        definition=dict(type="dict"),
        url=dict(type="str"),
        jobs=dict(type="list", elements="str"),
        rules_text=dict(type="str"),
    )
    return spec


def _line(exc):
    """One line of what ``exc`` says: the API server's own message (the Status object's ``message``) when the client
    raised its answer, else the first line of the error."""
    message = api_message(exc)
    if message:
        return "%s %s: %s" % (exc.status, exc.reason, message)
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class Reader(object):
    """The reads of the conditions: ``client_factory`` makes kubernetes.core's client (kept once it answers),
    ``prometheus_factory(url)`` a ``prometheus.Prometheus``."""

    def __init__(self, client_factory, prometheus_factory=prometheus.Prometheus):
        self.client_factory, self.prometheus_factory, self._client = client_factory, prometheus_factory, None

    @property
    def client(self):
        if self._client is None:
            self._client = self.client_factory()
        return self._client

    def nodes(self, selectors):
        found = self.client.get(self.client.resource("Node", "v1"), label_selector=",".join(selectors))
        return found.to_dict().get("items") or []

    def api_error(self):
        try:
            self.client.get(self.client.resource("Namespace", "v1"), name="default")
        except Exception as exc:  # whatever keeps the API server from answering is the state observed
            self._client = None
            return _line(exc)
        return None

    def secret(self, namespace, name):
        try:
            return self.client.get(self.client.resource("Secret", "v1"), name=name, namespace=namespace).to_dict()
        except NotFoundError:
            return None

    def admission_error(self, definition):
        resource = self.client.resource(definition["kind"], definition["apiVersion"])
        try:
            self.client.create(resource, copy.deepcopy(definition),
                               namespace=(definition.get("metadata") or {}).get("namespace"), dry_run="All")
        except Exception as exc:  # a webhook that does not answer, or refuses: the state observed
            if isinstance(exc, ConflictError):
                return None  # it exists: admission ran before the store refused it
            return _line(exc)
        return None


def condition(params, reader):
    """``(read, judge)`` of the module's condition: ``read()`` returns what ``judge(value)`` takes, and
    ``judge`` gives ``(held, observed, extra result keys)``."""
    kind = params["condition"]
    if kind == "api_answers":
        return reader.api_error, lambda error: readiness.api_answers(error) + ({},)
    if kind == "nodes_ready":
        return (lambda: reader.nodes(params["label_selectors"]),
                lambda nodes: readiness.nodes_ready(nodes, params["names"]) + ({"resources": nodes},))
    if kind == "resource_advertised":
        return (lambda: reader.nodes(params["label_selectors"]),
                lambda nodes: readiness.resource_advertised(nodes, params["resource"]) + ({"resources": nodes},))
    if kind == "secret_key":
        return (lambda: reader.secret(params["namespace"], params["name"]),
                lambda secret: readiness.secret_key(secret, params["key"]) + ({"resources": [secret] if secret else []},))
    if kind == "webhooks_admit":
        return (lambda: reader.admission_error(params["definition"]),
                lambda error: readiness.admitted(error) + ({},))
    server = reader.prometheus_factory(params["url"])
    alerts = dict((name, monitoring_objects.alert_seconds(params["rules_text"], name))
                  for name in monitoring_objects.alerts(params["rules_text"]))

    def read_prometheus():
        try:
            return server.targets(), server.rules(), None
        except prometheus.PrometheusError as exc:
            return [], [], _line(exc)

    def judge_prometheus(answer):
        targets, groups, error = answer
        if error:
            return False, error, {}
        return prometheus.ready(targets, groups, params["jobs"], alerts) + ({},)
    return read_prometheus, judge_prometheus


def wait(params, reader, waiter=None):
    """Wait for the condition of ``params``. Returns ``(held, result)``; the result carries ``elapsed``,
    ``observed`` and the condition's objects, and ``msg`` when it did not hold."""
    read, judge = condition(params, reader)
    judged = {}

    def held(value):
        judged["last"] = judge(value)
        return judged["last"][0]

    ok, _value, elapsed = (waiter or Waiter()).wait(read, params["timeout"], params["interval"], held)
    _held, observed, extra = judged["last"]
    result = dict(extra, changed=False, elapsed=round(elapsed, 1), observed=observed)
    if not ok:
        result["msg"] = "%s within %d s; last seen: %s" % (params["fail_msg"], params["timeout"], observed)
    return ok, result


def main():
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argspec(), supports_check_mode=True,
                              required_if=[("condition", kind, options) for kind, options in REQUIRED.items()])
    ok, result = wait(module.params, Reader(lambda: get_api_client(module)))
    if not ok:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
