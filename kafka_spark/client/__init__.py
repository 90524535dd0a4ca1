"""Kafka client plumbing of the connector (Spark's ``KafkaOffsetReader*`` and ``consumer/``).

offset_reader.py: confluent-kafka configs, the driver's offset lookups and the executors'
consumer pool; bootstrap.py: which cluster a query talks to; fetch_client.py: the Arrow read
path's own wire client; reachability.py and librdkafka_log.py: asking whether a cluster
answers, and librdkafka's log.
"""
