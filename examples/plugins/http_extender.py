#!/usr/bin/env python3
"""flxp plugins over HTTP (like a Kubernetes scheduler extender): one small server, two plugins.

    python3 http_extender.py PORT [DENIED_NODE ...]

POST /filter refuses the denied nodes; POST /score prefers nodes running fewer guests. With port 0
the server picks a free port; it prints `listening on PORT` once ready. In flxp.toml:

    [[plugin]]
    name = "rack-power"
    kind = "filter"
    url = "http://127.0.0.1:8901/filter"

    [[plugin]]
    name = "fewest-guests"
    kind = "score"
    url = "http://127.0.0.1:8901/score"
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DENIED = set(sys.argv[2:])


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        request = json.loads(self.rfile.read(length))
        if self.path == "/filter":
            answer = {"protocol": 1, "kind": "filter", "nodes": [
                {"node": n["name"], "allowed": n["name"] not in DENIED,
                 "reason": "rack power budget reached"}
                for n in request["nodes"]]}
        elif self.path == "/score":
            answer = {"protocol": 1, "kind": "score", "scores": [
                {"node": n["name"], "score": -n["guests"]} for n in request["nodes"]]}
        else:
            self.send_error(404)
            return
        body = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
