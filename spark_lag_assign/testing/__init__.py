"""Test and demo tooling, never imported by the runtime: a real local Kafka broker, seeded
workload generators, and (for the cluster tests) the helpers that start real services.

Nothing under ``spark_lag_assign`` outside this package imports it (a layering test checks),
and ``make dist`` leaves it out of the zip that goes to a cluster.
"""
