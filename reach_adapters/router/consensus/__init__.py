"""Consensus (several agents answer one task, then a vote decides) and ratings from feedback."""

from reach_adapters.router.consensus.feedback import Feedback, RatingChange
from reach_adapters.router.consensus.voting import Normaliser, Verdict, Vote, VoteFunction

__all__ = ["Feedback", "Normaliser", "RatingChange", "Verdict", "Vote", "VoteFunction"]
