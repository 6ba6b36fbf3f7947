"""Reports rendered from results.json only (never from memory of the run): see rollup.py first."""
