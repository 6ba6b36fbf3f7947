"""skill-evals: executes the evals of an Agent Skills library against the real host, honestly."""

__version__ = "0.1.0"
