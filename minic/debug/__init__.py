"""Debugging across paths: which ops each path takes (``coverage``), the first
node where two paths part (``bisect``), and where the time goes (``profile``).

Read in this order: ``paths.py`` (the paths, one entry each), ``expose.py``
(run a path with every intermediate value visible), ``stats.py`` (how two
tensors are compared), ``bisect.py``, ``coverage.py``, ``roofline.py``,
``profile.py``.  docs/10-debugging.md walks through them on real cases.
"""
