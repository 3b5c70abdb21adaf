#!/usr/bin/env python3
"""Uploads files to an S3-compatible server with boto3 (Debian's python3-boto3), as another
tool than Lockstep would: the S3 tests check that what it writes, Lockstep reads.

    boto3_put.py ENDPOINT_URL BUCKET KEY=FILE [KEY=FILE ...]

Credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. A KEY=-FILE form deletes KEY.
"""
import sys

import boto3


def main():
    endpoint, bucket, pairs = sys.argv[1], sys.argv[2], sys.argv[3:]
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    for pair in pairs:
        key, path = pair.split("=", 1)
        if path == "-":
            s3.delete_object(Bucket=bucket, Key=key)
            continue
        with open(path, "rb") as f:
            s3.put_object(Bucket=bucket, Key=key, Body=f.read())


if __name__ == "__main__":
    main()
