"""Benchmarks: each case times the library and a plain-torch baseline in one process."""
