"""Configuration directories: a routing policy file and one file per agent, YAML or JSON.

Needs the ``gateway`` extra: ``pip install 'agent-reach[gateway]'``. See docs/config.md.
"""

from reach_adapters.config.directory import (
    CONFIG_SUFFIXES,
    POLICY_STEM,
    SECURITY_STEM,
    config_files,
    file_stems,
    read_config_dir,
)
from reach_adapters.config.errors import ConfigError, ConfigFileError
from reach_adapters.config.loader import (
    INSECURE_CONFIG_FLAG,
    AgentSpec,
    GatewayConfig,
    check_permissions,
    load_config,
    parse_config,
    resolve_command,
    server_cwd,
)
from reach_adapters.config.models import (
    A2AAgentFile,
    AgentFile,
    AgentFileModel,
    CapabilityDecl,
    CapabilityPatch,
    ChainFile,
    FunctionAgentFile,
    LangChainAgentFile,
    MCPAgentFile,
    PolicyFile,
)
from reach_adapters.config.schema import SCHEMA_DIR, SCHEMA_FILES, SchemaKind, json_schema, schema_text

__all__ = [
    "CONFIG_SUFFIXES",
    "INSECURE_CONFIG_FLAG",
    "POLICY_STEM",
    "SCHEMA_DIR",
    "SCHEMA_FILES",
    "SECURITY_STEM",
    "A2AAgentFile",
    "AgentFile",
    "AgentFileModel",
    "AgentSpec",
    "CapabilityDecl",
    "CapabilityPatch",
    "ChainFile",
    "ConfigError",
    "ConfigFileError",
    "FunctionAgentFile",
    "GatewayConfig",
    "LangChainAgentFile",
    "MCPAgentFile",
    "PolicyFile",
    "SchemaKind",
    "check_permissions",
    "config_files",
    "file_stems",
    "json_schema",
    "load_config",
    "parse_config",
    "read_config_dir",
    "resolve_command",
    "schema_text",
    "server_cwd",
]
