"""Strided copies between any two views: planner, CPU kernels and GPU kernels."""
