#!/usr/bin/env python3
"""A host built on the official MCP Python SDK (`pip install mcp`), for countersign's suite.

Usage: sdk_host.py COUNTERSIGN CONFIG DB
Starts `COUNTERSIGN mcp-proxy --config CONFIG` through the SDK's stdio client, lists the tools,
reads, asks for a write (pending), approves it with `COUNTERSIGN --db DB approve`, collects it
and asks again (a duplicate). Prints one JSON object with what it saw.
"""
import asyncio
import json
import sqlite3
import subprocess
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

cs, config, db = sys.argv[1], sys.argv[2], sys.argv[3]


def text(r):
    return {"text": r.content[0].text if r.content else "", "isError": bool(r.is_error),
            "structured": r.structured_content}


async def main():
    seen = {}
    params = StdioServerParameters(command=cs, args=["mcp-proxy", "--config", config])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            seen["server"] = init.server_info.name
            tools = await session.list_tools()
            seen["tools"] = [t.name for t in tools.tools]
            seen["read"] = text(await session.call_tool("fs_read_file", {"path": "/etc/hostname"}))
            args = {"path": "/tmp/sdk", "text": "from the SDK"}
            seen["pending"] = text(await session.call_tool("fs_write_file", args))
            t = seen["pending"]["text"]
            approval = t[t.index("(approval ") + 10:].split(")")[0]
            run = sqlite3.connect(db).execute(
                "SELECT run_id FROM approvals WHERE id = ?", (approval,)).fetchone()[0]
            subprocess.run([cs, "--db", db, "approve", run, "--approval", approval, "--yes"],
                           check=True, capture_output=True)
            seen["collected"] = text(await session.call_tool("fs_write_file", args))
            seen["duplicate"] = text(await session.call_tool("fs_write_file", args))
    print(json.dumps(seen))


asyncio.run(main())
