"""The TVM bridge: the seed's Lab 02 on Relax and MetaSchedule (see README.md)."""
