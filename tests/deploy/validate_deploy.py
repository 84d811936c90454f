#!/usr/bin/env python3
"""Offline checks of the deployment files: deploy/k8s/*.yaml, docker/compose.yml and the
Dockerfile. Structure (kinds, required fields, references between objects) and agreement
with `banyan node --help` (every flag they pass exists). Needs python3-yaml only.

    validate_deploy.py SRC [BANYAN]      exit 0: all sane; 1: one line per problem
"""
import re
import shlex
import subprocess
import sys

import yaml

problems = []


def check(ok, what):
    if not ok:
        problems.append(what)
    return ok


def get(d, path, default=None):
    for k in path.split("."):
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


API_VERSIONS = {"Service": "v1", "StatefulSet": "apps/v1", "PodDisruptionBudget": "policy/v1",
                "Secret": "v1", "ConfigMap": "v1"}


def flags_in(text):
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))


def check_k8s(path, node_flags):
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    by_kind = {}
    for d in docs:
        kind = d.get("kind")
        name = get(d, "metadata.name")
        check(kind in API_VERSIONS, f"{path}: unknown kind {kind!r}")
        check(d.get("apiVersion") == API_VERSIONS.get(kind),
              f"{path}: {kind} {name} has apiVersion {d.get('apiVersion')!r}")
        check(isinstance(name, str) and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name or ""),
              f"{path}: {kind} without a valid metadata.name")
        by_kind.setdefault(kind, []).append(d)
    if not check("StatefulSet" in by_kind and "Service" in by_kind,
                 f"{path}: wants a StatefulSet and a Service"):
        return
    services = {get(s, "metadata.name"): s for s in by_kind["Service"]}
    for sts in by_kind["StatefulSet"]:
        name = get(sts, "metadata.name")
        svc = services.get(get(sts, "spec.serviceName"))
        if not check(svc is not None, f"{path}: StatefulSet {name}: spec.serviceName names no Service"):
            continue
        check(get(svc, "spec.clusterIP") == "None", f"{path}: Service {get(svc, 'metadata.name')} is not headless")
        check(get(svc, "spec.publishNotReadyAddresses", False) is False,
              f"{path}: the headless Service must list ready (joined) pods only")
        labels = get(sts, "spec.template.metadata.labels", {})
        match = get(sts, "spec.selector.matchLabels", {})
        check(match and all(labels.get(k) == v for k, v in match.items()),
              f"{path}: StatefulSet {name}: selector does not match the pod template's labels")
        check(all(labels.get(k) == v for k, v in (get(svc, "spec.selector") or {}).items())
              and get(svc, "spec.selector"), f"{path}: Service selector does not match the pods")
        pod = get(sts, "spec.template.spec", {})
        check(get(pod, "securityContext.runAsNonRoot") is True, f"{path}: pods must run as non-root")
        containers = pod.get("containers") or []
        if not check(len(containers) >= 1, f"{path}: StatefulSet {name} has no container"):
            continue
        c = containers[0]
        for field in ("name", "image"):
            check(field in c, f"{path}: container without {field}")
        script = " ".join(c.get("command", []) + c.get("args", []))
        check("banyan node" in script, f"{path}: the container does not run `banyan node`")
        if node_flags is not None:
            for fl in sorted(flags_in(script) - node_flags):
                problems.append(f"{path}: `banyan node` has no flag {fl}")
        m = re.search(r"--json-status\s+(\S+)", script)
        status = m.group(1) if m else None
        check(status is not None, f"{path}: the node keeps no --json-status (readiness reads it)")
        probe = get(c, "readinessProbe.exec.command") or []
        check(probe[:2] == ["banyan", "health"] and status in probe,
              f"{path}: readinessProbe is not `banyan health {status}`")
        m = re.search(r"--leave-timeout\s+(\d+)", script)
        leave_ms = int(m.group(1)) if m else 10000
        grace = pod.get("terminationGracePeriodSeconds", 30)
        check(grace * 1000 > leave_ms,
              f"{path}: terminationGracePeriodSeconds {grace} s leaves no time for --leave-timeout {leave_ms} ms")
        env = {e.get("name"): e.get("value") for e in c.get("env", [])}
        seeds = env.get("BANYAN_SEEDS", "")
        check(seeds.split(":")[0] == get(svc, "metadata.name"),
              f"{path}: seeds {seeds!r} are not the headless Service's name")
        ports = {p.get("name") for p in c.get("ports", [])}
        for p in get(svc, "spec.ports", []):
            t = p.get("targetPort")
            check(not isinstance(t, str) or t in ports, f"{path}: Service targetPort {t!r} is no container port")
        volumes = {v.get("name") for v in pod.get("volumes", [])}
        mounts = {m.get("mountPath"): m.get("name") for m in c.get("volumeMounts", [])}
        for mp, vn in mounts.items():
            check(vn in volumes, f"{path}: volumeMount {mp} names no volume {vn!r}")
        if status:
            check(any(status.startswith(mp.rstrip("/") + "/") for mp in mounts),
                  f"{path}: {status} is on no mounted volume (the root file system is read-only)")
        m = re.search(r"--secret-file\s+(\S+)", script)
        check(m and any(m.group(1).startswith(mp.rstrip("/") + "/") for mp in mounts),
              f"{path}: --secret-file is on no mounted volume")


