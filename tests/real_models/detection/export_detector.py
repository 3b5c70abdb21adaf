#!/usr/bin/python3
"""Exports one of torchvision's detectors as torchvision documents its ONNX export (opset 11, a
list of one image), with random weights made to give boxes whose scores differ: non-trivial
BatchNorm statistics (export_real_models.randomize_norms), the heads' weights re-drawn, the
score threshold at 0. An untrained head scores every box alike, and a comparison of identical
scores proves nothing. Writes model.onnx, image.f32 (the seeded [3, 320, 320] input, raw
float32) and inputs.json (for ort_run.js).

  export_detector.py NAME OUT_DIR

NAME: ssdlite320 (SSDlite320, MobileNetV3-Large: anchors, per-class NonMaxSuppression, TopK)
or fasterrcnn_mobilenet_v3_320_fpn (Faster R-CNN, MobileNetV3-Large FPN at 320: a region
proposal network, NonMaxSuppression, MultiScaleRoIAlign's levels, whose `squeeze`s are Ifs on
data-dependent dimensions, and the box head).
"""
import json
import os
import sys

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from export_real_models import randomize_norms  # noqa: E402

DETECTION = torchvision.models.detection
# name -> (constructor, its heads' parameter names hold, the outputs in the order it returns them)
DETECTORS = {
    "ssdlite320": (lambda: DETECTION.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None,
                                                                   score_thresh=0.0),
                   ("head",), ["boxes", "scores", "labels"]),
    "fasterrcnn_mobilenet_v3_320_fpn": (
        lambda: DETECTION.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None,
                                                                box_score_thresh=0.0),
        ("roi_heads", "rpn.head"), ["boxes", "labels", "scores"]),
}


def main():
    name, out = sys.argv[1], sys.argv[2]
    make, heads, outputs = DETECTORS[name]
    torch.manual_seed(0)
    model = make()
    model.eval()
    randomize_norms(model, torch.Generator().manual_seed(3))
    with torch.no_grad():
        for param_name, p in model.named_parameters():
            if any(h in param_name for h in heads):
                p.normal_(0, 0.05 if p.dim() > 1 else 0.01)
    image = np.random.default_rng(1).uniform(0, 1, (3, 320, 320)).astype(np.float32)
    torch.onnx.export(model, ([torch.from_numpy(image)],), os.path.join(out, "model.onnx"), opset_version=11,
                      input_names=["image"], output_names=outputs)
    image.astype("<f4").tofile(os.path.join(out, "image.f32"))
    with open(os.path.join(out, "inputs.json"), "w") as f:
        json.dump({"image": {"dims": [3, 320, 320], "data": [float(v) for v in image.ravel()]}}, f)


if __name__ == "__main__":
    main()
