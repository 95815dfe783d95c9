"""The public Python API: one function per question a user asks, each returning a typed result.

Conventions every entry point follows (the CLI, the HTML report and the web page are shells over
these functions, never the other way round):

- Plain keyword arguments named like the CLI's long flags (``gpus``, ``gpus_per_node``, ``tp``,
  ``mbs``, ``gbs``, ``seq``, ``recompute``, ``zero``, ``framework``, ...) with the CLI's
  defaults; the model comes first, as a catalog id, a ``config.json`` path or a spec object.
- Each returns a frozen dataclass implementing :class:`gpuscale.api.result.Result`:
  ``to_dict()`` is exactly the matching command's ``--json`` document, ``figures()`` the plots.
- Bad input raises :class:`gpuscale.errors.InputError` with ``field`` set to the argument at
  fault; the CLI prints the matching flag.
"""

from __future__ import annotations

from gpuscale.api.result import Result
from gpuscale.api.serving import ServingResult, infer
from gpuscale.errors import InputError

__all__ = ["InputError", "Result", "ServingResult", "infer"]
