"""The pure core: lag rules, who may read what, Kafka's number limits, plan quality,
the one invariant checker, rates and the time-to-drain model. No Spark, no Kafka client.
"""
