"""The topic sink's machinery (Spark's ``KafkaWriter`` / ``KafkaWriteTask`` / ``producer/``).

options.py: the sink's options and input schema, checked when a write starts; writers.py: the
writers Spark creates on the driver (and the marker topic they check); task.py: what a task does,
the producer pool and the exactly-once transactional write. The writer factories of
``df.writeStream.format("pylog")`` / ``df.write.format("pylog")`` are in kafka_spark.sink.
"""
