#!/usr/bin/python3
"""Writes onnxruntime-node's answers for a case (ort_run.js's JSON) as the case's expected
outputs, test_data_set_0/output_<k>.pb, in the order of the model's outputs (outputs.json).

  write_outputs.py CASE_DIR ORT_JSON
"""
import json
import os
import sys

import numpy as np
from onnx import numpy_helper

DTYPES = {"float32": np.float32, "float64": np.float64, "int64": np.int64, "int32": np.int32, "bool": np.bool_}


def main():
    case, answers = sys.argv[1], json.load(open(sys.argv[2]))
    for k, name in enumerate(json.load(open(os.path.join(case, "outputs.json")))):
        a = answers[name]
        if a["type"] not in DTYPES:
            sys.exit(f"{case}: output '{name}' is of type {a['type']}, which write_outputs.py does not write")
        array = np.array(a["data"], dtype=DTYPES[a["type"]]).reshape(a["dims"])
        with open(os.path.join(case, "test_data_set_0", f"output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(array, name).SerializeToString())


if __name__ == "__main__":
    main()
