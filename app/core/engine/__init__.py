"""The diagnosis engine: read a log, match every pattern in one pass, rank the candidates."""
