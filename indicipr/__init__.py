__version__ = "0.1.0"

# The public face: `from indicipr import load_benchmark, score_predictions`. The modules live on the floors
# (indicipr.data, .llm, .build, .scoring, .systems, .analysis, .run; DESIGN.md); the package top hands their public entry
# points out on first use (PEP 562), so `import indicipr` alone loads no floor.
__all__ = ["__version__", "load_benchmark", "score_predictions"]


def __getattr__(name: str):
    if name == "load_benchmark":
        from indicipr.data.benchmark import load_benchmark  # on first use: `import indicipr` loads no floor

        return load_benchmark
    if name == "score_predictions":
        from indicipr.scoring.metrics import score_predictions  # on first use: `import indicipr` loads no floor

        return score_predictions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
