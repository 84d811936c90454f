#!/usr/bin/env python3
"""Three real `banyan node --control --metrics 127.0.0.1:0` processes on loopback: after a
broadcast, GET /metrics of each (Prometheus text format) counts the deliveries (every vnode
once over the three), three members, a parent in each of the four trees rooted elsewhere,
the origin's broadcast started and completed; a garbage request gets 400 and an oversized
one 431, logged once at warn (rate-limited), and the next scrape still answers 200;
garbage on the node's own port is counted as a malformed handshake. Also: the status
file names the metrics address and writes incarnations as strings; `--log-format json`
writes one JSON object per line. Every wait has a deadline; every child is killed at the end.

Usage: metrics_test.py BANYAN
"""
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

VNODES = 30


def fail(msg):
    raise AssertionError(msg)


def until(limit, pred, what):
    deadline = time.monotonic() + limit
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            fail("timed out waiting for " + what)
        time.sleep(0.05)


class Node:
    def __init__(self, banyan, tmp, ident, extra):
        self.id = ident
        self.status_file = os.path.join(tmp, "status-%d.json" % ident)
        self.log_file = os.path.join(tmp, "node-%d.log" % ident)
        self.log = open(self.log_file, "wb")
        self.proc = subprocess.Popen(
            [banyan, "node", "--control", "--id", str(ident), "--listen", "127.0.0.1:0",
             "--secret-file", os.path.join(tmp, "secret"), "--seed", str(ident + 1),
             "--metrics", "127.0.0.1:0", "--json-status", self.status_file] + extra,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        self.buffer = b""
        self.events = []

    def send(self, line):
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()

    def pump(self, timeout=0.05):
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not r:
            return
        chunk = os.read(self.proc.stdout.fileno(), 65536)
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


def scrape(address):
    """GET /metrics: (status, content type, {(name, ((label, value), ...)): value}, text)."""
    with urllib.request.urlopen("http://%s/metrics" % address, timeout=10) as r:
        text = r.read().decode()
        ctype = r.headers.get("Content-Type")
        status = r.status
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, value = line.rsplit(" ", 1)
        name, labels = head, ()
        if "{" in head:
            name, rest = head.split("{", 1)
            pairs = []
            for item in rest.rstrip("}").split(","):  # no commas inside banyan's label values
                k, v = item.split("=", 1)
                pairs.append((k, v.strip('"')))
            labels = tuple(sorted(pairs))
        samples[(name, labels)] = float(value)
    return status, ctype, samples, text


def raw(address, request):
    """Sends `request` bytes on a fresh connection; the whole answer."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(request)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            out += chunk
    return out.decode(errors="replace")


def value(samples, name, **labels):
    key = (name, tuple(sorted(labels.items())))
    if key not in samples:
        fail("no sample %s%s" % (name, labels))
    return samples[key]


def main():
    banyan = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="banyan-metrics-")
    with open(os.path.join(tmp, "secret"), "w") as f:
        f.write("metrics test secret\n")
    nodes = []
    ok = False
    try:
        n0 = Node(banyan, tmp, 0, ["--vnodes", "0-%d" % (VNODES - 1)])
        nodes.append(n0)

        def ready(n):
            n.pump()
            return n.named("ready")
        port0 = until(20, lambda: ready(n0), "node 0 ready")[0]["port"]
        contact = "127.0.0.1:%d" % port0
        nodes.append(Node(banyan, tmp, 1, ["--join", contact]))
        nodes.append(Node(banyan, tmp, 2, ["--join", contact, "--log-format", "json"]))
        for n in nodes[1:]:
            until(20, lambda n=n: ready(n), "node %d ready" % n.id)

        def settled():
            for n in nodes:
                n.pump(0)
                s = n.status()
                if not s or len(s["members"]) != 3 or not s["all_parented"] or s["busy"]:
                    return False
            return True
        until(30, settled, "three members with their trees parented")

        # The status file names the metrics address; incarnations are strings.
        addresses = {}
        for n in nodes:
            s = n.status()
            if "metrics" not in s:
                fail("node %d: no metrics address in its status file" % n.id)
            addresses[n.id] = s["metrics"]
            for m in s["members"]:
                if not isinstance(m["incarnation"], str) or not m["incarnation"].isdigit():
                    fail("node %d: incarnation %r is not a decimal string" % (n.id, m["incarnation"]))
        if "metrics on http://%s/metrics" % addresses[0] not in n0.logged():
            fail("node 0 did not name its metrics address in its first line:\n" + n0.logged())

        # A broadcast from node 0 reaches the 30 vnodes.
        n0.send("bcast 1000")

        def delivered():
            for n in nodes:
                n.pump(0)
            got = sum(e["vnodes"] for n in nodes for e in n.named("delivered"))
            return got >= VNODES
        until(20, delivered, "the broadcast's deliveries")
        own = {n.id: sum(e["vnodes"] for e in n.named("delivered")) for n in nodes}

        total = 0
        for n in nodes:
            status, ctype, m, text = scrape(addresses[n.id])
            if status != 200 or ctype != "text/plain; version=0.0.4; charset=utf-8":
                fail("node %d: %s %s" % (n.id, status, ctype))
            for family in ("banyan_members", "banyan_vnode_deliveries_total", "banyan_collectives_total",
                           "banyan_parent_rtt_seconds", "banyan_connection_failures_total"):
                if "# HELP %s " % family not in text or "# TYPE %s " % family not in text:
                    fail("node %d: no HELP/TYPE for %s" % (n.id, family))
            vd = value(m, "banyan_vnode_deliveries_total", kind="broadcast")
            if vd != own[n.id]:
                fail("node %d: %s vnode deliveries counted, %s delivered" % (n.id, vd, own[n.id]))
            total += vd
            if value(m, "banyan_deliveries_total", kind="broadcast") < 1:
                fail("node %d: no delivery event counted" % n.id)
            if value(m, "banyan_delivered_bytes_total", kind="broadcast") < 1000:
                fail("node %d: fewer bytes delivered than the payload" % n.id)
            if value(m, "banyan_members") != 3 or value(m, "banyan_all_parented") != 1:
                fail("node %d: members %s, all_parented %s" % (
                    n.id, value(m, "banyan_members"), value(m, "banyan_all_parented")))
            if value(m, "banyan_state", state="member") != 1:
                fail("node %d: not a member by its metrics" % n.id)
            edges = [k for k in m if k[0] == "banyan_parent_rtt_seconds"]
            roots = sorted((dict(k[1])["tree"], dict(k[1])["root"]) for k in edges)
            want = sorted((t, str(r)) for r in range(3) if r != n.id for t in ("latency", "bandwidth"))
            if roots != want:
                fail("node %d: parent edges %s, want %s" % (n.id, roots, want))
            bw = [k for k in m if k[0] == "banyan_parent_bandwidth_bytes_per_second"]
            if len(bw) != 4:
                fail("node %d: %d bandwidth edges" % (n.id, len(bw)))
            if value(m, "banyan_sent_bytes_total") <= 0 or value(m, "banyan_received_frames_total") <= 0:
                fail("node %d: no traffic counted" % n.id)
            if value(m, "banyan_connections_total", side="inbound") < 2:
                fail("node %d: fewer than 2 inbound connections" % n.id)
            started = value(m, "banyan_collectives_total", kind="broadcast", outcome="started")
            completed = value(m, "banyan_collectives_total", kind="broadcast", outcome="completed")
            want_started = 1 if n.id == 0 else 0
            if started != want_started or completed != want_started:
                fail("node %d: broadcasts started %s, completed %s" % (n.id, started, completed))
        if total != VNODES:
            fail("the three nodes counted %s vnode deliveries, not %d" % (total, VNODES))

        # Bad requests: refused with a status, logged once (rate-limited), and the node
        # goes on answering.
        garbage = raw(addresses[0], b"garbage\r\n\r\n")
        if not garbage.startswith("HTTP/1.1 400 Bad Request\r\n"):
            fail("garbage got: %r" % garbage[:200])
        big = raw(addresses[0], b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n")
        if not big.startswith("HTTP/1.1 431 "):
            fail("an oversized request got: %r" % big[:200])
        status, _, m, _ = scrape(addresses[0])
        if status != 200 or value(m, "banyan_members") != 3:
            fail("node 0 stopped answering after bad requests")
        log0 = n0.logged()
        lines = [l for l in log0.splitlines() if "warn: metrics: " in l]
        if len(lines) != 1 or "400 Bad Request" not in lines[0]:
            fail("want one warn line for the bad requests (rate-limited), got:\n" + log0)

        # Garbage on the node's own port (the transport): refused in the handshake and
        # counted by its reason; the node stays a member with its trees.
        s0 = n0.status()
        before = value(scrape(addresses[0])[2], "banyan_connection_failures_total",
                       side="inbound", reason="malformed_handshake")
        raw(s0["address"], b"garbage\r\n\r\n" * 4)

        def counted():
            m = scrape(addresses[0])[2]
            return value(m, "banyan_connection_failures_total", side="inbound",
                         reason="malformed_handshake") == before + 1 and m
        m = until(10, counted, "the malformed handshake counted")
        if value(m, "banyan_members") != 3 or value(m, "banyan_all_parented") != 1:
            fail("node 0 lost its place after garbage on its port")
        # ... and logged at warn, the default level, as untrusted input.
        until(5, lambda: any("warn: rejected: from 127.0.0.1:" in l and "bad handshake message" in l
                             and "(untrusted input" in l for l in n0.logged().splitlines()),
              "a warn line about the garbage on node 0's port")

        # --log-format json: one object per line, with ts, level, node, event, msg, fields.
        events = []
        for line in nodes[2].logged().splitlines():
            j = json.loads(line)
            for key in ("ts", "level", "node", "event", "msg", "fields"):
                if key not in j:
                    fail("node 2: log line without %s: %s" % (key, line))
            if j["node"] != 2 or j["level"] not in ("error", "warn", "info", "debug"):
                fail("node 2: bad log line: " + line)
            events.append(j)
        listening = [j for j in events if j["event"] == "listening"]
        if len(listening) != 1 or listening[0]["fields"].get("metrics") != addresses[2]:
            fail("node 2: no listening line naming its metrics address")

        for n in nodes:
            n.send("quit")
        for n in nodes:
            if n.proc.wait(timeout=15) != 0:
                fail("node %d exited with %s" % (n.id, n.proc.returncode))
        ok = True
        print("metrics_test: all checks passed")
    finally:
        for n in nodes:
            if n.proc.poll() is None:
                n.proc.kill()
                n.proc.wait()
            n.log.close()
            if not ok:
                sys.stderr.write("--- node %d ---\n%s\n" % (n.id, n.logged()))
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
