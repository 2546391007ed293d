"""Following growing logs for `tracelore watch`."""
