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
data-dependent dimensions, and the box head), which the test suite runs; and the heavier ones
the benchmark runs (bench/onnx/run_stateful_bench.sh, prepare --all): fasterrcnn_resnet50_fpn,
maskrcnn_resnet50_fpn (masks pasted per detection in a Loop), keypointrcnn_resnet50_fpn
(keypoints from bicubically resized heatmaps' ArgMax), retinanet_resnet50_fpn (the R-CNNs and
RetinaNet at 320 rather than 800 pixels) and ssd300_vgg16. A ResNet-50 FPN's features run to
thousands, so their heads are re-drawn small (an RPN or box head at the MobileNet's scale
proposes nothing but degenerate boxes); a keypoint head's heatmaps must have peaks, or ArgMax
ties and proves nothing.
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
SMALL = {"min_size": 320, "max_size": 320}


def mobile_heads(param_name, heads):
    """The MobileNet detectors' heads: re-drawn at N(0, 0.05), biases N(0, 0.01)."""
    return (0.05, 0.01) if any(h in param_name for h in heads) else None


def resnet_heads(param_name, head_scale):
    """ResNet-50 / VGG detectors: region and box heads small, keypoint heatmaps peaked."""
    if any(h in param_name for h in ("rpn.head", "box_head", "mask_head")):
        return (2e-4, 0.0)
    if "keypoint_head" in param_name:
        return (0.01, 0.0)
    if "roi_heads" in param_name:
        return (0.05, 0.01)
    if head_scale and "head" in param_name:
        return (head_scale, 0.0)
    return None


# name -> (constructor, (param name -> (weight std, bias std) or None), outputs in the order it returns them)
DETECTORS = {
    "ssdlite320": (lambda: DETECTION.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None,
                                                                   score_thresh=0.0),
                   lambda n: mobile_heads(n, ("head",)), ["boxes", "scores", "labels"]),
    "fasterrcnn_mobilenet_v3_320_fpn": (
        lambda: DETECTION.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None,
                                                                box_score_thresh=0.0),
        lambda n: mobile_heads(n, ("roi_heads", "rpn.head")), ["boxes", "labels", "scores"]),
    "fasterrcnn_resnet50_fpn": (
        lambda: DETECTION.fasterrcnn_resnet50_fpn(weights=None, weights_backbone=None, box_score_thresh=0.0, **SMALL),
        lambda n: resnet_heads(n, None), ["boxes", "labels", "scores"]),
    "maskrcnn_resnet50_fpn": (
        lambda: DETECTION.maskrcnn_resnet50_fpn(weights=None, weights_backbone=None, box_score_thresh=0.0, **SMALL),
        lambda n: resnet_heads(n, None), ["boxes", "labels", "scores", "masks"]),
    "keypointrcnn_resnet50_fpn": (
        lambda: DETECTION.keypointrcnn_resnet50_fpn(weights=None, weights_backbone=None, box_score_thresh=0.0,
                                                    **SMALL),
        lambda n: resnet_heads(n, None), ["boxes", "labels", "scores", "keypoints", "keypoints_scores"]),
    "retinanet_resnet50_fpn": (
        lambda: DETECTION.retinanet_resnet50_fpn(weights=None, weights_backbone=None, score_thresh=0.0, **SMALL),
        lambda n: resnet_heads(n, 2e-3), ["boxes", "scores", "labels"]),
    "ssd300_vgg16": (lambda: DETECTION.ssd300_vgg16(weights=None, weights_backbone=None, score_thresh=0.0),
                     lambda n: resnet_heads(n, 2e-3), ["boxes", "scores", "labels"]),
}


def main():
    name, out = sys.argv[1], sys.argv[2]
    make, head_std, outputs = DETECTORS[name]
    torch.manual_seed(0)
    model = make()
    model.eval()
    randomize_norms(model, torch.Generator().manual_seed(3))
    with torch.no_grad():
        for param_name, p in model.named_parameters():
            std = head_std(param_name)
            if std is None:
                continue
            scale = std[0] if p.dim() > 1 else std[1]
            if scale > 0:
                p.normal_(0, scale)
            else:
                p.zero_()
    image = np.random.default_rng(1).uniform(0, 1, (3, 320, 320)).astype(np.float32)
    torch.onnx.export(model, ([torch.from_numpy(image)],), os.path.join(out, "model.onnx"), opset_version=11,
                      input_names=["image"], output_names=outputs)
    image.astype("<f4").tofile(os.path.join(out, "image.f32"))
    with open(os.path.join(out, "inputs.json"), "w") as f:
        json.dump({"image": {"dims": [3, 320, 320], "data": [float(v) for v in image.ravel()]}}, f)


if __name__ == "__main__":
    main()