def check_compose(path, node_flags):
    with open(path) as f:
        text = f.read()
    doc = yaml.safe_load(text)
    services = doc.get("services") or {}
    check(len(services) >= 2, f"{path}: fewer than two services")
    for name, s in services.items():
        check(get(s, "healthcheck.test") is not None, f"{path}: service {name} has no healthcheck")
        check(s.get("restart") in ("always", "unless-stopped", "on-failure"),
              f"{path}: service {name} has no restart policy")
        deps = s.get("depends_on") or {}
        for d in deps:
            check(d in services, f"{path}: service {name} depends on unknown {d}")
        for n in s.get("networks") or []:
            check(n in (doc.get("networks") or {}), f"{path}: service {name} on unknown network {n}")
        if node_flags is not None:
            for fl in sorted(flags_in(" ".join(map(str, s.get("command", [])))) - node_flags):
                problems.append(f"{path}: service {name} passes {fl}, which `banyan node` lacks")
    check("ipv4_address" not in text, f"{path}: a hard-coded address (join by service name)")
    for n, net in (doc.get("networks") or {}).items():
        for cfg in get(net, "ipam.config", []) or []:
            check(re.fullmatch(r"\$\{BANYAN_SUBNET:-[0-9./]+\}", str(cfg.get("subnet", ""))),
                  f"{path}: network {n}: subnet is not ${{BANYAN_SUBNET:-default}}")


def check_dockerfile(path):
    stages = {}
    order = []
    current = None
    with open(path) as f:
        lines = f.read().replace("\\\n", " ").splitlines()
    for line in lines:
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0] == "FROM":
            m = re.match(r"FROM\s+(\S+)(?:\s+AS\s+(\S+))?", line, re.I)
            current = m.group(2) or f"stage{len(order)}"
            stages[current] = {"from": m.group(1), "lines": []}
            order.append(current)
        elif current:
            stages[current]["lines"].append(line)
    for s in ("build", "library", "runtime"):
        check(s in stages, f"{path}: no stage {s}")
    if not order or "runtime" not in stages:
        return
    check(order[-1] == "runtime", f"{path}: the default (last) stage is {order[-1]}, not runtime")

    def lineage(s):
        seen = [s]
        while stages[s]["from"] in stages:
            s = stages[s]["from"]
            seen.append(s)
        return seen

    chain = lineage("runtime")
    check(stages[chain[-1]]["from"] == "debian:12-slim", f"{path}: runtime is not based on debian:12-slim")
    body = " ".join(l for s in chain for l in stages[s]["lines"])
    for bad in ("build-essential", "g++", "cmake", "-dev ", "setup.sh"):
        check(bad not in body + " ", f"{path}: the runtime stage installs {bad.strip()}")
    users = [l.split()[1] for l in stages["runtime"]["lines"] if l.startswith("USER ")]
    check(users and not users[-1].split(":")[0] in ("root", "0"), f"{path}: runtime runs as root")
    check(any(l.startswith("HEALTHCHECK") and "banyan" in l and "health" in l
              for l in stages["runtime"]["lines"]), f"{path}: runtime has no HEALTHCHECK")


def main():
    if len(sys.argv) < 2:
        print("usage: validate_deploy.py SRC [BANYAN]", file=sys.stderr)
        return 2
    src = sys.argv[1]
    node_flags = None
    if len(sys.argv) > 2:
        out = subprocess.run([sys.argv[2], "node", "--help"], capture_output=True, text=True,
                             timeout=30)
        check(out.returncode == 0, "`banyan node --help` failed")
        node_flags = flags_in(out.stdout)
    check_k8s(f"{src}/deploy/k8s/banyan.yaml", node_flags)
    check_compose(f"{src}/docker/compose.yml", node_flags)
    check_dockerfile(f"{src}/Dockerfile")
    for p in problems:
        print("validate_deploy: " + p, file=sys.stderr)
    if not problems:
        print("validate_deploy: deploy/k8s, docker/compose.yml and the Dockerfile are sane")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
