"""Quantities as the embedded API server writes them back (issue 14, item 6).

fairgpu writes every quantity through canonical_quantity (plugins/module_utils/common/quantity.py), which follows
apimachinery's rules (k8s.io/apimachinery/pkg/api/resource). Here the API server itself is the judge: a
ResourceQuota (a built-in object, so the server parses and re-encodes each ``spec.hard`` value) gets weights,
GPU and CPU counts, memory, fractions, large values, binary suffixes and e-notation, and what comes back must be
canonical_quantity of what went in; Kueue's webhook, which re-encodes a ClusterQueue on create, is held to the
same for quotas and weights. Then tenants.yml with fractional weights and large counts must report nothing
changed on its second run.

The drift this prevents is reported in the field for a Kueue ClusterQueue: ArgoCD stayed OutOfSync because a
chart wrote nominalQuota '12000m' and the cluster held '12' (https://github.com/shepherdjerred/monorepo/pull/1620).
"""

import json
import os

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.quantity import canonical_quantity
from conftest import ROOT, cluster_queue, playbook, wait_until

NAMESPACE = "it-quantities"

VALUES = [
    # fair-sharing weights
    "0.5", "1.5", "0.25", "0.001", "2", "1000m",
    # GPU, pod and Job counts, small and large
    "8", "999", "1000", "1500", "2000000", "1000000000", "1E", "12E", "1001E", "9223372036854775807",
    "999999999999999999.1", "10000000000000000000",
    # CPU: cores and millicores, fractions, below a nano unit (rounded up)
    "96", "96000m", "1.5", "0.0001", "100u", "1080000000n", "3.001n", "0.0000000001", "0.00000012345",
    "100.0355", "10035k", "10.0355M",
    # memory: binary suffixes, their fractions, values below 1024, the BinarySI cap
    "1Ti", "1024Gi", "1.5Gi", "307200Ki", "1536Mi", "0.5Mi", ".001Ki", "100.035Ki", "1000Ki", "1Ki", "9Ei",
    "64G", "1000M",
    # e-notation (DecimalExponent)
    "1e3", "1E7", "1.5e3", "0.5e0", "1e-3", "1e14", "1.3E+6", "1e21",
    # zero in any form
    "0", "0Ki", "0m",
]
# JSON numbers, as a manifest written by hand would send them (Quantity.UnmarshalJSON reads them as strings).
NUMBERS = [0.5, 1.5, 1000, 1500, 2000000, 96]


def hard_of(values):
    """``spec.hard`` with one entry per value, under names the API server takes any quantity for (a
    ``kubernetes.io``-prefixed name is native, so neither a standard quota name nor an integer resource)."""
    return {"q%02d.fairgpu.kubernetes.io/value" % index: value for index, value in enumerate(values)}


def round_trip(quotas, name, hard):
    """Create ResourceQuota ``name`` with ``hard`` (replacing it) and return the ``spec.hard`` the server stored:
    the values parsed into resource.Quantity and written back. ``quotas``: the dynamic client's ResourceQuota
    resource, which sends JSON numbers as numbers (the typed client only takes strings)."""
    try:
        quotas.delete(name=name, namespace=NAMESPACE)
    except ApiException as exc:
        if exc.status != 404:
            raise
    body = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"hard": hard}}
    quotas.create(body=body, namespace=NAMESPACE)
    return dict(quotas.get(name=name, namespace=NAMESPACE).to_dict()["spec"]["hard"])


@pytest.fixture(scope="module")
def quotas(cluster, core):
    try:
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=NAMESPACE)))
    except ApiException as exc:
        if exc.status != 409:
            raise
    yield DynamicClient(cluster).resources.get(api_version="v1", kind="ResourceQuota")
    core.delete_namespace(NAMESPACE)
    # gone before the next test file, whose snapshots of the cluster's namespaces must not see it change
    wait_until(lambda: NAMESPACE not in [n.metadata.name for n in core.list_namespace().items], 120,
               what="namespace %s deleted" % NAMESPACE)


def test_api_server_writes_back_what_canonical_quantity_writes(quotas):
    sent = hard_of(VALUES + NUMBERS)
    stored = round_trip(quotas, "canonical", sent)
    # A ResourceQuota's spec.hard is a v1.ResourceList: also rounded up to milli units (SetDefaults_ResourceList),
    # so 0.0001 is stored as 1m and 100.0355 as 100036m.
    assert stored == {key: canonical_quantity(value, milli=True) for key, value in sent.items()}
    # and the canonical forms are kept as they are: a second apply changes nothing
    assert round_trip(quotas, "canonical", dict(stored)) == stored


def test_api_server_writes_a_multiple_of_1000E_as_its_mantissa(quotas):
    # Why canonical_quantity refuses such a value: apimachinery has no suffix past E and writes the bare mantissa.
    stored = round_trip(quotas, "beyond-exa", hard_of(["1000E", "2000E", "1000000P"]))
    assert sorted(stored.values()) == ["1", "1", "2"]
    for value in ("1000E", "2000E", "1000000P"):
        with pytest.raises(ValueError, match="cannot write"):
            canonical_quantity(value)


