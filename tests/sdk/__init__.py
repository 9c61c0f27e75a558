"""The adapter SDK: the surface adapters are written against, and an adapter written on it."""
