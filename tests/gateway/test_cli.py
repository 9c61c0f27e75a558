"""The `reach` commands other than serve, run as a user runs them: in a subprocess."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict

from reach_adapters import Router
from reach_adapters.cli import main
from reach_adapters.cli.progress import progress
from reach_adapters.cli.render import render_result
from reach_adapters.cli.scan import default_name
from reach_adapters.config import ConfigError, MCPAgentFile, load_config, schema_text
from reach_adapters.gateway import Gateway
from reach_adapters.langchain import LangChainAgent
from reach_adapters.observability import JsonFormatter
from reach_adapters.router import UNKNOWN_OUTCOME
from tests.gateway.conftest import (
    ECHO,
    PROBE,
    PROBE_SERVER,
    PYTHON,
    ROOT,
    SHOUT,
    ReachServer,
    run_reach,
    write,
)

pytestmark = pytest.mark.timeout(90)

Serve = Callable[..., ReachServer]

COMMANDS = ["serve", "catalog", "call", "explain", "scan", "check", "schema"]


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """`reach` in this process: argparse's exits become exit codes like the script's."""
    try:
        code = main(args)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", [[], *[[name] for name in COMMANDS]])
def test_every_command_has_help(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main([*command, "--help"], capsys)
    assert code == 0
    assert out.startswith(f"usage: reach {' '.join(command)}".rstrip())


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["serve"], "the following arguments are required: CONFIG_DIR"),
        (["serve", "x", "--port", "http"], "argument --port: 'http' is not a port"),
        (
            ["serve", "x", "--reload-interval", "0"],
            "argument --reload-interval: '0' is not a positive number",
        ),
        (["serve", "x", "--port", "0", "--api-port", "0"], "--api-port 0: it is for --transport stdio"),
        (
            ["serve", "x", "--instructions-file", "no-such-file"],
            "argument --instructions-file: cannot read no-such-file: No such file or directory",
        ),
        (
            ["serve", "x", "--instructions", "a", "--instructions-file", __file__],
            "argument --instructions-file: not allowed with argument --instructions",
        ),
        (["call", "echo", "{oops", "--url", "http://127.0.0.1:1"], "argument PAYLOAD: not JSON"),
        (["call", "echo"], "give --url of a running `reach serve` (or set REACH_URL), or --config DIR"),
        (["call", "echo", "--url", "notaurl"], "--url notaurl: not an http:// or https:// URL"),
        # A wrong option value is refused before anything is sent, or any agent started.
        (
            ["call", "echo", "--option", "configurable=alice", "--url", "http://127.0.0.1:1"],
            "--option configurable=alice: invalid call options: field 'configurable'",
        ),
        (
            ["call", "echo", "--option", "priority=high", "--config", "no-such-dir"],
            "--option priority=high: invalid call options: field 'priority'",
        ),
        (
            ["call", "echo", "--option", 'configurable={"thread_id": alice}', "--url", "http://127.0.0.1:1"],
            "VALUE starts like JSON but is not JSON (Expecting value at column 15)",
        ),
        (
            ["submit", "echo", "--option", "resume={oops", "--url", "http://127.0.0.1:1"],
            "--option resume={oops: VALUE starts like JSON but is not JSON",
        ),
        (["explain", "task-1"], "give --url of a running `reach serve`"),
        (["scan"], "give the server's command after --"),
        (["scan", "--", "no-such-program-here"], "program 'no-such-program-here' is not found"),
        (["schema"], "give a kind to print (policy, agent or security), or --write"),
        (["launch"], "argument COMMAND: invalid choice: 'launch'"),
    ],
)
def test_usage_errors_are_one_line_with_code_2(
    args: list[str], words: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REACH_URL", raising=False)
    code, out, err = run_main(args, capsys)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert words in lines[0]


def test_scan_prints_an_agent_file_ready_to_save(tmp_path: Path) -> None:
    done = run_reach("scan", "--", "python", "-m", "mcp_server_time", "--local-timezone", "UTC")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# mcp:time:0.yaml: written by `reach scan`")
    data = yaml.safe_load(done.stdout)
    assert data["args"] == ["-m", "mcp_server_time", "--local-timezone", "UTC"]
    assert data["overrides"]["get_current_time"]["read_only"] is True
    assert "input_schema" not in data["overrides"]["get_current_time"]
    assert "save this as mcp:time:0.yaml" in done.stderr
    (tmp_path / "mcp:time:0.yaml").write_text(done.stdout)
    spec = load_config(tmp_path).agents["mcp:time:0"]
    assert isinstance(spec.model, MCPAgentFile)
    assert set(spec.model.overrides) == {"get_current_time", "convert_time"}


def test_scan_json_with_schemas_names_and_prefixes(tmp_path: Path) -> None:
    done = run_reach(
        "scan", "--json", "--schemas", "--name", "probe", "--instance", "7", "--prefix", "p_", "--",
        "python", PROBE_SERVER,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["name"], data["instance"], data["prefix"]) == ("probe", "7", "p_")
    assert data["overrides"]["say"]["input_schema"]["required"] == ["text"]
    (tmp_path / "mcp:probe:7.json").write_text(done.stdout)
    assert list(load_config(tmp_path).agents) == ["mcp:probe:7"]


def test_catalog_call_and_explain_against_a_running_server(serve: Serve, config_dir: Path) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    write(config_dir, "util:shout:01.yaml", SHOUT)
    server = serve(config_dir)
    catalog = run_reach("catalog", "--url", server.url)
    assert catalog.returncode == 0, catalog.stderr
    assert catalog.stdout.splitlines()[0].split() == [
        "AGENT",
        "STATE",
        "BREAKER",
        "IN",
        "FLIGHT",
        "CALLS",
        "CAPABILITIES",
        "PROBLEM",
    ]
    assert "util:shout:01" in catalog.stdout
    as_json = json.loads(run_reach("catalog", "--url", server.api_url, "--json").stdout)
    assert {info["agent_id"] for info in as_json} == {"util:echo:01", "util:shout:01"}

    called = run_reach("call", "shout", '{"text": "loud"}', "--url", server.url, "--json")
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)
    assert (result["payload"], result["agent_id"]) == ("LOUD", "util:shout:01")
    explained = run_reach("explain", result["task_id"], "--url", server.url, "--why-not", "util:echo:01")
    assert explained.returncode == 0, explained.stderr
    assert (
        f"decision for task {result['task_id']} (trace {result['trace_id']}): unicast shout"
        in explained.stdout
    )
    assert "candidate util:shout:01: score" in explained.stdout
    assert "why not: util:echo:01 was not a candidate" in explained.stdout

    directed = run_reach("call", "util:echo:01", "[1, 2]", "--url", server.url, "--explain")
    assert directed.returncode == 0, directed.stderr
    assert directed.stdout.startswith("ok: echo -> util:echo:01")
    assert "decision for task" in directed.stdout

    failed = run_reach("call", "nobody", "--url", server.url, "--option", "timeout_ms=500")
    assert failed.returncode == 1
    assert failed.stdout.startswith("no_candidate: nobody -> no agent")
    unknown = run_reach("explain", "no-such-task", "--url", server.url)
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("reach explain: error: no decision record for task 'no-such-task'")
    invalid = run_reach("call", "shout", "{}", "--url", server.url, "--option", "priority=42")
    assert invalid.returncode == 2
    assert "--option priority=42: invalid call options: field 'priority'" in invalid.stderr
    # Text that starts like JSON goes as a JSON string.
    bracketed = run_reach(
        "call", "shout", '{"text": "x"}', "--url", server.url, "--option", 'text="[urgent] x"'
    )  # fmt: skip
    assert bracketed.returncode == 0, bracketed.stdout


def test_commands_run_straight_from_a_config_dir(config_dir: Path) -> None:
    write(config_dir, "util:shout:01.yaml", SHOUT)
    write(
        config_dir, "mcp:probe:0.yaml", f"kind: mcp\nname: probe\ncommand: python\nargs: [{PROBE_SERVER}]\n"
    )
    catalog = run_reach("catalog", "--config", str(config_dir))
    assert catalog.returncode == 0, catalog.stderr
    assert "mcp:probe:0" in catalog.stdout
    assert "pid, say, seen, environment, grow" in catalog.stdout
    called = run_reach("call", "say", '{"text": "local"}', "--config", str(config_dir), "--explain", "--json")
    assert called.returncode == 0, called.stderr
    out = json.loads(called.stdout)
    assert out["result"]["payload"] == "local"
    assert out["decision"]["chosen"] == "mcp:probe:0"


def test_check_validates_without_starting_anything(config_dir: Path) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    ok = run_reach("check", str(config_dir), "--json")
    assert ok.returncode == 0, ok.stderr
    report = json.loads(ok.stdout)
    assert report["agents"] == [
        {
            "agent_id": "util:echo:01",
            "kind": "function",
            "source": "tests.gateway.agents:echo",
            "file": "util:echo:01.yaml",
        }
    ]
    path = write(config_dir, "mcp:gone:0.yaml", "kind: mcp\nname: gone\ncommand: /nowhere/server\n")
    bad = run_reach("check", str(config_dir))
    assert bad.returncode == 3
    assert bad.stderr.strip() == (
        f"reach check: error: {path}:3: field 'command': program '/nowhere/server' is not found or not "
        "executable; install it, fix the name, or give its full path"
    )


def test_unreachable_servers_exit_4(tmp_path: Path) -> None:
    done = run_reach("catalog", "--url", "http://127.0.0.1:1")
    assert done.returncode == 4
    assert done.stderr.startswith("reach catalog: error: cannot reach a reach server at http://127.0.0.1:1")
    missing = run_reach("catalog", "--config", str(tmp_path / "nowhere"))
    assert missing.returncode == 3
    assert "does not exist" in missing.stderr


def test_schema_prints_the_shipped_schema() -> None:
    done = run_reach("schema", "policy")
    assert done.returncode == 0
    assert done.stdout == schema_text("policy")


@pytest.mark.parametrize(
    ("command", "url", "name"),
    [
        (["python", "-m", "mcp_server_time"], None, "time"),
        (["python", "/srv/tools/slowmcp.py"], None, "slowmcp"),
        (["python3.11", "-u", "billing_server.py"], None, "billing_server"),
        (["npx", "-y", "@modelcontextprotocol/server-everything"], None, "everything"),
        (["/usr/local/bin/mcp-server-fetch"], None, "fetch"),
        ([], "http://127.0.0.1:9000/mcp", "127.0.0.1"),
    ],
)
def test_scan_names_the_server_not_its_interpreter(command: list[str], url: str | None, name: str) -> None:
    assert default_name(command, url) == name


def test_call_names_the_capability_of_an_agent_with_several(config_dir: Path) -> None:
    write(config_dir, "mcp:probe:0.yaml", PROBE)
    called = run_reach(
        "call", "mcp:probe:0", '{"text": "hi"}', "--capability", "say", "--config", str(config_dir), "--json"
    )
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["payload"] == "hi"
    unnamed = run_reach("call", "mcp:probe:0", '{"text": "hi"}', "--config", str(config_dir), "--json")
    assert unnamed.returncode == 1
    error = json.loads(unnamed.stdout)["error"]
    assert "declares several capabilities" in error
    # The CLI names its flag, not the Python API's keyword.
    assert "(--capability NAME)" in error
    assert "capability=" not in error
    shown = run_reach("call", "mcp:probe:0", '{"text": "hi"}', "--config", str(config_dir))
    assert "name the one to call (--capability NAME)" in shown.stdout
    # Who calls is not an option, and an unknown one lists only those the CLI and API take.
    who = run_reach("call", "mcp:probe:0", "--option", "principal=admin", "--config", str(config_dir))
    assert who.returncode == 2
    assert "authenticates" in who.stderr
    assert "as arguments" not in who.stderr
    odd = run_reach("call", "mcp:probe:0", "--option", "colour=1", "--config", str(config_dir))
    assert odd.returncode == 2
    assert "unknown option(s) ['colour']" in odd.stderr
    assert "caller_token" not in odd.stderr
    misplaced = run_reach("call", "say", "--capability", "say", "--config", str(config_dir))
    assert misplaced.returncode == 2
    assert "--capability goes with an agent id" in misplaced.stderr


def test_scan_of_a_script_takes_the_servers_own_name() -> None:
    # The file is server.py; the server calls itself "probe".
    done = run_reach("scan", "--json", "--", "python", PROBE_SERVER)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["name"] == "probe"


def test_log_json_lines_carry_no_colour_codes() -> None:
    # uvicorn logs "Uvicorn running on ..." with a coloured twin in `color_message`.
    record = logging.makeLogRecord(
        {
            "name": "uvicorn.error",
            "levelno": logging.INFO,
            "levelname": "INFO",
            "msg": "Started \x1b[1mserver\x1b[0m process [%d]",
            "args": (42,),
            "color_message": "Started server process [\x1b[36m%d\x1b[0m]",
            "agent_id": "\x1b[32mutil:echo:01\x1b[0m",
        }
    )
    line = JsonFormatter().format(record)
    assert "\x1b" not in line
    assert "\\u001b" not in line
    out = json.loads(line)
    assert out["message"] == "Started server process [42]"
    assert out["agent_id"] == "util:echo:01"
    assert "color_message" not in out


def test_serve_help_shows_every_default(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one line per flag: no default split across lines
    code, out, _ = run_main(["serve", "--help"], capsys)
    assert code == 0
    flat = " ".join(out.split())
    for default in (
        "(default: 127.0.0.1)",
        "(default: 8000)",
        "(default: http)",
        "(default: agent-reach)",
        "(default: 0.5)",
        "(default: 30.0)",
        "(default: 3.0)",
        "(default: .)",
    ):
        assert default in flat


def test_a_result_nobody_served_says_not_served() -> None:
    result = {"status": "no_candidate", "task_id": "t-1", "served_by": "none", "attempts": 0, "error": "x"}
    head = render_result(result).splitlines()[0]
    assert head == "no_candidate: - -> no agent (not served, 0 attempt(s), 0.0 ms)"


def test_a_result_of_unknown_outcome_says_the_agent_may_have_received_it() -> None:
    base = {"status": "error", "task_id": "t-3", "delivered": True, "fault": "agent"}
    unknown = {
        **base,
        "error": f"node n2 stopped hosting agent util:echo:01 while the call waited; {UNKNOWN_OUTCOME}",
    }
    lines = render_result(unknown).splitlines()
    assert (
        "delivered: maybe, outcome unknown (the agent may have received the task and done the work)" in lines
    )
    assert not any(line.startswith("delivered: yes") for line in lines)
    plain = render_result({**base, "error": "the agent raised ValueError"}).splitlines()
    assert "delivered: yes, the agent received the task (it may have done the work)" in plain
    assert not any("delivered" in line for line in render_result({**base, "delivered": False}).splitlines())


async def test_a_call_missing_an_option_says_how_the_command_gives_it() -> None:
    # A real refusal: a checkpointed graph called without a thread.
    graph = StateGraph(MessagesState)
    graph.add_node("echo", lambda state: {"messages": []})
    graph.add_edge(START, "echo")
    async with Router() as router:
        router.register(
            LangChainAgent(graph.compile(checkpointer=InMemorySaver(), name="chat"), agent_id="t:chat:01")
        )
        result = await router.route("chat", {"messages": [{"role": "user", "content": "hi"}]})
    assert result.status == "invalid", result.error
    lines = render_result(result.model_dump(mode="json")).splitlines()
    assert """give it: --option 'configurable={"thread_id": "<thread id>"}'""" in lines
    # Quoted for the shell: it reads back as the option's one argument.
    assert shlex.split(lines[-1])[2:] == ["--option", 'configurable={"thread_id": "<thread id>"}']


def test_an_agent_asking_for_input_shows_what_it_asks_and_how_to_answer() -> None:
    result = {"status": "input_required", "task_id": "t-2", "payload": "which day?", "error": "needs input"}
    lines = render_result(result).splitlines()
    assert "asks: which day?" in lines
    hint = """--option 'configurable={"thread_id": "<thread id>"}' --option 'resume=<answer>'"""
    assert f"answer on the same thread: {hint}" in lines
    assert not any(line.startswith("error") for line in lines)


async def test_several_questions_are_shown_by_id_and_the_answer_hint_names_them_and_the_thread() -> None:
    # A real graph asking twice at once (two parallel steps), answered by interrupt id.
    class Asked(TypedDict, total=False):
        day: str
        room: str

    graph = StateGraph(Asked)
    graph.add_node("day", lambda state: {"day": interrupt("which day?")})
    graph.add_node("room", lambda state: {"room": interrupt("which room?")})
    graph.add_edge(START, "day")
    graph.add_edge(START, "room")
    async with Router() as router:
        router.register(LangChainAgent(graph.compile(checkpointer=InMemorySaver()), agent_id="t:book:01"))
        result = await router.send("t:book:01", {}, configurable={"thread_id": "t-9"})
    assert result.status == "input_required", result.error
    entries: Any = result.extra["interrupts"]
    ids = {entry["value"]: entry["id"] for entry in entries}
    lines = render_result(result.model_dump(mode="json"), thread="t-9").splitlines()
    assert f'  {ids["which day?"]}: "which day?"' in lines
    assert f'  {ids["which room?"]}: "which room?"' in lines
    hint = next(line for line in lines if line.startswith("answer on the same thread: "))
    answer = {ids["which day?"]: "<answer>", ids["which room?"]: "<answer>"}
    assert shlex.split(hint)[5:] == [
        "--option",
        'configurable={"thread_id": "t-9"}',
        "--option",
        "resume=" + json.dumps(answer),
    ]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


async def test_progress_shows_on_a_terminal_only() -> None:
    terminal, piped = _Terminal(), io.StringIO()
    for stream in (terminal, piped):
        async with progress("reach serve: starting 3 agent(s) from cfg", stream):
            await asyncio.sleep(0)  # the status is drawn as soon as the block waits
    assert piped.getvalue() == ""
    assert re.fullmatch(
        r"\x1b\[Kreach serve: starting 3 agent\(s\) from cfg \(\d+\.\d s\)\r\x1b\[K", terminal.getvalue()
    )


def test_output_closed_early_is_no_traceback() -> None:
    # `reach schema agent | head -1`: the reader is gone before reach writes (it is still starting).
    process = subprocess.Popen(
        [PYTHON, "-m", "reach_adapters.cli", "schema", "agent"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    process.stdout.close()
    _, err = process.communicate(timeout=30)
    assert (process.returncode, err) == (141, "")


async def test_scan_keeps_a_secret_env_out_of_the_file_and_serve_passes_it_from_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = run_reach(
        "scan", "--name", "probe", "--env", "PROBE_API_TOKEN=s3cret-token", "--env", "PROBE_MODE=fast",
        "--", "python", PROBE_SERVER,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "s3cret" not in done.stdout
    data = yaml.safe_load(done.stdout)
    assert (data["env"], data["pass_env"]) == ({"PROBE_MODE": "fast"}, ["PROBE_API_TOKEN"])
    assert "PROBE_API_TOKEN is passed from reach's own environment" in done.stderr
    (tmp_path / "mcp:probe:0.yaml").write_text(done.stdout)
    with pytest.raises(ConfigError, match="PROBE_API_TOKEN not set; export it for server 'probe'"):
        await Gateway.start(tmp_path)
    monkeypatch.setenv("PROBE_API_TOKEN", "s3cret-token")
    async with await Gateway.start(tmp_path) as gateway:
        for name, value in (("PROBE_API_TOKEN", "s3cret-token"), ("PROBE_MODE", "fast")):
            said = await gateway.router.route("environment", {"name": name})
            assert said.payload == value, said.error


def test_scan_of_an_mcp_url_writes_no_credentials(serve: Serve, config_dir: Path) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    server = serve(config_dir)
    done = run_reach(
        "scan", "--url", server.mcp_url, "--name", "remote",
        "--header", "Authorization=Bearer s3cret-token", "--header", "X-Api-Key=s3cret-key",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "s3cret" not in done.stdout
    data = yaml.safe_load(done.stdout)
    assert (data["bearer_token_env"], data["headers"]) == ("REMOTE_TOKEN", {"X-Api-Key": "***"})
