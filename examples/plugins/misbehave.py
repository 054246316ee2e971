#!/usr/bin/env python3
"""A plugin that misbehaves on purpose, to see flxp's failure policies at work.

    python3 misbehave.py MODE

MODE: sleep (never answers in time), crash (exits 1), garbage (not JSON), huge (an answer of
10 MiB), unknown-node (a filter verdict for a node that is not a candidate), wrong-kind (a score
answer to a filter request), unsafe (balance proposals flxp must refuse).
"""
import json
import sys
import time


def main():
    mode = sys.argv[1]
    request = json.load(sys.stdin)
    if mode == "sleep":
        time.sleep(60)
    elif mode == "crash":
        print("licence server unreachable", file=sys.stderr)
        sys.exit(1)
    elif mode == "garbage":
        print("<html>oops</html>")
    elif mode == "huge":
        sys.stdout.write("x" * (10 << 20))
    elif mode == "unknown-node":
        nodes = [{"node": n["name"], "allowed": True} for n in request["nodes"]]
        nodes.append({"node": "ghost", "allowed": True})
        json.dump({"protocol": 1, "kind": "filter", "nodes": nodes}, sys.stdout)
    elif mode == "wrong-kind":
        json.dump({"protocol": 1, "kind": "score", "scores": []}, sys.stdout)
    elif mode == "unsafe":
        running = [g for g in request["guests"] if g["running"]]
        big = max(running, key=lambda g: g["memory"])
        template = next(g for g in request["guests"] if not g["running"])
        others = [n["name"] for n in request["nodes"] if n["name"] != big["node"]]
        elsewhere = next(n["name"] for n in request["nodes"] if n["name"] != template["node"])
        json.dump({"protocol": 1, "kind": "balance", "migrations": [
            {"vmid": big["vmid"], "target": others[0], "reason": "too big for the target"},
            {"vmid": template["vmid"], "target": elsewhere, "reason": "a template"},
            {"vmid": 99999, "target": others[0], "reason": "no such guest"},
            {"vmid": big["vmid"], "target": "ghost", "reason": "no such node"},
        ]}, sys.stdout)


if __name__ == "__main__":
    main()
