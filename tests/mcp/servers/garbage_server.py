"""Not an MCP server at all: answers every line on stdin with a line that is not JSON-RPC."""

import sys

print("garbage: up", file=sys.stderr, flush=True)
for line in sys.stdin:
    sys.stdout.write("<<garbage>> " + line[:20].replace("\n", " ") + "\n")
    sys.stdout.flush()
