#!/usr/bin/env python3
"""Cross-file checks of deploy/ that no schema can see.

Run by scripts/check-deploy.sh inside its venv (PyYAML and jsonschema come
with kubernetes-validate). Checks:
  * the ServiceMonitor against servicemonitor.schema.json (the Prometheus
    Operator's CRD is not in kubernetes-validate's built-in schemas);
  * kustomization.yaml lists exactly the manifests in deploy/k8s;
  * selectors, port names, probe paths, annotations, the ConfigMap's TOML and
    the grace period agree with each other and with the daemon's contract;
  * the systemd unit's stop timeout covers the config's shutdown_timeout.
With --write-config DIR it also writes the ConfigMap's TOML to DIR/configmap.toml
so the caller can run `fileserver check-config` on it. With --manifests FILE
it checks those documents (an overlay built by `kubectl kustomize`) instead
of deploy/k8s's files.
Prints one problem per line and exits 1 if there is any.
"""
import argparse
import json
import pathlib
import re
import sys
import tomllib

import jsonschema
import yaml

problems = []


def problem(msg):
    problems.append(msg)


def duration_seconds(text):
    """fileserver/systemd durations: 30s, 500ms, 2m, 1h, or a bare number of seconds."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*(ms|s|m|h|min)?\s*", text)
    if not m:
        raise ValueError(f"not a duration: {text!r}")
    n = float(m.group(1))
    return n * {"ms": 0.001, None: 1, "s": 1, "m": 60, "min": 60, "h": 3600}[m.group(2)]


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--deploy", default="deploy")
    ap.add_argument("--write-config")
    ap.add_argument("--manifests")
    args = ap.parse_args()
    deploy = pathlib.Path(args.deploy)
    k8s = deploy / "k8s"

    docs = {}
    paths = [pathlib.Path(args.manifests)] if args.manifests else sorted(k8s.glob("*.yaml"))
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs.setdefault(doc["kind"], []).append((path.name, doc))

    def one(kind, name=None):
        found = [d for _, d in docs.get(kind, []) if name is None or d["metadata"]["name"] == name]
        if len(found) != 1:
            problem(f"expected exactly one {kind}{' ' + name if name else ''}, found {len(found)}")
            return None
        return found[0]

    # --- ServiceMonitor schema ----------------------------------------------
    schema = json.loads((deploy / "checks" / "servicemonitor.schema.json").read_text())
    monitor = one("ServiceMonitor")
    if monitor is not None:
        validator = jsonschema.Draft202012Validator(schema)
        for err in sorted(validator.iter_errors(monitor), key=lambda e: list(e.path)):
            where = ".".join(str(p) for p in err.path) or "(top)"
            problem(f"servicemonitor.yaml: {where}: {err.message}")

    # --- kustomization lists every manifest ---------------------------------
    kust = None if args.manifests else one("Kustomization")
    if kust is not None:
        listed = set(kust.get("resources", []))
        present = {p.name for p in k8s.glob("*.yaml")} - {"kustomization.yaml"}
        for missing in sorted(present - listed):
            problem(f"kustomization.yaml: {missing} is not listed in resources")
        for extra in sorted(listed - present):
            problem(f"kustomization.yaml: resource {extra} does not exist")

    dep = one("Deployment", "fileserver")
    cm = one("ConfigMap", "fileserver-config")
    if dep is None or cm is None:
        return
    pod = dep["spec"]["template"]
    pod_labels = pod["metadata"]["labels"]
    if not selects(dep["spec"]["selector"]["matchLabels"], pod_labels):
        problem("deployment: selector does not match the pod template labels")
    spec = pod["spec"]
    (container,) = [c for c in spec["containers"] if c["name"] == "fileserver"]
    ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    for name in ("http", "metrics"):
        if name not in ports:
            problem(f"deployment: container has no port named {name!r}")

    # --- the TOML config ------------------------------------------------------
    text = cm["data"].get("fileserver.toml")
    if text is None:
        problem("configmap: no key fileserver.toml")
        return
    config = tomllib.loads(text)
    if args.write_config:
        pathlib.Path(args.write_config, "configmap.toml").write_text(text)

    def port_of(key, default):
        return int(config.get(key, default).rsplit(":", 1)[1])

    if port_of("listen", "127.0.0.1:8080") != ports.get("http"):
        problem(f"configmap listen port != containerPort http ({ports.get('http')})")
    if port_of("admin_listen", "127.0.0.1:8081") != ports.get("metrics"):
        problem(f"configmap admin_listen port != containerPort metrics ({ports.get('metrics')})")
    for key in ("listen", "admin_listen"):
        if config.get(key, "127.0.0.1").startswith(("127.", "[::1]", "localhost")):
            problem(f"configmap {key} binds loopback: probes and the Service cannot reach it")

    if config.get("fd_headroom", 256) < config.get("max_connections", 10000):
        problem("configmap: fd_headroom < max_connections: client sockets could eat the file descriptors"
                " the fd budget counts on")

    mounts = {m["name"]: m for m in container.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    cfg_mount = next((m for m in mounts.values()
                      if volumes.get(m["name"], {}).get("configMap", {}).get("name") == "fileserver-config"), None)
    if cfg_mount is None:
        problem("deployment: the ConfigMap fileserver-config is not mounted")
    else:
        expected = f"{cfg_mount['mountPath'].rstrip('/')}/fileserver.toml"
        argv = container.get("args", []) + container.get("command", [])
        if expected not in argv:
            problem(f"deployment: args do not pass --config {expected}")
    def mount_of(path):
        """The mount holding `path` (the deepest), if any."""
        path = path.rstrip("/")
        holding = [m for m in mounts.values()
                   if path == m["mountPath"].rstrip("/") or path.startswith(m["mountPath"].rstrip("/") + "/")]
        return max(holding, key=lambda m: len(m["mountPath"]), default=None)

    root = config.get("root", ".")
    root_mount = mount_of(root)
    if root_mount is None:
        problem(f"deployment: nothing is mounted at the served root {root}")
    elif not root_mount.get("readOnly"):
        problem("deployment: the served root must be mounted readOnly")
    keys = config.get("tls_ticket_keys")
    if keys and mount_of(keys) is None:
        problem(f"deployment: nothing is mounted where tls_ticket_keys ({keys}) is read")

    # --- probes ----------------------------------------------------------------
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        p = container.get(probe, {}).get("httpGet", {})
        if p.get("path") != path:
            problem(f"deployment: {probe} path is {p.get('path')!r}, want {path}")
        if p.get("port") not in ("metrics", ports.get("metrics")):
            problem(f"deployment: {probe} does not target the admin port")

    # --- graceful termination ----------------------------------------------
    shutdown = duration_seconds(config.get("shutdown_timeout", "30s"))
    pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    grace = spec.get("terminationGracePeriodSeconds", 30)
    if grace < shutdown + pre_stop + 1:
        problem(f"deployment: terminationGracePeriodSeconds {grace} < shutdown_timeout {shutdown:g}s"
                f" + preStop {pre_stop}s + margin")

    # --- hardening --------------------------------------------------------------
    sc, psc = container.get("securityContext", {}), spec.get("securityContext", {})
    if not (sc.get("runAsNonRoot") or psc.get("runAsNonRoot")):
        problem("deployment: runAsNonRoot is not set")
    if (sc.get("runAsUser", psc.get("runAsUser", 0))) == 0:
        problem("deployment: runs as uid 0")
    if not sc.get("readOnlyRootFilesystem"):
        problem("deployment: readOnlyRootFilesystem is not true")
    if sc.get("allowPrivilegeEscalation", True):
        problem("deployment: allowPrivilegeEscalation is not false")
    if sc.get("capabilities", {}).get("drop") != ["ALL"]:
        problem("deployment: capabilities are not dropped (drop: [ALL])")
    res = container.get("resources", {})
    if not res.get("requests") or not res.get("limits"):
        problem("deployment: resource requests and limits must both be set")

    # --- annotations (the plain prometheus.io alternative) ----------------
    ann = pod["metadata"].get("annotations", {})
    if ann.get("prometheus.io/scrape") != "true":
        problem("deployment: prometheus.io/scrape is not \"true\"")
    if str(ann.get("prometheus.io/port")) != str(ports.get("metrics")):
        problem("deployment: prometheus.io/port is not the metrics containerPort")
    if ann.get("prometheus.io/path") != "/metrics":
        problem("deployment: prometheus.io/path is not /metrics")

    # --- services, ServiceMonitor, HPA, PDB -------------------------------------
    services = [d for _, d in docs.get("Service", [])]
    for svc in services:
        if not selects(svc["spec"]["selector"], pod_labels):
            problem(f"service {svc['metadata']['name']}: selector matches no fileserver pod")
        for p in svc["spec"]["ports"]:
            tp = p.get("targetPort", p["port"])
            if isinstance(tp, str) and tp not in ports:
                problem(f"service {svc['metadata']['name']}: targetPort {tp!r} is not a container port")
    if monitor is not None:
        sel = monitor["spec"]["selector"].get("matchLabels", {})
        matched = [s for s in services if selects(sel, s["metadata"].get("labels", {}))]
        if len(matched) != 1:
            problem(f"servicemonitor: selector matches {len(matched)} Services, want 1")
        else:
            svc = matched[0]
            names = {p.get("name") for p in svc["spec"]["ports"]}
            for ep in monitor["spec"]["endpoints"]:
                if ep.get("port") not in names:
                    problem(f"servicemonitor: endpoint port {ep.get('port')!r} is not a port of {svc['metadata']['name']}")
                if ep.get("path", "/metrics") != "/metrics":
                    problem("servicemonitor: endpoint path is not /metrics")
            job_label = monitor["spec"].get("jobLabel")
            job = svc["metadata"].get("labels", {}).get(job_label) if job_label else svc["metadata"]["name"]
            if job != "fileserver":
                problem(f"servicemonitor: scraped series get job={job!r}; the rules select job=\"fileserver\"")
    hpa = one("HorizontalPodAutoscaler")
    if hpa is not None:
        ref = hpa["spec"]["scaleTargetRef"]
        if (ref["kind"], ref["name"]) != ("Deployment", dep["metadata"]["name"]):
            problem("hpa: scaleTargetRef is not the fileserver Deployment")
        if hpa["spec"].get("minReplicas", 1) < 2:
            problem("hpa: minReplicas < 2 leaves no replica during a disruption")
    pdb = one("PodDisruptionBudget")
    if pdb is not None and not selects(pdb["spec"]["selector"].get("matchLabels", {}), pod_labels):
        problem("pdb: selector matches no fileserver pod")

    # --- systemd stop timeout vs the default shutdown_timeout ------------------
    unit = (deploy / "systemd" / "fileserver.service").read_text()
    m = re.search(r"^TimeoutStopSec=(\S+)", unit, re.M)
    if not m:
        problem("fileserver.service: no TimeoutStopSec")
    elif duration_seconds(m.group(1)) <= shutdown:
        problem(f"fileserver.service: TimeoutStopSec={m.group(1)} does not exceed shutdown_timeout {shutdown:g}s")


if __name__ == "__main__":
    main()
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)
