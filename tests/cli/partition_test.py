#!/usr/bin/env python3
"""A network partition that heals, with real `banyan node --control` processes over TCP in
two network namespaces (scripts/cluster/netns.sh: one namespace per site, a veth link to
a bridge). Site A holds processors 0 and 1, site B processors 2, 3 and 4, 1024 vnodes,
--crash-timeout 1000. Broadcasts go on from both sides throughout (from 0 and 2 every
100 ms, 1000 B and every fifth 256 KiB), and 1 starts one of 16 MiB 20 ms before the
cut. The test:

  1. cuts the sites apart (site B's veth link, bridge side, taken down: nothing passes,
     nothing is refused) and waits until each side has taken the other side's members
     for crashed and owns every vnode;
  2. broadcasts from both sides during the split;
  3. heals the link and waits until the five agree on one membership and one routing
     table, with every vnode owned by exactly one processor;
  4. checks the documented rule (docs/api.md, "Partitions that heal": the side with more
     members wins, then the side with the lowest id): here B (3 members) wins although
     A holds processor 0, so A's members, and only they, report their vnodes disowned
     and rejoin through a member of B;
     While a member of A rejoins it is not a member: a broadcast asked of it then is
     refused (`not a member`, docs/api.md) and asked again; a refusal anywhere else (on
     side B, before the heal, after the merge, for any other reason) is a violation;
  5. broadcasts again from both sides after the merge, and runs the crash fault suite's
     checker (crash_fault_test.check) over every broadcast: each reached every vnode
     exactly once (per side while the split lasted: both sides own every vnode then) or
     failed at its origin naming exactly the vnodes it did not reach. A broadcast under
     way at the cut (started before, its outcome after) may reach a vnode once on each
     side, and no more (the origin cannot tell a delivery whose acknowledgement the cut
     lost from none, and its side serves the vnodes it adopted: docs/api.md); the
     checker's other rules hold for it.

Network namespaces need root and a kernel that permits them: without them the test
prints why and exits 77 (ctest: skipped).

Usage: partition_test.py BANYAN [--NODE-OPTION=VALUE ...] (more `banyan node` options)
Prints the phases with their times (the merge time after the heal, among them); exits 1
on a violation. The nodes' logs and control lines are kept (the directory is printed)
after a violation, and after every run when PARTITION_KEEP_LOGS=1 is set.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crash_fault_test as cf  # noqa: E402  (the Node driver and the checker)

HERE = os.path.dirname(os.path.abspath(__file__))
NETNS_SH = os.path.join(HERE, "..", "..", "scripts", "cluster", "netns.sh")
SITES = {"A": [0, 1], "B": [2, 3, 4]}
SKIP = 77


def permitted():
    if os.geteuid() != 0:
        return "not root"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    probe = "bpprobe%d" % (os.getpid() % 1000)
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True)
    if r.returncode != 0:
        return "`ip netns add` refused: " + r.stderr.decode(errors="replace").strip()
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


class Split:
    """Five nodes in two namespaces; `nodes`, `pump` and `outcome` as cf.Cluster's, for
    cf.check."""

    def __init__(self, banyan, name):
        self.name = name
        self.tmp = None
        self.nodes = []
        self.origins = {}
        self.lock = threading.RLock()  # the broadcasters' threads pump too
        out = subprocess.run(["bash", NETNS_SH, "up", name, "A:0", "B:0"], capture_output=True)
        if out.returncode != 0:
            raise cf.Violation("netns.sh up: " + out.stderr.decode(errors="replace"))
        self.addr = dict(line.split() for line in out.stdout.decode().splitlines())
        # netns.sh numbers the bridge-side veth ends in the order of the sites.
        self.link = {"A": name + "h0", "B": name + "h1"}
        self.tmp = tempfile.mkdtemp(prefix="banyan-partition-")
        with open(os.path.join(self.tmp, "secret"), "w") as f:
            f.write("partition test secret\n")
        self.site_of = {p: s for s, ps in SITES.items() for p in ps}
        first = None
        for p in sorted(self.site_of):
            s = self.site_of[p]
            extra = ["--vnodes", "0-%d" % (cf.VNODES - 1)] if first is None else ["--join", first]
            n = cf.Node(banyan, self.tmp, p, extra, listen=self.addr[s] + ":0",
                        prefix=("ip", "netns", "exec", "%s-%s" % (name, s)))
            self.nodes.append(n)
            ready = cf.until(20, lambda n=n: self.ready(n), "node %d ready" % p)
            if first is None:
                first = "%s:%d" % (self.addr[s], ready[0]["port"])
        cf.until(30, self.settled, "5 members with their trees parented")
        for n in self.nodes:
            n.send("trace on")
            n.send("status")  # answered once `trace on` has been taken (in order)
        for n in self.nodes:
            cf.until(20, lambda n=n: self.ready(n) and n.named("status"), "node %d traced" % n.id)

    def ready(self, n):
        n.pump()
        return n.named("ready")

    def pump(self):
        with self.lock:
            for n in self.nodes:
                n.pump()

    def node(self, p):
        return self.nodes[p]

    def settled(self):
        self.pump()
        for n in self.nodes:
            s = n.status()
            if not s or len(s["members"]) != len(self.nodes) or not s["all_parented"] or s["busy"]:
                return False
        return True

    def outcome(self, op):
        n = self.nodes[self.origins[op]]
        for e in n.named("outcome"):
            if e["op"] == op:
                return e
        return None

    def link_set(self, site, state):
        subprocess.run(["ip", "link", "set", self.link[site], state], check=True)

    def close(self, keep):
        for n in self.nodes:
            if n.proc.poll() is None:
                n.proc.kill()
            n.proc.wait()
        subprocess.run(["bash", NETNS_SH, "down", self.name], capture_output=True)
        if self.tmp and not keep:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def logs(self):
        return "".join("\n--- node %d ---\n%s" % (n.id, n.logged()[-6000:]) for n in self.nodes)


class Broadcaster:
    """Broadcasts from one origin every `period` s in a thread of its own (1000 B, every
    fifth 256 KiB), without waiting for their outcomes; `ops` in order. A command answered
    with an error is kept in `refused` (the broadcast is asked again a period later);
    `errors`: commands answered by nothing."""

    def __init__(self, split, origin, period, sizes=None):
        self.split, self.origin, self.period = split, origin, period
        self.sizes = sizes
        self.ops = []
        self.refused = []
        self.errors = []
        self.stop = threading.Event()
        self.lock = split.lock
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        n = self.split.node(self.origin)
        k = 0
        while not self.stop.is_set():
            with self.lock:
                had = len(n.named("bcast"))
                had_errors = len(n.named("error"))
                size = self.sizes[k % len(self.sizes)] if self.sizes else \
                    (256 << 10) if k % 5 == 4 else 1000
                n.send("bcast %d" % size)
            deadline = time.monotonic() + 20
            while True:
                with self.lock:
                    n.pump()
                    if len(n.named("bcast")) > had:
                        op = n.named("bcast")[-1]["op"]
                        self.ops.append(op)
                        self.split.origins[op] = self.origin
                        k += 1
                        break
                    errs = n.named("error")
                    if len(errs) > had_errors:  # the command's answer: refused
                        self.refused.append(errs[had_errors])
                        break
                if time.monotonic() > deadline:
                    self.errors.append({"detail": "a broadcast did not start within 20 s"})
                    return
                time.sleep(0.01)
            self.stop.wait(self.period)

    def finish(self):
        self.stop.set()
        self.t.join()


def members_of(s):
    return sorted(m["id"] for m in s["members"])


def owners(s):
    """vnode -> owner, from a status's routing table (runs [lo, hi))."""
    out = {}
    for r in s["routes"]:
        for v in range(r["lo"], r["hi"]):
            out[v] = r["owner"]
    return out