def test_api_server_keeps_strings_that_merely_look_canonical(quotas):
    # apimachinery's ParseQuantity keeps the string as written when it looks canonical (quantity.go, fast path:
    # no trailing 000, no leading zero digit, an exponent that is a multiple of 3; an upper-case E of an exponent
    # is kept with it), so these come back unchanged although their canonical form differs. fairgpu never writes
    # them: it writes the canonical form, which is kept too.
    quirks = ["+1", "01", "1.500", "1.", "100.035k", "1E6"]
    assert round_trip(quotas, "as-written", hard_of(quirks)) == hard_of(quirks)
    canonical = [canonical_quantity(value) for value in quirks]
    assert canonical == ["1", "1", "1500m", "1", "100035", "1e6"]
    assert round_trip(quotas, "as-written", hard_of(canonical)) == hard_of(canonical)


def _tenants():
    with open(os.path.join(ROOT, "inventories", "local", "group_vars", "gpu_clusters.yml")) as handle:
        return yaml.safe_load(handle)["tenants_list_kueue"]


def test_tenants_rerun_with_fractional_weights_and_large_quantities_changes_nothing(core, kueue):
    team_a, team_b = _tenants()
    tenants = [dict(team_a, weight=0.5, max_pods=1000, max_jobs=1500, cpu="95.5", memory="0.5Ti",
                    resource_quota={"requests.storage": "1.5Gi", "persistentvolumeclaims": 1000}),
               dict(team_b, weight=1.5, max_jobs=2000)]
    extra = json.dumps({"tenants_list": tenants})
    try:
        first = playbook("tenants.yml", "-e", extra)
        assert first.rc == 0, first.messages()
        assert first.stats["changed"] > 0
        second = playbook("tenants.yml", "-e", extra)
        assert second.rc == 0, second.messages()
        assert second.stats["changed"] == 0, second.changed_tasks()
        spec = cluster_queue(kueue, "team-a")["spec"]
        assert spec["fairSharing"] == {"weight": "500m"}
        assert cluster_queue(kueue, "team-b")["spec"]["fairSharing"] == {"weight": "1500m"}
        quota = {r["name"]: r["nominalQuota"] for r in spec["resourceGroups"][0]["flavors"][0]["resources"]}
        assert quota["cpu"] == "95500m" and quota["memory"] == "512Gi"
        hard = {q.metadata.namespace: q.spec.hard for q in core.list_resource_quota_for_all_namespaces().items
                if q.metadata.namespace in ("team-a", "team-b")}
        assert hard["team-a"]["pods"] == "1k" and hard["team-a"]["count/jobs.batch"] == "1500"
        assert hard["team-a"]["requests.storage"] == "1536Mi" and hard["team-a"]["persistentvolumeclaims"] == "1k"
        assert hard["team-b"]["count/jobs.batch"] == "2k"
    finally:
        restore = playbook("tenants.yml")
    assert restore.rc == 0, restore.messages()
    wait_until(lambda: all(cluster_queue(kueue, name)["spec"]["fairSharing"] == {"weight": "1"}
                           for name in ("team-a", "team-b")), 30, what="the weights restored")
    again = playbook("tenants.yml")
    assert again.rc == 0 and again.stats["changed"] == 0, again.changed_tasks()


def _chunks(values, size):
    return [values[start:start + size] for start in range(0, len(values), size)]


def _remaining(kueue, names):
    """Those of the ClusterQueues ``names`` still on the cluster."""
    items = kueue.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")["items"]
    return [q["metadata"]["name"] for q in items if q["metadata"]["name"] in names]


WEIGHTS = ["0.5", "1.5", "0.25", "0.001", "0.0001", "100.0355", "1000", "1e3", "2000000", 3, 1500]


def test_kueue_webhook_writes_back_what_canonical_quantity_writes(kueue):
    """Kueue's mutating webhook re-encodes a ClusterQueue on create (the issue's source of drift); a custom
    resource is not rounded to milli units, so canonical_quantity without ``milli`` is the form it keeps."""
    # Kueue's CRD takes an integer or a string for a quantity (x-kubernetes-int-or-string): no JSON fractions.
    values = VALUES + [number for number in NUMBERS if isinstance(number, int)]
    chunks = _chunks(values, 16)
    names = ["it-quantities-%d" % index for index in range(max(len(chunks), len(WEIGHTS)))]
    try:
        for index, name in enumerate(names):
            spec = {}
            if index < len(WEIGHTS):
                spec["fairSharing"] = {"weight": WEIGHTS[index]}
            if index < len(chunks):
                resources = [{"name": "q%02d.fairgpu.kubernetes.io/value" % n, "nominalQuota": value}
                             for n, value in enumerate(chunks[index])]
                spec["resourceGroups"] = [{"coveredResources": [r["name"] for r in resources],
                                           "flavors": [{"name": "it-quantities", "resources": resources}]}]
            kueue.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues",
                                               {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                                                "metadata": {"name": name}, "spec": spec})
        for index, name in enumerate(names):
            spec = cluster_queue(kueue, name)["spec"]
            if index < len(WEIGHTS):
                assert spec["fairSharing"]["weight"] == canonical_quantity(WEIGHTS[index]), WEIGHTS[index]
            if index < len(chunks):
                stored = [r["nominalQuota"] for r in spec["resourceGroups"][0]["flavors"][0]["resources"]]
                assert stored == [canonical_quantity(value) for value in chunks[index]], chunks[index]
    finally:
        for name in names:
            try:
                kueue.delete_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", name)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        wait_until(lambda: not _remaining(kueue, names), 60, what="the test's ClusterQueues deleted")
