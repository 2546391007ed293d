"""The knowledge: signature files, their schema, loading, linting, authoring and measuring."""
