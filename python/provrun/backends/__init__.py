"""Backends: agent frameworks provrun records. :mod:`provrun.backends.pydantic_ai` needs
``pip install 'provrun[pydantic-ai]'``."""
