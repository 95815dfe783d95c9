"""Error feedback: keep what compression dropped and add it to the next gradient.

Seide et al. 2014 ("1-bit SGD", Interspeech) introduced it; Karimireddy et al. 2019 ("Error
Feedback Fixes SignSGD", ICML, Alg. 2) prove that ``p_t = g_t + e_t``, send ``C(p_t)``,
``e_{t+1} = p_t - C(p_t)`` converges like uncompressed SGD for any contractive ``C``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass(slots=True)
class ErrorFeedback:
    """One residual per DDP bucket, keyed by bucket index.

    DDP rebuilds its buckets once, after the first iteration (reducer.cpp,
    ``rebuild_buckets``), so a residual whose size no longer matches its bucket starts over.
    """

    enabled: bool = True
    residuals: dict[int, torch.Tensor] = field(default_factory=dict)

    def accumulate(self, index: int, grad: torch.Tensor) -> torch.Tensor:
        """``grad + e`` in place in ``grad``."""
        residual = self.residuals.get(index)
        if self.enabled and residual is not None and residual.shape == grad.shape:
            grad.add_(residual)
        return grad

    def keep(self, index: int, residual: torch.Tensor) -> None:
        """Store ``p - C(p)``, computed by the caller, as the next residual of ``index``."""
        if self.enabled:
            self.residuals[index] = residual
