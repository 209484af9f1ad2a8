"""A model server for benchmarks: answers OpenAI-shaped chat completions after a fixed delay.

Not a test stand-in and not a real model: it plays the remote model of the provider-script
benchmark (bench_script_provider.py). It runs in its own process (so its CPU is not counted as
lev_nb's), on 127.0.0.1, HTTP/1.1 with keep-alive, on asyncio (one task per connection, so a
thousand open calls cost it nothing), and counts the calls it holds at once.

    python bench/latency_server.py --delay 0.05      # prints the port, then serves until killed

Routes:
- ``POST /v1/chat/completions``: waits ``--delay`` seconds, then answers. The model name says how
  many tool turns a stage takes: ``tools-K`` calls ``current_time`` (when offered) until the conversation
  holds K results of the calls it made under that model name, then answers in text.
- ``GET /stats``: ``{"calls", "in_flight", "peak"}``; ``POST /reset`` zeroes calls and peak.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any


class Counters:
    """Calls answered, calls held now, the most held at once."""

    def __init__(self) -> None:
        self.calls = 0
        self.in_flight = 0
        self.peak = 0


def reply(request: dict[str, Any]) -> dict[str, Any]:
    """The chat completion the bench model gives ``request``."""
    model = str(request.get("model") or "")
    wanted = int(model.rsplit("-", 1)[1]) if model.startswith("tools-") and model.rsplit("-", 1)[1].isdigit() else 0
    messages = request.get("messages") or []
    mine = f"call-{model}-"  # this stage's own tool calls, whatever else the conversation holds
    done = sum(1 for m in messages if m.get("role") == "tool" and str(m.get("tool_call_id", "")).startswith(mine))
    offered = {t.get("function", {}).get("name") for t in request.get("tools") or []}
    usage = {"prompt_tokens": 40 * len(messages), "completion_tokens": 12, "total_tokens": 40 * len(messages) + 12}
    if "current_time" in offered and done < wanted:
        call = {"id": f"{mine}{done}", "type": "function",
                "function": {"name": "current_time", "arguments": "{}"}}
        message = {"role": "assistant", "content": "", "tool_calls": [call]}
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": "Done: the bench step is finished."}
        finish = "stop"
    return {"id": "bench", "object": "chat.completion", "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}


async def serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float,
                           counters: Counters) -> None:
    """Answer requests on one keep-alive connection until the client closes it."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
            body = await reader.readexactly(int(headers.get("content-length") or 0))
            if path == "/stats":
                answer: dict[str, Any] = {"calls": counters.calls, "in_flight": counters.in_flight,
                                          "peak": counters.peak}
            elif path == "/reset":
                counters.calls, counters.peak = 0, counters.in_flight
                answer = {"ok": True}
            else:
                counters.calls += 1
                counters.in_flight += 1
                counters.peak = max(counters.peak, counters.in_flight)
                try:
                    await asyncio.sleep(delay)
                finally:
                    counters.in_flight -= 1
                answer = reply(json.loads(body or b"{}")) if method == "POST" else {"data": []}
            data = json.dumps(answer).encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                         + str(len(data)).encode() + b"\r\n\r\n" + data)
            await writer.drain()
            if headers.get("connection", "").lower() == "close":
                break
    except (asyncio.IncompleteReadError, ConnectionError, ValueError):
        pass
    finally:
        writer.close()


async def main_async(delay: float, port: int) -> None:
    """Serve until killed, after printing the port."""
    counters = Counters()
    server = await asyncio.start_server(lambda r, w: serve_connection(r, w, delay, counters), "127.0.0.1", port,
                                        backlog=4096)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    """``python bench/latency_server.py --delay SECONDS [--port N]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.05, help="seconds before each answer")
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    args = parser.parse_args()
    try:
        asyncio.run(main_async(args.delay, args.port))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
