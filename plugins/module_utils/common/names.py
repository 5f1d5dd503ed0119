# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The names fairgpu shares between its modules, module_utils and filters: resources, labels, annotations, API
versions and the names of the objects it creates. Each is defined here once; everything in ``plugins/`` imports it.

Upstream's names (NVIDIA's device plugin and GPU feature discovery, Kueue, Kubernetes) are written as upstream
spells them; fairgpu's own are prefixed ``fairgpu``.

Role YAML and Jinja templates cannot import Python, so some of these names are also written literally there;
``YAML_LITERALS`` lists where, and ``tests/unit/test_names.py`` checks that the roles and playbooks use no other
copy and that every listed file still says the name.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# --- NVIDIA: the device plugin's resources and GPU feature discovery's node labels --------------------------
GPU_RESOURCE = "nvidia.com/gpu"
# A MIG device under the ``mixed`` strategy: nvidia.com/mig-<profile>, such as nvidia.com/mig-2g.20gb.
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
# The GPU Operator's mig.strategy as GFD publishes it (none | single | mixed; absent under none).
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
# The MIG manager's label pair (NVIDIA mig-parted v0.13.1, k8s-mig-manager): the layout a node is told to take, and
# the manager's answer (pending, rebooting, success, failed).
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
# GPU sharing (time-slicing, MPS): GFD writes the replicas and the strategy (time-slicing | mps | none) and, unless the
# device plugin renames the resource, adds -SHARED to the product; with renameByDefault the resource is
# nvidia.com/gpu.shared and the product keeps its name (NVIDIA GPU Operator docs, "GPU sharing"; k8s-device-plugin
# README, "Shared Access to GPUs").
GPU_SHARED_RESOURCE = "nvidia.com/gpu.shared"
GPU_REPLICAS_LABEL = "nvidia.com/gpu.replicas"
GPU_SHARING_STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
SHARED_PRODUCT_SUFFIX = "-SHARED"

# --- Kueue (v1beta2, as pinned in files/lab/toolchain/versions.env) ---------------------------------------------
KUEUE_API = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
# Kueue names a Job's Workload job-<job name>-<hash> (jobframework GetWorkloadNameForOwnerWithGVK).
WORKLOAD_PREFIX = "job-"

# --- Kubernetes ---------------------------------------------------------------------------------------------
ADMISSION_API = "admissionregistration.k8s.io/v1"
RBAC_API = "rbac.authorization.k8s.io/v1"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = {MANAGED_BY_LABEL: "fairgpu"}
# Taints Kubernetes puts on a node for its state, not its pool: node.kubernetes.io/unschedulable (cordon, the
# node lifecycle controller's TaintNodesByCondition), /not-ready, /unreachable, /memory-pressure ... (well-known
# taints, https://kubernetes.io/docs/reference/labels-annotations-taints/). They come and go with a drain.
NODE_LIFECYCLE_TAINT_PREFIX = "node.kubernetes.io/"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
# The kubelet labels its Node with the node's name (well-known label).
HOSTNAME_LABEL = "kubernetes.io/hostname"
# The Job controller labels a Job's pods job-name=<job name>.
JOB_NAME_LABEL = "job-name"

# --- fairgpu's labels and annotations -----------------------------------------------------------------------
# The lab's simulated hardware on a kwok node (roles/lab_cluster writes the first, the lab's MIG manager the others):
# <prefix>product, count, memory-mib, sharing; the MIG layout it applied; the node's nvidia-smi outputs. The production
# path reads them where a node has them, as it would read a real node's reports.
SIMULATED_GPU_ANNOTATION_PREFIX = "fairgpu.io/simulated-gpu-"
SIMULATED_MIG_LAYOUT_ANNOTATION = "fairgpu.io/simulated-mig-layout"
SIMULATED_NVIDIA_SMI_ANNOTATION = "fairgpu.io/simulated-nvidia-smi"
TENANT_LABEL = "fairgpu.io/tenant"
# Namespace annotation: the WorkloadPriorityClasses the tenant's Jobs may name (comma-separated), read by the
# JOB_POLICY ValidatingAdmissionPolicy.
PRIORITY_CLASSES_ANNOTATION = "fairgpu.io/workload-priority-classes"
# The validation scenario a load Job and its pods belong to (fairgpu.io/validation=<scenario>).
VALIDATION_LABEL = "fairgpu.io/validation"
# A validation load Job queued behind the flood, deleted after the measurement.
BACKLOG_LABEL = "fairgpu.io/backlog"
# The replay role labels its Jobs and pods fairgpu.io/replay=<replay_run_id>.
REPLAY_LABEL = "fairgpu.io/replay"
# The isolation probe's Jobs and pods.
PROBE_LABEL = "fairgpu.io/probe"
# Node annotation: fairgpu cordoned the node to drain it for the MIG config named in the value (mig_layout's drain);
# only a node carrying it is uncordoned by fairgpu, and a run that finds it left over repairs the node.
MIG_DRAIN_ANNOTATION = "fairgpu.io/mig-drain-cordoned"

