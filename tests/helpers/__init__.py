"""Shared test helpers: layout strategies and oracles, copy cases, DLPack producers, kernels.

Test modules import them as ``from helpers.strategies import ...`` (``tests/`` is on
``sys.path`` under pytest's default import mode).
"""
