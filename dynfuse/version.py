"""dynfuse's version: the package's metadata (setup.cfg), and part of every disk-cache key."""

__version__ = "0.1.0"
