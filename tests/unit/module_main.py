"""A module's entry point called as Ansible calls it: its arguments through ``patch_module_args``, ``main()`` run
to its ``exit_json`` or ``fail_json`` (which end the process), and the JSON it printed read back."""

import json

import pytest
from ansible.module_utils.testing import patch_module_args


def run_main(module, args, capsys):
    """Run ``module.main()`` with ``args``; return the result it printed (a dict, ``failed`` set on failure)."""
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)
