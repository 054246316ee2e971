#!/usr/bin/env python3
"""Drive a running `flxp sim` the way community tools drive Proxmox VE: with proxmoxer.

Reads permissions, nodes and their versions, node and guest rrddata, HA status and rules, pools,
the qemu and lxc lists and guest configs; writes tags; migrates a VM and grows a disk, following
each task to its end; checks Proxmox's error answers. Runs once with API-token auth and once with
password (ticket + CSRF) auth. Exits 0 when every check passed, 1 otherwise, naming each failure.

    check.py --host 127.0.0.1:8006 --token 'root@pam!check=<uuid>' \
             --user root@pam --password secret [--http]
"""

import argparse
import sys
import time

from proxmoxer import ProxmoxAPI, ResourceException
from proxmoxer.backends.https import ProxmoxHTTPAuth
from proxmoxer.tools import Tasks

FAILURES = []


def check(cond, what):
    """Record a failed expectation instead of stopping at the first one."""
    if cond:
        print(f"  ok    {what}")
    else:
        print(f"  FAIL  {what}")
        FAILURES.append(what)
    return cond


def connect_token(args):
    user, rest = args.token.split("!", 1)
    name, value = rest.rsplit("=", 1)
    prox = ProxmoxAPI(args.host, user=user, token_name=name, token_value=value,
                      verify_ssl=False, timeout=10)
    if args.http:
        # proxmoxer always builds https:// URLs; token auth makes no request at construction,
        # so the base URL can be pointed at plain HTTP before the first call.
        prox._store["base_url"] = prox._store["base_url"].replace("https://", "http://", 1)
    return prox


def connect_password(args):
    if not args.http:
        return ProxmoxAPI(args.host, user=args.user, password=args.password,
                          verify_ssl=False, timeout=10)
    # For plain HTTP, build the client with a placeholder token, then log in over http://.
    prox = ProxmoxAPI(args.host, user=args.user, token_name="x", token_value="x",
                      verify_ssl=False, timeout=10)
    base = prox._store["base_url"].replace("https://", "http://", 1)
    prox._store["base_url"] = base
    auth = ProxmoxHTTPAuth(args.user, args.password, base_url=base, verify_ssl=False, timeout=10)
    prox._store["session"].auth = auth
    return prox


def read_everything(prox):
    perms = prox.access.permissions.get()
    check("Sys.Audit" in perms.get("/", {}), "permissions on / include Sys.Audit")

    nodes = prox.nodes.get()
    check(len(nodes) >= 1, f"/nodes lists {len(nodes)} nodes")
    online = [n["node"] for n in nodes if n.get("status") == "online"]
    check(len(online) >= 2, f"{len(online)} nodes online")
    for n in online:
        v = prox.nodes(n).version.get()
        check(v.get("version", "").startswith("9."), f"{n}: version {v.get('version')}")
        rows = prox.nodes(n).rrddata.get(timeframe="hour", cf="AVERAGE")
        check(len(rows) == 60 and "time" in rows[-1], f"{n}: 60 hourly rrddata rows")
        check("pressurememorysome" in rows[-1] and "memused" in rows[-1],
              f"{n}: rrddata has memused and pressure")
        status = prox.nodes(n).status.get()
        check(status["memory"]["total"] > 0 and len(status["loadavg"]) == 3, f"{n}: status")

    ha = prox.cluster.ha.status.current.get()
    check(any(e.get("type") == "quorum" for e in ha), "HA status has the quorum entry")
    rules = prox.cluster.ha.rules.get()
    check(isinstance(rules, list), f"HA rules: {len(rules)}")

    pools = prox.pools.get()
    check(len(pools) >= 1, f"{len(pools)} pools")
    for p in pools:
        pool = prox.pools(p["poolid"]).get()
        check("members" in pool, f"pool {p['poolid']} has {len(pool['members'])} members")

    guests = 0
    for n in online:
        for kind in ("qemu", "lxc"):
            for g in getattr(prox.nodes(n), kind).get():
                guests += 1
                cfg = getattr(prox.nodes(n), kind)(g["vmid"]).config.get()
                check(len(cfg.get("digest", "")) == 40, f"{kind}/{g['vmid']}: config with digest")
                rows = getattr(prox.nodes(n), kind)(g["vmid"]).rrddata.get(timeframe="hour")
                check(len(rows) == 60, f"{kind}/{g['vmid']}: rrddata")
    check(guests >= 3, f"{guests} guests listed")

    nextid = prox.cluster.nextid.get()
    check(str(nextid).isdigit(), f"nextid {nextid!r}")


