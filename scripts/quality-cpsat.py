#!/usr/bin/env python3
"""The fewest migrations (then the fewest bytes) reaching a memory spread: a CP-SAT model of the
final placement, the reference of the quality benchmark on clusters past flxp's exact search.

Reads one problem as JSON (written by `cargo bench -p flxp-core --features exact --bench quality`)
and prints one line: `migrations bytes status bound`, where status is OPTIMAL or FEASIBLE and bound
is the solver's proven lower bound on the migrations. The model knows the final placement only,
not the order of the moves, so its optimum is a lower bound on every safe plan: a ratio against it
never flatters flxp.

Problem: {"nodes": [{"maxmem": KiB, "mem": KiB used}], "imbalance": pp,
          "guests": [{"node": i, "mem": KiB, "bytes": B, "targets": [j, ...], "stay": bool,
                      "hint": j}],
          "apart": [[{"guest": k} | {"node": i}, ...]], "seconds": S}
`targets` are the nodes a guest may end on besides its own; `stay` whether it may end where it
is; `hint` where flxp's plan leaves it (the solver's first solution); each `apart` set may have at most one member per node (a hard anti-affinity group, with the
members that may not move given by their node).

Needs ortools (`python3 -m venv target/cpsat-venv && target/cpsat-venv/bin/pip install ortools`).
"""

import json
import sys

from ortools.sat.python import cp_model

# Scaled percent: 1 pp is SCALE units; per-term rounding is absorbed by SLACK (relaxing, so the
# optimum stays a lower bound).
SCALE = 1_000_000
SLACK = 1_000


def solve(p):
    nodes, guests = p["nodes"], p["guests"]
    n = len(nodes)
    m = cp_model.CpModel()
    x = []  # per guest: {node: var}
    for g in guests:
        here = {}
        for t in g["targets"]:
            here[t] = m.NewBoolVar("")
        if g["stay"]:
            here[g["node"]] = m.NewBoolVar("")
        if not here:
            return None
        m.AddExactlyOne(here.values())
        x.append(here)
        # flxp's own final placement: a first solution, so the solver always has one.
        hint = g.get("hint")
        for t, v in here.items():
            m.AddHint(v, t == hint)
    moved = []
    for g, here in zip(guests, x):
        v = here.get(g["node"])
        moved.append((1 - v) if v is not None else 1)
    # Final memory per node, in KiB.
    loads = []
    for i, node in enumerate(nodes):
        terms = []
        base = node["mem"]
        for g, here in zip(guests, x):
            if g["node"] == i:
                base -= g["mem"]
            v = here.get(i)
            if v is not None:
                terms.append((g["mem"], v))
        loads.append((base, terms))
    hi = m.NewIntVar(0, 200 * SCALE, "hi")
    lo = m.NewIntVar(-100 * SCALE, 200 * SCALE, "lo")
    for i, node in enumerate(nodes):
        base, terms = loads[i]
        cap = node["maxmem"]
        m.Add(base + sum(k * v for k, v in terms) <= cap)
        f = 100.0 * SCALE / cap
        pct = int(round(base * f)) + sum(int(round(k * f)) * v for k, v in terms)
        m.Add(pct <= hi)
        m.Add(pct >= lo)
    m.Add(hi - lo <= int(p["imbalance"] * SCALE) + SLACK)
    for group in p.get("apart", []):
        per_node = [[] for _ in range(n)]
        fixed = [0] * n
        for member in group:
            if "node" in member:
                fixed[member["node"]] += 1
            else:
                for t, v in x[member["guest"]].items():
                    per_node[t].append(v)
        for i in range(n):
            if per_node[i] or fixed[i]:
                m.Add(sum(per_node[i]) + fixed[i] <= 1)
    count = sum(moved)
    m.Minimize(count)
    solver = cp_model.CpSolver()
    # Deterministic time, so a loaded machine gives the same answer (the wall clock caps it).
    secs = p.get("seconds", 20.0)
    solver.parameters.max_deterministic_time = secs * 2 / 3
    solver.parameters.max_time_in_seconds = secs * 20
    solver.parameters.num_workers = 1
    # Start from the hint (flxp's plan) even where the first search would not meet it.
    solver.parameters.repair_hint = True
    solver.parameters.random_seed = 1
    status = solver.Solve(m)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    fewest = int(round(solver.ObjectiveValue()))
    bound = int(round(solver.BestObjectiveBound() + 0.4999))
    optimal = status == cp_model.OPTIMAL
    # Among plans with that many migrations, the fewest bytes (MiB, to keep the sum small),
    # starting from the plan just found.
    m.ClearHints()
    for here in x:
        for v in here.values():
            m.AddHint(v, solver.Value(v) == 1)
    m.Add(count == fewest)
    mib = [max(1, g["bytes"] >> 20) for g in guests]
    m.Minimize(sum(b * mv for b, mv in zip(mib, moved)))
    solver.parameters.max_deterministic_time = secs / 3
    status = solver.Solve(m)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return fewest, 0, optimal, bound
    nbytes = 0
    for g, here in zip(guests, x):
        v = here.get(g["node"])
        if v is None or solver.Value(v) == 0:
            nbytes += g["bytes"]
    return fewest, nbytes, optimal, bound


def main():
    with open(sys.argv[1]) as f:
        p = json.load(f)
    r = solve(p)
    if r is None:
        print("none")
        return
    fewest, nbytes, optimal, bound = r
    print(fewest, nbytes, "OPTIMAL" if optimal else "FEASIBLE", bound)


if __name__ == "__main__":
    main()
