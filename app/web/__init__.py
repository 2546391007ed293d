"""The HTTP layer: parse and bound input, call the core in a worker thread, store, render."""
