"""Persistence: engine set-up, tables and the queries on them. Functions take a Session and never commit."""
