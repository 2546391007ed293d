"""Daily allowances: the tier table (pure) and the atomic counter on the store."""
