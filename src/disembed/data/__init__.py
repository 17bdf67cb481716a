"""Benchmark data: line-aligned text and TSV readers, one loader per evaluation set, and the
training pool."""
