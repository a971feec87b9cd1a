"""Tuning: AutoTVM's recipe on minic's schedule templates.

Read in this order: ``measure.py`` (one kernel timed as it runs in the model),
``tuner.py`` (the search over a template's knobs), ``confirm.py`` (a point
replaces the default only when it wins beyond the noise).  The records they
write (``records.py``) are read once per compile and handed to the schedules.  Tuning
comes after codegen in the reading order: measuring compiles and runs code.
"""
