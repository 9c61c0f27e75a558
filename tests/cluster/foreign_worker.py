"""A remote agent written without reach_adapters: redis-py and json only, following the wire
protocol of docs/cluster.md ("Remote agents without a node") step by step, as a program in any
other language would. Usage: python foreign_worker.py REDIS_URL PREFIX WORKER_ID TTL_MS"""

import json
import signal
import sys
import time
from typing import Any

import redis

url, prefix, worker, ttl_ms = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
AGENT = "foreign:reverse:01"
LEASE = f"{prefix}lease:{worker}:{AGENT}"
INBOX, CHANNEL = f"{prefix}inbox:{worker}", f"{prefix}catalog"
RECORD = {
    "agent_id": AGENT,
    "node": worker,
    "state": "online",
    "state_reason": "",
    "ttl_ms": ttl_ms,
    "capabilities": [
        {
            "name": "reverse",
            "description": "Reverse the text.",
            "timeout_ms": 5000,
            "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}},
        }
    ],
}
r = redis.Redis.from_url(url)


def leave(*_: object) -> None:  # deregister: delete the lease and the inbox, announce it
    r.delete(LEASE, INBOX)
    r.publish(CHANNEL, json.dumps({"op": "del", "agent_id": AGENT, "node": worker}))
    sys.exit(0)


def answer(call: dict[str, Any]) -> None:
    message = call["message"]
    meta = message["meta_info"]
    result = {"task_id": meta["task_id"], "trace_id": meta.get("trace_id"), "agent_id": AGENT}
    if meta.get("deadline") is not None and meta["deadline"] <= time.time():
        result.update(
            status="timeout",
            error_type="ReachTimeoutError",
            fault="router",
            error="deadline passed before delivery",
            delivered=False,
            retryable=True,
        )
    else:
        result.update(status="ok", payload=message["raw_payload"]["text"][::-1], delivered=True)
    reply = f"{prefix}replies:{call['reply_to']}"
    r.xadd(reply, {"m": json.dumps({"id": call["id"], "result": result})}, maxlen=10000, approximate=True)
    r.pexpire(reply, max(2 * ttl_ms, 10000))


signal.signal(signal.SIGTERM, leave)
last: Any = (r.xrevrange(INBOX, count=1) or [(b"0-0", None)])[0][0]  # read from now on
r.set(LEASE, json.dumps(RECORD), px=ttl_ms)  # register
r.publish(CHANNEL, json.dumps({"op": "put", "record": RECORD}))
print("ready", flush=True)
renewed = time.monotonic()
while True:
    wait_ms = int((renewed + ttl_ms / 3000 - time.monotonic()) * 1000)  # until the next heartbeat
    reply: Any = r.xread({INBOX: last}, count=100, block=max(wait_ms, 1))
    for _stream, entries in reply or []:
        for entry_id, fields in entries:
            last = entry_id
            call = json.loads(fields[b"m"])
            if call["op"] == "call" and call["agent_id"] == AGENT:
                answer(call)  # served at once, so there is never a call left to cancel
    if time.monotonic() - renewed >= ttl_ms / 3000:  # heartbeat every TTL/3
        r.set(LEASE, json.dumps(RECORD), px=ttl_ms)
        r.pexpire(INBOX, 2 * ttl_ms)
        renewed = time.monotonic()
