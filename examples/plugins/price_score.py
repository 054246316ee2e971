#!/usr/bin/env python3
"""flxp score plugin: prefer nodes where electricity is cheap.

Usage in flxp.toml:

    [[plugin]]
    name = "price"
    kind = "score"
    command = ["/usr/bin/python3", "/etc/flxp/plugins/price_score.py", "/etc/flxp/prices.txt"]

    [policies.cheap]
    free-memory = 1
    price = 3

The price file has lines `node price` (any unit, e.g. EUR/kWh); a node not listed costs the
highest listed price. The score is the negated price: flxp rescales scores to 0..100 (cheapest
100, dearest 0) and weighs them like its own scorers.
"""
import json
import sys


def prices(path):
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#")[0].strip()
            if line:
                node, price = line.split()
                out[node] = float(price)
    return out


def main():
    request = json.load(sys.stdin)
    table = prices(sys.argv[1])
    dearest = max(table.values(), default=0.0)
    scores = [
        {"node": n["name"], "score": -table.get(n["name"], dearest)}
        for n in request["nodes"]
    ]
    json.dump({"protocol": 1, "kind": "score", "scores": scores}, sys.stdout)


if __name__ == "__main__":
    main()
