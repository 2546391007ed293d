"""Renderings of a diagnosis: terminal text, Markdown, CI formats, and the registry of them."""
