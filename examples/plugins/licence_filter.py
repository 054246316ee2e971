#!/usr/bin/env python3
"""flxp filter plugin: Windows VMs only on nodes that hold a Windows licence.

Usage in flxp.toml:

    [[plugin]]
    name = "licences"
    kind = "filter"
    command = ["/usr/bin/python3", "/etc/flxp/plugins/licence_filter.py", "/etc/flxp/licences.txt"]

The licence file lists one node name per line (# starts a comment). A VM counts as Windows when
one of its tags starts with "windows" (e.g. `windows`, `windows-2022`). Other VMs go anywhere.
"""
import json
import sys


def licensed_nodes(path):
    with open(path, encoding="utf-8") as f:
        return {line.split("#")[0].strip() for line in f} - {""}


def main():
    request = json.load(sys.stdin)
    licensed = licensed_nodes(sys.argv[1])
    tags = request["guest"]["tags"]
    windows = any(t.startswith("windows") for t in tags)
    verdicts = []
    for node in request["nodes"]:
        allowed = not windows or node["name"] in licensed
        verdict = {"node": node["name"], "allowed": allowed}
        if not allowed:
            verdict["reason"] = "no Windows licence on this node"
        verdicts.append(verdict)
    json.dump({"protocol": 1, "kind": "filter", "nodes": verdicts}, sys.stdout)


if __name__ == "__main__":
    main()
