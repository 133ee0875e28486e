"""The framework's own benchmarks: `make bench` (python -m benchmarks) rewrites benchmarks/RESULTS.md."""
