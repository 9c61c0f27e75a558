"""The redaction rules, case by case: what is masked, and what must stay as it is."""

from __future__ import annotations

import pytest

from reach_adapters.security import (
    MASK,
    is_secret_name,
    redact_args,
    redact_env,
    redact_headers,
    redact_text,
    redact_url,
)

MASKED_TEXT = [
    ("https://user:pass@host/x", "https://***@host/x"),
    ("postgres://admin:pw@db:5432/app", "postgres://***@db:5432/app"),
    ("https://h/p?a=1&token=abc&b=2", "https://h/p?a=1&token=***&b=2"),
    ("https://h/p?access_token=a.b#frag", "https://h/p?access_token=***#frag"),
    ("https://h/p?X-Amz-Signature=ff00&sig=9", "https://h/p?X-Amz-Signature=***&sig=***"),
    ("Authorization: Bearer abc", "Authorization: Bearer ***"),
    ("proxy-authorization: Basic dXNlcjpwYXNz", "proxy-authorization: Basic ***"),
    ('curl -H "X-API-Key: abc123"', 'curl -H "X-API-Key: ***"'),
    ("Cookie: session=abc", "Cookie: ***"),
    ("{'Authorization': 'Bearer abc', 'Accept': 'x'}", "{'Authorization': '***', 'Accept': 'x'}"),
    ('{"api_key": "sk-1"}', '{"api_key": "***"}'),
    ("run srv.py --api-key sk-test-123 --verbose", "run srv.py --api-key *** --verbose"),
    ("(srv.py --api-key sk-test-123): cannot connect", "(srv.py --api-key ***): cannot connect"),
    ("use --token=abc", "use --token=***"),
    ("API_TOKEN=s3cr3t PATH=/bin", "API_TOKEN=*** PATH=/bin"),
    ("PGPASSWORD=x", "PGPASSWORD=***"),
    ("password: hunter2", "password: ***"),
    ("sent with bearer eyJhbGciOi.x.y", "sent with bearer ***"),
    # Clients split user-info from the host at the last "@": all of it is the secret.
    ("https://alice:p@ssw0rd-secret@example.com/mcp", "https://***@example.com/mcp"),
    (
        "DB_PASS=a GITHUB_PAT=b SECRETKEY=c privatekey=d accesskey=e",
        "DB_PASS=*** GITHUB_PAT=*** SECRETKEY=*** privatekey=*** accesskey=***",
    ),
    ("https://maps/api?key=AIza9&page=1", "https://maps/api?key=***&page=1"),
]

KEPT_TEXT = [
    "--keyword foo",
    "monkey=1",
    "tokenizer=gpt2",
    "hotkey=F1",
    "https://example.com/path?page=2&q=monkey",
    "connection refused at http://127.0.0.1:8080/mcp",
    "agent mcp:files:0 raised on task t1: ValueError: bad input",
    "-p 8080",
    "error: x",
    # Prose an agent's error may hold: words before a colon or "=" that only look like names.
    "KeyError: 'missing key: user_id'",
    "bad signature: expected sha256, got md5; token_count=5 exceeds max",
    "sort_key=name",
    "auth: denied",
    "bypass=1",
]


@pytest.mark.parametrize(("text", "expected"), MASKED_TEXT)
def test_secrets_in_text_are_masked(text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.mark.parametrize("text", KEPT_TEXT)
def test_text_without_secrets_is_unchanged(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize("text", [expected for _, expected in MASKED_TEXT])
def test_masking_twice_changes_nothing(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(
    "name",
    ["token", "X-API-Key", "apiKey", "APIKEY", "OPENAI_API_KEY", "Proxy-Authorization", "Cookie",
     "X-Auth-Token", "client_secret", "PGPASSWORD", "signature", "--api-key"],
)  # fmt: skip
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["monkey", "keyword", "--keyword", "tokenizer", "hotkey", "Accept", "page"])
def test_names_that_only_contain_a_secret_word_are_not_secret(name: str) -> None:
    assert not is_secret_name(name)


def test_command_arguments() -> None:
    args = ["srv.py", "--api-key", "sk-test-123", "--token=abc", "token=x", "-p", "8080"]
    args += ["--keyword", "k", "--verbose", "https://u:p@h/x", "--password", "--next"]
    assert redact_args(args) == [
        "srv.py",
        "--api-key",
        MASK,
        "--token=***",
        "token=***",
        "-p",
        "8080",
        "--keyword",
        "k",
        "--verbose",
        "https://***@h/x",
        "--password",
        "--next",
    ]


def test_env_keeps_names_and_hides_every_value() -> None:
    assert redact_env({"API_TOKEN": "s3cr3t", "HOME": "/home/x"}) == {"API_TOKEN": MASK, "HOME": MASK}
    assert redact_env(None) == {}


def test_headers() -> None:
    headers = {"Authorization": "Bearer abc", "X-Trace": "t1", "Referer": "https://u:p@h/"}
    assert redact_headers(headers) == {"Authorization": MASK, "X-Trace": "t1", "Referer": "https://***@h/"}


def test_url() -> None:
    assert (
        redact_url("https://user:pass@host:8443/mcp?key=k&page=1")
        == "https://***@host:8443/mcp?key=***&page=1"
    )
