"""Local intersphinx inventories for the documentation site (make docs), for a machine that cannot
reach docs.python.org, jinja.palletsprojects.com and docs.ansible.com.

  tests/lab/docs_inventories.py DIR TARGET...

The conf.py that antsibull-docs sphinx-init writes names, for each inventory Sphinx fetches, a
local alternative ../<name>.inv; Sphinx reads it when the fetch fails. This writes them into DIR:
ansible_devel.inv with the docs.ansible.com targets given (LABEL=PAGE for a page of Ansible's docs,
or a module's FQCN), the others empty (the site links to nothing there). The links still point at
the real pages; a reference to a target not given still fails the offline build."""
import os
import re
import sys
import zlib


def main():
    directory, refs = sys.argv[1], sys.argv[2:]
    lines = []
    for ref in refs:
        if "=" in ref:
            label, page = ref.split("=", 1)
        else:
            label, page = f"ansible_collections.{ref}_module", "collections/%s_module.html" % ref.replace(".", "/")
        lines.append(f"{label} std:label -1 {page}#{re.sub('[^a-z0-9]+', '-', label)} -\n")
    for name in ("python2", "python3", "jinja2", "ansible_devel"):
        body = "".join(lines).encode() if name == "ansible_devel" else b""
        with open(os.path.join(directory, name + ".inv"), "wb") as handle:
            handle.write(b"# Sphinx inventory version 2\n# Project: %s\n# Version: \n"
                         b"# The remainder of this file is compressed using zlib.\n" % name.encode())
            handle.write(zlib.compress(body))


if __name__ == "__main__":
    main()
