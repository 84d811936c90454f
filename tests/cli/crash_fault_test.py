#!/usr/bin/env python3
"""Fault injection with real `banyan node --control` processes on loopback, and a checker
in the manner of Jepsen's: every node prints each delivery with its vnodes (`trace on`),
and every origin the outcome of each of its broadcasts (`node::broadcast_outcome`). The
checker counts deliveries per (broadcast, vnode) over every process, the dead ones' lines
up to their death included, and reports the lost (no delivery) and the duplicated (more
than one). Each broadcast must reach every vnode exactly once and complete at its origin,
or fail there with an error naming exactly the vnodes it did not reach.

Scenarios, each on a fresh cluster of five processes (1024 vnodes, --crash-timeout 1000):
  kill-relay      SIGKILL of the busiest relay of the origin's bandwidth tree 0.15 s into a
                  64 MiB broadcast
  before-detect   SIGKILL, then broadcasts every 10 ms from two origins before the crash is
                  detected (short ones and one of 1 MiB)
  stop-cont       SIGSTOP past the crash timeout (its vnodes are adopted) while broadcasts
                  go on, then SIGCONT: the resumed process must deliver nothing to vnodes
                  it no longer owns
  stop-kill       SIGSTOP, broadcasts, then SIGKILL of the stopped process
  reduce-stop-kill  reduction 1 started everywhere but at a stopped process, then killed:
                  it completes at the root over every vnode, each counted once (the
                  partials that went up through the dead process are sent again, its
                  vnodes contributed by their adopter); reduction 2 counts every vnode once

Not a scenario (run by name only): cost, the time from a broadcast's start to its last
delivery and to its outcome at the origin, 1 B and 64 MiB, no fault.

Usage: crash_fault_test.py BANYAN [SCENARIO ...] [--no-bcast-acks]
(default: the four scenarios; --no-bcast-acks runs the nodes without acknowledgements, to
see what the checker finds then)
Prints one line per broadcast and a summary per scenario; exits 1 on a violation.
"""
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

VNODES = 1024
PROCS = 5
CRASH_TIMEOUT_MS = 1000
EXTRA = []  # more `banyan node` arguments: --no-bcast-acks (from the command line)


class Violation(Exception):
    pass


def until(limit, pred, what):
    deadline = time.monotonic() + limit
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise Violation("timed out waiting for " + what)
        time.sleep(0.02)


def parse_set(text):
    """"0-9,20-29" (or "{...}") -> set of ints."""
    out = set()
    text = text.strip("{}")
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-")
            out.update(range(int(lo), int(hi) + 1))
        else:
            out.add(int(part))
    return out


