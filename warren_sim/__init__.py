"""WARREN: a deterministic multi-agent simulator for testing agents, served over warren-agent/0."""

__version__ = "0.1.0"
