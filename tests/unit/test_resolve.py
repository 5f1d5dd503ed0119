"""The run's settings (plugins/module_utils/plan/resolve.py): the path, the mode rule and the MIG strategy,
each decided in one place."""

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.plan.resolve import (
    RECORD_NAME,
    RECORD_NAMESPACE,
    recorded_path,
    run_record,
    run_settings,
)


def test_defaults_path_kueue_single_strategy_local_stand_ins():
    settings = run_settings("site", "kwok")
    assert settings["errors"] == []
    assert (settings["path"], settings["path_source"], settings["mig_strategy"]) == ("kueue", "default", "single")
    assert settings["modes"] == {"gpu_operator": "simulated", "kueue": "local", "monitoring": "local"}
    assert settings["nodes_source"] == "live"


@pytest.mark.parametrize("provider", ["kind", "existing"])
def test_real_clusters_install_the_charts(provider):
    assert run_settings("site", provider)["modes"] == {"gpu_operator": "helm", "kueue": "helm", "monitoring": "helm"}


def test_path_mig_plans_under_mixed_unless_the_inventory_says():
    assert run_settings("site", "kwok", "mig")["mig_strategy"] == "mixed"
    assert run_settings("site", "kwok", "mig", mig_strategy="single")["mig_strategy"] == "single"
    assert run_settings("site", "kwok", "kueue", mig_strategy="")["mig_strategy"] == "single"


def test_order_of_the_path_sources():
    # -e path first, then (tenants/validate only) the cluster's record, then run_path, then kueue.
    assert run_settings("site", "kwok", "mig", "kueue", "kueue")["path"] == "mig"
    settings = run_settings("validate", "kwok", None, "mig", "kueue")
    assert (settings["path"], settings["path_source"]) == ("mig", "the cluster's record")
    # site.yml sets the cluster up for a path: it does not follow the record.
    settings = run_settings("site", "kwok", None, "mig", "")
    assert (settings["path"], settings["path_source"]) == ("kueue", "default")
    settings = run_settings("tenants", "kwok", "", None, "mig")
    assert (settings["path"], settings["path_source"]) == ("mig", "run_path")


@pytest.mark.parametrize("playbook", ["tenants", "validate"])
def test_a_path_other_than_the_recorded_one_is_refused(playbook):
    settings = run_settings(playbook, "kwok", "kueue", "mig", cluster="prod-eu")
    (error,) = settings["errors"]
    assert error.startswith("path: -e path=kueue conflicts with path mig that the last site.yml recorded on prod-eu")
    assert "run playbooks/site.yml -e path=kueue first" in error
    assert run_settings(playbook, "kwok", "mig", "mig")["errors"] == []


def test_bad_values_name_the_variable_and_the_fix():
    errors = run_settings("site", "gke", "gpu", None, "tpu", "none")["errors"]
    assert errors == [
        "cluster_provider: 'gke' is not a provider; use one of kwok, kind, existing",
        "path: 'gpu' is not a fairgpu path; use -e path=kueue or -e path=mig",
        "run_path: 'tpu' is not a fairgpu path; set it to kueue or mig",
        "run_mig_strategy: 'none' is not a MIG strategy fairgpu plans under; use single or mixed, or leave it empty "
        "for the path's own (single on kueue, mixed on mig)",
    ]


def test_a_broken_record_says_how_to_mend_it():
    (error,) = run_settings("validate", "kwok", None, "both")["errors"]
    assert error == ("the cluster's record kube-system/fairgpu-run: 'both' is not a fairgpu path; run "
                     "playbooks/site.yml -e path=kueue|mig to record the path again")


def test_render_plans_against_node_pools():
    assert run_settings("render", "existing")["nodes_source"] == "node_pools"


def test_record_round_trip():
    settings = run_settings("site", "kwok", "mig")
    record = run_record(settings, {"app.kubernetes.io/managed-by": "fairgpu"})
    assert (record["metadata"]["namespace"], record["metadata"]["name"]) == (RECORD_NAMESPACE, RECORD_NAME)
    assert record["data"] == {"path": "mig", "mig_strategy": "mixed"}
    assert recorded_path([record]) == "mig"
    assert recorded_path([]) is None
