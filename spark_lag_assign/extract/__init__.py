"""The edges to the systems around the planner: a group's offsets from Kafka or a
snapshot, Kafka's ACLs, retries, URIs and whole-file local writes.
"""
