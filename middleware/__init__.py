"""The intermediate format of Agent Reach: messages, results and the converter protocol."""

from middleware.converter import Converter
from middleware.ids import new_task_id, new_trace_id
from middleware.jsonsafe import NotJsonSafeError, ensure_json, is_json
from middleware.models import (
    ConsensusHint,
    ConsensusVote,
    DeliveryPath,
    Fault,
    MergePolicy,
    MetaInfo,
    ReachMessage,
    ReachMode,
    ReachResult,
    ResultStatus,
    RoutingHint,
    Timings,
)

__all__ = [
    "ConsensusHint",
    "ConsensusVote",
    "Converter",
    "DeliveryPath",
    "Fault",
    "MergePolicy",
    "MetaInfo",
    "NotJsonSafeError",
    "ReachMessage",
    "ReachMode",
    "ReachResult",
    "ResultStatus",
    "RoutingHint",
    "Timings",
    "ensure_json",
    "is_json",
    "new_task_id",
    "new_trace_id",
]
