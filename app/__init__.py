"""Tracelore: diagnose failed ML training runs from their logs."""

__version__ = "0.1.0"