class Node:
    def __init__(self, banyan, tmp, ident, extra, listen="127.0.0.1:0", prefix=()):
        """prefix: words before the command (`ip netns exec NS` for a node in a namespace)."""
        self.id = ident
        self.status_file = os.path.join(tmp, "status-%d.json" % ident)
        self.log_file = os.path.join(tmp, "node-%d.log" % ident)
        self.log = open(self.log_file, "wb")
        self.proc = subprocess.Popen(
            list(prefix) + [banyan, "node", "--control", "--id", str(ident), "--listen", listen,
             "--secret-file", os.path.join(tmp, "secret"), "--seed", str(ident + 1),
             "--crash-timeout", str(CRASH_TIMEOUT_MS), "--json-status", self.status_file] + extra + EXTRA,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.buffer = b""
        self.events = []
        self.dead = False

    def send(self, line):
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()

    def pump(self):
        try:
            chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            return
        self.buffer += chunk
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            self.events.append(json.loads(line))

    def named(self, ev):
        return [e for e in self.events if e.get("ev") == ev]

    def status(self):
        try:
            with open(self.status_file) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def logged(self):
        with open(self.log_file, "rb") as f:
            return f.read().decode(errors="replace")

    def kill(self, sig):
        os.kill(self.proc.pid, sig)


class Cluster:
    def __init__(self, banyan, name):
        self.tmp = tempfile.mkdtemp(prefix="banyan-crash-%s-" % name)
        with open(os.path.join(self.tmp, "secret"), "w") as f:
            f.write("crash fault test secret\n")
        self.nodes = []
        n0 = Node(banyan, self.tmp, 0, ["--vnodes", "0-%d" % (VNODES - 1)])
        self.nodes.append(n0)
        port = until(20, lambda: self.ready(n0), "node 0 ready")[0]["port"]
        for k in range(1, PROCS):
            self.nodes.append(Node(banyan, self.tmp, k, ["--join", "127.0.0.1:%d" % port]))
            until(20, lambda k=k: self.ready(self.nodes[k]), "node %d ready" % k)
        until(30, self.settled, "%d members with their trees parented" % PROCS)
        for n in self.nodes:
            n.send("trace on")
        self.origins = {}  # op -> origin node id

    def ready(self, n):
        n.pump()
        return n.named("ready")

    def pump(self):
        for n in self.nodes:
            n.pump()

    def settled(self):
        self.pump()
        for n in self.nodes:
            s = n.status()
            if not s or len(s["members"]) != PROCS or not s["all_parented"] or s["busy"]:
                return False
        return True

    def bcast(self, origin, size):
        n = self.nodes[origin]
        had, errs = len(n.named("bcast")), len(n.named("error"))
        n.send("bcast %d" % size)

        def started():
            n.pump()
            if len(n.named("error")) > errs:
                raise Violation("node %d: %s" % (origin, n.named("error")[-1]["detail"]))
            return len(n.named("bcast")) > had
        until(20, started, "broadcast from %d to start" % origin)
        op = n.named("bcast")[-1]["op"]
        self.origins[op] = origin
        return op

    def outcome(self, op):
        n = self.nodes[self.origins[op]]
        for e in n.named("outcome"):
            if e["op"] == op:
                return e
        return None

    def relay_of(self, origin):
        """The node with the most children in `origin`'s bandwidth tree (not the origin)."""
        best, most = None, -1
        for n in self.nodes:
            if n.id == origin:
                continue
            for t in n.status()["trees"]:
                if t["root"] == origin and t["kind"] == "bandwidth" and t["children"] > most:
                    best, most = n.id, t["children"]
        return best

    def close(self, keep):
        for n in self.nodes:
            if n.proc.poll() is None:
                try:
                    n.kill(signal.SIGCONT)
                    n.kill(signal.SIGKILL)
                except ProcessLookupError:
                    pass
            n.proc.wait()
        if not keep:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def logs(self):
        return "".join("\n--- node %d ---\n%s" % (n.id, n.logged()[-4000:]) for n in self.nodes)


def check(cluster, ops, name):
    """The checker: per broadcast, deliveries per vnode over every process."""
    counts = {op: {} for op in ops}
    for n in cluster.nodes:
        for e in n.named("delivered_to"):
            if e["op"] in counts:
                for v in parse_set(e["set"]):
                    counts[e["op"]][v] = counts[e["op"]].get(v, 0) + 1
    problems = []
    lost_total = dup_total = failed = 0
    for op in ops:
        c = counts[op]
        lost = sorted(v for v in range(VNODES) if c.get(v, 0) == 0)
        dup = sorted(v for v in range(VNODES) if c.get(v, 0) > 1)
        out = cluster.outcome(op)
        dup_total += len(dup)
        lost_total += len(lost)
        line = "%s %s: %d vnodes reached, %d lost, %d duplicated, outcome %s" % (
            name, op, len(c), len(lost), len(dup),
            "none" if out is None else ("complete (sent again %d times)" % out.get("resends", 0)
                                        if out["ok"] else "failed: " + out["detail"]))
        print(line)
        if dup:
            problems.append("%s: vnodes %s delivered more than once" % (op, dup[:10]))
        if out is None:
            problems.append("%s: no outcome at its origin" % op)
        elif out["ok"]:
            if lost:
                problems.append("%s: complete at its origin, yet vnodes %s never got it" % (op, lost[:10]))
        else:
            failed += 1
            named = set()
            for part in out["detail"].split("vnodes", 1)[-1].split("did not")[0].split(")"):
                if "{" in part:
                    named |= parse_set(part[part.index("{"):part.index("}") + 1])
            if named != set(lost):
                problems.append("%s: failed naming %d vnodes, but %d were not reached" %
                                (op, len(named), len(lost)))
    print("%s: %d broadcasts, %d (broadcast, vnode) lost, %d duplicated, %d failed at the origin"
          % (name, len(ops), lost_total, dup_total, failed))
    return ["%s %s" % (name, p) for p in problems]


def wait_outcomes(cluster, ops, limit):
    def all_out():
        cluster.pump()
        return all(cluster.outcome(op) is not None for op in ops)
    until(limit, all_out, "the outcomes of %s" % ops)
    time.sleep(0.5)  # a late duplicate would show now
    cluster.pump()


def kill_relay(c):
    origin = 0
    relay = c.relay_of(origin)
    op = c.bcast(origin, 64 << 20)
    time.sleep(0.15)
    c.nodes[relay].kill(signal.SIGKILL)
    c.nodes[relay].dead = True
    wait_outcomes(c, [op], 60)
    return [op]


def before_detect(c):
    victim = 3
    c.nodes[victim].kill(signal.SIGKILL)
    ops = []
    for k in range(7):
        ops.append(c.bcast(0 if k % 2 == 0 else 1, (1 << 20) if k == 3 else 1000))
        time.sleep(0.01)
    wait_outcomes(c, ops, 60)
    return ops


def stop_cont(c):
    victim = 2
    c.nodes[victim].kill(signal.SIGSTOP)
    ops = []
    for k in range(4):
        ops.append(c.bcast(0, 1000 if k != 1 else 4 << 20))
        time.sleep(0.1)
    wait_outcomes(c, ops, 60)  # complete once the victim's vnodes are adopted
    c.nodes[victim].kill(signal.SIGCONT)
    time.sleep(3)  # the resumed process handles what it had queued
    ops.append(c.bcast(0, 1000))
    wait_outcomes(c, ops, 60)
    return ops


def stop_kill(c):
    victim = 4
    c.nodes[victim].kill(signal.SIGSTOP)
    ops = []
    for k in range(3):
        ops.append(c.bcast(1, 1000 if k != 2 else 1 << 20))
        time.sleep(0.1)
    time.sleep(0.5)
    c.nodes[victim].kill(signal.SIGKILL)
    wait_outcomes(c, ops, 60)
    return ops


def reduce_stop_kill(c):
    """Reduction 1 started at every node but one, which is stopped and then killed: the
    partials its children had sent it are sent again, its own vnodes are contributed by
    their adopter, and the root vnode's owner completes it over every vnode, each counted
    once (the value is checked); reduction 2, started at every live node, counts every
    vnode once."""
    victim = 3
    root = 0
    owner = next(n for n in c.nodes if root in parse_set(n.status()["own_vnodes"]))
    if owner.id == victim:
        raise Violation("the victim owns the root vnode")
    c.nodes[victim].kill(signal.SIGSTOP)
    live = [n for n in c.nodes if n.id != victim]
    for n in live:
        n.send("reduce 1 %d 4 sum int32" % root)
    time.sleep(0.3)
    c.nodes[victim].kill(signal.SIGKILL)

    def failed_or_done():
        c.pump()
        errs = [e for e in owner.named("error") if e["detail"].startswith("reduce 1:")]
        done = [e for e in owner.named("reduced") if e["seq"] == "1"]
        return errs or done
    got = until(40, failed_or_done, "reduction 1's outcome at the root")[0]
    problems = []
    if got["ev"] == "reduced":
        print("reduce-stop-kill: reduction 1 completed over %d vnodes" % got["vnodes"])
        if not got["ok"] or got["vnodes"] != VNODES:
            problems.append("reduction 1 completed wrongly: %s" % got)
    else:
        print("reduce-stop-kill: reduction 1: " + got["detail"])
        problems.append("reduction 1 did not complete through the crash: " + got["detail"])
    for n in live:
        n.send("reduce 2 %d 4 sum int32" % root)

    def second():
        c.pump()
        return [e for e in owner.named("reduced") if e["seq"] == "2"] or \
            [e for e in owner.named("error") if e["detail"].startswith("reduce 2:")]
    r2 = until(40, second, "reduction 2 at the root")[0]
    print("reduce-stop-kill: reduction 2: %s" % r2)
    if r2["ev"] != "reduced" or not r2["ok"] or r2["vnodes"] != VNODES:
        problems.append("reduction 2 did not count every vnode once: %s" % r2)
    if problems:
        raise Violation("; ".join(problems))
    return []


def cost(c):
    """No fault: per broadcast, when the last vnode had it and when its origin knew (its
    outcome line), from the `bcast` line's start; 1 B and 64 MiB, five of each."""
    ops = []
    for size in (1, 64 << 20):
        for _ in range(5):
            op = c.bcast(0, size)
            wait_outcomes(c, [op], 60)
            ops.append(op)
            start = [e for e in c.nodes[0].named("bcast") if e["op"] == op][0]["t_us"]
            last = max(e["t_us"] for n in c.nodes for e in n.named("delivered") if e["op"] == op)
            known = c.outcome(op)["t_us"]
            print("cost %s %d B: last delivery %.2f ms, origin knew %.2f ms" %
                  (op, size, (last - start) / 1000.0, (known - start) / 1000.0))
    return ops


SCENARIOS = {"kill-relay": kill_relay, "before-detect": before_detect,
             "stop-cont": stop_cont, "stop-kill": stop_kill, "reduce-stop-kill": reduce_stop_kill}
MEASUREMENTS = {"cost": cost}


def main():
    banyan = sys.argv[1]
    names = [a for a in sys.argv[2:] if not a.startswith("--")] or list(SCENARIOS)
    EXTRA.extend(a for a in sys.argv[2:] if a.startswith("--"))
    SCENARIOS.update(MEASUREMENTS)
    problems = []
    for name in names:
        t0 = time.monotonic()
        c = Cluster(banyan, name)
        ok = False
        try:
            ops = SCENARIOS[name](c)
            found = check(c, ops, name)
            problems += found
            ok = not found
            if found:
                print(c.logs())
        except Violation as e:
            problems.append("%s: %s" % (name, e))
            print(c.logs())
        finally:
            c.close(keep=not ok)
        print("%s: %.1f s" % (name, time.monotonic() - t0))
    for p in problems:
        print("VIOLATION " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