def write_and_migrate(prox, label):
    vms = prox.cluster.resources.get(type="vm")
    ha_managed = {r["sid"] for r in prox.cluster.ha.resources.get()}
    candidates = [v for v in vms if v["type"] == "qemu" and v["status"] == "running"
                  and not v.get("lock") and f"vm:{v['vmid']}" not in ha_managed]
    if not check(candidates, f"[{label}] a running, unlocked, non-HA VM to migrate"):
        return
    vm = candidates[0]
    src, vmid = vm["node"], vm["vmid"]
    pre = prox.nodes(src).qemu(vmid).migrate.get()
    allowed = pre.get("allowed_nodes", [])
    if not check(allowed, f"[{label}] precondition allows {allowed}"):
        return
    dst = allowed[0]

    prox.nodes(src).qemu(vmid).config.put(tags=f"Checked;{label};checked")
    cfg = prox.nodes(src).qemu(vmid).config.get()
    check(cfg.get("tags") == f"checked;{label}", f"[{label}] tags normalised: {cfg.get('tags')}")

    extra = {"with-local-disks": 1} if pre.get("local_disks") else {}
    upid = prox.nodes(src).qemu(vmid).migrate.post(target=dst, online=1, **extra)
    check(upid.startswith(f"UPID:{src}:") and ":qmigrate:" in upid, f"[{label}] migration task {upid}")
    locked = [r for r in prox.cluster.resources.get(type="vm") if r["vmid"] == vmid][0]
    check(locked.get("lock") == "migrate", f"[{label}] VM {vmid} locked during the migration")
    status = Tasks.blocking_status(prox, upid, timeout=120, polling_interval=0.2)
    check(status is not None and status.get("exitstatus") == "OK",
          f"[{label}] migration ended: {status and status.get('exitstatus')}")
    log = Tasks.decode_log(prox.nodes(src).tasks(upid).log.get(limit=500))
    check("TASK OK" in log, f"[{label}] task log ends with TASK OK")
    moved = [r for r in prox.cluster.resources.get(type="vm") if r["vmid"] == vmid][0]
    check(moved["node"] == dst and not moved.get("lock"), f"[{label}] VM {vmid} now on {moved['node']}")

    try:
        prox.nodes(src).qemu(vmid).config.get()
        check(False, f"[{label}] old node no longer has the config")
    except ResourceException as e:
        check(e.status_code == 500 and "does not exist" in e.content,
              f"[{label}] old node answers 500 '{e.content}'")
    try:
        prox.nodes(dst).qemu(vmid).migrate.post(target=dst, online=1)
        check(False, f"[{label}] migrating to the local node is refused")
    except ResourceException as e:
        check(e.status_code == 400 and e.errors and "target" in e.errors,
              f"[{label}] local target refused: {e.errors}")
    try:
        prox.nodes(dst).qemu(vmid).config.put(tags="flxp/affinity=web")
        check(False, f"[{label}] an invalid tag is refused")
    except ResourceException as e:
        check(e.status_code == 400 and "tags" in (e.errors or {}), f"[{label}] invalid tag: {e.errors}")


def size_of(drive):
    size = [o for o in drive.split(",") if o.startswith("size=")][0][5:]
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    return int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)


def resize(prox, label):
    vms = [v for v in prox.cluster.resources.get(type="vm")
           if v["type"] == "qemu" and not v.get("lock") and not v.get("template")]
    if not check(vms, f"[{label}] an unlocked VM to resize"):
        return
    node, vmid = vms[0]["node"], vms[0]["vmid"]
    before = prox.nodes(node).qemu(vmid).config.get()
    # proxmoxer form-encodes the `+` of a relative size as %2B, as Proxmox needs.
    upid = prox.nodes(node).qemu(vmid).resize.put(disk="scsi0", size="+1G")
    check(upid.startswith(f"UPID:{node}:") and ":resize:" in upid, f"[{label}] resize task {upid}")
    status = Tasks.blocking_status(prox, upid, timeout=60, polling_interval=0.2)
    check(status is not None and status.get("exitstatus") == "OK",
          f"[{label}] resize ended: {status and status.get('exitstatus')}")
    after = prox.nodes(node).qemu(vmid).config.get()
    grown = size_of(after["scsi0"]) - size_of(before["scsi0"])
    check(grown == 1 << 30, f"[{label}] scsi0 grew by {grown} bytes: {after['scsi0']}")
    check(after["digest"] != before["digest"], f"[{label}] the digest changed")
    maxdisk = [r for r in prox.cluster.resources.get(type="vm") if r["vmid"] == vmid][0]["maxdisk"]
    check(maxdisk == size_of(after["scsi0"]), f"[{label}] maxdisk follows: {maxdisk}")
    upid = prox.nodes(node).qemu(vmid).resize.put(disk="scsi0", size="1G")
    status = Tasks.blocking_status(prox, upid, timeout=60, polling_interval=0.2)
    check(status is not None and status.get("exitstatus") == "shrinking disks is not supported",
          f"[{label}] shrinking refused: {status and status.get('exitstatus')}")
    try:
        prox.nodes(node).qemu(vmid).resize.put(disk="scsi0", size="1 GB")
        check(False, f"[{label}] a malformed size is refused")
    except ResourceException as e:
        check(e.status_code == 400 and "size" in (e.errors or {}), f"[{label}] bad size: {e.errors}")


def run(prox, label):
    print(f"== {label}")
    read_everything(prox)
    write_and_migrate(prox, label)
    resize(prox, label)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", required=True, help="host:port of flxp sim")
    ap.add_argument("--token", required=True, help="USER@REALM!ID=SECRET")
    ap.add_argument("--user", default="root@pam")
    ap.add_argument("--password", required=True)
    ap.add_argument("--http", action="store_true", help="flxp sim runs with --http")
    args = ap.parse_args()
    started = time.monotonic()
    try:
        run(connect_token(args), "token")
        run(connect_password(args), "password")
    except Exception as e:  # a crash is a failure with its reason, not a traceback only
        FAILURES.append(f"unexpected {type(e).__name__}: {e}")
        print(f"  FAIL  unexpected {type(e).__name__}: {e}")
    took = time.monotonic() - started
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed in {took:.1f}s:")
        for f in FAILURES:
            print(f"  - {f}")
        return 1
    print(f"all checks passed in {took:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
