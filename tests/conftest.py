"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
SHARED = Path(__file__).resolve().parents[1].parent / "shared"


@pytest.fixture
def hf_configs() -> Path:
    return FIXTURES / "hf_configs"
