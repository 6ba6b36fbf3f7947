"""Running `skill-evals` inside the runner image, hardened (`run --container`, the validator sandbox).

launch.py builds and starts the container; apiproxy.py is the host-side Messages API proxy (the only holder of the
key), apirelay.py the in-container relay (the image's entry point is runner.cli.entrypoint), serverthread.py their
event-loop thread; sandbox.py runs the library's own validator in a throwaway container.
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["apirelay", "launch", "sandbox"]
