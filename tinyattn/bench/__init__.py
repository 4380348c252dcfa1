"""Benchmarks that ship with the package: `tinyattn bench step|overhead|softmax|attention`."""
