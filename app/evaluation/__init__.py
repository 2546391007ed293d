"""The corpus of real logs and `tracelore eval`, which measures the library on it."""
