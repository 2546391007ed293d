"""Remote mode: the CLI as a client of a Tracelore service."""
