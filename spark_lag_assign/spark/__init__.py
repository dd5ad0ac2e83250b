"""The Spark side of the planner: the local session, the DataFrame transforms and the
planning job. The only package of the planner that imports pyspark.
"""
