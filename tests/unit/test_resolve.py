"""The run's settings (plugins/module_utils/plan/resolve.py): the path, the mode rule and the MIG strategy,
each decided in one place."""

import pytest

from ansible_collections.fairgpu.tenancy.plugins.action.run_settings import role_settings
from ansible_collections.fairgpu.tenancy.plugins.module_utils.plan import resolve
from ansible_collections.fairgpu.tenancy.plugins.module_utils.plan.resolve import (
    RECORD_NAME,
    RECORD_NAMESPACE,
    recorded_path,
    run_record,
)

EXISTING_KUBECONFIG = "/home/platform/.kube/prod.yaml"


def run_settings(playbook, provider, *args, **kwargs):
    """``resolve.run_settings`` with the kubeconfig an existing cluster needs (the tests of other rules)."""
    kwargs.setdefault("kubeconfig", EXISTING_KUBECONFIG if provider == "existing" else "")
    return resolve.run_settings(playbook, provider, *args, **kwargs)


def test_the_connection_is_the_hosts_own_cluster_never_the_current_context():
    kwok = resolve.run_settings("site", "kwok", cluster_name="fairgpu-it", state_dir="/home/u/.local/share/fairgpu")
    assert kwok["connection"] == {"kubeconfig": "/home/u/.local/share/fairgpu/kwok/clusters/fairgpu-it/kubeconfig.yaml",
                                  "context": "", "auth": {"kubeconfig": "/home/u/.local/share/fairgpu/kwok/clusters/"
                                                                        "fairgpu-it/kubeconfig.yaml"}}
    existing = resolve.run_settings("site", "existing", kubeconfig=EXISTING_KUBECONFIG, context="platform-admin@prod")
    assert existing["errors"] == []
    assert existing["connection"]["auth"] == {"kubeconfig": EXISTING_KUBECONFIG, "context": "platform-admin@prod"}
    assert resolve.run_settings("site", "kind")["connection"]["kubeconfig"] == "~/.kube/fairgpu-kind.yaml"
    assert resolve.run_settings("teardown", "existing")["errors"] == [
        "cluster_kubeconfig: provider 'existing' needs the path of a kubeconfig that reaches the cluster"]


