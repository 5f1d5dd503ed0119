"""Test set-up shared by unit and integration tests: import the collection as ansible_collections.fairgpu.tenancy
from the checkout (through the .collections link that `make setup` creates)."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, ".collections")
if not os.path.isdir(os.path.join(COLLECTIONS, "ansible_collections", "fairgpu", "tenancy")):
    raise RuntimeError("run `make setup` first: %s/ansible_collections/fairgpu/tenancy is missing" % COLLECTIONS)
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
