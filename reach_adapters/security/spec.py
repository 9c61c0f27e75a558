"""``security.yaml`` as typed models: who may call (principals, tokens, JWTs), what each may reach,
how often, and which surfaces are open to anyone. See docs/security.md."""

from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "SURFACES",
    "Allow",
    "CallbackSpec",
    "HopTokenSpec",
    "JWTSpec",
    "PrincipalSpec",
    "SecuritySpec",
    "Surface",
]

Surface = Literal["api", "health", "mcp", "metrics"]
SURFACES: tuple[Surface, ...] = ("api", "health", "mcp", "metrics")

# PyJWT's names; "none" and anything else are refused rather than silently never matching.
_ASYMMETRIC = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
_SYMMETRIC = frozenset({"HS256", "HS384", "HS512"})
_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _http_url(value: str | None) -> str | None:
    # The protected-resource metadata names the issuer and this resource as URLs (RFC 9728).
    if value is not None and urlsplit(value).scheme not in ("http", "https"):
        msg = f"{value!r} is not an http(s) URL"
        raise ValueError(msg)
    return value


def _env_name(value: str | None) -> str | None:
    if value is not None and not _ENV_NAME.match(value):
        msg = f"{value!r} is not an environment variable name (letters, digits and _)"
        raise ValueError(msg)
    return value


class Allow(_Spec):
    """What a principal may reach. Each list given narrows: a call is allowed when its capability
    matches ``capabilities``, its agent ``agents`` and that agent's namespace ``namespaces``
    (shell-style globs such as ``pub_*``). A list left out does not narrow; all three left out
    allow nothing."""

    capabilities: list[str] | None = Field(None, description="Capability name globs.")
    namespaces: list[str] | None = Field(None, description="Agent namespace globs.")
    agents: list[str] | None = Field(None, description="Agent id globs.")

    @property
    def empty(self) -> bool:
        return self.capabilities is None and self.namespaces is None and self.agents is None


class PrincipalSpec(_Spec):
    """One caller: a person, a program, or an agent reaching onward."""

    token_env: str | None = Field(
        None, description="Environment variable holding this principal's bearer token."
    )
    token_sha256: str | None = Field(
        None, description="SHA-256 (hex) of this principal's bearer token: the token itself never."
    )
    allow: Allow = Field(
        default_factory=Allow,
        description="What it may reach; a list is shorthand for capability globs. Nothing when left out.",
    )
    role: Literal["user", "admin", "gateway"] = Field(
        "user",
        description="'admin' sees every principal's tasks and decision records; 'gateway' is another "
        "reach serve, whose calls may carry hop tokens for its agents.",
    )
    quota_per_minute: int | None = Field(None, ge=1, description="Most calls in any 60 seconds.")
    burst: int | None = Field(None, ge=1, description="Most calls in any one second.")
    agent_ids: list[str] = Field(
        default_factory=list,
        description="Agent id globs: agents that, reaching onward, call as this principal.",
    )
    max_broadcast_targets: int | None = Field(
        None, ge=1, description="Most agents one broadcast may reach; default: the file's own setting."
    )

    _env = field_validator("token_env")(_env_name)

    @field_validator("allow", mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"capabilities": value} if isinstance(value, list) else value

    @field_validator("token_sha256")
    @classmethod
    def _hex(cls, value: str | None) -> str | None:
        if value is not None and not _HEX64.match(value):
            msg = "must be 64 hex digits: the output of 'printf %s \"$TOKEN\" | sha256sum'"
            raise ValueError(msg)
        return None if value is None else value.lower()

    @model_validator(mode="after")
    def _one_token(self) -> PrincipalSpec:
        if self.token_env is not None and self.token_sha256 is not None:
            msg = "give one of 'token_env' or 'token_sha256', not both"
            raise ValueError(msg)
        return self


