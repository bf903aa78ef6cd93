"""The errors kvlib's modules share: one line naming the field, file or input at fault.

Each is a ``ValueError``, so a caller (the CLI, a notebook) catches bad input with one clause; each is
also importable from the module that raises it (``kvlib.spec.ParamsError``, ``kvlib.config.ConfigError``,
``kvlib.vllm.VllmLogError`` ...). They live here so that a module can raise another's error without
importing it: ``kvlib.params`` raises ``ParamsError`` and ``kvlib.spec`` calls ``kvlib.params``, which
would otherwise import each other.
"""

from __future__ import annotations

__all__ = ["ConfigError", "SpecError", "ParamsError", "VllmLogError", "SGLangError", "InfoError"]


class ConfigError(ValueError):
    """A config cannot be read or interpreted; the message names the field or file."""


class SpecError(ValueError):
    """A spec field is out of range; the message names the field."""


class ParamsError(SpecError):
    """The parameter count needs a field the config did not give; the message names it."""


class VllmLogError(ValueError):
    """A vLLM log (or a figure taken from one) cannot be used; the message says why."""


class SGLangError(ValueError):
    """A figure SGLang's rules cannot give for these inputs; the message names the input at fault."""


class InfoError(ValueError):
    """The arguments of an info report do not go together; the message names the option."""
