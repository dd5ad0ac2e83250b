"""The plan document: its model and the one check of it (``document``), building it from
assigned rows and its JSON (``build``), the shrink guard and the plain-text report.
"""
