"""Offline stand-in for the get-pip script that ansible-test's sanity virtual environments bootstrap with.

ansible-test creates each sanity test's virtual environment without pip and downloads get-pip from a host
this machine cannot reach (ansible/ansible#77304). It first looks for a cached copy in
~/.ansible/test/cache/get_pip_<version>.py, where tests/sanity/run.sh puts this file. It does what
get-pip does with the arguments ansible-test passes (for example `pip==24.2 --no-setuptools --no-wheel`):
pip from the interpreter's own bundled wheel (ensurepip, no network), then the requested packages from the
configured package index.
"""

import subprocess
import sys


def main():
    options = sys.argv[1:]
    packages = [arg for arg in options if arg not in ("--no-setuptools", "--no-wheel")]
    # In a process of its own: ensurepip points PIP_CONFIG_FILE at /dev/null in the process that runs it,
    # and the installs below need the machine's pip configuration (index, certificates).
    subprocess.check_call([sys.executable, "-m", "ensurepip"])
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet"] + packages)
    if "--no-setuptools" in options:  # ensurepip brings setuptools on Python < 3.12; wheel it never brings
        subprocess.check_call([sys.executable, "-m", "pip", "uninstall", "--quiet", "--yes", "setuptools"])


if __name__ == "__main__":
    main()
