"""tests/lab/kube's commands."""

import sys

from .cluster import Cluster
from .podman import LabError, log


def main(argv):
    cmd, args = (argv[0], argv[1:]) if argv else ("", [])
    try:
        c = Cluster()
        if cmd == "up":
            c.up()
        elif cmd == "down":
            c.down()
        elif cmd == "status":
            print(c.status())
        elif cmd == "synthetic":
            if not args or not args[0].isdigit():
                raise LabError("usage: tests/lab/kube synthetic N [PROFILE]")
            names = c.synthetic(int(args[0]), args[1] if len(args) > 1 else "hgx-h100")
            log(f"{len(names)} synthetic node(s) Ready: {names[0]} ...")
        else:
            raise LabError(f"unknown command {cmd!r} (see tests/lab/kube --help)")
    except LabError as e:
        print(f"[kube] ERROR: {e}", file=sys.stderr)
        return 1
    return 0


sys.exit(main(sys.argv[1:]))
