#!/usr/bin/env python3
"""Checks docs/kubernetes/model-server.yaml against the real model-server: the manifests parse,
every flag the Deployment passes is one model-server --help lists, the probes use paths the
server serves, the ConfigMap's configs are the files the flags name, and the grace period
outlasts the drain.

    check_kubernetes.py MODEL_SERVER SOURCE_DIR
"""
import subprocess
import sys

import yaml


def main():
    server, source = sys.argv[1], sys.argv[2]
    with open(f"{source}/docs/kubernetes/model-server.yaml") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    kinds = {d["kind"]: d for d in docs}
    assert set(kinds) == {"ConfigMap", "Deployment", "Service"}, kinds.keys()
    help_text = subprocess.run([server, "--help"], capture_output=True, text=True, check=True).stdout
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    args = dict(a[2:].split("=", 1) for a in container["args"])
    for flag in args:
        assert f"--{flag}" in help_text, f"--{flag} is not a model-server flag"
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        path = container[probe]["httpGet"]["path"]
        assert path in ("/v2/health/ready", "/v2/health/live"), path
    config = kinds["ConfigMap"]["data"]
    mounted = container["volumeMounts"][0]["mountPath"]
    for flag in ("model_config_file", "monitoring_config_file"):
        name = args[flag].removeprefix(mounted + "/")
        assert name in config, f"--{flag}={args[flag]} is not in the ConfigMap"
    drain = int(args["drain_timeout_seconds"])
    pause = int(container["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert pod["terminationGracePeriodSeconds"] > drain + pause, "the grace period must outlast the drain"
    print("docs/kubernetes/model-server.yaml: ok")


if __name__ == "__main__":
    main()
