"""Stand-in for the pip bootstrap script ansible-test downloads before it creates its sanity
and units virtual environments. That download comes from a host outside the package registries,
which the lab cannot reach; this script gives the new environment pip from Python's own
ensurepip and then installs what ansible-test asked for from the package index.

ansible-test runs it as `python get_pip.py [pip options] [packages] [--no-setuptools] [--no-wheel]`.
"""
import subprocess
import sys


def main():
    # In a child process: ensurepip.bootstrap() in this one would point PIP_CONFIG_FILE at
    # /dev/null for the rest of the process, dropping the machine's pip configuration.
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"], stdout=subprocess.DEVNULL)
    args = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet"] + args)


if __name__ == "__main__":
    main()
