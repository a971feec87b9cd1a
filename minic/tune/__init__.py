"""Tuning: AutoTVM's recipe on minic's schedule templates.

Read in this order: ``measure.py`` (one kernel timed as it runs in the model),
``tuner.py`` (the search over a template's knobs), ``confirm.py`` (a point
replaces the default only when it wins beyond the noise).  The records they
write are read by the schedules (``minic/schedule/records.py``).  Tuning
comes after codegen in the reading order: measuring compiles and runs code.
"""
