"""Settings shared by the fuzz and property tests (Hypothesis)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings


def fuzz_settings(examples: int) -> settings:
    """``examples`` per test in the suite (bounded for CI's time), times FASTONNX_FUZZ_SCALE for
    a longer hunt. On CI (CI=true) Hypothesis derandomizes, so a CI run is reproducible."""
    scale = float(os.environ.get("FASTONNX_FUZZ_SCALE", "1"))
    return settings(
        max_examples=max(1, int(examples * scale)),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