def side_split(c, side):
    """Every member of `side` knows only its side and its side owns every vnode."""
    c.pump()
    own = []
    for p in SITES[side]:
        s = c.node(p).status()
        if not s or members_of(s) != SITES[side]:
            return False
        own.append(cf.parse_set(s["own_vnodes"]))
    return sum(len(o) for o in own) == cf.VNODES and len(set().union(*own)) == cf.VNODES


def merged(c):
    """One membership of five, one routing table, its owners what each member owns."""
    c.pump()
    st = [n.status() for n in c.nodes]
    if any(s is None or members_of(s) != sorted(c.site_of) or s["state"] != "member"
           or not s["all_parented"] for s in st):
        return False
    table = owners(st[0])
    if len(table) != cf.VNODES or any(owners(s) != table for s in st[1:]):
        return False
    for s in st:
        if cf.parse_set(s["own_vnodes"]) != {v for v, o in table.items() if o == s["id"]}:
            return False
    return st


def in_flight_at_cut(c, ops):
    """Broadcasts started before the cut whose outcome came after it."""
    before, after = c.cut_us
    out = []
    for op in ops:
        n = c.node(c.origins[op])
        start = [e for e in n.named("bcast") if e["op"] == op][0]["t_us"]
        end = c.outcome(op)
        if start < after and (end is None or end["t_us"] > before):
            out.append(op)
    return out


