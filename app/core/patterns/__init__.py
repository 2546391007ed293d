"""What patterns are to the raw scan: their rewrites for RE2 over bytes, the calls into RE2, and the
literals every match holds. Below the library and the engine: both use them, and they use neither."""
