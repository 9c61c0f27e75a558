"""`Authenticator`: static tokens by digest, JWTs by key file, HMAC secret or JWKS; and the
``security.yaml`` the config loader accepts or refuses with file, line and field."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from reach_adapters.config import ConfigError, ConfigFileError, load_config
from reach_adapters.security.credentials import Authenticator
from reach_adapters.security.errors import SecurityConfigError
from reach_adapters.security.spec import SecuritySpec
from tests.security.keys import AUDIENCE, ISSUER, ec_key, jwks, jwks_server, public_pem, rsa_key, sign

TOKEN = "alice-token-0123456789"
SECRET = "s" * 40


def spec(**data: Any) -> SecuritySpec:
    return SecuritySpec.model_validate(data)


def jwt_spec(**key: Any) -> dict[str, Any]:
    return {"issuer": ISSUER, "audience": AUDIENCE, **key}


async def test_a_static_token_from_the_environment_names_its_principal(tmp_path: Path) -> None:
    auth = Authenticator.from_spec(
        spec(principals={"alice": {"token_env": "ALICE_TOKEN"}}), tmp_path, {"ALICE_TOKEN": TOKEN}
    )
    access = await auth.verify_token(TOKEN)
    assert access is not None
    assert (access.client_id, access.subject, access.scopes) == ("alice", "alice", [])
    assert await auth.verify_token(TOKEN + "x") is None
    assert await auth.verify_token("") is None


async def test_a_static_token_by_its_digest(tmp_path: Path) -> None:
    digest = hashlib.sha256(TOKEN.encode()).hexdigest().upper()
    auth = Authenticator.from_spec(spec(principals={"ops": {"token_sha256": digest}}), tmp_path, {})
    access = await auth.verify_token(TOKEN)
    assert access is not None
    assert access.client_id == "ops"


@pytest.mark.parametrize("value", [None, ""])
def test_an_unset_token_variable_names_principal_and_variable(tmp_path: Path, value: str | None) -> None:
    environ = {} if value is None else {"ALICE_TOKEN": value}
    with pytest.raises(SecurityConfigError) as caught:
        Authenticator.from_spec(spec(principals={"alice": {"token_env": "ALICE_TOKEN"}}), tmp_path, environ)
    assert caught.value.loc == ("principals", "alice", "token_env")
    assert "environment variable ALICE_TOKEN is not set" in str(caught.value)
    assert "principals.alice.token_env" in str(caught.value)


def test_two_principals_may_not_share_a_token(tmp_path: Path) -> None:
    principals = {"alice": {"token_env": "A"}, "bob": {"token_env": "B"}}
    with pytest.raises(SecurityConfigError, match="principal 'bob' has the same token as 'alice'"):
        Authenticator.from_spec(spec(principals=principals), tmp_path, {"A": TOKEN, "B": TOKEN})


async def test_a_jwt_checked_with_a_public_key_file(tmp_path: Path) -> None:
    key = ec_key()
    (tmp_path / "issuer.pem").write_bytes(public_pem(key))
    settings = spec(jwt=jwt_spec(public_key_file="issuer.pem", algorithms=["ES256"], leeway_s=5))
    auth = Authenticator.from_spec(settings, tmp_path, {})
    token = sign(key, algorithm="ES256", sub="carol", scope="read write")
    access = await auth.verify_token(token)
    assert access is not None
    assert (access.client_id, access.subject, access.scopes) == ("carol", "carol", ["read", "write"])
    assert access.claims is not None
    assert access.claims["iss"] == ISSUER
    assert access.expires_at is not None
    # Within the leeway an expired token still passes; past it, not.
    assert await auth.verify_token(sign(key, algorithm="ES256", ttl_s=-3)) is not None
    refused = [
        sign(key, algorithm="ES256", ttl_s=-30),
        sign(key, algorithm="ES256", aud="https://elsewhere.test/mcp"),
        sign(key, algorithm="ES256", iss="https://evil.test"),
        sign(key, algorithm="ES256", exp=None),
        sign(key, algorithm="ES256", sub=None),
        sign(ec_key(), algorithm="ES256"),
    ]
    for token in refused:
        assert await auth.verify_token(token) is None


async def test_a_jwt_checked_with_an_hmac_secret(tmp_path: Path) -> None:
    settings = spec(jwt=jwt_spec(secret_env="JWT_SECRET", algorithms=["HS256"], principal_claim="client_id"))
    auth = Authenticator.from_spec(settings, tmp_path, {"JWT_SECRET": SECRET})
    access = await auth.verify_token(sign(SECRET, algorithm="HS256", client_id="svc", kid=None))
    assert access is not None
    assert access.client_id == "svc"
    assert await auth.verify_token(sign("t" * 40, algorithm="HS256", client_id="svc")) is None
    with pytest.raises(SecurityConfigError, match="is 5 bytes; an HMAC secret needs at least 32"):
        Authenticator.from_spec(settings, tmp_path, {"JWT_SECRET": "short"})


def test_a_key_file_must_hold_a_public_key_that_fits_the_algorithms(tmp_path: Path) -> None:
    missing = spec(jwt=jwt_spec(public_key_file="nowhere.pem"))
    with pytest.raises(SecurityConfigError, match=r"nowhere\.pem does not exist") as caught:
        Authenticator.from_spec(missing, tmp_path, {})
    assert caught.value.loc == ("jwt", "public_key_file")
    (tmp_path / "junk.pem").write_text("not a key")
    with pytest.raises(SecurityConfigError, match="holds no PEM public key"):
        Authenticator.from_spec(spec(jwt=jwt_spec(public_key_file="junk.pem")), tmp_path, {})
    (tmp_path / "ec.pem").write_bytes(public_pem(ec_key()))
    with pytest.raises(SecurityConfigError, match=r"algorithms \['RS256'\] cannot use"):
        Authenticator.from_spec(spec(jwt=jwt_spec(public_key_file="ec.pem")), tmp_path, {})


async def test_a_jwt_checked_with_keys_from_a_jwks_endpoint(tmp_path: Path) -> None:
    key = rsa_key()
    with jwks_server(jwks(key)) as url:
        auth = Authenticator.from_spec(spec(jwt=jwt_spec(jwks_url=url)), tmp_path, {})
        access = await auth.verify_token(sign(key))
        assert access is not None
        assert access.client_id == "alice"
        assert await auth.verify_token(sign(key, kid="unknown")) is None
        assert await auth.verify_token(sign(rsa_key())) is None


async def test_an_unreachable_jwks_endpoint_refuses_the_token(tmp_path: Path) -> None:
    with jwks_server({"keys": []}) as url:
        gone = url  # the port is closed once the server stops
    auth = Authenticator.from_spec(spec(jwt=jwt_spec(jwks_url=gone)), tmp_path, {})
    assert await auth.verify_token(sign(rsa_key())) is None


# -- security.yaml in a config directory ----------------------------------------------------


def test_security_yaml_is_loaded_with_the_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALICE_TOKEN", TOKEN)
    (tmp_path / "security.yaml").write_text(
        "principals:\n  alice: {token_env: ALICE_TOKEN, allow: ['*']}\nopen: [metrics]\n"
    )
    config = load_config(tmp_path)
    assert config.security is not None
    assert config.security.open == ["metrics"]
    assert config.security.principals["alice"].allow.capabilities == ["*"]


@pytest.mark.parametrize(
    ("text", "line", "field", "problem"),
    [
        (
            "principals:\n  alice:\n    token_env: ALICE_TOKEN\n    tokn: x\n",
            4,
            "principals.alice.tokn",
            "unknown key",
        ),
        (
            "principals:\n  alice:\n    token_env: NOT_SET_ANYWHERE\n",
            3,
            "principals.alice.token_env",
            "NOT_SET",
        ),
        (
            "jwt:\n  issuer: https://i.test\n  audience: a\n  public_key_file: k.pem\n",
            4,
            "jwt.public_key_file",
            "exist",
        ),
        ("jwt:\n  issuer: i.test\n  audience: a\n  secret_env: S\n", 2, "jwt.issuer", "not an http(s) URL"),
        ("open: [everything]\n", 1, "open.0", "Input should be"),
    ],
)
def test_an_invalid_security_yaml_names_file_line_and_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, line: int, field: str, problem: str
) -> None:
    monkeypatch.setenv("ALICE_TOKEN", TOKEN)
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    (tmp_path / "security.yaml").write_text(text)
    with pytest.raises(ConfigFileError) as caught:
        load_config(tmp_path)
    error = caught.value
    assert (error.file.name, error.line, error.field) == ("security.yaml", line, field)
    assert problem in error.problem


def test_two_security_files_are_refused(tmp_path: Path) -> None:
    (tmp_path / "security.yaml").write_text("open: [metrics]\n")
    (tmp_path / "security.json").write_text('{"open": ["metrics"]}')
    with pytest.raises(
        ConfigError, match=r"security\.json and security\.yaml both hold the security settings"
    ):
        load_config(tmp_path)
