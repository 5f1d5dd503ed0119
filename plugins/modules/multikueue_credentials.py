#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: multikueue_credentials
short_description: The kubeconfig a MultiKueue manager keeps for one worker, with a token renewed before it expires
version_added: 0.1.0
description:
  - Run against a worker cluster (its connection options). Reads the worker's API server and CA from the kubeconfig
    and context it is given (the CA as data; a CA file is read), and returns a kubeconfig for the ServiceAccount
    I(service_account) of I(namespace) on that worker, in the form Kueue's MultiKueue accepts (an inline token and
    C(certificate-authority-data); Kueue refuses files, C(insecure-skip-tls-verify), exec plugins and token files,
    Kueue's pkg/controller/admissionchecks/multikueue/multikueuecluster.go validateKubeConfig).
  - The token is a bound ServiceAccount token from the TokenRequest API (C(serviceaccounts/token)), valid for
    I(expiration_seconds). It is issued only when I(current) has none, when its expiry is within
    I(renew_before_seconds), or when the worker's address or CA differs from the one I(current) reaches; otherwise
    I(current) is returned as it is, so a second run changes nothing.
  - Check mode issues no token; it says whether one would be issued and returns I(current).
author:
  - fairgpu maintainers (!UNKNOWN)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
options:
  name:
    description: The worker's name on the manager (its MultiKueueCluster), the kubeconfig's cluster, user and context.
    type: str
    required: true
  namespace:
    description: Kueue's namespace on the worker, where the ServiceAccount is.
    type: str
    required: true
  service_account:
    description: The ServiceAccount the manager's Kueue acts as (the multikueue role's, with Kueue's documented rules).
    type: str
    default: fairgpu-manager
  expiration_seconds:
    description: How long a new token is valid, in seconds (the API server may shorten it; its answer is returned).
    type: int
    default: 2592000
  renew_before_seconds:
    description: Issue a new token when the held one expires within this many seconds.
    type: int
    default: 864000
  current:
    description:
      - What the manager holds for this worker - C(kubeconfig) (the Secret's text) and C(expires) (epoch seconds, the
        Secret's annotation); null or empty when it holds nothing yet.
    type: dict
"""

EXAMPLES = r"""
- name: The kubeconfig for worker-1, renewed when its token nears expiry
  fairgpu.tenancy.multikueue_credentials:
    kubeconfig: ~/.kube/worker-1.yaml
    context: worker-1
    name: worker-1
    namespace: kueue-system
    current: {kubeconfig: "{{ held_text }}", expires: "{{ held_expiry }}"}
  register: credentials
  no_log: true
"""

RETURN = r"""
name:
  description: The worker's name (I(name)), for the manager's objects.
  returned: always
  type: str
kubeconfig:
  description: The kubeconfig (YAML text) for the manager's Secret; I(current)'s when nothing was renewed.
  returned: always
  type: str
expires:
  description: When its token expires, epoch seconds (the TokenRequest's status.expirationTimestamp).
  returned: always
  type: str
renewed:
  description: Whether a token was issued (in check mode, whether one would be).
  returned: always
  type: bool
reason:
  description: Why a token was or was not issued - C(none held), C(expires within renew_before_seconds), C(worker address or CA changed), C(valid).
  returned: always
  type: str
"""

import calendar
import copy
import time

from ansible_collections.kubernetes.core.plugins.module_utils.ansiblemodule import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
from ansible_collections.fairgpu.tenancy.plugins.module_utils.cluster import kubeconfig as cluster_kubeconfig
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import MULTIKUEUE_WORKER_IDENTITY
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import multikueue

try:
    import yaml
except ImportError:  # kubernetes.core's module checks its requirements first
    yaml = None


def argspec():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(
        name=dict(type="str", required=True),
        namespace=dict(type="str", required=True),
        service_account=dict(type="str", default=MULTIKUEUE_WORKER_IDENTITY),
        expiration_seconds=dict(type="int", default=2592000),
        renew_before_seconds=dict(type="int", default=864000),
        current=dict(type="dict"),
    )
    return spec


def _read(path):
    with open(path, "rb") as handle:
        return handle.read()


def converge(module, client, now=None):
    params = module.params
    current = params["current"] or {}
    path = params["kubeconfig"]
    if not isinstance(path, str) or not path:
        module.fail_json(msg="multikueue_credentials %s: kubeconfig must be the path of the worker's kubeconfig file"
                         % params["name"])
    try:
        with open(path, "rb") as handle:
            worker = cluster_kubeconfig.single_context(yaml.safe_load(handle) or {}, params["context"] or "", path)
        # The worker's kubeconfig for the manager, its token filled in below when one is issued (the CA read once).
        made = multikueue.worker_kubeconfig(worker, "", "", params["name"], read_file=_read)
    except (OSError, ValueError, cluster_kubeconfig.KubeconfigError) as exc:
        module.fail_json(msg="multikueue_credentials %s: %s" % (params["name"], exc))
    cluster = made["clusters"][0]["cluster"]
    now = time.time() if now is None else now
    if not current.get("kubeconfig"):
        reason = "none held"
    elif not multikueue.same_cluster(current["kubeconfig"], cluster["server"], cluster["certificate-authority-data"]):
        reason = "worker address or CA changed"
    elif multikueue.token_due(current.get("expires"), now, params["renew_before_seconds"]):
        reason = "expires within renew_before_seconds"
    else:
        reason = "valid"
    result = dict(changed=False, renewed=reason != "valid", reason=reason, name=params["name"],
                  kubeconfig=current.get("kubeconfig") or "", expires=str(current.get("expires") or ""))
    if reason == "valid" or module.check_mode:
        result["changed"] = result["renewed"]
        return result
    from kubernetes import client as kubernetes_client

    core = kubernetes_client.CoreV1Api(client.client.client)
    answer = core.create_namespaced_service_account_token(
        params["service_account"], params["namespace"],
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
         "spec": {"expirationSeconds": params["expiration_seconds"]}})
    made["users"][0]["user"]["token"] = answer.status.token
    expires = answer.status.expiration_timestamp
    result.update(changed=True, kubeconfig=yaml.safe_dump(made, default_flow_style=False),
                  expires=str(calendar.timegm(expires.utctimetuple())))
    return result


def main():
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argspec(), supports_check_mode=True)
    try:
        module.exit_json(**converge(module, get_api_client(module)))
    except CoreException as exc:
        module.fail_from_exception(exc)


if __name__ == "__main__":
    main()
