"""Kafka client plumbing of the connector (Spark's ``KafkaOffsetReader*`` and ``consumer/``).

offset_reader.py: the driver's offset lookups (and the pooled reader of a worker); config.py:
confluent-kafka configs; consumer_pool.py: the executors' consumers; pool.py: the one pool
shape (borrowing, eviction, close at exit, fork safety) of consumers, offset readers and the
topic sink's producers, whose evictor thread is evictor.py; bootstrap.py: which cluster a query
talks to; fetch_client.py: the Arrow read path's own wire client; reachability.py and
librdkafka_log.py: asking whether a cluster answers, and librdkafka's log.
"""
