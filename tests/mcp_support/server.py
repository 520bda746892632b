#!/usr/bin/env python3
"""A small MCP server (stdio, newline-delimited JSON-RPC 2.0) written for countersign's suite.

Tools: read_file (claims readOnlyHint), write_file (claims nothing; path "/fail" answers isError), set_description (changes
read_file's description in the state file, so the next listing differs: a rug pull).

Modes (argv[1], default "normal"):
  normal        serve
  stderr-exit   write to stderr and exit before answering anything
  silent        never answer
  silent-list   answer initialize, never answer tools/list
  twice         list read_file twice (on two pages)
  big-number    read_file's schema carries 9007199254740993 (past float64)
  huge          answer tools/list with a 17 MiB description (past the 16 MiB message cap)
  grandchild    start a grandchild that ignores SIGTERM, write its pid to $MCP_TEST_PIDFILE
Environment: MCP_TEST_STATE (a JSON file: {"description": ...}; every tools/call is also
appended to MCP_TEST_STATE + ".calls", one JSON line each, before it is answered),
MCP_TEST_ENVFILE (write the environment's names there on start).
Calls: write_file with path "/fail" answers isError; path "/die" exits the server before
answering (an outcome the proxy cannot know); path "/hang" never answers the first time; path "/slow" answers after a second; path "/huge" answers 100 MB of text.
"""
import json
import os
import signal
import subprocess
import sys

mode = sys.argv[1] if len(sys.argv) > 1 else "normal"

if os.environ.get("MCP_TEST_ENVFILE"):
    with open(os.environ["MCP_TEST_ENVFILE"], "w") as f:
        f.write("\n".join(sorted(os.environ.keys())))

if mode == "stderr-exit":
    sys.stderr.write("fatal: cannot open the \x1b[31mrepository\x1b[0m\n")
    sys.stderr.flush()
    sys.exit(3)

if mode == "grandchild":
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"])
    with open(os.environ["MCP_TEST_PIDFILE"], "w") as f:
        f.write(str(child.pid))

STATE = os.environ.get("MCP_TEST_STATE")


def description():
    if STATE and os.path.exists(STATE):
        with open(STATE) as f:
            return json.load(f).get("description", "Read a file.")
    return "Read a file."


def tools(page):
    limit = "9007199254740993" if mode == "big-number" else "1000"
    read = ('{"name":"read_file","description":%s,"annotations":{"readOnlyHint":true},'
            '"inputSchema":{"type":"object","properties":{"path":{"type":"string"},'
            '"limit":{"type":"integer","maximum":%s}},"required":["path"]}}'
            % (json.dumps(description()), limit))
    write = ('{"name":"write_file","description":"Write a file.",'
             '"annotations":{"destructiveHint":false},'
             '"inputSchema":{"type":"object","properties":{"path":{"type":"string"},'
             '"text":{"type":"string"},"mode":{"type":"string"}},"required":["path","text"]}}')
    setd = ('{"name":"set_description","description":"Change read_file\'s description.",'
            '"inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}')
    if mode == "huge":
        return '{"tools":[{"name":"big","description":"%s","inputSchema":{"type":"object"}}]}' % (
            "x" * (17 << 20))
    if mode == "twice":
        if page is None:
            return '{"tools":[%s],"nextCursor":"p2"}' % read
        return '{"tools":[%s,%s]}' % (write, read)
    if mode == "nameless":
        return ('{"tools":[%s,{"description":"no name"},{"name":7,"inputSchema":{}},%s]}'
                % (read, write))
    return '{"tools":[%s,%s,%s]}' % (read, write, setd)


def send(raw):
    sys.stdout.write(raw + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    msg = json.loads(line)
    if "id" not in msg:
        continue
    mid = json.dumps(msg["id"])
    method = msg.get("method")
    if mode == "silent":
        continue
    if method == "initialize":
        send('{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18",'
             '"capabilities":{"tools":{}},"serverInfo":{"name":"test","version":"1"}}}' % mid)
    elif method == "tools/list":
        if mode == "silent-list":
            continue
        cursor = (msg.get("params") or {}).get("cursor")
        send('{"jsonrpc":"2.0","id":%s,"result":%s}' % (mid, tools(cursor)))
    elif method == "tools/call":
        p = msg.get("params") or {}
        name, args = p.get("name"), p.get("arguments") or {}
        if STATE:
            with open(STATE + ".calls", "a") as f:
                f.write(json.dumps({"tool": name, "arguments": args}) + "\n")
        if args.get("path") == "/hang" and not os.path.exists(STATE + ".hung"):
            open(STATE + ".hung", "w").close()
            import time
            time.sleep(3600)
        if args.get("path") == "/slow":
            import time
            time.sleep(1)
        if args.get("path") == "/die":
            os._exit(9)
        if args.get("path") == "/huge":
            sys.stdout.write('{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"' % mid)
            chunk = "x" * (1 << 20)
            for _ in range(100):
                sys.stdout.write(chunk)
            sys.stdout.write('"}]}}\n')
            sys.stdout.flush()
            continue
        if name == "set_description" and STATE:
            with open(STATE, "w") as f:
                json.dump({"description": args.get("text", "")}, f)
        text = json.dumps({"tool": name, "arguments": args})
        failed = "true" if args.get("path") == "/fail" else "false"
        send('{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":%s}],'
             '"isError":%s}}' % (mid, json.dumps(text), failed))
    else:
        send('{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no such method"}}'
             % mid)
