"""The suite's streamable HTTP MCP server (standard library only).

Usage: http_server.py MODE LOGFILE
Prints its port on stdout, then serves on 127.0.0.1 until killed. Every request it receives is
appended to LOGFILE as one JSON line: {"method", "rpc", "session", "protocol"}.

Modes:
  normal    initialize answers JSON with an Mcp-Session-Id; tools/list answers as an SSE stream
            (a ping request to the client first, then the answer split over two data lines);
            tools/call answers JSON; a request without the session id is refused with 400
  redirect  every POST answers 307 to another port
  huge      initialize answers with a Content-Length of 17 MiB
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE = sys.argv[1]
LOG = sys.argv[2]
SESSION = "sess-7f3a"
LOCK = threading.Lock()

TOOLS = (
    '{"tools":[{"name":"read_file","description":"Read a file.",'
    '"annotations":{"readOnlyHint":true},'
    '"inputSchema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}},'
    '{"name":"write_file","description":"Write a file.",'
    '"inputSchema":{"type":"object","properties":{"path":{"type":"string"},"text":{"type":"string"}},'
    '"required":["path","text"]}}]}'
)


def log(entry):
    with LOCK:
        with open(LOG, "a") as f:
            f.write(json.dumps(entry) + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, code, body=b"", ctype="application/json", headers=()):
        self.send_response(code)
        if body or code == 200:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if body:
            self.wfile.write(body)

    def do_DELETE(self):
        log({"method": "DELETE", "session": self.headers.get("Mcp-Session-Id")})
        self.send(200)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(n)
        msg = json.loads(raw)
        log({
            "method": "POST",
            "rpc": msg.get("method"),
            "id": msg.get("id"),
            "session": self.headers.get("Mcp-Session-Id"),
            "protocol": self.headers.get("MCP-Protocol-Version"),
            "accept": self.headers.get("Accept"),
        })
        if MODE == "redirect":
            self.send(307, headers=[("Location", "http://127.0.0.1:9/mcp")])
            return
        if MODE == "huge" and msg.get("method") == "initialize":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(17 << 20))
            self.end_headers()
            self.wfile.write(b"{")
            return
        method = msg.get("method")
        if "id" not in msg or method is None:
            self.send(202)  # a notification, or our answer to the server's ping
            return
        rid = json.dumps(msg["id"])
        if method == "initialize":
            body = ('{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18",'
                    '"capabilities":{"tools":{}},"serverInfo":{"name":"http-test","version":"1"}}}' % rid)
            self.send(200, body.encode(), headers=[("Mcp-Session-Id", SESSION)])
            return
        if self.headers.get("Mcp-Session-Id") != SESSION:
            self.send(400, b'{"error":"no session"}')
            return
        if method == "tools/list":
            # The answer's two data lines join with a newline between two JSON tokens.
            head = '{"jsonrpc":"2.0","id":%s,"result":' % rid
            stream = (
                'event: message\ndata: {"jsonrpc":"2.0","id":"srv-1","method":"ping"}\n\n'
                ": a comment line\n"
                "event: message\ndata: %s\ndata: %s}\n\n" % (head, TOOLS)
            )
            self.send(200, stream.encode(), ctype="text/event-stream")
            return
        if method == "tools/call":
            p = msg.get("params", {})
            text = json.dumps({"tool": p.get("name"), "arguments": p.get("arguments")})
            body = ('{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":%s}]}}'
                    % (rid, json.dumps(text)))
            self.send(200, body.encode())
            return
        self.send(200, ('{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}' % rid).encode())


def main():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