def check_caught(c, ops):
    """A broadcast under way when the link went down: its origin cannot tell a delivery on
    the other side whose acknowledgement the cut lost from no delivery, and its side
    delivers to the vnodes it adopted (docs/api.md, "Suspicion of a live node"). So a
    vnode may have it twice, once on each side, and no more: every other rule of the
    checker holds (none lost, an outcome naming what it did not reach)."""
    problems = []
    for op in ops:
        got = {}  # vnode -> sites of the deliveries
        for n in c.nodes:
            for e in n.named("delivered_to"):
                if e["op"] == op:
                    for v in cf.parse_set(e["set"]):
                        got.setdefault(v, []).append(c.site_of[n.id])
        twice = sorted(v for v, s in got.items() if len(s) > 1)
        wrong = [v for v in twice if sorted(got[v]) != ["A", "B"]]
        print("partition %s: under way at the cut, %d vnodes reached, %d of them on both sides"
              % (op, len(got), len(twice)))
        if wrong:
            problems.append("%s (under way at the cut): vnodes %s delivered more than once on "
                            "one side" % (op, wrong[:10]))
        # The rest of the checker's rules, the duplicates across the sides aside.
        for p in cf.check(c, [op], "partition"):
            if "delivered more than once" not in p:
                problems.append(p)
    return problems


def log_lines(n, word):
    return [line for line in n.logged().splitlines() if word in line]


