"""Periodic work shared by the service and the CLI: the learning loop and retention."""
