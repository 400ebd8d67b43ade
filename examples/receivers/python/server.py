"""A minimal receiver for hookrelay webhooks using only Python's standard
library (hmac, hashlib, base64). Usage:

    WEBHOOK_SECRET=whsec_... PORT=9200 python3 server.py

It verifies the Standard Webhooks signature over the raw body bytes in
constant time, refuses timestamps more than 5 minutes away, accepts any of
the space-separated signatures (rotation), answers 204 only after the event
is handled and a bare 401 otherwise, and prints one line per request:
"verified <event id>" or "rejected <reason>".
"""
import base64
import hashlib
import hmac
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

TOLERANCE = 5 * 60

secret = os.environ.get("WEBHOOK_SECRET", "")
if not secret.startswith("whsec_"):
    sys.exit("set WEBHOOK_SECRET to the endpoint's whsec_ secret")
KEY = base64.b64decode(secret[len("whsec_"):])
seen = set()  # dedupe by event ID (a real receiver keeps this in its database)


def verify(headers, body):
    msg_id = headers.get("webhook-id", "")
    ts = headers.get("webhook-timestamp", "")
    sigs = headers.get("webhook-signature", "")
    if not (msg_id and ts and sigs):
        raise ValueError("missing headers")
    if abs(time.time() - int(ts)) > TOLERANCE:
        raise ValueError("timestamp outside the tolerance")
    signed = msg_id.encode() + b"." + ts.encode() + b"." + body
    expected = base64.b64encode(hmac.new(KEY, signed, hashlib.sha256).digest()).decode()
    for sig in sigs.split(" "):
        version, _, value = sig.partition(",")
        if version == "v1" and hmac.compare_digest(value, expected):
            return json.loads(body)
    raise ValueError("no matching signature")


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            event = verify(self.headers, body)
        except ValueError as err:
            print("rejected", err, flush=True)
            self.send_response(401)
            self.end_headers()
            return
        if event["id"] not in seen:
            seen.add(event["id"])
            # Handle the event here, durably, before answering 2xx.
        print("verified", event["id"], flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


port = int(os.environ.get("PORT", "9200"))
server = HTTPServer(("127.0.0.1", port), Handler)
print("listening", port, flush=True)
server.serve_forever()