class JWTSpec(_Spec):
    """JWT bearer tokens from an OAuth 2.1 authorization server (the MCP authorization spec's
    resource-server profile); the token's ``sub`` names the principal."""

    issuer: str = Field(description="The 'iss' every token must carry.")
    audience: str | list[str] = Field(description="The 'aud' a token must carry (one of them).")
    jwks_url: str | None = Field(None, description="Where the issuer publishes its signing keys.")
    public_key_file: str | None = Field(None, description="PEM public key, relative to the config directory.")
    secret_env: str | None = Field(None, description="Environment variable holding an HMAC secret.")
    algorithms: list[str] = Field(default_factory=lambda: ["RS256"], min_length=1)
    principal_claim: str = Field("sub", description="The claim naming the principal.")
    leeway_s: float = Field(0.0, ge=0, le=300, description="Clock skew allowed on 'exp' and 'nbf'.")

    _env = field_validator("secret_env")(_env_name)
    _urls = field_validator("issuer", "jwks_url")(_http_url)

    @field_validator("algorithms")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        unknown = [name for name in value if name not in _ASYMMETRIC | _SYMMETRIC]
        if unknown:
            msg = f"unknown or unsafe algorithm(s) {unknown}; use e.g. RS256, ES256, EdDSA or HS256"
            raise ValueError(msg)
        return value

    @model_validator(mode="after")
    def _one_key(self) -> JWTSpec:
        keys = [name for name in ("jwks_url", "public_key_file", "secret_env") if getattr(self, name)]
        if len(keys) != 1:
            msg = f"give exactly one of 'jwks_url', 'public_key_file' or 'secret_env', got {keys or 'none'}"
            raise ValueError(msg)
        symmetric = self.secret_env is not None
        wrong = [name for name in self.algorithms if (name in _SYMMETRIC) != symmetric]
        if wrong:
            needs = "an HMAC algorithm (HS256)" if symmetric else "a public-key algorithm (RS256, ES256...)"
            msg = f"'{keys[0]}' needs {needs}; algorithms {wrong} do not fit it"
            raise ValueError(msg)
        return self


class HopTokenSpec(_Spec):
    """Signed short-lived tokens an agent's onward call carries to another gateway."""

    secret_env: str = Field(
        description="Environment variable holding the HMAC secret gateways that trust each other share."
    )
    ttl_s: float = Field(60.0, gt=0, le=3600, description="How long a token stays valid.")

    _env = field_validator("secret_env")(_env_name)


class CallbackSpec(_Spec):
    """How finished async tasks are POSTed to their ``callback_url``: signed with an HMAC secret
    (header ``Reach-Signature``, see docs/tasks.md), retried with exponential backoff."""

    secret_env: str = Field(
        "REACH_CALLBACK_SECRET",
        description="Environment variable holding the HMAC secret (32 bytes or more) receivers verify with.",
    )
    max_attempts: int = Field(5, ge=1, le=20, description="Deliveries tried before giving up.")
    backoff_s: float = Field(1.0, gt=0, le=60, description="Wait before the first retry; doubles each time.")
    timeout_s: float = Field(10.0, gt=0, le=120, description="How long one delivery may take.")

    _env = field_validator("secret_env")(_env_name)


class SecuritySpec(_Spec):
    """The whole ``security.yaml``. Its presence turns authentication on for every surface not
    listed in ``open``, and denies whatever no principal is allowed."""

    principals: dict[str, PrincipalSpec] = Field(default_factory=dict)
    jwt: JWTSpec | None = None
    open: list[Surface] = Field(
        default_factory=list,
        description="Surfaces served without credentials, e.g. ['metrics'] for a scraper; calls "
        "made there act as the principal 'anonymous', if one is declared.",
    )
    hop_tokens: HopTokenSpec | None = None
    callbacks: CallbackSpec = Field(default_factory=CallbackSpec)
    max_broadcast_targets: int = Field(16, ge=1, description="Most agents one broadcast may reach.")
    resource_url: str | None = Field(
        None,
        description="This server's public MCP URL (https://host/mcp), named in the OAuth protected-"
        "resource metadata; default: the address it listens on.",
    )

    _url = field_validator("resource_url")(_http_url)

    @field_validator("principals")
    @classmethod
    def _names(cls, value: dict[str, PrincipalSpec]) -> dict[str, PrincipalSpec]:
        for name in value:
            if not name or len(name) > 256 or not name.isprintable():
                msg = f"principal name {name!r} must be 1 to 256 printable characters"
                raise ValueError(msg)
        return value
