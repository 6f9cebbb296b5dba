"""toolscope_agent: the agent side of toolscope. No Django, one HTTP client dependency."""

__version__ = "0.1.0"

__all__ = ["__version__"]
