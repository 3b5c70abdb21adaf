#!/usr/bin/env python3
"""Checks the Kubernetes examples in docs/kubernetes/ against the real model-server.

model-server.yaml: the manifests parse, every flag the Deployment passes is one model-server
--help lists, the probes use paths the server serves, the ConfigMap's configs are the files the
flags name, and the grace period outlasts the drain.

serving-runtime.yaml, a KServe ServingRuntime: its kind and apiVersion are KServe's, it declares
the tensorflow and onnx model formats and the v1 and v2 protocols (and only protocol names KServe
defines), it has exactly one container, named kserve-container, whose every flag is one --help
lists, the model is KServe's ({{.Name}}, at /mnt/models), the probes use the health paths on the
REST port, the REST port (--rest_api_port) is the first declared container port and the one the
Prometheus annotations name, the gRPC port (--port) is declared under a name KServe reads as gRPC,
the pause plus the drain fit Kubernetes' default grace period, and the image is the Deployment's.

    check_kubernetes.py MODEL_SERVER SOURCE_DIR
"""
import re
import subprocess
import sys

import yaml

# InferenceServiceProtocol values in KServe's pkg/constants.
KSERVE_PROTOCOLS = {"v1", "v2", "grpc-v1", "grpc-v2"}
# Kubernetes' terminationGracePeriodSeconds when a pod does not set it.
DEFAULT_GRACE_SECONDS = 30


def check_deployment(source, help_text):
    with open(f"{source}/docs/kubernetes/model-server.yaml") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    kinds = {d["kind"]: d for d in docs}
    assert set(kinds) == {"ConfigMap", "Deployment", "Service"}, kinds.keys()
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
    return container["image"]


def check_serving_runtime(source, help_text, deployment_image):
    name = "docs/kubernetes/serving-runtime.yaml"
    with open(f"{source}/{name}") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    assert len(docs) == 1, f"{name}: one document expected, found {len(docs)}"
    runtime = docs[0]
    assert runtime["kind"] == "ServingRuntime", runtime["kind"]
    assert runtime["apiVersion"] == "serving.kserve.io/v1alpha1", runtime["apiVersion"]
    spec = runtime["spec"]

    formats = {f["name"] for f in spec["supportedModelFormats"]}
    assert {"tensorflow", "onnx"} <= formats, f"model formats {formats}"
    protocols = set(spec["protocolVersions"])
    assert {"v1", "v2"} <= protocols, f"protocols {protocols}"
    assert protocols <= KSERVE_PROTOCOLS, f"not KServe protocols: {protocols - KSERVE_PROTOCOLS}"

    containers = spec["containers"]
    assert len(containers) == 1 and containers[0]["name"] == "kserve-container", \
        "exactly one container, named kserve-container"
    container = containers[0]
    assert container["image"] == deployment_image, \
        f"image {container['image']} is not model-server.yaml's {deployment_image}"

    # Flags as --help lists them ("  --name (default ...)"), matched whole.
    flags = set(re.findall(r"^\s*--([a-z0-9_]+) \(default", help_text, re.M))
    assert flags, "no flags found in model-server --help"
    args = {}
    for arg in container["args"]:
        assert arg.startswith("--") and "=" in arg, f"{arg!r} is not --flag=value"
        flag, value = arg[2:].split("=", 1)
        assert flag in flags, f"--{flag} is not a model-server flag"
        assert flag not in args, f"--{flag} is given twice"
        args[flag] = value
    assert args.get("model_name") == "{{.Name}}", "--model_name must be KServe's {{.Name}}"
    assert args.get("model_base_path") == "/mnt/models", "--model_base_path must be /mnt/models"
    rest_port, grpc_port = int(args["rest_api_port"]), int(args["port"])

    ports = container["ports"]
    by_name = {p["name"]: p["containerPort"] for p in ports}
    declared = {p["containerPort"] for p in ports}
    assert len(by_name) == len(ports) == len(declared), "container ports must have distinct names and numbers"

    def resolve(port):
        return by_name[port] if isinstance(port, str) else port

    # KServe points its Service's port 80 at the first container port.
    assert ports[0]["containerPort"] == rest_port, "the first container port must be --rest_api_port"
    # KServe gives a port whose name holds "grpc" or "h2c" appProtocol kubernetes.io/h2c.
    grpc = [p for p in ports if "h2c" in p["name"] or "grpc" in p["name"]]
    assert [p["containerPort"] for p in grpc] == [grpc_port], "one gRPC (h2c) container port, --port"

    for probe, paths in (("readinessProbe", {"/v2/health/ready"}), ("livenessProbe", {"/v2/health/live"}),
                         ("startupProbe", {"/v2/health/ready"})):
        if probe not in container:
            assert probe == "startupProbe", f"{probe} is missing"
            continue
        get = container[probe]["httpGet"]
        assert get["path"] in paths, f"{probe}: {get['path']}"
        port = resolve(get["port"])
        assert port in declared and port == rest_port, f"{probe}: port {get['port']} is not --rest_api_port"

    annotations = spec["annotations"]
    prometheus_port = int(annotations["prometheus.kserve.io/port"])
    assert prometheus_port in declared and prometheus_port == rest_port, \
        "prometheus.kserve.io/port must be --rest_api_port"
    assert annotations["prometheus.kserve.io/path"] == "/metrics", annotations["prometheus.kserve.io/path"]

    drain = int(args["drain_timeout_seconds"])
    pause = int(container["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert drain + pause < DEFAULT_GRACE_SECONDS, "the pause plus the drain must fit the default grace period"
    print(f"{name}: ok")


def main():
    server, source = sys.argv[1], sys.argv[2]
    help_text = subprocess.run([server, "--help"], capture_output=True, text=True, check=True).stdout
    image = check_deployment(source, help_text)
    check_serving_runtime(source, help_text, image)


if __name__ == "__main__":
    main()
