"""The package version, written once; `resolver.__version__` re-exports it."""

__version__ = "0.1.0"
