#!/usr/bin/env python3
"""An HTTP proxy in front of an S3 server (s3rver) that misbehaves as networks and servers do,
for the S3 tests' faults:

    faulty_proxy.py PORT UPSTREAM_HOST:PORT LOG_FILE MODE COUNT

MODE, applied to the first COUNT matching requests, then everything passes through:
    cut        an object's GET gets its headers and half its body, then the connection closes
               (the server killed mid-download)
    slow       an object's GET gets its body at 200 bytes a second (a server that answers slowly)
    fail-put   a PUT is answered 500 InternalError without reaching the server
    fail-put-after   the first COUNT PUTs pass, every later one fails as fail-put does
    pass       nothing

Each request is appended to LOG_FILE as "METHOD PATH" and each fault as "fault MODE PATH", so a
test sees what was sent, in order. Prints "ready" once it listens.
"""
import http.client
import http.server
import sys
import threading
import time

PORT, UPSTREAM, LOG, MODE, COUNT = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
lock = threading.Lock()
faults = 0
puts = 0


def log(line):
    with lock, open(LOG, "a") as f:
        f.write(line + "\n")


def take_fault(mode):
    global faults, puts
    with lock:
        if mode == "fail-put" and MODE == "fail-put-after":
            puts += 1
            return puts > COUNT
        if MODE != mode or faults >= COUNT:
            return False
        faults += 1
        return True


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def forward(self):
        log(f"{self.command} {self.path}")
        length = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(length) if length else None
        is_object = self.command == "GET" and "?" not in self.path and self.path.count("/") >= 2
        if self.command == "PUT" and take_fault("fail-put"):
            log(f"fault fail-put {self.path}")
            error = b"<Error><Code>InternalError</Code></Error>"
            self.send_response(500)
            self.send_header("Content-Length", str(len(error)))
            self.end_headers()
            self.wfile.write(error)
            return
        upstream = http.client.HTTPConnection(UPSTREAM, timeout=30)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("expect", "connection")}
        upstream.request(self.command, self.path, body=body, headers=headers)
        answer = upstream.getresponse()
        data = answer.read()
        self.send_response(answer.status)
        for k, v in answer.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        if is_object and answer.status == 200 and take_fault("cut"):
            log(f"fault cut {self.path}")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.end_headers()
        if is_object and answer.status == 200 and take_fault("slow"):
            log(f"fault slow {self.path}")
            for i in range(0, len(data), 20):
                self.wfile.write(data[i : i + 20])
                self.wfile.flush()
                time.sleep(0.1)
            return
        self.wfile.write(data)

    do_GET = do_PUT = do_DELETE = do_HEAD = forward


server = http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Proxy)
server.daemon_threads = True
print("ready", flush=True)
server.serve_forever()
