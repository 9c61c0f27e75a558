"""The converter between MCP's native shapes and the intermediate format, both ways."""

from __future__ import annotations

import pytest
from mcp.types import CallToolResult, ContentBlock, ImageContent, TextContent

from middleware import Converter, MetaInfo, ReachMessage, ReachResult, ResultStatus
from reach_adapters import InvalidMessageError
from reach_adapters.mcp import META_PREFIX, MCPConverter, content_to_json

CONVERTER = MCPConverter("mcp:calc:0")


def _message(payload: object = None) -> ReachMessage:
    return ReachMessage.model_validate({"raw_payload": payload, "meta_info": {"capability": "add"}})


def test_it_is_a_converter() -> None:
    assert isinstance(CONVERTER, Converter)


def test_arguments_become_the_payload() -> None:
    meta = MetaInfo(capability="add")
    message = CONVERTER.to_middleware({"a": 1, "b": [2, 3]}, meta)
    assert message.raw_payload == {"a": 1, "b": [2, 3]}
    assert message.meta_info is meta
    assert CONVERTER.to_middleware(None).raw_payload == {}
    assert CONVERTER.from_middleware(message) == {"a": 1, "b": [2, 3]}
    assert CONVERTER.from_middleware(_message(None)) == {}


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(InvalidMessageError, match="must be a JSON object"):
        CONVERTER.to_middleware([1, 2])  # type: ignore[arg-type]
    with pytest.raises(InvalidMessageError, match="not JSON data"):
        CONVERTER.to_middleware({"when": object()})
    with pytest.raises(InvalidMessageError, match="JSON object of arguments"):
        CONVERTER.from_middleware(_message("text"))


def test_structured_content_is_the_payload_and_blocks_are_kept() -> None:
    native = CallToolResult(content=[TextContent(type="text", text="3")], structured_content={"result": 3})
    result = CONVERTER.result_to_middleware(native, _message({}))
    assert result.status is ResultStatus.OK
    assert result.payload == {"result": 3}
    assert result.agent_id == "mcp:calc:0"
    assert result.extra == {"content": [{"type": "text", "text": "3"}]}


def test_without_structured_content_the_blocks_are_the_payload() -> None:
    blocks: list[ContentBlock] = [
        TextContent(type="text", text="hi"),
        ImageContent(type="image", data="AAAA", mime_type="image/png"),
    ]
    result = CONVERTER.result_to_middleware(CallToolResult(content=blocks), _message({}))
    assert result.payload == [
        {"type": "text", "text": "hi"},
        {"type": "image", "data": "AAAA", "mimeType": "image/png"},
    ]
    assert content_to_json(blocks) == result.payload


def test_tool_error_is_an_error_result() -> None:
    native = CallToolResult(content=[TextContent(type="text", text="division by zero")], is_error=True)
    result = CONVERTER.result_to_middleware(native, _message({}))
    assert result.status is ResultStatus.ERROR
    assert result.error_type == "MCPToolError"
    assert result.error == "division by zero"
    assert result.retryable is False
    silent = CONVERTER.result_to_middleware(CallToolResult(content=[], is_error=True), _message({}))
    assert silent.error == "the tool reported an error without a message"


def _ok(payload: object, **extra: object) -> ReachResult:
    return ReachResult.model_validate({"status": "ok", "task_id": "t", "payload": payload, "extra": extra})


def test_an_object_payload_is_structured_content_with_a_text_twin() -> None:
    native = MCPConverter().result_from_middleware(_ok({"total": 3}))
    assert native.is_error is False
    assert native.structured_content == {"total": 3}
    assert native.content == [TextContent(type="text", text='{"total": 3}')]


def test_other_payloads_are_text_and_boxed_structured_content() -> None:
    plain = MCPConverter().result_from_middleware(_ok("plain"))
    assert plain.content == [TextContent(type="text", text="plain")]
    assert plain.structured_content == {"result": "plain"}
    listed = MCPConverter().result_from_middleware(_ok([1, "二"]))
    assert listed.structured_content == {"result": [1, "二"]}
    assert listed.content == [TextContent(type="text", text='[1, "二"]')]
    # Marked, for a reach router calling this one to take the box off again.
    assert listed.meta is not None
    assert listed.meta[META_PREFIX + "boxed"] is True


def test_upstream_blocks_pass_through_unchanged() -> None:
    blocks = [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]
    native = MCPConverter().result_from_middleware(_ok(blocks, content=blocks))
    assert native.content == [ImageContent(type="image", data="AAAA", mime_type="image/png")]
    assert native.structured_content is None


def test_a_failed_reach_is_a_tool_error_saying_why() -> None:
    failed = ReachResult.model_validate(
        {"status": "no_candidate", "task_id": "t", "error_type": "NoCandidateError", "error": "nobody"}
    )
    native = MCPConverter().result_from_middleware(failed)
    assert native.is_error is True
    assert native.content == [TextContent(type="text", text="no_candidate: NoCandidateError: nobody")]
