#!/usr/bin/python3
"""Exports torchvision's SSDlite320 (MobileNetV3-Large) detector as torchvision documents its
ONNX export (opset 11, a list of one image), with random weights made to give boxes whose
scores differ: non-trivial BatchNorm statistics (export_real_models.randomize_norms), the
heads' weights re-drawn, the score threshold at 0. An untrained head scores every box alike,
and a comparison of identical scores proves nothing. Writes model.onnx, image.f32 (the seeded
[3, 320, 320] input, raw float32) and inputs.json (for ort_run.js).

  export_ssdlite.py OUT_DIR
"""
import json
import os
import sys

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from export_real_models import randomize_norms  # noqa: E402


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    model = torchvision.models.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None,
                                                                       score_thresh=0.0)
    model.eval()
    randomize_norms(model, torch.Generator().manual_seed(3))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "head" in name:
                p.normal_(0, 0.05 if p.dim() > 1 else 0.01)
    image = np.random.default_rng(1).uniform(0, 1, (3, 320, 320)).astype(np.float32)
    torch.onnx.export(model, ([torch.from_numpy(image)],), os.path.join(out, "model.onnx"), opset_version=11,
                      input_names=["image"], output_names=["boxes", "scores", "labels"])
    image.astype("<f4").tofile(os.path.join(out, "image.f32"))
    with open(os.path.join(out, "inputs.json"), "w") as f:
        json.dump({"image": {"dims": [3, 320, 320], "data": [float(v) for v in image.ravel()]}}, f)


if __name__ == "__main__":
    main()
