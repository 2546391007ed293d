"""Work on the library itself: its lint, why a signature fired or not, unknown failures as
templates, and examples cut from real logs. Above the engine: each runs the diagnosis it checks."""
