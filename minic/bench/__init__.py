"""``minic bench``: minic against the production engines, each path in its own process.

* ``paths``   — what ``--vs`` names: a backend of ``minic.backends`` with its options
  and the option that takes the thread count;
* ``worker``  — the process that builds one path once and then times blocks of calls
  when asked (``python -m minic.bench.worker``);
* ``harness`` — starts the workers of one configuration (model, batch, threads), asks
  them in turn for blocks, round after round, and gathers medians, spreads and memory.
"""
