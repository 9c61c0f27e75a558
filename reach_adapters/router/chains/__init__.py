"""Chains of steps declared as one capability, and compensation (sagas) of what they did."""

from reach_adapters.router.chains.agent import ChainAgent
from reach_adapters.router.chains.model import Chain, Step

__all__ = ["Chain", "ChainAgent", "Step"]
