"""Evidence selection: the rules a client uses to pick the evidence, and the excerpt it sends."""
