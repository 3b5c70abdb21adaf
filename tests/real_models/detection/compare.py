#!/usr/bin/python3
"""How far a detector's outputs (model-cli run's JSON) are onnxruntime's (ort_run.js's JSON), as
tests/runtime/onnx_detection_test.cc matches them: a row (label, box, score) of ours is matched
by an unused row of onnxruntime's with the same label, the score within 1e-4 relative and each
box coordinate within 1e-3 of max(1, |it|); a row left unmatched is tied if onnxruntime left a
row of its score (within 1e-6) unmatched too. Masks, keypoints and keypoint scores are compared
over the matched rows (the largest difference over the reference's largest magnitude). Prints
one JSON line, with a "summary" in words.

  compare.py OURS.json REFERENCE.json
"""
import json
import sys

import numpy as np


def main():
    ours = json.load(open(sys.argv[1]))
    ref = json.load(open(sys.argv[2]))

    def pair(key):
        return (np.array(ours[key], dtype=np.float64),
                np.array(ref[key]["data"], dtype=np.float64).reshape(ref[key]["dims"]))

    (boxes, want_boxes), (scores, want_scores), (labels, want_labels) = pair("boxes"), pair("scores"), pair("labels")
    used, match = set(), {}
    for i in range(len(scores)):
        for j in range(len(want_scores)):
            if j in used or labels[i] != want_labels[j]:
                continue
            if abs(scores[i] - want_scores[j]) > 1e-4 * abs(want_scores[j]) + 1e-6:
                continue
            if np.all(np.abs(boxes[i] - want_boxes[j]) <= 1e-3 * np.maximum(1, np.abs(want_boxes[j]))):
                used.add(j)
                match[i] = j
                break
    left = [want_scores[j] for j in range(len(want_scores)) if j not in used]
    unmatched = [i for i in range(len(scores)) if i not in match]
    tied = [i for i in unmatched if any(abs(s - scores[i]) <= 1e-6 for s in left)]
    result = {"rows": len(want_scores), "ours": len(scores), "matched": len(match), "tied": len(tied),
              "distinct_scores": len(set(np.round(want_scores, 7)))}
    for key in ("masks", "keypoints", "keypoints_scores"):
        if key in ours and match:
            got, want = pair(key)
            worst = max(np.abs(got[i] - want[j]).max() / max(1e-12, np.abs(want[j]).max()) for i, j in match.items())
            result[key + "_max_rel"] = float(worst)
    extra = ", ".join(f"{key} {result[key + '_max_rel']:.1g}" for key in ("masks", "keypoints", "keypoints_scores")
                      if key + "_max_rel" in result)
    result["summary"] = (f"{len(match)} of {len(want_scores)} rows ({len(tied)} tied, "
                         f"{result['distinct_scores']} distinct scores)" + (f"; max rel. {extra}" if extra else ""))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