def scenario(c):
    t0 = time.monotonic()
    bs = [Broadcaster(c, 0, 0.1), Broadcaster(c, 2, 0.1)]
    time.sleep(0.98)
    bs.append(Broadcaster(c, 1, 100, [16 << 20]))  # 16 MiB from 1, under way at the cut
    time.sleep(0.02)
    cut_at = time.monotonic()
    c.link_set("B", "down")
    c.cut_us = (cut_at * 1e6, time.monotonic() * 1e6)  # the nodes' t_us: the same clock
    print("partition: link of site B down at %.1f s" % (cut_at - t0))
    cf.until(30, lambda: side_split(c, "A") and side_split(c, "B"),
             "each side to take the other for crashed and own every vnode")
    split_at = time.monotonic()
    print("partition: each side owns every vnode %.2f s after the cut" % (split_at - cut_at))
    during = [len(b.ops) for b in bs[:2]]
    time.sleep(2.0)  # broadcasts from both sides during the split
    during = [len(b.ops) - d for b, d in zip(bs, during)]
    heal_from = time.monotonic()
    c.link_set("B", "up")
    heal_at = time.monotonic()
    st = cf.until(60, lambda: merged(c), "one membership and one owner per vnode after the heal")
    merged_at = time.monotonic()
    print("partition: healed; one membership of 5, one owner per vnode %.2f s after the heal"
          % (merged_at - heal_at))
    time.sleep(1.0)  # broadcasts after the merge
    for b in bs:
        b.finish()
    problems = []
    for b in bs:
        for e in b.errors:
            problems.append("origin %d: %s" % (b.origin, e["detail"]))
        # A member of the side that yields is not one from its `disowned` until its join
        # through the other side is answered: a broadcast asked of it meanwhile is refused
        # (docs/api.md, "Partitions that heal"), and asked again. Any other refusal, a
        # refusal on side B, or one before the heal or after the merge is a violation.
        for e in b.refused:
            rejoining = (c.site_of[b.origin] == "A" and "not a member" in e["detail"]
                         and heal_from * 1e6 <= e["t_us"] <= merged_at * 1e6)
            if rejoining:
                print("partition: origin %d refused a broadcast %.3f s after the heal while it "
                      "rejoined (%s); asked again" % (b.origin, e["t_us"] / 1e6 - heal_from,
                                                      e["detail"]))
            else:
                problems.append("origin %d: %s (%.3f s after the heal)"
                                % (b.origin, e["detail"], e["t_us"] / 1e6 - heal_from))
    answers = [e for b in bs for e in b.refused]
    for n in c.nodes:  # an error that answered no broadcast command
        for e in n.named("error"):
            if not any(e is a for a in answers):
                problems.append("node %d: %s" % (n.id, e["detail"]))
    print("partition: %d and %d broadcasts from 0 and 2 during the split, %d in all"
          % (during[0], during[1], sum(len(b.ops) for b in bs)))
    if min(during) == 0:
        problems.append("a side broadcast nothing during the split")

    # The rule: B (3 members) wins over A (2 members, processor 0 among them).
    for n in c.nodes:
        disowned = log_lines(n, "vnodes_disowned")
        rejoined = log_lines(n, "yielded to")
        if c.site_of[n.id] == "A":
            if not disowned or not rejoined:
                problems.append("node %d (side A, the smaller) did not yield: %d disowned, %d "
                                "rejoined lines" % (n.id, len(disowned), len(rejoined)))
            for line in rejoined:
                via = int(line.split("rejoined through processor ")[1].split()[0])
                if c.site_of.get(via) != "B":
                    problems.append("node %d rejoined through %d, not a member of side B: %s"
                                    % (n.id, via, line))
        else:
            if disowned or rejoined:
                problems.append("node %d (side B, the larger) yielded: %s"
                                % (n.id, (disowned + rejoined)[:2]))
        crashed = log_lines(n, "member_crashed")
        print("partition: node %d (side %s): %d member_crashed, %d vnodes_disowned, %d rejoined"
              % (n.id, c.site_of[n.id], len(crashed), len(disowned), len(rejoined)))
    # Incarnations: A's members came back as new ones, B's kept theirs.
    inc = {m["id"]: m["incarnation"] for m in st[2]["members"]}
    before = {m["id"]: m["incarnation"] for m in c.first_members}
    for p, site in c.site_of.items():
        if (inc[p] != before[p]) != (site == "A"):
            problems.append("processor %d (side %s): incarnation %s -> %s"
                            % (p, site, before[p], inc[p]))
    ops = [op for b in bs for op in b.ops]
    cf.wait_outcomes(c, ops, 60)
    return ops, problems


def main():
    banyan = sys.argv[1]
    cf.EXTRA.extend(a for a in sys.argv[2:] if a.startswith("--"))  # e.g. --log-format=json
    why = permitted()
    if why:
        print("SKIPPED: network namespaces are not permitted here (%s)" % why)
        return SKIP
    name = "bp%d" % (os.getpid() % 100000)  # unique among concurrent runs (netns.sh: <= 8)
    t0 = time.monotonic()
    c = None
    ok = False
    keep_always = os.environ.get("PARTITION_KEEP_LOGS") == "1"
    problems = []
    try:
        c = Split(banyan, name)
        c.first_members = c.node(2).status()["members"]
        ops, problems = scenario(c)
        caught = in_flight_at_cut(c, ops)
        problems += cf.check(c, [op for op in ops if op not in caught], "partition")
        problems += check_caught(c, caught)
        ok = not problems
    except cf.Violation as e:
        problems.append(str(e))
    finally:
        if c is not None:
            if not ok:
                print(c.logs())
            if not ok or keep_always:
                for n in c.nodes:  # the control lines, for the record
                    with open(os.path.join(c.tmp, "events-%d.jsonl" % n.id), "w") as f:
                        for e in n.events:
                            f.write(json.dumps(e) + "\n")
                print("logs kept in " + str(c.tmp))
            c.close(keep=not ok or keep_always)
        else:
            subprocess.run(["bash", NETNS_SH, "down", name], capture_output=True)
    print("partition: %.1f s" % (time.monotonic() - t0))
    for p in problems:
        print("VIOLATION " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