# --- fairgpu's objects --------------------------------------------------------------------------------------
# In every tenant namespace (kueue/objects.py namespace_objects).
RESOURCE_QUOTA = "fairgpu-gpu-quota"
LIMIT_RANGE = "fairgpu-defaults"
TENANT_ROLE = "fairgpu-tenant"
# The ValidatingAdmissionPolicies (and their bindings) on every namespace labelled TENANT_LABEL.
GPU_POD_POLICY = "fairgpu-tenant-gpu-pods"
POD_CREATOR_POLICY = "fairgpu-tenant-pods"
WORKLOAD_KINDS_POLICY = "fairgpu-tenant-workloads"
JOB_POLICY = "fairgpu-tenant-jobs"
DELETION_POLICY = "fairgpu-tenant-job-deletions"
OBJECT_SIZE_POLICY = "fairgpu-tenant-object-size"
# Every policy above (kueue/admission.py), each with a binding of the same name.
ADMISSION_POLICIES = (GPU_POD_POLICY, POD_CREATOR_POLICY, WORKLOAD_KINDS_POLICY, JOB_POLICY, DELETION_POLICY,
                      OBJECT_SIZE_POLICY)
# The ResourceQuota that holds pods of the PriorityClasses tenants may not use at 0 (tenants_isolation
# denied_pod_priority_classes).
PRIORITY_QUOTA = "fairgpu-denied-priority"
# MultiKueue (docs/multikueue.md): a cluster's part in it (inventory variable multikueue_role), the controller name of
# Kueue's MultiKueue admission check and the managedBy value its Job webhook gives a manager's Jobs (Kueue v0.19.2
# apis/kueue/v1beta2/multikueue_types.go MultiKueueControllerName), and fairgpu's objects on the manager.
MULTIKUEUE_ROLES = ("none", "manager", "worker")
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
MULTIKUEUE_ADMISSION_CHECK = "fairgpu-multikueue"
MULTIKUEUE_CONFIG = "fairgpu-workers"
# On each worker: the ServiceAccount the manager's Kueue acts as, and its ClusterRole and binding.
MULTIKUEUE_WORKER_IDENTITY = "fairgpu-manager"
# A tenant's LocalQueue is <tenant><suffix> (role variable tenants_local_queue_suffix).
LOCAL_QUEUE_SUFFIX = "-queue"
# Job name prefixes: the validation's load Jobs, and the isolation probe's objects.
LOAD_JOB_PREFIX = "fairgpu-val-"
PROBE_PREFIX = "fairgpu-probe-"
# The isolation probe's pods only hold their devices.
PROBE_IMAGE = "registry.k8s.io/pause:3.10"

# Where role YAML and templates write one of these names literally (Jinja cannot import it), by name.
YAML_LITERALS = {
    "KUEUE_API": ("roles/kueue/tasks/install.yml", "roles/multikueue/tasks/manager.yml", "roles/replay/tasks/main.yml"),
    "REPLAY_LABEL": ("roles/replay/tasks/main.yml",),
    "MANAGED_BY_LABEL": ("roles/lab_monitoring/tasks/process.yml", "roles/multikueue/tasks/manager.yml"),
    "LOCAL_QUEUE_SUFFIX": ("roles/tenants/defaults/main.yml", "roles/tenants/meta/argument_specs.yml"),
    "GPU_PRESENT_LABEL": ("roles/gpu_operator/meta/argument_specs.yml", "roles/gpu_operator/tasks/install.yml",
                          "roles/mig_config/defaults/main.yml", "roles/mig_config/meta/argument_specs.yml",
                          "roles/multikueue/tasks/worker_nodes.yml"),
    "HOSTNAME_LABEL": ("roles/lab_cluster/templates/kwok-nodes.yaml.j2",),
}
