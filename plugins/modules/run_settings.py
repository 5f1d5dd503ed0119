#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: run_settings
short_description: Decide the run's settings of one inventory host once, the fact every role reads
version_added: 0.1.0
description:
  - Runs on the controller (an action plugin, plugins/action/run_settings.py); this file holds its documentation.
  - One call of the resolver (plugins/module_utils/plan/resolve.py, C(run_settings)), where each rule has its one
    home; the path (C(kueue) or C(mig)), the install mode of each component, the MIG strategy, the namespaces, the
    local ports of the embedded cluster's processes, the pinned versions, the helm client, the Pod Security rows and
    the connection (kubeconfig and context) of the host's own cluster, never the user's current context.
  - For the playbooks that work on what C(site.yml) built (O(playbook) C(tenants), C(validate), C(replay)) it reads
    the path C(site.yml) recorded on the cluster (ConfigMap C(kube-system/fairgpu-run)) first, and that read is also
    their check that the cluster answers.
  - Fails with every error, one a line, each naming the variable and the fix, before anything changes.
author:
  - fairgpu maintainers (!UNKNOWN)
options:
  playbook:
    description: Which playbook runs.
    type: str
    required: true
    choices: [site, tenants, validate, replay, render, teardown]
  provider:
    description: C(cluster_provider), where the cluster comes from.
    type: str
    default: kwok
  cluster_name:
    description: C(cluster_name), which names the embedded cluster and the local state of its processes.
    type: str
    default: fairgpu
  kubeconfig:
    description: C(cluster_kubeconfig); empty, the provider's own file (required for C(existing)).
    type: str
    default: ""
  context:
    description: C(cluster_context); empty, the file's current context.
    type: str
    default: ""
  path:
    description: C(-e path), when given.
    type: str
  run_path:
    description: The path when neither C(-e path) nor the cluster's record says.
    type: str
    default: ""
  mig_strategy:
    description: C(run_mig_strategy); empty, the path's own (C(single) on kueue, C(mixed) on mig).
    type: str
    default: ""
  local_ports:
    description: C(run_local_ports), ports on 127.0.0.1 by name over the defaults.
    type: raw
    default: {}
  namespaces:
    description: C(run_namespaces), namespaces by component over the defaults.
    type: raw
    default: {}
  state_dir:
    description: C(run_state_dir), fairgpu's state on this machine.
    type: str
    required: true
  toolchain_cache:
    description: C(run_toolchain_cache), where the toolchain is built.
    type: str
    required: true
  helm_binary:
    description: C(run_helm_binary), an absolute path or empty.
    type: raw
    default: ""
  mode_overrides:
    description: The host's C(gpu_operator_mode), C(kueue_mode), C(monitoring_mode) by component (null, the provider's).
    type: dict
    default: {}
  chart_settings:
    description: The host's chart variables the loopback rule and the Pod Security rows read.
    type: dict
    default: {}
  host_variables:
    description:
      - The names of the variables the inventory and extra vars set for the host. A moved one is refused, naming its
        new place; one that begins with a role's prefix, is no setting and is near one (C(kueue_fair_shairng)) is
        warned about, naming the setting meant (a warning, since a platform team's own variable may share a prefix).
    type: list
    elements: str
    default: []
notes:
  - The resolver's rules, with the upstream source of each, are in the docstring of plugins/module_utils/plan/resolve.py
    and the table of docs/architecture.md "The run's settings, decided once".
"""

EXAMPLES = r"""
- name: Resolve the run's settings and the cluster's connection
  fairgpu.tenancy.run_settings:
    playbook: site
    state_dir: "{{ lookup('ansible.builtin.env', 'HOME') }}/.local/share/fairgpu"
    toolchain_cache: "{{ lookup('ansible.builtin.env', 'HOME') }}/.cache/fairgpu"
"""

RETURN = r"""
ansible_facts:
  description: The fact C(run_settings).
  returned: success
  type: dict
  contains:
    run_settings:
      description:
        - C(path), C(path_source), C(provider), C(cluster), C(cluster_name), C(modes) (C(gpu_operator), C(kueue),
          C(monitoring)), C(mig_strategy), C(nodes_source), C(namespaces), C(mig_parted_config_name), C(local)
          (C(ports), C(state_dir), C(toolchain_cache), C(kueue_ca_dir)), C(versions), C(helm_binary),
          C(pod_security), C(connection) (C(kubeconfig), C(context), C(auth) for module_defaults) and C(record)
          (the ConfigMap C(site.yml) applies).
      type: dict
"""
