"""The router core. Imports no adapter: adapters import this."""
