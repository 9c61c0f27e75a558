"""What security.yaml's rules cost a routed call, against the same router without them.

No target in issue 14; this shows what a guard costs per call, measured in turns with the same
call on an unguarded router: a principal with an allow list (admission + candidate filter), the
same with a quota (the `limits` moving window), and the bearer-token check of the HTTP layer.

Run: ``python -m benchmarks.bench_security [--calls N]``.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from benchmarks.stats import measure, measure_pair, summary
from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.security.credentials import Authenticator
from reach_adapters.security.guard import SecurityGuard
from reach_adapters.security.spec import SecuritySpec

TOKEN = "bench-token-0123456789abcdef"
SPEC = SecuritySpec.model_validate(
    {
        "principals": {
            "alice": {
                "token_env": "BENCH_TOKEN",
                "allow": {"capabilities": ["echo*"], "namespaces": ["bench"]},
            },
            "bob": {"allow": ["*"], "quota_per_minute": 10**9, "burst": 10**9},
        }
    }
)


async def echo(payload: Any) -> Any:
    return payload


def router(guard: SecurityGuard | None) -> Router:
    routed = Router(guard=guard)
    for i in range(3):
        cap = Capability(name="echo")
        routed.register(FunctionAgent(echo, agent_id=f"bench:echo:{i:02d}", capabilities=[cap]))
    return routed


def line(name: str, base: tuple[float, float], other: tuple[float, float]) -> None:
    ratio = other[0] / base[0]
    print(f"  {name:<44} p50 {other[0]:8.2f} µs  p99 {other[1]:8.2f} µs   {ratio:.2f}× the unguarded call")


async def main(calls: int) -> None:
    plain = router(None)
    guarded = router(SecurityGuard(SPEC))
    payload = {"text": "hello"}
    print("routed call on a router with security.yaml's guard vs the same call without one")
    base, allowed = await measure_pair(
        lambda: plain.route("echo", payload), lambda: guarded.route("echo", payload, principal="alice"), calls
    )
    base_s = summary(base)
    print(f"  {'no guard':<44} p50 {base_s[0]:8.2f} µs  p99 {base_s[1]:8.2f} µs")
    line("guard, principal with an allow list", base_s, summary(allowed))
    base, quota = await measure_pair(
        lambda: plain.route("echo", payload), lambda: guarded.route("echo", payload, principal="bob"), calls
    )
    line("guard, principal with quota and burst", summary(base), summary(quota))
    authenticator = Authenticator.from_spec(SPEC, Path("."), environ={"BENCH_TOKEN": TOKEN})
    verify = summary(await measure(lambda: authenticator.verify_token(TOKEN), calls))
    print(f"  {'bearer token check (per HTTP request)':<44} p50 {verify[0]:8.2f} µs  p99 {verify[1]:8.2f} µs")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    asyncio.run(main(parser.parse_args().calls))