def test_the_record_is_part_of_the_settings():
    settings = run_settings("site", "kwok", "mig")
    assert settings["record"]["data"] == {"path": "mig", "mig_strategy": "mixed"}
    assert settings["record"]["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "fairgpu"}


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


def test_what_one_component_needs_of_another_comes_from_one_place():
    settings = run_settings("site", "kwok", cluster_name="fairgpu-it", local_ports={"prometheus": 29090},
                            namespaces={"kueue": "kueue-it"}, state_dir="/home/u/.local/share/fairgpu/",
                            toolchain_cache="/c", versions={"KUEUE_VERSION": "v0.19.2"})
    assert settings["errors"] == []
    assert settings["local"] == {
        "ports": {"kueue_webhook": 19443, "kueue_metrics": 18443, "kueue_health": 18081, "prometheus": 29090,
                  "dashboard": 29091, "dcgm_exporter": 19400, "kube_state_metrics": 19480, "kube_state_metrics_telemetry": 19490},
        "state_dir": "/home/u/.local/share/fairgpu", "toolchain_cache": "/c",
        "kueue_ca_dir": "/home/u/.local/share/fairgpu/kueue"}
    assert settings["namespaces"] == {"kueue": "kueue-it", "gpu_operator": "gpu-operator",
                                      "monitoring": "fairgpu-monitoring"}
    assert (settings["cluster_name"], settings["versions"]) == ("fairgpu-it", {"KUEUE_VERSION": "v0.19.2"})


# /proc/sys/net/ipv4/ip_local_port_range as Linux ships it (ip-sysctl.rst: default 32768 60999), tab-separated.
LINUX_RANGE = "32768\t60999\n"


def test_local_ports_distinct_unprivileged_and_below_the_ephemeral_range():
    # The CI failure this prevents: Prometheus of molecule's MIG cluster on 39190 (inside the range) failed with
    # "listen tcp 127.0.0.1:39190: bind: address already in use" while nothing listened there.
    errors = run_settings("site", "kwok", local_ports={"prometheus": 39190, "dcgm_exporter": 18443, "kueue_health": 80},
                          ephemeral_ports=LINUX_RANGE)["errors"]
    assert errors == [
        "run_local_ports.dashboard: 39191 lies in the kernel's ephemeral port range 32768-60999, which outgoing "
        "connections take their local ports from, so listening there fails now and then; choose a port below 32768",
        "run_local_ports.kueue_health: 80 is not a TCP port a user process may listen on; give a number from 1024 to "
        "65535",
        "run_local_ports.kueue_metrics: 18443 is also run_local_ports.dcgm_exporter; give each process its own port",
        "run_local_ports.prometheus: 39190 lies in the kernel's ephemeral port range 32768-60999, which outgoing "
        "connections take their local ports from, so listening there fails now and then; choose a port below 32768"]
    # The defaults pass; ports mean nothing on a cluster fairgpu runs no local process for.
    assert run_settings("site", "kwok", ephemeral_ports=LINUX_RANGE)["errors"] == []
    assert run_settings("site", "existing", local_ports={"prometheus": 39190}, ephemeral_ports=LINUX_RANGE)["errors"] == []


def test_the_dashboard_page_follows_prometheus_unless_given():
    def ports(given):
        return run_settings("site", "kwok", local_ports=given)["local"]["ports"]

    assert ports({})["dashboard"] == 19091
    assert ports({"prometheus": 25090})["dashboard"] == 25091
    assert ports({"prometheus": 25090, "dashboard": 25300})["dashboard"] == 25300
    assert run_settings("site", "kwok", local_ports={"prometheus": 19400})["errors"] == [
        "run_local_ports.prometheus: 19400 is also run_local_ports.dcgm_exporter; give each process its own port"]
    assert run_settings("site", "kwok", local_ports={"dcgm_exporter": 19091})["errors"] == [
        "run_local_ports.dcgm_exporter: 19091 is also run_local_ports.dashboard; give each process its own port"]


@pytest.mark.parametrize("text", ["", "[]", "1024", "a b"])
def test_an_unknown_ephemeral_range_checks_nothing_more(text):
    assert run_settings("site", "kwok", local_ports={"prometheus": 39190}, ephemeral_ports=text)["errors"] == []


def test_bad_ports_and_namespaces_are_named():
    errors = run_settings("site", "kwok", local_ports={"grafana": 3000, "prometheus": "x"},
                          namespaces={"kueue": "Kueue_System", "dcgm": "gpu"})["errors"]
    assert errors == [
        "run_namespaces.dcgm: fairgpu installs no component by that name; the names are gpu_operator, kueue, monitoring",
        "run_namespaces.kueue: 'Kueue_System' is not a namespace name (a lower-case DNS label)",
        "run_local_ports: grafana not a local port fairgpu uses; the names are dashboard, dcgm_exporter, kube_state_metrics, "
        "kube_state_metrics_telemetry, kueue_health, kueue_metrics, kueue_webhook, prometheus",
        "run_local_ports.prometheus: 'x' is not a TCP port a user process may listen on; give a number from 1024 to "
        "65535"]
    assert run_settings("site", "kwok", local_ports=[19090])["errors"] == [
        "run_local_ports: must be a mapping (dashboard, dcgm_exporter, kube_state_metrics, kube_state_metrics_telemetry, "
        "kueue_health, kueue_metrics, kueue_webhook, prometheus), got [19090]"]


def test_a_variable_that_moved_is_refused_with_its_new_place():
    errors = run_settings("site", "kwok", host_variables=["cluster_name", "monitoring_prometheus_port",
                                                          "kueue_namespace"])["errors"]
    assert errors == ["kueue_namespace: no longer read; set run_namespaces.kueue instead",
                      "monitoring_prometheus_port: no longer read; set run_local_ports.prometheus instead"]


def test_a_misspelt_setting_is_warned_about_with_the_setting_meant():
    """-e kueue_fair_shairng=false changed nothing without a word (a new user's try, 2026-12-06); the settings are
    the roles' argument specs, read by the action plugin (role_settings below)."""
    roles, settings = role_settings()
    host = ["kueue_fair_shairng", "tenants_lsit", "cluster_nmae", "kueue_fair_sharing", "inventory_hostname",
            "cluster_region", "platform_owner", "tenants_list_mig", "kueue_namespace", "lab_cluster_node_pool"]
    assert resolve.misspelled_settings(host, settings, roles) == [
        "%s: no role of fairgpu reads it, so it changes nothing; did you mean %s? (the settings: docs/settings.md)"
        % pair for pair in (("cluster_nmae", "cluster_name"), ("kueue_fair_shairng", "kueue_fair_sharing"),
                            ("lab_cluster_node_pool", "lab_cluster_node_pools"), ("tenants_lsit", "tenants_list"))]


def test_the_settings_are_every_roles_argument_specs():
    roles, settings = role_settings()
    assert {"tenants", "kueue", "lab_cluster", "run", "validate"} <= set(roles)
    assert {"tenants_list", "kueue_fair_sharing", "lab_cluster_node_pools", "run_local_ports", "validate_scenarios"} <= settings
    assert not set(resolve.MOVED_VARIABLES) & settings


def test_the_helm_client_is_on_path_unless_given():
    assert run_settings("site", "existing")["helm_binary"] == ""
    settings = run_settings("site", "existing", helm_binary="/opt/helm/bin/helm")
    assert (settings["errors"], settings["helm_binary"]) == ([], "/opt/helm/bin/helm")


@pytest.mark.parametrize("value", ["helm", "bin/helm", 3])
def test_a_helm_client_that_is_not_an_absolute_path_is_refused(value):
    settings = run_settings("site", "existing", helm_binary=value)
    assert len(settings["errors"]) == 1 and settings["errors"][0].startswith("run_helm_binary: ")
    assert settings["helm_binary"] == ""


def test_the_inventorys_modes_override_the_providers_once_for_every_role():
    # An existing cluster of kwok nodes (fairgpu issue 15): the local stand-ins although the provider is existing.
    local = {"gpu_operator": "simulated", "kueue": "local", "monitoring": "local"}
    settings = run_settings("site", "existing", mode_overrides=local)
    assert settings["errors"] == [] and settings["modes"] == local
    # One component overridden, the others the provider's; unset and empty keep the provider's.
    assert run_settings("site", "existing", mode_overrides={"kueue": "local", "monitoring": None, "gpu_operator": ""})[
        "modes"] == {"gpu_operator": "helm", "kueue": "local", "monitoring": "helm"}
    assert run_settings("site", "kwok", mode_overrides={"kueue": "helm"})["modes"]["kueue"] == "helm"


def test_a_mode_that_does_not_exist_is_named_with_the_choices():
    settings = run_settings("site", "existing", mode_overrides={"kueue": "simulated", "gpu_operator": "local"})
    assert settings["errors"] == [
        "gpu_operator_mode: 'local' is not a mode of the gpu operator; use simulated or helm, or leave it unset for "
        "the provider's (helm on existing)",
        "kueue_mode: 'simulated' is not a mode of the kueue; use local or helm, or leave it unset for the provider's "
        "(helm on existing)"]


def test_local_processes_on_an_existing_cluster_get_the_port_checks():
    errors = run_settings("site", "existing", local_ports={"prometheus": 39190}, ephemeral_ports=LINUX_RANGE,
                          mode_overrides={"monitoring": "local"})["errors"]
    assert [e.split(":")[0] for e in errors] == ["run_local_ports.dashboard", "run_local_ports.prometheus"]


# Loopback only on the embedded cluster (issue 25 item 8): helm would dial a chart repository or registry.
@pytest.mark.parametrize("overrides, charts, variable", [
    ({"gpu_operator": "helm"}, None, "gpu_operator_mode: 'helm'"),
    ({"monitoring": "helm"}, None, "monitoring_mode: 'helm' with monitoring_install_chart: true"),
    ({"monitoring": "helm"}, {"monitoring_install_chart": "yes"}, "monitoring_mode: 'helm'"),
    ({"monitoring": "helm"}, {"monitoring_install_chart": True, "monitoring_chart_ref": "/charts/kps.tgz"},
     "monitoring_mode: 'helm'"),
    ({"kueue": "helm"}, {"kueue_chart_ref": "oci://registry.k8s.io/kueue/charts/kueue"},
     "kueue_chart_ref: 'oci://registry.k8s.io/kueue/charts/kueue' is a remote chart"),
    ({"kueue": "helm"}, {"kueue_chart_ref": "https://example.com/kueue-0.19.2.tgz"}, "kueue_chart_ref: 'https://"),
    ({"kueue": "helm"}, {"kueue_chart_ref": "kueue/kueue"}, "kueue_chart_ref: 'kueue/kueue' is a chart of a repository"),
])
def test_the_embedded_cluster_refuses_what_would_dial_off_the_machine(overrides, charts, variable):
    errors = run_settings("site", "kwok", mode_overrides=overrides, chart_settings=charts)["errors"]
    assert len(errors) == 1, errors
    assert errors[0].startswith(variable), errors
    assert "on cluster_provider: kwok nothing may leave the machine" in errors[0]


def test_the_refusals_name_the_local_way():
    errors = run_settings("site", "kwok", mode_overrides={"gpu_operator": "helm", "monitoring": "helm", "kueue": "helm"},
                          chart_settings={"kueue_chart_ref": "oci://registry.k8s.io/kueue/charts/kueue"})["errors"]
    assert len(errors) == 3, errors
    assert "use gpu_operator_mode: simulated" in errors[0]
    assert "use monitoring_mode: local" in errors[1] and "monitoring_install_chart: false" in errors[1]
    assert "leave kueue_chart_ref empty for the toolchain's copy" in errors[2]


@pytest.mark.parametrize("overrides, charts", [
    (None, None),
    ({"monitoring": "helm"}, {"monitoring_install_chart": False}),
    ({"monitoring": "helm"}, {"monitoring_install_chart": "false"}),
    ({"kueue": "helm"}, None),
    ({"kueue": "helm"}, {"kueue_chart_ref": "/home/u/.cache/fairgpu/kueue/charts/kueue"}),
    ({"kueue": "helm"}, {"kueue_chart_ref": "./kueue-0.19.2.tgz"}),
    # A remote ref that is never read (Kueue runs as the local process) is not refused.
    (None, {"kueue_chart_ref": "oci://registry.k8s.io/kueue/charts/kueue", "monitoring_chart_ref": "a/b"}),
])
def test_the_embedded_cluster_keeps_the_local_ways(overrides, charts):
    assert run_settings("site", "kwok", mode_overrides=overrides, chart_settings=charts)["errors"] == []


@pytest.mark.parametrize("provider", ["kind", "existing"])
def test_other_clusters_may_use_chart_repositories(provider):
    assert run_settings("site", provider, chart_settings={"kueue_chart_ref": "oci://registry.k8s.io/kueue/charts/kueue",
                                                          "monitoring_install_chart": True})["errors"] == []
