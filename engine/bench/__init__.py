"""Benchmarks: dataset loaders, the runner, metrics and scoring schemes.

DATASETS names every benchmark the runner knows (the CLI's and the pane's choices). A new one adds
its name here, its loader in datasets.py, its container builder in runner.CONTAINERS and, when the
benchmark has its own scoring code, a scheme in scoring.SCHEMES (else memlens's metrics score it).
"""

DATASETS = ("locomo", "longmemeval", "convomem", "updates")
